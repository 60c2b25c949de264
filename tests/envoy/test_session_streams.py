"""Tier 2: the ids a stream hands out bound to the grant (`gateway.session_key`), in real Envoy, in
front of the official Python SDK's server (the demo server).

- Event ids and `Last-Event-ID`: the demo server with `--resumable` keeps every session's SSE events
  in one store, as the SDK's example event store does, so a server event id replays its stream to
  whoever names it. Behind the filter each event id is sealed for its grant and session: another
  grant, holding a valid session of its own, is refused (404, −31010) with the owner's sealed id or
  the server's bare one, and nothing is replayed; the owner resumes with its own id.
- The 2024-11-05 HTTP+SSE transport (`--legacy-sse`): the `endpoint` event's `session_id` is sealed
  for the stream's grant; a POST naming another grant's session, the server's bare id or a forged
  one is refused (404, −31010) and nothing reaches the server; the owner's flow works; the shipped
  access log prints the path without its query.
"""

from __future__ import annotations

import base64
import json
import queue
import re
import sys
import threading

import httpx
import pytest

from testkit.demo import DEMO_SERVER
from testkit.jsonrpc import ACCEPT, get, headers_for, post, rpc, tool_call
from testkit.paths import REPO_ROOT
from testkit.processes import free_port, port_open

KEY = "k" * 40
VERSION = "2025-11-25"
SEALED = r"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]{43}"
EVENT_ID_INVALID = "this Last-Event-ID was not issued to this grant on this Mcp-Session-Id by this gateway; reconnect without it"
LEGACY_INVALID = "this session id (query parameter) was not issued to this grant by this gateway; open a new SSE stream"
INIT = rpc("initialize", 1, {"protocolVersion": VERSION, "capabilities": {},
                             "clientInfo": {"name": "raw", "version": "1"}})
INITIALIZED = b'{"jsonrpc":"2.0","method":"notifications/initialized"}'


def policy(hide: list[str] | None = None) -> dict:
    p = {"version": "1", "default": "deny", "tools": {"list_vms": {}, "stop_vm": {}},
         "gateway": {"session_key": {"current": KEY}}}
    if hide:
        p["hide"] = hide
    return p


def demo(stack, flag: str) -> int:
    port = free_port()
    stack.spawn(f"demo{flag}", [sys.executable, str(DEMO_SERVER), "--port", str(port), flag],
                lambda: port_open(port), "accepting connections", cwd=REPO_ROOT)
    return port


def unseal(sealed: str) -> str:
    """The server's id inside a sealed id (`<prefix><base64url(id)>.<tag>`)."""
    middle = sealed.split(".")[1]
    return base64.urlsafe_b64decode(middle + "=" * (-len(middle) % 4)).decode()


def sse_events(body: bytes) -> list[dict[str, str]]:
    """The events of an SSE body: each field's last value (`data` lines joined)."""
    out = []
    for block in re.split(r"\r\n\r\n|\n\n|\r\r", body.decode()):
        event: dict[str, str] = {}
        for line in re.split(r"\r\n|\n|\r", block):
            if not line or line.startswith(":"):
                continue
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            event[name] = event[name] + "\n" + value if name == "data" and name in event else value
        if event:
            out.append(event)
    return out


def refused(r, reason: str) -> None:
    assert r.status == 404, (r.status, r.body)
    assert (r.error["code"], r.error["data"]["kind"], r.error["data"]["reason"]) == (-31010, "session_invalid", reason)


# ------------------------------------------------------------------------- Last-Event-ID


@pytest.fixture(scope="module", params=["ids", "ids_and_lists"])
def resumable(request, module_stack):
    """An Envoy in front of the demo server keeping one event store for all sessions; with
    `ids_and_lists` the policy also hides a tool, so SSE replies are filtered for tool lists too."""
    if not hasattr(module_stack, "resumable_port"):
        module_stack.resumable_port = demo(module_stack, "--resumable")
    hide = ["vm_agent_exec_status"] if request.param == "ids_and_lists" else None
    return module_stack.envoy(policy(hide), module_stack.resumable_port, name=f"envoy-{request.param}")


