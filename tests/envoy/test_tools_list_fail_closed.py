"""Tier 2: tools/list filtering failing closed in real Envoy, in front of a stub upstream that replays
canned responses (testkit/upstream.py `StubUpstream`).

What the README ("tools/list filtering") and crates/core/src/response/toolslist/ promise for a list
that cannot be filtered:
- `Accept-Encoding` is removed from requests when the policy hides anything;
- an encoded response, one of an unexpected content type, or one whose Content-Length exceeds
  `gateway.max_response_bytes`, gets HTTP 502 (-31006 `bad_upstream_response`);
- a body that turns out unreadable, or over the limit without a Content-Length, is replaced by that
  error under the status already sent;
- the unfiltered list never reaches the agent.
"""

from __future__ import annotations

import gzip
import http.client
import json
import zlib

import pytest

from testkit.jsonrpc import headers_for, post, rpc
from testkit.sse import sse_data, sse_events
from testkit.upstream import Canned, StubUpstream, compact, json_canned
from tools_list_support import (BAD, DEMO_NAMES, DEMO_TOOLS, ENCODED_REASON, HIDDEN, POLICY, TOO_BIG_REASON,
                                assert_no_tool_names, bad_gateway, list_via)
import tools_list_support

envoy = tools_list_support.envoy  # the module-scoped fixture: this module's Envoy, in front of its `stub`


# ------------------------------------------------------------------------------ (c) encoded responses


@pytest.mark.parametrize("encoding", ["gzip", "GZIP", "deflate", "br", "gzip, identity"])
def test_content_encoded_list_gets_502_and_never_the_list(envoy, stub, encoding):
    body = compact({"jsonrpc": "2.0", "id": 7, "result": {"tools": DEMO_TOOLS}})
    data = zlib.compress(body) if encoding == "deflate" else gzip.compress(body)
    path = stub.route(f"/encoded-{encoding.replace(', ', '-')}",
                      Canned(200, [("content-type", "application/json"), ("content-encoding", encoding)], data))
    r = list_via(envoy, path, 7, **{"accept-encoding": "gzip, deflate, br"})
    assert r.status == 502
    assert r.headers["content-type"] == "application/json"
    assert "content-encoding" not in r.headers
    assert r.json() == bad_gateway(7, ENCODED_REASON)
    assert data not in r.body
    assert_no_tool_names(r.body, DEMO_NAMES)


def test_identity_encoding_is_filtered_normally(envoy, stub):
    body = compact({"jsonrpc": "2.0", "id": 8, "result": {"tools": DEMO_TOOLS}})
    path = stub.route("/encoded-identity", Canned(200, [("content-type", "application/json"),
                                                         ("content-encoding", "identity")], body))
    r = list_via(envoy, path, 8)
    assert r.status == 200
    assert r.body == compact({"jsonrpc": "2.0", "id": 8, "result": {
        "tools": [t for t in DEMO_TOOLS if t["name"] not in HIDDEN]}})


def test_unexpected_content_type_gets_502(envoy, stub):
    path = stub.route("/text-plain", Canned(200, [("content-type", "text/plain")],
                                            compact({"jsonrpc": "2.0", "id": 9, "result": {"tools": DEMO_TOOLS}})))
    r = list_via(envoy, path, 9)
    assert r.status == 502
    assert r.json() == bad_gateway(9, "the response is neither application/json nor text/event-stream")
    assert_no_tool_names(r.body, DEMO_NAMES)


# ------------------------------------------------------------------------------ (d) unreadable bodies

LIST_JSON = compact({"jsonrpc": "2.0", "id": 5, "result": {"tools": DEMO_TOOLS}})
UNREADABLE = [
    # (case, status, content type, body, reason prefix)
    ("truncated", 200, "application/json", LIST_JSON[:-40], "unreadable response: "),
    ("trailing-garbage", 200, "application/json", LIST_JSON + b"}garbage", "unreadable response: "),
    ("duplicate-key", 200, "application/json",
     LIST_JSON.replace(b'"id":5,', b'"id":5,"id":5,', 1), "unreadable response: "),
    ("invalid-utf8", 200, "application/json", LIST_JSON.replace(b"List the", b"List \xff the", 1),
     "unreadable response: "),
    ("tool-without-name", 200, "application/json",
     compact({"jsonrpc": "2.0", "id": 5, "result": {"tools": DEMO_TOOLS + [{"title": "delete_vm"}]}}),
     "malformed response: a tool has no string name"),
    ("tools-not-array", 200, "application/json",
     compact({"jsonrpc": "2.0", "id": 5, "result": {"tools": {t["name"]: t for t in DEMO_TOOLS}}}),
     "malformed response: result.tools is not an array"),
    ("status-500-truncated", 500, "application/json", LIST_JSON[:-40], "unreadable response: "),
    ("status-201-truncated", 201, "application/json", LIST_JSON[:-40], "unreadable response: "),
    ("sse-truncated-data", 200, "text/event-stream", b"event: message\r\ndata: " + LIST_JSON[:-40] + b"\r\n\r\n",
     "unreadable response: SSE data: "),
    ("sse-garbage-notification-first", 200, "text/event-stream",
     b"event: message\ndata: {notifications\n\nevent: message\ndata: " + LIST_JSON + b"\n\n",
     "unreadable response: SSE data: "),
    ("sse-not-utf8", 200, "text/event-stream", b"event: message\ndata: " + LIST_JSON + b"\xff\n\n",
     "unreadable response: SSE stream is not UTF-8"),
]


