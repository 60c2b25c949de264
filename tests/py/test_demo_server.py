"""Tier 1: the demo MCP server on its own (no Envoy, no wasm).

The tools are exercised in-process with the SDK's `Client`; one test starts the real process to
check the command line and the ready line.
"""

from __future__ import annotations

import anyio
from mcp import Client

from testkit.demo import DEMO_TOOLS, DEMO_VMS, demo_module, start_demo_server
from testkit.mcp_session import open_session, result_json
from testkit.processes import free_port

proxmox_server = demo_module()

TOOLS = set(DEMO_TOOLS)
VMS = DEMO_VMS


def in_process(scenario):
    """Run `scenario(client)` against a fresh demo server, in-process."""
    async def main():
        with anyio.fail_after(10):
            async with Client(proxmox_server.build_server()) as client:
                return await scenario(client)
    return anyio.run(main)


def error_text(result) -> str:
    assert result.is_error is True
    return result.content[0].text


def test_tools_have_typed_arguments_and_descriptions():
    async def scenario(c):
        return {t.name: t for t in (await c.list_tools()).tools}

    tools = in_process(scenario)
    assert set(tools) == TOOLS
    assert all(t.description for t in tools.values())
    exec_schema = tools["vm_agent_exec"].input_schema
    assert {k: v["type"] for k, v in exec_schema["properties"].items()} == \
        {"node": "string", "vmid": "integer", "command": "string"}
    assert sorted(exec_schema["required"]) == ["command", "node", "vmid"]
    assert tools["vm_agent_exec_status"].input_schema["properties"]["pid"]["type"] == "integer"


def test_list_vms_and_nodes():
    async def scenario(c):
        return (result_json(await c.call_tool("list_vms", {})),
                result_json(await c.call_tool("list_vms", {"node": "pve2"})),
                result_json(await c.call_tool("list_nodes", {})))

    all_vms, pve2, nodes = in_process(scenario)
    assert all_vms == {"vms": VMS}
    assert pve2 == {"vms": VMS[3:]}
    assert [n["node"] for n in nodes["nodes"]] == ["pve1", "pve2"]


def test_power_and_delete_effects():
    async def scenario(c):
        running_delete = await c.call_tool("delete_vm", {"node": "pve1", "vmid": 100})
        stopped = result_json(await c.call_tool("stop_vm", {"node": "pve1", "vmid": 100}))
        deleted = result_json(await c.call_tool("delete_vm", {"node": "pve1", "vmid": 100}))
        started = result_json(await c.call_tool("start_vm", {"node": "pve2", "vmid": 200}))
        status = result_json(await c.call_tool("vm_status", {"node": "pve2", "vmid": 200}))
        gone = await c.call_tool("vm_status", {"node": "pve1", "vmid": 100})
        listed = result_json(await c.call_tool("list_vms", {}))
        return running_delete, stopped, deleted, started, status, gone, listed

    running_delete, stopped, deleted, started, status, gone, listed = in_process(scenario)
    assert error_text(running_delete) == "Error executing tool delete_vm: VM 100 on pve1 is running; stop it first"
    assert stopped["status"] == "stopped"
    assert deleted == {"node": "pve1", "vmid": 100, "deleted": True}
    assert started == status == {"node": "pve2", "vmid": 200, "name": "backup-01", "status": "running",
                                 "cpus": 2, "memory_mib": 4096, "uptime_seconds": 3600}
    assert error_text(gone) == "Error executing tool vm_status: no VM 100 on node pve1"
    assert [v["vmid"] for v in listed["vms"]] == [101, 102, 200]


def test_agent_exec_returns_a_pid_to_poll():
    async def scenario(c):
        first = result_json(await c.call_tool("vm_agent_exec", {"node": "pve1", "vmid": 101, "command": "df -h"}))
        second = result_json(await c.call_tool("vm_agent_exec", {"node": "pve1", "vmid": 100, "command": "id"}))
        status = result_json(await c.call_tool("vm_agent_exec_status", {"pid": first["pid"]}))
        stopped_vm = await c.call_tool("vm_agent_exec", {"node": "pve1", "vmid": 102, "command": "id"})
        unknown = await c.call_tool("vm_agent_exec_status", {"pid": 1})
        return first, second, status, stopped_vm, unknown

    first, second, status, stopped_vm, unknown = in_process(scenario)
    assert (first, second) == ({"pid": 4242}, {"pid": 4243})
    assert status == {"pid": 4242, "exited": True, "exitcode": 0, "out_data": "[simulated on pve1/101] df -h\n"}
    assert "not running" in error_text(stopped_vm)
    assert error_text(unknown) == "Error executing tool vm_agent_exec_status: no guest-agent command with pid 1"


def test_process_prints_ready_line_and_serves_a_session(tmp_path):
    port = free_port()
    proc = start_demo_server(port, json_response=True, log_dir=tmp_path)
    try:
        async def scenario():
            with anyio.fail_after(10):
                async with open_session(f"http://127.0.0.1:{port}/mcp", "any") as s:
                    return result_json(await s.call_tool("list_vms", {}))

        assert anyio.run(scenario) == {"vms": VMS}
        ready = f"proxmox-demo ready on http://127.0.0.1:{port}/mcp (json_response=True, stateless=False)"
        assert ready in proc.log_text().splitlines()
    finally:
        proc.stop()
