//! An approval under a policy set: the caller (policy, subject, client, actor chain) read from the
//! verified token is bound by the key and sent to the approval service.

use mcp_policy_core::approval;
use mcp_policy_core::config;
use mcp_policy_core::identity::grant::{hex, Grant};
use mcp_policy_core::identity::payload::Provenance;
use mcp_policy_core::limits::MemoryStore;
use mcp_policy_core::pipeline::{self, HeadOutcome, RequestHead};
use serde_json::{json, Value};

use super::{b64url, T0};

const SET: &str = r#"{"version": "1",
  "policies": {"ops": {"version": "1", "default": "deny", "tools": {"start_vm": {"action": "require_approval"}}},
               "lab": {"version": "1", "default": "deny", "tools": {"start_vm": {"action": "require_approval"}}}},
  "attach": [{"policy": "ops", "when": [{"claim": "groups", "includes": "ops"}]},
             {"policy": "lab", "when": [{"claim": "groups", "includes": "lab"}]}],
  "gateway": {"identity": {"payload_header": "x-jwt-payload", "grant_claim": "sub"},
              "approval": {"cluster": "mcp_approvals"}}}"#;

/// The check body and key of `start_vm {"vmid":100}` by the caller with `claims`.
fn asked(claims: &str) -> (Value, String) {
    let set = config::load_set(SET.as_bytes()).unwrap();
    let v = b64url(claims);
    let headers: Vec<(&str, &[u8])> = vec![
        (":method", b"POST"),
        ("content-type", b"application/json"),
        (":authority", b"gw:10000"),
        (":path", b"/mcp"),
        ("x-jwt-payload", v.as_bytes()),
    ];
    let mut h = RequestHead::from_headers(set.base(), headers);
    h.cluster = Some("mcp_upstream".into());
    let a = pipeline::attach(&set, &h).unwrap();
    assert_eq!(pipeline::on_headers(&a.policy, &h), HeadOutcome::NeedBody);
    let body =
        br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"start_vm","arguments":{"vmid":100}}}"#;
    let out = pipeline::on_body(&a.policy, &h, body, &MemoryStore::default(), T0);
    let held = out.approval.expect("held for approval");
    let sent: Value = serde_json::from_str(&held.check_body("rid-1", 0)).unwrap();
    (sent, held.key)
}

#[test]
fn the_caller_is_sent_and_bound_by_the_key() {
    let (sent, key) = asked(
        r#"{"sub":"alice","groups":["ops"],"client_id":"ops-console","act":{"sub":"agent-ci","act":{"sub":"orchestrator"}}}"#,
    );
    let caller = Provenance {
        policy: Some("ops".into()),
        subject: Some("alice".into()),
        client_id: Some("ops-console".into()),
        act: vec!["agent-ci".into(), "orchestrator".into()],
    };
    let grant = Grant::from_credential(b"alice").id;
    let upstream =
        approval::Upstream { cluster: "mcp_upstream".into(), authority: "gw:10000".into(), path: "/mcp".into() };
    let args = mcp_policy_core::wire::json::parse(br#"{"vmid":100}"#).unwrap();
    let want = approval::key_for(Some(&caller), &grant, &upstream, "start_vm", Some(&args), None, None);
    assert_eq!(key, want);
    assert_eq!(sent["key"], json!(want));
    // The raw grant id: the service recomputes the key from it and the caller.
    assert_eq!(sent["grant_id"], json!(hex(&grant)));
    assert_eq!(
        (&sent["policy"], &sent["subject"], &sent["client_id"], &sent["act"]),
        (&json!("ops"), &json!("alice"), &json!("ops-console"), &json!(["agent-ci", "orchestrator"]))
    );
}

#[test]
fn another_actor_client_or_policy_is_another_key() {
    let base = asked(r#"{"sub":"alice","groups":["ops"],"act":{"sub":"agent-ci"}}"#).1;
    for other in [
        r#"{"sub":"alice","groups":["ops"],"act":{"sub":"agent-evil"}}"#,
        r#"{"sub":"alice","groups":["ops"]}"#,
        r#"{"sub":"alice","groups":["ops"],"act":{"sub":"agent-ci"},"client_id":"x"}"#,
        r#"{"sub":"alice","groups":["lab"],"act":{"sub":"agent-ci"}}"#,
    ] {
        assert_ne!(asked(other).1, base, "{other}");
    }
    // Claims that are no part of the caller do not change it.
    assert_eq!(asked(r#"{"sub":"alice","groups":["ops","x"],"act":{"sub":"agent-ci"},"jti":"1"}"#).1, base);
    // A caller without a client sends null.
    let (sent, _) = asked(r#"{"sub":"alice","groups":["ops"]}"#);
    assert_eq!((&sent["client_id"], &sent["act"]), (&Value::Null, &json!([])));
}

#[test]
fn an_m2_session_of_a_caller_gets_the_url_elicitation_offer() {
    // Session ids are sealed for the caller under a set: the `m2.` id a caller's client got for
    // declaring URL elicitation opens for that caller, and a call held for approval is offered −32042.
    let text = SET
        .replace(r#""gateway": {"#, r#""gateway": {"session_key": {"current": "0123456789abcdef0123456789abcdef"}, "#);
    let set = config::load_set(text.as_bytes()).unwrap();
    let v = b64url(r#"{"sub":"alice","groups":["ops"],"client_id":"ops-console"}"#);
    let head_with = |sid: Option<&str>| {
        let mut headers: Vec<(&str, &[u8])> = vec![
            (":method", b"POST"),
            ("content-type", b"application/json"),
            (":authority", b"gw:10000"),
            (":path", b"/mcp"),
            ("mcp-protocol-version", b"2025-11-25"),
            ("x-jwt-payload", v.as_bytes()),
        ];
        if let Some(sid) = sid {
            headers.push(("mcp-session-id", sid.as_bytes()));
        }
        let mut h = RequestHead::from_headers(set.base(), headers);
        h.cluster = Some("mcp_upstream".into());
        h
    };
    let first = head_with(None);
    let plan = pipeline::request_headers(Some(&set), config::Shared::clone(set.base()), &first, false);
    let sid = pipeline::session_id_out(&plan.policy, plan.binding.unwrap().grant.as_ref(), b"up-1", true).unwrap();
    let h = head_with(Some(&sid));
    let plan = pipeline::request_headers(Some(&set), config::Shared::clone(set.base()), &h, false);
    assert_eq!(plan.next, HeadOutcome::NeedBody);
    let body =
        br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"start_vm","arguments":{"vmid":100}}}"#;
    let out = pipeline::on_body(&plan.policy, &h, body, &MemoryStore::default(), T0);
    assert_eq!(out.approval.expect("held for approval").offer, mcp_policy_core::approval::offer::Offer::UrlElicitation);
}
