//! MCP 2026-07-28 continuation legs and require approval: the strict parse of `inputResponses` /
//! `requestState`, the binding key that covers them, and the check body that carries them.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use mcp_policy_core::approval;
use mcp_policy_core::config;
use mcp_policy_core::identity::grant;
use mcp_policy_core::identity::grant::hex;
use mcp_policy_core::limits::MemoryStore;
use mcp_policy_core::pipeline::{self, HeadOutcome, Outcome, RequestHead};
use mcp_policy_core::policy::Policy;
use mcp_policy_core::wire::json;
use mcp_policy_core::wire::leg::Leg;
use mcp_policy_core::wire::mcp::{self, Call, Message};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

const T0: u64 = 1_700_000_040_000;

fn policy() -> Policy {
    let text = r#"{"version":"1","default":"deny","tools":{"delete_vm":{"action":"require_approval"}},
        "gateway":{"approval":{"cluster":"mcp_approvals"}}}"#;
    config::load(text.as_bytes()).unwrap()
}

/// The MCP server every call here goes to.
fn upstream() -> approval::Upstream {
    approval::Upstream { cluster: "mcp_upstream".into(), authority: "gw:10000".into(), path: "/mcp".into() }
}

fn decide(p: &Policy, body: &str) -> Outcome {
    let mut head = RequestHead::from_headers(
        p,
        [
            (":method", &b"POST"[..]),
            (":authority", b"gw:10000"),
            (":path", b"/mcp"),
            ("content-type", b"application/json"),
            ("authorization", b"Bearer agent-a"),
        ],
    );
    head.cluster = Some("mcp_upstream".into());
    assert_eq!(pipeline::on_headers(p, &head), HeadOutcome::NeedBody);
    pipeline::on_body(p, &head, body.as_bytes(), &MemoryStore::default(), T0)
}

fn call(params_tail: &str) -> String {
    format!(
        r#"{{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{{"name":"delete_vm","arguments":{{"vmid":100}}{params_tail}}}}}"#
    )
}

fn single(body: &str) -> Result<Message, mcp::ProtocolError> {
    match mcp::read_body(body.as_bytes())? {
        mcp::Body::Single(m) => Ok(m),
        mcp::Body::Batch(_) => panic!("batch"),
    }
}

fn leg_of(body: &str) -> Leg {
    match single(body).unwrap() {
        Message::Request { call: Call::Tool(t), .. } => t.leg,
        other => panic!("{other:?}"),
    }
}

/// [`upstream`] as the key hashes it.
const UPSTREAM: &str = r#"{"authority":"gw:10000","cluster":"mcp_upstream","path":"/mcp"}"#;

const ANSWERS: &str = r#"{"confirm":{"action":"accept","content":{"name":"web-01"}}}"#;

