"""Tier 2: the README's "What the filter answers" table row by row, against the built filter in real Envoy.

One Envoy under the shipped envoy/policy.json serves the table-driven tests (each request uses its
own grant, so nothing they do affects another); the body-limit tests get their own Envoy.
Every refusal must be a JSON-RPC error with the documented status, code and data.kind, and must
leave no trace at the upstream; every pass must reach the upstream byte for byte.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from testkit.clock import avoid_minute_boundary
from testkit.envoy import POLICY_JSON, bound_session_id, with_body_limit
from testkit.jsonrpc import Reply, call_tool, headers_for, padded_call, post, request, tool_call
from testkit.upstream import recorder_lines, recorder_reply

SETTLE = 0.2
_grants = itertools.count(1)


def fresh_grant() -> str:
    return f"contract-{next(_grants)}"




@dataclass(frozen=True)
class Case:
    """One HTTP request and what the filter must answer."""

    body: bytes
    status: int
    code: int | None = None           # JSON-RPC error.code; None for a forwarded request
    kind: str | None = None
    id: object = None                 # the id the error must carry
    method: str = "POST"
    content_type: str | None = "application/json"
    extra: dict = field(default_factory=dict)


def send(url: str, case: Case) -> Reply:
    headers = {"accept": "application/json, text/event-stream", "authorization": f"Bearer {fresh_grant()}"}
    if case.content_type is not None:
        headers["content-type"] = case.content_type
    headers.update(case.extra)
    return request(case.method, url, case.body, headers)


def rpc(**fields) -> bytes:
    return json.dumps({"jsonrpc": "2.0", **fields}, separators=(",", ":")).encode()


LIST_VMS = tool_call("list_vms", {}, id=1)
META_2026 = {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                       "io.modelcontextprotocol/clientCapabilities": {}}}
HEADERS_2026 = {"mcp-protocol-version": "2026-07-28"}
NESTED = b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_vms","arguments":{"x":' \
         + b"[" * 100 + b"]" * 100 + b"}}}"

REFUSED = {
    # 1: HTTP method
    "put": Case(LIST_VMS, 405, -32600, "method_not_allowed", method="PUT"),
    "patch": Case(LIST_VMS, 405, -32600, "method_not_allowed", method="PATCH"),
    # 3-4: media type and encoding
    "text-plain": Case(LIST_VMS, 415, -32600, "unsupported_media_type", content_type="text/plain"),
    "no-content-type": Case(LIST_VMS, 415, -32600, "unsupported_media_type", content_type=None),
    "json-suffix-type": Case(LIST_VMS, 415, -32600, "unsupported_media_type", content_type="application/json-seq"),
    "gzip": Case(LIST_VMS, 415, -32600, "unsupported_media_type", extra={"content-encoding": "gzip"}),
    "br": Case(LIST_VMS, 415, -32600, "unsupported_media_type", extra={"content-encoding": "br"}),
    "charset-utf-7": Case(LIST_VMS, 415, -32600, "unsupported_media_type", content_type="application/json; charset=utf-7"),
    # 6: not exactly one strict JSON text
    "truncated": Case(b'{"jsonrpc":"2.0","id":1,', 400, -32700, "parse_error"),
    "bom": Case(b"\xef\xbb\xbf" + LIST_VMS, 400, -32700, "parse_error"),
    "nan": Case(LIST_VMS.replace(b"{}}", b'{"x":NaN}}'), 400, -32700, "parse_error"),
    "invalid-utf8": Case(LIST_VMS.replace(b"{}}", b'{"x":"\xff"}}'), 400, -32700, "parse_error"),
    "lone-surrogate": Case(LIST_VMS.replace(b"{}}", b'{"x":"\\ud800"}}'), 400, -32700, "parse_error"),
    "nested-duplicate-key": Case(LIST_VMS.replace(b"{}}", b'{"a":{"b":1,"b":2}}}'), 400, -32700, "parse_error"),
    "deep-nesting": Case(NESTED, 400, -32700, "parse_error"),
    "whitespace-only": Case(b"  \n", 400, -32700, "parse_error"),
    # 7: not a JSON-RPC 2.0 message
    # -32600 echoes the id whenever the message has a valid one (JSON-RPC 2.0 §5).
    "jsonrpc-1.0": Case(LIST_VMS.replace(b'"2.0"', b'"1.0"'), 400, -32600, "invalid_request", 1),
    "float-id": Case(rpc(id=1.5, method="tools/list"), 400, -32600, "invalid_request"),
    "bool-id": Case(rpc(id=True, method="tools/list"), 400, -32600, "invalid_request"),
    "method-and-result": Case(rpc(id=3, method="tools/list", result={}), 400, -32600, "invalid_request", 3),
    "request-without-id": Case(rpc(method="tools/list"), 400, -32600, "invalid_request"),
    "notification-with-id": Case(rpc(id=3, method="notifications/initialized"), 400, -32600, "invalid_request", 3),
    "neither": Case(rpc(id=3), 400, -32600, "invalid_request", 3),
    "folded-member-name": Case(LIST_VMS.replace(b'"params"', b'"Params":{},"params"'), 400, -32600, "invalid_request", 1),
    "scalar": Case(b"42", 400, -32600, "invalid_request"),
    # 7b: tools/call params
    "name-missing": Case(rpc(id=4, method="tools/call", params={"arguments": {}}), 400, -32602, "invalid_params", 4),
    "name-not-string": Case(rpc(id=4, method="tools/call", params={"name": 5}), 400, -32602, "invalid_params", 4),
    "arguments-list": Case(rpc(id=4, method="tools/call", params={"name": "list_vms", "arguments": []}),
                           400, -32602, "invalid_params", 4),
    "params-list": Case(rpc(id=4, method="tools/call", params=[]), 400, -32602, "invalid_params", 4),
    # 8: Mcp-Method / Mcp-Name headers
    "mcp-method-mismatch": Case(tool_call("list_vms", {}, id=6), 400, -32020, "header_mismatch", 6,
                                extra={"mcp-method": "tools/list"}),
    "mcp-name-mismatch": Case(tool_call("list_vms", {}, id=6), 400, -32020, "header_mismatch", 6,
                              extra={"mcp-method": "tools/call", "mcp-name": "vm_status"}),
    # 10a: the retry of an approval offer with a requestState the gateway did not seal (crates/core/src/approval/offer.rs)
    "forged-approval-state": Case(rpc(id=7, method="tools/call", params={
        "name": "list_vms", "arguments": {}, "requestState": "mcpf-a1.forged"}), 400, -31011, "approval_state_invalid", 7),
    "approval-answer-without-state": Case(rpc(id=7, method="tools/call", params={
        "name": "list_vms", "inputResponses": {"mcp-policy-filter/approval": {"action": "accept"}}}),
        400, -31011, "approval_state_invalid", 7),
    # 10: policy (default deny) for methods other than tools/call
    "prompts-get": Case(rpc(id=8, method="prompts/get", params={"name": "p"}), 200, -31001, "denied", 8),
    "resources-list": Case(rpc(id=8, method="resources/list"), 200, -31001, "denied", 8),
    # A method no MCP version defines, not named in gateway.methods: JSON-RPC's "Method not found",
    # in an ordinary reply (no MCP-Protocol-Version: read as 2025-03-26).
    "unknown-method": Case(rpc(id="u", method="vendor/do_things"), 200, -32601, "method_not_found", "u"),
    # In 2026-07-28, HTTP 404 (Streamable HTTP), for a method of no version as for one it removed.
    "unknown-method-2026": Case(rpc(id="u", method="vendor/do_things", params=META_2026), 404, -32601,
                                "method_not_found", "u", extra=HEADERS_2026 | {"mcp-method": "vendor/do_things"}),
    "ping-2026": Case(rpc(id="p", method="ping", params=META_2026), 404, -32601, "method_not_found", "p",
                      extra=HEADERS_2026 | {"mcp-method": "ping"}),
    "stop-vm-unlisted": Case(tool_call("stop_vm", {"node": "pve1", "vmid": 100}, id=9), 200, -31001, "denied", 9),
}

FORWARDED = {
    "content-type-case-and-params": Case(LIST_VMS, 200, content_type="Application/JSON ; charset=UTF-8"),
    "identity-encoding": Case(LIST_VMS, 200, extra={"content-encoding": "identity"}),
    "initialize": Case(rpc(id=1, method="initialize", params={"protocolVersion": "2025-06-18", "capabilities": {},
                                                              "clientInfo": {"name": "t", "version": "1"}}), 200),
    "ping": Case(rpc(id=1, method="ping"), 200),
    "tools-list": Case(rpc(id=1, method="tools/list"), 200),
    "notification": Case(rpc(method="notifications/initialized"), 202),
    "client-result": Case(rpc(id="srv-1", result={}), 202),
    "client-error": Case(rpc(id="srv-2", error={"code": -1, "message": "no"}), 202),
    "arguments-absent": Case(rpc(id=1, method="tools/call", params={"name": "list_vms"}), 200),
    "matching-mcp-headers": Case(LIST_VMS, 200, extra={"mcp-method": "tools/call", "mcp-name": "list_vms"}),
    "string-id": Case(tool_call("list_vms", {}, id="abc"), 200),
    "server-request-state": Case(rpc(id=1, method="tools/call", params={
        "name": "list_vms", "arguments": {}, "inputResponses": {"confirm": {"action": "accept"}},
        "requestState": "a server's own state"}), 200),
    "allowed-batch": Case(b"[" + LIST_VMS + b"," + rpc(method="notifications/initialized") + b"]", 200),
}


@pytest.fixture(scope="module")
def seeded(module_stack):
    _, port, log = module_stack.recorder()
    return module_stack.envoy(POLICY_JSON.read_text(encoding="utf-8"), port), log


def upstream_lines(log, settle: bool = True) -> list[dict]:
    """The recorder's entries, by default after waiting for a request Envoy might still be forwarding."""
    return recorder_lines(log, settle=SETTLE if settle else 0.0)


