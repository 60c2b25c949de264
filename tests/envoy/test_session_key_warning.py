"""Tier 2: the warning a policy without `gateway.session_key` gets in Envoy's log when it loads.

A policy that accepts a protocol version with `Mcp-Session-Id` (2025-03-26 to 2025-11-25, the
default) and sets no key leaves sessions unbound to their grant; the filter says so at load, at
warning level, with what to set (README "Sessions bound to their grant"). The shipped policy (key
from MCPF_SESSION_KEY, which the harness gives every Envoy) and a policy accepting only 2026-07-28
(no sessions) load without it. Both builds, each through its own logger.
"""

from __future__ import annotations

import time

import pytest

from testkit.envoy import POLICY_JSON
from testkit.stack import Stack

pytestmark = pytest.mark.both_builds

WARNING = ("gateway.session_key is not set: session ids (Mcp-Session-Id, Last-Event-ID, the HTTP+SSE session_id) "
           "are not bound to their grant, so a grant that learns another grant's session id can act in that session")
WHAT_TO_SET = "Set gateway.session_key.current_env to an environment variable holding a random key of at least 32 bytes"


# The wasm build configures the plugin on the main thread (twice in Envoy 1.40) and once per worker
# (--concurrency 2): at least three "policy loaded" lines. The native build compiles one filter
# configuration for every worker: one.
LOADS = {"wasm": 3, "native": 1}
# Where each build's log lines come from: the wasm VM, or Envoy's dynamic_modules logger.
LOGGER = {"wasm": "[warning][wasm]", "native": "[warning][dynamic_modules]"}


def loaded_log(stack: Stack, policy, name: str) -> str:
    """Envoy's log once the build has loaded `policy` as often as it does (`LOADS`)."""
    _, port, _ = stack.recorder(f"{name}-upstream")
    envoy = stack.start_envoy(stack.render(policy, port), name=name, concurrency=2)
    loads = LOADS[stack.build]
    deadline = time.monotonic() + 10
    while envoy.proc.log_text().count("policy loaded") < loads and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.3)  # a warning is logged right after its "policy loaded" line
    text = envoy.proc.log_text()
    assert text.count("policy loaded") >= loads, text[-2000:]
    return text


def test_a_policy_without_a_key_is_warned_about_at_load(stack):
    text = loaded_log(stack, {"version": "1", "default": "deny", "tools": {"list_vms": {}}}, "envoy-keyless")
    lines = [ln for ln in text.splitlines() if WARNING in ln]
    assert len(lines) == text.count("policy loaded"), text[-2000:]  # at every load
    for piece in (LOGGER[stack.build], WHAT_TO_SET, "host_env_keys", "the native build reads Envoy's own environment"):
        assert all(piece in ln for ln in lines), (piece, lines)


def test_the_shipped_policy_and_a_sessionless_one_load_without_it(stack):
    shipped = loaded_log(stack, POLICY_JSON.read_text(encoding="utf-8"), "envoy-shipped")
    only_2026 = loaded_log(stack, {"version": "1", "gateway": {"protocol_versions": ["2026-07-28"]}}, "envoy-2026")
    for text in (shipped, only_2026):
        assert "gateway.session_key is not set" not in text
        assert LOGGER[stack.build] not in text