@pytest.mark.parametrize("case,status,ctype,body,reason", UNREADABLE, ids=[c[0] for c in UNREADABLE])
def test_unreadable_list_is_replaced_by_an_error_under_the_status_sent(envoy, stub, case, status, ctype, body, reason):
    canned = (Canned(status, [("content-type", ctype)], chunks=[body[:100], body[100:]]) if ctype == "text/event-stream"
              else Canned(status, [("content-type", ctype)], body))
    path = stub.route(f"/unreadable-{case}", canned)
    r = list_via(envoy, path, 5)
    assert r.status == status
    assert r.headers["content-type"] == ctype
    if ctype == "application/json":
        msg = r.json()
    else:
        (event,) = sse_events(r.body)
        assert event[0] == "event: message\n" and event[-1] == "\n"
        msg = json.loads(sse_data(event))
        assert r.body == b"event: message\ndata: " + compact(msg) + b"\n\n"
    assert msg["id"] == 5 and msg["jsonrpc"] == "2.0" and set(msg) == {"jsonrpc", "id", "error"}
    err = msg["error"]
    assert err["code"] == -31006 and err["data"]["kind"] == BAD
    assert err["data"]["reason"].startswith(reason), err
    assert err["message"] == "Bad gateway: " + err["data"]["reason"]
    assert_no_tool_names(r.body, DEMO_NAMES)


# ------------------------------------------------------------------------------ (f) Accept-Encoding


@pytest.mark.parametrize("method,params", [("tools/list", {}), ("tools/call", {"name": "list_vms", "arguments": {}}),
                                           ("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                                           "clientInfo": {"name": "t", "version": "1"}})])
def test_accept_encoding_is_not_forwarded_when_the_policy_hides_tools(envoy, stub, method, params):
    path = f"/accept-encoding-{method.replace('/', '-')}"
    r = post(envoy.url + path, rpc(method, 11, params),
             headers_for("lists-grant", **{"accept-encoding": "gzip, deflate, br"}))
    assert r.status == 200
    (seen,) = stub.requests(path)
    assert seen.body == rpc(method, 11, params)
    assert not seen.has_header("accept-encoding"), f"forwarded: accept-encoding: {seen.headers['accept-encoding']}"


# ------------------------------------------------------------------------------ size limit


def test_over_max_response_bytes(stack):
    """Content-Length over the limit: 502. Unknown length: the error under the status sent."""
    with StubUpstream() as up:
        envoy = stack.envoy({**POLICY, "gateway": {"max_response_bytes": 4096}}, up.port)
        small = compact({"jsonrpc": "2.0", "id": 13, "result": {"tools": DEMO_TOOLS[:1] + [{"name": "delete_vm"}]}})
        big = compact({"jsonrpc": "2.0", "id": 13, "result": {"tools": DEMO_TOOLS}})
        assert len(small) < 4096 < len(big)
        up.route("/small", json_canned(small))
        up.route("/big-cl", json_canned(big))
        up.route("/big-chunked", Canned(200, [("content-type", "application/json")], chunks=[big[:3000], big[3000:]]))
        r = list_via(envoy, "/small", 13)
        assert (r.status, r.json()["result"]["tools"]) == (200, DEMO_TOOLS[:1])
        r = list_via(envoy, "/big-cl", 13)
        assert (r.status, r.json()) == (502, bad_gateway(13, TOO_BIG_REASON))
        r = list_via(envoy, "/big-chunked", 13)
        assert (r.status, r.json()) == (200, bad_gateway(13, TOO_BIG_REASON))


def test_unknown_length_list_over_the_default_limit_gets_the_error(envoy, stub):
    """Default max_response_bytes (4 MiB), chunked response of 4.3 MB: the JSON-RPC error under the
    status sent (README: "larger gets 502"; a body that cannot be filtered is replaced by the error)."""
    big = compact({"jsonrpc": "2.0", "id": 14, "result": {"tools": DEMO_TOOLS + [
        {"name": f"pve_padding_{i}", "description": "x" * 4000} for i in range(1075)]}})
    assert len(big) > 4 * 1024 * 1024
    path = stub.route("/huge-chunked", Canned(200, [("content-type", "application/json")],
                                              chunks=[big[i:i + 65536] for i in range(0, len(big), 65536)]))
    try:
        r = list_via(envoy, path, 14)
    except (http.client.HTTPException, OSError) as e:
        pytest.fail(f"the client got no JSON-RPC error but a broken response: {e!r}")
    assert_no_tool_names(r.body, DEMO_NAMES)
    assert r.json() == bad_gateway(14, TOO_BIG_REASON)
