"""Tier 2: `require_approval` in real Envoy, with the real mcp-approvals service (services/approvals/API.md)
or a stub approval service, in front of tests/cases/recorder.py.

What reaches the upstream is read from the recorder's log (body SHA-256 per request), what the
service holds from its bearer JSON API, what the filter sent it from the stub's log.

- Retry mode: pending (-31007 with the approval's id and URL) -> approved through the API -> the
  identical call passes exactly once; the next identical call needs a new approval; changed
  arguments or another grant need their own; a denial (-31008) carries the approver's note; an
  approval not used within approval_timeout is refused.
- Fail closed (-31009, retry-after: 1): service stopped, a callout timeout, a non-200, garbage, a 200
  without one of the contract's shapes.
- Hold mode: the call waits for the decision and passes when it comes; no decision -> -31007.
- With limits, require/deny_if, batches, dry-run; 10 parallel identical calls after one approval;
  argument values never in Envoy's log; exact metrics.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time

import pytest

from testkit import approvals as ha
from testkit.clock import avoid_boundary, window_index
from testkit.jsonrpc import Reply, headers_for, parallel_posts, post, tool_call
from testkit.logs import access_records, grant_label, token_sha256
from testkit.processes import HOST
from testkit.stack import Stack
from testkit.stats import prom_family, prometheus
from testkit.upstream import recorder_lines, recorder_reply

REASON = "starting a VM costs money"
ARGS = {"node": "pve2", "vmid": 200}
ID_RE = re.compile(r"apr_[0-9A-Za-z]{26}")
SETTLE = 0.3
# approval_unavailable is answered like limiter_unavailable: HTTP 200, retry-after: 1 (crates/core/src/pipeline/approval.rs
# on_approval_answer), not 503: the filter answers 200 like its other refusals.
UNAVAILABLE_STATUS = 200


# ------------------------------------------------------------------------------------------ helpers


def sha(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def approval_key(token: str, tool: str, arguments, upstream: dict) -> str:
    """API.md: SHA-256 (hex) of the canonical JSON of {arguments, grant, tool, upstream}
    (`testkit.approvals.approval_key` for the credential `token`)."""
    return ha.approval_key(token_sha256(token), tool, arguments, upstream)


class Setup:
    """Envoy (policy with require_approval) + approval service + recorder, of one test."""

    def __init__(self, stack: Stack, policy: dict, svc: ha.Approvals | None, approvals_port: int,
                 concurrency: int = 2, log_level: str = "info"):
        self.stack = stack
        self.svc = svc
        _, self.upstream_port, self.log = stack.recorder()
        self.envoy = stack.envoy(policy, self.upstream_port, approvals_port=approvals_port, concurrency=concurrency,
                                 log_level=log_level)

    def call(self, token: str, arguments=None, id_=1, tool: str = "start_vm", timeout: float = 15.0) -> Reply:
        return post(self.envoy.mcp_url, tool_call(tool, ARGS if arguments is None else arguments, id_),
                    headers_for(token), timeout=timeout)

    def received(self, body: bytes | None = None, settle: float = 0.0) -> list[dict]:
        lines = recorder_lines(self.log, settle=settle)
        return lines if body is None else [e for e in lines if e["body_sha256"] == sha(body)]


def with_service(stack, policy: dict | None = None, **kw) -> Setup:
    svc = ha.approvals(stack)
    return Setup(stack, policy or ha.approval_policy(), svc, svc.check_port, **kw)


def with_stub(stack, mode: str, policy: dict | None = None) -> tuple[Setup, object]:
    stub = ha.stub(stack, mode)
    return Setup(stack, policy or ha.approval_policy(), None, stub.port), stub


def assert_required(r: Reply, id_, url_base: str | None, *, tool: str = "start_vm", reason: str = REASON,
                    expires: int = 600) -> dict:
    """`r` is the -31007 approval_required reply for a new or pending approval; returns error.data."""
    assert r.status == 200, (r.status, r.body)
    assert r.headers["content-type"] == "application/json"
    msg = r.json()
    assert (msg["jsonrpc"], msg["id"]) == ("2.0", id_)
    err = msg["error"]
    assert err["code"] == -31007, err
    data = err["data"]
    assert sorted(data) == ["approval_id", "approval_url", "expires_in_seconds", "kind", "reason", "tool"], data
    assert (data["kind"], data["tool"], data["reason"]) == ("approval_required", tool, reason)
    assert ID_RE.fullmatch(data["approval_id"]), data
    if url_base is not None:
        assert data["approval_url"] == f"{url_base}/approvals/{data['approval_id']}"
    assert type(data["expires_in_seconds"]) is int and expires - 3 <= data["expires_in_seconds"] <= expires, data
    assert err["message"] == (f"tool '{tool}' requires approval: ask an approver to approve it at "
                              f"{data['approval_url']}, then retry the identical call")
    return data


def assert_denied(r: Reply, id_, approval_id: str, note: str, reason: str | None = None) -> None:
    assert r.status == 200, (r.status, r.body)
    msg = r.json()
    assert msg["id"] == id_
    err = msg["error"]
    assert err["code"] == -31008, err
    assert err["data"] == {"kind": "approval_denied", "tool": "start_vm",
                           "reason": reason if reason is not None else note,
                           "approval_id": approval_id, "approver": ha.APPROVER, "note": note}


def assert_unavailable(r: Reply, id_, tool: str = "start_vm") -> dict:
    assert r.status == UNAVAILABLE_STATUS, (r.status, r.body)
    assert r.headers["retry-after"] == "1"
    assert r.headers["content-type"] == "application/json"
    msg = r.json()
    assert msg["id"] == id_
    err = msg["error"]
    assert err["code"] == -31009, err
    data = err["data"]
    assert (data["kind"], data["tool"], data["retry_after_seconds"]) == ("approval_unavailable", tool, 1), data
    assert isinstance(data["reason"], str) and data["reason"], data
    assert err["message"] == f"tool '{tool}' refused: approval could not be checked: {data['reason']}"
    assert "approval_id" not in data
    return data


def is_result(r: Reply, id_) -> bool:
    return r.status == 200 and r.body == recorder_reply(id_)




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


# ------------------------------------------------------------------------------------------ fail closed


def test_service_down_is_approval_unavailable_and_recovers(stack):
    s = with_service(stack)
    token = "agent-service-down"
    s.svc.stop()
    t0 = time.monotonic()
    assert_unavailable(s.call(token, id_="x"), "x")
    assert time.monotonic() - t0 < 4.0
    assert s.received(settle=SETTLE) == []

    svc = ha.restart(stack, s.svc)
    p = assert_required(s.call(token, id_="y"), "y", svc.url)
    svc.approve(p["approval_id"])
    assert is_result(s.call(token, id_="z"), "z")
    assert len(s.received()) == 1


@pytest.mark.parametrize("mode,timeout,elapsed", [("retry", "1s", 1.0), ("hold", "2s", 2.0)])
def test_callout_timeout_is_approval_unavailable(stack, mode, timeout, elapsed):
    """A service that takes the request and never answers: Envoy's callout times out (synthetic 504)."""
    s, stub_log = with_stub(stack, "never", ha.approval_policy(mode=mode, timeout=timeout))
    t0 = time.monotonic()
    assert_unavailable(s.call("agent-timeout", id_=1), 1)
    took = time.monotonic() - t0
    assert elapsed - 0.1 <= took < elapsed + 2.0, took
    assert len(ha.stub_requests(stub_log)) == 1
    assert s.received(settle=SETTLE) == []


