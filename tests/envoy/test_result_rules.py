"""Tier 2, both builds: result rules (`tools.NAME.result`) in real Envoy, in front of a stub upstream
that answers each `tools/call` with chosen text, in JSON and in SSE (testkit/upstream.py
`StubUpstream`).

What docs/src/policy/results-and-pins.md promises:
- a private key in `content[].text`, in `structuredContent`, straddling two body chunks, in an SSE
  event spread over several `data:` lines, or written with JSON escapes: the result is replaced by the
  JSON-RPC error for its id (−31012 `result_refused`, naming the rule and its reason), and no byte of
  the key reaches the client;
- an access key is redacted, with the rest of the result byte for byte as sent (compact JSON);
- a result larger than `max_bytes`, or whose redaction would make it larger, is refused; a clean
  result passes byte for byte;
- a call of the tool inside a JSON-RPC batch is refused before it reaches the server (the reply to
  a batch is not matched to its calls);
- the reply to `tasks/result` (MCP 2025-11-25), a tool's result whose call is not known, is judged
  by every tool's rules;
- each refusal and redaction has an audit record and a counter; neither holds the text.
"""

from __future__ import annotations

import json

import pytest

from testkit.jsonrpc import get, headers_for, post, rpc, tool_call
from testkit.logs import audit_records
from testkit.stats import prometheus
from testkit.upstream import Canned, compact, json_canned, sse_canned

pytestmark = pytest.mark.both_builds

KEY = "-----BEGIN RSA PRIVATE KEY-----"
KEY_BODY = "MIIEowIBAAKCAQEA7x9"
AWS = "AKIAIOSFODNN7EXAMPLE"
TOKEN = "tok-results-3hQ"
POLICY = {
    "version": "1",
    "default": "allow",
    "tools": {
        "read_file": {"result": {
            "max_bytes": 4096,
            "deny_if": [{"regex": "-----BEGIN [A-Z ]*PRIVATE KEY-----", "reason": "a private key in a tool result"}],
            "redact": [{"regex": "AKIA[0-9A-Z]{16}", "with": "[redacted]"},
                       {"regex": "ghp_[A-Za-z0-9]+", "with": "[a GitHub token removed by this gateway]"}],
        }},
    },
}
RULE = "tools.read_file.result.deny_if[0]"


def refused(id_) -> dict:
    reason = "a private key in a tool result"
    return {"jsonrpc": "2.0", "id": id_, "error": {
        "code": -31012, "message": f"tool 'read_file' result refused: {reason}",
        "data": {"kind": "result_refused", "tool": "read_file", "reason": reason, "rule": RULE}}}


def text_result(id_, text: str) -> dict:
    return {"jsonrpc": "2.0", "id": id_, "result": {"content": [{"type": "text", "text": text}], "isError": False}}


@pytest.fixture(scope="module")
def envoy(module_stack, stub):
    return module_stack.envoy(POLICY, stub.port, name="envoy-results")


def call(envoy, path: str, id_=1, tool: str = "read_file"):
    return post(envoy.url + path, tool_call(tool, {"path": "/etc/x"}, id_), headers_for(TOKEN))


def assert_no_key(body: bytes) -> None:
    for piece in (KEY.encode(), b"PRIVATE KEY", KEY_BODY.encode(), b"\\u002d\\u002d"):
        assert piece not in body, f"key bytes reached the client: {body[:300]!r}"


def test_a_private_key_in_content_text_is_refused(envoy, stub):
    path = stub.route("/k-text", json_canned(text_result(1, f"here:\n{KEY}\n{KEY_BODY}")))
    r = call(envoy, path)
    assert r.status == 200
    assert json.loads(r.body) == refused(1)
    assert_no_key(r.body)


def test_a_private_key_in_structured_content_is_refused(envoy, stub):
    msg = {"jsonrpc": "2.0", "id": "s-1", "result": {
        "content": [{"type": "text", "text": "see structured"}],
        "structuredContent": {"files": [{"name": "id_rsa", "body": f"{KEY}\n{KEY_BODY}"}]}}}
    path = stub.route("/k-structured", json_canned(msg))
    r = call(envoy, path, "s-1")
    assert json.loads(r.body) == refused("s-1")
    assert_no_key(r.body)


