"""Tier 2: a hostile agent against the approval offer (crates/core/src/approval/offer.rs, tests/envoy/test_approval_offer.py)
in real Envoy, with the real mcp-approvals service, in front of tests/cases/recorder.py.

Each attack asserts the exact reply and what reached the server: an approved `requestState`
replayed (one after the other and two at once) runs the call once; the state with other arguments,
another tool or another grant, or sealed under a key rotated out, is HTTP 400 −31011; the gateway's
members alone, extra answers, duplicates, folded and escaped member names; a batch; large states.
"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from testkit import approvals as ha
from testkit.envoy import Envoy
from testkit.jsonrpc import Reply, headers_for, post
from testkit.stack import Stack
from testkit.stats import prometheus
from testkit.upstream import recorder_reply
from offer_support import INPUT_KEY, KEY, META, REASON, SETTLE, TOKEN, V26, compact
import offer_support

TOKEN_B = "agent-offer-token-b"
KEY_2 = "offer-test-session-key-two-456789abcdef"
KEY_3 = "offer-test-session-key-three-789abcdef0"
SEAL = "params.requestState was not issued by this gateway for this grant and this exact call"
MALFORMED = "params.requestState is not an approval state issued by this gateway"


EVENTS = ["input_required", "url_elicitation", "forwarded", "state_invalid", "declined"]
NO_OFFERS = {e: 0.0 for e in EVENTS}


def offers(envoy: Envoy) -> dict[str, float]:
    """`mcp_policy_approval_offers_<event>_total` of `envoy`, by event."""
    samples = prometheus(envoy)
    return {e: samples[f"mcp_policy_approval_offers_{e}_total{{}}"] for e in EVENTS}


def args(vmid: int) -> dict:
    return {"node": "pve2", "vmid": vmid}


def call(id_: int, vmid: int, state: str | None = None, *, tool: str = "start_vm", answers: dict | None = None,
         meta: dict = META) -> bytes:
    """A tools/call; with `state`, the retry carrying the gateway's answer (or `answers`) and the state."""
    params: dict = {"name": tool, "arguments": args(vmid), "_meta": meta}
    if state is not None:
        params["inputResponses"] = {INPUT_KEY: {"action": "accept"}} if answers is None else answers
        params["requestState"] = state
    return compact({"jsonrpc": "2.0", "id": id_, "method": "tools/call", "params": params})


def invalid(id_: int, why: str, tool: str = "start_vm") -> dict:
    return {"jsonrpc": "2.0", "id": id_, "error": {
        "code": -31011, "message": f"Invalid params: {why}",
        "data": {"kind": "approval_state_invalid", "tool": tool, "reason": why}}}


# One host name for every Envoy, as behind a load balancer: a state binds the call's upstream
# (cluster, :authority, :path), and each Envoy's own port would make it another.
GATEWAY_HOST = "mcp.gateway.test"


class Gate:
    """One Envoy (`keys`: `gateway.session_key`) with the approvals service `svc` and the recorder `log`."""

    def __init__(self, stack: Stack, svc: ha.Approvals, stub, keys: dict, name: str = "envoy"):
        self.svc, self.stub = svc, stub
        policy = ha.approval_policy({"start_vm": ha.approval_tool(reason=REASON), "list_vms": {}},
                                    gateway={"session_key": keys})
        self.envoy = stack.envoy(policy, stub.port, approvals_port=svc.check_port, name=name)

    def post(self, body: bytes, token: str = TOKEN, tool: str = "start_vm", version: str = V26) -> Reply:
        headers = headers_for(token, **{"mcp-protocol-version": version, "mcp-method": "tools/call",
                                        "mcp-name": tool, "host": GATEWAY_HOST})
        return post(self.envoy.mcp_url, body, headers, timeout=15)

    def received(self, settle: float = 0.0) -> list:
        """The requests the server received so far (testkit/upstream.py `Seen`: headers, body bytes)."""
        if settle:
            time.sleep(settle)
        return self.stub.requests()

    def offered(self, r: Reply, id_: int) -> tuple[str, str]:
        """`r` is the input_required offer for `id_`: (approval id, requestState)."""
        return offer_support.offered(r, id_, self.svc.url)

    def approved_state(self, id_: int, vmid: int, token: str = TOKEN) -> tuple[str, str]:
        """Offer the call for `vmid`, approve it: (approval id, requestState)."""
        approval_id, state = self.offered(self.post(call(id_, vmid), token), id_)
        self.svc.approve(approval_id)
        return approval_id, state

    def forwarded(self, r: Reply, id_: int, before: int, sent: bytes, expect: bytes) -> None:
        """`r` is the server's reply to `sent`; the server received one more body, which Python's
        JSON reader reads as `expect` and whose length and content-length are `sent`'s."""
        assert (r.status, r.body) == (200, recorder_reply(id_)), (r.status, r.body)
        got = self.received()
        assert len(got) == before + 1, got
        body = got[-1].body
        assert len(body) == len(sent) and got[-1].headers["content-length"] == str(len(sent)), got[-1]
        assert json.loads(body) == json.loads(expect), body


