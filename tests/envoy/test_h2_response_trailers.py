"""Tier 2, both builds: a JSON response that an HTTP/2 server ends with trailers is filtered whole.

Over HTTP/2 a response may end with a HEADERS frame of trailers instead of END_STREAM on its last
DATA frame; Envoy then never reports the body's end to the body callback, only the trailers. A held
JSON body is read there, whole, as at its end: a hidden tool leaves `tools/list`, a result rule
refuses or redacts, exactly as for the same response without trailers. Left unread, Envoy would
release the held body unfiltered. A result that sets a mark (`flows`, with the rate limit service)
is held at its trailers until the service has recorded the mark, then forwarded with them. The
upstream is an h2c server on loopback (`testkit.rls_stub`), behind the cluster `mcp_upstream`
switched to HTTP/2.
"""

from __future__ import annotations

import json
import uuid

import pytest
import yaml

from testkit import rls as hr
from testkit import rls_stub as rs
from testkit.jsonrpc import headers_for, post, rpc, tool_call

pytestmark = pytest.mark.both_builds

POLICY = {
    "version": "1", "default": "deny", "hide": ["delete_vm"],
    "tools": {"list_vms": {}, "read_file": {"result": {
        "deny_if": [{"regex": "BEGIN PRIVATE KEY", "reason": "a private key"}],
        "redact": [{"regex": "AKIA[0-9A-Z]{16}", "with": "[redacted]"}]}}},
}
TOOLS = {"jsonrpc": "2.0", "id": 1, "result": {"tools": [
    {"name": "list_vms", "inputSchema": {"type": "object"}}, {"name": "delete_vm", "inputSchema": {"type": "object"}}]}}


def result(id_: int, text: str) -> dict:
    return {"jsonrpc": "2.0", "id": id_, "result": {"content": [{"type": "text", "text": text}]}}


def answer(message: dict, trailers: bool) -> rs.Answer:
    return rs.Answer(headers=[(":status", "200"), ("content-type", "application/json")],
                     body=json.dumps(message).encode(), trailers=[("x-upstream-trailer", "1")] if trailers else None)


def over_h2(config: str) -> str:
    """`config` with the cluster `mcp_upstream` speaking HTTP/2 (h2c)."""
    cfg = yaml.safe_load(config)
    (cluster,) = [c for c in cfg["static_resources"]["clusters"] if c["name"] == "mcp_upstream"]
    cluster["typed_extension_protocol_options"] = {"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
        "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
        "explicit_http_config": {"http2_protocol_options": {}}}}
    return yaml.safe_dump(cfg)


@pytest.fixture
def front(stack):
    """(the Envoy, the h2c upstream it forwards to)."""
    upstream = rs.RlsStub()
    try:
        yield stack.start_envoy(over_h2(stack.render(POLICY, upstream.port))), upstream
    finally:
        upstream.close()


@pytest.mark.parametrize("trailers", [False, True], ids=["end-stream", "trailers"])
def test_json_responses_are_filtered_however_they_end(front, trailers):
    envoy, upstream = front
    headers = headers_for("grant-h2-response")

    upstream.answer = answer(TOOLS, trailers)
    r = post(envoy.mcp_url, rpc("tools/list", 1, {}), headers)
    assert (r.status, json.loads(r.body)) == (200, {"jsonrpc": "2.0", "id": 1, "result": {"tools": [
        {"name": "list_vms", "inputSchema": {"type": "object"}}]}})

    upstream.answer = answer(result(2, "-----BEGIN PRIVATE KEY----- MIIE"), trailers)
    r = post(envoy.mcp_url, tool_call("read_file", {}, id=2), headers)
    assert (r.status, json.loads(r.body)) == (200, {"jsonrpc": "2.0", "id": 2, "error": {
        "code": -31012, "message": "tool 'read_file' result refused: a private key",
        "data": {"kind": "result_refused", "tool": "read_file", "reason": "a private key",
                 "rule": "tools.read_file.result.deny_if[0]"}}})

    upstream.answer = answer(result(3, "key AKIAABCDEFGHIJKLMNOP"), trailers)
    r = post(envoy.mcp_url, tool_call("read_file", {}, id=3), headers)
    assert (r.status, json.loads(r.body)) == (200, result(3, "key [redacted]"))
    assert [x.headers[":path"] for x in upstream.received] == ["/mcp"] * 3


