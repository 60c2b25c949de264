//! Sessions bound to their grant, natively: the request step (`gate::check_session`), the response
//! step (`gate::session_id_out`) and `gateway.session_key` errors.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use mcp_policy_filter::config;
use mcp_policy_filter::gate::{self, RequestHead, SessionCheck};
use mcp_policy_filter::grant::Grant;
use mcp_policy_filter::policy::Policy;
use serde_json::Value;

fn policy(key: &str) -> Policy {
    let text = format!(r#"{{"version":"1","gateway":{{"session_key":{key}}}}}"#);
    config::load(text.as_bytes()).unwrap()
}

fn head(p: &Policy, method: &str, token: &str, sid: Option<&str>) -> RequestHead {
    let auth = format!("Bearer {token}");
    let mut h: Vec<(&str, &[u8])> = vec![(":method", method.as_bytes()), ("authorization", auth.as_bytes())];
    if let Some(s) = sid {
        h.push(("mcp-session-id", s.as_bytes()));
    }
    RequestHead::from_headers(p, h)
}

fn refused(c: SessionCheck) -> (u16, i64) {
    let SessionCheck::Refuse(o) = c else { panic!("expected a refusal, got {c:?}") };
    let r = o.reply.unwrap();
    let v: Value = serde_json::from_str(&r.body).unwrap();
    (r.status, v["error"]["code"].as_i64().unwrap())
}

#[test]
fn sessions_are_bound_to_the_grant_that_created_them() {
    let p = policy(r#"{"current":"0123456789abcdef0123456789abcdef"}"#);
    let a = Grant::from_credential(b"agent-a").id;
    let sid = gate::session_id_out(&p, Some(&a), b"upstream-1", false).unwrap();
    assert_eq!(gate::session_id_out(&p, None, b"upstream-1", false), None);
    for method in ["POST", "GET", "DELETE"] {
        assert_eq!(
            gate::check_session(&p, &head(&p, method, "agent-a", Some(&sid))),
            SessionCheck::Rewrite { grant: a, upstream: b"upstream-1".to_vec(), url_elicitation: false }
        );
        assert_eq!(refused(gate::check_session(&p, &head(&p, method, "agent-b", Some(&sid)))), (404, -31010));
        assert_eq!(refused(gate::check_session(&p, &head(&p, method, "agent-a", Some("upstream-1")))), (404, -31010));
    }
    assert_eq!(gate::check_session(&p, &head(&p, "POST", "agent-a", None)), SessionCheck::NoSession { grant: Some(a) });
    let unbound = config::load(br#"{"version":"1"}"#).unwrap();
    assert_eq!(gate::check_session(&unbound, &head(&unbound, "POST", "agent-b", Some(&sid))), SessionCheck::Unbound);
}

#[test]
fn rotation_keeps_old_ids_valid_until_previous_is_removed() {
    let old = policy(r#"{"current":"0123456789abcdef0123456789abcdef"}"#);
    let rotated =
        policy(r#"{"current":"fedcba9876543210fedcba9876543210","previous":"0123456789abcdef0123456789abcdef"}"#);
    let done = policy(r#"{"current":"fedcba9876543210fedcba9876543210"}"#);
    let a = Grant::from_credential(b"agent-a").id;
    let sid = gate::session_id_out(&old, Some(&a), b"s", false).unwrap();
    assert!(matches!(
        gate::check_session(&rotated, &head(&rotated, "POST", "agent-a", Some(&sid))),
        SessionCheck::Rewrite { .. }
    ));
    assert_eq!(refused(gate::check_session(&done, &head(&done, "POST", "agent-a", Some(&sid)))), (404, -31010));
}

#[test]
fn session_key_errors_name_their_path() {
    for (key, path) in [
        (r#"{"current":"short"}"#, "gateway.session_key.current"),
        (r#"{"current":"0123456789abcdef0123456789abcdef","previous":"x"}"#, "gateway.session_key.previous"),
        (
            r#"{"current":"0123456789abcdef0123456789abcdef","previous":"0123456789abcdef0123456789abcdef"}"#,
            "gateway.session_key.previous",
        ),
        (r#"{"current":"0123456789abcdef0123456789abcdef","next":"x"}"#, "gateway.session_key"),
    ] {
        let text = format!(r#"{{"version":"1","gateway":{{"session_key":{key}}}}}"#);
        let e = config::load(text.as_bytes()).unwrap_err().to_string();
        assert!(e.contains(path), "{key}: {e}");
    }
}

#[test]
fn keys_can_come_from_the_vm_environment() {
    let text = br#"{"version":"1","gateway":{"session_key":{"current_env":"MCPF_KEY","previous_env":"MCPF_OLD"}}}"#;
    let env = |name: &str| match name {
        "MCPF_KEY" => Some("fedcba9876543210fedcba9876543210".to_owned()),
        "MCPF_OLD" => Some("0123456789abcdef0123456789abcdef".to_owned()),
        _ => None,
    };
    let p = config::load_with_env(text, &env).unwrap();
    let inline = policy(r#"{"current":"fedcba9876543210fedcba9876543210"}"#);
    let a = Grant::from_credential(b"agent-a").id;
    assert_eq!(gate::session_id_out(&p, Some(&a), b"s", false), gate::session_id_out(&inline, Some(&a), b"s", false));
    let e = config::load(text).unwrap_err().to_string();
    assert!(e.contains("gateway.session_key.current_env: environment variable MCPF_KEY is not set"), "{e}");
    let both = br#"{"version":"1","gateway":{"session_key":{"current":"fedcba9876543210fedcba9876543210","current_env":"MCPF_KEY"}}}"#;
    assert!(config::load_with_env(both, &env).unwrap_err().to_string().contains("not both"));
    let none = br#"{"version":"1","gateway":{"session_key":{}}}"#;
    assert!(config::load(none).unwrap_err().to_string().contains("gateway.session_key.current: required"));
}
