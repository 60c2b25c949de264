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

import pytest

from testkit.envoy import with_body_limit
from testkit.jsonrpc import headers_for, padded_call, post
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
