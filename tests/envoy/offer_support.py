"""Shared parts of the approval-offer tests (tests/envoy/test_approval_offer*.py): the
2026-07-28 client's constants and the exact `input_required` offer (crates/core/src/approval/offer.rs)."""

from __future__ import annotations

import json

from testkit import approvals as ha
from testkit.jsonrpc import Reply

V26 = "2026-07-28"
TOKEN = "agent-offer-token"
KEY = "offer-test-session-key-0123456789abcdef"
REASON = "starting a VM costs money"
INPUT_KEY = "mcp-policy-filter/approval"
META = {"io.modelcontextprotocol/protocolVersion": V26,
        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}, "url": {}}}}
SETTLE = 0.3


def compact(v) -> bytes:
    return json.dumps(v, separators=(",", ":")).encode()


def offered(r: Reply, id_: int, approvals_url: str) -> tuple[str, str]:
    """`r` is the input_required offer for `id_`, pointing at the approvals service `approvals_url`,
    exactly: (approval id, requestState)."""
    assert (r.status, r.headers["content-type"]) == (200, "application/json"), (r.status, r.body)
    msg = r.json()
    result = msg["result"]
    approval_id = result["inputRequests"][INPUT_KEY]["params"]["elicitationId"]
    state = result["requestState"]
    assert state.startswith("mcpf-a1."), state
    assert msg == {"jsonrpc": "2.0", "id": id_, "result": {
        "resultType": "input_required",
        "inputRequests": {INPUT_KEY: {"method": "elicitation/create", "params": {
            "mode": "url", "url": f"{approvals_url}/approvals/{approval_id}", "elicitationId": approval_id,
            "message": REASON}}},
        "requestState": state}}, msg
    return approval_id, state


def demo_gateway(stack) -> tuple:
    """(approvals service, Envoy): `start_vm` needs approval (reason REASON), `list_vms` is allowed,
    `gateway.session_key` is KEY, in front of the demo server answering JSON."""
    svc = ha.approvals(stack)
    policy = ha.approval_policy({"start_vm": ha.approval_tool(reason=REASON), "list_vms": {}},
                                gateway={"session_key": {"current": KEY}})
    _, port = stack.demo_server(json_response=True)
    return svc, stack.envoy(policy, port, approvals_port=svc.check_port)