def assert_refusal(r: Reply, case: Case) -> None:
    assert r.status == case.status, r.body
    assert r.headers["content-type"] == "application/json"
    err = r.error
    assert err["code"] == case.code
    assert err["data"]["kind"] == case.kind
    assert isinstance(err["message"], str) and err["message"] != ""
    msg = r.json()
    assert set(msg) == {"jsonrpc", "id", "error"}
    assert msg["jsonrpc"] == "2.0"
    assert msg["id"] == case.id


def send_seeded(seeded, case: Case) -> tuple[Reply, Path, int]:
    """`case` sent through the seeded Envoy: its reply, the upstream's log, and the log's line count
    before it."""
    envoy, log = seeded
    before = len(recorder_lines(log))
    return send(envoy.mcp_url, case), log, before


@pytest.mark.parametrize("name", REFUSED)
def test_refused_with_documented_error(seeded, name):
    case = REFUSED[name]
    r, log, before = send_seeded(seeded, case)
    assert_refusal(r, case)
    if case.status == 405:
        assert r.headers["allow"] == "GET, POST, DELETE"
    assert len(upstream_lines(log)) == before, "the upstream saw a refused request"


@pytest.mark.parametrize("name", FORWARDED)
def test_forwarded_unchanged(seeded, name):
    case = FORWARDED[name]
    r, log, before = send_seeded(seeded, case)
    assert r.status == case.status, r.body
    new = upstream_lines(log, settle=False)[before:]
    assert [(e["method"], e["body_sha256"]) for e in new] == [("POST", hashlib.sha256(case.body).hexdigest())]


