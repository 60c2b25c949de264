"""Tier 3: the official Python SDK client (`mcp.Client`, mode "2026-07-28") through Envoy with the
filter and the real approval service, against the demo server with `--confirm-deletes`: a
`require_approval` tool whose server answers `input_required` ("type the VM name to confirm").

The SDK's own input_required driver answers the server's form with the elicitation callback and
retries; the filter holds that leg for a new approval (−31007) whose API object shows the answers.
The agent then retries that leg as it is (the SDK's `session.call_tool` with `input_responses` and
`request_state`) and, once it is approved, the VM is deleted.
"""

from __future__ import annotations

import anyio
import pytest
from mcp_types import ElicitResult
from mcp import MCPError

from testkit import approvals as ha
from testkit.demo import demo_argv
from testkit.paths import REPO_ROOT
from testkit.processes import free_port, port_open
from testkit.stack import Stack
from testkit.mcp_session import open_client_2026

TOKEN = "agent-sdk-legs"
ARGS = {"node": "pve2", "vmid": 200}
ANSWER = {"action": "accept", "content": {"name": "backup-01"}}


def demo_confirming(stack: Stack) -> int:
    """The demo server with `--confirm-deletes` on a free port, owned by `stack`."""
    port = free_port()
    argv = demo_argv(port, False, None) + ["--confirm-deletes"]
    stack.spawn("demo-confirm", argv, lambda: port_open(port), "accepting connections", cwd=REPO_ROOT)
    return port


def test_sdk_2026_client_completes_each_leg_after_its_approval(stack):
    svc = ha.approvals(stack)
    policy = ha.approval_policy({"delete_vm": ha.approval_tool(reason="deleting a VM is irreversible")})
    envoy = stack.envoy(policy, demo_confirming(stack), approvals_port=svc.check_port)
    asked: list[str] = []

    async def elicit(_ctx, params):
        asked.append(params.message)
        return ElicitResult(**ANSWER)

    async def scenario():
        async with open_client_2026(envoy.mcp_url, TOKEN, elicit) as client:
            # Leg 1: held for approval.
            with pytest.raises(MCPError) as first:
                await client.call_tool("delete_vm", ARGS)
            assert (first.value.error.code, first.value.error.data["kind"]) == (-31007, "approval_required")
            svc.approve(first.value.error.data["approval_id"])
            # Leg 1 runs; the server asks; the SDK answers and retries: leg 2 is held.
            leg1 = await client.session.call_tool("delete_vm", ARGS, allow_input_required=True)
            assert leg1.result_type == "input_required"
            assert set(leg1.input_requests) == {"confirm"}
            with pytest.raises(MCPError) as second:
                await client.session.call_tool("delete_vm", ARGS, input_responses={"confirm": ElicitResult(**ANSWER)},
                                               request_state=leg1.request_state)
            err = second.value.error
            assert (err.code, err.data["kind"]) == (-31007, "approval_required")
            assert err.data["approval_url"] == f"{svc.url}/approvals/{err.data['approval_id']}"
            shown = svc.get(err.data["approval_id"])
            assert (shown["continuation"], shown["input_responses"], shown["request_state"]) == (
                True, {"confirm": ANSWER}, leg1.request_state)
            svc.approve(err.data["approval_id"])
            done = await client.session.call_tool("delete_vm", ARGS,
                                                  input_responses={"confirm": ElicitResult(**ANSWER)},
                                                  request_state=leg1.request_state)
            assert done.structured_content == {"node": "pve2", "vmid": 200, "deleted": True}
            assert svc.get(err.data["approval_id"])["state"] == "consumed"
            # The SDK's own driver, from scratch: leg 1 needs an approval again (used up), and
            # the elicitation callback answers the server's question.
            with pytest.raises(MCPError) as again:
                await client.call_tool("delete_vm", {"node": "pve1", "vmid": 102})
            svc.approve(again.value.error.data["approval_id"])
            with pytest.raises(MCPError) as leg2:
                await client.call_tool("delete_vm", {"node": "pve1", "vmid": 102})
            assert leg2.value.error.code == -31007
            assert svc.get(leg2.value.error.data["approval_id"])["continuation"] is True
            assert asked == ["Type the VM name (build-runner) to confirm deleting VM 102 on pve1"]

    async def bounded():
        with anyio.fail_after(60):
            await scenario()
    anyio.run(bounded)