#[test]
fn the_strict_parse_keeps_both_members_as_sent() {
    assert_eq!(leg_of(&call("")), Leg::default());
    assert!(!leg_of(&call("")).is_continuation());
    let leg = leg_of(&call(&format!(r#","inputResponses": {ANSWERS} ,"requestState":"s\u0031""#)));
    assert_eq!(leg.input_responses.as_deref(), Some(ANSWERS));
    assert_eq!(leg.request_state.as_deref(), Some("s1"));
    assert!(leg.is_continuation());
    assert!(leg_of(&call(r#","requestState":"""#)).is_continuation());
}

#[test]
fn wrong_types_and_look_alike_names_are_refused() {
    for (tail, want) in [
        (r#","inputResponses":[]"#, "\"params.inputResponses\" must be an object"),
        (r#","inputResponses":"yes""#, "\"params.inputResponses\" must be an object"),
        (r#","requestState":{}"#, "\"params.requestState\" must be a string"),
        (r#","requestState":null"#, "\"params.requestState\" must be a string"),
    ] {
        let e = single(&call(tail)).unwrap_err();
        assert_eq!(
            (e.kind, e.detail.as_str(), e.id.raw()),
            (mcp::ProtocolErrorKind::InvalidParams, want, "9"),
            "{tail}"
        );
    }
    // Duplicates and case-insensitive look-alikes (a Go server's decoder) never slip past the key.
    for tail in [
        r#","requestState":"a","requestState":"b""#,
        r#","inputResponses":{"a":1,"a":2}"#,
        r#","InputResponses":{"a":1}"#,
        r#","requeststate":"x""#,
    ] {
        assert!(single(&call(tail)).is_err(), "{tail}");
    }
}

#[test]
fn the_key_is_sha256_of_the_documented_text() {
    let g = [0xabu8; 32];
    let args = json::parse(br#"{"vmid":100}"#).unwrap();
    let answers = json::parse(br#"{"z":1,"a":"\u00e9"}"#).unwrap();
    let up = upstream();
    let text = format!(
        r#"{{"arguments":{{"vmid":100}},"grant":"{}","inputResponses":{{"a":"é","z":1}},"requestState":"st\"1","tool":"delete_vm","upstream":{UPSTREAM}}}"#,
        "ab".repeat(32)
    );
    assert_eq!(
        approval::key_with(&g, &up, "delete_vm", Some(&args), Some(&answers), Some("st\"1")),
        hex(&Sha256::digest(text.as_bytes()))
    );
    // A first leg keeps the key of an ordinary call.
    assert_eq!(
        approval::key_with(&g, &up, "delete_vm", Some(&args), None, None),
        approval::key(&g, &up, "delete_vm", Some(&args))
    );
    let only_state = format!(
        r#"{{"arguments":{{"vmid":100}},"grant":"{}","requestState":"s","tool":"delete_vm","upstream":{UPSTREAM}}}"#,
        "ab".repeat(32)
    );
    assert_eq!(
        approval::key_with(&g, &up, "delete_vm", Some(&args), None, Some("s")),
        hex(&Sha256::digest(only_state.as_bytes()))
    );
}

#[test]
fn each_leg_and_each_set_of_answers_has_its_own_key() {
    let key = |tail: &str| gate_key(&call(tail));
    let first = key("");
    let leg2 = key(&format!(r#","inputResponses":{ANSWERS},"requestState":"s1""#));
    let same =
        key(r#","requestState":"s1","inputResponses":{ "confirm" : {"content":{"name":"web-01"},"action":"accept"} }"#);
    assert_eq!(leg2, same, "the same answers written differently");
    let others = [
        first.clone(),
        key(&format!(r#","inputResponses":{ANSWERS}"#)),
        key(r#","requestState":"s1""#),
        key(&format!(r#","inputResponses":{ANSWERS},"requestState":"s2""#)),
        key(r#","inputResponses":{"confirm":{"action":"accept","content":{"name":"web-02"}}},"requestState":"s1""#),
        key(r#","inputResponses":{"confirm":{"action":"decline"}},"requestState":"s1""#),
        key(r#","inputResponses":{},"requestState":"s1""#),
    ];
    for (i, k) in others.iter().enumerate() {
        assert_ne!(k, &leg2, "case {i}");
    }
    assert_eq!(
        first,
        approval::key(&grant_id(), &upstream(), "delete_vm", Some(&json::parse(br#"{"vmid":100}"#).unwrap()))
    );
}

fn grant_id() -> [u8; 32] {
    grant::from_authorization(b"Bearer agent-a").unwrap().id
}

fn gate_key(body: &str) -> String {
    decide(&policy(), body).approval.expect("held for approval").key
}

#[test]
fn the_check_body_carries_the_answers_as_sent() {
    let p = policy();
    let pending = *decide(&p, &call(&format!(r#","inputResponses":{ANSWERS},"requestState":"s1""#))).approval.unwrap();
    let text = pending.check_body("r1", 0);
    assert!(text.ends_with(&format!(r#","input_responses":{ANSWERS},"request_state":"s1"}}"#)), "{text}");
    let body: Value = serde_json::from_str(&text).unwrap();
    let answers = json::parse(ANSWERS.as_bytes()).unwrap();
    let args = json::parse(br#"{"vmid":100}"#).unwrap();
    assert_eq!(
        body["key"],
        json!(approval::key_with(&grant_id(), &upstream(), "delete_vm", Some(&args), Some(&answers), Some("s1")))
    );
    assert_eq!(body["input_responses"], json!({"confirm":{"action":"accept","content":{"name":"web-01"}}}));
    // A first leg sends neither member.
    let first = *decide(&p, &call("")).approval.unwrap();
    let body: Value = serde_json::from_str(&first.check_body("r1", 0)).unwrap();
    assert_eq!((body.get("input_responses"), body.get("request_state")), (None, None));
}
