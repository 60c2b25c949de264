"""Tier 2: `require_approval` in real Envoy when the approval cannot be checked, and what it tells the
approval service, with the real mcp-approvals service (services/approvals/API.md) or a stub approval
service, in front of tests/cases/recorder.py.

What reaches the upstream is read from the recorder's log, what the service holds from its bearer
JSON API, what the filter sent it from the stub's log.

- Fail closed (-31009, retry-after: 1): service stopped, a callout timeout, a non-200, garbage, a 200
  without one of the contract's shapes, an approvals cluster Envoy does not know.
- The callout: the check's exact body, the request id only when it is a plain token, the configured
  path and authority.
- Argument values never in Envoy's log; exact metrics; the real service refuses forged checks.
"""

from __future__ import annotations

import json
import re
import time

import pytest

from testkit import approvals as ha
from testkit.jsonrpc import headers_for, post, tool_call
from testkit.logs import access_records, grant_label, token_sha256
from testkit.processes import HOST
from testkit.stats import prom_family, prometheus
from testkit.upstream import recorder_lines
from approval_support import (ARGS, REASON, SETTLE, approval_key, assert_required, assert_unavailable, is_result,
                              with_service, with_stub)


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
