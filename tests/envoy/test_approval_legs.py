"""Tier 2: require_approval across the legs of an MCP 2026-07-28 multi-round-trip call, in real
Envoy with the real mcp-approvals service, in front of the demo server started with
`--confirm-deletes` (its `delete_vm` answers `input_required`: "type the VM name to confirm").

Leg 1 (no answers) needs an approval; once approved, the server answers input_required. Leg 2
carries `inputResponses` and the server's `requestState`: a new approval, whose API object and page
show the answers; approving it runs the call. An approval of other answers does not cover it, and
nothing runs upstream before its approval (the VM is still listed).
"""

from __future__ import annotations

import json

from testkit import approvals as ha
from testkit.demo import demo_argv
from testkit.jsonrpc import headers_for, post
from testkit.paths import REPO_ROOT
from testkit.processes import free_port, port_open
from testkit.stack import Stack

V26 = "2026-07-28"
TOKEN = "agent-legs-token"
ARGS = {"node": "pve2", "vmid": 200}  # backup-01, stopped in the demo's seed


def demo_confirming(stack: Stack) -> int:
    """The demo server with `--confirm-deletes` on a free port, owned by `stack`."""
    port = free_port()
    argv = demo_argv(port, True, None) + ["--confirm-deletes"]
    stack.spawn("demo-confirm", argv, lambda: port_open(port), "accepting connections", cwd=REPO_ROOT)
    return port


def call(url: str, tool: str, arguments: dict, id_: int, **leg) -> dict:
    params = {"name": tool, "arguments": arguments, **leg,
              "_meta": {"io.modelcontextprotocol/protocolVersion": V26,
                        "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}}}}
    body = json.dumps({"jsonrpc": "2.0", "id": id_, "method": "tools/call", "params": params}).encode()
    r = post(url, body, headers_for(TOKEN, **{"mcp-protocol-version": V26, "mcp-method": "tools/call",
                                              "mcp-name": tool}), timeout=15)
    assert r.status == 200, (r.status, r.body)
    msg = r.json()
    assert msg["id"] == id_, msg
    return msg


def vm_names(url: str, id_: int) -> list[str]:
    msg = call(url, "list_vms", {}, id_)
    return [v["name"] for v in msg["result"]["structuredContent"]["vms"]]


def required(msg: dict) -> str:
    assert msg["error"]["code"] == -31007, msg
    return msg["error"]["data"]["approval_id"]


def test_each_leg_is_approved_with_its_answers(stack):
    svc = ha.approvals(stack)
    policy = ha.approval_policy({"delete_vm": ha.approval_tool(reason="deleting a VM is irreversible")})
    envoy = stack.envoy(policy, demo_confirming(stack), approvals_port=svc.check_port)
    url = envoy.mcp_url

    # Leg 1: held; nothing upstream.
    a1 = required(call(url, "delete_vm", ARGS, 1))
    assert "backup-01" in vm_names(url, 2)
    first = svc.get(a1)
    assert "continuation" not in first and "input_responses" not in first, first
    svc.approve(a1)
    leg1 = call(url, "delete_vm", ARGS, 3)
    result = leg1["result"]
    assert result["resultType"] == "input_required", leg1
    ask = result["inputRequests"]["confirm"]
    assert ask["method"] == "elicitation/create"
    assert ask["params"]["message"] == "Type the VM name (backup-01) to confirm deleting VM 200 on pve2"
    state = result["requestState"]
    assert isinstance(state, str) and state

    # Leg 2 with the right answer: a new approval that shows the answers and the state.
    good = {"confirm": {"action": "accept", "content": {"name": "backup-01"}}}
    a2 = required(call(url, "delete_vm", ARGS, 4, inputResponses=good, requestState=state))
    assert a2 != a1
    shown = svc.get(a2)
    assert (shown["continuation"], shown["input_responses"], shown["request_state"]) == (True, good, state)
    assert (shown["tool"], shown["arguments"], shown["state"]) == ("delete_vm", ARGS, "pending")

    # An approval of other answers does not cover it.
    wrong = {"confirm": {"action": "accept", "content": {"name": "nope"}}}
    a3 = required(call(url, "delete_vm", ARGS, 5, inputResponses=wrong, requestState=state))
    assert a3 not in (a1, a2)
    svc.approve(a3)
    assert required(call(url, "delete_vm", ARGS, 6, inputResponses=good, requestState=state)) == a2
    assert "backup-01" in vm_names(url, 7), "nothing ran before leg 2 was approved"

    # Approving leg 2 runs it, once.
    svc.approve(a2)
    done = call(url, "delete_vm", ARGS, 8, inputResponses=good, requestState=state)
    assert done["result"]["structuredContent"] == {"node": "pve2", "vmid": 200, "deleted": True}, done
    assert "backup-01" not in vm_names(url, 9)
    assert svc.get(a2)["state"] == "consumed"
    assert svc.get(a3)["state"] == "approved", "the approval of other answers was never used"
