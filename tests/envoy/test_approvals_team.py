"""Tier 2: mcp-approvals for a team. Several real `mcp-approvals` processes on one real PostgreSQL
(Debian's, started by testkit/postgres.py in a temporary directory), webhooks to a local
recording receiver, and Envoy with two service instances behind its one approvals cluster.

- Two instances, one database: 50 concurrent identical checks of an approved key spread over both
  give exactly one `approved`; a hold-mode check waiting on A is woken by a decision made on B; an
  approver session created on A works on B and survives a restart of A.
- Webhooks: the receiver sees the open and the decide events (Slack-compatible `text`), never the
  argument values; a receiver that hangs and one that answers 500 slow no check and lose no
  approval, and the deliveries are counted in /metrics.
- The real path: Envoy's cluster has both instances (round robin, one worker); a call approved
  through the API of the instance that opened it goes through on the other; in hold mode, a call
  held on one instance is released by a decision made on the other.
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest
import yaml

from testkit import approvals as ha
from testkit import postgres
from testkit.envoy import APPROVALS_CLUSTER, start_envoy
from testkit.jsonrpc import headers_for, post, tool_call
from testkit.logs import token_sha256
from testkit.processes import HOST, wait_for
from testkit.stack import Stack
from testkit.upstream import Canned, StubUpstream, recorder_lines

AGENT = "team-agent-token-1"
ARGS = {"node": "pve2", "vmid": 321, "secret_value": "s3cr3t-arg-value"}


@pytest.fixture(scope="module")
def pg():
    server = postgres.start_postgres()
    yield server
    server.stop()


def metric(text: str, sample: str) -> float:
    """The value of one exact sample line of a Prometheus text (AssertionError if absent)."""
    for line in text.splitlines():
        if line.startswith(sample + " "):
            return float(line.split()[-1])
    raise AssertionError(f"{sample} not in:\n{text}")


UPSTREAM = {"cluster": "mcp_upstream", "authority": "gw.team:10000", "path": "/mcp"}


def check_body(token: str, arguments: dict, wait: int = 0, tool: str = "start_vm") -> bytes:
    grant_id = token_sha256(token)
    return json.dumps({
        "key": ha.approval_key(grant_id, tool, arguments, UPSTREAM), "grant_id": grant_id, "grant": "sha256:team",
        "tool": tool, "upstream": UPSTREAM, "arguments": arguments, "request_id": "req-team", "expires_in_seconds": 600,
        "wait_seconds": wait, "reason": "needs a human",
    }).encode()


def check(svc: ha.Approvals, body: bytes, timeout: float = 30.0) -> dict:
    req = urllib.request.Request(f"http://{HOST}:{svc.check_port}/v1/check", data=body, method="POST",
                                 headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def two_instances(stack: Stack, pg: postgres.Postgres, **kw) -> tuple[ha.Approvals, ha.Approvals]:
    url = pg.create_database()
    a = ha.approvals(stack, db=url, name="approvals-a", **kw)
    b = ha.approvals(stack, db=url, name="approvals-b", **kw)
    return a, b


def test_single_use_across_two_instances(stack, pg):
    a, b = two_instances(stack, pg)
    body = check_body(AGENT, ARGS)
    opened = check(a, body)
    assert opened["status"] == "pending"
    assert b.approve(opened["approval_id"], "once")["state"] == "approved"
    answers: list[dict | None] = [None] * 50
    barrier = threading.Barrier(50)

    def one(i: int):
        barrier.wait(timeout=30)
        answers[i] = check(a if i % 2 else b, body)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(50)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    statuses = [x["status"] for x in answers]
    assert statuses.count("approved") == 1, statuses
    assert statuses.count("pending") == 49, statuses
    (winner,) = [x for x in answers if x["status"] == "approved"]
    assert winner["approval_id"] == opened["approval_id"]
    # The 49 others share one new pending approval (one pending per key across instances).
    assert len({x["approval_id"] for x in answers if x["status"] == "pending"}) == 1
    assert len(a.pending()) == 1 and len(b.pending()) == 1
    consumed = a.listing("consumed")
    assert [c["id"] for c in consumed] == [opened["approval_id"]]
    approved_a = metric(a.metrics(), 'mcp_approvals_checks_total{status="approved"}')
    approved_b = metric(b.metrics(), 'mcp_approvals_checks_total{status="approved"}')
    assert approved_a + approved_b == 1


def test_hold_mode_on_a_is_woken_by_a_decision_on_b(stack, pg):
    a, b = two_instances(stack, pg)
    body = check_body(AGENT, ARGS, wait=60)
    opened = check(a, check_body(AGENT, ARGS))
    result: dict = {}

    def held():
        result["answer"] = check(a, body, timeout=90)
        result["at"] = time.monotonic()

    t = threading.Thread(target=held)
    t.start()
    time.sleep(1.0)
    assert t.is_alive(), "the hold-mode check must wait for a decision"
    decided = time.monotonic()
    b.approve(opened["approval_id"], "from b")
    t.join(30)
    assert result["answer"]["status"] == "approved", result
    assert result["answer"]["note"] == "from b"
    waited = result["at"] - decided
    assert waited < 3.0, f"woken {waited:.2f} s after the decision on the other instance"


def login(svc: ha.Approvals) -> str:
    """Logs in through the page's form; returns the Cookie header value."""
    data = urllib.parse.urlencode({"name": svc.approver, "token": svc.token, "next": "/"}).encode()
    req = urllib.request.Request(svc.url + "/login", data=data, method="POST",
                                 headers={"content-type": "application/x-www-form-urlencoded", "origin": svc.url})

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    opener = urllib.request.build_opener(NoRedirect)
    try:
        opener.open(req, timeout=10)
        raise AssertionError("login did not redirect")
    except urllib.error.HTTPError as e:
        assert e.code == 303, e.code
        return e.headers["set-cookie"].split(";")[0]


