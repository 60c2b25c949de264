"""Tier 2: rate limits in real Envoy with --concurrency 4, upstream tests/cases/recorder.py.

- 200 parallel calls from one grant against max 10: exactly 10 reach the upstream, 190 are refused
  with -31002 `rate_limited`; run with a `minute` window (the seed policy's, away from a minute edge)
  and with an `hour` window (no edge anywhere near).
- Grants do not share quota; a call refused by `all_tools.limits` gives back the unit it took from
  the tool's own limit (and the other way round); a `second` window opens again; `sliding` refuses
  across a window edge where `fixed` admits; the tracked-grant cap; registered grants.

Timing: fixed windows are UTC-aligned, so tests that depend on one window either avoid its edge or
align to a second and check afterwards that their calls stayed inside it (retrying with a fresh
grant if the machine was too slow, never loosening an assertion).
"""

from __future__ import annotations

import hashlib
import time

import httpx
import pytest

from testkit.clock import avoid_boundary, sleep_to_next_second, window_index
from testkit.envoy import POLICY_JSON, Envoy, load_policy
from testkit.jsonrpc import Reply, call_tool, headers_for, parallel_posts, tool_call
from testkit.logs import access_records, token_sha256
from testkit.stats import prometheus
from testkit.upstream import recorder_lines, recorder_reply

SEED = load_policy(POLICY_JSON)
EXEC_ARGS = {"node": "pve1", "vmid": 100, "command": "uptime"}
SETTLE = 0.3
CONCURRENCY = 4
WINDOW_SECONDS = {"second": 1, "minute": 60, "hour": 3600}


def policy_with(tools: dict, **top) -> dict:
    p = {"version": "1", "default": "deny", "tools": {"list_vms": {}, **tools}}
    p.update(top)
    return p


def limit(counter: str, window: str, max_: int, scope: str = "grant", **extra) -> dict:
    return {"counter": counter, "window": window, "max": max_, "scope": scope, **extra}


def sha(body: bytes) -> str:
    return hashlib.sha256(body).hexdigest()


def received(log, bodies=None, token: str | None = None, settle: float = SETTLE) -> list[dict]:
    """Recorder entries, optionally only those whose body is one of `bodies` / sent with `token`."""
    lines = recorder_lines(log, settle=settle)
    if bodies is not None:
        wanted = {sha(b) for b in bodies}
        lines = [e for e in lines if e["body_sha256"] in wanted]
    if token is not None:
        lines = [e for e in lines if e["headers"].get("authorization") == f"Bearer {token}"]
    return lines


def is_result(r: Reply, id_) -> bool:
    return r.status == 200 and r.body == recorder_reply(id_)


def assert_rate_limited(r: Reply, id_, counter: str, rule: str, retry: int | None = None) -> int:
    """`r` is the documented -31002 reply; returns its retry_after_seconds."""
    assert r.status == 200, (r.status, r.body)
    msg = r.json()
    assert msg["id"] == id_
    err = r.error
    assert err["code"] == -31002, err
    data = err["data"]
    assert data["kind"] == "rate_limited"
    assert data["counter"] == counter, data
    assert data["rule"] == rule, data
    got = data["retry_after_seconds"]
    assert type(got) is int and got >= 1, data
    if retry is not None:
        assert got == retry, data
    assert r.headers["retry-after"] == str(got)
    return got


class Client:
    """One keep-alive HTTP/1.1 connection (for calls that must land close together in time)."""

    def __init__(self, url: str):
        self.url = url
        self.http = httpx.Client(timeout=10)

    def call(self, name: str, token: str, id_, arguments=None) -> Reply:
        r = self.http.post(self.url, content=tool_call(name, EXEC_ARGS if arguments is None else arguments, id_),
                           headers=headers_for(token))
        return Reply.of(r)

    def close(self):
        self.http.close()


@pytest.fixture
def client_factory():
    made = []

    def make(url):
        c = Client(url)
        made.append(c)
        return c

    yield make
    for c in made:
        c.close()




def workers_used(envoy: Envoy) -> dict[str, int]:
    conns = envoy.worker_connections()
    assert sorted(conns) == [f"worker_{i}" for i in range(CONCURRENCY)], conns
    return {w: n for w, n in conns.items() if n > 0}


# ------------------------------------------------------------------------------ 200 parallel calls


