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
    assert cf.lost(base, via) == {}, f"pass directly, not through the filter: see {tmp_path / 'through'}"


# Deny by default, as a team would start: the tools that only return content are listed; the tools
# that call back into the client (sampling, elicitation) are not; read-only methods are allowed,
# resource subscriptions are not.
READ_ONLY_TOOLS = ["test_simple_text", "test_image_content", "test_audio_content", "test_embedded_resource",
                   "test_multiple_content_types", "test_tool_with_logging", "test_tool_with_progress",
                   "test_error_handling"]
READ_METHODS = ["resources/list", "resources/templates/list", "resources/read", "prompts/list", "prompts/get",
                "completion/complete", "logging/setLevel"]
DENY_BY_DEFAULT = {"version": "1", "default": "deny", "tools": {t: {} for t in READ_ONLY_TOOLS},
                   "gateway": {**GATEWAY, "methods": {m: "allow" for m in READ_METHODS}}}


@pytest.fixture(scope="module")
def deny_by_default(module_stack, server):
    return through(module_stack, DENY_BY_DEFAULT, server)


def denied_tool(name: str) -> str:
    """The filter's refusal of an unlisted tool (docs/src/security/answers.md, row 11), as the suite's
    client reports it."""
    return f"MCP error -31001: tool '{name}' denied: not allowed by policy (default: deny)"


def denied(name: str) -> str:
    return f"tool '{name}' denied: not allowed by policy (default: deny)"


# {scenario: the error (or one of the errors) each of its checks that passes directly reports through
# the filter}. Scenarios
# of the draft suite call tools this server does not have (the suite's reference server's names:
# greet, slow_compute, ...): directly they get the server's "unknown tool" result, through the filter
# the refusal of an unlisted tool, which tools/list does not show either (docs/src/policy/tools-list.md).
REFUSED = {
    "stable": {
        "tools-call-sampling": denied_tool("test_sampling"),
        "tools-call-elicitation": denied_tool("test_elicitation"),
        "elicitation-sep1034-defaults": denied_tool("test_elicitation_sep1034_defaults"),
        "elicitation-sep1330-enums": denied_tool("test_elicitation_sep1330_enums"),
        # resources-unsubscribe subscribes first.
        "resources-subscribe": "MCP error -31001: method resources/subscribe denied: "
                               "method resources/subscribe is not allowed by policy (default: deny)",
        "resources-unsubscribe": "MCP error -31001: method resources/subscribe denied: "
                                 "method resources/subscribe is not allowed by policy (default: deny)",
    },
    "draft": {
        # Its diagnostic tools: the refusal's code, or missing from the filtered tools/list, or the
        # refusal instead of the server's -32021.
        "server-stateless": ("got error code -31001", "in tools/list",
                             "server did not return MissingRequiredClientCapabilityError"),
        "tasks-capability-negotiation": denied("slow_compute"),
        "tasks-dispatch-and-envelope": "denied: not allowed by policy (default: deny)",
        "tasks-lifecycle": denied("greet"),
        # Multi-round-trip tools ask the client for input, like sampling and elicitation.
        **{f"input-required-result-{scenario}": denied(f"test_input_required_result_{tool}") for scenario, tool in [
            ("basic-elicitation", "elicitation"), ("basic-sampling", "sampling"), ("basic-list-roots", "list_roots"),
            ("request-state", "request_state"), ("multiple-input-requests", "multiple_inputs"),
            ("capability-check", "capabilities"), ("result-type", "elicitation"),
            ("ignore-extra-params", "elicitation")]},
        # These report the suite's own words; the audit log below names the refused tools.
        "input-required-result-missing-input-response": "Server returned JSON-RPC error instead of re-requesting",
        "input-required-result-multi-round": "Expected InputRequiredResult with inputRequests and requestState",
        "input-required-result-tampered-state": "could not get initial InputRequiredResult",
    },
}

# The tools the filter refuses in each run (audit log: decision denied, rule default); the draft
# suite's `tasks` and diagnostic scenarios call the reference server's tools.
REFUSED_TOOLS = {
    "stable": {"test_sampling", "test_elicitation", "test_elicitation_sep1034_defaults",
               "test_elicitation_sep1330_enums"},
    "draft": {"confirm_delete", "failing_job", "greet", "multi_input", "protocol_error_job", "slow_compute",
              "test_logging_tool", "test_missing_capability", "test_streaming_elicitation", "test_tool_with_task",
              *(f"test_input_required_result_{t}" for t in ["capabilities", "elicitation", "list_roots", "multi_round",
                                                            "multiple_inputs", "request_state", "sampling",
                                                            "tampered_state"])},
}
REFUSED_METHODS = {"stable": {"resources/subscribe"}, "draft": set()}


def audit_denials(log: str) -> set[tuple[str, str, str]]:
    """(method, tool or "", rule) of every `denied` audit record in an Envoy log."""
    out = set()
    for line in log.splitlines():
        if "audit {" in line:
            record = json.loads(line[line.index("audit {") + len("audit "):])
            if record["decision"] == "denied":
                out.add((record["method"], record.get("tool", ""), record["rule"]))
    return out


@pytest.mark.parametrize("suite", [cf.STABLE, cf.DRAFT], ids=lambda s: s.name)
def test_deny_by_default_refuses_exactly_what_it_does_not_list(suite, direct, deny_by_default, tmp_path):
    base = direct[suite.name]
    log_from = len(deny_by_default.log_text())
    via = cf.run_suite(suite, deny_by_default.mcp_url, tmp_path / "through")
    print(f"\n{suite.name} suite, deny by default: {cf.tally(via)}")
    denials = audit_denials(deny_by_default.log_text()[log_from:])
    assert {(m, t) for m, t, rule in denials if rule == "default"} == \
        {("tools/call", t) for t in REFUSED_TOOLS[suite.name]} | {(m, "") for m in REFUSED_METHODS[suite.name]}
    assert {rule for _, _, rule in denials} <= {"default", "protocol_version", "unknown_method"}
    lost = cf.lost(base, via)
    expected = REFUSED[suite.name]
    assert {scenario for scenario, _ in lost} == set(expected), f"see {tmp_path / 'through'}"
    for scenario, error in expected.items():
        # A refused scenario may stop at its first call and report one check of its own instead.
        reported = [c.error for (s, k), c in via.items() if s == scenario and c.status in ("FAILURE", "WARNING")
                    and ((s, k) in lost or (s, k) not in base)]
        words = error if isinstance(error, tuple) else (error,)
        assert reported and all(any(w in e for w in words) for e in reported), (scenario, reported)
