//! The verified payload header read strictly: anything but one canonical base64url encoding of a
//! strict JSON object with the grant claim is no identity: 401, never a policy.

use super::*;

fn refused(values: &[&[u8]]) -> String {
    let s = set();
    let mut extra: Vec<(&str, &[u8])> = Vec::new();
    for v in values {
        extra.push(("x-jwt-payload", v));
    }
    let h = head(&s, &extra);
    let out = pipeline::attach(&s, &h).unwrap_err();
    let reply = out.reply.unwrap();
    assert_eq!((reply.status, out.decision.error_kind()), (401, Some("no_grant")));
    out.decision.reason.unwrap()
}

#[test]
fn payload_edge_cases_never_match() {
    let ok = b64url(r#"{"sub":"alice","groups":["ops"]}"#);
    assert_eq!(refused(&[]), payload::PAYLOAD_MISSING);
    assert_eq!(refused(&[ok.as_bytes(), ok.as_bytes()]), payload::PAYLOAD_REPEATED);
    assert_eq!(refused(&[b"not base64!"]), payload::PAYLOAD_NOT_BASE64URL);
    // Padding, and the standard alphabet's '+' and '/', are not jwt_authn's encoding.
    let padded = format!("{}=", b64url(r#"{"sub":"al"}"#));
    assert_eq!(refused(&[padded.as_bytes()]), payload::PAYLOAD_NOT_BASE64URL);
    assert_eq!(refused(&[b"eyJzdWIiOiJhIn0+"]), payload::PAYLOAD_NOT_BASE64URL);
    assert_eq!(refused(&[b64url(r#"{"sub":"a""#).as_bytes()]), payload::PAYLOAD_NOT_JSON);
    assert_eq!(refused(&[b64url(r#"{"sub":"a","sub":"b"}"#).as_bytes()]), payload::PAYLOAD_NOT_JSON);
    assert_eq!(refused(&[b64url(r#"["sub","a"]"#).as_bytes()]), payload::PAYLOAD_NOT_JSON);
    assert_eq!(refused(&[b64url(r#""alice""#).as_bytes()]), payload::PAYLOAD_NOT_JSON);
    assert_eq!(refused(&[b64url(r#"{"groups":["ops"]}"#).as_bytes()]), payload::GRANT_CLAIM_MISSING);
    assert_eq!(refused(&[b64url(r#"{"sub":""}"#).as_bytes()]), payload::GRANT_CLAIM_MISSING);
    assert_eq!(refused(&[b64url(r#"{"sub":7}"#).as_bytes()]), payload::GRANT_CLAIM_MISSING);
    assert_eq!(refused(&[b""]), payload::PAYLOAD_NOT_JSON);
}

#[test]
fn the_grant_is_the_claim_never_a_header() {
    let s = set();
    let v = b64url(r#"{"sub":"alice","groups":["ops"]}"#);
    // A bearer token beside the payload changes nothing: the grant is the sub claim's hash.
    let h = head(&s, &[("x-jwt-payload", v.as_bytes()), ("authorization", b"Bearer other")]);
    let a = pipeline::attach(&s, &h).unwrap();
    assert_eq!(a.policy.name.as_deref(), Some("ops"));
    let body = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"list_vms"}}"#;
    let out = pipeline::on_body(&a.policy, &h, body, &MemoryStore::default(), T0);
    let alice = mcp_policy_core::identity::grant::Grant::from_credential(b"alice").label();
    assert_eq!(out.decision.grant, Some(alice));
}
