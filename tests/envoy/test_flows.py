"""Tier 2: flows (rules across calls) in real Envoy with 4 workers, in front of the stub upstream.

What docs/src/policy/flows.md promises:
- a grant that read a secret (`tools.read_secret.marks`) is refused the flow's tools with −31014
  `flow_denied`, naming the flow and the mark, with `retry_after_seconds` (when it lifts) and a
  `retry-after` header; other grants are not affected;
- a result matching `tools.query_db.result.mark_if` (a social security number) marks its grant `pii`;
- once the mark is `for` old, the tools are allowed again;
- the mark is recorded before the marking result reaches the client: a call that starts after a
  marking call completed is never forwarded, on any worker;
- a marking call whose SSE reply ends without its response (its result left to be replayed on
  another stream) marks its grant all the same; one answered with an error does not;
- so does one whose reply is reset before its end, only acknowledges it (202, the 2024-11-05
  HTTP+SSE transport, with or without a body), or is refused by the filter (the client may fetch
  the result on another stream);
- marks and flow denials have audit records and counters; under dry run, `would_deny`.
"""

from __future__ import annotations

import http.client
import json
import random
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from testkit.jsonrpc import headers_for, post, tool_call
from testkit.logs import audit_records
from testkit.stats import filter_samples
from testkit.upstream import Canned, json_canned, sse_canned

# Run on the wasm build and on the native build (tests/conftest.py).
pytestmark = pytest.mark.both_builds

FLOW = "no-egress-after-secrets"
REASON = "no outbound tools for 10 minutes after reading secrets"
POLICY = {
    "version": "1",
    "default": "deny",
    "tools": {
        "read_secret": {"marks": ["secret"]},
        "query_db": {"result": {"mark_if": [{"regex": "\\b\\d{3}-\\d{2}-\\d{4}\\b", "mark": "pii"}]}},
        "peek": {"marks": ["glance"]},
        "http_post": {}, "send_email": {}, "list_files": {},
    },
    "flows": [
        {"name": FLOW, "if_marked": ["secret", "pii"], "deny": ["http_post", "send_email"], "for": "10m",
         "reason": REASON},
        {"name": "short", "if_marked": ["glance"], "deny": ["list_files"], "for": "2s"},
    ],
}


@pytest.fixture(scope="module")
def envoy(module_stack, stub):
    return module_stack.envoy(POLICY, stub.port, concurrency=4, name="envoy-flows")


def call(envoy, token: str, tool: str, id_=1, path: str = "/mcp"):
    r = post(envoy.url + path, tool_call(tool, {"url": "https://example.com"}, id_), headers_for(token))
    return r, json.loads(r.body)


def forwarded(body: dict) -> bool:
    return body.get("result", {}).get("content") == [{"type": "text", "text": "ok"}]


def test_a_secret_read_denies_egress_to_its_grant_only(envoy):
    r, b = call(envoy, "grant-a", "http_post", 1)
    assert r.status == 200 and forwarded(b), b
    r, b = call(envoy, "grant-a", "read_secret", 2)
    assert forwarded(b), b
    r, b = call(envoy, "grant-a", "http_post", 3)
    assert r.status == 200
    data = b["error"]["data"]
    assert b["error"]["code"] == -31014
    assert (data["kind"], data["tool"], data["flow"], data["mark"], data["rule"], data["reason"]) == (
        "flow_denied", "http_post", FLOW, "secret", "flows[0]", REASON)
    assert 595 <= data["retry_after_seconds"] <= 600
    assert r.headers["retry-after"] == str(data["retry_after_seconds"])
    assert call(envoy, "grant-a", "send_email", 4)[1]["error"]["data"]["kind"] == "flow_denied"
    assert forwarded(call(envoy, "grant-a", "list_files", 5)[1])
    # Grant B, meanwhile: allowed.
    assert forwarded(call(envoy, "grant-b", "http_post", 6)[1])