@pytest.mark.parametrize("mode", ["garbage", "status500", "half_approved", "unknown_status"])
def test_answer_outside_the_contract_is_approval_unavailable(stack, mode):
    s, stub_log = with_stub(stack, mode)
    assert_unavailable(s.call("agent-stub", id_=1), 1)
    assert len(ha.stub_requests(stub_log)) == 1
    assert s.received(settle=SETTLE) == []


def test_unknown_approvals_cluster_is_approval_unavailable(stack):
    policy = ha.approval_policy(cluster="no_such_cluster")
    _, port, log = stack.recorder()
    envoy = stack.envoy(policy, port)
    r = post(envoy.mcp_url, tool_call("start_vm", ARGS, 1), headers_for("agent-no-cluster"))
    assert_unavailable(r, 1)
    assert recorder_lines(log, settle=SETTLE) == []


# ------------------------------------------------------------------------------------------ the callout


@pytest.mark.parametrize("mode,timeout,wait", [("retry", "5s", 0), ("hold", "10s", 9)])
def test_what_the_filter_sends_the_service(stack, mode, timeout, wait):
    s, stub_log = with_stub(stack, "pending", ha.approval_policy(mode=mode, timeout=timeout))
    token = "agent-callout-shape"
    data = assert_required(s.call(token, id_=3), 3, None)
    assert data["approval_id"] == ha.STUB_APPROVAL_ID
    assert data["approval_url"] == f"http://stub.invalid/approvals/{ha.STUB_APPROVAL_ID}"

    (req,) = ha.stub_requests(stub_log)
    assert (req["method"], req["path"]) == ("POST", "/v1/check")
    assert req["headers"]["content-type"] == "application/json"
    assert req["headers"]["host"] == "mcp_approvals"
    body = json.loads(req["body"])
    up = ha.upstream_of(s.envoy)
    assert body == {"key": approval_key(token, "start_vm", ARGS, up), "grant": grant_label(token),
                    "grant_id": token_sha256(token), "tool": "start_vm", "upstream": up, "arguments": ARGS,
                    "request_id": req["headers"]["x-request-id"],
                    "expires_in_seconds": 600, "wait_seconds": wait, "reason": REASON}
    assert re.fullmatch(r"[0-9a-f]{64}", body["key"])
    assert body["request_id"]
    assert s.received(settle=SETTLE) == []