@pytest.fixture(scope="module")
def gate(module_stack) -> Gate:
    svc = ha.approvals(module_stack)
    stub, _, _ = module_stack.recorder()
    return Gate(module_stack, svc, stub, {"current": KEY})


def test_an_approved_state_replayed_runs_the_call_once(gate):
    before = len(gate.received())
    approval_id, state = gate.approved_state(1, 301)
    # Two retries at once with the same approved state: one goes upstream, the other gets a new offer.
    with ThreadPoolExecutor(2) as pool:
        replies = list(pool.map(lambda i: gate.post(call(i, 301, state)), [2, 3]))
    ran = [r for r in replies if r.json().get("result", {}).get("resultType") != "input_required"]
    (offer,) = [r for r in replies if r not in ran]
    assert len(ran) == 1, [r.body for r in replies]
    assert ran[0].body == recorder_reply(ran[0].json()["id"])
    second_id, _ = gate.offered(offer, offer.json()["id"])
    assert second_id != approval_id
    # Replayed again, one after the other: the same new approval is offered, nothing upstream.
    for id_ in (4, 5):
        again_id, _ = gate.offered(gate.post(call(id_, 301, state)), id_)
        assert again_id == second_id
    assert len(gate.received(settle=SETTLE)) == before + 1
    assert (gate.svc.get(approval_id)["state"], gate.svc.get(second_id)["state"]) == ("consumed", "pending")


def test_the_state_does_not_cover_other_arguments_another_tool_or_another_grant(gate):
    before = len(gate.received())
    approval_id, state = gate.approved_state(1, 302)
    assert gate.post(call(2, 303, state)).json() == invalid(2, SEAL)
    r = gate.post(call(3, 302, state, tool="list_vms"), tool="list_vms")
    assert (r.status, r.json()) == (400, invalid(3, SEAL, tool="list_vms"))
    r = gate.post(call(4, 302, state), token=TOKEN_B)
    assert (r.status, r.json()) == (400, invalid(4, SEAL))
    assert len(gate.received(settle=SETTLE)) == before
    assert gate.svc.get(approval_id)["state"] == "approved", "nothing was asked"
    # The approval is still there for the call it was made for.
    sent = call(5, 302, state)
    gate.forwarded(gate.post(sent), 5, before, sent, call(5, 302))


def test_the_gateways_members_alone_or_with_others(gate):
    before = len(gate.received())
    approval_id, state = gate.approved_state(1, 304)
    # The gateway's answer without its state; its state with the server's answers next to ours.
    body = compact({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "start_vm", "arguments": args(304), "_meta": META,
        "inputResponses": {INPUT_KEY: {"action": "accept"}}}})
    why = "params.inputResponses answers the gateway's approval request without its requestState"
    r = gate.post(body)
    assert (r.status, r.json()) == (400, invalid(2, why))
    extra = {INPUT_KEY: {"action": "accept"}, "confirm": {"action": "accept", "content": {"name": "vm"}}}
    why = "params.inputResponses may hold only the gateway's approval answer with its requestState"
    r = gate.post(call(3, 304, state, answers=extra))
    assert (r.status, r.json()) == (400, invalid(3, why))
    assert len(gate.received(settle=SETTLE)) == before
    # The state alone (no inputResponses) is the gateway's retry: forwarded without it.
    sent = compact({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
        "name": "start_vm", "arguments": args(304), "_meta": META, "requestState": state}})
    gate.forwarded(gate.post(sent), 4, before, sent, call(4, 304))
    assert gate.svc.get(approval_id)["state"] == "consumed"


