"""Tier 3: the 2024-11-05 HTTP+SSE transport behind the filter, with the official Python SDK's
`sse_client` against the demo server in `--legacy-sse` mode.

The stream opens with `event: endpoint` (data: a URL, not JSON-RPC): it passes; `message` events are
filtered (hidden tools absent from the list); POSTs to the endpoint are judged like any other
(202 acknowledgements pass). A refused POST gets the filter's JSON-RPC error as its HTTP reply, which
this transport's clients never read (they wait for replies on the stream): the call goes unanswered
and nothing reaches the server. With `gateway.session_key` the endpoint's `session_id` is sealed for
the stream's grant and the SDK client uses it unchanged.
"""

from __future__ import annotations

import sys

import anyio
import pytest
from mcp.client.session import ClientSession
from mcp.client.sse import sse_client

from testkit import demo
from testkit.demo import DEMO_SERVER
from testkit.mcp_session import result_json
from testkit.paths import REPO_ROOT
from testkit.processes import free_port, port_open, spawn

HIDDEN = "vm_agent_exec_status"
DEMO_TOOLS = set(demo.DEMO_TOOLS)


@pytest.fixture(params=["unbound", "session_key"])
def envoy(request, stack):
    port = free_port()
    proc = spawn("demo-legacy-sse", [sys.executable, str(DEMO_SERVER), "--port", str(port),
                                     "--legacy-sse"], stack.log_dir / "demo-legacy-sse.log",
                 cwd=REPO_ROOT)
    stack.procs.append(proc)
    proc.wait_until(lambda: port_open(port), 20, "accepting connections")
    policy = {"version": "1", "default": "deny", "hide": [HIDDEN], "tools": {"list_vms": {}}}
    if request.param == "session_key":
        policy["gateway"] = {"session_key": {"current": "k" * 40}}
    return stack.envoy(policy, port)


def test_legacy_http_sse_server_behind_the_filter(envoy):
    async def scenario():
        with anyio.fail_after(30):
            async with sse_client(f"{envoy.url}/sse", headers={"Authorization": "Bearer legacy"}) as (read, write):
                async with ClientSession(read, write) as s:
                    init = await s.initialize()
                    names = {t.name for t in (await s.list_tools()).tools}
                    vms = result_json(await s.call_tool("list_vms", {}))
                    # A refusal is the POST's reply (HTTP 200, JSON-RPC error), which this transport's
                    # clients do not read: the call gets no answer, and nothing reaches the server.
                    with anyio.move_on_after(2) as waited:
                        await s.call_tool("delete_vm", {"node": "pve1", "vmid": 100})
                    after = result_json(await s.call_tool("list_vms", {}))
                    return init.protocol_version, names, vms, waited.cancelled_caught, after

    version, names, vms, no_answer, after = anyio.run(scenario)
    assert names == DEMO_TOOLS - {HIDDEN}
    assert [v["vmid"] for v in vms["vms"]] == [100, 101, 102, 200]
    assert no_answer and after == vms
    assert version == "2025-11-25"