def test_free_text_request_id_is_not_passed_on(stack):
    """A client on a trusted address can set x-request-id itself; the approver's page shows it, so
    anything but a plain token is sent as "" (and not as a header)."""
    s, stub_log = with_stub(stack, "pending", ha.approval_policy())
    headers = {**headers_for("agent-rid"), "x-request-id": "PRE-APPROVED by security team, click Approve"}
    r = post(s.envoy.mcp_url, tool_call("start_vm", ARGS, 5), headers)
    assert assert_required(r, 5, None)["approval_id"] == ha.STUB_APPROVAL_ID
    (req,) = ha.stub_requests(stub_log)
    assert json.loads(req["body"])["request_id"] == ""
    assert "x-request-id" not in req["headers"]


def test_configured_path_authority_and_defaults(stack):
    """path and authority as configured; approval_timeout default 10m; no reason: none sent; a call
    without `arguments` is asked about with {}."""
    policy = ha.approval_policy({"start_vm": ha.approval_tool(timeout=None, reason=None)}, path="/hooks/check",
                                authority="approvals.internal", timeout=None)
    s, stub_log = with_stub(stack, "pending", policy)
    body = b'{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"start_vm"}}'
    r = post(s.envoy.mcp_url, body, headers_for("agent-defaults"))
    assert r.error["code"] == -31007
    assert r.error["data"]["approval_id"] == ha.STUB_APPROVAL_ID
    (req,) = ha.stub_requests(stub_log)
    assert (req["path"], req["headers"]["host"]) == ("/hooks/check", "approvals.internal")
    sent = json.loads(req["body"])
    assert (sent["arguments"], sent["expires_in_seconds"], sent["wait_seconds"]) == ({}, 600, 0)
    assert "reason" not in sent


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


# ------------------------------------------------------------------------------------------ logs and metrics


@pytest.mark.parametrize("log_level", ["info", "debug"])
def test_argument_values_never_reach_envoys_log(stack, log_level):
    """Not at info (what `make run` uses), nor at debug, where Envoy also logs the callout's headers
    (and the client's, so the bearer token is checked at info only)."""
    s = with_service(stack, log_level=log_level)
    token = "agent-secret-args"
    secret = {"node": "pve2", "vmid": 200, "note": "SECRET-ARG-VALUE-123"}
    p = assert_required(s.call(token, secret, id_=1), 1, s.svc.url)
    s.svc.approve(p["approval_id"], "fine")
    assert is_result(s.call(token, secret, id_=2), 2)
    q = assert_required(s.call(token, secret, id_=3), 3, s.svc.url)
    s.svc.deny(q["approval_id"], "no more")
    s.call(token, secret, id_=4)
    recorded_rid = s.svc.get(p["approval_id"])["request_id"]
    s.svc.stop()
    assert_unavailable(s.call(token, secret, id_=5), 5)

    s.envoy.stop()  # flushes the access log
    log = s.envoy.log_text()
    assert "SECRET-ARG-VALUE-123" not in log
    if log_level == "info":
        assert token not in log  # at debug Envoy itself prints request headers, Authorization included
    # The approval service recorded Envoy's request id of the call it was asked about.
    rids = [rec["rid"] for rec in access_records(log)]
    assert len(rids) == 5
    assert recorded_rid == rids[0]
    decisions = [rec["mcp_decision"] for rec in access_records(log)]
    assert decisions == ["approval_required", "approved", "approval_required", "approval_denied",
                         "approval_unavailable"]


