"""Tier 3: the official MCP SDK client, two identities, one Envoy: real `jwt_authn` in front of a
policy set (testkit.identity), the demo server behind it, in both of its response modes, and the
Python SDK 2.x `mcp.Client` in its three connect modes (`auto`, `"2026-07-28"`, `legacy`, as in
test_sdk_versions.py).

Each identity's session sees its own policy: the tool list, what a call does, and (with
`refusal_shape: "tool_result"`) a refused call read by the SDK as a failed tool call, not an error.
Sessions are bound to the identity's grant (`gateway.session_key`), the `sub` claim.
"""

from __future__ import annotations

import anyio
import httpx2
import mcp
import pytest
from mcp.client.streamable_http import streamable_http_client

from testkit import demo
from testkit.identity import Issuer, start_identity_envoy
from testkit.mcp_session import open_session

STEP_TIMEOUT = 30
MODES = {"auto": "2026-07-28", "2026-07-28": "2026-07-28", "legacy": "2025-11-25"}
HIDDEN_FOR_READONLY = ["start_vm", "stop_vm", "delete_vm", "vm_agent_exec", "vm_agent_exec_status"]
SET = {
    "version": "1",
    "policies": {
        "ops": {"version": "1", "default": "deny", "hide": ["delete_vm"],
                "tools": {"list_vms": {}, "vm_status": {}, "start_vm": {}}},
        "readonly": {"version": "1", "default": "deny", "hide": HIDDEN_FOR_READONLY, "tools": {"list_vms": {}}},
    },
    "attach": [
        {"policy": "ops", "when": [{"claim": "groups", "includes": "ops"}]},
        {"policy": "readonly", "when": [{"claim": "scope", "includes": "vms:read"}]},
    ],
    "gateway": {"identity": {"payload_header": "x-jwt-payload", "grant_claim": "sub"},
                "refusal_shape": "tool_result",
                "session_key": {"current_env": "MCPF_SESSION_KEY"}},
}


@pytest.fixture(params=[True, False], ids=["json_response", "sse"])
def envoy(request, stack):
    _, port = stack.demo_server(json_response=request.param)
    issuer = Issuer()
    envoy, _ = start_identity_envoy(stack, port, issuer, SET)
    return envoy, issuer


def run(coro_fn, *args):
    async def bounded():
        with anyio.fail_after(STEP_TIMEOUT):
            return await coro_fn(*args)
    return anyio.run(bounded)


async def session_of(url: str, token: str) -> tuple[list[str], object, object]:
    """(listed tool names, the result of start_vm, the result of list_vms) in one SDK session."""
    async with open_session(url, token) as s:
        names = [t.name for t in (await s.list_tools()).tools]
        started = await s.call_tool("start_vm", {"node": "pve1", "vmid": 102})
        listed = await s.call_tool("list_vms", {})
        return names, started, listed


def test_two_identities_two_policies_through_the_sdk(envoy):
    envoy, issuer = envoy
    ops_token = issuer.token("alice", groups=["ops"])
    ro_token = issuer.token("bob", scope="openid vms:read", act={"sub": "assistant"})

    names, started, listed = run(session_of, envoy.mcp_url, ops_token)
    assert names == [n for n in demo.DEMO_TOOLS if n != "delete_vm"]
    assert (started.is_error, listed.is_error) == (False, False)
    assert started.structured_content["status"] == "running"

    names, started, listed = run(session_of, envoy.mcp_url, ro_token)
    assert names == [n for n in demo.DEMO_TOOLS if n not in HIDDEN_FOR_READONLY]
    assert started.is_error is True
    assert [c.text for c in started.content] == ["tool is hidden by policy"]
    assert listed.is_error is False


@pytest.fixture(scope="module")
def modes_envoy(module_stack):
    _, port = module_stack.demo_server(json_response=False)
    issuer = Issuer()
    envoy, _ = start_identity_envoy(module_stack, port, issuer, SET, name="envoy-identity-modes")
    return envoy, issuer


async def client_of(url: str, mode: str, token: str) -> tuple[str, list[str], object, object]:
    """(negotiated version, listed tool names, start_vm's result, list_vms's result) with `mcp.Client`."""
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"},
                                  timeout=httpx2.Timeout(10.0, read=30.0)) as http:
        async with mcp.Client(streamable_http_client(url, http_client=http), mode=mode) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            started = await client.call_tool("start_vm", {"node": "pve1", "vmid": 101})
            listed = await client.call_tool("list_vms", {})
            return client.protocol_version, names, started, listed


@pytest.mark.parametrize("mode", list(MODES))
def test_two_identities_in_each_connect_mode(modes_envoy, mode):
    envoy, issuer = modes_envoy
    ops_token = issuer.token(f"alice-{mode}", groups=["ops"])
    ro_token = issuer.token(f"bob-{mode}", scope="openid vms:read", act={"sub": "assistant"})

    version, names, started, listed = run(client_of, envoy.mcp_url, mode, ops_token)
    assert version == MODES[mode]
    assert names == [n for n in demo.DEMO_TOOLS if n != "delete_vm"]
    assert (started.is_error, listed.is_error) == (False, False)
    assert started.structured_content["status"] == "running"

    version, names, started, listed = run(client_of, envoy.mcp_url, mode, ro_token)
    assert version == MODES[mode]
    assert names == [n for n in demo.DEMO_TOOLS if n not in HIDDEN_FOR_READONLY]
    assert started.is_error is True
    assert [c.text for c in started.content] == ["tool is hidden by policy"]
    assert listed.is_error is False
