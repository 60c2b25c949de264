"""Shared parts of the approval tests (tests/envoy/test_approval.py and test_approval_failures.py):
the call they ask about, the setup of one test (Envoy with `require_approval`, the approval service or
a stub of it, the recorder behind) and the exact replies of each outcome (-31007, -31008, -31009)."""

from __future__ import annotations

import hashlib
import re

from testkit import approvals as ha
from testkit.jsonrpc import Reply, headers_for, post, tool_call
from testkit.logs import token_sha256
from testkit.stack import Stack
from testkit.upstream import recorder_lines, recorder_reply

REASON = "starting a VM costs money"
ARGS = {"node": "pve2", "vmid": 200}
ID_RE = re.compile(r"apr_[0-9A-Za-z]{26}")
SETTLE = 0.3
# approval_unavailable is answered like limiter_unavailable: HTTP 200, retry-after: 1 (crates/core/src/pipeline/approval.rs
# on_approval_answer), not 503: the filter answers 200 like its other refusals.
UNAVAILABLE_STATUS = 200


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