def test_an_empty_body_ending_in_trailers_passes_as_it_is(front):
    """Headers, no DATA, then trailers: there is nothing to filter, and the filter must not fail on a
    body that does not exist (the wasm host has no buffer to write into). The next call is served."""
    envoy, upstream = front
    headers = headers_for("grant-h2-response")
    upstream.answer = rs.Answer(headers=[(":status", "200"), ("content-type", "application/json")], body=b"",
                                trailers=[("x-upstream-trailer", "1")])
    r = post(envoy.mcp_url, rpc("tools/list", 1, {}), headers)
    assert (r.status, r.body) == (200, b"")
    upstream.answer = answer(TOOLS, True)
    r = post(envoy.mcp_url, rpc("tools/list", 2, {}), headers)
    assert (r.status, json.loads(r.body)["result"]["tools"]) == (200, [{"name": "list_vms", "inputSchema": {"type": "object"}}])


FLOW = "no-egress-after-pii"


def marking_policy() -> dict:
    """`query_db`'s results mark the grant `pii` when they hold an SSN; `http_post` is refused then."""
    mark_if = [{"regex": "\\b\\d{3}-\\d{2}-\\d{4}\\b", "mark": "pii"}]
    p = hr.cluster_policy({"query_db": {"result": {"mark_if": mark_if}}, "http_post": {}})
    p["flows"] = [{"name": FLOW, "if_marked": ["pii"], "deny": ["http_post"], "for": "10m", "reason": "no egress"}]
    return p


def test_a_marking_result_ending_in_trailers_is_recorded_then_forwarded(stack):
    """A result matching `mark_if`, in a body that ends with trailers: held at the trailers until the
    rate limit service (mcp-ratelimit on Redis) has recorded the mark, then forwarded whole, and the
    flow refuses the grant's next outbound call."""
    _, redis_port = hr.start_redis(stack, name="redis-h2-mark")
    rls = hr.start_rls(stack, redis_port, name="rls-h2-mark")
    upstream = rs.RlsStub()
    try:
        envoy = stack.start_envoy(over_h2(hr.render(stack, marking_policy(), upstream.port, [rls.port])))
        headers = headers_for(f"grant-h2-mark-{uuid.uuid4().hex[:12]}")
        upstream.answer = answer(result(1, "ssn 123-45-6789"), True)
        r = post(envoy.mcp_url, tool_call("query_db", {}, id=1), headers)
        assert (r.status, json.loads(r.body)) == (200, result(1, "ssn 123-45-6789"))
        r = post(envoy.mcp_url, tool_call("http_post", {}, id=2), headers)
        error = json.loads(r.body)["error"]
        assert (r.status, error["code"], error["data"]["kind"], error["data"]["flow"], error["data"]["mark"]) == (
            200, -31014, "flow_denied", FLOW, "pii")
        assert len(upstream.received) == 1
    finally:
        upstream.close()


def test_a_marking_result_ending_in_trailers_never_goes_on_unrecorded(stack):
    """The rate limit service's cluster has no endpoint: the mark cannot be recorded, so the result
    is reset at its trailers, never forwarded; a result that marks nothing still goes on."""
    upstream = rs.RlsStub()
    try:
        envoy = stack.start_envoy(over_h2(hr.render(stack, marking_policy(), upstream.port, [])))
        headers = headers_for(f"grant-h2-mark-{uuid.uuid4().hex[:12]}")
        upstream.answer = answer(result(1, "ssn 123-45-6789"), True)
        with pytest.raises(Exception):  # noqa: B017 - a reset stream: whatever the client raises
            post(envoy.mcp_url, tool_call("query_db", {}, id=1), headers)
        upstream.answer = answer(result(2, "no rows"), True)
        r = post(envoy.mcp_url, tool_call("query_db", {}, id=2), headers)
        assert (r.status, json.loads(r.body)) == (200, result(2, "no rows"))
    finally:
        upstream.close()