def test_a_private_key_straddling_two_body_chunks_is_refused(envoy, stub):
    body = compact(text_result(2, f"{KEY}\n{KEY_BODY}"))
    cut = body.index(b"PRIVATE") + 3
    canned = Canned(200, [("content-type", "application/json")], chunks=[body[:cut], body[cut:]], chunk_delay=0.3)
    path = stub.route("/k-straddle", canned)
    r = call(envoy, path, 2)
    assert json.loads(r.body) == refused(2)
    assert_no_key(r.body)


def test_a_private_key_in_sse_data_lines_is_refused_and_other_events_pass(envoy, stub):
    note = (b'event: message\ndata: {"jsonrpc":"2.0","method":"notifications/progress",'
            b'"params":{"progressToken":1,"progress":1}}\n\n')
    text = json.dumps(f"{KEY}\n{KEY_BODY}")
    event = (b'event: message\nid: ev-2\ndata: {"jsonrpc":"2.0","id":3,\ndata: "result":{"content":'
             b'[{"type":"text",\ndata: "text":' + text.encode() + b'}]}}\n\n')
    stream = note + event
    path = stub.route("/k-sse", sse_canned(stream, pieces=5, chunk_delay=0.05))
    r = post(envoy.url + path, tool_call("read_file", {}, 3), headers_for(TOKEN))
    assert r.status == 200
    assert r.body.startswith(note), r.body[:200]
    assert r.body == note + b"event: message\nid: ev-2\ndata: " + compact(refused(3)) + b"\n\n"
    assert_no_key(r.body)


def test_a_result_replayed_on_the_get_stream_is_judged_by_every_tool_rule(envoy, stub):
    """A resumed GET stream may replay the response to a call made on another request: whatever its
    call, a tool result there is judged by every tool's rules."""
    event = b"id: ev-9\nevent: message\ndata: " + compact(text_result(11, KEY)) + b"\n\n"
    path = stub.route("/get-replay", sse_canned(event, pieces=2))
    r = get(envoy.url + path, {"accept": "text/event-stream", "authorization": f"Bearer {TOKEN}"})
    assert r.status == 200
    assert r.body == b"id: ev-9\nevent: message\ndata: " + compact(refused(11)) + b"\n\n"
    assert_no_key(r.body)


@pytest.mark.parametrize("framing", ["json", "sse"])
def test_the_answer_under_the_id_of_a_call_without_rules_is_judged_by_every_tool_rule(envoy, stub, framing):
    """A client that sends `list_vms` (no result rules) under the id of a `read_file` call in flight
    has the SDKs' servers answer read_file's call on list_vms's reply (each routes a response to the
    latest request under its id): that answer is judged by read_file's rules all the same."""
    msg = text_result(21, f"{KEY}\n{KEY_BODY}")
    canned = json_canned(msg) if framing == "json" else sse_canned(b"event: message\ndata: " + compact(msg) + b"\n\n")
    path = stub.route("/reused-id-" + framing, canned)
    r = call(envoy, path, 21, tool="list_vms")
    assert r.status == 200
    got = json.loads(r.body) if framing == "json" else json.loads(r.body.split(b"data: ", 1)[1])
    assert got == refused(21)
    assert_no_key(r.body)
    # Its own answer passes byte for byte, however large: read_file's max_bytes is not its own.
    big = compact(text_result(22, "x" * 6000))
    path = stub.route("/own-answer-" + framing, json_canned(big) if framing == "json"
                      else sse_canned(b"event: message\ndata: " + big + b"\n\n"))
    r = call(envoy, path, 22, tool="list_vms")
    assert (r.status, r.body) == (200, big if framing == "json" else b"event: message\ndata: " + big + b"\n\n")


@pytest.mark.parametrize("content_type", ["application/jsonx", "application/json-seq", "Text/Event-Streams",
                                          "text/plain; x=application/json"])
def test_a_reply_in_a_content_type_clients_read_as_json_or_sse_is_refused(envoy, stub, content_type):
    """The Python SDK reads a reply whose content type starts with application/json as JSON, and the
    TypeScript SDK (1.x) one that contains it: a tool result there, under the id of a call in
    flight, would reach that call unread."""
    body = compact(text_result(7, f"{KEY}\n{KEY_BODY}"))
    path = stub.route("/loose-" + "".join(c if c.isalnum() else "_" for c in content_type), Canned(200, [("content-type", content_type)], chunks=[body]))
    r = post(envoy.url + path, rpc("resources/read", 8, {"uri": "file:///x"}), headers_for(TOKEN))
    assert r.status == 502
    assert json.loads(r.body)["error"]["data"] == {
        "kind": "bad_upstream_response", "reason": "the response is neither application/json nor text/event-stream"}
    assert_no_key(r.body)


