"""Tier 2, on both builds: a policy whose `gateway.max_body_bytes` is above Envoy's stream buffer
limit (the listener's `per_connection_buffer_limit_bytes`, 1 MiB by default). Envoy answers a held
body over that limit with its own plain-text 413 before any filter sees it. The wasm build's chain
has a buffer filter whose `max_request_bytes` (4 MiB) raises the limit; the native build has none
and raises the limit itself, to `max_body_bytes`. Either way the filter judges every body up to its
limit and answers a larger one with its JSON-RPC 413, and the upstream gets the same request:
the whole body, with a `content-length` even when the client sent it chunked (the buffer filter
adds one; the native build sets it).
"""

from __future__ import annotations

import hashlib
import http.client
import json
import socket

import pytest

from testkit.envoy import with_body_limit
from testkit.jsonrpc import headers_for, padded_call, post
from testkit.processes import HOST
from testkit.upstream import recorder_lines

pytestmark = pytest.mark.both_builds

LIMIT = 2 * 1024 * 1024
CHUNK = 64 * 1024


def chunks(body: bytes):
    return iter([body[i:i + CHUNK] for i in range(0, len(body), CHUNK)])


@pytest.fixture(scope="module")
def big_limit(module_stack):
    _, port, log = module_stack.recorder("received-big-limit")
    return module_stack.envoy(with_body_limit(LIMIT), port, name="envoy-big-limit"), log


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_body_at_a_limit_above_envoys_goes_upstream_whole_with_its_length(big_limit, chunked):
    envoy, log = big_limit
    before = len(recorder_lines(log))
    body = padded_call(LIMIT, id=7)
    r = post(envoy.mcp_url, chunks(body) if chunked else body, headers_for("big-limit"), timeout=30)
    assert r.status == 200, r.body[:300]
    (entry,) = recorder_lines(log)[before:]
    assert (entry["body_len"], entry["body_sha256"]) == (LIMIT, hashlib.sha256(body).hexdigest())
    assert entry["headers"]["content-length"] == str(LIMIT)
    assert "transfer-encoding" not in entry["headers"]


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_body_over_a_limit_above_envoys_gets_the_filters_413(big_limit, chunked):
    envoy, log = big_limit
    before = len(recorder_lines(log))
    body = padded_call(LIMIT + 1, id=7)
    r = post(envoy.mcp_url, chunks(body) if chunked else body, headers_for("big-limit"), timeout=30)
    assert r.status == 413, r.body[:300]
    assert r.headers["content-type"] == "application/json"
    assert (r.error["code"], r.error["data"]["kind"]) == (-32600, "body_too_large")
    assert len(recorder_lines(log, settle=0.2)) == before


def test_a_body_declared_over_the_limit_gets_the_413_before_it_arrives(big_limit):
    """A `content-length` over the limit is answered from the headers: the filter does not hold the
    stream open while the client would send the bytes (here it sends 100 and waits)."""
    envoy, log = big_limit
    before = len(recorder_lines(log))
    fields = {**headers_for("big-limit"), "host": f"{HOST}:{envoy.listen_port}", "content-length": str(LIMIT + 1)}
    head = "POST /mcp HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in fields.items()) + "\r\n"
    with socket.create_connection((HOST, envoy.listen_port), timeout=5) as sock:
        sock.sendall(head.encode() + padded_call(LIMIT + 1, id=7)[:100])
        reply = http.client.HTTPResponse(sock)
        reply.begin()
        body = json.loads(reply.read())
    assert (reply.status, reply.getheader("content-type")) == (413, "application/json")
    assert body["error"] == {
        "code": -32600,
        "message": f"Invalid Request: request body exceeds {LIMIT} bytes",
        "data": {"kind": "body_too_large", "reason": f"request body exceeds {LIMIT} bytes"},
    }
    assert body["id"] is None
    assert len(recorder_lines(log, settle=0.2)) == before
