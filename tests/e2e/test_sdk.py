"""Tier 3: the official MCP SDK client talks to the demo server through Envoy running the filter
under the shipped envoy/policy.json (default deny; list_vms allowed; vm_agent_exec rate limited).

Both response modes of the server are covered: SSE (the SDK default) and json_response=True.
The server is stateful, so every step after initialize also proves Mcp-Session-Id works through the
filter, which binds it to the grant (the shipped policy sets gateway.session_key).
"""

from __future__ import annotations

import base64
import json
import re

import anyio
import pytest
from mcp_types import TextContent
from mcp import MCPError

from testkit import demo
from testkit.clock import boundary_wait
from testkit.demo import DEMO_VMS
from testkit.envoy import POLICY_JSON, bound_session_id
from testkit.jsonrpc import headers_for, post
from testkit.mcp_session import open_session, result_json

# Run on the wasm build and on the native build (tests/conftest.py).
pytestmark = pytest.mark.both_builds

DEMO_TOOLS = set(demo.DEMO_TOOLS)
SEEDED_VMS = DEMO_VMS
STEP_TIMEOUT = 30


@pytest.fixture(params=[True, False], ids=["json_response", "sse"])
def through_envoy(request, stack):
    """(Envoy in front of the demo server, json_response) for both response modes of the server."""
    _, port = stack.demo_server(json_response=request.param)
    return stack.envoy(POLICY_JSON.read_text(encoding="utf-8"), port), request.param


def run(coro_fn, *args):
    """Run one async scenario with an overall deadline."""
    async def bounded():
        with anyio.fail_after(STEP_TIMEOUT):
            return await coro_fn(*args)
    return anyio.run(bounded)


def test_response_mode_and_session_id_pass_through(through_envoy):
    """A raw initialize: the server's media type and its Mcp-Session-Id come back through Envoy."""
    envoy, json_response = through_envoy
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}
    r = post(envoy.mcp_url, json.dumps(init).encode(), headers_for("e2e-raw"))
    assert r.status == 200
    assert r.headers["content-type"] == ("application/json" if json_response else "text/event-stream")
    # The shipped policy binds the session to the grant: the server's id wrapped with the grant's tag.
    m = re.fullmatch(r"m1\.([A-Za-z0-9_-]+)\.([A-Za-z0-9_-]{43})", r.headers["mcp-session-id"])
    assert m, r.headers
    server_id = base64.urlsafe_b64decode(m.group(1) + "=" * (-len(m.group(1)) % 4)).decode()
    assert re.fullmatch(r"[0-9a-f]{32}", server_id), server_id
    assert r.headers["mcp-session-id"] == bound_session_id("e2e-raw", server_id)


def test_session_through_filter(through_envoy):
    envoy, _ = through_envoy

    async def scenario():
        async with open_session(envoy.mcp_url, "e2e-grant") as s:
            tools = await s.list_tools()
            assert {t.name for t in tools.tools} == DEMO_TOOLS
            assert len(tools.tools) == len(DEMO_TOOLS)

            listed = await s.call_tool("list_vms", {})
            assert listed.is_error is False
            assert listed.content == [TextContent(type="text", text=json.dumps({"vms": SEEDED_VMS}, indent=2))]
            assert listed.structured_content == {"vms": SEEDED_VMS}

            # pve1/102 is stopped: were the call forwarded, the demo server would really delete it.
            with pytest.raises(MCPError) as denied:
                await s.call_tool("delete_vm", {"node": "pve1", "vmid": 102})
            assert type(denied.value).__name__ == "MCPError"
            assert denied.value.error.code == -31001
            assert "delete_vm" in denied.value.error.message
            assert denied.value.error.data["kind"] == "denied"
            assert denied.value.error.data["tool"] == "delete_vm"

            again = await s.call_tool("list_vms", {})
            assert result_json(again) == {"vms": SEEDED_VMS}

    run(scenario)


def test_rate_limited_call_raises_and_session_survives(through_envoy):
    envoy, _ = through_envoy

    async def scenario():
        async with open_session(envoy.mcp_url, "e2e-burst") as s:
            await anyio.sleep(boundary_wait())
            pids = []
            for _ in range(10):
                pids.append(result_json(await s.call_tool(
                    "vm_agent_exec", {"node": "pve1", "vmid": 100, "command": "uptime"}))["pid"])
            assert pids == list(range(4242, 4252))
            with pytest.raises(MCPError) as limited:
                await s.call_tool("vm_agent_exec", {"node": "pve1", "vmid": 100, "command": "uptime"})
            assert limited.value.error.code == -31002
            assert limited.value.error.data["kind"] == "rate_limited"
            assert result_json(await s.call_tool("list_vms", {})) == {"vms": SEEDED_VMS}

    run(scenario)


def _leaf_errors(exc: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups, or the exception itself."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaf_errors(inner)]
    return [exc]


def test_no_grant_cannot_initialize(through_envoy):
    """Without a bearer token the filter answers 401; the SDK surfaces its JSON-RPC error as MCPError."""
    envoy, _ = through_envoy

    async def scenario():
        with pytest.raises(BaseException) as refused:
            async with open_session(envoy.mcp_url, None, timeout=5):
                pass
        return refused.value

    leaves = _leaf_errors(run(scenario))
    assert [type(e).__name__ for e in leaves] == ["MCPError"], leaves
    assert leaves[0].error.code == -31003
    assert leaves[0].error.data["kind"] == "no_grant"
