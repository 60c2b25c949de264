//! Log lines of the service: request-derived values cannot forge a line. A test binary of its
//! own: it installs a thread-local tracing subscriber, and tracing's callsite interest is
//! process-wide, so tests logging on other threads at the same time made it flaky.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use std::sync::Arc;

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use mcp_approvals::auth::Approvers;
use mcp_approvals::{router, App, Config, ManualClock};
use serde_json::{json, Value};
use tower::ServiceExt;

const ALICE: &str = "alice-token-0123456789";

fn grant(n: u8) -> String {
    format!("{:02x}", n).repeat(32)
}

fn sign(mut b: Value) -> Value {
    let grant_id = b["grant_id"].as_str().unwrap().to_string();
    let mut g = [0u8; 32];
    for (i, x) in g.iter_mut().enumerate() {
        *x = u8::from_str_radix(&grant_id[2 * i..2 * i + 2], 16).unwrap();
    }
    let args = mcp_policy_core::wire::json::parse(b["arguments"].to_string().as_bytes()).unwrap();
    let s = |k: &str| b["upstream"][k].as_str().unwrap().to_owned();
    let up = mcp_approvals::store::Upstream { cluster: s("cluster"), authority: s("authority"), path: s("path") };
    b["key"] = json!(mcp_policy_core::approval::key(&g, &up, b["tool"].as_str().unwrap(), Some(&args)));
    b
}

fn check_body(grant_id: &str, arguments: Value, expires: i64, wait: i64) -> Value {
    sign(json!({
        "grant_id": grant_id, "grant": "sha256:0123456789ab", "tool": "start_vm", "arguments": arguments,
        "upstream": {"cluster": "mcp_a", "authority": "gw:10000", "path": "/a/mcp"},
        "request_id": "req-1", "expires_in_seconds": expires, "wait_seconds": wait, "reason": "needs a human"
    }))
}

async fn send(router: &Router, req: Request<Body>) -> (StatusCode, Value) {
    let res = router.clone().oneshot(req).await.unwrap();
    let status = res.status();
    let bytes = res.into_body().collect().await.unwrap().to_bytes();
    (status, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

async fn check_raw(r: &Router, body: Value) -> Value {
    let req = Request::post("/v1/check").header(header::CONTENT_TYPE, "application/json").body(body.to_string().into());
    send(r, req.unwrap()).await.1
}

async fn approve(r: &Router, id: &str, note: &str) -> StatusCode {
    let req = Request::post(format!("/v1/approvals/{id}/approve"))
        .header(header::AUTHORIZATION, format!("Bearer {ALICE}"))
        .body(Body::from(json!({"note": note}).to_string()))
        .unwrap();
    send(r, req).await.0
}

#[derive(Clone, Default)]
struct LogBuf(Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for LogBuf {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl LogBuf {
    fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

/// Lines logged on this thread at `level` and above, without time or ANSI colours, until the guard
/// drops.
fn capture(level: tracing::Level) -> (LogBuf, tracing::subscriber::DefaultGuard) {
    let buf = LogBuf::default();
    let writer = buf.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .without_time()
        .with_target(false)
        .with_max_level(level)
        .finish();
    (buf, tracing::subscriber::set_default(subscriber))
}

/// The service on a SQLite file in `dir`, with one approver, alice.
fn service(dir: &tempfile::TempDir) -> Router {
    let mut approvers = Approvers::default();
    approvers.add_spec(&format!("alice={ALICE}")).unwrap();
    let app = App::open(
        &dir.path().join("a.sqlite"),
        Config::new("http://approvals.test", approvers),
        ManualClock::new(1_764_500_000),
    )
    .unwrap();
    router(app)
}

#[tokio::test(flavor = "current_thread")]
async fn request_values_cannot_forge_log_lines() {
    let (buf, _guard) = capture(tracing::Level::INFO);
    let dir = tempfile::tempdir().unwrap();
    let r = service(&dir);
    let forged = "start_vm\n2026-01-01T00:00:00Z  INFO approval decided approval=apr_x approver=alice";
    let mut b = check_body(&grant(62), json!({"vmid": 100}), 600, 0);
    b["tool"] = json!(forged);
    b["grant"] = json!("g\r\nINFO forged");
    b["request_id"] = json!("r\nINFO forged");
    b["upstream"]["cluster"] = json!("mcp_a\nINFO forged");
    let id = check_raw(&r, sign(b)).await["approval_id"].as_str().unwrap().to_string();
    assert_eq!(approve(&r, &id, "ok\nINFO approval decided note=forged").await, StatusCode::OK);
    let mut bad = check_body(&grant(62), json!({}), 600, 0);
    bad["tool"] = json!("");
    check_raw(&r, bad).await;
    let text = buf.text();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines,
        vec![
            format!(
                " INFO approval opened approval={id} tool=\"start_vm\\n2026-01-01T00:00:00Z  INFO approval decided approval=apr_x approver=alice\" \
                 grant=\"g\\r\\nINFO forged\" cluster=\"mcp_a\\nINFO forged\" request_id=\"r\\nINFO forged\" state=\"pending\""
            ),
            // The approver's note is what they typed: whether there is one, never its text.
            format!(
                " INFO approval decided approval={id} tool=\"start_vm\\n2026-01-01T00:00:00Z  INFO approval decided approval=apr_x approver=alice\" \
                 grant=\"g\\r\\nINFO forged\" cluster=\"mcp_a\\nINFO forged\" state=\"approved\" approver=\"alice\" note_given=true"
            ),
            " WARN bad /v1/check request error=\"tool: must not be empty\"".to_string(),
        ]
    );
}

/// What a person types into the login form is never logged: a failed login with a token pasted
/// into Name (or any name and token) logs "failed login", the peer's address and why in words of
/// the service's own, never the name or the token, nor whether the name exists.
#[tokio::test(flavor = "current_thread")]
async fn a_failed_login_logs_nothing_that_was_typed() {
    let (buf, _guard) = capture(tracing::Level::TRACE);
    let dir = tempfile::tempdir().unwrap();
    let r = service(&dir);
    let login = |name: &str, token: &str| {
        let enc = |s: &str| s.bytes().map(|b| format!("%{b:02X}")).collect::<String>();
        let body = format!("name={}&token={}&next=%2F", enc(name), enc(token));
        Request::post("/login")
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(Body::from(body))
            .unwrap()
    };
    // The token pasted into Name; an unknown name; the right name with a wrong token.
    for (name, token) in [("tok-XYZ-secret", "tok-XYZ-other"), ("mallory-XYZ", "tok-XYZ-2"), ("alice", "tok-XYZ-3")] {
        let res = r.clone().oneshot(login(name, token)).await.unwrap();
        assert_eq!(res.status(), StatusCode::UNAUTHORIZED);
    }
    let text = buf.text();
    assert!(!text.contains("XYZ"), "typed text in the log:\n{text}");
    assert!(!text.contains("mallory") && !text.contains("alice"), "a typed name in the log:\n{text}");
    let failed: Vec<&str> = text.lines().filter(|l| l.contains("failed login")).collect();
    assert_eq!(
        failed,
        vec![" WARN failed login remote=unknown reason=\"name and token do not match a configured approver\""; 3],
        "{text}"
    );
}