def page_status(url: str, cookie: str) -> tuple[int, str]:
    req = urllib.request.Request(url + "/", headers={"cookie": cookie})
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, ""


def test_a_session_from_a_works_on_b_and_survives_a_restart_of_a(stack, pg):
    a, b = two_instances(stack, pg)
    cookie = login(a)
    status, html = page_status(b.url, cookie)
    assert status == 200 and "Sign out" in html, status
    a.stop()
    a2 = ha.restart(stack, a, name="approvals-a2")
    status, html = page_status(a2.url, cookie)
    assert status == 200 and "Sign out" in html, status
    # Without the cookie: the login page (a redirect followed to it).
    status, html = page_status(a2.url, "x=y")
    assert status == 200 and "Sign out" not in html


# ----------------------------------------------------------------------------------- webhooks


WEBHOOK_ANSWERS = {"ok": Canned(200, [], b"ok"), "fail": Canned(500, [], b"ok"), "hang": Canned(None, delay=30)}


class Receiver(StubUpstream):
    """A local webhook receiver (the stub upstream) that records every POST; `mode`: ok (200),
    fail (500), hang (no answer for 30 s)."""

    def __init__(self, mode: str = "ok"):
        answer = WEBHOOK_ANSWERS[mode]
        super().__init__(responder=lambda seen: answer)

    @property
    def url(self) -> str:
        return f"{super().url}/hook"

    @property
    def events(self) -> list[dict]:
        """Every POST received: its body text and content-type."""
        return [{"body": s.body.decode(), "content-type": s.headers.get("content-type")}
                for s in self.requests() if s.method == "POST"]

    def parsed(self) -> list[dict]:
        return [json.loads(e["body"]) for e in self.events]

    def wait(self, n: int, timeout: float = 15.0) -> list[dict]:
        return wait_for(lambda: len(self.parsed()) >= n and self.parsed(), timeout, what=f"{n} webhook posts")


@pytest.fixture
def receivers(stack):
    """Makes webhook receivers, stopped with the stack (after the approval service)."""
    def make(mode: str = "ok") -> Receiver:
        r = Receiver(mode)
        stack.upstreams.append(r)
        return r

    return make


