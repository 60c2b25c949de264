"""Tier 2: an HTTP/2 request whose body ends with trailers is still judged on its whole body.

Over HTTP/2 a request may end with a HEADERS frame of trailers instead of END_STREAM on the last DATA
frame; Envoy then never reports end_of_stream to the body callback, only the trailers. The filter
decides in `on_http_request_trailers` too (README, "Bodies"). Uses the `h2` library over a plain
socket with prior knowledge (Envoy's HTTP connection manager speaks h2c on the same listener).
"""

from __future__ import annotations

import json
import socket

import h2.config
import h2.connection
import h2.events

from testkit.envoy import POLICY_JSON
from testkit.jsonrpc import tool_call
from testkit.processes import HOST
from testkit.upstream import recorder_lines, recorder_reply

SETTLE = 0.2


def h2_post(port: int, body: bytes, token: str, chunks: int = 3) -> tuple[int, bytes]:
    """POST `body` to /mcp in `chunks` DATA frames, then trailers. Returns (status, response body)."""
    sock = socket.create_connection((HOST, port), timeout=10)
    conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
    conn.initiate_connection()
    sid = conn.get_next_available_stream_id()
    conn.send_headers(sid, [
        (":method", "POST"), (":path", "/mcp"), (":scheme", "http"), (":authority", f"127.0.0.1:{port}"),
        ("content-type", "application/json"), ("accept", "application/json, text/event-stream"),
        ("authorization", f"Bearer {token}"),
    ])
    step = max(1, len(body) // chunks)
    for i in range(0, len(body), step):
        conn.send_data(sid, body[i:i + step])
    conn.send_headers(sid, [("x-trailer", "done")], end_stream=True)
    sock.sendall(conn.data_to_send())
    status, data, done = None, b"", False
    while not done:
        chunk = sock.recv(65536)
        if not chunk:
            break
        for ev in conn.receive_data(chunk):
            if isinstance(ev, h2.events.ResponseReceived):
                status = int(dict(ev.headers)[":status"])
            elif isinstance(ev, h2.events.DataReceived):
                data += ev.data
                conn.acknowledge_received_data(ev.flow_controlled_length, ev.stream_id)
            elif isinstance(ev, (h2.events.StreamEnded, h2.events.StreamReset)):
                done = True
        sock.sendall(conn.data_to_send())
    sock.close()
    return status, data


def test_bodies_ending_in_trailers_are_judged(stack):
    _, port, log = stack.recorder()
    envoy = stack.envoy(POLICY_JSON.read_text(encoding="utf-8"), port)
    listen = envoy.listen_port

    status, data = h2_post(listen, tool_call("delete_vm", {"node": "pve1", "vmid": 100}, id=5), "grant-h2")
    assert status == 200
    reply = json.loads(data)
    assert reply["id"] == 5
    assert reply["error"]["code"] == -31001
    assert reply["error"]["data"]["tool"] == "delete_vm"
    assert recorder_lines(log, settle=SETTLE) == []

    status, data = h2_post(listen, tool_call("list_vms", {}, id=6), "grant-h2")
    assert status == 200
    assert json.loads(data) == json.loads(recorder_reply(6))
    (seen,) = recorder_lines(log, settle=SETTLE)
    assert seen["method"] == "POST"
