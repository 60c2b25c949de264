"""The documented SSE rewrite, computed independently of the filter: a stream split into events
(`sse_events`, `sse_data`) and the stream the filter should send for a set of hidden names
(`sse_filtered`)."""

from __future__ import annotations

import json
from typing import Any

from testkit.upstream import compact


def _lines(stream: str) -> list[str]:
    """Lines with their terminators (CRLF, LF or CR)."""
    out, i, start = [], 0, 0
    while i < len(stream):
        c = stream[i]
        if c == "\r" and stream[i + 1:i + 2] == "\n":
            out.append(stream[start:i + 2])
            i += 2
            start = i
        elif c in "\r\n":
            out.append(stream[start:i + 1])
            i += 1
            start = i
        else:
            i += 1
    if start < len(stream):
        out.append(stream[start:])
    return out


def sse_events(stream: bytes) -> list[list[str]]:
    """The stream split into events (each a list of lines with terminators, the blank line last)."""
    events, cur = [], []
    for line in _lines(stream.decode("utf-8")):
        cur.append(line)
        if line.rstrip("\r\n") == "":
            events.append(cur)
            cur = []
    if cur:
        events.append(cur)
    return events


def sse_data(event: list[str]) -> str | None:
    """The data of one event (data lines joined with LF, one leading space stripped), or None."""
    parts = []
    for line in event:
        bare = line.rstrip("\r\n")
        name, sep, value = bare.partition(":")
        if name == "data":
            parts.append(value[1:] if value.startswith(" ") else value)
    return "\n".join(parts) if parts else None


def sse_filtered(stream: bytes, request_id: Any, hidden: set[str]) -> bytes:
    """What the filter must make of `stream` (README / crates/core/src/response/toolslist/): every event and line byte
    for byte, except the event whose JSON-RPC response has id `request_id`: its data lines become one
    `data: ` line (at the first data line, with that line's terminator) holding the compact response
    with the `hidden` tools removed."""
    out = []
    for event in sse_events(stream):
        data = sse_data(event)
        msg = json.loads(data) if data and data.strip() else None
        if not (isinstance(msg, dict) and msg.get("id") == request_id and "result" in msg):
            out.extend(event)
            continue
        msg["result"]["tools"] = [t for t in msg["result"]["tools"] if t["name"] not in hidden]
        wrote = False
        for line in event:
            bare = line.rstrip("\r\n")
            if bare == "data" or bare.startswith("data:"):
                if not wrote:
                    out.append("data: " + compact(msg).decode("utf-8") + (line[len(bare):] or "\n"))
                    wrote = True
            else:
                out.append(line)
    return "".join(out).encode("utf-8")