def test_webhooks_get_open_and_decide_events_without_arguments(stack, pg, receivers):
    rec = receivers("ok")
    url = pg.create_database()
    svc = ha.approvals(stack, db=url, extra_args=["--notify-webhook", rec.url])
    opened = check(svc, check_body(AGENT, ARGS))
    svc.deny(opened["approval_id"], "not today")
    events = rec.wait(2)
    time.sleep(0.3)
    assert len(rec.parsed()) == 2
    # Deliveries run concurrently: the order of arrival is not guaranteed (API.md).
    events.sort(key=lambda e: e["event"] != "approval.opened")
    assert [e["event"] for e in events] == ["approval.opened", "approval.denied"]
    first, second = events
    aid = opened["approval_id"]
    assert first["approval"] == {
        "id": aid, "state": "pending", "tool": "start_vm", "grant": "sha256:team", "reason": "needs a human",
        # The server the approval is for; its path (which may hold a credential) only with
        # --notify-include-arguments, as the arguments.
        "upstream": {"cluster": UPSTREAM["cluster"], "authority": UPSTREAM["authority"]},
        "approval_url": f"{svc.url}/approvals/{aid}", "created_at": first["approval"]["created_at"],
        "expires_at": opened["expires_at"], "decided_at": None, "approver": None, "note": "",
    }
    assert first["text"].startswith(
        "MCP approval needed: `start_vm` on `mcp_upstream` for grant sha256:team (needs a human). Expires ")
    assert first["text"].endswith(f"<{svc.url}/approvals/{aid}|Approve or deny>")
    assert second["approval"]["state"] == "denied" and second["approval"]["approver"] == "alice"
    assert second["text"] == (f"MCP approval denied: `start_vm` on `mcp_upstream` for grant sha256:team, by alice: not today. "
                              f"<{svc.url}/approvals/{aid}|Details>")
    for e in rec.events:
        assert "s3cr3t" not in e["body"] and "pve2" not in e["body"], e["body"]
        assert e["content-type"] == "application/json"
    assert 'mcp_approvals_webhook_deliveries_total{result="delivered"} 2' in svc.metrics()


def test_a_hanging_or_failing_webhook_slows_no_check_and_loses_nothing(stack, pg, receivers):
    hang, fail = receivers("hang"), receivers("fail")
    url = pg.create_database()
    svc = ha.approvals(stack, db=url, extra_args=["--notify-webhook", hang.url, "--notify-webhook", fail.url,
                                                  "--notify-timeout", "1s", "--notify-backoff", "100ms"])
    timings = []
    ids = []
    for n in range(5):
        started = time.monotonic()
        out = check(svc, check_body(AGENT, {**ARGS, "vmid": n}))
        timings.append(time.monotonic() - started)
        ids.append(out["approval_id"])
        assert out["status"] == "pending"
    for aid in ids:
        started = time.monotonic()
        svc.approve(aid)
        timings.append(time.monotonic() - started)
    for n in range(5):
        started = time.monotonic()
        assert check(svc, check_body(AGENT, {**ARGS, "vmid": n}))["status"] == "approved"
        timings.append(time.monotonic() - started)
    # Well under the 1 s webhook timeout: nothing waits for the receivers.
    assert max(timings) < 0.5, timings
    # Each of the 10 events (5 opened, 5 approved) reaches each receiver 4 times (1 + 3 retries).
    fail.wait(40, timeout=30)
    hang.wait(40, timeout=30)
    deadline = time.monotonic() + 15
    while 'mcp_approvals_webhook_deliveries_total{result="failed"} 20' not in svc.metrics():
        assert time.monotonic() < deadline, svc.metrics()
        time.sleep(0.2)
    m = svc.metrics()
    assert 'mcp_approvals_webhook_deliveries_total{result="delivered"} 0' in m
    assert 'mcp_approvals_webhook_deliveries_total{result="dropped"} 0' in m
    assert "mcp_approvals_webhook_retries_total 60" in m
    assert len(svc.listing("consumed")) == 5


# ----------------------------------------------------------------------------------- real Envoy


def two_endpoint_config(stack: Stack, policy: dict, upstream_port: int, ports: list[int]) -> str:
    cfg = yaml.safe_load(stack.render(policy, upstream_port, approvals_port=ports[0]))
    (cluster,) = [c for c in cfg["static_resources"]["clusters"] if c["name"] == APPROVALS_CLUSTER]
    (endpoints,) = cluster["load_assignment"]["endpoints"]
    (lb,) = endpoints["lb_endpoints"]
    second = json.loads(json.dumps(lb))
    second["endpoint"]["address"]["socket_address"]["port_value"] = ports[1]
    endpoints["lb_endpoints"] = [lb, second]
    cluster["lb_policy"] = "ROUND_ROBIN"
    return yaml.safe_dump(cfg, sort_keys=False, width=1000)


