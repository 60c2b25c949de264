"""Tier 2: tools/list filtering in real Envoy, in front of a stub upstream that replays canned responses
(testkit/upstream.py `StubUpstream`).

What the README ("tools/list filtering") and crates/core/src/response/toolslist/ promise:
- tools in `hide` (all for `"*"`; with `gateway.hide_denied_tools`, also tools denied by name alone) are
  removed from every result carrying `tools` in the reply to a tools/list request (whatever its id:
  the MCP Python SDK takes "5" as the answer to 5); `nextCursor` and every other field of the result and
  of each kept tool are preserved;
- `text/event-stream`: every other event, comment, `id:`/`event:` line is kept byte for byte; the data of
  the event carrying the list becomes one `data:` line with the filtered JSON;
- the official MCP SDK client never lists a hidden tool, whatever shape of answer it accepts; a list on
  the GET stream, on a stream resumed with Last-Event-ID or in the SSE reply to another request is
  filtered too, and events pass one by one before the stream ends; a charset other than UTF-8 gets
  HTTP 502 (-31006 `bad_upstream_response`).
"""

from __future__ import annotations

import json

import anyio
import pytest
from mcp import MCPError

from testkit.catalog import mcp_stub
from testkit.jsonrpc import Reply, headers_for, post, rpc
from testkit.mcp_session import open_session
from testkit.processes import HOST
from testkit.sse import sse_data, sse_events, sse_filtered
from testkit.upstream import Canned, StubUpstream, compact, json_canned, sse_canned
from tools_list_support import (CATALOG, CATALOG_HIDDEN, CATALOG_NAMES, DEMO_NAMES, DEMO_TOOLS, HIDDEN,
                                assert_no_tool_names, list_via)
import tools_list_support

envoy = tools_list_support.envoy  # the module-scoped fixture: this module's Envoy, in front of its `stub`


# ------------------------------------------------------------------------------ (a) recorded SSE stream


def recorded_stream(eol: str) -> bytes:
    """A tools/list answer as an MCP server streams it: a comment, a retry field, two notifications
    (the second naming a hidden tool, one with `data:` and no space) and a server-to-client request
    before the result, every event with an `id:`; the result's JSON is split over two `data:` lines."""
    result = {"jsonrpc": "2.0", "id": "list-1", "result": {
        "tools": DEMO_TOOLS + CATALOG[:6], "nextCursor": "b2Zmc2V0PTE0", "_meta": {"pve/cluster": "lab-é"}}}
    text = compact(result).decode()
    head, tail = text.split(',"result":', 1)
    progress = {"jsonrpc": "2.0", "method": "notifications/progress",
                "params": {"progressToken": "list-1", "progress": 1, "total": 2, "message": "listing"}}
    log = {"jsonrpc": "2.0", "method": "notifications/message",
           "params": {"level": "info", "logger": "pve", "data": "delete_vm and vm_agent_exec_status are deprecated"}}
    roots = {"jsonrpc": "2.0", "id": "srv-1", "method": "roots/list"}
    e = eol
    return (f": pve-mcp stream{e}{e}"
            f"retry: 3000{e}{e}"
            f"event: message{e}id: 01J9Z-0001{e}data: {compact(progress).decode()}{e}{e}"
            f"event: message{e}id: 01J9Z-0002{e}data:{compact(log).decode()}{e}{e}"
            f"event: message{e}id: 01J9Z-0003{e}data: {compact(roots).decode()}{e}{e}"
            f"event: message{e}id: 01J9Z-0004{e}data: {head},{e}data: \"result\":{tail}{e}{e}").encode()


