"""Tier 2: an approval is bound to the MCP server it was asked for. One Envoy listener with two
routes (`/a/mcp` to cluster `mcp_upstream`, `/b/mcp` to cluster `mcp_upstream_b`), one recorder
behind each, and one real mcp-approvals.

- `delete_vm {"vmid": 100}` approved for server A: the identical call (same grant, tool and
  arguments) to server B is not approved. It gets its own pending approval (-31007) and nothing
  reaches B; the call to A then runs, once.
- The service knows which server each approval is for (approvers' API `upstream`), and shows it.
- Another path or another host name on the same route is another upstream too (one cluster may
  serve several MCP servers by path or virtual host).
"""

from __future__ import annotations

import copy

import pytest
import yaml

from testkit import approvals as ha
from testkit.envoy import cluster_endpoint, hcm
from testkit.jsonrpc import Reply, headers_for, post, tool_call
from testkit.logs import token_sha256
from testkit.stack import Stack
from testkit.upstream import recorder_lines, recorder_reply

ARGS = {"vmid": 100}
REASON = "deleting a VM cannot be undone"
SETTLE = 0.3


class TwoServers:
    """Envoy with routes /a/ -> cluster mcp_upstream (recorder A) and /b/ -> mcp_upstream_b
    (recorder B), the policy asking for approval of delete_vm, and the real approval service."""

    def __init__(self, stack: Stack):
        self.svc = ha.approvals(stack)
        _, port_a, self.log_a = stack.recorder("server-a")
        _, port_b, self.log_b = stack.recorder("server-b")
        policy = ha.approval_policy({"delete_vm": ha.approval_tool(reason=REASON)})
        cfg = yaml.safe_load(stack.render(policy, port_a, approvals_port=self.svc.check_port))
        clusters = cfg["static_resources"]["clusters"]
        (a,) = [c for c in clusters if c["name"] == "mcp_upstream"]
        b = copy.deepcopy(a)
        b["name"] = b["load_assignment"]["cluster_name"] = "mcp_upstream_b"
        cluster_endpoint({"static_resources": {"clusters": [b]}}, "mcp_upstream_b")["port_value"] = port_b
        clusters.append(b)
        (vhost,) = hcm(cfg)["route_config"]["virtual_hosts"]
        vhost["routes"] = [
            {"match": {"prefix": "/a/"}, "route": {"cluster": "mcp_upstream", "timeout": "0s"}},
            {"match": {"prefix": "/b/"}, "route": {"cluster": "mcp_upstream_b", "timeout": "0s"}},
        ]
        self.envoy = stack.start_envoy(yaml.safe_dump(cfg, sort_keys=False, width=1000))

    def call(self, path: str, id_: int, token: str = "agent-two-servers", **headers: str) -> Reply:
        return post(self.envoy.url + path, tool_call("delete_vm", ARGS, id_), headers_for(token, **headers))

    def upstream(self, path: str, cluster: str) -> dict:
        return ha.upstream_of(self.envoy, path=path, cluster=cluster)


@pytest.fixture
def two(stack) -> TwoServers:
    return TwoServers(stack)


def required(r: Reply, id_) -> str:
    """`r` is -31007 approval_required with a link; returns its approval id."""
    assert r.status == 200, (r.status, r.body)
    msg = r.json()
    assert "error" in msg, f"not held for approval, answered by the server: {msg}"
    assert (msg["id"], msg["error"]["code"], msg["error"]["data"]["kind"]) == (id_, -31007, "approval_required"), msg
    assert msg["error"]["data"]["reason"] == REASON
    return msg["error"]["data"]["approval_id"]


def test_an_approval_for_one_server_does_not_run_the_call_on_another(two):
    token = "agent-two-servers"
    approval_a = required(two.call("/a/mcp", 1), 1)
    assert recorder_lines(two.log_a, settle=SETTLE) == []
    two.svc.approve(approval_a, "ok on server A")

    # The identical call to server B: a pending approval of its own, and nothing reaches B.
    approval_b = required(two.call("/b/mcp", 2), 2)
    assert approval_b != approval_a
    assert recorder_lines(two.log_b, settle=SETTLE) == []
    assert two.svc.get(approval_a)["state"] == "approved", "B's call did not use A's approval"
    (pending,) = two.svc.pending()
    assert pending["id"] == approval_b
    up_b = two.upstream("/b/mcp", "mcp_upstream_b")
    assert pending["upstream"] == up_b
    assert pending["key"] == ha.approval_key(token_sha256(token), "delete_vm", ARGS, up_b)

    # The call to server A runs, once, on A.
    r = two.call("/a/mcp", 3)
    assert (r.status, r.body) == (200, recorder_reply(3))
    (seen,) = recorder_lines(two.log_a)
    assert seen["body_len"] == len(tool_call("delete_vm", ARGS, 3))
    assert recorder_lines(two.log_b, settle=SETTLE) == []
    used = two.svc.get(approval_a)
    assert (used["state"], used["upstream"]) == ("consumed", two.upstream("/a/mcp", "mcp_upstream"))

    # B is still waiting for its own decision; once approved, its call runs on B.
    assert required(two.call("/b/mcp", 4), 4) == approval_b
    two.svc.approve(approval_b)
    r = two.call("/b/mcp", 5)
    assert (r.status, r.body) == (200, recorder_reply(5))
    assert len(recorder_lines(two.log_b)) == 1
    assert len(recorder_lines(two.log_a)) == 1


def test_another_path_or_host_name_of_the_same_route_is_another_upstream(two):
    approval = required(two.call("/a/mcp", 1), 1)
    two.svc.approve(approval)
    # Same cluster, another path or virtual host: the server behind may serve another MCP
    # endpoint there.
    other_path = required(two.call("/a/other/mcp", 2), 2)
    other_host = required(two.call("/a/mcp", 3, host="other.example"), 3)
    assert len({approval, other_path, other_host}) == 3
    assert two.svc.get(other_path)["upstream"] == two.upstream("/a/other/mcp", "mcp_upstream")
    assert two.svc.get(other_host)["upstream"] == {"cluster": "mcp_upstream", "authority": "other.example",
                                                   "path": "/a/mcp"}
    assert recorder_lines(two.log_a, settle=SETTLE) == []
    r = two.call("/a/mcp", 4)
    assert (r.status, r.body) == (200, recorder_reply(4))
