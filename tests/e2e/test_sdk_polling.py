"""Tier 3: SSE polling (MCP 2025-11-25, SEP-1699) behind the filter, with the official Python SDK.

The demo server (`--trifecta --poll`) closes a `read_secret` call's SSE stream once its first event
(an event id and empty data) is out; the SDK client reconnects with a GET and `Last-Event-ID`, and
the server replays the result there, on a stream where the filter does not know the call. The call's
own stream ended with no response on it, so the filter marks its grant all the same
(`tools.read_secret.marks`, docs/src/policy/flows.md) and the flow refuses `http_post` after it;
another grant is not affected. With `gateway.session_key`, the event ids are sealed and the
`Last-Event-ID` the client sends back is opened for its grant.
"""

from __future__ import annotations

import sys

import anyio
import pytest
from mcp import MCPError
from mcp_types import TextContent

from testkit.demo import DEMO_SERVER, TRIFECTA_FLOW, TRIFECTA_POLICY
from testkit.logs import audit_records
from testkit.mcp_session import open_session
from testkit.paths import REPO_ROOT
from testkit.processes import free_port, port_open, spawn

pytestmark = pytest.mark.both_builds

FLOW, POLICY = TRIFECTA_FLOW, TRIFECTA_POLICY


@pytest.fixture(params=["unbound", "session_key"])
def envoy(request, stack):
    port = free_port()
    proc = spawn("demo-poll", [sys.executable, str(DEMO_SERVER), "--port", str(port), "--trifecta", "--poll"],
                 stack.log_dir / "demo-poll.log", cwd=REPO_ROOT)
    stack.procs.append(proc)
    proc.wait_until(lambda: port_open(port), 20, "accepting connections")
    policy = dict(POLICY)
    if request.param == "session_key":
        policy["gateway"] = {"session_key": {"current": "p" * 40}}
    return stack.envoy(policy, port, name="envoy-poll")


def test_a_secret_read_answered_on_the_clients_reconnection_marks_its_grant(envoy):
    async def scenario():
        with anyio.fail_after(30):
            async with open_session(envoy.mcp_url, "poll-a") as a, open_session(envoy.mcp_url, "poll-b") as b:
                read = await a.call_tool("read_secret", {"name": "db"})
                with pytest.raises(MCPError) as refused:
                    await a.call_tool("http_post", {"url": "https://example.com", "body": "db"})
                other = await b.call_tool("http_post", {"url": "https://example.com", "body": "hello"})
                return read, refused.value.error, other

    read, refused, other = anyio.run(scenario)
    assert [c.text for c in read.content if isinstance(c, TextContent)] == ["db=demo-secret-7f3a9c"]
    assert (refused.code, refused.data["kind"], refused.data["flow"], refused.data["mark"]) == (
        -31014, "flow_denied", FLOW, "secret")
    assert [c.text for c in other.content if isinstance(c, TextContent)] == ["posted 5 bytes to https://example.com"]
    # Marked once, by the call's own stream ending unanswered (the replayed result, on a stream where
    # the call is not known, marks nothing).
    marked = [(a["tool"], a["mark"], a["rule"], a.get("reason")) for a in audit_records(envoy.log_text())
              if a.get("kind") == "marked"]
    assert marked == [("read_secret", "secret", "tools.read_secret.marks", None)]
