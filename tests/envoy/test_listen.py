"""Tier 2: MCP 2026-07-28 `subscriptions/listen` in real Envoy in front of the recorder: each kind its
`params.notifications` filter asks for is judged as the method it stands for (README "MCP methods").

Under `default: deny` without `resources/subscribe` in `gateway.methods`, a listen asking for
`resourceSubscriptions` is refused (−31001, id echoed) and never reaches the server, as an unknown
kind is; one asking only for kinds whose methods are allowed reaches the server unchanged.
"""

from __future__ import annotations

import hashlib
import json

import pytest

from testkit.jsonrpc import headers_for, post
from testkit.upstream import recorder_lines, recorder_reply

V26 = "2026-07-28"
SETTLE = 0.2  # time for a request Envoy might still forward to reach the recorder's log
POLICY = {"version": "1", "default": "deny", "tools": {"list_vms": {}},
          "gateway": {"methods": {"prompts/list": "allow"}}}


def listen(url: str, notifications: dict, id_: str) -> tuple[bytes, object]:
    """POST a 2026-07-28 `subscriptions/listen` as the Python SDK sends it: (body, reply)."""
    params = {"_meta": {"io.modelcontextprotocol/protocolVersion": V26,
                        "io.modelcontextprotocol/clientCapabilities": {}},
              "notifications": notifications}
    body = json.dumps({"jsonrpc": "2.0", "id": id_, "method": "subscriptions/listen", "params": params}).encode()
    headers = headers_for("listen-token", **{"mcp-protocol-version": V26, "mcp-method": "subscriptions/listen"})
    return body, post(url, body, headers)


@pytest.fixture
def envoy_and_log(stack):
    _, port, log = stack.recorder()
    return stack.envoy(POLICY, port), log


def test_a_resource_subscription_under_default_deny_never_reaches_the_server(envoy_and_log):
    envoy, log = envoy_and_log
    _, r = listen(envoy.mcp_url, {"toolsListChanged": True, "resourceSubscriptions": ["file:///etc/shadow"]}, "sub-1")
    assert r.status == 200
    msg = r.json()
    assert msg["id"] == "sub-1"
    assert msg["error"]["code"] == -31001
    assert msg["error"]["data"] == {
        "kind": "denied", "rule": "default",
        "reason": "subscriptions/listen asks for notifications.resourceSubscriptions, which stands for "
                  "resources/subscribe: method resources/subscribe is not allowed by policy (default: deny)"}
    # A kind the filter does not know is refused too, whatever it would open.
    _, r = listen(envoy.mcp_url, {"resource_subscriptions": ["file:///etc/shadow"]}, "sub-2")
    err = r.error
    assert (r.status, r.json()["id"], err["code"], err["data"]["rule"]) == (200, "sub-2", -31001, "unknown_subscription")
    # An unreadable filter (a string where pydantic would read true) is −32602.
    _, r = listen(envoy.mcp_url, {"resourcesListChanged": "true"}, "sub-3")
    assert (r.status, r.json()["id"], r.error["code"], r.error["data"]["kind"]) == (400, "sub-3", -32602, "invalid_params")
    assert recorder_lines(log, settle=SETTLE) == []


def test_a_listen_asking_only_for_allowed_kinds_reaches_the_server_unchanged(envoy_and_log):
    envoy, log = envoy_and_log
    body, r = listen(envoy.mcp_url, {"toolsListChanged": True, "promptsListChanged": True}, "sub-4")
    assert (r.status, r.body) == (200, recorder_reply("sub-4"))
    (seen,) = recorder_lines(log)
    assert seen["body_sha256"] == hashlib.sha256(body).hexdigest()
    assert seen["headers"]["mcp-method"] == "subscriptions/listen"
