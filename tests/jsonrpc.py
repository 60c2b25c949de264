"""Raw JSON-RPC over HTTP for the tier 2 tests: exact request bytes in, exact response bytes out.

Each call opens a new connection, so a burst of calls is spread over Envoy's workers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import httpx

ACCEPT = "application/json, text/event-stream"


@dataclass
class Reply:
    """An HTTP reply: status, lower-cased headers and the raw body bytes."""

    status: int
    headers: dict[str, str]
    body: bytes

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


def tool_call(name: str, arguments: dict[str, Any] | None = None, id: int | str = 1) -> bytes:
    """A compact `tools/call` request body."""
    msg = {"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": name, "arguments": {} if arguments is None else arguments}}
    return json.dumps(msg, separators=(",", ":")).encode()


def headers_for(token: str | None, content_type: str = "application/json", **extra: str) -> dict[str, str]:
    """The usual MCP POST headers; `token=None` leaves out Authorization."""
    h = {"content-type": content_type, "accept": ACCEPT}
    if token is not None:
        h["authorization"] = f"Bearer {token}"
    h.update(extra)
    return h


def post(url: str, body: bytes, headers: dict[str, str], timeout: float = 10.0) -> Reply:
    """POST `body` as is and return the reply unparsed."""
    r = httpx.post(url, content=body, headers=headers, timeout=timeout)
    return Reply(r.status_code, {k.lower(): v for k, v in r.headers.items()}, r.content)


def get(url: str, headers: dict[str, str], timeout: float = 10.0) -> Reply:
    """GET `url` (e.g. the Streamable HTTP SSE stream) and return the reply unparsed."""
    r = httpx.get(url, headers=headers, timeout=timeout)
    return Reply(r.status_code, {k.lower(): v for k, v in r.headers.items()}, r.content)


def call_tool(url: str, name: str, token: str | None, arguments: dict[str, Any] | None = None,
              id: int | str = 1) -> Reply:
    """POST one `tools/call` with the usual headers and a bearer token (None: no Authorization)."""
    return post(url, tool_call(name, arguments, id), headers_for(token))
