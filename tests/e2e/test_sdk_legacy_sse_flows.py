"""Tier 3: flows over the 2024-11-05 HTTP+SSE transport, with the official Python SDK's `sse_client`
against the demo server in `--legacy-sse --trifecta` mode.

This transport acknowledges every POST with 202 and sends each result on the GET stream, where the
filter does not know the call. A call of a marking tool (`tools.read_secret.marks`) marks its
grant at its acknowledgement instead (docs/src/policy/flows.md), so the flow refuses `http_post`
after it. A refused POST gets the filter's JSON-RPC error as its HTTP reply, which this transport's
clients never read: the call goes unanswered, and the audit record says why. Another grant is not
affected.
"""

from __future__ import annotations

import sys

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.sse import sse_client
from mcp_types import TextContent

from testkit.demo import DEMO_SERVER, TRIFECTA_FLOW, TRIFECTA_POLICY
from testkit.logs import audit_records
from testkit.paths import REPO_ROOT
from testkit.processes import free_port, port_open, spawn

pytestmark = pytest.mark.both_builds

FLOW, POLICY = TRIFECTA_FLOW, TRIFECTA_POLICY


@pytest.fixture
def envoy(stack):
    port = free_port()
    proc = spawn("demo-legacy-trifecta", [sys.executable, str(DEMO_SERVER), "--port", str(port), "--legacy-sse",
                                          "--trifecta"], stack.log_dir / "demo-legacy-trifecta.log", cwd=REPO_ROOT)
    stack.procs.append(proc)
    proc.wait_until(lambda: port_open(port), 20, "accepting connections")
    return stack.envoy(POLICY, port, name="envoy-legacy-flows")


def texts(result):
    return [c.text for c in result.content if isinstance(c, TextContent)]


def test_a_secret_read_over_the_legacy_transport_marks_its_grant(envoy):
    async def scenario():
        with anyio.fail_after(30):
            async with sse_client(f"{envoy.url}/sse", headers={"Authorization": "Bearer legacy-a"}) as (ra, wa), \
                    sse_client(f"{envoy.url}/sse", headers={"Authorization": "Bearer legacy-b"}) as (rb, wb):
                async with ClientSession(ra, wa) as a, ClientSession(rb, wb) as b:
                    await a.initialize()
                    await b.initialize()
                    read = await a.call_tool("read_secret", {"name": "db"})
                    with anyio.move_on_after(2) as waited:
                        await a.call_tool("http_post", {"url": "https://example.com", "body": "db"})
                    other = await b.call_tool("http_post", {"url": "https://example.com", "body": "hello"})
                    return read, waited.cancelled_caught, other

    read, unanswered, other = anyio.run(scenario)
    assert texts(read) == ["db=demo-secret-7f3a9c"]
    assert unanswered
    assert texts(other) == ["posted 5 bytes to https://example.com"]
    records = audit_records(envoy.log_text())
    marked = [(a["tool"], a["mark"], a["rule"]) for a in records if a.get("kind") == "marked"]
    assert marked == [("read_secret", "secret", "tools.read_secret.marks")]
    posts = [(a["decision"], a.get("error"), a.get("rule")) for a in records
             if a.get("tool") == "http_post" and a.get("event") != "result"]
    assert posts == [("denied", "flow_denied", "flows[0]"), ("allowed", None, "tools.http_post")]