def test_a_result_carrying_a_social_security_number_marks_pii(envoy, stub):
    clean = {"jsonrpc": "2.0", "id": 7, "result": {"content": [{"type": "text", "text": "3 rows"}]}}
    stub.route("/db-clean", json_canned(clean))
    r, b = call(envoy, "grant-c", "query_db", 7, "/db-clean")
    assert b == clean
    assert forwarded(call(envoy, "grant-c", "http_post", 8)[1])
    ssn = {"jsonrpc": "2.0", "id": 9, "result": {"content": [{"type": "text", "text": "Ann, 078-05-1120"}]}}
    stub.route("/db-ssn", json_canned(ssn))
    r, b = call(envoy, "grant-c", "query_db", 9, "/db-ssn")
    assert b == ssn  # marking changes nothing in the result
    r, b = call(envoy, "grant-c", "http_post", 10)
    assert (b["error"]["data"]["kind"], b["error"]["data"]["mark"]) == ("flow_denied", "pii")


def test_after_the_window_the_tool_is_allowed_again(envoy):
    assert forwarded(call(envoy, "grant-d", "peek", 1)[1])
    r, b = call(envoy, "grant-d", "list_files", 2)
    data = b["error"]["data"]
    assert (data["kind"], data["flow"], data["mark"]) == ("flow_denied", "short", "glance")
    assert 1 <= data["retry_after_seconds"] <= 2
    time.sleep(data["retry_after_seconds"] + 0.2)
    assert forwarded(call(envoy, "grant-d", "list_files", 3)[1])


def test_no_call_slips_past_a_completed_mark_on_any_worker(envoy):
    """100 pairs at once, 10 grants, on 4 workers: a `http_post` that started after a `read_secret`
    of its grant completed is never forwarded."""
    rng = random.Random(29)
    done_at: dict[str, list[float]] = {}
    posts: list[tuple[str, float, bool]] = []
    lock = threading.Lock()

    def pair(i: int) -> None:
        token = f"exact-{i % 10}"
        order = ["read_secret", "http_post"] if rng.random() < 0.5 else ["http_post", "read_secret"]
        for n, tool in enumerate(order):
            started = time.monotonic()
            _, b = call(envoy, token, tool, i * 10 + n)
            ended = time.monotonic()
            with lock:
                if tool == "read_secret":
                    assert forwarded(b), b
                    done_at.setdefault(token, []).append(ended)
                else:
                    posts.append((token, started, forwarded(b)))

    with ThreadPoolExecutor(max_workers=100) as pool:
        list(pool.map(pair, range(100)))
    assert len(posts) == 100
    slipped = [(t, s) for t, s, fwd in posts if fwd and any(d < s for d in done_at.get(t, []))]
    assert slipped == []
    # Every grant read a secret: each post that started after one completed was refused.
    refused = [p for p in posts if not p[2]]
    assert len(refused) >= sum(1 for t, s, _ in posts if any(d < s for d in done_at[t]))
    assert refused


def test_a_marking_call_whose_sse_reply_ends_unanswered_marks(envoy, stub):
    # The server closes the call's stream after its first event: the client polls with a GET and
    # `Last-Event-ID`, where the result is replayed and its call is not known.
    priming = b"id: ev-1\ndata: \n\n"
    path = stub.route("/secret-polled", sse_canned(priming))
    r = post(envoy.url + path, tool_call("read_secret", {}, 51), headers_for("grant-g"))
    assert (r.status, r.body) == (200, priming)
    b = call(envoy, "grant-g", "http_post", 52)[1]
    assert (b["error"]["data"]["kind"], b["error"]["data"]["mark"]) == ("flow_denied", "secret")
    records = [a for a in audit_records(envoy.log_text()) if a.get("event") == "result" and a["id"] == 51]
    assert [(a["kind"], a["mark"], a["rule"], a.get("reason")) for a in records] == [
        ("marked", "secret", "tools.read_secret.marks", None)]
    # Answered on its stream with an error (the tool did not run): no mark.
    error = b'event: message\ndata: {"jsonrpc":"2.0","id":53,"error":{"code":-32603,"message":"no"}}\n\n'
    path = stub.route("/secret-error", sse_canned(priming + error, pieces=2))
    r = post(envoy.url + path, tool_call("read_secret", {}, 53), headers_for("grant-h"))
    assert (r.status, r.body) == (200, priming + error)
    assert forwarded(call(envoy, "grant-h", "http_post", 54)[1])


