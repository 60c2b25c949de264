"""Tier 2: `gateway.audit` in real Envoy: `log` writes the audit record as an info line,
`access_log` puts the same record, byte for byte, into the filter-state value `wasm.mcp_audit` that
envoy/envoy.yaml's access log prints as its last field (`audit=`), and `off` writes it nowhere.

The same scripted calls (same tokens, JSON-RPC ids and `x-request-id`s) go through three Envoys that
differ only in `gateway.audit`. Each Envoy has its own shared data, so the rate-limited call is
refused in each. The records can then differ only in `ts`, the time of the decision: it is checked
for its format and replaced by a placeholder; every other byte is compared. Envoy is stopped before
its log is read, which flushes the access log.
"""

from __future__ import annotations

import json
import re

from testkit import clock
from testkit.jsonrpc import headers_for, post, tool_call
from testkit.logs import TS_RE, access_audits, access_records, audit_texts

TOKEN = "tok-audit-modes-8Qw2"
SECRET = "s3cr3t-AUDIT-4b1d"
TS_FIELD = re.compile(r'^\{"ts":"([^"]*)"')


def policy(audit: str | None, filter_state: bool | None = None) -> dict:
    gateway = {} if audit is None else {"audit": audit}
    if filter_state is not None:
        gateway["filter_state"] = filter_state
    return {
        "version": "1",
        "default": "deny",
        "tools": {
            "list_vms": {},
            "vm_agent_exec": {"limits": [{"counter": "exec", "window": "day", "max": 1}]},
        },
        "gateway": gateway,
    }


def script(envoy) -> list[int]:
    """Seven decisions of different kinds; returns the HTTP statuses."""
    ex = {"node": "pve1", "vmid": 100, "command": SECRET}
    calls = [
        (tool_call("list_vms", {"node": "pve1", "note": SECRET}, id=1), TOKEN),  # allowed
        (tool_call("delete_vm", {"vmid": 100, "confirm": SECRET}, id="del-2"), TOKEN),  # denied
        (tool_call("vm_agent_exec", ex, id=3), TOKEN),  # allowed, counted
        (tool_call("vm_agent_exec", ex, id=4), TOKEN),  # rate_limited
        (tool_call("list_vms", {}, id=5), None),  # no_grant
        (tool_call("list_vms", {"note": SECRET}, id=6)[:-1], TOKEN),  # invalid: one byte short
        (b'{"jsonrpc":"2.0","id":7,"method":"ping"}', TOKEN),  # passed
    ]
    return [post(envoy.mcp_url, body, headers_for(tok, **{"x-request-id": f"am-{i}"})).status
            for i, (body, tok) in enumerate(calls, start=1)]


def without_ts(record: str) -> str:
    m = TS_FIELD.match(record)
    assert m and TS_RE.match(m.group(1)), record
    return '{"ts":"<ts>"' + record[m.end():]


def run(stack, audit: str | None, port: int, filter_state: bool | None = None) -> str:
    name = f"envoy-{audit}" + ("" if filter_state is None else f"-fs-{str(filter_state).lower()}")
    envoy = stack.envoy(policy(audit, filter_state), port, concurrency=1, name=name)
    assert script(envoy) == [200, 200, 200, 200, 401, 400, 200]
    envoy.stop()
    return envoy.log_text()


def test_access_log_record_is_the_log_line_record_and_off_writes_none(stack):
    clock.avoid_boundary(86_400, 20.0)  # the day's limit must not reset mid-script
    _, port, _ = stack.recorder()
    logged, absent, in_access_log, off = (run(stack, mode, port) for mode in ("log", None, "access_log", "off"))

    # log (and the default): one audit line per decision, and `-` in the access log.
    lines = audit_texts(logged)
    assert len(lines) == 7
    assert [json.loads(x)["request_id"] for x in lines] == [f"am-{i}" for i in range(1, 8)]
    assert [json.loads(x)["decision"] for x in lines] == [
        "allowed", "denied", "allowed", "rate_limited", "no_grant", "invalid", "passed"]
    assert access_audits(logged) == ["-"] * 7
    assert [without_ts(x) for x in audit_texts(absent)] == [without_ts(x) for x in lines]
    assert access_audits(absent) == ["-"] * 7

    # access_log: no audit line; the access log's last field is the same record, byte for byte.
    assert audit_texts(in_access_log) == []
    records = access_audits(in_access_log)
    assert [without_ts(x) for x in records] == [without_ts(x) for x in lines]
    # The other access-log fields are unchanged by the mode.
    assert access_records(in_access_log) == access_records(logged)

    # off: no record anywhere, the decision fields of the access log still there.
    assert audit_texts(off) == []
    assert access_audits(off) == ["-"] * 7
    assert [r["mcp_decision"] for r in access_records(off)] == [
        "allowed", "denied", "allowed", "rate_limited", "no_grant", "invalid", "passed"]

    for text in (logged, absent, in_access_log, off):
        assert SECRET not in text and TOKEN not in text


def test_filter_state_false_skips_the_decision_values_but_not_the_audit_record(stack):
    """`gateway.filter_state: false`: the five per-decision values are not set (the access log's
    fields print `-`), while `gateway.audit: "access_log"` still sets `wasm.mcp_audit`, the same
    record as with the values; statuses and response details are unchanged."""
    clock.avoid_boundary(86_400, 20.0)
    _, port, _ = stack.recorder()
    with_values = run(stack, "access_log", port)
    without = run(stack, "access_log", port, filter_state=False)
    explicit = run(stack, "access_log", port, filter_state=True)

    assert [r["mcp_decision"] for r in access_records(with_values)] == [
        "allowed", "denied", "allowed", "rate_limited", "no_grant", "invalid", "passed"]
    assert access_records(explicit) == access_records(with_values)
    records = access_records(without)
    assert len(records) == 7
    for r in records:
        assert [r[k] for k in ("mcp_decision", "mcp_tool", "mcp_grant", "mcp_rule", "mcp_error")] == ["-"] * 5, r
    # What the values do not govern is unchanged: status, details, and the audit record.
    keep = ("status", "details")
    assert [{k: r[k] for k in keep} for r in records] == [{k: r[k] for k in keep} for r in access_records(with_values)]
    assert [without_ts(x) for x in access_audits(without)] == [without_ts(x) for x in access_audits(with_values)]
    assert SECRET not in without and TOKEN not in without
