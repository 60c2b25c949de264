"""Tier 2: what operators see: /stats/prometheus counts, the access log's decision fields,
the audit log, and dry-run mode, against the built filter in real Envoy (--concurrency 2).

The upstream is a recorder (same JSONL log as tests/cases/recorder.py) that also answers
`tools/list` with a tool list (`testkit.catalog.start_tools_upstream`), so a forwarded `tools/list` is
a clean `passed` decision. Envoy is stopped before its log is read, which flushes the access log.
"""

from __future__ import annotations

import datetime
import hashlib

import pytest

from testkit.catalog import start_tools_upstream
from testkit.clock import avoid_boundary
from testkit.envoy import POLICY_JSON
from testkit.jsonrpc import Reply, headers_for, post, tool_call
from testkit.logs import TS_RE, access_records, audit_records, grant_label
from testkit.stats import prom_family, prometheus
from testkit.upstream import recorder_lines, recorder_reply

TOKEN = "tok-obs-Zq9Xv4"
GRANT = grant_label(TOKEN)
SECRET = "s3cr3t-VALUE-7f1c2e"
LABELS = ["allowed", "passed", "denied", "hidden", "rate_limited", "no_grant", "invalid", "limiter_unavailable",
          "would_deny", "approved", "approval_required", "approval_denied", "approval_unavailable"]
NO_APPROVALS = {"approved": 0, "approval_required": 0, "approval_denied": 0, "approval_unavailable": 0}
DEFAULT_REASON = "not allowed by policy (default: deny)"
NO_GRANT_REASON = "a grant is required: send Authorization: Bearer <token>"

POLICY = {
    "version": "1",
    "default": "deny",
    "hide": ["delete_vm"],
    "tools": {
        "list_vms": {},
        "vm_agent_exec": {"limits": [{"counter": "exec", "window": "hour", "max": 1, "scope": "grant"}]},
    },
}


def rpc_post(envoy, body: bytes, token: str | None = TOKEN, rid: str | None = None) -> Reply:
    extra = {"x-request-id": rid} if rid else {}
    return post(envoy.mcp_url, body, headers_for(token, **extra))


def totals(samples: dict[str, float]) -> dict[str, float]:
    return {label: samples[f"mcp_policy_{label}_total{{}}"] for label in LABELS}


