"""Tier 2: require_approval offered through the protocol (crates/core/src/approval/offer.rs) in real Envoy, with the real
mcp-approvals service, in front of tests/cases/recorder.py.

A 2026-07-28 `tools/call` whose `_meta` client capabilities declare URL elicitation gets, while its
approval is pending, a successful `input_required` result pointing at the approval page, with a
`requestState` sealed under `gateway.session_key`. Approved through the approvers' API, the retry
(the same call plus the gateway's `inputResponses` entry and `requestState`) is forwarded with both
members blanked (each of their bytes, and one separating comma, becomes a space, so the length and
`content-length` stay): the recorder receives exactly those bytes (SHA-256, length, header). Still pending: a new offer; denied: -31008;
tampered: HTTP 400, -31011 with the id echoed, nothing upstream; without `session_key`: -31007.
"""

from __future__ import annotations

import hashlib
import json

from testkit import approvals as ha
from testkit.jsonrpc import Reply, headers_for, post
from testkit.stack import Stack
from testkit.upstream import recorder_lines, recorder_reply
from offer_support import INPUT_KEY, KEY, META, REASON, SETTLE, TOKEN, V26, compact
import offer_support

ARGS = {"node": "pve2", "vmid": 200}


def call_body(id_: int, state: str | None = None, action: str = "accept", meta: dict = META) -> bytes:
    """The tools/call as the client sends it; with `state`, the retry: the gateway's members placed
    between the others, so that cutting them must keep every other byte."""
    params: dict = {"name": "start_vm"}
    if state is not None:
        params["inputResponses"] = {INPUT_KEY: {"action": action}}
    params["arguments"] = ARGS
    if state is not None:
        params["requestState"] = state
    params["_meta"] = meta
    return compact({"jsonrpc": "2.0", "id": id_, "method": "tools/call", "params": params})


class Offer:
    def __init__(self, stack: Stack, session_key: bool = True):
        self.svc = ha.approvals(stack)
        gateway = {"session_key": {"current": KEY}} if session_key else {}
        policy = ha.approval_policy({"start_vm": ha.approval_tool(reason=REASON)}, gateway=gateway)
        _, port, self.log = stack.recorder()
        self.envoy = stack.envoy(policy, port, approvals_port=self.svc.check_port)

    def post(self, body: bytes) -> Reply:
        headers = headers_for(TOKEN, **{"mcp-protocol-version": V26, "mcp-method": "tools/call",
                                        "mcp-name": "start_vm"})
        return post(self.envoy.mcp_url, body, headers, timeout=15)

    def received(self, settle: float = 0.0) -> list[dict]:
        return recorder_lines(self.log, settle=settle)

    def offered(self, r: Reply, id_: int) -> tuple[str, str]:
        """`r` is the input_required offer for `id_`: (approval id, requestState)."""
        return offer_support.offered(r, id_, self.svc.url)


def test_offer_then_approved_retry_is_forwarded_without_the_gateways_members(stack):
    o = Offer(stack)
    approval_id, state = o.offered(o.post(call_body(1)), 1)
    assert o.received(settle=SETTLE) == [], "nothing upstream while pending"
    shown = o.svc.get(approval_id)
    assert (shown["state"], shown["tool"], shown["arguments"]) == ("pending", "start_vm", ARGS)

    # Still pending: the retry is a new offer of the same approval.
    again_id, again_state = o.offered(o.post(call_body(2, state)), 2)
    assert again_id == approval_id and again_state.startswith("mcpf-a1.")
    assert o.received(settle=SETTLE) == []

    o.svc.approve(approval_id)
    retry = call_body(3, again_state)
    r = o.post(retry)
    assert (r.status, r.body) == (200, recorder_reply(3)), r.body
    answers = b',"inputResponses":{"mcp-policy-filter/approval":{"action":"accept"}}'
    state_member = b',"requestState":' + json.dumps(again_state).encode()
    assert answers in retry and state_member in retry
    forwarded = retry.replace(answers, b" " * len(answers)).replace(state_member, b" " * len(state_member))
    assert json.loads(forwarded) == json.loads(call_body(3))
    got = o.received()
    assert len(got) == 1, got
    assert (got[0]["body_sha256"], got[0]["body_len"]) == (hashlib.sha256(forwarded).hexdigest(), len(retry))
    assert got[0]["headers"]["content-length"] == str(len(retry)), got[0]["headers"]
    assert o.svc.get(approval_id)["state"] == "consumed"

    # The approval is used up: the same retry again gets a new offer (a new approval), nothing upstream.
    new_id, _ = o.offered(o.post(call_body(4, again_state)), 4)
    assert new_id != approval_id
    assert len(o.received(settle=SETTLE)) == 1