@pytest.mark.parametrize("eol", ["\r\n", "\n", "\r"], ids=["crlf", "lf", "cr"])
def test_recorded_sse_stream_is_filtered_byte_exact(envoy, stub, eol):
    stream = recorded_stream(eol)
    path = stub.route(f"/sse-recorded-{len(eol)}{eol == chr(13)}", sse_canned(stream, pieces=9, chunk_delay=0.02))
    r = list_via(envoy, path, "list-1")
    expected = sse_filtered(stream, "list-1", HIDDEN)

    assert r.status == 200
    assert r.headers["content-type"] == "text/event-stream"
    assert expected != stream
    assert r.body == expected
    # Everything before the result is the upstream's bytes, untouched (the notification still names
    # delete_vm: only the matching response is rewritten).
    cut = stream.index(f"id: 01J9Z-0004{eol}".encode())
    assert r.body[:cut] == stream[:cut]
    assert b"delete_vm and vm_agent_exec_status are deprecated" in r.body[:cut]
    *_, last = sse_events(r.body)
    msg = json.loads(sse_data(last))
    assert [t["name"] for t in msg["result"]["tools"]] == \
        [n for n in DEMO_NAMES + CATALOG_NAMES[:6] if n not in HIDDEN]
    assert msg["result"]["nextCursor"] == "b2Zmc2V0PTE0"
    assert msg["result"]["_meta"] == {"pve/cluster": "lab-é"}


# ------------------------------------------------------------------------------ (b) 286-tool catalogue

CURSOR = "eyJvZmZzZXQiOjE1MH0="
NUM = '"__RAW_NUMBER__"'  # replaced by a number text Python would not write back the same way


def catalog_page(id_, tools, cursor: str | None) -> bytes:
    result: dict = {"tools": tools}
    if cursor:
        result["nextCursor"] = cursor
    result["_meta"] = {"pve/ratio": "__RAW_NUMBER__", "pve/total": len(CATALOG)}
    return compact({"jsonrpc": "2.0", "id": id_, "result": result}).replace(NUM.encode(), b"1.50e+0")


@pytest.mark.parametrize("mode", ["json", "sse"])
def test_catalog_of_286_tools_keeps_everything_but_hidden_tools(envoy, stub, mode):
    pages = [(41, CATALOG[:150], CURSOR, {}), (42, CATALOG[150:], None, {"cursor": CURSOR})]
    kept_names, kept_tools = [], []
    for id_, tools, cursor, params in pages:
        body = catalog_page(id_, tools, cursor)
        if mode == "json":
            canned = json_canned(body)
        else:
            canned = sse_canned(b"event: message\r\ndata: " + body + b"\r\n\r\n", pieces=4)
        path = stub.route(f"/catalog-{mode}-{id_}", canned)
        r = list_via(envoy, path, id_, params)
        assert r.status == 200
        assert stub.requests(path)[-1].body == rpc("tools/list", id_, params)
        if mode == "json":
            assert r.headers["content-type"] == "application/json"
            payload = r.body
        else:
            assert r.headers["content-type"] == "text/event-stream"
            (event,) = sse_events(r.body)
            payload = sse_data(event).encode()
            assert r.body == b"event: message\r\ndata: " + payload + b"\r\n\r\n"
        expected_tools = [t for t in tools if t["name"] not in HIDDEN]
        # Byte-exact: compact JSON, members in order, the number text kept as sent.
        assert payload == catalog_page(id_, expected_tools, cursor)
        msg = json.loads(payload)
        assert msg["id"] == id_
        assert msg["result"].get("nextCursor") == cursor
        assert b'"pve/ratio":1.50e+0' in payload
        for got in msg["result"]["tools"]:
            original = tools[[t["name"] for t in tools].index(got["name"])]
            assert got == original and list(got) == list(original)
        kept_names += [t["name"] for t in msg["result"]["tools"]]
        kept_tools += msg["result"]["tools"]
        assert_no_tool_names(payload, [n for n in CATALOG_NAMES if n in HIDDEN])
    assert len(CATALOG) == 286 and len(CATALOG_HIDDEN) == 32
    assert kept_names == [n for n in CATALOG_NAMES if n not in HIDDEN]
    assert len(kept_names) == 286 - 32


# ------------------------------------------------------------------------------ (e) other ids


OTHER_ID = [
    ("json-error-same-id", "application/json",
     b'{"jsonrpc":"2.0",  "id":5,"error":{"code":-32603,"message":"delete_vm backend down"}}'),
    ("json-null-id", "application/json",
     b'{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}'),
]


