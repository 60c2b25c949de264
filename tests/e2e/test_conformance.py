"""Tier 3: the official MCP conformance suite (npm @modelcontextprotocol/conformance; stable 0.1.16 for
2025-06-18 and 2025-11-25, 0.2.0-alpha.12 for the 2026-07-28 draft; installed by `make
conformance-deps`) in server mode against tests/conformance/server.mjs, directly and through real
Envoy with this filter. The filter must not break what a conformant server does:

- allow-all: every check that passes directly passes through the filter (a check that fails directly
  may pass through it: the filter validates headers the server does not);
- deny by default: exactly the scenarios the policy refuses fail, and each with the filter's
  documented refusal (docs/src/security/answers.md).

Both tallies are printed (`pytest -s`); docs/src/conformance.md records them.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from testkit import conformance as cf
from testkit.processes import free_port, port_open

# gateway.protocol_versions: the versions the server supports (its server/discover list), so that the
# filter's own −32022 names only those (docs/src/policy/protocol-versions.md, "Unknown versions").
GATEWAY = {"session_key": {"current_env": "MCPF_SESSION_KEY"},
           "protocol_versions": ["2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"]}
ALLOW_ALL = {"version": "1", "default": "allow", "gateway": GATEWAY}


@pytest.fixture(scope="module")
def server(module_stack):
    if not cf.installed():
        pytest.fail("the conformance suite is not installed: make conformance-deps", pytrace=False)
    port = free_port()
    module_stack.spawn("conformance-server", cf.server_argv(port), lambda: port_open(port),
                       f"the conformance server listening on {port}")
    return port


def through(stack, policy: dict, server_port: int):
    return stack.start_envoy(cf.render_config(stack.wasm, json.dumps(policy), server_port),
                             name="envoy-conformance")


@pytest.fixture(scope="module")
def allow_all(module_stack, server):
    return through(module_stack, ALLOW_ALL, server)


@pytest.fixture(scope="module")
def direct(server, tmp_path_factory):
    """{suite name: results} of each suite directly against the server, run once."""
    out = tmp_path_factory.mktemp("direct")
    return {s.name: cf.run_suite(s, f"http://127.0.0.1:{server}/mcp", out / s.name) for s in (cf.STABLE, cf.DRAFT)}


@pytest.mark.parametrize("suite", [cf.STABLE, cf.DRAFT], ids=lambda s: s.name)
def test_what_passes_directly_passes_through_the_filter(suite, direct, allow_all, tmp_path):
    base = direct[suite.name]
    via = cf.run_suite(suite, allow_all.mcp_url, tmp_path / "through")
    print(f"\n{suite.name} suite, directly:           {cf.tally(base)}")
    print(f"{suite.name} suite, through the filter: {cf.tally(via)}")
    assert set(via) == set(base), "the suite ran other checks through the filter"
    broken = {k: via[k] for k, v in base.items() if v == "SUCCESS" and via[k] != "SUCCESS"}
    assert broken == {}, f"pass directly, not through the filter: see {tmp_path / 'through'}"
