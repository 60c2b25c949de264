"""Tier 2: cluster-wide limits (the rate limit service): real Envoys (2 workers each), real
mcp-ratelimit instances, one real Redis, upstream tests/cases/recorder.py; on both builds of the
filter (the native build makes the gRPC call as an HTTP/2 callout; tests/envoy/test_rls_answers.py
has the answers the real service never gives).

- Two Envoys, one quota: 200 parallel calls of one grant split across both Envoys (each asking its
  own mcp-ratelimit instance) admit exactly 10, and the upstream receives exactly 10; a second grant
  keeps its own 10; a `global` limit is exact across both.
- Restarts: an Envoy, then a service instance, restart; the counts survive (in Redis).
- Failure modes: `deny` answers `limiter_unavailable` within the timeout with nothing upstream for
  a cluster with no endpoint, an endpoint that accepts and never answers, and a missing cluster;
  `allow` forwards and counts; Redis stopped and started again: the service answers again by itself.
- Batches: 11 calls against max 10 are refused whole; a denied call in a batch consumes nothing; a
  batch counting against more descriptors than the service takes (64) is refused by the filter
  itself, also with `failure_mode: "allow"`, and nothing reaches the service or the upstream.
- Slow Redis (replies delayed 250 ms by a proxy): calls refused `limiter_unavailable` consume
  nothing (the service gives up before the filter's timeout, from Envoy's `grpc-timeout`, and
  takes back what Redis counted); the whole `max` is there afterwards.

Limits use `hour` windows and unique grants per test; the hour edge is avoided (hx.avoid_boundary).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import time
import uuid

import pytest
import yaml

from testkit import approvals as ha
from testkit import rls as hr
from testkit.clock import avoid_boundary
from testkit.envoy import start_envoy, wasm_filter
from testkit.jsonrpc import Reply, headers_for, post, spread_posts, tool_call
from testkit.stats import filter_samples
from testkit.upstream import recorder_lines, recorder_reply

pytestmark = pytest.mark.both_builds

ARGS = {"node": "pve1", "vmid": 100, "command": "uptime"}
TIMEOUT_S = 0.2  # gateway.rate_limit_service.timeout in these tests
# A local reply must come within the timeout; the margin is for a loaded 2-core machine.
WITHIN_S = TIMEOUT_S + 1.5


def exec_limit(max_=10, scope="grant", counter="exec_rate"):
    return {"counter": counter, "window": "hour", "max": max_, "scope": scope}


POLICY = hr.cluster_policy({
    "vm_agent_exec": {"limits": [exec_limit()]},
    "vm_status": {"limits": [exec_limit(25, "global", "status_global")]},
})


def token(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def is_result(r: Reply, id_) -> bool:
    return r.status == 200 and r.body == recorder_reply(id_)


def kind(r: Reply) -> str | None:
    try:
        return r.error["data"]["kind"]
    except Exception:  # noqa: BLE001 - not an error reply
        return None


def upstream(log, tok: str, settle: float = 0.3) -> list[dict]:
    return [e for e in recorder_lines(log, settle=settle)
            if e["headers"].get("authorization") == f"Bearer {tok}"]


spread = spread_posts


@pytest.fixture(scope="module")
def cluster(module_stack):
    """Redis, two mcp-ratelimit instances on it, a recorder, and two Envoys each asking its own
    instance: {stack, redis_port, rls: [a, b], envoys: [a, b], log, upstream_port}."""
    s = module_stack
    _, redis_port = hr.start_redis(s)
    rls = [hr.start_rls(s, redis_port, name="rls-a"), hr.start_rls(s, redis_port, name="rls-b")]
    _, up, log = s.recorder()
    envoys = [s.start_envoy(hr.render(s, POLICY, up, [r.port]), name=f"envoy-{n}") for n, r in zip("ab", rls)]
    return {"stack": s, "redis_port": redis_port, "rls": rls, "envoys": envoys, "log": log, "upstream_port": up}


def test_two_envoys_one_quota_exact_for_grants_and_global(cluster):
    a, b = cluster["envoys"]
    avoid_boundary(3600, margin=30)
    first, second = token("first"), token("second")
    calls = [((a if i % 2 else b).mcp_url, first, tool_call("vm_agent_exec", ARGS, id=i)) for i in range(200)]
    calls += [((b if i % 2 else a).mcp_url, second, tool_call("vm_agent_exec", ARGS, id=1000 + i)) for i in range(30)]
    replies = spread(calls)
    admitted = [i for i, (c, r) in enumerate(zip(calls, replies)) if is_result(r, i if i < 200 else 1000 + i - 200)]
    refused = [r for i, r in enumerate(replies) if i not in admitted]
    assert len([i for i in admitted if i < 200]) == 10
    assert len([i for i in admitted if i >= 200]) == 10, "a second grant keeps its own 10"
    assert {kind(r) for r in refused} == {"rate_limited"}, {(r.status, r.body[:160]) for r in refused}
    r = refused[0]
    assert r.error["code"] == -31002 and r.error["data"]["counter"] == "exec_rate"
    assert r.headers["retry-after"] == str(r.error["data"]["retry_after_seconds"])
    assert 1 <= r.error["data"]["retry_after_seconds"] <= 3600
    # Both Envoys admitted some (the quota is one, not one per Envoy), and the upstream saw exactly 10 + 10.
    assert len(upstream(cluster["log"], first)) == 10
    assert len(upstream(cluster["log"], second)) == 10
    # A global limit: 3 grants × 20 calls over both Envoys, max 25 in all.
    grants = [token("g") for _ in range(3)]
    calls = [((a if i % 2 else b).mcp_url, grants[i % 3], tool_call("vm_status", ARGS, id=i)) for i in range(60)]
    replies = spread(calls)
    ok = [r for i, r in enumerate(replies) if is_result(r, i)]
    assert len(ok) == 25
    assert {kind(r) for r in replies if r not in ok} == {"rate_limited"}
    assert sum(len(upstream(cluster["log"], g, settle=0)) for g in grants) == 25
    for rls in cluster["rls"]:
        assert 'mcp_ratelimit_decisions_total{code="ok"}' in rls.metrics()


def test_counts_survive_an_envoy_restart_and_a_service_restart(cluster):
    s = cluster["stack"]
    a, b = cluster["envoys"]
    avoid_boundary(3600, margin=30)
    tok = token("restart")
    for i in range(6):
        assert is_result(post(a.mcp_url, tool_call("vm_agent_exec", ARGS, id=i), headers_for(tok)), i)
    # Restart Envoy a on the same config.
    a.proc.stop()
    a2 = start_envoy(a.config_path.read_text(), concurrency=2, log_dir=s.log_dir, name=s._unique("envoy-a"))
    s.envoys.append(a2)
    cluster["envoys"][0] = a2
    for i in range(6, 10):
        assert is_result(post(a2.mcp_url, tool_call("vm_agent_exec", ARGS, id=i), headers_for(tok)), i)
    assert kind(post(a2.mcp_url, tool_call("vm_agent_exec", ARGS, id=10), headers_for(tok))) == "rate_limited"
    # Restart service instance b on its ports; Envoy b's calls go to it.
    old = cluster["rls"][1]
    old.proc.stop()
    new = hr.start_rls(s, old.redis_port, port=old.port, metrics_port=old.metrics_port, name="rls-b")
    cluster["rls"][1] = new
    deadline = time.monotonic() + 15
    while True:
        r = post(b.mcp_url, tool_call("vm_agent_exec", ARGS, id=11), headers_for(tok))
        if kind(r) != "limiter_unavailable" or time.monotonic() > deadline:
            break
        time.sleep(0.3)  # Envoy reconnects to the restarted instance
    assert kind(r) == "rate_limited", r.body
    assert len(upstream(cluster["log"], tok)) == 10
    other = token("after-restart")
    assert is_result(post(b.mcp_url, tool_call("vm_agent_exec", ARGS, id=1), headers_for(other)), 1)


def test_batches_refused_whole_and_denied_calls_consume_nothing(cluster):
    a, b = cluster["envoys"]
    avoid_boundary(3600, margin=30)
    tok = token("batch")
    batch = b"[" + b",".join(tool_call("vm_agent_exec", ARGS, id=i) for i in range(11)) + b"]"
    r = post(a.mcp_url, batch, headers_for(tok))
    assert r.status == 200
    items = r.json()
    assert [i["id"] for i in items] == list(range(11))
    assert {i["error"]["data"]["kind"] for i in items} == {"rate_limited"}
    # A batch with a denied call: refused, nothing counted.
    mixed = b"[" + tool_call("vm_agent_exec", ARGS, id=1) + b"," + tool_call("nope", ARGS, id=2) + b"]"
    items = post(b.mcp_url, mixed, headers_for(tok)).json()
    assert [i["error"]["data"]["kind"] for i in items] == ["batch_refused", "denied"]
    assert upstream(cluster["log"], tok) == []
    # So all 10 are still there: a batch of 10 goes through whole.
    ten = b"[" + b",".join(tool_call("vm_agent_exec", ARGS, id=i) for i in range(10)) + b"]"
    r = post(b.mcp_url, ten, headers_for(tok))
    assert r.status == 200 and b"error" not in r.body, r.body[:300]
    assert len(upstream(cluster["log"], tok)) == 1  # one HTTP request carried the batch
    assert kind(post(a.mcp_url, tool_call("vm_agent_exec", ARGS, id=99), headers_for(tok))) == "rate_limited"


@pytest.mark.parametrize("case", ["no_endpoint", "silent_endpoint", "missing_cluster"])
def test_deny_refuses_within_the_timeout_with_nothing_upstream(stack, case):
    _, up, log = stack.recorder()
    silent = hr.SilentServer() if case == "silent_endpoint" else None
    try:
        ports = [silent.port] if silent else []
        cluster = "no_such_cluster" if case == "missing_cluster" else hr.RLS_CLUSTER
        policy = hr.cluster_policy({"vm_agent_exec": {"limits": [exec_limit()]}}, cluster=cluster)
        envoy = stack.start_envoy(hr.render(stack, policy, up, ports))
        tok = token(case)
        for i in range(3):
            t0 = time.monotonic()
            r = post(envoy.mcp_url, tool_call("vm_agent_exec", ARGS, id=i), headers_for(tok), timeout=10)
            elapsed = time.monotonic() - t0
            assert kind(r) == "limiter_unavailable", r.body
            assert r.status == 200 and r.json()["id"] == i and r.error["code"] == -31004
            assert r.headers["retry-after"] == "1"
            assert elapsed < WITHIN_S, f"{case}: answered after {elapsed:.2f} s"
        # A call with no limit is not asked about and passes.
        assert is_result(post(envoy.mcp_url, tool_call("list_vms", {}, id=7), headers_for(tok)), 7)
        listed = hashlib.sha256(tool_call("list_vms", {}, id=7)).hexdigest()
        assert [e["body_sha256"] for e in upstream(log, tok)] == [listed]
        assert filter_samples(envoy)["mcp_policy_limiter_unavailable_total{}"] == 3
    finally:
        if silent:
            silent.close()


def test_allow_forwards_and_counts_limiter_unavailable(stack):
    _, up, log = stack.recorder()
    policy = hr.cluster_policy({"vm_agent_exec": {"limits": [exec_limit(1)]}}, failure_mode="allow")
    envoy = stack.start_envoy(hr.render(stack, policy, up, []))
    tok = token("allow")
    for i in range(3):
        assert is_result(post(envoy.mcp_url, tool_call("vm_agent_exec", ARGS, id=i), headers_for(tok)), i)
    assert len(upstream(log, tok, settle=0)) == 3
    assert filter_samples(envoy)["mcp_policy_limiter_unavailable_total{}"] == 3
    assert filter_samples(envoy)["mcp_policy_allowed_total{}"] == 0


def test_redis_stop_and_start_the_service_answers_again_without_restart(stack):
    redis, redis_port = hr.start_redis(stack, name="redis-flaky")
    rls = hr.start_rls(stack, redis_port, name="rls-flaky")
    _, up, log = stack.recorder()
    policy = hr.cluster_policy({"vm_agent_exec": {"limits": [exec_limit(5)]}})
    envoy = stack.start_envoy(hr.render(stack, policy, up, [rls.port]))
    avoid_boundary(3600, margin=30)
    tok = token("redis")
    call = lambda i: post(envoy.mcp_url, tool_call("vm_agent_exec", ARGS, id=i), headers_for(tok), timeout=10)  # noqa: E731
    assert is_result(call(0), 0)
    redis.stop()
    t0 = time.monotonic()
    r = call(1)
    assert kind(r) == "limiter_unavailable", r.body
    assert time.monotonic() - t0 < WITHIN_S
    assert 'mcp_ratelimit_decisions_total{code="unavailable"} 1' in rls.metrics()
    hr.start_redis(stack, port=redis_port, name="redis-flaky")
    deadline = time.monotonic() + 15
    while kind(r := call(2)) == "limiter_unavailable" and time.monotonic() < deadline:
        time.sleep(0.3)
    assert is_result(r, 2), r.body
    assert rls.proc.running(), "the service was not restarted"
    assert len(upstream(log, tok)) == 2


def test_the_shipped_cluster_bootstrap(stack):
    """envoy/envoy-cluster.yaml with its own policy (only ports and paths replaced): two Envoys, one
    Redis, two instances in its mcp_ratelimit cluster; 12 calls alternating between the Envoys admit
    exactly the policy's 10 per minute."""
    _, redis_port = hr.start_redis(stack)
    rls = [hr.start_rls(stack, redis_port, name="rls-1"), hr.start_rls(stack, redis_port, name="rls-2")]
    _, up, log = stack.recorder()
    shipped = wasm_filter(yaml.safe_load(hr.CLUSTER_YAML.read_text()))["config"]["configuration"]["value"]
    policy = json.loads(shipped)
    assert policy["gateway"]["rate_limit_service"]["cluster"] == hr.RLS_CLUSTER
    envoys = [stack.start_envoy(hr.render(stack, shipped, up, [r.port for r in rls]), name=f"envoy-{n}")
              for n in "12"]
    avoid_boundary(60, margin=10)
    tok = token("shipped")
    replies = [post(envoys[i % 2].mcp_url, tool_call("vm_agent_exec", ARGS, id=i), headers_for(tok)) for i in range(12)]
    assert [is_result(r, i) for i, r in enumerate(replies)] == [True] * 10 + [False] * 2
    assert {kind(r) for r in replies[10:]} == {"rate_limited"}
    assert len(upstream(log, tok)) == 10