@pytest.mark.parametrize("case,ctype,body", OTHER_ID, ids=[c[0] for c in OTHER_ID])
def test_response_that_does_not_answer_the_list_passes_unchanged(envoy, stub, case, ctype, body):
    path = stub.route(f"/other-{case}", Canned(200, [("content-type", ctype)], body))
    r = list_via(envoy, path, 5)
    assert (r.status, r.headers["content-type"], r.body) == (200, ctype, body)


# A tool list under another id, or under the id as a string ("5" for 5, which the MCP Python SDK
# treats as the same id), is filtered too: fail closed rather than trust the id.
LIST_UNDER_OTHER_ID = [
    ("json-other-id", "application/json", 6),
    ("json-string-id", "application/json", "5"),
    ("sse-other-id", "text/event-stream", 6),
    ("sse-string-id", "text/event-stream", "5"),
]


@pytest.mark.parametrize("case,ctype,rid", LIST_UNDER_OTHER_ID, ids=[c[0] for c in LIST_UNDER_OTHER_ID])
def test_tool_lists_under_another_id_are_filtered_too(envoy, stub, case, ctype, rid):
    msg = {"jsonrpc": "2.0", "id": rid, "result": {"tools": DEMO_TOOLS}}
    if ctype == "application/json":
        body = json.dumps(msg, indent=2).encode()
    else:
        body = b"event: message\r\nid: 9\r\ndata: " + json.dumps(msg).encode() + b"\r\n\r\n"
    path = stub.route(f"/list-{case}", Canned(200, [("content-type", ctype)], body))
    r = list_via(envoy, path, 5)
    assert r.status == 200
    text = r.body.decode()
    data = text if ctype == "application/json" else text.split("data: ", 1)[1].split("\r\n", 1)[0]
    got = json.loads(data)
    assert got["id"] == rid
    assert [t["name"] for t in got["result"]["tools"]] == [n for n in DEMO_NAMES if n not in HIDDEN]


def test_a_tool_list_in_the_reply_to_another_method_is_filtered(envoy, stub):
    """A JSON reply to a tools/call whose result carries a `tools` array is filtered as an SSE one is:
    the SDKs hand each response of a JSON reply to the request its id names, which may be a
    concurrent tools/list. A reply to another method without one passes byte for byte."""
    body = compact({"jsonrpc": "2.0", "id": 3, "result": {"tools": [{"name": "delete_vm"}], "content": []}})
    path = stub.route("/call-with-tools", json_canned(body))
    r = post(envoy.url + path, rpc("tools/call", 3, {"name": "list_vms", "arguments": {}}), headers_for("lists-grant"))
    assert (r.status, r.body) == (200, compact({"jsonrpc": "2.0", "id": 3, "result": {"tools": [], "content": []}}))
    plain = b'{"jsonrpc": "2.0", "id": 4, "result": {"content": [{"type": "text", "text": "ok"}]}}'
    path = stub.route("/call-plain", json_canned(plain))
    r = post(envoy.url + path, rpc("tools/call", 4, {"name": "list_vms", "arguments": {}}), headers_for("lists-grant"))
    assert (r.status, r.body) == (200, plain)


# ------------------------------------------------------------------------------ (g) what is hidden

RULES = {"list_vms": {}, "vm_status": {}, "start_vm": {"action": "allow"},
         "stop_vm": {"action": "deny", "reason": "stopping VMs needs a change ticket"},
         "vm_agent_exec": {"require": [{"path": "args.vmid", "op": "in", "value": [100, 101]}]}}
EXTRA = CATALOG[:3]  # unlisted tools


