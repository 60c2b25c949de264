"""Tier 3: `require_approval` with the official MCP SDK client, through Envoy under the shipped
envoy/policy.json (start_vm needs an approval), to the demo server, with the real mcp-approvals.

call_tool start_vm raises MCPError -31007 carrying the approval's id and URL; the VM is still
stopped (the call never reached the server); an approver approves it through the API; the
identical retry returns the demo server's real result, and the VM is running. Both response modes.
"""

from __future__ import annotations

import re

import anyio
import pytest
from mcp import MCPError

from testkit import approvals as ha
from testkit.envoy import POLICY_JSON
from testkit.mcp_session import open_session, result_json

STEP_TIMEOUT = 30
ARGS = {"node": "pve2", "vmid": 200}
STARTED = {"node": "pve2", "vmid": 200, "name": "backup-01", "status": "running",
           "cpus": 2, "memory_mib": 4096, "uptime_seconds": 3600}


@pytest.fixture(params=[True, False], ids=["json_response", "sse"])
def through_envoy(request, stack):
    """(Envoy under envoy/policy.json in front of the demo server, the approval service)."""
    svc = ha.approvals(stack)
    _, port = stack.demo_server(json_response=request.param)
    envoy = stack.envoy(POLICY_JSON.read_text(encoding="utf-8"), port, approvals_port=svc.check_port)
    return envoy, svc


def run(coro_fn, *args):
    async def bounded():
        with anyio.fail_after(STEP_TIMEOUT):
            return await coro_fn(*args)
    return anyio.run(bounded)


def vm_200_status(vms: dict) -> str:
    (vm,) = [v for v in vms["vms"] if (v["node"], v["vmid"]) == ("pve2", 200)]
    return vm["status"]


def test_start_vm_needs_an_approval_then_the_identical_retry_runs(through_envoy):
    envoy, svc = through_envoy

    async def scenario():
        async with open_session(envoy.mcp_url, "e2e-approval") as s:
            with pytest.raises(MCPError) as required:
                await s.call_tool("start_vm", ARGS)
            err = required.value.error
            assert err.code == -31007
            data = err.data
            assert (data["kind"], data["tool"], data["reason"]) == ("approval_required", "start_vm",
                                                                    "starting a VM costs money")
            assert re.fullmatch(r"apr_[0-9A-Za-z]{26}", data["approval_id"])
            assert data["approval_url"] == f"{svc.url}/approvals/{data['approval_id']}"
            assert data["approval_url"] in err.message
            assert vm_200_status(result_json(await s.call_tool("list_vms", {}))) == "stopped"

            (pending,) = await anyio.to_thread.run_sync(svc.pending)
            assert (pending["id"], pending["tool"], pending["arguments"]) == (data["approval_id"], "start_vm", ARGS)
            await anyio.to_thread.run_sync(svc.approve, data["approval_id"], "e2e")

            started = await s.call_tool("start_vm", ARGS)
            assert result_json(started) == STARTED
            assert started.structured_content == STARTED
            assert vm_200_status(result_json(await s.call_tool("list_vms", {}))) == "running"

            # Used up: the same call again is asked about anew, the session stays usable.
            with pytest.raises(MCPError) as again:
                await s.call_tool("start_vm", ARGS)
            assert again.value.error.code == -31007
            assert again.value.error.data["approval_id"] != data["approval_id"]
        return data["approval_id"]

    approval_id = run(scenario)
    assert svc.get(approval_id)["state"] == "consumed"
