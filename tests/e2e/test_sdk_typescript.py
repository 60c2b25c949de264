"""Tier 3: the official MCP TypeScript SDK client (npm @modelcontextprotocol/sdk, pinned in
tests/ts-client/package.json, installed by `make ts-client-deps`) through Envoy with the filter, to
the demo server: the same protocol version as directly, hidden tools absent, an allowed call runs,
a denied call's reason reaches the caller, require-approval is surfaced (−31007 with its URL).
Both response modes of the server. With `gateway.session_key` and a client that declares URL
elicitation, the approval is offered as −32042: the SDK raises UrlElicitationRequiredError with the
approval page, and once approved there, the retried call completes. Two identities through real
`jwt_authn` (tokens signed in the test, testkit.identity) in front of a policy set get different tool
lists and different decisions on the same call.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from testkit import approvals as ha
from testkit import demo
from testkit.envoy import load_policy, policy_text
from testkit.identity import PAYLOAD_HEADER, Issuer, start_identity_envoy

CLIENT_DIR = Path(__file__).resolve().parent.parent / "ts-client"
DEMO_TOOLS = sorted(demo.DEMO_TOOLS)
HIDDEN = "vm_agent_exec_status"


def ts_client(url: str, token: str, *calls: tuple[str, dict], env: dict[str, str] | None = None) -> dict:
    node = shutil.which("node")
    if node is None or not (CLIENT_DIR / "node_modules" / "@modelcontextprotocol" / "sdk").is_dir():
        pytest.fail("the TypeScript SDK client is not installed: make ts-client-deps", pytrace=False)
    argv = [node, "client.mjs", url, token]
    for tool, args in calls:
        argv += [tool, json.dumps(args)]
    out = subprocess.run(argv, cwd=CLIENT_DIR, capture_output=True, text=True, timeout=60, check=True,
                         env=None if env is None else {**os.environ, **env})
    return json.loads(out.stdout)


@pytest.fixture(params=[True, False], ids=["json_response", "sse"])
def setup(request, stack):
    svc = ha.approvals(stack)
    _, port = stack.demo_server(json_response=request.param)
    policy = load_policy()
    policy["hide"] = [HIDDEN]
    envoy = stack.envoy(policy_text(policy), port, approvals_port=svc.check_port)
    return envoy, f"http://127.0.0.1:{port}/mcp", svc


def test_typescript_client_through_the_filter(setup):
    envoy, direct_url, svc = setup
    direct = ts_client(direct_url, "ts-direct")
    report = ts_client(envoy.mcp_url, "ts-e2e", ("list_vms", {}), ("delete_vm", {"node": "pve1", "vmid": 100}),
                       ("start_vm", {"node": "pve2", "vmid": 200}))
    assert "error" not in report, report
    assert direct["tools"] == DEMO_TOOLS
    assert (direct["protocol_version"], report["protocol_version"]) == ("2025-11-25", "2025-11-25")
    assert report["tools"] == [t for t in DEMO_TOOLS if t != HIDDEN]
    listed, denied, approval = report["calls"]
    assert listed["ok"] and [v["vmid"] for v in json.loads(listed["text"])["vms"]] == [100, 101, 102, 200]
    assert (denied["ok"], denied["code"], denied["data"]["reason"]) == (False, -31001,
                                                                       "not allowed by policy (default: deny)")
    assert (approval["ok"], approval["code"], approval["data"]["kind"]) == (False, -31007, "approval_required")
    assert approval["data"]["approval_url"] == f"{svc.url}/approvals/{approval['data']['approval_id']}"


def test_typescript_client_gets_the_url_elicitation_and_retries(stack):
    svc = ha.approvals(stack)
    _, port = stack.demo_server(json_response=True)
    policy = load_policy()
    policy["gateway"]["session_key"] = {"current": "ts-offer-session-key-0123456789abcdef"}
    envoy = stack.envoy(policy_text(policy), port, approvals_port=svc.check_port)
    args = {"node": "pve2", "vmid": 200}
    plain = ts_client(envoy.mcp_url, "ts-offer-plain", ("start_vm", args))
    (call,) = plain["calls"]
    assert (call["code"], call["elicitations"]) == (-31007, None), call
    report = ts_client(envoy.mcp_url, "ts-offer", ("start_vm", args),
                       env={"MCP_TS_URL_ELICITATION": "1", "MCP_TS_APPROVER_TOKEN": ha.APPROVER_TOKEN})
    assert "error" not in report, report
    assert report["protocol_version"] == "2025-11-25"
    (call,) = report["calls"]
    assert (call["ok"], call["code"], call["error"]) == (False, -32042, "UrlElicitationRequiredError"), call
    (elicitation,) = call["elicitations"]
    approval_id = elicitation["elicitationId"]
    assert elicitation == {"mode": "url", "url": f"{svc.url}/approvals/{approval_id}",
                           "elicitationId": approval_id, "message": "starting a VM costs money"}
    retry = call["retry"]
    assert retry["ok"], retry
    assert json.loads(retry["text"])["status"] == "running"
    assert svc.get(approval_id)["state"] == "consumed"


READONLY_HIDES = ["start_vm", "stop_vm", "delete_vm", "vm_agent_exec", "vm_agent_exec_status"]
IDENTITY_SET = {
    "version": "1",
    "policies": {
        "ops": {"version": "1", "default": "deny", "hide": ["delete_vm"],
                "tools": {"list_vms": {}, "vm_status": {}, "start_vm": {}}},
        "readonly": {"version": "1", "default": "deny", "hide": READONLY_HIDES, "tools": {"list_vms": {}}},
    },
    "attach": [
        {"policy": "ops", "when": [{"claim": "groups", "includes": "ops"}]},
        {"policy": "readonly", "when": [{"claim": "scope", "includes": "vms:read"}]},
    ],
    "gateway": {"identity": {"payload_header": PAYLOAD_HEADER, "grant_claim": "sub"},
                "session_key": {"current_env": "MCPF_SESSION_KEY"}},
}


def test_typescript_client_two_identities_two_policies(stack):
    _, port = stack.demo_server(json_response=False)
    issuer = Issuer()
    envoy, _ = start_identity_envoy(stack, port, issuer, IDENTITY_SET, name="envoy-identity-ts")
    args = {"node": "pve1", "vmid": 102}
    ops = ts_client(envoy.mcp_url, issuer.token("ts-alice", groups=["ops"]), ("start_vm", args), ("list_vms", {}))
    ro = ts_client(envoy.mcp_url, issuer.token("ts-bob", scope="openid vms:read", act={"sub": "assistant"}),
                   ("start_vm", args), ("list_vms", {}))
    assert "error" not in ops and "error" not in ro, (ops, ro)
    assert ops["tools"] == [t for t in DEMO_TOOLS if t != "delete_vm"]
    assert ro["tools"] == [t for t in DEMO_TOOLS if t not in READONLY_HIDES]
    (started, listed), (refused, ro_listed) = ops["calls"], ro["calls"]
    assert (started["ok"], started["is_error"], json.loads(started["text"])["status"]) == (True, False, "running")
    assert (refused["ok"], refused["code"], refused["data"]["kind"], refused["data"]["rule"]) == (
        False, -31001, "denied", "hide")
    assert refused["data"]["tool"] == "start_vm"
    for lst in (listed, ro_listed):
        assert lst["ok"] and [v["vmid"] for v in json.loads(lst["text"])["vms"]] == [100, 101, 102, 200]
