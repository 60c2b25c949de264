"""Raw JSON-RPC over HTTP for the tier 2 and 3 tests: exact request bytes in, exact response bytes out.

- `Reply`: the one reply type (status, headers as sent, body bytes as received).
- `request` / `post` / `get`: one HTTP/1.1 request over `http.client` on a new connection (so a
  burst of calls is spread over Envoy's workers). Nothing is added but Host, Content-Length (or
  chunked transfer encoding for an iterable body) and `Accept-Encoding: identity` unless the caller
  sends an accept-encoding; nothing is decoded but chunked transfer encoding.
  A transport failure (reset, closed connection, timeout) raises one of `TRANSPORT_ERRORS`.
- Bodies: `rpc` (any request), `tool_call` (a `tools/call`); headers: `headers_for`.
"""

from __future__ import annotations

import http.client
import json
import threading
import urllib.parse
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

ACCEPT = "application/json, text/event-stream"
TRANSPORT_ERRORS = (http.client.HTTPException, OSError)


@dataclass
class Reply:
    """An HTTP reply: status, the headers as sent (name case and order kept; a mapping given here is
    taken as such a list) and the raw body bytes."""

    status: int
    header_list: list[tuple[str, str]] | Mapping[str, str]
    body: bytes

    def __post_init__(self) -> None:
        if isinstance(self.header_list, Mapping):
            self.header_list = list(self.header_list.items())

    @property
    def headers(self) -> dict[str, str]:
        """Lower-cased names; the values of a repeated header joined with ", " (RFC 9110 §5.3)."""
        out: dict[str, str] = {}
        for k, v in self.header_list:
            k = k.lower()
            out[k] = f"{out[k]}, {v}" if k in out else v
        return out

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def error(self) -> dict[str, Any]:
        """The JSON-RPC `error` object of a single (non-batch) error reply; AssertionError if there is none."""
        try:
            msg = self.json()
        except ValueError:
            msg = None
        if not isinstance(msg, dict) or not isinstance(msg.get("error"), dict):
            raise AssertionError(f"not a JSON-RPC error reply: HTTP {self.status} {self.body[:300]!r}")
        return msg["error"]

    @classmethod
    def of(cls, response) -> "Reply":
        """An httpx response (of a keep-alive client) as a Reply: raw header list, decoded body."""
        return cls(response.status_code, [(k.decode("latin-1"), v.decode("latin-1")) for k, v in response.headers.raw],
                   response.content)


def request(method: str, url: str, body: bytes | Iterable[bytes] | None = None,
            headers: Mapping[str, str] | None = None, timeout: float = 10.0) -> Reply:
    """One request to `url` (http://host:port/path?query) on a new connection; the reply unparsed.
    An iterable `body` is sent with chunked transfer encoding."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "http":
        raise ValueError(f"not an http:// URL: {url}")
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    if not body and method.upper() not in ("POST", "PUT", "PATCH"):
        body = None  # no Content-Length: 0 on an empty GET or DELETE
    conn = http.client.HTTPConnection(parts.hostname, parts.port or 80, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=dict(headers or {}),
                     encode_chunked=body is not None and not isinstance(body, (bytes, bytearray)))
        resp = conn.getresponse()
        return Reply(resp.status, list(resp.getheaders()), resp.read())
    finally:
        conn.close()


def post(url: str, body: bytes | Iterable[bytes], headers: Mapping[str, str], timeout: float = 10.0) -> Reply:
    """POST `body` as is and return the reply unparsed."""
    return request("POST", url, body, headers, timeout)


def get(url: str, headers: Mapping[str, str], timeout: float = 10.0) -> Reply:
    """GET `url` (e.g. the Streamable HTTP SSE stream) and return the reply unparsed."""
    return request("GET", url, None, headers, timeout)


def rpc(method: str, id: Any, params: dict | None = None) -> bytes:
    """A compact JSON-RPC request body (non-ASCII escaped); `params` left out when None."""
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not None:
        msg["params"] = params
    return json.dumps(msg, separators=(",", ":")).encode()


def tool_call(name: str, arguments: dict[str, Any] | None = None, id: int | str = 1) -> bytes:
    """A compact `tools/call` request body."""
    return rpc("tools/call", id, {"name": name, "arguments": {} if arguments is None else arguments})


def padded_call(total: int, id: int = 1) -> bytes:
    """An allowed `list_vms` call padded (in its one argument) to exactly `total` bytes."""
    head = b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"list_vms","arguments":{"pad":"' % id
    tail = b'"}}}'
    body = head + b"x" * (total - len(head) - len(tail)) + tail
    assert len(body) == total
    return body


def headers_for(token: str | None, content_type: str = "application/json", **extra: str) -> dict[str, str]:
    """The usual MCP POST headers; `token=None` leaves out Authorization."""
    h = {"content-type": content_type, "accept": ACCEPT}
    if token is not None:
        h["authorization"] = f"Bearer {token}"
    h.update(extra)
    return h


def call_tool(url: str, name: str, token: str | None, arguments: dict[str, Any] | None = None,
              id: int | str = 1) -> Reply:
    """POST one `tools/call` with the usual headers and a bearer token (None: no Authorization)."""
    return post(url, tool_call(name, arguments, id), headers_for(token))


def spread_posts(calls: list[tuple[str, str | None, bytes]], threads: int = 40) -> list[Reply]:
    """POST each (url, token, body) of `calls`, from `threads` threads released together, each call on
    its own connection (so the kernel spreads them over Envoy's workers). Replies in call order."""
    replies: list[Reply | None] = [None] * len(calls)
    errors: list[BaseException] = []
    barrier = threading.Barrier(threads)

    def worker(k: int):
        try:
            barrier.wait(timeout=30)
            for i in range(k, len(calls), threads):
                url, token, body = calls[i]
                replies[i] = post(url, body, headers_for(token), timeout=30)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    ts = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise errors[0]
    return replies  # type: ignore[return-value]


def parallel_posts(url: str, calls: list[tuple[str | None, bytes]], threads: int = 50) -> list[Reply]:
    """`spread_posts` of (token, body) calls all to `url`."""
    return spread_posts([(url, token, body) for token, body in calls], threads)
