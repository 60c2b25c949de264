"""Tier 3: the official MCP Python SDK 2.x client (`mcp.Client`) in its three connect modes —
`auto` (probe `server/discover`, fall back to `initialize`), `"2026-07-28"` and `legacy` — through
Envoy with the filter, to the demo server.

For each mode: the negotiated version equals the one negotiated directly with the server (`auto`
must not be downgraded by the filter); hidden tools are absent from the list; an allowed call runs;
a denied call's reason reaches the caller; require-approval is surfaced (−31007 with the approval
URL). In 2026-07-28, a `subscriptions/listen` stream is acknowledged through the filter.
"""

from __future__ import annotations

import anyio
import httpx2
import mcp
import pytest
from mcp.client.streamable_http import streamable_http_client
from mcp import MCPError

from testkit import approvals as ha
from testkit import demo
from testkit.envoy import load_policy, policy_text
from testkit.mcp_session import result_json

STEP_TIMEOUT = 30
DEMO_TOOLS = set(demo.DEMO_TOOLS)
HIDDEN = "vm_agent_exec_status"
MODES = {"auto": "2026-07-28", "2026-07-28": "2026-07-28", "legacy": "2025-11-25"}


def run(coro_fn, *args):
    async def bounded():
        with anyio.fail_after(STEP_TIMEOUT):
            return await coro_fn(*args)
    return anyio.run(bounded)


@pytest.fixture(scope="module")
def setup(module_stack):
    svc = ha.approvals(module_stack)
    _, port = module_stack.demo_server(json_response=False)
    policy = load_policy()
    policy["hide"] = [HIDDEN]
    envoy = module_stack.envoy(policy_text(policy), port, approvals_port=svc.check_port)
    return envoy, f"http://127.0.0.1:{port}/mcp", svc


async def connect_and(url: str, mode: str, token: str, body):
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"},
                                  timeout=httpx2.Timeout(10.0, read=30.0)) as http:
        async with mcp.Client(streamable_http_client(url, http_client=http), mode=mode) as client:
            return await body(client)


def leaf_errors(exc: BaseException) -> list[BaseException]:
    """The innermost exceptions of a (possibly nested) exception group."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for e in exc.exceptions for leaf in leaf_errors(e)]
    return [exc]


async def version_of(client):
    return client.protocol_version


@pytest.mark.parametrize("mode", list(MODES))
def test_mode_negotiates_the_same_version_as_directly(setup, mode):
    envoy, direct_url, _ = setup
    direct = run(connect_and, direct_url, mode, "direct", version_of)
    through = run(connect_and, envoy.mcp_url, mode, f"versions-{mode}", version_of)
    assert (direct, through) == (MODES[mode], MODES[mode])


@pytest.mark.parametrize("mode", list(MODES))
def test_list_call_deny_and_approval_in_each_mode(setup, mode):
    envoy, _, svc = setup

    async def body(client):
        tools = await client.list_tools()
        assert {t.name for t in tools.tools} == DEMO_TOOLS - {HIDDEN}
        vms = result_json(await client.call_tool("list_vms", {}))
        assert [v["vmid"] for v in vms["vms"]] == [100, 101, 102, 200]
        with pytest.raises(MCPError) as denied:
            await client.call_tool("delete_vm", {"node": "pve1", "vmid": 100})
        assert denied.value.error.code == -31001
        assert denied.value.error.data["reason"] == "not allowed by policy (default: deny)"
        with pytest.raises(MCPError) as hidden:
            await client.call_tool(HIDDEN, {"node": "pve1", "vmid": 100, "pid": 1})
        assert (hidden.value.error.code, hidden.value.error.data["rule"]) == (-31001, "hide")
        with pytest.raises(MCPError) as approval:
            await client.call_tool("start_vm", {"node": "pve2", "vmid": 200})
        err = approval.value.error
        assert (err.code, err.data["kind"], err.data["tool"]) == (-31007, "approval_required", "start_vm")
        assert err.data["approval_url"] == f"{svc.url}/approvals/{err.data['approval_id']}"
        return client.protocol_version

    assert run(connect_and, envoy.mcp_url, mode, f"calls-{mode}", body) == MODES[mode]


def test_subscriptions_listen_is_acknowledged_through_the_filter(setup):
    envoy, _, _ = setup

    async def body(client):
        async with client.listen(tools_list_changed=True) as sub:
            return sub.honored

    honored = run(connect_and, envoy.mcp_url, "2026-07-28", "listen", body)
    assert honored is not None


def test_auto_falls_back_when_the_gateway_does_not_accept_2026(module_stack, setup):
    """`gateway.protocol_versions` without 2026-07-28: the probe gets 400 −32022 naming the accepted
    versions, and `auto` falls back to the handshake (2025-11-25); pinning 2026-07-28 fails."""
    envoy, direct_url, _ = setup
    port = int(direct_url.split(":")[2].split("/")[0])
    policy = load_policy()
    policy["gateway"]["protocol_versions"] = ["2025-06-18", "2025-11-25"]
    legacy_only = module_stack.envoy(policy_text(policy), port, name="envoy-legacy-only")
    assert run(connect_and, legacy_only.mcp_url, "auto", "fallback", version_of) == "2025-11-25"


    async def list_tools(client):
        return await client.list_tools()

    # Pinned to 2026-07-28 the client sends no probe; its first request is refused with −32022.
    with pytest.raises(BaseException) as pinned:
        run(connect_and, legacy_only.mcp_url, "2026-07-28", "pinned", list_tools)
    (err,) = [e.error for e in leaf_errors(pinned.value) if isinstance(e, MCPError)]
    assert (err.code, err.data["supported"], err.data["requested"]) == (-32022, ["2025-06-18", "2025-11-25"],
                                                                         "2026-07-28")