def session(url: str, token: str) -> str:
    r = post(url, INIT, headers_for(token, **{"mcp-protocol-version": VERSION}))
    assert r.status == 200, r.body
    sid = r.headers["mcp-session-id"]
    h = headers_for(token, **{"mcp-session-id": sid, "mcp-protocol-version": VERSION})
    assert post(url, INITIALIZED, h).status == 202
    return sid


def sh(token: str, sid: str, **extra: str) -> dict[str, str]:
    return headers_for(token, **{"mcp-session-id": sid, "mcp-protocol-version": VERSION, **extra})


def resume(url: str, headers: dict[str, str], until: str, timeout: float = 10.0) -> list[dict[str, str]]:
    """GET the stream with `headers` (a Last-Event-ID among them); the events read until one whose
    data contains `until` (the server then keeps the stream open)."""
    seen, buf = [], b""
    with httpx.stream("GET", url, headers={**headers, "accept": "text/event-stream"}, timeout=timeout) as r:
        assert (r.status_code, r.headers["content-type"]) == (200, "text/event-stream"), r.read()
        for chunk in r.iter_raw():
            buf += chunk
            seen = sse_events(buf)
            if any(until in e.get("data", "") for e in seen):
                return seen
    raise AssertionError(f"stream ended before {until!r}: {buf!r}")


def test_another_grant_cannot_resume_a_stream_by_its_event_ids(resumable):
    url = resumable.mcp_url
    sid_a, sid_b = session(url, "grant-a"), session(url, "grant-b")
    r = post(url, tool_call("list_vms", {}, id=41), sh("grant-a", sid_a))
    assert (r.status, r.headers["content-type"]) == (200, "text/event-stream"), r.body
    events = sse_events(r.body)
    # A priming event (an id, empty data: SDK 2.x with an event store), then the result; both ids sealed.
    assert [e.get("data") for e in events][0] == "" and '"id":41' in events[-1]["data"], events
    ids = [e["id"] for e in events]
    assert all(re.fullmatch("e1." + SEALED, i) for i in ids), ids
    assert all(re.fullmatch(r"[0-9a-f]{32}", unseal(i)) for i in ids), ids
    priming = ids[0]
    # Grant B, holding its own valid session, names A's events: sealed as A saw them, or bare as the
    # server knows them. 404, and no event of A's is replayed.
    for last in [priming, unseal(priming)]:
        refused(get(url, sh("grant-b", sid_b, **{"last-event-id": last, "accept": "text/event-stream"})),
                EVENT_ID_INVALID)
    # Nor can A's own grant resume it from another session, or bare.
    sid_a2 = session(url, "grant-a")
    refused(get(url, sh("grant-a", sid_a2, **{"last-event-id": priming, "accept": "text/event-stream"})),
            EVENT_ID_INVALID)
    refused(get(url, sh("grant-a", sid_a, **{"last-event-id": unseal(priming), "accept": "text/event-stream"})),
            EVENT_ID_INVALID)
    # A resumes after the priming event: the result is replayed on the GET stream, under the same
    # sealed id (a GET reply's ids are sealed like a POST reply's).
    replayed = resume(url, sh("grant-a", sid_a, **{"last-event-id": priming}), '"id":41')
    result = [e for e in replayed if '"id":41' in e.get("data", "")]
    assert [(e["id"], json.loads(e["data"])) for e in result] == [(ids[-1], json.loads(events[-1]["data"]))]


# ------------------------------------------------------------------------- HTTP+SSE (2024-11-05)


class SseReader:
    """A GET stream read on a thread: its events, one at a time."""

    def __init__(self, url: str, token: str):
        self.events: queue.Queue[dict[str, str]] = queue.Queue()
        self.client = httpx.Client(timeout=httpx.Timeout(10, read=None))
        self.response = self.client.send(self.client.build_request(
            "GET", url, headers={"authorization": f"Bearer {token}", "accept": "text/event-stream"}), stream=True)
        assert self.response.status_code == 200, self.response.read()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        buf = b""
        try:
            for chunk in self.response.iter_raw():
                buf += chunk
                while (m := re.search(rb"\r\n\r\n|\n\n", buf)) is not None:
                    block, buf = buf[:m.end()], buf[m.end():]
                    for e in sse_events(block):
                        self.events.put(e)
        except (httpx.HTTPError, RuntimeError, ValueError):
            pass

    def next(self, timeout: float = 10.0) -> dict[str, str] | None:
        try:
            return self.events.get(timeout=timeout)
        except queue.Empty:
            return None

    def close(self) -> None:
        self.response.close()
        self.client.close()


