"""Tier 2: `require_approval` in real Envoy, with the real mcp-approvals service (services/approvals/API.md),
in front of tests/cases/recorder.py.

What reaches the upstream is read from the recorder's log (body SHA-256 per request), what the
service holds from its bearer JSON API.

- Retry mode: pending (-31007 with the approval's id and URL) -> approved through the API -> the
  identical call passes exactly once; the next identical call needs a new approval; changed
  arguments or another grant need their own; a denial (-31008) carries the approver's note; an
  approval not used within approval_timeout is refused.
- Hold mode: the call waits for the decision and passes when it comes; no decision -> -31007.
- With limits, require/deny_if, batches, dry-run; 10 parallel identical calls after one approval.
"""

from __future__ import annotations

import json
import threading
import time

from testkit import approvals as ha
from testkit.clock import avoid_boundary, window_index
from testkit.jsonrpc import Reply, headers_for, parallel_posts, post, tool_call
from testkit.logs import grant_label
from approval_support import (ARGS, REASON, SETTLE, approval_key, assert_denied, assert_required, is_result, sha,
                              with_service)


# ------------------------------------------------------------------------------------------ retry mode


def test_pending_call_approved_through_the_api_passes_exactly_once(stack):
    s = with_service(stack)
    token = "agent-approve-once"
    body = tool_call("start_vm", ARGS, 1)

    first = assert_required(s.call(token, id_=1), 1, s.svc.url)
    assert s.received(settle=SETTLE) == []
    (pending,) = s.svc.pending()
    assert pending["id"] == first["approval_id"]
    assert pending["approval_url"] == first["approval_url"]
    assert (pending["state"], pending["tool"], pending["arguments"], pending["grant"], pending["reason"]) == \
        ("pending", "start_vm", ARGS, grant_label(token), REASON)
    assert pending["key"] == approval_key(token, "start_vm", ARGS, ha.upstream_of(s.envoy))
    assert pending["upstream"] == ha.upstream_of(s.envoy)

    # Asking again before a decision finds the same approval: no duplicate.
    assert assert_required(s.call(token, id_=1), 1, s.svc.url)["approval_id"] == first["approval_id"]
    assert len(s.svc.listing("all")) == 1

    approved = s.svc.approve(first["approval_id"], "ok for today")
    assert (approved["state"], approved["approver"], approved["note"]) == ("approved", "alice", "ok for today")

    r = s.call(token, id_=1)
    assert is_result(r, 1), (r.status, r.body)
    assert len(s.received(body)) == 1
    assert len(s.received()) == 1
    used = s.svc.get(first["approval_id"])
    assert used["state"] == "consumed"
    assert isinstance(used["consumed_at"], int)

    # Single use: the identical call again needs a new approval.
    again = assert_required(s.call(token, id_=1), 1, s.svc.url)
    assert again["approval_id"] != first["approval_id"]
    assert len(s.received(settle=SETTLE)) == 1
    assert [a["id"] for a in s.svc.pending()] == [again["approval_id"]]


def test_changed_arguments_or_grant_need_their_own_approval(stack):
    s = with_service(stack)
    token = "agent-changed-args"
    a = assert_required(s.call(token, ARGS, id_="a"), "a", s.svc.url)
    s.svc.approve(a["approval_id"])

    changed = {"node": "pve2", "vmid": 201}
    b = assert_required(s.call(token, changed, id_="b"), "b", s.svc.url)
    assert b["approval_id"] != a["approval_id"]
    extra = {**ARGS, "force": True}
    c = assert_required(s.call(token, extra, id_="c"), "c", s.svc.url)
    other_grant = assert_required(s.call("agent-someone-else", ARGS, id_="d"), "d", s.svc.url)
    assert len({a["approval_id"], b["approval_id"], c["approval_id"], other_grant["approval_id"]}) == 4
    assert s.received(settle=SETTLE) == []
    assert s.svc.get(a["approval_id"])["state"] == "approved"  # still unused

    # The approved call itself, with its arguments in another key order (same canonical JSON).
    body = json.dumps({"jsonrpc": "2.0", "id": "e", "method": "tools/call",
                       "params": {"name": "start_vm", "arguments": {"vmid": 200, "node": "pve2"}}}).encode()
    r = post(s.envoy.mcp_url, body, headers_for(token))
    assert is_result(r, "e"), (r.status, r.body)
    assert [e["body_sha256"] for e in s.received()] == [sha(body)]
    assert s.svc.get(a["approval_id"])["state"] == "consumed"