@pytest.mark.parametrize("window", ["minute", "hour"])
def test_200_parallel_calls_on_a_limit_of_10_admit_exactly_10(stack, window):
    _, port, log = stack.recorder()
    policy = policy_with({"vm_agent_exec": {"limits": [limit("vm_agent_exec_rate", window, 10)]}})
    envoy = stack.envoy(policy, port, concurrency=CONCURRENCY)
    token = f"burst-{window}"
    bodies = [tool_call("vm_agent_exec", EXEC_ARGS, id=i) for i in range(200)]

    avoid_boundary(WINDOW_SECONDS[window], margin=10.0)
    before = window_index(WINDOW_SECONDS[window])
    replies = parallel_posts(envoy.mcp_url, [(token, b) for b in bodies], threads=50)
    assert window_index(WINDOW_SECONDS[window]) == before, "the burst crossed a window edge (machine too slow?)"

    admitted = [i for i, r in enumerate(replies) if is_result(r, i)]
    limited = [i for i, r in enumerate(replies) if i not in admitted]
    assert len(admitted) == 10, [(r.status, r.body[:120]) for r in replies if r.status != 200 or b"-31002" not in r.body][:5]
    assert len(limited) == 190
    for i in limited:
        assert_rate_limited(replies[i], i, "vm_agent_exec_rate", "tools.vm_agent_exec.limits[0]")
    seen = received(log, bodies)
    assert len(seen) == 10
    assert sorted(e["body_sha256"] for e in seen) == sorted(sha(bodies[i]) for i in admitted)

    used = workers_used(envoy)
    assert len(used) > 1, f"all connections went to one worker: {used}"
    samples = prometheus(envoy)
    assert samples["mcp_policy_allowed_total{}"] == 10
    assert samples["mcp_policy_rate_limited_total{}"] == 190
    assert samples["mcp_policy_limiter_unavailable_total{}"] == 0
    assert samples["mcp_policy_cas_retries_exhausted_total{}"] == 0


def test_two_grants_do_not_share_quota(stack):
    _, port, log = stack.recorder()
    policy = policy_with({"vm_agent_exec": {"limits": [limit("vm_agent_exec_rate", "hour", 10)]}})
    envoy = stack.envoy(policy, port, concurrency=CONCURRENCY)
    calls = [(("grant-a" if i % 2 else "grant-b"), tool_call("vm_agent_exec", EXEC_ARGS, id=i)) for i in range(60)]

    avoid_boundary(3600, margin=10.0)
    replies = parallel_posts(envoy.mcp_url, calls, threads=30)

    for token in ("grant-a", "grant-b"):
        mine = [(i, r) for i, ((t, _), r) in enumerate(zip(calls, replies)) if t == token]
        ok = [i for i, r in mine if is_result(r, i)]
        assert len(ok) == 10, token
        for i, r in mine:
            if i not in ok:
                assert_rate_limited(r, i, "vm_agent_exec_rate", "tools.vm_agent_exec.limits[0]")
        assert len(received(log, token=token)) == 10
    assert len(workers_used(envoy)) > 1


def test_call_refused_by_all_tools_gives_back_the_tool_units(stack, client_factory):
    """The tool's own limit is taken first, then `all_tools`: a call refused by `all_tools` must
    return the unit it took from the tool's counter. The tool's limit is global and `all_tools` per
    grant, so other grants can probe the tool's counter after grant A was refused many times:
    if refusals consumed it, grant B would be refused by the tool's limit at once."""
    _, port, log = stack.recorder()
    policy = policy_with({"vm_agent_exec": {"limits": [limit("exec", "hour", 5, "global")]}},
                         all_tools={"limits": [limit("all", "hour", 2, "grant")]})
    envoy = stack.envoy(policy, port, concurrency=CONCURRENCY)
    c = client_factory(envoy.mcp_url)
    all_rule, exec_rule = "all_tools.limits[0]", "tools.vm_agent_exec.limits[0]"
    avoid_boundary(3600, margin=10.0)

    assert [is_result(c.call("vm_agent_exec", "grant-a", i), i) for i in (1, 2)] == [True, True]
    for i in range(3, 9):  # 6 refusals, each after taking (and giving back) one unit of `exec`
        assert_rate_limited(c.call("vm_agent_exec", "grant-a", i), i, "all", all_rule)
    assert [is_result(c.call("vm_agent_exec", "grant-b", i), i) for i in (9, 10)] == [True, True]
    assert_rate_limited(c.call("vm_agent_exec", "grant-b", 11), 11, "all", all_rule)
    assert is_result(c.call("vm_agent_exec", "grant-c", 12), 12)  # exec: 5 of 5
    assert_rate_limited(c.call("vm_agent_exec", "grant-c", 13), 13, "exec", exec_rule)
    assert_rate_limited(c.call("vm_agent_exec", "grant-d", 14), 14, "exec", exec_rule)

    assert len(received(log)) == 5
    samples = prometheus(envoy)
    assert (samples["mcp_policy_allowed_total{}"], samples["mcp_policy_rate_limited_total{}"]) == (5, 9)


