"""Tier 2: an approval asked by a delegated token, through real `jwt_authn` and the real
mcp-approvals. The approval carries who called, as the filter read it from the verified token: the
attached policy, the subject, the client and the RFC 8693 actor chain. The service stores them,
returns them in its JSON and shows them (escaped) on the approval's page, and an approval given to
one actor chain is never used by another actor of the same subject.
"""

from __future__ import annotations

import json

from testkit import approvals as ha
from testkit.identity import PAYLOAD_HEADER, Issuer, start_identity_envoy
from testkit.jsonrpc import headers_for, post, tool_call
from testkit.upstream import StubUpstream, json_canned

ARGS = {"node": "pve1", "vmid": 102}
SET = {
    "version": "1",
    "policies": {
        "ops": {"version": "1", "default": "deny", "tools": {"start_vm": ha.approval_tool()}},
        "readonly": {"version": "1", "default": "deny", "tools": {"list_vms": {}}},
    },
    "attach": [{"policy": "ops", "when": [{"claim": "groups", "includes": "ops"}]}],
    "gateway": {"identity": {"payload_header": PAYLOAD_HEADER, "grant_claim": "sub"},
                "approval": ha.approval_policy()["gateway"]["approval"]},
}


def started(seen):
    msg = json.loads(seen.body or b"{}")
    return json_canned({"jsonrpc": "2.0", "id": msg.get("id"), "result": {"content": [], "isError": False}})


def start_vm(envoy, token: str) -> dict:
    r = post(envoy.mcp_url, tool_call("start_vm", ARGS, id=7), headers_for(token))
    assert r.status == 200, r.body
    return r.json()


def test_the_approval_page_shows_the_delegated_caller(stack):
    issuer = Issuer()
    svc = ha.approvals(stack)
    with StubUpstream(responder=started) as upstream:
        envoy, _ = start_identity_envoy(stack, upstream.port, issuer, SET, approvals_port=svc.check_port)
        chain = {"sub": "agent-ci", "act": {"sub": "orchestrator"}}
        token = issuer.token("alice@example.com", groups=["ops"], client_id="ops-console", act=chain)
        asked = start_vm(envoy, token)["error"]
        assert (asked["code"], asked["data"]["kind"]) == (-31007, "approval_required")
        approval = svc.get(asked["data"]["approval_id"])
        assert {k: approval[k] for k in ("policy", "subject", "client_id", "act", "tool", "state")} == {
            "policy": "ops", "subject": "alice@example.com", "client_id": "ops-console",
            "act": ["agent-ci", "orchestrator"], "tool": "start_vm", "state": "pending"}
        html = ha.page(svc, f"/approvals/{approval['id']}")
        assert ('<p class="caller">caller: subject <b class="mono subject">alice@example.com</b> · client '
                '<span class="mono client-id">ops-console</span> · actors, current first: '
                '<span class="mono actor">agent-ci</span>, <span class="mono actor">orchestrator</span> · '
                'policy <span class="mono policy">ops</span></p>') in html, html

        svc.approve(approval["id"])
        # Another actor for the same subject, same call: not the approval a person gave.
        other = issuer.token("alice@example.com", groups=["ops"], client_id="ops-console",
                             act={"sub": "agent-evil", "act": {"sub": "orchestrator"}})
        again = start_vm(envoy, other)["error"]
        assert again["data"]["kind"] == "approval_required"
        assert again["data"]["approval_id"] != approval["id"]
        assert svc.get(again["data"]["approval_id"])["act"] == ["agent-evil", "orchestrator"]
        assert len(upstream.requests()) == 0
        # The chain it was given to: forwarded once, the approval consumed.
        assert start_vm(envoy, token)["result"] == {"content": [], "isError": False}
        assert len(upstream.requests()) == 1
        assert svc.get(approval["id"])["state"] == "consumed"
