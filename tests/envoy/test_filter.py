"""Tier 2: the built filter in real Envoy (--concurrency 2) in front of tests/cases/recorder.py.

Policies: the shipped envoy/policy.json (default deny; list_vms allowed; vm_agent_exec limited to
10 per UTC minute per grant) and variants of it. Expectations come from the README
("What the filter answers").
"""

from __future__ import annotations

import copy
import hashlib
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from testkit.clock import avoid_minute_boundary, seconds_to_next_minute
from testkit.envoy import POLICY_JSON, bound_session_id, load_policy
from testkit.jsonrpc import call_tool, get, headers_for, post, tool_call
from testkit.upstream import recorder_lines, recorder_reply

# Run on the wasm build and on the native build (tests/conftest.py).
pytestmark = pytest.mark.both_builds

SEED = load_policy(POLICY_JSON)
STOP_REASON = "stopping VMs needs a change ticket"
EXEC_ARGS = {"node": "pve1", "vmid": 100, "command": "uptime"}
SETTLE = 0.2  # time for a request Envoy might still forward to reach the recorder's log


def with_tool(policy: dict, name: str, rule: dict) -> dict:
    p = copy.deepcopy(policy)
    p["tools"][name] = rule
    return p


def upstream_count(log) -> int:
    """Requests the recorder has logged, after waiting for any still in flight."""
    return len(recorder_lines(log, settle=SETTLE))


@pytest.fixture
def seeded(stack):
    """(Envoy under envoy/policy.json, recorder log)."""
    _, port, log = stack.recorder()
    return stack.envoy(POLICY_JSON.read_text(encoding="utf-8"), port), log


# ------------------------------------------------------------------------------------------ allow


def test_allowed_call_reaches_upstream_and_reply_is_untouched(seeded):
    envoy, log = seeded
    body = tool_call("list_vms", {}, id=1)
    # The shipped policy binds sessions: the client holds the id the filter made for its grant, and
    # the server gets its own id back.
    sid = bound_session_id("grant-a", "sess-123")
    r = post(envoy.mcp_url, body, headers_for("grant-a", **{"mcp-session-id": sid}))

    assert r.status == 200
    assert r.body == recorder_reply(1)
    assert r.headers["content-type"] == "application/json"
    (seen,) = recorder_lines(log)
    assert (seen["method"], seen["path"]) == ("POST", "/mcp")
    assert seen["body_sha256"] == hashlib.sha256(body).hexdigest()
    assert seen["body_len"] == len(body)
    assert seen["headers"]["authorization"] == "Bearer grant-a"
    assert seen["headers"]["mcp-session-id"] == "sess-123"


def test_get_with_grant_is_forwarded(seeded):
    envoy, log = seeded
    r = get(envoy.mcp_url, {"accept": "text/event-stream", "authorization": "Bearer grant-a"})
    assert r.status == 202  # the recorder's answer to a request without a JSON-RPC body
    (seen,) = recorder_lines(log)
    assert (seen["method"], seen["path"], seen["body_len"]) == ("GET", "/mcp", 0)


# ------------------------------------------------------------------------------------------ deny


def test_unlisted_tool_is_denied_and_never_reaches_upstream(seeded):
    envoy, log = seeded
    assert call_tool(envoy.mcp_url, "list_vms", "grant-a").status == 200
    before = upstream_count(log)
    assert before == 1

    r = call_tool(envoy.mcp_url, "delete_vm", "grant-a", {"node": "pve1", "vmid": 102}, id=7)

    assert r.status == 200
    assert r.headers["content-type"] == "application/json"
    err = r.error
    assert err["code"] == -31001
    assert err["data"]["kind"] == "denied"
    assert err["data"]["tool"] == "delete_vm"
    msg = r.json()
    assert msg["jsonrpc"] == "2.0"
    assert msg["id"] == 7
    assert upstream_count(log) == before


def test_id_is_echoed_byte_for_byte(seeded):
    """The id's raw JSON text comes back unchanged, escapes and all."""
    envoy, _ = seeded
    raw_id = rb'"req-\u00e9\/7"'
    body = b'{"jsonrpc":"2.0","id":' + raw_id + b',"method":"tools/call","params":{"name":"delete_vm","arguments":{}}}'
    r = post(envoy.mcp_url, body, headers_for("grant-a"))
    assert r.json()["id"] == "req-\u00e9/7"
    assert raw_id in r.body, r.body