@pytest.mark.parametrize("reply", ["reset", "202", "202-empty", "refused"])
def test_a_marking_call_whose_reply_is_cut_acknowledged_or_refused_marks(envoy, stub, reply):
    grant, id_ = f"grant-{reply}", 2060 + ["reset", "202", "202-empty", "refused"].index(reply) * 2
    canned = {
        "reset": sse_canned(b"id: ev-1\ndata: \n\n", cut=True),
        "202": Canned(202, [("content-type", "text/plain; charset=utf-8")], b"Accepted"),
        "202-empty": Canned(202, [], b""),
        "refused": Canned(200, [("content-type", "text/html")], b"<p>no</p>"),
    }[reply]
    path = stub.route(f"/secret-{reply}", canned)
    try:
        r = post(envoy.url + path, tool_call("read_secret", {}, id_), headers_for(grant))
        got = (r.status, r.body)
    except (OSError, http.client.HTTPException) as e:
        got = type(e).__name__
    expected = {
        "reset": "IncompleteRead",
        "202": (202, b"Accepted"),
        "202-empty": (202, b""),
    }
    if reply == "refused":
        assert got[0] == 200 and json.loads(got[1])["error"]["data"]["kind"] == "result_refused"
    else:
        assert got == expected[reply]
    # A reset or a refused reply marks in the filter's last hook for the stream, which may run just
    # after the client has its reply: waited for.
    def marked():
        return [(a["kind"], a["mark"]) for a in audit_records(envoy.log_text())
                if a.get("event") == "result" and a.get("kind") == "marked" and a.get("id") == id_]
    deadline = time.monotonic() + 5
    while not marked() and time.monotonic() < deadline:
        time.sleep(0.02)
    later = call(envoy, grant, "http_post", id_ + 1)[1]
    assert marked() == [("marked", "secret")]
    assert (later["error"]["data"]["kind"], later["error"]["data"]["mark"]) == ("flow_denied", "secret")


def test_marks_and_denials_are_audited_and_counted(envoy):
    call(envoy, "grant-e", "read_secret", 41)
    call(envoy, "grant-e", "http_post", 42)
    log = envoy.log_text()
    records = audit_records(log)
    marked = [a for a in records if a.get("event") == "result" and a.get("kind") == "marked" and a["id"] == 41]
    assert marked and marked[0]["mark"] == "secret" and marked[0]["rule"] == "tools.read_secret.marks"
    denied = [a for a in records if a.get("event") != "result" and a.get("id") == 42]
    assert [(a["decision"], a["error"], a["tool"], a["rule"]) for a in denied] == [
        ("denied", "flow_denied", "http_post", "flows[0]")]
    stats = filter_samples(envoy)
    assert stats["mcp_policy_marks_set_total{}"] >= 5
    assert stats["mcp_policy_flow_denied_total{}"] >= 5


def test_dry_run_forwards_and_counts_would_deny(stack):
    stub, port, _ = stack.recorder()
    policy = dict(POLICY, gateway={"mode": "dry_run"})
    envoy = stack.envoy(policy, port, name="envoy-flows-dry")
    assert forwarded(call(envoy, "grant-f", "read_secret", 1)[1])
    assert forwarded(call(envoy, "grant-f", "http_post", 2)[1])
    assert filter_samples(envoy)["mcp_policy_flow_would_deny_total{}"] == 1