def sha(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


# ------------------------------------------------------------------------------ stats


def test_prometheus_counts_after_a_scripted_session(stack):
    _, port, log = start_tools_upstream(stack)
    envoy = stack.envoy(POLICY, port)
    ex = {"node": "pve1", "vmid": 100, "command": "uptime"}

    assert rpc_post(envoy, tool_call("list_vms", {}, id=1)).status == 200
    assert rpc_post(envoy, tool_call("list_vms", {"node": "pve1"}, id=2)).status == 200
    assert rpc_post(envoy, tool_call("delete_vm", {"vmid": 100}, id=3)).error["data"]["rule"] == "hide"
    assert rpc_post(envoy, tool_call("stop_vm", {"vmid": 100}, id=4)).error["data"]["rule"] == "default"
    assert rpc_post(envoy, tool_call("vm_agent_exec", ex, id=5)).body == recorder_reply(5)
    assert rpc_post(envoy, tool_call("vm_agent_exec", ex, id=6)).error["code"] == -31002
    assert rpc_post(envoy, tool_call("list_vms", {}, id=7), token=None).status == 401
    assert rpc_post(envoy, b'{"jsonrpc":"2.0","id":8,').error["code"] == -32700
    listed = rpc_post(envoy, b'{"jsonrpc":"2.0","id":9,"method":"tools/list"}')
    assert [t["name"] for t in listed.json()["result"]["tools"]] == ["list_vms", "vm_agent_exec", "stop_vm"]
    assert len(recorder_lines(log, settle=0.2)) == 4  # 2 list_vms, 1 vm_agent_exec, tools/list

    samples = prometheus(envoy)
    assert totals(samples) == {"allowed": 3, "passed": 1, "denied": 1, "hidden": 1, "rate_limited": 1,
                               "no_grant": 1, "invalid": 1, "limiter_unavailable": 0, "would_deny": 0,
                               **NO_APPROVALS}
    # Per tool, only the decisions its rule can produce exist (crates/core/src/outcome/series.rs), from 0.
    # Every tool `hide` does not hide can be denied (a flow, a pin, a name folding onto a denied one).
    possible = {"delete_vm": ["hidden"], "list_vms": ["allowed", "denied"], "other": ["denied"],
                "vm_agent_exec": ["allowed", "denied", "rate_limited", "limiter_unavailable"]}
    expected = {f'{{mcp_tool="{t}",mcp_decision="{d}"}}': 0.0
                for t, ds in possible.items() for d in ds + ["no_grant", "invalid"]}
    for tool, decision, n in [("list_vms", "allowed", 2), ("list_vms", "no_grant", 1), ("delete_vm", "hidden", 1),
                              ("other", "denied", 1), ("vm_agent_exec", "allowed", 1),
                              ("vm_agent_exec", "rate_limited", 1)]:
        expected[f'{{mcp_tool="{tool}",mcp_decision="{decision}"}}'] = n
    assert prom_family(samples, "mcp_policy_tool_decisions_total") == expected
    assert samples['mcp_policy_tool_decisions_total{mcp_tool="list_vms",mcp_decision="allowed"}'] == 2
    assert samples['mcp_policy_tool_decisions_total{mcp_tool="other",mcp_decision="denied"}'] == 1
    assert samples["mcp_policy_tools_list_removed_total{}"] == 1
    assert samples["mcp_policy_tracked_grants{}"] == 1
    assert samples["mcp_policy_cas_retries_exhausted_total{}"] == 0
    assert samples["mcp_policy_grant_cap_reached_total{}"] == 0


# ------------------------------------------------------------------------------ access log


def test_access_log_has_the_decision_fields_of_allowed_and_denied_calls(stack):
    _, port, log = stack.recorder()
    envoy = stack.envoy(POLICY_JSON.read_text(encoding="utf-8"), port)

    assert rpc_post(envoy, tool_call("list_vms", {"node": "pve1"}, id=1), rid="acc-1").body == recorder_reply(1)
    assert rpc_post(envoy, tool_call("delete_vm", {"vmid": 100}, id=2), rid="acc-2").error["code"] == -31001
    envoy.stop()

    recs = access_records(envoy.log_text())
    assert [r["rid"] for r in recs] == ["acc-1", "acc-2"]
    fields = ["status", "mcp_decision", "mcp_tool", "mcp_grant", "mcp_rule", "mcp_error"]
    assert [{k: r[k] for k in fields} for r in recs] == [
        {"status": "200", "mcp_decision": "allowed", "mcp_tool": "list_vms", "mcp_grant": GRANT,
         "mcp_rule": "tools.list_vms", "mcp_error": "-"},
        {"status": "200", "mcp_decision": "denied", "mcp_tool": "delete_vm", "mcp_grant": GRANT,
         "mcp_rule": "default", "mcp_error": "denied"},
    ]
    assert (recs[0]["details"], recs[0]["up"]) == ("via_upstream", f"127.0.0.1:{port}")
    assert recs[1]["up"] == "-"  # the denied call reached no upstream
    line = next(x for x in envoy.log_text().splitlines() if "rid=acc-2" in x and '"POST /mcp"' in x)
    assert f"mcp_decision=denied mcp_tool=delete_vm mcp_grant={GRANT} mcp_rule=default mcp_error=denied" in line
    assert TOKEN not in envoy.log_text()


# ------------------------------------------------------------------------------ audit log


def test_audit_log_has_one_exact_line_per_decision_without_values_or_tokens(stack):
    _, port, log = start_tools_upstream(stack)
    envoy = stack.envoy({"version": "1", "default": "deny", "tools": {"list_vms": {}, "vm_agent_exec": {
        "limits": [{"counter": "exec", "window": "hour", "max": 1}]}}}, port)
    ex = {"node": "pve1", "vmid": 100, "command": SECRET}
    cut = tool_call("list_vms", {"note": SECRET}, id=6)[:-1]  # one byte short: a parse error
    t0 = datetime.datetime.now(datetime.timezone.utc)

    assert rpc_post(envoy, tool_call("list_vms", {"node": "pve1", "note": SECRET}, id=1), rid="aud-1").status == 200
    assert rpc_post(envoy, tool_call("delete_vm", {"node": "pve1", "vmid": 100, "confirm": SECRET}, id="del-2"),
                    rid="aud-2").error["code"] == -31001
    assert rpc_post(envoy, tool_call("vm_agent_exec", ex, id=3), rid="aud-3").body == recorder_reply(3)
    assert rpc_post(envoy, tool_call("vm_agent_exec", ex, id=4), rid="aud-4").error["code"] == -31002
    assert rpc_post(envoy, tool_call("list_vms", {"note": SECRET}, id=5), token=None, rid="aud-5").status == 401
    assert rpc_post(envoy, cut, rid="aud-6").error["code"] == -32700
    assert rpc_post(envoy, b'{"jsonrpc":"2.0","id":7,"method":"tools/list"}', rid="aud-7").status == 200
    t1 = datetime.datetime.now(datetime.timezone.utc)
    envoy.stop()
    text = envoy.log_text()

    records = audit_records(text)
    assert sorted(r.get("request_id") for r in records) == [f"aud-{i}" for i in range(1, 8)]
    by_rid = {r["request_id"]: r for r in records}
    for r in records:
        assert TS_RE.match(r["ts"]), r["ts"]
        ts = datetime.datetime.strptime(r["ts"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.timezone.utc)
        assert t0 - datetime.timedelta(seconds=2) <= ts <= t1 + datetime.timedelta(seconds=2), r["ts"]
        # Keys in the documented order (absent ones omitted).
        order = ["ts", "decision", "error", "method", "tool", "rule", "reason", "grant", "id", "arg_keys",
                 "request_id"]
        assert list(r) == [k for k in order if k in r], list(r)
    exec_keys = ["node", "vmid", "command"]
    expected = {
        "aud-1": {"decision": "allowed", "method": "tools/call", "tool": "list_vms", "rule": "tools.list_vms",
                  "grant": GRANT, "id": 1, "arg_keys": ["node", "note"]},
        "aud-2": {"decision": "denied", "error": "denied", "method": "tools/call", "tool": "delete_vm",
                  "rule": "default", "reason": DEFAULT_REASON, "grant": GRANT, "id": "del-2",
                  "arg_keys": ["node", "vmid", "confirm"]},
        "aud-3": {"decision": "allowed", "method": "tools/call", "tool": "vm_agent_exec",
                  "rule": "tools.vm_agent_exec", "grant": GRANT, "id": 3, "arg_keys": exec_keys},
        "aud-4": {"decision": "rate_limited", "error": "rate_limited", "method": "tools/call", "tool": "vm_agent_exec",
                  "rule": "tools.vm_agent_exec.limits[0]", "reason": "limit exec (1 per hour) reached",
                  "grant": GRANT, "id": 4, "arg_keys": exec_keys},
        "aud-5": {"decision": "no_grant", "error": "no_grant", "method": "tools/call", "tool": "list_vms",
                  "reason": NO_GRANT_REASON, "id": 5, "arg_keys": ["note"]},
        "aud-6": {"decision": "invalid", "error": "parse_error",
                  "reason": f"unexpected end of input at byte {len(cut)}"},
        "aud-7": {"decision": "passed", "method": "tools/list", "grant": GRANT, "id": 7},
    }
    for rid, want in expected.items():
        got = dict(by_rid[rid])
        del got["ts"]
        assert got == {**want, "request_id": rid}, rid

    assert SECRET not in text, "an argument value reached the log"
    assert TOKEN not in text, "the bearer token reached the log"
    assert hashlib.sha256(TOKEN.encode()).hexdigest() not in text


# ------------------------------------------------------------------------------ dry-run


def test_dry_run_forwards_what_enforce_would_deny_and_counts_it(stack):
    _, port, log = stack.recorder()
    envoy = stack.envoy({"version": "1", "default": "deny", "tools": {"list_vms": {}},
                         "gateway": {"mode": "dry_run"}}, port)
    body = tool_call("delete_vm", {"node": "pve1", "vmid": 100}, id=1)

    r = rpc_post(envoy, body, rid="dry-1")
    assert r.status == 200
    assert r.body == recorder_reply(1)  # the upstream's answer
    assert [e["body_sha256"] for e in recorder_lines(log)] == [sha(body)]
    assert rpc_post(envoy, tool_call("list_vms", {}, id=2), rid="dry-2").body == recorder_reply(2)

    samples = prometheus(envoy)
    assert totals(samples) == {"allowed": 1, "passed": 0, "denied": 0, "hidden": 0, "rate_limited": 0,
                               "no_grant": 0, "invalid": 0, "limiter_unavailable": 0, "would_deny": 1,
                               **NO_APPROVALS}
    assert samples['mcp_policy_tool_decisions_total{mcp_tool="other",mcp_decision="would_deny"}'] == 1
    envoy.stop()
    (rec, _) = access_records(envoy.log_text())
    assert {k: rec[k] for k in ("rid", "mcp_decision", "mcp_tool", "mcp_rule", "mcp_error", "details")} == {
        "rid": "dry-1", "mcp_decision": "would_deny", "mcp_tool": "delete_vm", "mcp_rule": "default",
        "mcp_error": "denied", "details": "via_upstream"}
    (audit, _) = audit_records(envoy.log_text())
    assert (audit["decision"], audit["error"], audit["rule"]) == ("would_deny", "denied", "default")


@pytest.mark.parametrize("gateway", [{"mode": "dry_run", "tool_modes": {"delete_vm": "enforce"}},
                                     {"mode": "enforce", "tool_modes": {"stop_vm": "dry_run"}}],
                         ids=["dry-run-with-one-enforced", "enforce-with-one-dry-run"])
def test_tool_modes_override_the_mode_per_tool(stack, gateway):
    """delete_vm is enforced and stop_vm is dry-run, whichever way round the override is written."""
    _, port, log = stack.recorder()
    envoy = stack.envoy({"version": "1", "default": "deny", "tools": {"list_vms": {}}, "gateway": gateway}, port)
    delete = tool_call("delete_vm", {"vmid": 100}, id=1)
    stop = tool_call("stop_vm", {"vmid": 100}, id=2)

    d = rpc_post(envoy, delete)
    assert (d.status, d.error["code"], d.error["data"]["kind"]) == (200, -31001, "denied")
    assert rpc_post(envoy, stop).body == recorder_reply(2)
    assert [e["body_sha256"] for e in recorder_lines(log, settle=0.2)] == [sha(stop)]
    t = totals(prometheus(envoy))
    assert (t["denied"], t["would_deny"], t["allowed"]) == (1, 1, 0)


def test_dry_run_refusals_consume_no_quota(stack):
    """In dry-run, a call refused by `all_tools` (after taking a unit of the tool's global limit) is
    forwarded but gives the unit back: only the allowed calls count against `exec`, so grants B and
    C are still allowed and D is the first the tool's own limit would refuse."""
    _, port, log = stack.recorder()
    envoy = stack.envoy({"version": "1", "default": "deny", "gateway": {"mode": "dry_run"},
                         "all_tools": {"limits": [{"counter": "all", "window": "hour", "max": 1, "scope": "grant"}]},
                         "tools": {"vm_agent_exec": {"limits": [
                             {"counter": "exec", "window": "hour", "max": 3, "scope": "global"}]}}}, port)
    avoid_boundary(3600, margin=10.0)
    calls = [("a", 1), ("a", 2), ("a", 3), ("a", 4), ("b", 5), ("c", 6), ("d", 7)]
    for grant, i in calls:
        r = post(envoy.mcp_url, tool_call("vm_agent_exec", {}, id=i),
                 headers_for(f"dry-{grant}", **{"x-request-id": f"q-{i}"}))
        assert r.body == recorder_reply(i)  # everything is forwarded in dry-run
    assert len(recorder_lines(log)) == 7
    t = totals(prometheus(envoy))
    assert (t["allowed"], t["would_deny"], t["rate_limited"]) == (3, 4, 0)

    envoy.stop()
    recs = {r["rid"]: r for r in access_records(envoy.log_text())}
    got = [(recs[f"q-{i}"]["mcp_decision"], recs[f"q-{i}"]["mcp_rule"], recs[f"q-{i}"]["mcp_error"]) for _, i in calls]
    assert got == [("allowed", "tools.vm_agent_exec", "-")] + \
        [("would_deny", "all_tools.limits[0]", "rate_limited")] * 3 + \
        [("allowed", "tools.vm_agent_exec", "-")] * 2 + \
        [("would_deny", "tools.vm_agent_exec.limits[0]", "rate_limited")]