def test_denial_body_matches_documented_example(seeded):
    """The README's denial body example ("Try it"), verbatim but for the id."""
    envoy, _ = seeded
    r = call_tool(envoy.mcp_url, "delete_vm", "grant-a", id=7)
    assert r.json() == {"jsonrpc": "2.0", "id": 7, "error": {
        "code": -31001, "message": "tool 'delete_vm' denied: not allowed by policy (default: deny)",
        "data": {"kind": "denied", "tool": "delete_vm", "reason": "not allowed by policy (default: deny)",
                 "rule": "default"}}}


def test_deny_rule_carries_its_reason(stack):
    _, port, log = stack.recorder()
    envoy = stack.envoy(with_tool(SEED, "stop_vm", {"action": "deny", "reason": STOP_REASON}), port)

    r = call_tool(envoy.mcp_url, "stop_vm", "grant-a", {"node": "pve1", "vmid": 100}, id=3)

    assert r.status == 200
    err = r.error
    assert r.json()["id"] == 3
    assert err["code"] == -31001
    assert err["data"]["kind"] == "denied"
    assert err["data"]["tool"] == "stop_vm"
    assert err["data"]["reason"] == STOP_REASON
    assert STOP_REASON in err["message"]
    assert upstream_count(log) == 0


# ------------------------------------------------------------------------------------------ grants


@pytest.mark.parametrize("authorization", [None, "Basic dXNlcjpwdw==", "Bearer"],
                         ids=["missing", "basic", "bearer-without-token"])
def test_call_without_bearer_grant_is_401(seeded, authorization):
    envoy, log = seeded
    headers = headers_for(None)
    if authorization is not None:
        headers["authorization"] = authorization

    r = post(envoy.mcp_url, tool_call("list_vms", {}, id=5), headers)

    assert r.status == 401
    assert r.headers["www-authenticate"] == "Bearer"
    assert r.headers["content-type"] == "application/json"
    assert r.error["code"] == -31003
    assert r.error["data"]["kind"] == "no_grant"
    assert r.json()["id"] == 5
    assert upstream_count(log) == 0


def test_get_without_grant_is_401_with_null_id(seeded):
    envoy, log = seeded
    r = get(envoy.mcp_url, {"accept": "text/event-stream"})
    assert r.status == 401
    assert r.error["code"] == -31003
    assert r.error["data"]["kind"] == "no_grant"
    assert r.json()["id"] is None
    assert upstream_count(log) == 0


# ------------------------------------------------------------------------------------------ limits


def _burst(envoy, token: str, n: int, first_id: int = 1):
    avoid_minute_boundary()
    return [call_tool(envoy.mcp_url, "vm_agent_exec", token, EXEC_ARGS, id=first_id + i) for i in range(n)]


def test_eleventh_call_in_a_minute_is_rate_limited_per_grant(seeded):
    envoy, log = seeded
    replies = _burst(envoy, "grant-burst", 11)

    assert [r.status for r in replies[:10]] == [200] * 10
    assert [r.body for r in replies[:10]] == [recorder_reply(i) for i in range(1, 11)]
    assert upstream_count(log) == 10

    limited = replies[10]
    expected_retry = seconds_to_next_minute()
    assert limited.status == 200
    assert limited.error["code"] == -31002
    assert limited.json()["id"] == 11
    data = limited.error["data"]
    assert data["kind"] == "rate_limited"
    assert data["tool"] == "vm_agent_exec"
    retry = data["retry_after_seconds"]
    assert type(retry) is int and 1 <= retry <= 60, retry
    assert abs(retry - expected_retry) <= 2, (retry, expected_retry)
    assert limited.headers["retry-after"] == str(retry)
    assert upstream_count(log) == 10

    other = call_tool(envoy.mcp_url, "vm_agent_exec", "grant-other", EXEC_ARGS, id=12)
    assert other.status == 200
    assert other.body == recorder_reply(12)
    assert upstream_count(log) == 11

    again = call_tool(envoy.mcp_url, "vm_agent_exec", "grant-burst", EXEC_ARGS, id=13)
    assert again.json()["error"]["code"] == -31002
    assert upstream_count(log) == 11


