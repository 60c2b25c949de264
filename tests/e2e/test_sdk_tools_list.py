"""Tier 3: the official MCP Python SDK client lists tools through Envoy running the filter, in front
of the demo server (built with the same SDK), in both of its response modes (json_response=True and
SSE). The policy is the shipped envoy/policy.json plus `hide: [delete_vm, vm_agent_exec_status]`.

`list_tools()` must return exactly the other tools, every field of each kept tool as the server sent
it, and the session must stay usable (a later `call_tool("list_vms")` works; a hidden tool is denied
with rule `hide`). With the demo server's `--catalog 286` (286 Proxmox-shaped tools), the client sees
the 284 others. Expected lists come from the server itself, asked directly (not through Envoy).
"""

from __future__ import annotations

import anyio
import pytest
from mcp import MCPError

from testkit.demo import DEMO_TOOLS, DEMO_VMS
from testkit.envoy import POLICY_JSON, load_policy
from testkit.mcp_session import open_session, result_json
from testkit.processes import HOST

HIDDEN = ["delete_vm", "vm_agent_exec_status"]
SEEDED_VMS = DEMO_VMS
STEP_TIMEOUT = 60


def hiding_policy() -> dict:
    policy = load_policy(POLICY_JSON)
    policy["hide"] = list(HIDDEN)
    return policy


def run(coro_fn, *args):
    async def bounded():
        with anyio.fail_after(STEP_TIMEOUT):
            return await coro_fn(*args)
    return anyio.run(bounded)


async def tools_of(url: str, token: str):
    async with open_session(url, token) as s:
        return (await s.list_tools()).tools


def dumped(tools) -> dict[str, dict]:
    return {t.name: t.model_dump(by_alias=True, exclude_none=True, mode="json") for t in tools}


@pytest.fixture(params=[True, False], ids=["json_response", "sse"])
def mode(request):
    return request.param


def test_sdk_sees_filtered_list_and_session_stays_usable(stack, mode):
    _, port = stack.demo_server(json_response=mode)
    envoy = stack.envoy(hiding_policy(), port)
    direct = run(tools_of, f"http://{HOST}:{port}/mcp", "direct")
    assert [t.name for t in direct] == DEMO_TOOLS  # the server really offers the hidden tools

    async def scenario():
        async with open_session(envoy.mcp_url, "e2e-lists") as s:
            listed = (await s.list_tools()).tools
            names = [t.name for t in listed]
            assert names == [n for n in DEMO_TOOLS if n not in HIDDEN]
            assert dumped(listed) == {k: v for k, v in dumped(direct).items() if k not in HIDDEN}

            assert result_json(await s.call_tool("list_vms", {})) == {"vms": SEEDED_VMS}

            # pve1/102 is stopped: were the call forwarded, the demo server would delete it.
            with pytest.raises(MCPError) as denied:
                await s.call_tool("delete_vm", {"node": "pve1", "vmid": 102})
            assert denied.value.error.code == -31001
            assert denied.value.error.data == {"kind": "denied", "tool": "delete_vm",
                                               "reason": "tool is hidden by policy", "rule": "hide"}

            again = (await s.list_tools()).tools
            assert [t.name for t in again] == names
            assert result_json(await s.call_tool("list_vms", {})) == {"vms": SEEDED_VMS}

    run(scenario)


def test_catalog_of_286_tools(stack):
    """SSE mode (the SDK default) with the demo server's generated 286-tool catalogue."""
    _, port = stack.demo_server(json_response=False, catalog=286)
    envoy = stack.envoy(hiding_policy(), port)
    direct = run(tools_of, f"http://{HOST}:{port}/mcp", "direct")
    assert len(direct) == 286 and len({t.name for t in direct}) == 286
    assert [t.name for t in direct][:8] == DEMO_TOOLS

    async def scenario():
        async with open_session(envoy.mcp_url, "e2e-catalog") as s:
            listed = (await s.list_tools()).tools
            assert [t.name for t in listed] == [t.name for t in direct if t.name not in HIDDEN]
            assert len(listed) == 284
            assert dumped(listed) == {k: v for k, v in dumped(direct).items() if k not in HIDDEN}
            assert result_json(await s.call_tool("list_vms", {})) == {"vms": SEEDED_VMS}

    run(scenario)
