//! Require approval offered through the protocol (`offer`): the sealed `requestState` (round trip,
//! tamper, forge, expiry, another grant or call, key rotation, as property tests), the body rewrite
//! of a retry, the exact offer JSON, and the gate's flow: offer → retry → approved and forwarded
//! without the gateway's members; pending → a new offer; denied → −31008; invalid → 400 −31011;
//! and every case that keeps the −31007 fallback.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use hmac::{Mac, SimpleHmac};
use mcp_policy_filter::approval::{self, Answer};
use mcp_policy_filter::b64::{self, Alphabet};
use mcp_policy_filter::config;
use mcp_policy_filter::gate::{self, DecisionKind, HeadOutcome, Outcome, PendingApproval, RequestHead};
use mcp_policy_filter::grant;
use mcp_policy_filter::mcp::Id;
use mcp_policy_filter::offer::state::{self, StateError};
use mcp_policy_filter::offer::{self, Offer};
use mcp_policy_filter::policy::Policy;
use mcp_policy_filter::ratelimit::MemoryStore;
use mcp_policy_filter::refusal::{ApprovalLink, Refusal};
use mcp_policy_filter::rewrite::{self, BodyRewrite};
use mcp_policy_filter::session::{self, SessionKeys};
use proptest::prelude::*;
use serde_json::{json, Value};
use sha2::Sha256;

const T0: u64 = 1_700_000_040_000; // ms
const KEY: &str = "0123456789abcdef0123456789abcdef";
const OLD_KEY: &str = "fedcba9876543210fedcba9876543210";
const V26: &str = "2026-07-28";
const CAPS: &str = r#""io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{},"url":{}}}"#;
const URL: &str = "http://127.0.0.1:9/approvals/apr_1";

fn keys() -> SessionKeys {
    SessionKeys { current: KEY.as_bytes().to_vec(), previous: None }
}

fn policy(session_key: bool) -> Policy {
    let key = if session_key { format!(r#","session_key":{{"current":"{KEY}"}}"#) } else { String::new() };
    let text = format!(
        r#"{{"version":"1","default":"deny","tools":{{"start_vm":{{"action":"require_approval","reason":"starting a VM costs money"}}}},
        "gateway":{{"approval":{{"cluster":"mcp_approvals"}}{key}}}}}"#
    );
    config::load(text.as_bytes()).unwrap()
}

fn head(p: &Policy, version: &str, session: Option<&str>) -> RequestHead {
    let mut h: Vec<(&str, &[u8])> =
        vec![(":method", b"POST"), ("content-type", b"application/json"), ("authorization", b"Bearer agent-a")];
    h.push(("mcp-protocol-version", version.as_bytes()));
    if version == V26 {
        h.push(("mcp-method", b"tools/call"));
        h.push(("mcp-name", b"start_vm"));
    }
    if let Some(s) = session {
        h.push(("mcp-session-id", s.as_bytes()));
    }
    RequestHead::from_headers(p, h)
}

fn decide_at(p: &Policy, h: &RequestHead, body: &str, now: u64) -> Outcome {
    assert_eq!(gate::on_headers(p, h), HeadOutcome::NeedBody);
    gate::on_body(p, h, body.as_bytes(), &MemoryStore::default(), now)
}

/// A 2026-07-28 `tools/call` of start_vm with `meta` inside `_meta` and `tail` after it in params.
fn call26(id: u64, meta: &str, tail: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"start_vm","arguments":{{"vmid":100}},"_meta":{{"io.modelcontextprotocol/protocolVersion":"2026-07-28"{meta}}}{tail}}}}}"#
    )
}

fn json_of(text: &str) -> mcp_policy_filter::json::Json {
    mcp_policy_filter::json::parse(text.as_bytes()).unwrap()
}

fn grant_a() -> [u8; 32] {
    grant::from_authorization(b"Bearer agent-a").unwrap().id
}