def test_rate_limited_body_matches_documented_example(seeded):
    """The whole rate-limited body, but for the retry time (README, "What the filter answers", row 12)."""
    envoy, _ = seeded
    limited = _burst(envoy, "grant-doc", 11)[10].json()
    retry = limited["error"]["data"]["retry_after_seconds"]
    reason = "limit vm_agent_exec_rate (10 per minute) reached"
    assert limited == {"jsonrpc": "2.0", "id": 11, "error": {
        "code": -31002, "message": f"tool 'vm_agent_exec' rate limited: {reason}; retry in {retry} s",
        "data": {"kind": "rate_limited", "tool": "vm_agent_exec", "reason": reason, "retry_after_seconds": retry,
                 "counter": "vm_agent_exec_rate", "rule": "tools.vm_agent_exec.limits[0]"}}}


BURST = 20


def _concurrent_calls(url: str, token: str, n: int) -> list:
    """`n` vm_agent_exec calls with one grant, released at once from `n` threads (own connections)."""
    barrier = threading.Barrier(n)

    def one(i):
        barrier.wait()
        return call_tool(url, "vm_agent_exec", token, EXEC_ARGS, id=i)

    with ThreadPoolExecutor(max_workers=n) as pool:
        return list(pool.map(one, range(n)))


@pytest.mark.parametrize("round_", range(3))
def test_concurrent_burst_never_over_admits(seeded, round_):
    """Both workers count into one shared counter: of 20 simultaneous calls exactly 10 pass, the
    rest are rate limited, or refused fail-closed (-31004) when the limiter cannot count, which
    consumes no quota."""
    envoy, log = seeded
    avoid_minute_boundary()
    replies = _concurrent_calls(envoy.mcp_url, f"grant-race-{round_}", BURST)
    codes = [None if "result" in r.json() else r.error["code"] for r in replies]
    unavailable = codes.count(-31004)
    allowed = codes.count(None)
    assert sorted(set(codes) - {None}) in ([-31002], [-31002, -31004], [-31004]), codes
    assert allowed == min(10, BURST - unavailable), codes
    assert upstream_count(log) == allowed
    workers = envoy.worker_connections()
    assert sorted(workers) == ["worker_0", "worker_1"] and min(workers.values()) > 0, workers


# ------------------------------------------------------------------------------------------ config


def _limit(**overrides) -> dict:
    limit = {"counter": "vm_agent_exec_rate", "window": "minute", "max": 10, "scope": "grant"}
    limit.update(overrides)
    return with_tool(SEED, "vm_agent_exec", {"limits": [limit]})


def test_seed_policy_starts_under_the_same_harness(stack):
    """Control for the refusals below: only the policy differs between them and a working Envoy."""
    assert stack.envoy_expect_failure(SEED).returncode is None


@pytest.mark.parametrize("policy, names", [
    ({"version": "1", "default": "deny", "tools": {"x": {"actoin": "deny"}}}, "tools.x"),
    (_limit(window="fortnight"), "limits[0].window"),
    (_limit(max=0), "limits[0].max"),
    ('{"version": "1", "default": "deny",', None),
], ids=["unknown-field", "bad-window", "zero-max", "not-json"])
def test_invalid_policy_stops_envoy_and_names_the_field(stack, policy, names):
    ended = stack.envoy_expect_failure(policy)
    assert ended.returncode == 1, ended.log[-2000:]
    # Envoy's words: the filter refused its config.
    refused = {"wasm": "Unable to create Wasm plugin mcp_policy", "native": "Failed to initialize dynamic module"}
    assert refused[stack.build] in ended.log
    if names is not None:
        assert names in ended.log, ended.log[-2000:]


# ------------------------------------------------------------------------------------------ logs


def test_access_log_records_decisions_but_never_the_token(seeded):
    """The shipped access log format carries the filter's decision and tool; the grant only hashed."""
    envoy, _ = seeded
    token = "tok-SECRET-d41d8cd9"
    assert call_tool(envoy.mcp_url, "list_vms", token).status == 200
    assert call_tool(envoy.mcp_url, "delete_vm", token).status == 200
    assert call_tool(envoy.mcp_url, "list_vms", None).status == 401
    envoy.stop()  # flushes the access log
    lines = [line for line in envoy.log_text().splitlines() if '"POST /mcp"' in line]
    fields = [dict(f.split("=", 1) for f in line.split() if f.startswith("mcp_")) for line in lines]
    assert [f["mcp_decision"] for f in fields] == ["allowed", "denied", "no_grant"]
    assert [f["mcp_tool"] for f in fields[:2]] == ["list_vms", "delete_vm"]
    assert [f["mcp_grant"].startswith("sha256:") for f in fields] == [True, True, False]
    assert fields[0]["mcp_grant"] == fields[1]["mcp_grant"]
    assert token not in envoy.log_text()
    assert "SECRET" not in envoy.log_text()