@pytest.mark.parametrize("policy,kept", [
    ({"version": "1", "default": "deny", "hide": ["delete_vm"], "tools": RULES,
      "gateway": {"hide_denied_tools": True}},
     ["list_vms", "vm_status", "start_vm", "vm_agent_exec"]),
    ({"version": "1", "default": "deny", "hide": ["delete_vm"], "tools": RULES},
     [n for n in DEMO_NAMES if n != "delete_vm"] + [t["name"] for t in EXTRA]),
    ({"version": "1", "default": "allow", "tools": RULES, "gateway": {"hide_denied_tools": True}},
     [n for n in DEMO_NAMES if n != "stop_vm"] + [t["name"] for t in EXTRA]),
    ({"version": "1", "default": "allow", "hide": ["*"]}, []),
], ids=["hide_denied_tools", "default-keeps-denied-visible", "allow-default-hides-action-deny", "hide-star"])
def test_which_tools_disappear(stack, policy, kept):
    with StubUpstream() as up:
        envoy = stack.envoy(policy, up.port)
        tools = DEMO_TOOLS + EXTRA
        for mode in ("json", "sse"):
            body = compact({"jsonrpc": "2.0", "id": 12, "result": {"tools": tools}})
            canned = json_canned(body) if mode == "json" else sse_canned(b"event: message\ndata: " + body + b"\n\n")
            up.route("/list", canned)
            r = list_via(envoy, "/list", 12)
            assert r.status == 200
            payload = r.body if mode == "json" else sse_data(sse_events(r.body)[0]).encode()
            assert json.loads(payload) == {"jsonrpc": "2.0", "id": 12, "result": {
                "tools": [t for t in tools if t["name"] in kept]}}
            assert [t["name"] for t in json.loads(payload)["result"]["tools"]] == \
                [t["name"] for t in tools if t["name"] in kept]


# ------------------------------------------------------------------------------ the SDK client's view


def sdk_list_names(url: str):
    """list_tools() with the official MCP SDK client: the names, or the MCPError it raised."""
    async def scenario():
        with anyio.fail_after(20):
            async with open_session(url, "lists-sdk") as s:
                try:
                    return [t.name for t in (await s.list_tools()).tools]
                except MCPError as e:
                    return e
    return anyio.run(scenario)


@pytest.mark.parametrize("shape", ["sse-final-event-ends-with-cr", "json-id-as-numeric-string",
                                   "sse-id-as-numeric-string", "control-matching-id"])
def test_sdk_client_never_sees_a_hidden_tool(envoy, stub, shape):
    """Responses an upstream may send that the MCP Python SDK (2.x) accepts as the answer to its
    tools/list: the hidden tools must not reach it.

    - `sse-final-event-ends-with-cr`: the last event ends with a single CR at end of stream. The SDK's SSE
      parser (httpx2) dispatches it; the filter treats it as unterminated and forwards it unfiltered.
    - `*-id-as-numeric-string`: the result carries id "N" for request N. The SDK correlates it
      (mcp.shared.dispatcher.coerce_request_id: '"7" and 7 are one id'); the filter sees another id.
    """
    def on_list(id_):
        tools = {"tools": DEMO_TOOLS}
        if shape == "sse-final-event-ends-with-cr":
            return sse_canned(b"event: message\r\ndata: " + compact({"jsonrpc": "2.0", "id": id_, "result": tools})
                              + b"\r")
        if shape == "json-id-as-numeric-string":
            return json_canned({"jsonrpc": "2.0", "id": str(id_), "result": tools})
        if shape == "sse-id-as-numeric-string":
            return sse_canned(b"event: message\r\ndata: " + compact({"jsonrpc": "2.0", "id": str(id_), "result": tools})
                              + b"\r\n\r\n")
        return json_canned({"jsonrpc": "2.0", "id": id_, "result": tools})

    path = stub.route(f"/sdk-{shape}", mcp_stub(on_list))
    got = sdk_list_names(envoy.url + path)
    if isinstance(got, MCPError):
        assert got.error.code == -31006, got
        return
    assert got == [n for n in DEMO_NAMES if n not in HIDDEN], f"the SDK client listed {got}"


# ------------------------------------------------------------------------------ (h) red-team findings


def _get(envoy, path: str, **headers) -> Reply:
    """A GET (the Streamable HTTP SSE stream) through Envoy, read raw."""
    import http.client
    conn = http.client.HTTPConnection(HOST, envoy.listen_port, timeout=10)
    conn.putrequest("GET", path, skip_accept_encoding=True)
    for k, v in {"accept": "text/event-stream", "authorization": "Bearer lists-grant", **headers}.items():
        conn.putheader(k, v)
    conn.endheaders()
    resp = conn.getresponse()
    body = resp.read()
    conn.close()
    return Reply(resp.status, [(k.lower(), v) for k, v in resp.getheaders()], body)