def test_denied_and_tampered(stack):
    o = Offer(stack)
    approval_id, state = o.offered(o.post(call_body(1)), 1)
    o.svc.deny(approval_id, "not today")
    r = o.post(call_body(2, state))
    assert r.status == 200, r.body
    err = r.json()["error"]
    assert (err["code"], err["data"]["kind"], err["data"]["approval_id"], err["data"]["note"]) == (
        -31008, "approval_denied", approval_id, "not today")

    tampered = state[:-2] + ("AA" if state[-2:] != "AA" else "BB")
    why = "params.requestState was not issued by this gateway for this grant and this exact call"
    r = o.post(call_body(7, tampered))
    assert r.status == 400, (r.status, r.body)
    assert r.json() == {"jsonrpc": "2.0", "id": 7, "error": {
        "code": -31011, "message": f"Invalid params: {why}",
        "data": {"kind": "approval_state_invalid", "tool": "start_vm", "reason": why}}}
    assert o.received(settle=SETTLE) == []


def test_without_session_key_the_fallback_stays(stack):
    o = Offer(stack, session_key=False)
    r = o.post(call_body(1))
    assert r.status == 200, r.body
    err = r.json()["error"]
    assert (err["code"], err["data"]["kind"]) == (-31007, "approval_required"), err
    assert err["data"]["approval_url"] == f"{o.svc.url}/approvals/{err['data']['approval_id']}"
    assert o.received(settle=SETTLE) == []


# ------------------------------------------------------------------------------ 2025-11-25: -32042

V25 = "2025-11-25"


def init_body(caps: dict) -> bytes:
    return compact({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": V25, "capabilities": caps, "clientInfo": {"name": "raw", "version": "1"}}})


def test_2025_session_with_url_elicitation_gets_32042(stack):
    svc, envoy = offer_support.demo_gateway(stack)

    def session(caps: dict) -> str:
        r = post(envoy.mcp_url, init_body(caps), headers_for(TOKEN, **{"mcp-protocol-version": V25}))
        assert r.status == 200, r.body
        sid = r.headers["mcp-session-id"]
        h = headers_for(TOKEN, **{"mcp-session-id": sid, "mcp-protocol-version": V25})
        assert post(envoy.mcp_url, b'{"jsonrpc":"2.0","method":"notifications/initialized"}', h).status == 202
        return sid

    def start(sid: str, id_: int) -> Reply:
        body = compact({"jsonrpc": "2.0", "id": id_, "method": "tools/call",
                        "params": {"name": "start_vm", "arguments": ARGS}})
        return post(envoy.mcp_url, body, headers_for(TOKEN, **{"mcp-session-id": sid, "mcp-protocol-version": V25}),
                    timeout=15)

    url_sid = session({"elicitation": {"form": {}, "url": {}}})
    plain_sid = session({"elicitation": {"form": {}}})
    assert url_sid.startswith("m2.") and plain_sid.startswith("m1."), (url_sid, plain_sid)

    r = start(url_sid, 1)
    assert r.status == 200, r.body
    msg = r.json()
    err = msg["error"]
    (elicitation,) = err["data"]["elicitations"]
    approval_id = elicitation["elicitationId"]
    approval_url = f"{svc.url}/approvals/{approval_id}"
    assert msg == {"jsonrpc": "2.0", "id": 1, "error": {
        "code": -32042, "message": f"tool 'start_vm' requires approval: open {approval_url} to approve it",
        "data": {"kind": "approval_required", "tool": "start_vm", "reason": REASON, "elicitations": [
            {"mode": "url", "url": approval_url, "elicitationId": approval_id, "message": REASON}]}}}, msg

    # The plain session still gets -31007, for the same pending approval (same call, same grant).
    r = start(plain_sid, 2)
    assert (r.json()["error"]["code"], r.json()["error"]["data"]["approval_id"]) == (-31007, approval_id)

    # Approved: the identical call runs, on the m2 session.
    svc.approve(approval_id)
    r = start(url_sid, 3)
    assert r.status == 200, r.body
    assert json.loads(r.json()["result"]["content"][0]["text"])["status"] == "running", r.body
    assert svc.get(approval_id)["state"] == "consumed"
