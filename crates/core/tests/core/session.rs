//! Sessions bound to their grant, natively: the request step (`pipeline::check_session`: the
//! `Mcp-Session-Id`, the `Last-Event-ID`, the HTTP+SSE session in the query), the response step
//! (`pipeline::session_id_out`, `pipeline::stream_ids`) and `gateway.session_key` errors.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use mcp_policy_core::config;
use mcp_policy_core::identity::grant::Grant;
use mcp_policy_core::pipeline::{self, Binding, RequestHead, SessionCheck};
use mcp_policy_core::policy::Policy;
use serde_json::Value;

fn policy(key: &str) -> Policy {
    let text = format!(r#"{{"version":"1","gateway":{{"session_key":{key}}}}}"#);
    config::load(text.as_bytes()).unwrap()
}

fn head(p: &Policy, method: &str, token: &str, sid: Option<&str>) -> RequestHead {
    head_with(p, method, token, sid, &[])
}

fn head_with(p: &Policy, method: &str, token: &str, sid: Option<&str>, extra: &[(&str, &str)]) -> RequestHead {
    let auth = format!("Bearer {token}");
    let mut h: Vec<(&str, &[u8])> = vec![(":method", method.as_bytes())];
    if !token.is_empty() {
        h.push(("authorization", auth.as_bytes()));
    }
    if let Some(s) = sid {
        h.push(("mcp-session-id", s.as_bytes()));
    }
    h.extend(extra.iter().map(|(k, v)| (*k, v.as_bytes())));
    RequestHead::from_headers(p, h)
}

fn refused(c: SessionCheck) -> (u16, i64) {
    refusal(c).0
}

/// The status, code and `data.reason` of a refusal.
fn refusal(c: SessionCheck) -> ((u16, i64), String) {
    let SessionCheck::Refuse(o) = c else { panic!("expected a refusal, got {c:?}") };
    let r = o.reply.unwrap();
    let v: Value = serde_json::from_str(&r.body).unwrap();
    ((r.status, v["error"]["code"].as_i64().unwrap()), v["error"]["data"]["reason"].as_str().unwrap().to_owned())
}

fn bound(c: SessionCheck) -> Binding {
    let SessionCheck::Bound(b) = c else { panic!("expected ids of this grant, got {c:?}") };
    b
}

#[test]
fn sessions_are_bound_to_the_grant_that_created_them() {
    let p = policy(r#"{"current":"0123456789abcdef0123456789abcdef"}"#);
    let a = Grant::from_credential(b"agent-a").id;
    let sid = pipeline::session_id_out(&p, Some(&a), b"upstream-1", false).unwrap();
    assert_eq!(pipeline::session_id_out(&p, None, b"upstream-1", false), None);
    for method in ["POST", "GET", "DELETE"] {
        assert_eq!(
            pipeline::check_session(&p, &head(&p, method, "agent-a", Some(&sid))),
            SessionCheck::Bound(Binding {
                grant: Some(a),
                session: Some(b"upstream-1".to_vec()),
                ..Binding::default()
            })
        );
        assert_eq!(refused(pipeline::check_session(&p, &head(&p, method, "agent-b", Some(&sid)))), (404, -31010));
        assert_eq!(
            refused(pipeline::check_session(&p, &head(&p, method, "agent-a", Some("upstream-1")))),
            (404, -31010)
        );
    }
    assert_eq!(
        pipeline::check_session(&p, &head(&p, "POST", "agent-a", None)),
        SessionCheck::Bound(Binding { grant: Some(a), ..Binding::default() })
    );
    let unbound = config::load(br#"{"version":"1"}"#).unwrap();
    assert_eq!(
        pipeline::check_session(&unbound, &head(&unbound, "POST", "agent-b", Some(&sid))),
        SessionCheck::Unbound
    );
}

#[test]
fn rotation_keeps_old_ids_valid_until_previous_is_removed() {
    let old = policy(r#"{"current":"0123456789abcdef0123456789abcdef"}"#);
    let rotated =
        policy(r#"{"current":"fedcba9876543210fedcba9876543210","previous":"0123456789abcdef0123456789abcdef"}"#);
    let done = policy(r#"{"current":"fedcba9876543210fedcba9876543210"}"#);
    let a = Grant::from_credential(b"agent-a").id;
    let sid = pipeline::session_id_out(&old, Some(&a), b"s", false).unwrap();
    assert_eq!(
        bound(pipeline::check_session(&rotated, &head(&rotated, "POST", "agent-a", Some(&sid)))).session.unwrap(),
        b"s"
    );
    assert_eq!(refused(pipeline::check_session(&done, &head(&done, "POST", "agent-a", Some(&sid)))), (404, -31010));
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
    assert_eq!(
        pipeline::session_id_out(&p, Some(&a), b"s", false),
        pipeline::session_id_out(&inline, Some(&a), b"s", false)
    );
    let e = config::load(text).unwrap_err().to_string();
    assert!(
        e.contains(
            "gateway.session_key.current_env: environment variable MCPF_KEY is not set (the wasm build reads the \
             VM's: vm_config.environment_variables; the native build Envoy's own)"
        ),
        "{e}"
    );
    // A short key from the environment is reported where the policy names its variable.
    let short = |name: &str| (name == "MCPF_KEY" || name == "MCPF_OLD").then(|| "short".to_owned());
    let e = config::load_with_env(text, &short).unwrap_err().to_string();
    for path in ["gateway.session_key.current_env", "gateway.session_key.previous_env"] {
        assert!(e.contains(&format!("{path}: the key must be at least 32 bytes")), "{e}");
    }
    let both = br#"{"version":"1","gateway":{"session_key":{"current":"fedcba9876543210fedcba9876543210","current_env":"MCPF_KEY"}}}"#;
    assert!(config::load_with_env(both, &env).unwrap_err().to_string().contains("not both"));
    let none = br#"{"version":"1","gateway":{"session_key":{}}}"#;
    assert!(config::load(none).unwrap_err().to_string().contains("gateway.session_key.current: required"));
}

const KEY: &str = r#"{"current":"0123456789abcdef0123456789abcdef"}"#;

/// The event id handed to `token` for the server's event `event` on a stream of its session
/// `upstream` (the sealing a response applies: `pipeline::stream_ids`).
fn event_id_out(p: &Policy, token: &str, upstream: &[u8], event: &str) -> String {
    let grant = Grant::from_credential(token.as_bytes()).id;
    let ids = pipeline::stream_ids(p, Some(&grant), Some(upstream)).unwrap();
    let mut out = Vec::new();
    ids.seal_events(&mut out, format!("id: {event}\n\n").as_bytes(), false);
    let text = String::from_utf8(out).unwrap();
    text.strip_prefix("id: ").unwrap().trim_end().to_owned()
}

#[test]
fn last_event_ids_resume_only_their_own_grant_and_session() {
    let p = policy(KEY);
    let a = Grant::from_credential(b"agent-a").id;
    let sid_a = pipeline::session_id_out(&p, Some(&a), b"up-a", false).unwrap();
    let sid_b = pipeline::session_id_out(&p, Some(&Grant::from_credential(b"agent-b").id), b"up-b", false).unwrap();
    let sid_a2 = pipeline::session_id_out(&p, Some(&a), b"up-a2", false).unwrap();
    let ev = event_id_out(&p, "agent-a", b"up-a", "ev-1");
    assert!(ev.starts_with("e1."), "{ev}");
    let get = |token: &str, sid: Option<&str>, last: &str| {
        pipeline::check_session(&p, &head_with(&p, "GET", token, sid, &[("last-event-id", last)]))
    };
    // The owner resumes: the server gets its own session and event ids.
    let b = bound(get("agent-a", Some(&sid_a), &ev));
    assert_eq!((b.session.as_deref(), b.last_event_id.as_deref()), (Some(&b"up-a"[..]), Some(&b"ev-1"[..])));
    // Another grant with its own valid session, the same grant in another session or without one,
    // no grant, the server's bare id, a tampered id: 404, nothing forwarded.
    let mut tampered = ev.clone();
    tampered.replace_range(3..4, if &ev[3..4] == "A" { "B" } else { "A" });
    for (token, sid, last) in [
        ("agent-b", Some(sid_b.as_str()), ev.as_str()),
        ("agent-a", Some(sid_a2.as_str()), ev.as_str()),
        ("agent-a", None, ev.as_str()),
        ("", None, ev.as_str()),
        ("agent-a", Some(sid_a.as_str()), "ev-1"),
        ("agent-a", Some(sid_a.as_str()), tampered.as_str()),
        ("agent-a", Some(sid_a.as_str()), sid_a.as_str()),
    ] {
        let (answer, reason) = refusal(get(token, sid, last));
        assert_eq!(answer, (404, -31010), "{token} {sid:?} {last}");
        assert!(reason.starts_with("this Last-Event-ID was not issued"), "{reason}");
    }
    // A repeated header is refused; an empty one names no event and passes as it is.
    let twice = head_with(&p, "GET", "agent-a", Some(&sid_a), &[("last-event-id", &ev), ("last-event-id", &ev)]);
    assert_eq!(refused(pipeline::check_session(&p, &twice)), (404, -31010));
    assert_eq!(bound(get("agent-a", Some(&sid_a), "")).last_event_id, None);
    // Without a session: bound to the grant alone (stateless servers).
    let bare = event_id_out(&p, "agent-a", b"", "7");
    assert_eq!(bound(get("agent-a", None, &bare)).last_event_id.as_deref(), Some(&b"7"[..]));
    assert_eq!(refused(get("agent-b", None, &bare)), (404, -31010));
    // Without gateway.session_key the header passes as sent, not even read.
    let unbound = config::load(br#"{"version":"1"}"#).unwrap();
    let h = head_with(&unbound, "GET", "agent-b", None, &[("last-event-id", "ev-1")]);
    assert_eq!(pipeline::check_session(&unbound, &h), SessionCheck::Unbound);
    assert_eq!(pipeline::stream_ids(&unbound, Some(&a), None), None);
    assert_eq!(pipeline::stream_ids(&p, None, None), None, "no grant: nothing to bind to");
}

/// The URL a legacy `endpoint` event hands to `token` for the server's session `upstream`.
fn endpoint_out(p: &Policy, token: &str, upstream: &str) -> String {
    let grant = Grant::from_credential(token.as_bytes()).id;
    let ids = pipeline::stream_ids(p, Some(&grant), None).unwrap();
    let mut out = Vec::new();
    let event = format!("event: endpoint\r\ndata: /messages/?session_id={upstream}\r\n\r\n");
    ids.seal_events(&mut out, event.as_bytes(), true);
    let text = String::from_utf8(out).unwrap();
    text.split("data: ").nth(1).unwrap().trim_end().to_owned()
}

#[test]
fn legacy_session_ids_in_the_query_are_bound_to_their_grant() {
    let p = policy(KEY);
    let url = endpoint_out(&p, "agent-a", "0a1b2c");
    assert!(url.starts_with("/messages/?session_id=l1."), "{url}");
    let post =
        |token: &str, path: &str| pipeline::check_session(&p, &head_with(&p, "POST", token, None, &[(":path", path)]));
    assert_eq!(bound(post("agent-a", &url)).path.as_deref(), Some(&b"/messages/?session_id=0a1b2c"[..]));
    // The TypeScript SDK's name, another parameter beside it, a percent-encoded name.
    let sealed = url.split('=').nth(1).unwrap();
    let path = format!("/m?x=1&session%5Fid={sealed}&y=%20");
    assert_eq!(bound(post("agent-a", &path)).path.as_deref(), Some(&b"/m?x=1&session%5Fid=0a1b2c&y=%20"[..]));
    assert_eq!(bound(post("agent-a", &format!("/m?sessionId={sealed}"))).path.unwrap(), b"/m?sessionId=0a1b2c");
    // Another grant, no grant, the server's bare id, a forged id, two session parameters: 404.
    for (token, path) in [
        ("agent-b", url.clone()),
        ("", url.clone()),
        ("agent-a", "/messages/?session_id=0a1b2c".into()),
        ("agent-a", format!("/messages/?session_id={}x", sealed)),
        ("agent-a", format!("/messages/?session_id={sealed}&sessionId={sealed}")),
        ("agent-a", format!("/messages/?session_id={sealed}&session_id=0a1b2c")),
    ] {
        let (answer, reason) = refusal(post(token, &path));
        assert_eq!(answer, (404, -31010), "{token} {path}");
        assert!(reason.starts_with("this session id (query parameter) was not issued"), "{reason}");
    }
    // A request naming no session is not touched; GET and DELETE are checked too.
    assert_eq!(bound(post("agent-a", "/mcp?x=1")).path, None);
    assert_eq!(bound(post("agent-a", "/mcp")).path, None);
    for method in ["GET", "DELETE"] {
        let h = head_with(&p, method, "agent-b", None, &[(":path", &url)]);
        assert_eq!(refused(pipeline::check_session(&p, &h)), (404, -31010));
    }
    // Without gateway.session_key the query passes as sent.
    let unbound = config::load(br#"{"version":"1"}"#).unwrap();
    let h = head_with(&unbound, "POST", "agent-b", None, &[(":path", "/messages/?session_id=0a1b2c")]);
    assert_eq!(pipeline::check_session(&unbound, &h), SessionCheck::Unbound);
}

#[test]
fn the_headers_step_yields_the_rewrites_and_refuses_a_get_with_a_body() {
    let p = config::Shared::new(policy(r#"{"current":"0123456789abcdef0123456789abcdef"}"#));
    let a = Grant::from_credential(b"agent-a").id;
    let sid = pipeline::session_id_out(&p, Some(&a), b"upstream-1", false).unwrap();
    let get = head_with(&p, "GET", "agent-a", Some(&sid), &[("x-request-id", "r-1"), ("x-request-id", "r-2")]);
    assert_eq!(get.request_id.as_deref(), Some("r-1"));

    let plan = pipeline::request_headers(None, config::Shared::clone(&p), &get, true);
    assert!(plan.attached.is_none());
    let rewrites: Vec<_> = plan.binding.as_ref().unwrap().rewrites().collect();
    assert_eq!(rewrites, [("mcp-session-id", &b"upstream-1"[..], "the Mcp-Session-Id header could not be rewritten")]);
    let pipeline::HeadOutcome::Done(done) = plan.next else { panic!("a GET is decided by its headers") };
    assert_eq!(done.reply, None);

    let plan = pipeline::request_headers(None, config::Shared::clone(&p), &get, false);
    let pipeline::HeadOutcome::Done(done) = plan.next else { panic!("a GET with a body is refused") };
    assert_eq!(done.reply.unwrap().status, 400);

    let stranger = head(&p, "POST", "agent-b", Some(&sid));
    let plan = pipeline::request_headers(None, config::Shared::clone(&p), &stranger, false);
    assert!(plan.binding.is_none());
    let pipeline::HeadOutcome::Done(done) = plan.next else { panic!("another grant's session is refused") };
    assert_eq!(done.reply.unwrap().status, 404);

    let post = head_with(&p, "POST", "agent-a", None, &[("content-type", "application/json")]);
    let plan = pipeline::request_headers(None, p, &post, false);
    assert_eq!(plan.binding.unwrap().rewrites().count(), 0);
    assert!(matches!(plan.next, pipeline::HeadOutcome::NeedBody), "{:?}", plan.next);
}