def test_envoy_with_two_instances_approved_on_one_goes_through_on_the_other(stack, pg):
    a, b = two_instances(stack, pg)
    _, upstream_port, log = stack.recorder()
    policy = ha.approval_policy()
    config = two_endpoint_config(stack, policy, upstream_port, [a.check_port, b.check_port])
    # One worker: the round robin over the two instances is one sequence.
    envoy = start_envoy(config, concurrency=1, log_dir=stack.log_dir)
    stack.procs.append(envoy.proc)
    rounds = 4
    svcs = (a, b)

    def count(svc: ha.Approvals, status: str) -> float:
        return metric(svc.metrics(), f'mcp_approvals_checks_total{{status="{status}"}}')

    for n in range(rounds):
        args = {**ARGS, "vmid": 1000 + n}
        before = [count(s, "pending") for s in svcs]
        first = post(envoy.mcp_url, tool_call("start_vm", args, 1), headers_for(AGENT), timeout=15)
        assert first.error["code"] == -31007, first.body
        aid = re.search(r"apr_[0-9a-z]{26}", first.body.decode()).group(0)
        (opener,) = [i for i, s in enumerate(svcs) if count(s, "pending") > before[i]]
        # Approved through the API of the instance that answered the first call; the round robin
        # sends the retry to the other one.
        approved_before = [count(s, "approved") for s in svcs]
        svcs[opener].approve(aid, f"round {n}")
        second = post(envoy.mcp_url, tool_call("start_vm", args, 2), headers_for(AGENT), timeout=15)
        assert second.status == 200 and "error" not in second.json(), second.body
        gained = [count(s, "approved") - approved_before[i] for i, s in enumerate(svcs)]
        assert gained[opener] == 0 and gained[1 - opener] == 1, (n, opener, gained)
    passed = recorder_lines(log, settle=0.3)
    assert len(passed) == rounds
    assert sum(count(s, "approved") for s in svcs) == rounds


def test_envoy_hold_mode_call_held_on_one_instance_is_released_by_a_decision_on_the_other(stack, pg):
    a, b = two_instances(stack, pg)
    _, upstream_port, log = stack.recorder()
    policy = ha.approval_policy(mode="hold", timeout="20s")
    config = two_endpoint_config(stack, policy, upstream_port, [a.check_port, b.check_port])
    envoy = start_envoy(config, concurrency=1, log_dir=stack.log_dir, name="envoy-hold")
    stack.procs.append(envoy.proc)
    out: dict = {}

    def held():
        r = post(envoy.mcp_url, tool_call("start_vm", ARGS, 1), headers_for(AGENT), timeout=30)
        out["reply"], out["at"] = r, time.monotonic()

    t = threading.Thread(target=held, daemon=True)
    t.start()
    deadline = time.monotonic() + 10
    while not b.pending():
        assert time.monotonic() < deadline
        time.sleep(0.05)
    time.sleep(0.5)
    assert t.is_alive(), "the call is held"
    # The instance holding the call logged its opening; the decision is made on the other one.
    holder = 0 if "approval opened" in a.proc.log_text() else 1
    assert "approval opened" in (a, b)[holder].proc.log_text()
    other = (a, b)[1 - holder]
    (pending,) = other.pending()
    decided = time.monotonic()
    other.approve(pending["id"], "from the other")
    t.join(20)
    reply = out["reply"]
    assert reply.status == 200 and "error" not in reply.json(), reply.body
    assert out["at"] - decided < 3.0
    assert len(recorder_lines(log, settle=0.3)) == 1
    # Held on one instance, released there by the other's decision (LISTEN/NOTIFY).
    approved = [metric(s.metrics(), 'mcp_approvals_checks_total{status="approved"}') for s in (a, b)]
    assert approved[holder] == 1 and approved[1 - holder] == 0, (holder, approved)