def legacy_post(base: str, path: str, body: bytes, token: str):
    return post(base + path, body, {"content-type": "application/json", "accept": ACCEPT,
                                    "authorization": f"Bearer {token}"})


def legacy_session(base: str, token: str) -> tuple[SseReader, str]:
    """A GET /sse stream of `token`, initialized; the reader and the endpoint path it was given."""
    reader = SseReader(base + "/sse", token)
    endpoint = reader.next()
    assert endpoint and endpoint.get("event") == "endpoint", endpoint
    path = endpoint["data"]
    assert legacy_post(base, path, INIT, token).status == 202
    reply = reader.next()
    assert reply and json.loads(reply["data"])["id"] == 1, reply
    assert legacy_post(base, path, INITIALIZED, token).status == 202
    return reader, path


def vm_100(base: str, reader: SseReader, path: str, token: str, id_: int) -> str:
    assert legacy_post(base, path, tool_call("list_vms", {}, id=id_), token).status == 202
    reply = reader.next()
    assert reply and json.loads(reply["data"])["id"] == id_, reply
    vms = json.loads(json.loads(reply["data"])["result"]["content"][0]["text"])["vms"]
    return [v for v in vms if v["vmid"] == 100][0]["status"]


def test_legacy_sessions_are_bound_to_the_grant_of_their_stream(stack):
    envoy = stack.envoy(policy(), demo(stack, "--legacy-sse"))
    base = envoy.url
    a, path_a = legacy_session(base, "grant-a")
    b, path_b = legacy_session(base, "grant-b")
    try:
        m = re.fullmatch(r"/messages/\?session_id=(l1\." + SEALED + ")", path_a)
        assert m, path_a
        raw = unseal(m.group(1))
        assert re.fullmatch(r"[0-9a-f]{32}", raw), raw
        assert path_b != path_a
        stop = tool_call("stop_vm", {"node": "pve1", "vmid": 100}, id=7)
        accept = b'{"jsonrpc":"2.0","id":0,"result":{"action":"accept","content":{}}}'
        forged = path_a[:-1] + ("A" if path_a[-1] != "A" else "B")
        for path, body in [
            (path_a, stop),  # A's sealed id, as A received it
            (path_a, accept),  # an answer (elicitation) into A's session
            (f"/messages/?session_id={raw}", stop),  # the server's bare id
            (forged, stop),  # a tampered tag
            (f"/messages/?session_id={path_b.split('=')[1]}&session_id={raw}", stop),  # two of them
            (f"/messages/?session%5Fid={raw}", stop),  # a percent-encoded name
        ]:
            refused(legacy_post(base, path, body, "grant-b"), LEGACY_INVALID)
        # Nothing reached the server: A's stream shows nothing, and VM 100 still runs.
        assert a.next(timeout=1.5) is None
        assert vm_100(base, a, path_a, "grant-a", 8) == "running"
        # B's own session works, and A cannot use it either.
        assert vm_100(base, b, path_b, "grant-b", 9) == "running"
        refused(legacy_post(base, path_b, stop, "grant-a"), LEGACY_INVALID)
        assert b.next(timeout=1.0) is None
    finally:
        a.close()
        b.close()
    # The shipped access log prints the path without its query: no session id, sealed or bare.
    envoy.stop()  # flushes the access log
    lines = [line for line in envoy.log_text().splitlines() if '"POST /messages/' in line]
    assert len(lines) == 13 and all('"POST /messages/" ' in line for line in lines), lines
    assert raw not in envoy.log_text() and m.group(1) not in envoy.log_text()