fn call_key() -> String {
    approval::key(&grant_a(), "start_vm", Some(&mcp_policy_filter::json::parse(br#"{"vmid":100}"#).unwrap()))
}

fn pending(o: Outcome) -> PendingApproval {
    assert_eq!(o.reply, None);
    *o.approval.expect("held for approval")
}

fn answer_pending(p: &Policy, held: PendingApproval, now: u64) -> Outcome {
    let answer = Answer::Pending { approval_id: "apr_1".into(), approval_url: URL.into(), expires_in_seconds: 600 };
    gate::on_approval_answer(p, held, answer, &MemoryStore::default(), now)
}

fn body_of(o: &Outcome) -> (u16, Value) {
    let r = o.reply.as_ref().expect("a reply");
    (r.status, serde_json::from_str(&r.body).unwrap())
}

// ------------------------------------------------------------------------------------ the seal

#[test]
fn seal_is_the_documented_hmac() {
    let sealed = state::seal(&keys(), &grant_a(), &call_key(), "apr_1", 1_700_000_640);
    let mut payload = 1_700_000_640u64.to_be_bytes().to_vec();
    payload.extend_from_slice(b"apr_1");
    let mut mac = SimpleHmac::<Sha256>::new_from_slice(KEY.as_bytes()).unwrap();
    mac.update(b"mcpf-approval-state-v1");
    mac.update(&grant_a());
    mac.update(call_key().as_bytes());
    mac.update(&payload);
    let mut expected = String::from("mcpf-a1.");
    b64::encode_into(&mut expected, &payload, Alphabet::UrlNoPad);
    expected.push('.');
    b64::encode_into(&mut expected, &mac.finalize().into_bytes(), Alphabet::UrlNoPad);
    assert_eq!(sealed, expected);
    assert_eq!(state::open(&keys(), &grant_a(), &call_key(), &sealed, 1_700_000_639), Ok("apr_1".to_owned()));
    assert_eq!(state::open(&keys(), &grant_a(), &call_key(), &sealed, 1_700_000_640), Err(StateError::Expired));
    assert_eq!(state::open(&keys(), &grant_a(), &call_key(), "mcpf-a1.", 0), Err(StateError::Malformed));
    assert_eq!(state::open(&keys(), &grant_a(), &call_key(), "server-state", 0), Err(StateError::Malformed));
}

proptest! {
    #[test]
    fn states_open_only_for_their_grant_call_and_time(
        id in "apr_[0-9A-Za-z]{1,40}",
        expiry in 1u64..4_000_000_000,
        g in prop::array::uniform32(any::<u8>()),
        other in prop::array::uniform32(any::<u8>()),
        flip in any::<prop::sample::Index>(),
        junk in "[ -~]{0,80}",
    ) {
        let k = call_key();
        let s = state::seal(&keys(), &g, &k, &id, expiry);
        prop_assert_eq!(state::open(&keys(), &g, &k, &s, expiry - 1), Ok(id.clone()));
        prop_assert_eq!(state::open(&keys(), &g, &k, &s, expiry), Err(StateError::Expired));
        if other != g {
            prop_assert_eq!(state::open(&keys(), &other, &k, &s, 0), Err(StateError::Seal));
        }
        let other_call = approval::key(&g, "start_vm", None);
        prop_assert_eq!(state::open(&keys(), &g, &other_call, &s, 0), Err(StateError::Seal));
        // Any single changed character is refused (tampered payload or tag, or a broken form).
        let mut bytes = s.clone().into_bytes();
        let i = flip.index(bytes.len());
        bytes[i] = if bytes[i] == b'A' { b'B' } else { b'A' };
        let tampered = String::from_utf8(bytes).unwrap();
        prop_assert!(state::open(&keys(), &g, &k, &tampered, 0).is_err());
        // Forged text, with or without the prefix.
        prop_assert!(state::open(&keys(), &g, &k, &junk, 0).is_err());
        let prefixed = format!("mcpf-a1.{}", junk);
        prop_assert!(state::open(&keys(), &g, &k, &prefixed, 0).is_err());
        // Rotation: the previous key still opens it; a key dropped from the rotation does not.
        let rotated = SessionKeys { current: OLD_KEY.as_bytes().to_vec(), previous: Some(KEY.as_bytes().to_vec()) };
        prop_assert_eq!(state::open(&rotated, &g, &k, &s, 0), Ok(id.clone()));
        let dropped = SessionKeys { current: OLD_KEY.as_bytes().to_vec(), previous: None };
        prop_assert_eq!(state::open(&dropped, &g, &k, &s, 0), Err(StateError::Seal));
        prop_assert_ne!(state::seal(&rotated, &g, &k, &id, expiry), s);
    }
}

// ------------------------------------------------------------------------------------ the rewrite

#[test]
fn the_rewrite_cuts_only_the_members() {
    let cut = |body: &str| {
        rewrite::without_params_members(body.as_bytes(), &rewrite::LEG_MEMBERS)
            .map(|r| (r.replaced_bytes, String::from_utf8(r.body).unwrap()))
    };
    // Each byte of a cut member, and of the one comma that separated it, becomes a space.
    let blank = |n: usize| " ".repeat(n);
    assert_eq!(
        cut(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","inputResponses":{"k":{"action":"accept"}},"requestState":"s","arguments":{"a":1}}}"#
        ),
        Some((
            150,
            format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"t"{},"arguments":{{"a":1}}}}}}"#,
                blank(62)
            )
        ))
    );
    assert_eq!(
        cut(r#"{"params": {"requestState" : "s" , "name":"t" ,"inputResponses":{}} , "id":2}"#).unwrap().1,
        format!(r#"{{"params": {{{}   "name":"t"{}}} , "id":2}}"#, blank(20), blank(21))
    );
    assert_eq!(
        cut(r#"{"id":3,"params":{"name":"t","arguments":{"requestState":"kept"},"requestState":"s"}}"#).unwrap().1,
        format!(r#"{{"id":3,"params":{{"name":"t","arguments":{{"requestState":"kept"}}{}}}}}"#, blank(19))
    );
    assert_eq!(cut(r#"{"id":4,"params":{"name":"t"}}"#), None, "nothing to cut");
    assert_eq!(cut(r#"[{"params":{"requestState":"s"}}]"#), None, "not one object");
    assert_eq!(cut(r#"{"params":{"requestState":"s"}"#), None, "not JSON");
}

// ------------------------------------------------------------------------------------ the offer JSON

#[test]
fn the_offers_are_exact() {
    let link = ApprovalLink { approval_id: "apr_1".into(), approval_url: URL.into(), expires_in_seconds: 600 };
    assert_eq!(
        offer::input_required(&Id::of(&json_of("7")), &link, "costs \"money\"", "mcpf-a1.x.y"),
        r#"{"jsonrpc":"2.0","id":7,"result":{"resultType":"input_required","inputRequests":{"mcp-policy-filter/approval":{"method":"elicitation/create","params":{"mode":"url","url":"http://127.0.0.1:9/approvals/apr_1","elicitationId":"apr_1","message":"costs \"money\""}}},"requestState":"mcpf-a1.x.y"}}"#
    );
    assert_eq!(
        Refusal::UrlElicitationRequired { tool: "start_vm".into(), reason: "costs money".into(), link }
            .to_json(&Id::of(&json_of("\"a\""))),
        r#"{"jsonrpc":"2.0","id":"a","error":{"code":-32042,"message":"tool 'start_vm' requires approval: open http://127.0.0.1:9/approvals/apr_1 to approve it","data":{"kind":"approval_required","tool":"start_vm","reason":"costs money","elicitations":[{"mode":"url","url":"http://127.0.0.1:9/approvals/apr_1","elicitationId":"apr_1","message":"costs money"}]}}}"#
    );
}

// ------------------------------------------------------------------------------------ the flow

/// The offer for the 2026-07-28 call with URL elicitation declared: (reply JSON, requestState).
fn offered(p: &Policy, now: u64) -> (Value, String) {
    let h = head(p, V26, None);
    let held = pending(decide_at(p, &h, &call26(1, &format!(",{CAPS}"), ""), now));
    assert_eq!((held.offer, held.key.clone()), (Offer::InputRequired, call_key()));
    let o = answer_pending(p, held, now);
    assert_eq!((o.decision.kind, o.offer), (DecisionKind::ApprovalRequired, Some(offer::Event::InputRequired)));
    assert_eq!(o.decision.error_kind(), Some("approval_required"));
    let (status, v) = body_of(&o);
    assert_eq!(status, 200);
    let state = v["result"]["requestState"].as_str().unwrap().to_owned();
    (v, state)
}

/// The gateway's members of a retry, as the client appends them to `params`.
fn retry_tail(state: &str, action: &str) -> String {
    format!(r#","inputResponses":{{"mcp-policy-filter/approval":{{"action":"{action}"}}}},"requestState":"{state}""#)
}

fn retry_body(id: u64, state: &str, action: &str) -> String {
    call26(id, &format!(",{CAPS}"), &retry_tail(state, action))
}

#[test]
fn offer_retry_approved_is_forwarded_without_the_gateways_members() {
    let p = policy(true);
    let (v, state) = offered(&p, T0);
    let expected_state = state::seal(&keys(), &grant_a(), &call_key(), "apr_1", T0 / 1000 + 600);
    assert_eq!(state, expected_state);
    assert_eq!(
        v,
        json!({"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{
            "mcp-policy-filter/approval":{"method":"elicitation/create","params":{"mode":"url","url":URL,
            "elicitationId":"apr_1","message":"starting a VM costs money"}}},"requestState":expected_state}})
    );

    // The retry: the same call plus the gateway's answer and state; checked, then held under the same key.
    let body = retry_body(2, &state, "accept");
    let o = decide_at(&p, &head(&p, V26, None), &body, T0 + 5_000);
    // Forwarded: the same bytes with the gateway's members blanked (the length is kept).
    let rewritten = call26(2, &format!(",{CAPS}"), &" ".repeat(retry_tail(&state, "accept").len()));
    assert_eq!(o.rewrite, Some(BodyRewrite { replaced_bytes: body.len(), body: rewritten.into_bytes() }));
    let held = pending(o);
    assert_eq!((held.key.clone(), held.leg.is_continuation(), held.offer), (call_key(), false, Offer::InputRequired));
    let approved = Answer::Approved { approval_id: "apr_1".into(), approver: "alice".into() };
    let o = gate::on_approval_answer(&p, held.clone(), approved, &MemoryStore::default(), T0 + 5_000);
    assert_eq!((o.reply.clone(), o.decision.kind), (None, DecisionKind::Approved));

    // Still pending: a new offer (new state, same approval). Denied: −31008 as always.
    let (status, again) = body_of(&answer_pending(&p, held.clone(), T0 + 5_000));
    assert_eq!((status, again["id"].clone()), (200, json!(2)));
    assert_eq!(again["result"]["inputRequests"]["mcp-policy-filter/approval"]["params"]["elicitationId"], "apr_1");
    assert_eq!(
        again["result"]["requestState"],
        json!(state::seal(&keys(), &grant_a(), &call_key(), "apr_1", T0 / 1000 + 605))
    );
    let denied = Answer::Denied { approval_id: "apr_1".into(), approver: "bob".into(), note: "no".into() };
    let (status, v) = body_of(&gate::on_approval_answer(&p, held, denied, &MemoryStore::default(), T0));
    assert_eq!((status, v["error"]["code"].clone()), (200, json!(-31008)));
}

#[test]
fn a_declined_elicitation_gets_the_fallback_without_asking() {
    // Declined or cancelled: nobody is asked (an approved approval would run the call and be used
    // up), −31007 without a link, so the client's loop stops.
    let p = policy(true);
    let (_, state) = offered(&p, T0);
    let why = "the client declined the gateway's approval request (inputResponses action decline or cancel); nothing was asked or forwarded";
    for action in ["decline", "cancel"] {
        let o = decide_at(&p, &head(&p, V26, None), &retry_body(3, &state, action), T0);
        assert_eq!(
            (o.approval.is_none(), o.decision.kind, o.offer),
            (true, DecisionKind::ApprovalRequired, Some(offer::Event::Declined))
        );
        assert_eq!(
            body_of(&o),
            (
                200,
                json!({"jsonrpc":"2.0","id":3,"error":{"code":-31007,
                    "message":format!("tool 'start_vm' requires approval: {why}"),
                    "data":{"kind":"approval_required","tool":"start_vm","reason":why}}})
            )
        );
    }
}

#[test]
fn invalid_states_are_refused_with_400_and_the_id() {
    let p = policy(true);
    let (_, state) = offered(&p, T0);
    let expired = "params.requestState has expired; call the tool again without it";
    let not_ours = "params.requestState was not issued by this gateway for this grant and this exact call";
    let mut tampered = state.clone();
    tampered.replace_range(10..11, if &state[10..11] == "A" { "B" } else { "A" });
    let other_args = retry_body(4, &state, "accept").replace(r#""vmid":100"#, r#""vmid":101"#);
    let other_state = state::seal(&keys(), &[9; 32], &call_key(), "apr_1", T0 / 1000 + 600);
    let without_state = call26(4, "", r#","inputResponses":{"mcp-policy-filter/approval":{"action":"accept"}}"#);
    let mixed = retry_body(4, &state, "accept").replace(r#"{"mcp-policy-filter"#, r#"{"x":{},"mcp-policy-filter"#);
    let cases: Vec<(String, String, u64, &str)> = vec![
        (retry_body(4, &state, "accept"), "Bearer agent-a".into(), T0 + 600_000, expired),
        (retry_body(4, &tampered, "accept"), "Bearer agent-a".into(), T0, not_ours),
        (other_args, "Bearer agent-a".into(), T0, not_ours),
        (retry_body(4, &other_state, "accept"), "Bearer agent-a".into(), T0, not_ours),
        (retry_body(4, &state, "accept"), "Bearer agent-b".into(), T0, not_ours),
        (
            retry_body(4, "mcpf-a1.forged", "accept"),
            "Bearer agent-a".into(),
            T0,
            "params.requestState is not an approval state issued by this gateway",
        ),
        (
            without_state,
            "Bearer agent-a".into(),
            T0,
            "params.inputResponses answers the gateway's approval request without its requestState",
        ),
        (
            mixed,
            "Bearer agent-a".into(),
            T0,
            "params.inputResponses may hold only the gateway's approval answer with its requestState",
        ),
        (retry_body(4, &state, "Decline"), "Bearer agent-a".into(), T0, offer::NOT_AN_ELICIT_RESULT),
        (
            retry_body(4, &state, "accept").replace(r#"{"action":"accept"}"#, "{}"),
            "Bearer agent-a".into(),
            T0,
            offer::NOT_AN_ELICIT_RESULT,
        ),
    ];
    for (body, auth, now, why) in cases {
        let h = RequestHead::from_headers(
            &p,
            [
                (":method", &b"POST"[..]),
                ("content-type", b"application/json"),
                ("authorization", auth.as_bytes()),
                ("mcp-protocol-version", V26.as_bytes()),
                ("mcp-method", b"tools/call"),
                ("mcp-name", b"start_vm"),
            ],
        );
        let o = decide_at(&p, &h, &body, now);
        assert_eq!(o.approval, None, "{body}");
        assert_eq!((o.decision.kind, o.offer), (DecisionKind::Invalid, Some(offer::Event::StateInvalid)));
        let (status, v) = body_of(&o);
        assert_eq!(
            (status, v),
            (
                400,
                json!({"jsonrpc":"2.0","id":4,"error":{"code":-31011,"message":format!("Invalid params: {why}"),
                    "data":{"kind":"approval_state_invalid","tool":"start_vm","reason":why}}})
            ),
            "{body}"
        );
    }
    // Without gateway.session_key no state is ever valid.
    let o = decide_at(&policy(false), &head(&policy(false), V26, None), &retry_body(4, &state, "accept"), T0);
    assert_eq!(body_of(&o).1["error"]["data"]["reason"], not_ours);
    // A server's own requestState is not the gateway's business.
    let leg = call26(5, &format!(",{CAPS}"), r#","requestState":"server-state""#);
    let held = pending(decide_at(&p, &head(&p, V26, None), &leg, T0));
    assert_eq!((held.offer, held.leg.request_state.as_deref()), (Offer::Fallback, Some("server-state")));
}

#[test]
fn the_fallback_stays_without_key_capability_or_with_a_batch() {
    let fallback = |p: &Policy, h: &RequestHead, body: &str| {
        let held = pending(decide_at(p, h, body, T0));
        assert_eq!(held.offer, Offer::Fallback, "{body}");
        let (status, v) = body_of(&answer_pending(p, held, T0));
        assert_eq!((status, v["error"]["code"].clone()), (200, json!(-31007)), "{body}");
        assert_eq!(v["error"]["data"]["approval_url"], URL);
    };
    let (with, without) = (policy(true), policy(false));
    fallback(&without, &head(&without, V26, None), &call26(1, &format!(",{CAPS}"), ""));
    fallback(&with, &head(&with, V26, None), &call26(1, "", ""));
    let form_only = r#","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}}"#;
    fallback(&with, &head(&with, V26, None), &call26(1, form_only, ""));
    let url_true = r#","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"url":true}}"#;
    fallback(&with, &head(&with, V26, None), &call26(1, url_true, ""));
    // 2025-11-25 on an m1 session (or none): −31007.
    let body =
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"start_vm","arguments":{"vmid":100}}}"#;
    fallback(&with, &head(&with, "2025-11-25", None), body);
    let m1 = session::wrap(&keys(), &grant_a(), b"up-1");
    fallback(&with, &head(&with, "2025-11-25", Some(&m1)), body);
    // A batch (2025-03-26 allows them): approval_required without a link, never an offer.
    let batch = format!("[{body}]");
    let h = head(&with, "2025-03-26", None);
    let o = decide_at(&with, &h, &batch, T0);
    assert_eq!(o.approval, None);
    assert_eq!(serde_json::from_str::<Value>(&o.reply.unwrap().body).unwrap()[0]["error"]["code"], -31007);
}

#[test]
fn an_m2_session_gets_url_elicitation_required() {
    let p = policy(true);
    let m2 = session::wrap_with(&keys(), &grant_a(), b"up-1", true);
    assert!(m2.starts_with("m2.dXAtMQ."), "{m2}");
    assert!(session::declares_url_elicitation(&keys(), &grant_a(), m2.as_bytes()));
    assert!(!session::declares_url_elicitation(&keys(), &[9; 32], m2.as_bytes()));
    // The flag is under the tag: an m1 id relabelled m2 is not a session at all.
    let relabelled = session::wrap(&keys(), &grant_a(), b"up-1").replacen("m1.", "m2.", 1);
    assert_eq!(session::unwrap(&keys(), &grant_a(), relabelled.as_bytes()), None);
    assert_eq!(session::unwrap(&keys(), &grant_a(), m2.as_bytes()).as_deref(), Some(&b"up-1"[..]));
    let body =
        r#"{"jsonrpc":"2.0","id":"c","method":"tools/call","params":{"name":"start_vm","arguments":{"vmid":100}}}"#;
    let held = pending(decide_at(&p, &head(&p, "2025-11-25", Some(&m2)), body, T0));
    assert_eq!(held.offer, Offer::UrlElicitation);
    let o = answer_pending(&p, held, T0);
    assert_eq!(o.decision.kind, DecisionKind::ApprovalRequired);
    assert_eq!(
        o.reply.unwrap().body,
        r#"{"jsonrpc":"2.0","id":"c","error":{"code":-32042,"message":"tool 'start_vm' requires approval: open http://127.0.0.1:9/approvals/apr_1 to approve it","data":{"kind":"approval_required","tool":"start_vm","reason":"starting a VM costs money","elicitations":[{"mode":"url","url":"http://127.0.0.1:9/approvals/apr_1","elicitationId":"apr_1","message":"starting a VM costs money"}]}}}"#
    );
}

#[test]
fn initialize_with_url_elicitation_binds_an_m2_session() {
    let init = |caps: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"2025-11-25","capabilities":{caps},"clientInfo":{{"name":"c","version":"1"}}}}}}"#
        )
    };
    let p = policy(true);
    let h = RequestHead::from_headers(
        &p,
        [(":method", &b"POST"[..]), ("content-type", b"application/json"), ("authorization", b"Bearer agent-a")],
    );
    let decide = |p: &Policy, body: &str| gate::on_body(p, &h, body.as_bytes(), &MemoryStore::default(), T0);
    assert!(decide(&p, &init(r#"{"elicitation":{"url":{}}}"#)).url_elicitation);
    assert!(decide(&p, &init(r#"{"elicitation":{"form":{},"url":{}},"roots":{}}"#)).url_elicitation);
    for caps in [r#"{}"#, r#"{"elicitation":{}}"#, r#"{"elicitation":{"form":{}}}"#, r#"{"elicitation":{"url":1}}"#] {
        assert!(!decide(&p, &init(caps)).url_elicitation, "{caps}");
    }
    assert!(!decide(&policy(false), &init(r#"{"elicitation":{"url":{}}}"#)).url_elicitation, "no session_key");
    // The id handed out is m2, and presenting it keeps the flag for the ids handed back later.
    let sid = gate::session_id_out(&p, Some(&grant_a()), b"up-1", true).unwrap();
    assert_eq!(sid, session::wrap_with(&keys(), &grant_a(), b"up-1", true));
    let again = head(&p, "2025-11-25", Some(&sid));
    assert_eq!(
        gate::check_session(&p, &again),
        gate::SessionCheck::Rewrite { grant: grant_a(), upstream: b"up-1".to_vec(), url_elicitation: true }
    );
}

#[test]
fn a_valid_retry_of_a_tool_allowed_since_is_forwarded_without_the_gateways_members() {
    // The policy changed between the offer and the retry: start_vm is now allowed (with and without
    // a counter). The retry is forwarded at once, still without the gateway's members.
    let (_, state) = offered(&policy(true), T0);
    for rule in [r#"{}"#, r#"{"limits":[{"counter":"vm","window":"minute","max":5,"scope":"grant"}]}"#] {
        let text = format!(
            r#"{{"version":"1","default":"deny","tools":{{"start_vm":{rule}}},
            "gateway":{{"approval":{{"cluster":"mcp_approvals"}},"session_key":{{"current":"{KEY}"}}}}}}"#
        );
        let p = config::load(text.as_bytes()).unwrap();
        let body = retry_body(4, &state, "accept");
        let o = decide_at(&p, &head(&p, V26, None), &body, T0 + 1_000);
        assert_eq!(
            (o.reply.clone(), o.approval.is_none(), o.decision.kind),
            (None, true, DecisionKind::Allowed),
            "{rule}"
        );
        let rewritten = call26(4, &format!(",{CAPS}"), &" ".repeat(retry_tail(&state, "accept").len()));
        assert_eq!(o.rewrite, Some(BodyRewrite { replaced_bytes: body.len(), body: rewritten.into_bytes() }), "{rule}");
    }
}
