"""Tier 3: require_approval offered through the protocol (crates/core/src/approval/offer.rs), with the official Python
SDK client (`mcp.Client`, mode "2026-07-28", with an elicitation callback, so it declares URL
elicitation in `_meta`), through Envoy under envoy/policy.json plus `gateway.session_key`, to the
demo server, with the real mcp-approvals.

One `call_tool("start_vm")` completes: the filter answers `input_required` with a URL elicitation
pointing at the approval page; the SDK's input_required driver hands it to the elicitation callback,
which approves through the approvers' API and accepts; the SDK retries with the filter's
`requestState`; the filter forwards the call and the VM runs. A second, identical call needs a new
approval (the first one is used up); declining it ends in −31007 without asking the service again.
"""

from __future__ import annotations

import json

import anyio
import pytest
from mcp_types import ElicitResult
from mcp import MCPError

from testkit import approvals as ha
from testkit.envoy import POLICY_JSON
from testkit.mcp_session import open_client_2026

TOKEN = "agent-sdk-offer"
KEY = "e2e-offer-session-key-0123456789abcdef"
ARGS = {"node": "pve2", "vmid": 200}
DECLINED = ("the client declined the gateway's approval request (inputResponses action decline or cancel); "
            "nothing was asked or forwarded")
STARTED = {"node": "pve2", "vmid": 200, "name": "backup-01", "status": "running",
           "cpus": 2, "memory_mib": 4096, "uptime_seconds": 3600}


def test_sdk_2026_client_approves_through_the_url_elicitation(stack):
    svc = ha.approvals(stack)
    policy = json.loads(POLICY_JSON.read_text(encoding="utf-8"))
    policy["gateway"]["session_key"] = {"current": KEY}
    _, port = stack.demo_server(json_response=False)
    envoy = stack.envoy(policy, port, approvals_port=svc.check_port)
    seen: list[tuple[str, str, str]] = []
    decision = {"action": "accept"}

    async def elicit(_ctx, params):
        approval_id = params.url.rsplit("/", 1)[-1]
        seen.append((params.mode, params.url, params.message))
        if decision["action"] == "accept":
            await anyio.to_thread.run_sync(svc.approve, approval_id, "e2e offer")
        return ElicitResult(action=decision["action"])

    async def scenario():
        async with open_client_2026(envoy.mcp_url, TOKEN, elicit) as client:
            started = await client.call_tool("start_vm", ARGS)
            assert started.structured_content == STARTED
            ((mode, url, message),) = seen
            assert (mode, message) == ("url", "starting a VM costs money")
            approval_id = url.rsplit("/", 1)[-1]
            assert url == f"{svc.url}/approvals/{approval_id}"
            assert svc.get(approval_id)["state"] == "consumed"

            # Used up: the identical call is offered anew; declined, the SDK surfaces −31007
            # (nobody is asked on a decline, so it has no link; the new approval stays pending).
            decision["action"] = "decline"
            with pytest.raises(MCPError) as declined:
                await client.call_tool("start_vm", ARGS)
            err = declined.value.error
            assert (err.code, err.data) == (-31007, {"kind": "approval_required", "tool": "start_vm",
                                                     "reason": DECLINED})
            assert len(seen) == 2 and seen[1][1] != url
            assert svc.get(seen[1][1].rsplit("/", 1)[-1])["state"] == "pending"

    async def bounded():
        with anyio.fail_after(60):
            await scenario()
    anyio.run(bounded)