def test_a_state_sealed_under_a_key_rotated_out_is_refused(stack):
    """Envoy 1 seals under KEY; envoy 2 (KEY_2, previous KEY) still opens it and seals under KEY_2;
    envoy 3 (KEY_3, previous KEY_2) opens only envoy 2's state. All share one approvals service."""
    svc = ha.approvals(stack)
    stub, _, _ = stack.recorder()
    old = Gate(stack, svc, stub, {"current": KEY}, name="envoy-old")
    rotated = Gate(stack, svc, stub, {"current": KEY_2, "previous": KEY}, name="envoy-rotated")
    again = Gate(stack, svc, stub, {"current": KEY_3, "previous": KEY_2}, name="envoy-again")
    approval_id, state_1 = old.offered(old.post(call(1, 305)), 1)
    same_id, state_2 = rotated.offered(rotated.post(call(2, 305, state_1)), 2)
    assert same_id == approval_id and state_2 != state_1
    r = again.post(call(3, 305, state_1))
    assert (r.status, r.json()) == (400, invalid(3, SEAL))
    assert again.offered(again.post(call(4, 305, state_2)), 4)[0] == approval_id
    svc.approve(approval_id)
    r = again.post(call(5, 305, state_1))
    assert (r.status, r.json()) == (400, invalid(5, SEAL))
    assert again.received(settle=SETTLE) == [] and svc.get(approval_id)["state"] == "approved"
    sent = call(6, 305, state_2)
    again.forwarded(again.post(sent), 6, 0, sent, call(6, 305))


# ------------------------------------------------------------------------------ 2025-11-25: -32042

V25 = "2025-11-25"


