"""Tier 2: hold mode, an agent that disconnects while its call waits, then a person approves.

Real Envoy, the real mcp-approvals (SQLite) and the recorder upstream. The builds differ here, as
documented (docs/src/policy/require-approval.md, Other rules; docs/src/deploy/native.md):

- wasm: a proxy-wasm callout cannot be cancelled, so the service's held request outlives the agent's
  stream and consumes the approval when it is given. The identical call again needs a new one;
- native: Envoy cancels the callout with the stream, the service sees its request end before the
  decision, and the approval stays usable: the identical call again goes upstream, once.

On both nothing reaches the upstream that was not approved, and at most once.
"""

from __future__ import annotations

import socket
import time
from urllib.parse import urlsplit

from approval_support import ARGS, is_result, with_service
from testkit import approvals as ha
from testkit.jsonrpc import headers_for, tool_call
from testkit.processes import wait_for

TOKEN = "leaving-agent-token"


def post_unread(url: str, body: bytes, headers: dict[str, str]) -> socket.socket:
    """POST `body` on a connection of its own, and return it unread (the agent's side)."""
    u = urlsplit(url)
    lines = [f"POST {u.path} HTTP/1.1", f"host: {u.netloc}", f"content-length: {len(body)}",
             *(f"{k}: {v}" for k, v in headers.items())]
    s = socket.create_connection((u.hostname, u.port), timeout=10)
    s.sendall(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
    return s


def test_an_approval_given_after_the_agent_left(stack):
    setup = with_service(stack, ha.approval_policy(mode="hold", timeout="3s"))
    body = tool_call("start_vm", ARGS, 1)
    conn = post_unread(setup.envoy.mcp_url, body, headers_for(TOKEN))
    (held,) = setup.svc.wait_pending(1)
    conn.close()
    # Envoy sees the close, and on the native build cancels the callout, before the decision.
    time.sleep(1.0)
    setup.svc.approve(held["id"], "ok")
    consumed = {"wasm": "consumed", "native": "approved"}[stack.build]
    wait_for(lambda: setup.svc.get(held["id"])["state"] == consumed, timeout=10,
             what=f"the approval {consumed}")
    r = setup.call(TOKEN, timeout=15)
    if stack.build == "native":
        assert is_result(r, 1), r.body
        assert setup.svc.get(held["id"])["state"] == "consumed"
        assert len(setup.received(body, settle=0.5)) == 1
    else:
        error = r.json()["error"]
        assert (error["code"], error["data"]["kind"]) == (-31007, "approval_required")
        assert error["data"]["approval_id"] != held["id"]
        assert setup.received(body, settle=0.5) == []
