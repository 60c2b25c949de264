"""Tier 2: `gateway.grant_header` and `gateway.resource_metadata_url` in real Envoy.

The filter takes the grant from the trusted header only when it arrives exactly once and is not
empty: a repeated header (a client's copy next to the one a trusted filter set) or an empty one is
no grant. Every 401 carries the RFC 9728 challenge. Nothing refused reaches the upstream.
"""

from __future__ import annotations

import httpx
import yaml

from testkit.envoy import hcm
from testkit.jsonrpc import ACCEPT, tool_call
from testkit.logs import audit_records, grant_label
from testkit.processes import wait_for
from testkit.upstream import recorder_lines

METADATA_URL = "https://mcp.example.com/.well-known/oauth-protected-resource"
POLICY = {"version": "1", "default": "deny", "tools": {"list_vms": {}},
          "gateway": {"grant_header": "X-MCP-Grant", "resource_metadata_url": METADATA_URL}}
CHALLENGE = f'Bearer resource_metadata="{METADATA_URL}"'


def test_repeated_or_empty_grant_header_is_no_grant(stack):
    _, port, log = stack.recorder()
    envoy = stack.envoy(POLICY, port)
    base = [("content-type", "application/json"), ("accept", ACCEPT)]
    cases = [
        ([], "a grant is required: send Authorization: Bearer <token>"),
        ([("x-mcp-grant", "alice"), ("x-mcp-grant", "mallory")], "the grant header was sent more than once"),
        ([("x-mcp-grant", "alice"), ("X-MCP-Grant", "alice")], "the grant header was sent more than once"),
        ([("x-mcp-grant", "")], "the grant header is empty"),
    ]
    for extra, reason in cases:
        r = httpx.post(envoy.mcp_url, content=tool_call("list_vms", id=11), headers=base + extra, timeout=5)
        assert (r.status_code, r.headers["www-authenticate"]) == (401, CHALLENGE), extra
        body = r.json()
        assert (body["id"], body["error"]["code"], body["error"]["data"]["reason"]) == (11, -31003, reason), extra
        g = httpx.get(envoy.mcp_url, headers=[("accept", "text/event-stream")] + extra, timeout=5)
        assert (g.status_code, g.headers["www-authenticate"]) == (401, CHALLENGE), extra
    assert recorder_lines(log, settle=0.3) == []
    # One copy is the grant, and the label is the hash of its value.
    r = httpx.post(envoy.mcp_url, content=tool_call("list_vms", id=12), headers=base + [("x-mcp-grant", "alice")],
                   timeout=5)
    assert r.status_code == 200
    assert [line["headers"]["x-mcp-grant"] for line in recorder_lines(log)] == ["alice"]
    records = wait_for(
        lambda: [x for x in audit_records(envoy.log_text()) if x["decision"] == "allowed"],
        timeout=10, what="the audit line of the allowed call")
    assert [x["grant"] for x in records] == [grant_label("alice")]


def test_a_bad_resource_metadata_url_stops_envoy(stack):
    for url in ("http://mcp.example.com/.well-known/oauth-protected-resource", 'https://a.example/"x"'):
        policy = {"version": "1", "gateway": {"resource_metadata_url": url}}
        out = stack.envoy_expect_failure(policy)
        assert out.returncode == 1
        assert "invalid policy at gateway.resource_metadata_url" in out.log


def test_route_request_headers_to_remove_is_too_late_for_the_filter(stack):
    """Why envoy/envoy-oauth.yaml strips the grant header with an early header mutation: a route's
    `request_headers_to_remove` is applied by the router, after every filter. The policy filter still
    takes the client's copy as the grant; only the upstream no longer sees it."""
    _, port, log = stack.recorder()
    policy = {"version": "1", "default": "deny", "tools": {"list_vms": {}}, "gateway": {"grant_header": "x-mcp-grant"}}
    cfg = yaml.safe_load(stack.render(policy, port))
    hcm(cfg)["route_config"]["request_headers_to_remove"] = ["x-mcp-grant"]
    envoy = stack.start_envoy(yaml.safe_dump(cfg, sort_keys=False, width=1000))
    r = httpx.post(envoy.mcp_url, content=tool_call("list_vms"),
                   headers={"content-type": "application/json", "x-mcp-grant": "forged-by-client"}, timeout=5)
    assert r.status_code == 200
    assert [line["headers"].get("x-mcp-grant") for line in recorder_lines(log)] == [None]
    records = wait_for(lambda: audit_records(envoy.log_text()), timeout=10,
                       what="the audit line")
    assert [x["grant"] for x in records] == [grant_label("forged-by-client")]