def test_delete_with_grant_is_forwarded(seeded):
    envoy, log = seeded
    before = len(recorder_lines(log))
    # The shipped policy binds sessions: the id the filter made for grant "d"; the server gets "s-1".
    sid = bound_session_id("d", "s-1")
    r = request("DELETE", envoy.mcp_url, None, {"authorization": "Bearer d", "mcp-session-id": sid})
    assert r.status == 202
    (seen,) = upstream_lines(log, settle=False)[before:]
    assert (seen["method"], seen["headers"]["mcp-session-id"]) == ("DELETE", "s-1")


# ------------------------------------------------------------------------------------------ batches


def batch(*messages: bytes) -> bytes:
    return b"[" + b",".join(messages) + b"]"


def test_refused_batch_answers_every_element_with_an_id(seeded):
    envoy, log = seeded
    before = len(recorder_lines(log))
    body = batch(tool_call("list_vms", {}, id=1), rpc(method="notifications/initialized"),
                 tool_call("delete_vm", {}, id=2))
    r = post(envoy.mcp_url, body, headers_for(fresh_grant()))
    assert r.status == 200
    assert r.headers["content-type"] == "application/json"
    assert [(m["id"], m["error"]["code"], m["error"]["data"]["kind"]) for m in r.json()] == \
        [(1, -31005, "batch_refused"), (2, -31001, "denied")]
    assert len(upstream_lines(log)) == before