def test_approval_is_asked_first_and_only_approved_calls_are_counted(stack):
    """The order with require_approval (README, Cluster-wide limits): pending retries never reach the
    service (nothing in Redis); the approved call is counted; an approved call over the limit is
    refused and its approval is used up (the documented cost)."""

    _, redis_port = hr.start_redis(stack)
    rls = hr.start_rls(stack, redis_port)
    svc = ha.approvals(stack)
    _, up, log = stack.recorder()
    policy = ha.approval_policy(
        {"start_vm": ha.approval_tool(limits=[exec_limit(1, counter="start_rate")])},
        gateway={"rate_limit_service": {"cluster": hr.RLS_CLUSTER, "timeout": "200ms"}})
    envoy = stack.start_envoy(hr.render(stack, policy, up, [rls.port], approvals_port=svc.check_port))
    avoid_boundary(3600, margin=30)
    tok = token("approve")
    keys = lambda: subprocess.run(["redis-cli", "-p", str(redis_port), "DBSIZE"], capture_output=True,  # noqa: E731
                                  text=True, check=True).stdout.strip()
    first = tool_call("start_vm", {"node": "pve1", "vmid": 1}, id=1)
    for _ in range(3):
        assert kind(post(envoy.mcp_url, first, headers_for(tok))) == "approval_required"
    assert keys() == "0", "calls waiting for approval consume nothing"
    (pending,) = svc.wait_pending(1)
    svc.approve(pending["id"])
    assert is_result(post(envoy.mcp_url, first, headers_for(tok)), 1)
    assert keys() == "1"
    second = tool_call("start_vm", {"node": "pve1", "vmid": 2}, id=2)
    assert kind(post(envoy.mcp_url, second, headers_for(tok))) == "approval_required"
    (pending,) = svc.wait_pending(1)
    svc.approve(pending["id"])
    r = post(envoy.mcp_url, second, headers_for(tok))
    assert kind(r) == "rate_limited" and r.error["data"]["counter"] == "start_rate", r.body
    # The approval was used up by the refused call: the next retry asks again.
    assert kind(post(envoy.mcp_url, second, headers_for(tok))) == "approval_required"
    assert len(upstream(log, tok)) == 1