@pytest.mark.parametrize("charset", ["utf-7", "UTF-16", "\"latin1\""])
def test_a_non_utf8_charset_gets_502(envoy, stub, charset):
    """A client decodes by the declared charset; in UTF-7 `+ACIAfQ...-` inside a string is a new tool."""
    msg = {"jsonrpc": "2.0", "id": 7, "result": {"tools": DEMO_TOOLS}}
    for ctype, body in [("application/json", compact(msg)),
                        ("text/event-stream", b"event: message\ndata: " + compact(msg) + b"\n\n")]:
        path = stub.route(f"/charset-{ctype.replace('/', '-')}-{charset.strip(chr(34))}",
                          Canned(200, [("content-type", f"{ctype}; charset={charset}")], body))
        r = list_via(envoy, path, 7)
        assert r.status == 502, ctype
        assert r.json()["error"]["code"] == -31006
        assert r.json()["error"]["data"]["reason"] == "the response declares a charset other than utf-8"
        assert_no_tool_names(r.body, DEMO_NAMES)


def test_utf8_charset_is_filtered_normally(envoy, stub):
    msg = {"jsonrpc": "2.0", "id": 7, "result": {"tools": DEMO_TOOLS}}
    path = stub.route("/charset-ok", Canned(200, [("content-type", "application/json; charset=\"UTF-8\"")], compact(msg)))
    r = list_via(envoy, path, 7)
    assert r.status == 200
    assert [t["name"] for t in r.json()["result"]["tools"]] == [n for n in DEMO_NAMES if n not in HIDDEN]


def test_tool_lists_on_get_and_resumed_streams_are_filtered(envoy, stub):
    """An SDK matches a list that arrives on the GET stream (or a stream resumed with Last-Event-ID)
    to its pending tools/list request by id: those streams must be filtered too."""
    msg = {"jsonrpc": "2.0", "id": 7, "result": {"tools": DEMO_TOOLS}}
    stream = b"id: ev2\r\nevent: message\r\ndata: " + compact(msg) + b"\r\n\r\n"
    path = stub.route("/resume", sse_canned(stream, pieces=7))
    r = _get(envoy, path, **{"last-event-id": "ev1"})
    assert r.status == 200
    expected = sse_filtered(stream, 7, HIDDEN)
    assert r.body == expected
    assert b"delete_vm" not in r.body


def test_sse_replies_to_other_requests_are_filtered(envoy, stub):
    """A tools/call answered over SSE whose stream also carries a tool list for another id."""
    listing = {"jsonrpc": "2.0", "id": 99, "result": {"tools": DEMO_TOOLS}}
    answer = {"jsonrpc": "2.0", "id": 3, "result": {"content": [{"type": "text", "text": "ok"}]}}
    stream = b"data: " + compact(listing) + b"\n\ndata: " + compact(answer) + b"\n\n"
    path = stub.route("/call-sse", sse_canned(stream, pieces=3))
    r = post(envoy.url + path, rpc("tools/call", 3, {"name": "list_vms", "arguments": {}}), headers_for("lists-grant"))
    assert r.status == 200
    assert r.body == sse_filtered(stream, 99, HIDDEN)
    assert b"delete_vm" not in r.body


def test_sse_events_pass_before_the_stream_ends(envoy, stub):
    """Streams are filtered event by event: the first event reaches the client while the upstream
    still holds the stream open (a long-lived GET stream must keep working)."""
    import socket
    first = b"event: message\ndata: " + compact({"jsonrpc": "2.0", "method": "notifications/x"}) + b"\n\n"
    path = stub.route("/slow-stream", Canned(200, [("content-type", "text/event-stream")], b"",
                                             chunks=[first, b": still here\n\n"], chunk_delay=2.0))
    sock = socket.create_connection((HOST, envoy.listen_port), timeout=10)
    sock.sendall(f"GET {path} HTTP/1.1\r\nhost: x\r\naccept: text/event-stream\r\n"
                 "authorization: Bearer lists-grant\r\n\r\n".encode())
    sock.settimeout(1.5)
    got = b""
    try:
        while b"notifications/x" not in got:
            data = sock.recv(65536)
            if not data:
                break
            got += data
    except socket.timeout:
        pass
    sock.close()
    assert b"notifications/x" in got, got