def test_an_m1_session_relabelled_m2_is_refused_and_only_m2_gets_32042(stack):
    svc, envoy = offer_support.demo_gateway(stack)

    def h(sid: str | None = None, token: str = TOKEN) -> dict:
        return headers_for(token, **{"mcp-protocol-version": V25, **({"mcp-session-id": sid} if sid else {})})

    def session(caps: dict, token: str = TOKEN) -> str:
        init = compact({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": V25, "capabilities": caps, "clientInfo": {"name": "raw", "version": "1"}}})
        r = post(envoy.mcp_url, init, h(token=token))
        assert r.status == 200, r.body
        sid = r.headers["mcp-session-id"]
        assert post(envoy.mcp_url, b'{"jsonrpc":"2.0","method":"notifications/initialized"}',
                    h(sid, token)).status == 202
        return sid

    def start(sid: str | None, id_: int, token: str = TOKEN) -> Reply:
        body = compact({"jsonrpc": "2.0", "id": id_, "method": "tools/call",
                        "params": {"name": "start_vm", "arguments": args(306)}})
        return post(envoy.mcp_url, body, h(sid, token), timeout=15)

    plain = session({"elicitation": {"form": {}}})
    url_true = session({"elicitation": {"url": True}})
    url_b = session({"elicitation": {"url": {}}}, TOKEN_B)
    assert plain.startswith("m1.") and url_true.startswith("m1.") and url_b.startswith("m2."), (plain, url_true)
    for forged in ["m2." + plain[3:], url_b]:
        r = start(forged, 1)
        assert r.status == 404, (r.status, r.body)
        assert (r.error["code"], r.error["data"]["kind"]) == (-31010, "session_invalid"), r.body
    assert svc.pending() == [], "nothing was asked"
    for sid, id_ in [(plain, 2), (url_true, 3), (None, 4)]:
        r = start(sid, id_)
        assert (r.status, r.error["code"], r.error["data"]["kind"]) == (200, -31007, "approval_required"), r.body
        assert "elicitations" not in r.error["data"], r.body
    r = start(url_b, 5, TOKEN_B)
    assert (r.status, r.error["code"]) == (200, -32042), r.body
    assert offers(envoy) == {**NO_OFFERS, "url_elicitation": 1.0}



DECLINED = ("the client declined the gateway's approval request (inputResponses action decline or cancel); "
            "nothing was asked or forwarded")


def test_a_declined_answer_never_runs_the_call_even_when_approved(gate):
    """The person at the client said no: the service is not asked, so an approval given meanwhile
    is neither used nor consumed, and nothing goes upstream."""
    before = len(gate.received())
    approval_id, state = gate.approved_state(1, 307)
    for id_, action in [(2, "decline"), (3, "cancel")]:
        r = gate.post(call(id_, 307, state, answers={INPUT_KEY: {"action": action}}))
        assert (r.status, r.json()) == (200, {"jsonrpc": "2.0", "id": id_, "error": {
            "code": -31007, "message": f"tool 'start_vm' requires approval: {DECLINED}",
            "data": {"kind": "approval_required", "tool": "start_vm", "reason": DECLINED}}}), r.body
    assert len(gate.received(settle=SETTLE)) == before, "the client said no"
    assert gate.svc.get(approval_id)["state"] == "approved"


# ------------------------------------------------------------------------------ what the server reads


def raw_retry(id_: int, vmid: int, state: str, *members: str) -> bytes:
    """A retry whose params members are `members` (JSON text), then name, arguments and _meta."""
    tail = [f'"name":"start_vm"', f'"arguments":{compact(args(vmid)).decode()}', f'"_meta":{compact(META).decode()}']
    params = ",".join([*(m.replace("STATE", json.dumps(state)) for m in members), *tail])
    return f'{{"jsonrpc":"2.0","id":{id_},"method":"tools/call","params":{{{params}}}}}'.encode()


def test_duplicate_and_folded_member_names_are_refused_before_anything(gate):
    before = len(gate.received())
    approval_id, state = gate.approved_state(1, 308)
    answer = '"inputResponses":{"mcp-policy-filter/approval":{"action":"accept"}}'
    params_at = len(b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":')
    twice = '"inputResponses":{"mcp-policy-filter/approval":{"action":"accept"},"mcp-policy-filter\\/approval":{}}'
    cases = [
        (raw_retry(2, 308, state, answer, '"requestState":STATE', '"requestState":STATE'), params_at),
        (raw_retry(2, 308, state, answer, '"requestState":STATE', '"request\\u0053tate":"x"'), params_at),
        (raw_retry(2, 308, state, twice, '"requestState":STATE'), params_at + len('{"inputResponses":')),
    ]
    for body, at in cases:
        why = f"duplicate object key at byte {at}"
        r = gate.post(body)
        assert (r.status, r.json()) == (400, {"jsonrpc": "2.0", "id": None, "error": {
            "code": -32700, "message": f"Parse error: {why}", "data": {"kind": "parse_error", "reason": why}}})
    why = "an object holds two member names that are equal after case folding or removing invisible characters"
    for other in ['"requeststate":"x"', '"request\\u200bState":"x"']:
        r = gate.post(raw_retry(3, 308, state, answer, '"requestState":STATE', other))
        assert (r.status, r.json()) == (400, {"jsonrpc": "2.0", "id": 3, "error": {
            "code": -32600, "message": f"Invalid Request: {why}", "data": {"kind": "invalid_request", "reason": why}}})
    assert len(gate.received(settle=SETTLE)) == before
    assert gate.svc.get(approval_id)["state"] == "approved"


def test_escaped_member_names_are_cut_as_the_servers_json_reader_reads_them(gate):
    """`request\\u0053tate` is `requestState` to the filter and to Python's json alike: cut, with
    exactly its bytes and one comma blanked, so the server reads the call as first sent."""
    before = len(gate.received())
    _, state = gate.approved_state(1, 309)
    head = b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{'
    state_m = b' "request\\u0053tate" :\n' + json.dumps(state).encode()
    name = b' ,\n "name":"start_vm"'
    answer = b',"input\\u0052esponses":{"mcp-policy-filter\\/approval":{"\\u0061ction":"accept"}}'
    rest = b',"arguments":' + compact(args(309)) + b',"_meta":' + compact(META) + b"}}"
    sent = head + state_m + name + answer + rest
    gate.forwarded(gate.post(sent), 2, before, sent, call(2, 309))
    expected = head + b" " * len(state_m) + name.replace(b",", b" ", 1) + b" " * len(answer) + rest
    assert gate.received()[-1].body == expected


def test_batches_large_states_and_clients_without_url_elicitation(gate):
    before = len(gate.received())
    approval_id, state = gate.approved_state(1, 310)
    retry = call(2, 310, state)
    why = "JSON-RPC batches are not part of MCP 2026-07-28 (removed in 2025-06-18)"
    r = gate.post(b"[" + retry + b"]")
    assert (r.status, r.json()) == (400, {"jsonrpc": "2.0", "id": None, "error": {
        "code": -32600, "message": f"Invalid Request: {why}", "data": {"kind": "invalid_request", "reason": why}}})
    old = json.loads(retry)
    del old["params"]["_meta"]
    r = post(gate.envoy.mcp_url, b"[" + compact(old) + b"]", headers_for(TOKEN, **{"mcp-protocol-version": "2025-03-26"}))
    why = "a call that needs approval cannot be part of a batch; send it on its own"
    assert (r.status, r.json()) == (200, [{"jsonrpc": "2.0", "id": 2, "error": {
        "code": -31007, "message": f"tool 'start_vm' requires approval: {why}",
        "data": {"kind": "approval_required", "tool": "start_vm", "reason": why}}}])
    r = gate.post(call(3, 310, "mcpf-a1." + "A" * 200_000 + ".x"))
    assert (r.status, r.json()) == (400, invalid(3, MALFORMED))
    r = gate.post(call(4, 310, "mcpf-a1." + "A" * 1_100_000))
    why = "request body exceeds 1048576 bytes"
    assert (r.status, r.json()) == (413, {"jsonrpc": "2.0", "id": None, "error": {
        "code": -32600, "message": f"Invalid Request: {why}", "data": {"kind": "body_too_large", "reason": why}}})
    assert len(gate.received(settle=SETTLE)) == before
    assert gate.svc.get(approval_id)["state"] == "approved"
    # Without URL elicitation declared (none, or `url` not an object), a new call gets -31007.
    for id_, caps in [(5, {"elicitation": {"form": {}}}), (6, {"elicitation": {"url": True}}), (7, {})]:
        meta = {**META, "io.modelcontextprotocol/clientCapabilities": caps}
        r = gate.post(call(id_, 311, meta=meta))
        assert (r.status, r.json()["error"]["code"], r.json()["error"]["data"]["kind"]) == (
            200, -31007, "approval_required"), r.body


def test_a_chunked_retry_is_cut_across_its_chunks(gate):
    """The approved retry sent with chunked transfer encoding, split inside both of the gateway's
    members: the server receives the whole call once, with exactly those bytes blanked."""
    before = len(gate.received())
    _, state = gate.approved_state(1, 312)
    sent = call(2, 312, state)
    answers = b',"inputResponses":{"mcp-policy-filter/approval":{"action":"accept"}}'
    state_m = b',"requestState":' + json.dumps(state).encode()
    cuts = [sent.index(answers) + 20, sent.index(state_m) + 30, len(sent) - 3]

    def chunks():
        for a, b in zip([0, *cuts], [*cuts, len(sent)]):
            yield sent[a:b]
            time.sleep(0.05)

    headers = headers_for(TOKEN, **{"mcp-protocol-version": V26, "mcp-method": "tools/call", "mcp-name": "start_vm",
                                    "host": GATEWAY_HOST})
    r = post(gate.envoy.mcp_url, chunks(), headers, timeout=15)
    assert (r.status, r.body) == (200, recorder_reply(2)), r.body
    got = gate.received()
    assert len(got) == before + 1
    assert got[-1].body == sent.replace(answers, b" " * len(answers)).replace(state_m, b" " * len(state_m))
    assert json.loads(got[-1].body) == json.loads(call(2, 312))


def test_the_offer_stats_count_each_event_once(stack):
    svc = ha.approvals(stack)
    stub, _, _ = stack.recorder()
    g = Gate(stack, svc, stub, {"current": KEY})
    assert offers(g.envoy) == NO_OFFERS
    approval_id, state = g.offered(g.post(call(1, 313)), 1)
    g.offered(g.post(call(2, 313, state)), 2)
    r = g.post(call(3, 313, state[:-2] + ("AA" if state[-2:] != "AA" else "BB")))
    assert (r.status, r.json()) == (400, invalid(3, SEAL))
    svc.approve(approval_id)
    r = g.post(call(4, 313, state, answers={INPUT_KEY: {"action": "decline"}}))
    assert r.json()["error"]["data"]["reason"] == DECLINED
    sent = call(5, 313, state)
    g.forwarded(g.post(sent), 5, 0, sent, call(5, 313))
    assert offers(g.envoy) == {"input_required": 2.0, "url_elicitation": 0.0, "forwarded": 1.0,
                               "state_invalid": 1.0, "declined": 1.0}


def test_an_answer_that_is_not_an_elicitation_result_is_refused(gate):
    """The gateway's answer must be MCP's ElicitResult (`action`: accept, decline or cancel): an
    unknown or missing action is not read as consent."""
    before = len(gate.received())
    approval_id, state = gate.approved_state(1, 314)
    why = ('params.inputResponses["mcp-policy-filter/approval"] must be an elicitation result: '
           '{"action":"accept"|"decline"|"cancel"}')
    for id_, answer in [(2, {}), (3, {"action": "Decline"}), (4, {"action": "no"}), (5, "accept"), (6, None)]:
        r = gate.post(call(id_, 314, state, answers={INPUT_KEY: answer}))
        assert (r.status, r.json()) == (400, invalid(id_, why)), r.body
    assert len(gate.received(settle=SETTLE)) == before
    assert gate.svc.get(approval_id)["state"] == "approved"