def batch_of(calls: list[bytes]) -> bytes:
    return b"[" + b",".join(calls) + b"]"


def test_a_batch_over_the_descriptor_bound_is_refused_whatever_the_failure_mode(stack):
    """70 calls to 70 tools with limits of their own: 70 descriptors, more than the 64 mcp-ratelimit
    takes in one request. The filter refuses the batch itself (400, each id echoed, −32600
    invalid_request) instead of sending a request the service would reject with INVALID_ARGUMENT,
    which `failure_mode: "allow"` must never turn into forwarding uncounted calls."""
    _, redis_port = hr.start_redis(stack)
    rls = hr.start_rls(stack, redis_port)
    _, up, log = stack.recorder()
    tools = {f"t{i}": {"limits": [exec_limit(5, counter=f"c{i}")]} for i in range(70)}
    policy = hr.cluster_policy(tools, failure_mode="allow")
    envoy = stack.start_envoy(hr.render(stack, policy, up, [rls.port]))
    avoid_boundary(3600, margin=30)
    tok = token("wide")
    r = post(envoy.mcp_url, batch_of([tool_call(f"t{i}", ARGS, id=i) for i in range(70)]), headers_for(tok))
    assert r.status == 400, r.body[:300]
    items = r.json()
    assert [i["id"] for i in items] == list(range(70))
    reason = ("the calls of this request count against 70 rate limits; the rate limit service takes at most 64 in "
              "one request: send fewer calls per batch")
    assert all(i["error"]["code"] == -32600 and i["error"]["data"]["kind"] == "invalid_request"
               and i["error"]["data"]["reason"] == reason for i in items), items[0]
    assert upstream(log, tok) == []
    metrics = rls.metrics()
    assert 'mcp_ratelimit_decisions_total{code="invalid_argument"} 0' in metrics
    assert 'mcp_ratelimit_decisions_total{code="ok"} 0' in metrics, "the service was not asked"
    # 64 descriptors fit: that batch is counted and forwarded.
    r = post(envoy.mcp_url, batch_of([tool_call(f"t{i}", ARGS, id=i) for i in range(64)]), headers_for(tok))
    assert r.status == 200 and b"error" not in r.body, r.body[:300]
    assert len(upstream(log, tok)) == 1
    assert 'mcp_ratelimit_decisions_total{code="ok"} 1' in rls.metrics()