def test_call_refused_by_its_tool_limit_does_not_use_all_tools(stack, client_factory):
    """The other direction: refusals by the tool's own limit leave `all_tools` untouched, which
    calls to another tool (counted by `all_tools` only) then show."""
    _, port, log = stack.recorder()
    policy = policy_with({"vm_agent_exec": {"limits": [limit("exec", "hour", 1)]}},
                         all_tools={"limits": [limit("all", "hour", 3)]})
    envoy = stack.envoy(policy, port, concurrency=CONCURRENCY)
    c = client_factory(envoy.mcp_url)
    avoid_boundary(3600, margin=10.0)

    assert is_result(c.call("vm_agent_exec", "g", 1), 1)
    for i in range(2, 7):
        assert_rate_limited(c.call("vm_agent_exec", "g", i), i, "exec", "tools.vm_agent_exec.limits[0]")
    assert is_result(c.call("list_vms", "g", 7, {}), 7)
    assert is_result(c.call("list_vms", "g", 8, {}), 8)
    assert_rate_limited(c.call("list_vms", "g", 9, {}), 9, "all", "all_tools.limits[0]")
    assert len(received(log)) == 3


# ------------------------------------------------------------------------------ windows


def test_second_window_refuses_the_third_call_then_opens_again(stack, client_factory):
    _, port, log = stack.recorder()
    policy = policy_with({"vm_agent_exec": {"limits": [limit("per_second", "second", 2)]}})
    envoy = stack.envoy(policy, port, concurrency=CONCURRENCY)
    c = client_factory(envoy.mcp_url)
    c.call("list_vms", "warm-up", 0, {})  # open the keep-alive connection outside the timed part

    for attempt in range(3):
        token = f"second-{attempt}"
        second = sleep_to_next_second()
        replies = [c.call("vm_agent_exec", token, i) for i in (1, 2, 3)]
        if time.time() >= second + 0.95:
            continue  # the three calls did not fit in one second: try again with a fresh grant
        assert [is_result(r, i) for r, i in zip(replies, (1, 2, 3))] == [True, True, False]
        assert_rate_limited(replies[2], 3, "per_second", "tools.vm_agent_exec.limits[0]", retry=1)
        assert replies[2].headers["retry-after"] == "1"

        sleep_to_next_second()
        assert is_result(c.call("vm_agent_exec", token, 4), 4)
        assert len(received(log, token=token)) == 3
        return
    pytest.fail("three calls over one keep-alive connection never fitted in one second")


def test_sliding_window_admits_max_then_refuses(stack, client_factory):
    _, port, log = stack.recorder()
    policy = policy_with({"vm_agent_exec": {"limits": [limit("slide", "second", 2, algorithm="sliding")]}})
    envoy = stack.envoy(policy, port, concurrency=CONCURRENCY)
    c = client_factory(envoy.mcp_url)
    c.call("list_vms", "warm-up", 0, {})

    for attempt in range(3):
        token = f"sliding-{attempt}"
        t0 = time.monotonic()
        replies = [c.call("vm_agent_exec", token, i) for i in (1, 2, 3)]
        if time.monotonic() - t0 >= 0.9:
            continue
        assert [is_result(r, i) for r, i in zip(replies, (1, 2, 3))] == [True, True, False]
        assert_rate_limited(replies[2], 3, "slide", "tools.vm_agent_exec.limits[0]", retry=1)
        time.sleep(max(0.0, t0 + 1.1 - time.monotonic()))
        assert is_result(c.call("vm_agent_exec", token, 4), 4)
        assert len(received(log, token=token)) == 3
        return
    pytest.fail("three calls over one keep-alive connection never fitted in 0.9 s")