def test_denial_carries_the_approvers_note_and_stays(stack):
    s = with_service(stack)
    token = "agent-denied"
    note = "use start_vm on 101 instead"
    p = assert_required(s.call(token, id_=7), 7, s.svc.url)
    denied = s.svc.deny(p["approval_id"], note)
    assert (denied["state"], denied["approver"], denied["note"]) == ("denied", "alice", note)

    assert_denied(s.call(token, id_=8), 8, p["approval_id"], note)
    assert_denied(s.call(token, id_=9), 9, p["approval_id"], note)  # the denial is current for its window

    # Without a note the reason says who decided.
    other = {"node": "pve1", "vmid": 102}
    q = assert_required(s.call(token, other, id_=10), 10, s.svc.url)
    s.svc.deny(q["approval_id"])
    assert_denied(s.call(token, other, id_=11), 11, q["approval_id"], "", reason="denied by an approver")
    assert s.received(settle=SETTLE) == []


def test_approval_not_used_before_it_expires_is_refused(stack):
    policy = ha.approval_policy({"start_vm": ha.approval_tool("2s")})
    s = with_service(stack, policy)
    token = "agent-expiry"
    p = assert_required(s.call(token, id_=1), 1, s.svc.url, expires=2)
    decided = s.svc.approve(p["approval_id"])
    # Usable until decided_at + 2 s (whole seconds): wait until that has surely passed.
    time.sleep(max(0.0, decided["decided_at"] + 3.2 - time.time()))

    again = assert_required(s.call(token, id_=2), 2, s.svc.url, expires=2)
    assert again["approval_id"] != p["approval_id"]
    assert s.received(settle=SETTLE) == []
    assert s.svc.get(p["approval_id"])["state"] == "expired"


def test_pending_approval_expires_and_a_new_one_is_opened(stack):
    policy = ha.approval_policy({"start_vm": ha.approval_tool("1s")})
    s = with_service(stack, policy)
    first = assert_required(s.call("agent-pending-expiry", id_=1), 1, s.svc.url, expires=1)
    created = s.svc.get(first["approval_id"])["created_at"]
    time.sleep(max(0.0, created + 2.2 - time.time()))
    second = assert_required(s.call("agent-pending-expiry", id_=2), 2, s.svc.url, expires=1)
    assert second["approval_id"] != first["approval_id"]
    assert s.svc.get(first["approval_id"])["state"] == "expired"
    r = s.svc.request("POST", f"/v1/approvals/{first['approval_id']}/approve", {"note": "too late"})
    assert r[0] == 409


# ------------------------------------------------------------------------------------------ hold mode


def test_hold_mode_call_waits_for_the_decision_and_passes(stack):
    s = with_service(stack, ha.approval_policy(mode="hold", timeout="20s"))
    token = "agent-hold"
    box: dict[str, object] = {}

    def agent():
        t0 = time.monotonic()
        box["reply"] = s.call(token, id_="held", timeout=30)
        box["took"] = time.monotonic() - t0

    t = threading.Thread(target=agent)
    t.start()
    (pending,) = s.svc.wait_pending(1)
    assert (pending["tool"], pending["arguments"]) == ("start_vm", ARGS)
    assert "reply" not in box  # still held
    s.svc.approve(pending["id"], "go")
    t.join(30)
    r = box["reply"]
    assert is_result(r, "held"), (r.status, r.body)
    assert box["took"] < 15
    assert len(s.received()) == 1
    assert s.svc.get(pending["id"])["state"] == "consumed"


def test_hold_mode_denial_while_waiting(stack):
    s = with_service(stack, ha.approval_policy(mode="hold", timeout="20s"))
    box: dict[str, Reply] = {}
    t = threading.Thread(target=lambda: box.update(r=s.call("agent-hold-deny", id_=5, timeout=30)))
    t.start()
    (pending,) = s.svc.wait_pending(1)
    s.svc.deny(pending["id"], "not now")
    t.join(30)
    assert_denied(box["r"], 5, pending["id"], "not now")
    assert s.received(settle=SETTLE) == []


def test_hold_mode_without_a_decision_is_approval_required(stack):
    s = with_service(stack, ha.approval_policy(mode="hold", timeout="3s"))
    t0 = time.monotonic()
    data = assert_required(s.call("agent-hold-none", id_=6), 6, s.svc.url)
    took = time.monotonic() - t0
    assert 1.9 <= took < 3.0, took  # the service waited wait_seconds = 3 - 1 = 2 s
    assert [a["id"] for a in s.svc.pending()] == [data["approval_id"]]
    assert s.received(settle=SETTLE) == []


# ------------------------------------------------------------------------------------------ with other rules