def rls_sample(rls: hr.Rls, key: str) -> float | None:
    for line in rls.metrics().splitlines():
        if line.startswith(key + " "):
            return float(line.split()[-1])
    return None


def test_calls_refused_while_redis_is_slow_consume_nothing(stack):
    """Redis runs every command at once but its replies arrive 250 ms late (a proxy), longer than
    the filter's default 100 ms timeout. Three calls are refused −31004 limiter_unavailable within
    the timeout; once Redis is fast again the whole max (5) is still there: the service answered
    before the filter gave up (Envoy sends its callout timeout as grpc-timeout, and the service
    sees it) and took back what Redis had counted for the refused calls."""
    _, redis_port = hr.start_redis(stack)
    proxy = hr.DelayProxy(redis_port)
    try:
        rls = hr.start_rls(stack, proxy.port, name="rls-slow", extra=("--log-level", "debug"))
        _, up, log = stack.recorder()
        policy = hr.cluster_policy({"vm_agent_exec": {"limits": [exec_limit(5)]}}, timeout="100ms")
        envoy = stack.start_envoy(hr.render(stack, policy, up, [rls.port]))
        avoid_boundary(3600, margin=30)
        call = lambda tok, i: post(envoy.mcp_url, tool_call("vm_agent_exec", ARGS, id=i),  # noqa: E731
                                   headers_for(tok), timeout=10)
        # Another grant first: Redis has the script loaded and the service knows Redis's clock.
        assert is_result(call(token("warm"), 0), 0)
        tok = token("slow")
        proxy.delay = 0.25
        for i in range(3):
            t0 = time.monotonic()
            r = call(tok, i)
            assert kind(r) == "limiter_unavailable" and r.error["code"] == -31004 and r.json()["id"] == i, r.body
            assert time.monotonic() - t0 < WITHIN_S
        proxy.delay = 0.0
        deadline = time.monotonic() + 5
        while (rls_sample(rls, 'mcp_ratelimit_late_decisions_total{result="undone"}') or 0) < 3 \
                and time.monotonic() < deadline:
            time.sleep(0.1)
        replies = [call(tok, 10 + i) for i in range(6)]
        assert [is_result(r, 10 + i) for i, r in enumerate(replies)] == [True] * 5 + [False], \
            [r.body[:120] for r in replies]
        assert kind(replies[5]) == "rate_limited"
        assert len(upstream(log, tok)) == 5
        assert rls_sample(rls, 'mcp_ratelimit_late_decisions_total{result="undone"}') == 3
        # Every request carried Envoy's grpc-timeout, the filter's 100 ms.
        assert rls_sample(rls, 'mcp_ratelimit_grpc_timeout_total{sent="yes"}') == 10
        assert rls_sample(rls, 'mcp_ratelimit_grpc_timeout_total{sent="no"}') == 0
        assert "deciding grpc_timeout=100m wait_ms=50" in rls.proc.log_text()
    finally:
        proxy.close()