def test_a_get_stream_that_is_not_sse_is_refused(envoy, stub):
    """The TypeScript SDK reads a GET's 2xx body as events whatever its content type."""
    event = b"id: ev-9\nevent: message\ndata: " + compact(text_result(11, KEY)) + b"\n\n"
    path = stub.route("/get-plain", Canned(200, [("content-type", "text/plain")], chunks=[event]))
    r = get(envoy.url + path, {"accept": "text/event-stream", "authorization": f"Bearer {TOKEN}"})
    assert r.status == 502
    assert_no_key(r.body)
    # Not a stream: a 405 (the server offers none) passes as it came, as does a GET that accepts no
    # events (a health check, a page: no MCP client's stream).
    path = stub.route("/get-405", Canned(405, [("content-type", "text/plain")], chunks=[b"no stream here"]))
    r = get(envoy.url + path, {"accept": "text/event-stream", "authorization": f"Bearer {TOKEN}"})
    assert (r.status, r.body) == (405, b"no stream here")
    path = stub.route("/health", Canned(200, [("content-type", "text/plain")], chunks=[b"ok"]))
    r = get(envoy.url + path, {"accept": "text/plain", "authorization": f"Bearer {TOKEN}"})
    assert (r.status, r.body) == (200, b"ok")


def test_a_private_key_written_with_json_escapes_is_refused(envoy, stub):
    escaped = "".join(f"\\u{ord(c):04x}" if c in "-K" else c for c in KEY)
    body = b'{"jsonrpc":"2.0","id":4,"result":{"content":[{"type":"text","text":"' + escaped.encode() + b'"}]}}'
    path = stub.route("/k-escaped", json_canned(body))
    r = call(envoy, path, 4)
    assert json.loads(r.body) == refused(4)
    assert_no_key(r.body)
    sse = b"event: message\ndata: " + body + b"\n\n"
    path = stub.route("/k-escaped-sse", sse_canned(sse, pieces=3))
    r = call(envoy, path, 4)
    assert r.body == b"event: message\ndata: " + compact(refused(4)) + b"\n\n"


def test_a_call_whose_result_is_checked_is_refused_in_a_batch(envoy, stub):
    path = stub.route("/k-batch", json_canned([text_result(1, f"{KEY}\n{KEY_BODY}")]))
    batch = json.dumps([json.loads(tool_call("read_file", {"path": "/etc/x"}, 1))]).encode()
    r = post(envoy.url + path, batch, headers_for(TOKEN, **{"mcp-protocol-version": "2025-03-26"}))
    why = "a call whose result the policy checks cannot be part of a batch; send it on its own"
    assert (r.status, json.loads(r.body)) == (200, [{"jsonrpc": "2.0", "id": 1, "error": {
        "code": -31001, "message": f"tool 'read_file' denied: {why}",
        "data": {"kind": "denied", "tool": "read_file", "reason": why, "rule": "tools.read_file.result"}}}])
    assert stub.requests(path) == []
    assert_no_key(r.body)


def test_the_reply_to_tasks_result_is_judged(envoy, stub):
    v = {"mcp-protocol-version": "2025-11-25"}
    path = stub.route("/k-task", json_canned(text_result(2, f"{KEY}\n{KEY_BODY}")))
    r = post(envoy.url + path, rpc("tasks/result", 2, {"taskId": "t1"}), headers_for(TOKEN, **v))
    assert (r.status, json.loads(r.body)) == (200, refused(2))
    assert_no_key(r.body)
    path = stub.route("/k-task-clean", json_canned(text_result(3, "fine")))
    r = post(envoy.url + path, rpc("tasks/result", 3, {"taskId": "t1"}), headers_for(TOKEN, **v))
    assert (r.status, json.loads(r.body)) == (200, text_result(3, "fine"))


def test_an_access_key_is_redacted_and_the_rest_is_byte_identical(envoy, stub):
    sent = text_result(5, f"aws_access_key_id = {AWS}\nregion = eu-west-1 \u00e9")
    path = stub.route("/aws", json_canned(sent))
    r = call(envoy, path, 5)
    assert r.status == 200
    assert r.body == compact(text_result(5, "aws_access_key_id = [redacted]\nregion = eu-west-1 \u00e9"))
    assert AWS.encode() not in r.body
    length = r.headers.get("content-length")
    assert length is None or int(length) == len(r.body)


