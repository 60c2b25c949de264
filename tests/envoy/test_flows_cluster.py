"""Tier 2: flows across Envoys (`make run-cluster`'s topology): one Redis, two mcp-ratelimit
instances on it, two Envoys each asking its own instance (envoy/envoy-cluster.yaml), the stub upstream;
on both builds of the filter.

What docs/src/policy/flows.md ("Across Envoys") promises:
- a mark made through one Envoy refuses the flow's tools on the other, with −31014 `flow_denied`
  naming the flow and the mark, and `retry_after_seconds` from the service's answer;
- a result matching `mark_if` on one Envoy marks the grant on the other;
- other grants and tools outside the flow are not affected;
- a marking call acknowledged with 202 (the 2024-11-05 HTTP+SSE transport), with a body or without,
  marks across Envoys (the acknowledgement waits until the mark is recorded); one whose reply is
  reset before its end does not (nothing is left to hold until the service answers); a reply the
  filter refuses, at its headers or in its body, marks, its error held until the mark is recorded;
- with Redis stopped, the flow's tools are refused `limiter_unavailable` even under
  `failure_mode: "allow"`, a tool outside the flow follows `failure_mode` (forwarded), and a marking
  result never reaches the client unmarked (its response is reset).
"""

from __future__ import annotations

import json
import uuid

import pytest

from testkit import rls as hr
from testkit.jsonrpc import headers_for, post, tool_call
from testkit.upstream import Canned, json_canned, sse_canned

pytestmark = pytest.mark.both_builds

FLOW = "no-egress-after-secrets"
REASON = "no outbound tools for 10 minutes after reading secrets"


def policy(failure_mode: str = "deny") -> dict:
    p = hr.cluster_policy({
        "read_secret": {"marks": ["secret"]},
        "query_db": {"result": {"mark_if": [{"regex": "\\b\\d{3}-\\d{2}-\\d{4}\\b", "mark": "pii"}]}},
        "http_post": {}, "send_email": {},
        "list_files": {"limits": [{"counter": "files", "window": "hour", "max": 1000}]},
    }, failure_mode=failure_mode)
    p["flows"] = [{"name": FLOW, "if_marked": ["secret", "pii"], "deny": ["http_post", "send_email"],
                   "for": "10m", "reason": REASON}]
    return p


def token(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def call(envoy, tok: str, tool: str, id_=1, path: str = "/mcp"):
    """(reply, parsed body), or (None, None) when the response was reset before its body ended."""
    try:
        r = post(envoy.url + path, tool_call(tool, {"url": "https://example.com"}, id_), headers_for(tok))
    except Exception:  # noqa: BLE001 - a reset stream: no body reached the client
        return None, None
    return r, json.loads(r.body)


def forwarded(body: dict | None) -> bool:
    return bool(body) and body.get("result", {}).get("content") == [{"type": "text", "text": "ok"}]


@pytest.fixture(scope="module")
def cluster(module_stack, stub):
    s = module_stack
    _, redis_port = hr.start_redis(s)
    rls = [hr.start_rls(s, redis_port, name="rls-a"), hr.start_rls(s, redis_port, name="rls-b")]
    envoys = [s.start_envoy(hr.render(s, policy(), stub.port, [r.port]), name=f"envoy-flows-{n}")
              for n, r in zip("ab", rls)]
    return {"envoys": envoys, "rls": rls}


def test_a_mark_made_through_one_envoy_refuses_on_the_other(cluster):
    a, b = cluster["envoys"]
    tok, other = token("a"), token("b")
    assert forwarded(call(b, tok, "http_post", 1)[1])
    assert forwarded(call(a, tok, "read_secret", 2)[1])
    r, body = call(b, tok, "http_post", 3)
    assert r.status == 200
    assert body["id"] == 3 and body["error"]["code"] == -31014
    data = body["error"]["data"]
    assert (data["kind"], data["tool"], data["flow"], data["mark"], data["rule"], data["reason"]) == (
        "flow_denied", "http_post", FLOW, "secret", "flows[0]", REASON)
    # From the service's answer: the mark was set moments ago and lasts 10 minutes.
    assert 590 <= data["retry_after_seconds"] <= 600
    assert r.headers["retry-after"] == str(data["retry_after_seconds"])
    assert call(a, tok, "send_email", 4)[1]["error"]["data"]["kind"] == "flow_denied"
    # A tool outside the flow, and another grant: allowed on both Envoys.
    assert forwarded(call(b, tok, "list_files", 5)[1])
    assert forwarded(call(a, other, "http_post", 6)[1])
    assert forwarded(call(b, other, "http_post", 7)[1])
    for rls in cluster["rls"]:
        assert 'mcp_ratelimit_decisions_total{code="over_limit"}' in rls.metrics()


def test_a_result_matching_mark_if_on_one_envoy_marks_on_the_other(cluster, stub):
    a, b = cluster["envoys"]
    tok = token("pii")
    ssn = {"jsonrpc": "2.0", "id": 9, "result": {"content": [{"type": "text", "text": "Ann, 078-05-1120"}]}}
    stub.route("/db-ssn-cluster", json_canned(ssn))
    r, body = call(b, tok, "query_db", 9, "/db-ssn-cluster")
    assert body == ssn  # marking changes nothing in the result
    r, body = call(a, tok, "http_post", 10)
    assert (body["error"]["data"]["kind"], body["error"]["data"]["mark"]) == ("flow_denied", "pii")


def test_an_sse_result_is_held_until_its_mark_is_recorded(cluster, stub):
    a, b = cluster["envoys"]
    tok = token("sse")
    result = {"jsonrpc": "2.0", "id": 11, "result": {"content": [{"type": "text", "text": "s3cr3t"}]}}
    progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 1}}
    stream = f"event: message\ndata: {json.dumps(progress)}\n\nevent: message\ndata: {json.dumps(result)}\n\n"
    stub.route("/secret-sse", sse_canned(stream.encode(), pieces=2, chunk_delay=0.05))
    r = post(a.url + "/secret-sse", tool_call("read_secret", {}, 11), headers_for(tok))
    assert r.status == 200 and json.dumps(result) in r.body.decode(), r.body
    r, body = call(b, tok, "http_post", 12)
    assert (body["error"]["data"]["kind"], body["error"]["data"]["mark"]) == ("flow_denied", "secret")


