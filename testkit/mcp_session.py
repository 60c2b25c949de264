"""The official MCP Python SDK client, opened through Envoy with a bearer token.

A JSON-RPC error reply (the filter's refusals) makes `call_tool` raise `MCPError`
(`mcp.MCPError`, i.e. `mcp.shared.exceptions.MCPError`), with `.error.code/.message/.data`.

mcp 2.x's transport takes an `httpx2.AsyncClient` (package httpx2, not httpx); the
Authorization header set on it goes with every POST, GET and DELETE of the session.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
import mcp
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, TextContent


@asynccontextmanager
async def open_session(url: str, token: str | None, *, timeout: float = 10.0) -> AsyncIterator[ClientSession]:
    """An initialized ClientSession to the MCP endpoint `url`, sending `Authorization: Bearer <token>`
    (no Authorization header when `token` is None)."""
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(timeout, read=max(timeout, 30.0))) as http:
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session


@asynccontextmanager
async def open_client_2026(url: str, token: str, elicit) -> AsyncIterator[mcp.Client]:
    """An `mcp.Client` in mode "2026-07-28" to the MCP endpoint `url`, sending
    `Authorization: Bearer <token>`, with `elicit` as its elicitation callback (so it declares
    elicitation, URL mode included)."""
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"},
                                  timeout=httpx2.Timeout(10.0, read=30.0)) as http:
        async with mcp.Client(streamable_http_client(url, http_client=http), mode="2026-07-28",
                              elicitation_callback=elicit) as client:
            assert client.protocol_version == "2026-07-28"
            yield client


def result_json(result: CallToolResult) -> Any:
    """The single text block of a successful tool result, parsed as JSON."""
    if result.is_error:
        raise AssertionError(f"tool returned an error result: {result.content!r}")
    (block,) = result.content
    if not isinstance(block, TextContent):
        raise AssertionError(f"expected one text block, got {result.content!r}")
    return json.loads(block.text)