def test_an_oversized_result_is_refused(envoy, stub):
    big = text_result(6, "x" * 5000)
    # With a content-length: refused at the headers, as a local reply.
    path = stub.route("/big", json_canned(big))
    r = call(envoy, path, 6)
    assert r.status == 200
    err = json.loads(r.body)["error"]
    assert (err["code"], err["data"]["kind"], err["data"]["rule"], err["data"]["reason"]) == (
        -31012, "result_refused", "tools.read_file.result.max_bytes", "the tool result is larger than 4096 bytes")
    # Chunked, no length: refused once the body passes max_bytes.
    body = compact(big)
    path = stub.route("/big-chunked", Canned(200, [("content-type", "application/json")],
                                             chunks=[body[:3000], body[3000:]], chunk_delay=0.2))
    r = call(envoy, path, 6)
    assert json.loads(r.body)["error"]["data"]["rule"] == "tools.read_file.result.max_bytes"
    assert b"xxxxxxxx" not in r.body


def test_a_redaction_that_would_grow_the_result_past_max_bytes_is_refused(envoy, stub):
    # 36 bytes more a token: 20 tokens grow a result of 209 bytes to 929; 120 add 4320, more than
    # the 4096 bytes of max_bytes (a JSON body's own size counts, an SSE event's does not).
    sent = text_result(12, " ".join(["ghp_a"] * 20))
    r = call(envoy, stub.route("/tokens-20", json_canned(sent)), 12)
    assert r.body == compact(text_result(12, " ".join(["[a GitHub token removed by this gateway]"] * 20)))
    for framing, canned in (("", json_canned), ("-sse", lambda b: sse_canned(b"event: message\ndata: " + compact(b) + b"\n\n"))):
        r = call(envoy, stub.route("/tokens-120" + framing, canned(text_result(13, " ".join(["ghp_a"] * 120)))), 13)
        body = r.body.decode()
        assert b"ghp_" not in r.body and b"GitHub" not in r.body, body[:300]
        err = json.loads(body.removeprefix("event: message\ndata: ").strip())["error"]
        assert (err["code"], err["data"]["rule"], err["data"]["reason"]) == (
            -31012, "tools.read_file.result.redact", "redacting the result makes it larger than 4096 bytes")


def test_a_clean_result_is_byte_identical(envoy, stub):
    body = b'{"jsonrpc": "2.0", "id": 7, "result": {"content": [{"type": "text", "text": "caf\\u00e9 \\u002d ok"}]}}'
    path = stub.route("/clean", json_canned(body))
    r = call(envoy, path, 7)
    assert r.body == body
    sse = b"event: message\r\ndata: " + body + b"\r\n\r\n"
    path = stub.route("/clean-sse", sse_canned(sse, pieces=4))
    assert call(envoy, path, 7).body == sse
    # Another tool's answer is judged by every tool's rules, under its own id as under another:
    # the SDKs hand each response of a JSON reply to the call its id names, which may be a
    # concurrent call of read_file, and their servers answer a call on the reply of a later one
    # under the same id.
    path = stub.route("/other", json_canned(text_result(8, KEY)))
    assert json.loads(call(envoy, path, 8, tool="other_tool").body) == refused(8)
    assert json.loads(call(envoy, path, 9, tool="other_tool").body)["error"]["data"]["rule"] == RULE
    path = stub.route("/other-clean", json_canned(text_result(8, "ok")))
    assert json.loads(call(envoy, path, 8, tool="other_tool").body) == text_result(8, "ok")


def test_audit_records_and_counters_name_the_rule_never_the_text(envoy, stub):
    path = stub.route("/audit-key", json_canned(text_result(9, KEY)))
    call(envoy, path, 9)
    path = stub.route("/audit-aws", json_canned(text_result(10, f"{AWS} {AWS}")))
    call(envoy, path, 10)
    log = envoy.log_text()
    results = [a for a in audit_records(log) if a.get("event") == "result"]
    refused_9 = [a for a in results if a["id"] == 9]
    assert refused_9 and refused_9[0]["decision"] == "result_refused" and refused_9[0]["rule"] == RULE
    redacted_10 = [a for a in results if a["id"] == 10]
    assert redacted_10[0]["decision"] == "redacted" and redacted_10[0]["redactions"] == 2
    assert KEY not in log and AWS not in log and KEY_BODY not in log
    stats = prometheus(envoy)
    assert stats["mcp_policy_results_result_refused_total{}"] >= 9
    assert stats["mcp_policy_results_redacted_total{}"] >= 2
    assert stats["mcp_policy_redactions_total{}"] >= 3