@pytest.mark.parametrize("body", [b"Accepted", b""])
def test_a_202_acknowledgement_marks_across_envoys_and_a_reset_reply_does_not(cluster, stub, body):
    # The 2024-11-05 HTTP+SSE transport acknowledges a call with 202 and sends its result on the GET
    # stream: the acknowledgement is held until the service has recorded the call's mark. A reply
    # reset before its end has nothing left to hold: with the service, it does not mark.
    a, b = cluster["envoys"]
    tok, cut = token("ack"), token("cut")
    path = stub.route(f"/secret-ack-{len(body)}", Canned(202, [("content-type", "text/plain; charset=utf-8")], body))
    r = post(a.url + path, tool_call("read_secret", {}, 13), headers_for(tok))
    assert (r.status, r.body) == (202, body)
    r, answer = call(b, tok, "http_post", 14)
    assert (answer["error"]["data"]["kind"], answer["error"]["data"]["mark"]) == ("flow_denied", "secret")
    stub.route("/secret-cut", sse_canned(b"id: ev-1\ndata: \n\n", cut=True))
    assert call(a, cut, "read_secret", 15, "/secret-cut") == (None, None)
    assert forwarded(call(b, cut, "http_post", 16)[1])


def test_a_refused_reply_marks_across_envoys_before_its_error_goes_on(cluster, stub):
    # The client may still fetch the result on another stream (a 2024-11-05 HTTP+SSE client never
    # reads a POST's reply): the call marks, and the error waits until the service has recorded it.
    a, b = cluster["envoys"]
    tok = token("refused")
    stub.route("/secret-not-json", json_canned(b'{"jsonrpc":"2.0","id":17,'))
    r, body = call(a, tok, "read_secret", 17, "/secret-not-json")
    assert (r.status, body["id"], body["error"]["data"]["kind"]) == (200, 17, "result_refused")
    r, body = call(b, tok, "http_post", 18)
    assert (body["error"]["data"]["kind"], body["error"]["data"]["mark"]) == ("flow_denied", "secret")


def test_a_reply_refused_at_its_headers_marks_across_envoys_before_its_error_goes_on(cluster, stub):
    # A reply that is neither JSON nor SSE is refused at its headers: its error (a failed tool call)
    # is the local reply, sent once the service has recorded the call's mark.
    a, b = cluster["envoys"]
    tok = token("refused-at-headers")
    stub.route("/secret-html", Canned(200, [("content-type", "text/html")], b"<p>the secret</p>"))
    r, body = call(a, tok, "read_secret", 21, "/secret-html")
    assert (r.status, body["id"], body["error"]["data"]["kind"]) == (200, 21, "result_refused")
    assert b"the secret" not in r.body
    r, body = call(b, tok, "http_post", 22)
    assert (body["error"]["data"]["kind"], body["error"]["data"]["mark"]) == ("flow_denied", "secret")
    # Another grant is not affected.
    assert forwarded(call(b, token("other"), "http_post", 23)[1])


def test_a_reply_refused_part_way_gets_its_error_and_marks(cluster, stub):
    # An SSE reply whose first event is not JSON-RPC: the error replaces the stream, waits until
    # the service has recorded the mark, and what more the server sends meanwhile is dropped, as
    # after any refusal (not reset).
    a, b = cluster["envoys"]
    tok = token("part-way")
    stream = b'id: e1\ndata: {"jsonrpc":\n\n' + b"id: e2\ndata: x\n\n" * 200
    stub.route("/secret-part-way", sse_canned(stream, pieces=40))
    r = post(a.url + "/secret-part-way", tool_call("read_secret", {}, 19), headers_for(tok))
    assert r.status == 200 and r.body.startswith(b"event: message\ndata: "), r.body[:200]
    error = json.loads(r.body.split(b"data: ", 1)[1])
    assert (error["id"], error["error"]["data"]["kind"]) == (19, "result_refused")
    r, body = call(b, tok, "http_post", 20)
    assert (body["error"]["data"]["kind"], body["error"]["data"]["mark"]) == ("flow_denied", "secret")


def test_with_redis_stopped_the_flows_tools_are_refused_and_marking_results_reset(stack, stub):
    redis, redis_port = hr.start_redis(stack, name="redis-flows")
    rls = hr.start_rls(stack, redis_port, name="rls-flows")
    envoy = stack.start_envoy(hr.render(stack, policy("allow"), stub.port, [rls.port]), name="envoy-flows-down")
    tok = token("down")
    assert forwarded(call(envoy, tok, "http_post", 1)[1])
    redis.stop()
    r, body = call(envoy, tok, "http_post", 2)
    assert r.status == 200 and body["error"]["data"]["kind"] == "limiter_unavailable", body
    assert body["error"]["data"]["tool"] == "http_post"
    # failure_mode allow: a tool outside the flow is forwarded.
    assert forwarded(call(envoy, tok, "list_files", 3)[1])
    # The marking result cannot be recorded: the client never gets it.
    r, body = call(envoy, tok, "read_secret", 4)
    assert not forwarded(body), body
