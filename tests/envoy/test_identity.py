"""Tier 2: a policy set in real Envoy with real `jwt_authn` in front (local JWKS inline, RS256
tokens signed here, `forward_payload_header: x-jwt-payload`, the header stripped at the edge as
envoy/envoy-oauth.yaml does).

What the "Many agents" chapter promises:
- three identities make three different decisions on the same call, and get three tools/list results;
- a payload header the client sends never changes the policy (the edge strips it; jwt_authn writes
  its own only after verifying the token);
- a token narrowed to scope `vms:read` (RFC 8693 token exchange, with an `act` claim) gets the
  read-only policy, and the audit record names policy, subject, client and the actor chain;
- containment through a reload cuts off one identity; the others are unaffected.
"""

from __future__ import annotations

import base64
import json

import pytest
import yaml

from testkit.envoy import set_policy
from testkit.identity import PAYLOAD_HEADER, Issuer, start_identity_envoy
from testkit.jsonrpc import headers_for, post, rpc, tool_call
from testkit.logs import audit_records, grant_label
from testkit.paths import REPO_ROOT
from testkit.processes import wait_for
from testkit.stats import prometheus
from testkit.upstream import StubUpstream, compact, json_canned

# Run on the wasm build and on the native build (tests/conftest.py).
pytestmark = pytest.mark.both_builds

TOOLS = [{"name": n, "inputSchema": {"type": "object"}} for n in ("list_vms", "vm_agent_exec", "delete_vm")]
CONTAINED = "incident 42: alice's agent is cut off"

SET = {
    "version": "1",
    "policies": {
        "ops": {"version": "1", "default": "deny", "hide": ["delete_vm"],
                "tools": {"list_vms": {}, "vm_agent_exec": {}}},
        "readonly": {"version": "1", "default": "deny", "hide": ["vm_agent_exec", "delete_vm"],
                     "tools": {"list_vms": {}}},
    },
    "attach": [
        {"policy": "ops", "when": [{"claim": "groups", "includes": "ops"}]},
        {"policy": "readonly", "when": [{"claim": "scope", "includes": "vms:read"}]},
    ],
    "gateway": {"identity": {"payload_header": PAYLOAD_HEADER, "grant_claim": "sub"}},
}


def lists(seen):
    msg = json.loads(seen.body or b"{}")
    if msg.get("method") == "tools/list":
        return json_canned({"jsonrpc": "2.0", "id": msg["id"], "result": {"tools": TOOLS}})
    return None


@pytest.fixture
def world(stack):
    issuer = Issuer()
    with StubUpstream(responder=lists) as upstream:
        envoy, ecds = start_identity_envoy(stack, upstream.port, issuer, SET)
        yield issuer, upstream, envoy, ecds


def call(envoy, token: str, tool: str = "vm_agent_exec", **headers):
    return post(envoy.mcp_url, tool_call(tool, id=5), headers_for(token, **headers))


def outcome(r) -> tuple:
    msg = r.json()
    if "error" in msg:
        return (r.status, msg["error"]["data"]["kind"])
    return (r.status, "forwarded")


def listed(envoy, token: str) -> list[str]:
    r = post(envoy.mcp_url, rpc("tools/list", 9, {}), headers_for(token))
    assert r.status == 200, r.body
    return [t["name"] for t in r.json()["result"]["tools"]]


def b64url(obj) -> str:
    return base64.urlsafe_b64encode(compact(obj)).rstrip(b"=").decode()


def test_three_identities_three_decisions_and_three_lists(world):
    issuer, upstream, envoy, _ = world
    alice = issuer.token("alice", groups=["ops"])
    bob = issuer.token("bob", scope="openid vms:read")
    carol = issuer.token("carol", scope="openid")
    assert [outcome(call(envoy, t)) for t in (alice, bob, carol)] == \
        [(200, "forwarded"), (200, "denied"), (200, "no_policy")]
    assert [listed(envoy, t) for t in (alice, bob, carol)] == \
        [["list_vms", "vm_agent_exec"], ["list_vms"], []]
    # Only alice's call and the three tools/list requests reached the server.
    methods = [json.loads(s.body)["method"] for s in upstream.requests() if s.body]
    assert methods == ["tools/call", "tools/list", "tools/list", "tools/list"]
    records = wait_for(lambda: [r for r in audit_records(envoy.log_text()) if r.get("tool") == "vm_agent_exec"],
                       timeout=10, what="three audit records")
    assert [(r["decision"], r.get("policy"), r["subject"], r["grant"]) for r in records] == [
        ("allowed", "ops", "alice", grant_label("alice")),
        ("denied", "readonly", "bob", grant_label("bob")),
        ("denied", None, "carol", grant_label("carol")),
    ]
    assert records[2]["error"] == "no_policy"


def test_a_client_supplied_payload_header_never_changes_the_policy(world):
    issuer, upstream, envoy, _ = world
    carol = issuer.token("carol")
    forged = b64url({"sub": "alice", "groups": ["ops"]})
    assert outcome(call(envoy, carol, **{PAYLOAD_HEADER: forged})) == (200, "no_policy")
    # Without a token, jwt_authn refuses before the policy filter: the forged header is nothing.
    r = post(envoy.mcp_url, tool_call("vm_agent_exec"), {"content-type": "application/json", PAYLOAD_HEADER: forged})
    assert r.status == 401
    assert [s for s in upstream.requests() if s.body] == []