def test_sliding_refuses_across_a_window_edge_where_fixed_admits(stack, client_factory):
    """Two calls late in second S and one early in S+1, less than a second apart: the fixed window
    (new window at S+1) admits the third, the sliding window (2 calls in the last second) refuses it."""
    _, port, log = stack.recorder()
    policy = policy_with({"fixed_tool": {"limits": [limit("fixed", "second", 2)]},
                          "sliding_tool": {"limits": [limit("sliding", "second", 2, algorithm="sliding")]}})
    envoy = stack.envoy(policy, port, concurrency=CONCURRENCY)
    c = client_factory(envoy.mcp_url)
    c.call("list_vms", "warm-up", 0, {})

    for attempt in range(3):
        token = f"edge-{attempt}"
        second = sleep_to_next_second(offset=0.55)
        t0 = time.monotonic()
        first = [c.call(tool, token, i) for tool in ("fixed_tool", "sliding_tool") for i in (1, 2)]
        first_done = time.time()
        time.sleep(max(0.0, second + 1.1 - time.time()))
        fixed3, sliding3 = c.call("fixed_tool", token, 3), c.call("sliding_tool", token, 3)
        if first_done >= second + 1 or time.monotonic() - t0 >= 0.95:
            continue  # the first calls spilled into the next second, or the third came too late
        assert [is_result(r, i) for r, i in zip(first, (1, 2, 1, 2))] == [True] * 4
        assert is_result(fixed3, 3), fixed3.body
        assert_rate_limited(sliding3, 3, "sliding", "tools.sliding_tool.limits[0]", retry=1)
        assert len(received(log, token=token)) == 5
        return
    pytest.fail("the calls never fitted in the timing this test needs")


# ------------------------------------------------------------------------------ grants


def test_tracked_grant_cap_refuses_new_grants_only(stack, client_factory):
    _, port, log = stack.recorder()
    policy = policy_with({"vm_agent_exec": {"limits": [limit("vm_agent_exec_rate", "hour", 10)]}},
                         gateway={"max_tracked_grants": 3})
    envoy = stack.envoy(policy, port, concurrency=CONCURRENCY)
    c = client_factory(envoy.mcp_url)
    avoid_boundary(3600, margin=10.0)

    assert [is_result(c.call("vm_agent_exec", f"cap-{g}", g), g) for g in (1, 2, 3)] == [True] * 3
    r = c.call("vm_agent_exec", "cap-4", 4)
    assert r.status == 200
    assert r.json()["id"] == 4
    err = r.error
    assert err["code"] == -31004
    assert err["data"]["kind"] == "limiter_unavailable"
    assert err["data"]["retry_after_seconds"] == 1
    assert r.headers["retry-after"] == "1"
    assert is_result(c.call("vm_agent_exec", "cap-1", 5), 5)  # an existing grant keeps working
    # The cap is on grants the limiter tracks: a new grant may still call a tool without limits.
    assert is_result(c.call("list_vms", "cap-4", 6, {}), 6)

    assert len(received(log, token="cap-4")) == 1
    assert len(received(log)) == 5
    samples = prometheus(envoy)
    assert samples["mcp_policy_grant_cap_reached_total{}"] == 1
    assert samples["mcp_policy_limiter_unavailable_total{}"] == 1
    assert samples["mcp_policy_tracked_grants{}"] == 3


def test_registered_grant_is_admitted_and_labelled_others_get_401(stack):
    _, port, log = stack.recorder()
    token = "agent-a-token-5f2c"
    policy = policy_with({}, gateway={"grants": [{"sha256": token_sha256(token), "label": "agent-a"}]})
    envoy = stack.envoy(policy, port, concurrency=CONCURRENCY)

    ok = call_tool(envoy.mcp_url, "list_vms", token, {}, id=1)
    assert is_result(ok, 1)
    other = call_tool(envoy.mcp_url, "list_vms", "agent-b-token", {}, id=2)
    assert other.status == 401
    assert other.headers["www-authenticate"] == "Bearer"
    assert other.error["code"] == -31003
    assert other.error["data"]["kind"] == "no_grant"
    assert other.json()["id"] == 2
    assert len(received(log)) == 1

    envoy.stop()  # flushes the access log
    recs = access_records(envoy.log_text())
    assert [(r["mcp_decision"], r["mcp_grant"], r["status"]) for r in recs] == [
        ("allowed", "agent-a", "200"), ("no_grant", "-", "401")]
    assert token not in envoy.log_text()
    assert token_sha256(token) not in envoy.log_text()