def test_metrics_count_each_outcome_exactly(stack):
    s = with_service(stack)
    token = "agent-metrics"
    a = assert_required(s.call(token, id_=1), 1, s.svc.url)               # required 1
    assert_required(s.call(token, id_=2), 2, s.svc.url)                    # required 2 (same pending)
    s.svc.approve(a["approval_id"])
    assert is_result(s.call(token, id_=3), 3)                              # approved 1
    other = {"node": "pve1", "vmid": 102}
    b = assert_required(s.call(token, other, id_=4), 4, s.svc.url)        # required 3
    s.svc.deny(b["approval_id"])
    s.call(token, other, id_=5)                                             # denied 1
    s.call(token, other, id_=6)                                             # denied 2
    s.svc.stop()
    assert_unavailable(s.call(token, {"node": "pve1", "vmid": 101}, id_=7), 7)  # unavailable 1
    assert is_result(s.call(token, {}, id_=8, tool="list_vms"), 8)

    samples = prometheus(s.envoy)
    names = ["allowed", "approved", "approval_required", "approval_denied", "approval_unavailable", "denied"]
    got = {n: samples.get(f"mcp_policy_{n}_total{{}}") for n in names}
    assert got == {"allowed": 1, "approved": 1, "approval_required": 3, "approval_denied": 2,
                   "approval_unavailable": 1, "denied": 0}, sorted(k for k in samples if "mcp_policy" in k)
    per_tool = prom_family(samples, "mcp_policy_tool_decisions_total")
    start_vm = {k: v for k, v in per_tool.items() if 'mcp_tool="start_vm"' in k and v}
    assert start_vm == {'{mcp_tool="start_vm",mcp_decision="approved"}': 1,
                        '{mcp_tool="start_vm",mcp_decision="approval_required"}': 3,
                        '{mcp_tool="start_vm",mcp_decision="approval_denied"}': 2,
                        '{mcp_tool="start_vm",mcp_decision="approval_unavailable"}': 1}, per_tool


def test_forged_checks_are_refused_by_the_real_service(stack):
    """Red-team finding: anyone who reached /v1/check could show the approver one set of arguments
    under the key of another call. The service recomputes the key from grant_id, tool and arguments;
    /v1/check lives only on the --check-listen port and takes only application/json."""
    s = with_service(stack)
    token = "agent-forger"
    real = {"node": "pve1", "vmid": 100}
    shown = {"node": "pve2", "vmid": 202}
    up = ha.upstream_of(s.envoy)
    forged = {"key": approval_key(token, "start_vm", real, up), "grant": grant_label(token),
              "grant_id": token_sha256(token), "tool": "start_vm", "upstream": up, "arguments": shown,
              "request_id": "",
              "expires_in_seconds": 604800, "wait_seconds": 0, "reason": "pre-approved"}
    check_url = f"http://{HOST}:{s.svc.check_port}/v1/check"
    r = post(check_url, json.dumps(forged).encode(), {"content-type": "application/json"})
    assert (r.status, r.json()) == (400, {"error": "key does not match grant_id, upstream, tool and arguments"})
    honest = {**forged, "key": approval_key(token, "start_vm", shown, up)}
    r = post(check_url, json.dumps(honest).encode(), {"content-type": "text/plain"})
    assert r.status == 415
    r = post(f"{s.svc.url}/v1/check", json.dumps(honest).encode(), {"content-type": "application/json"})
    assert r.status == 404, "the page's listener does not serve /v1/check"
    assert s.svc.pending() == []
    # The real call was never approved: through Envoy it still needs an approval.
    assert_required(s.call(token, real, id_=1), 1, s.svc.url)
    assert s.received(settle=SETTLE) == []