def test_pending_call_does_not_use_quota_and_a_limited_call_opens_no_approval(stack):
    rule = ha.approval_tool(limits=[{"counter": "start_rate", "window": "minute", "max": 1, "scope": "grant"}])
    s = with_service(stack, ha.approval_policy({"start_vm": rule}))
    token = "agent-limits"
    avoid_boundary(60, margin=15.0)
    window = window_index(60)

    p = assert_required(s.call(token, id_=1), 1, s.svc.url)
    for i in (2, 3):  # pending again and again: the quota unit is given back each time
        assert assert_required(s.call(token, id_=i), i, s.svc.url)["approval_id"] == p["approval_id"]
    s.svc.approve(p["approval_id"])
    assert is_result(s.call(token, id_=4), 4)

    other = {"node": "pve1", "vmid": 102}
    r = s.call(token, other, id_=5)
    assert window_index(60) == window, "the test crossed a minute boundary (machine too slow?)"
    assert r.status == 200
    err = r.error
    assert (err["code"], err["data"]["kind"], err["data"]["counter"]) == (-31002, "rate_limited", "start_rate")
    assert [a["id"] for a in s.svc.listing("all")] == [p["approval_id"]]  # no approval for the limited call
    assert len(s.received(settle=SETTLE)) == 1


def test_condition_violation_is_denied_without_asking(stack):
    rule = ha.approval_tool(require=[{"path": "args.vmid", "op": "in", "value": [100, 101, 200],
                                      "reason": "start_vm only on VMs 100, 101 and 200"}],
                            deny_if=[{"path": "args.node", "op": "eq", "value": "pve9"}])
    s = with_service(stack, ha.approval_policy({"start_vm": rule}))
    token = "agent-conditions"
    r = s.call(token, {"node": "pve1", "vmid": 102}, id_=1)
    assert r.error["code"] == -31001
    assert r.error["data"] == {"kind": "denied", "tool": "start_vm", "reason": "start_vm only on VMs 100, 101 and 200",
                               "rule": "tools.start_vm.require[0]"}
    r = s.call(token, {"node": "pve9", "vmid": 100}, id_=2)
    assert (r.error["code"], r.error["data"]["rule"]) == (-31001, "tools.start_vm.deny_if[0]")
    assert s.svc.listing("all") == []
    assert_required(s.call(token, {"node": "pve1", "vmid": 100}, id_=3), 3, s.svc.url)
    assert len(s.svc.listing("all")) == 1
    assert s.received(settle=SETTLE) == []


def test_approval_in_a_batch_is_refused_without_opening_one(stack):
    s = with_service(stack)
    body = b"[" + tool_call("list_vms", {}, 1) + b"," + tool_call("start_vm", ARGS, 2) + b"]"
    r = post(s.envoy.mcp_url, body, headers_for("agent-batch"))
    assert r.status == 200
    out = r.json()
    assert [(m["id"], m["error"]["code"], m["error"]["data"]["kind"]) for m in out] == \
        [(1, -31005, "batch_refused"), (2, -31007, "approval_required")]
    data = out[1]["error"]["data"]
    assert "approval_id" not in data and "approval_url" not in data
    assert data["reason"] == "a call that needs approval cannot be part of a batch; send it on its own"
    assert out[1]["error"]["message"] == f"tool 'start_vm' requires approval: {data['reason']}"
    assert s.svc.listing("all") == []
    assert s.received(settle=SETTLE) == []


def test_dry_run_asks_for_no_approval(stack):
    s = with_service(stack, ha.approval_policy(gateway={"mode": "dry_run"}))
    assert is_result(s.call("agent-dry-run", id_=1), 1)
    assert s.svc.listing("all") == []
    assert len(s.received()) == 1


def test_require_approval_without_gateway_approval_is_a_config_error(stack):
    policy = {"version": "1", "default": "deny", "tools": {"start_vm": ha.approval_tool()}}
    out = stack.envoy_expect_failure(policy)
    assert out.returncode == 1, out.log[-2000:]
    assert "invalid policy" in out.log
    assert "approval" in out.log


# ------------------------------------------------------------------------------------------ concurrency


def test_ten_parallel_identical_calls_after_one_approval_pass_once(stack):
    s = with_service(stack, concurrency=4)
    token = "agent-parallel"
    p = assert_required(s.call(token, id_=0), 0, s.svc.url)
    s.svc.approve(p["approval_id"])

    body = tool_call("start_vm", ARGS, 1)
    replies = parallel_posts(s.envoy.mcp_url, [(token, body)] * 10, threads=10)
    passed = [r for r in replies if is_result(r, 1)]
    refused = [r for r in replies if not is_result(r, 1)]
    assert len(passed) == 1, [(r.status, r.body[:200]) for r in replies]
    new_ids = {assert_required(r, 1, s.svc.url)["approval_id"] for r in refused}
    assert len(new_ids) == 1 and p["approval_id"] not in new_ids  # one new pending approval, no duplicates
    assert len(s.received(body, settle=SETTLE)) == 1
    assert len(s.received()) == 1
    states = sorted(a["state"] for a in s.svc.listing("all"))
    assert states == ["consumed", "pending"]