def test_batch_with_an_invalid_element_is_400(seeded):
    envoy, log = seeded
    before = len(recorder_lines(log))
    body = batch(tool_call("list_vms", {}, id=1), rpc(id=2, method="tools/call", params={"name": "x", "arguments": 1}))
    r = post(envoy.mcp_url, body, headers_for(fresh_grant()))
    assert r.status == 400
    assert [(m["id"], m["error"]["code"], m["error"]["data"]["kind"]) for m in r.json()] == \
        [(1, -31005, "batch_refused"), (2, -32602, "invalid_params")]
    assert len(upstream_lines(log)) == before


def test_batch_element_that_is_not_an_object_gets_a_null_id_error(seeded):
    """JSON-RPC 2.0: an element whose id cannot be read is answered with id null."""
    envoy, _ = seeded
    r = post(envoy.mcp_url, batch(tool_call("list_vms", {}, id=1), b"5"), headers_for(fresh_grant()))
    assert r.status == 400
    assert [(m["id"], m["error"]["code"]) for m in r.json()] == [(1, -31005), (None, -32600)]


def test_refused_batch_gives_its_quota_back(seeded):
    envoy, log = seeded
    grant = fresh_grant()
    avoid_minute_boundary()
    refused = post(envoy.mcp_url, batch(tool_call("vm_agent_exec", {}, id="a"), tool_call("delete_vm", {}, id="b")),
                   headers_for(grant))
    assert [m["error"]["code"] for m in refused.json()] == [-31005, -31001]
    replies = [call_tool(envoy.mcp_url, "vm_agent_exec", grant, {}, id=i) for i in range(1, 12)]
    assert [r.status for r in replies] == [200] * 11
    assert [r.body for r in replies[:10]] == [recorder_reply(i) for i in range(1, 11)]
    assert replies[10].error["code"] == -31002


def test_rate_limited_element_refuses_the_batch(seeded):
    envoy, log = seeded
    grant = fresh_grant()
    avoid_minute_boundary()
    assert [call_tool(envoy.mcp_url, "vm_agent_exec", grant, {}, id=i).status for i in range(10)] == [200] * 10
    before = len(recorder_lines(log))
    r = post(envoy.mcp_url, batch(tool_call("list_vms", {}, id=1), tool_call("vm_agent_exec", {}, id=2)),
             headers_for(grant))
    assert r.status == 200
    assert [(m["id"], m["error"]["data"]["kind"]) for m in r.json()] == [(1, "batch_refused"), (2, "rate_limited")]
    assert len(upstream_lines(log)) == before


# ------------------------------------------------------------------------------------------ body limit

LIMIT = 2048


@pytest.fixture(scope="module")
def small_limit(module_stack):
    _, port, log = module_stack.recorder("received-small-limit")
    return module_stack.envoy(with_body_limit(LIMIT), port, name="envoy-small-limit"), log


def test_body_at_the_limit_is_forwarded(small_limit):
    envoy, log = small_limit
    before = len(recorder_lines(log))
    assert post(envoy.mcp_url, padded_call(LIMIT), headers_for("limit")).status == 200
    assert len(upstream_lines(log, settle=False)) == before + 1


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_body_over_the_limit_is_413(small_limit, chunked):
    envoy, log = small_limit
    before = len(recorder_lines(log))
    body = padded_call(LIMIT + 1)
    content = iter([body[i:i + 100] for i in range(0, len(body), 100)]) if chunked else body
    reply = post(envoy.mcp_url, content, headers_for("limit"))
    assert_refusal(reply, Case(body, 413, -32600, "body_too_large", None))
    assert len(upstream_lines(log)) == before