def test_the_istio_recipe_strips_a_forged_payload_when_no_token_is_sent(stack):
    """deploy/istio: RequestAuthentication lets a request without a token through (jwt_authn
    `allow_missing`, as Istio renders it), so only envoyfilter-payload.yaml's Lua filter, taken
    verbatim from the manifest and put first, stands between a client's own payload header and the
    filter: without a token the forged ops identity is nothing (401 no_grant from the filter)."""
    (ef,) = yaml.safe_load_all((REPO_ROOT / "deploy/istio/common/envoyfilter-payload.yaml").read_text(encoding="utf-8"))
    (patch,) = ef["spec"]["configPatches"]
    issuer = Issuer()
    with StubUpstream(responder=lists) as upstream:
        envoy, _ = start_identity_envoy(stack, upstream.port, issuer, SET, name="envoy-identity-istio",
                                        strip_filter=patch["patch"]["value"], allow_missing=True)
        forged = b64url({"sub": "alice", "groups": ["ops"]})
        r = post(envoy.mcp_url, tool_call("vm_agent_exec", id=5),
                 {"content-type": "application/json", PAYLOAD_HEADER: forged})
        assert (r.status, r.json()["error"]["data"]["kind"]) == (401, "no_grant")
        # With a token, jwt_authn's verified payload decides; a forged copy beside it changes nothing.
        assert outcome(call(envoy, issuer.token("carol"), **{PAYLOAD_HEADER: forged})) == (200, "no_policy")
        assert outcome(call(envoy, issuer.token("alice", groups=["ops"]))) == (200, "forwarded")
        assert len([s for s in upstream.requests() if s.body]) == 1


def test_a_token_narrowed_to_vms_read_gets_readonly_and_the_audit_names_the_chain(world):
    issuer, upstream, envoy, _ = world
    # RFC 8693: alice's token exchanged for one task, for an assistant acting through a planner.
    narrowed = issuer.token("alice", scope="vms:read", client_id="assistant",
                            act={"sub": "assistant-agent", "act": {"sub": "planner"}})
    assert outcome(call(envoy, narrowed, "vm_agent_exec")) == (200, "denied")
    assert outcome(call(envoy, narrowed, "list_vms")) == (200, "forwarded")
    assert listed(envoy, narrowed) == ["list_vms"]
    records = wait_for(lambda: [r for r in audit_records(envoy.log_text()) if r.get("tool")],
                       timeout=10, what="two audit records")
    for r in records:
        assert (r["policy"], r["subject"], r["client_id"], r["act"]) == \
            ("readonly", "alice", "assistant", ["assistant-agent", "planner"])
    assert [r["decision"] for r in records] == ["denied", "allowed"]
    # What the upstream receives carries no payload header of the client's and no token.
    (seen,) = [s for s in upstream.requests() if s.body and json.loads(s.body)["method"] == "tools/call"]
    assert "authorization" not in seen.headers


def test_containment_by_reload_cuts_off_one_identity(world, stack):
    issuer, _, envoy, ecds = world
    alice = issuer.token("alice", groups=["ops"])
    dave = issuer.token("dave", groups=["ops"])
    bob = issuer.token("bob", scope="vms:read")
    assert outcome(call(envoy, alice)) == (200, "forwarded")
    contained = dict(SET, contain=[{"when": [{"claim": "sub", "equals": "alice"}], "reason": CONTAINED}])
    set_policy(contained, ecds, wasm=stack.wasm)
    wait_for(lambda: all(outcome(call(envoy, alice)) == (200, "contained") for _ in range(6)), timeout=10,
             what="alice contained on every worker")
    r = call(envoy, alice)
    assert r.json()["error"]["data"]["reason"] == CONTAINED
    assert listed(envoy, alice) == []
    assert [outcome(call(envoy, dave)), outcome(call(envoy, bob, "list_vms"))] == \
        [(200, "forwarded"), (200, "forwarded")]
    # The contained calls are counted per tool on a series defined at load, which the next
    # configuration defines too: the count goes on through the reload on both builds.
    denied = 'mcp_policy_tool_decisions_total{mcp_tool="vm_agent_exec",mcp_decision="denied"}'
    before = prometheus(envoy)[denied]
    assert before >= 7
    seen: list[tuple] = []

    def released() -> bool:
        outcomes = [outcome(call(envoy, alice)) for _ in range(6)]
        seen.extend(outcomes)
        return all(o == (200, "forwarded") for o in outcomes)

    set_policy(SET, ecds, wasm=stack.wasm)
    wait_for(released, timeout=10, what="alice released")
    # Calls on a worker still on the containing configuration were refused, and counted, meanwhile.
    assert prometheus(envoy)[denied] == before + seen.count((200, "contained"))
    records = [r for r in audit_records(envoy.log_text()) if r.get("error") == "contained"]
    assert {(r["subject"], r["reason"]) for r in records} == {("alice", CONTAINED)}


def test_a_tool_result_refusal_is_a_failed_tool_call(world, stack):
    issuer, _, envoy, ecds = world
    shaped = json.loads(json.dumps(SET))
    shaped["gateway"]["refusal_shape"] = "tool_result"
    set_policy(shaped, ecds, wasm=stack.wasm)
    bob = issuer.token("bob", scope="vms:read")
    reason = "tool is hidden by policy"
    want = {"jsonrpc": "2.0", "id": 5, "result": {"content": [{"type": "text", "text": reason}], "isError": True}}
    wait_for(lambda: all(call(envoy, bob).json() == want for _ in range(6)), timeout=10, what="the tool_result shape")
    # Not a tools/call refusal: still an error (401 for a token without the grant claim is jwt_authn's
    # job here, so: a malformed body).
    r = post(envoy.mcp_url, b"{", headers_for(bob))
    assert (r.status, r.error["data"]["kind"]) == (400, "parse_error")
