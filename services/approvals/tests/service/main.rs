//! The service driven in-process through its axum Router, on a temp-file SQLite database and a
//! manual clock; or, with `MCP_APPROVALS_TEST_PG` set to a PostgreSQL URL (`make test` runs the
//! suite both ways, through testkit/postgres.py), on a fresh PostgreSQL database per test.
//!
//! The tests are in the modules below, by concept; this file holds the helpers they share.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{header, HeaderMap, Method, Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use mcp_approvals::auth::Approvers;
use mcp_approvals::store::Location;
use mcp_approvals::{router, App, Config, ManualClock};
use serde_json::{json, Value};
use tower::ServiceExt;

mod callers;
mod forged;
mod lifecycle;
mod pages;
mod redteam;
mod shown;
mod stores;

const T0: i64 = 1_764_500_000;
const PUBLIC: &str = "http://approvals.test:8095";
const ALICE: &str = "alice-token-0123456789";
const BOB: &str = "bob-token-0123456789";

struct Svc {
    app: App,
    router: Router,
    clock: Arc<ManualClock>,
    db: Location,
    _dir: tempfile::TempDir,
}

/// The PostgreSQL server of this run (`MCP_APPROVALS_TEST_PG`), if any.
fn pg_base() -> Option<String> {
    std::env::var("MCP_APPROVALS_TEST_PG").ok().filter(|s| !s.is_empty())
}

/// Runs `f` with a client of the server on a thread of its own (the synchronous client must not
/// run inside the tests' async runtime).
fn with_pg<T: Send + 'static>(url: String, f: impl FnOnce(&mut postgres::Client) -> T + Send + 'static) -> T {
    std::thread::spawn(move || {
        let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        f(&mut c)
    })
    .join()
    .unwrap()
}

/// A fresh database for one test: a new PostgreSQL database when the run has a server, else a
/// SQLite file in `dir`.
fn new_db(dir: &Path) -> Location {
    static N: AtomicU64 = AtomicU64::new(0);
    match pg_base() {
        Some(base) => {
            let name = format!("t{}_{}", std::process::id(), N.fetch_add(1, Ordering::SeqCst));
            let create = format!("CREATE DATABASE {name}");
            with_pg(base.clone(), move |c| c.batch_execute(&create).unwrap());
            let (prefix, _) = base.rsplit_once('/').unwrap();
            Location::Postgres(format!("{prefix}/{name}"))
        }
        None => Location::Sqlite(dir.join("approvals.sqlite")),
    }
}

fn config() -> Config {
    let mut approvers = Approvers::default();
    approvers.add_spec(&format!("alice={ALICE}")).unwrap();
    approvers.add_spec(&format!("bob={BOB}")).unwrap();
    Config::new(PUBLIC, approvers)
}

fn svc() -> Svc {
    svc_with(config())
}

fn svc_with(config: Config) -> Svc {
    let dir = tempfile::tempdir().unwrap();
    let db = new_db(dir.path());
    let clock = ManualClock::new(T0);
    let app = App::open(db.clone(), config, clock.clone()).unwrap();
    Svc { router: router(app.clone()), app, clock, db, _dir: dir }
}

struct Res {
    status: StatusCode,
    headers: HeaderMap,
    body: String,
}

impl Res {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
    fn location(&self) -> &str {
        self.headers.get(header::LOCATION).unwrap().to_str().unwrap()
    }
}

async fn send(router: &Router, req: Request<Body>) -> Res {
    let res = router.clone().oneshot(req).await.unwrap();
    let status = res.status();
    let headers = res.headers().clone();
    let bytes = res.into_body().collect().await.unwrap().to_bytes();
    Res { status, headers, body: String::from_utf8(bytes.to_vec()).unwrap() }
}

/// The grant id (hex SHA-256 of a credential) of test agent `n`: each test's calls are one
/// agent's, so the per-grant cap never mixes tests.
fn grant(n: u8) -> String {
    format!("{:02x}", n).repeat(32)
}

/// The MCP server of every check here unless told otherwise, as the filter sends it.
const UP: &str = r#"{"cluster":"mcp_a","authority":"gw:10000","path":"/a/mcp"}"#;

/// [`UP`] as a value.
fn up_a() -> Value {
    serde_json::from_str(UP).unwrap()
}

/// The filter's key of a call to [`UP`] (crates/core/src/approval.rs).
fn key_of(grant_id: &str, tool: &str, arguments: &str) -> String {
    key_to(grant_id, &up_a(), tool, arguments)
}

/// The filter's key of a call to `upstream` (`{"cluster","authority","path"}`).
fn key_to(grant_id: &str, upstream: &Value, tool: &str, arguments: &str) -> String {
    let mut g = [0u8; 32];
    for (i, b) in g.iter_mut().enumerate() {
        *b = u8::from_str_radix(&grant_id[2 * i..2 * i + 2], 16).unwrap();
    }
    let args = mcp_policy_core::wire::json::parse_folded_keys_allowed(arguments.as_bytes()).unwrap();
    let s = |k: &str| upstream[k].as_str().unwrap().to_owned();
    let up = mcp_approvals::store::Upstream { cluster: s("cluster"), authority: s("authority"), path: s("path") };
    mcp_policy_core::approval::key(&g, &up, tool, Some(&args))
}

/// Sets `key` to the key of the body's grant_id, upstream ([`UP`] when it has none), tool and
/// arguments.
fn sign(mut b: Value) -> Value {
    if b.get("upstream").is_none() {
        b["upstream"] = up_a();
    }
    let (g, t, a) = (b["grant_id"].as_str().unwrap(), b["tool"].as_str().unwrap(), b["arguments"].to_string());
    b["key"] = json!(key_to(g, &b["upstream"], t, &a));
    b
}

/// A check of `start_vm` by agent `grant_id`, with the right key.
fn check_body(grant_id: &str, arguments: Value, expires: i64, wait: i64) -> Value {
    sign(json!({
        "grant_id": grant_id, "grant": "sha256:0123456789ab", "tool": "start_vm", "arguments": arguments,
        "request_id": "req-1", "expires_in_seconds": expires, "wait_seconds": wait, "reason": "needs a human"
    }))
}

fn check_request(body: impl Into<Body>) -> Request<Body> {
    Request::post("/v1/check").header(header::CONTENT_TYPE, "application/json").body(body.into()).unwrap()
}

async fn check_raw(s: &Svc, body: Value) -> Res {
    send(&s.router, check_request(body.to_string())).await
}

/// A hold-mode check of `key` (waiting up to `wait` seconds), sent on a task of its own.
fn held_check(s: &Svc, key: &str, wait: i64) -> tokio::task::JoinHandle<Value> {
    let router = s.router.clone();
    let body = check_body(key, json!({"vmid": 100}), 600, wait).to_string();
    tokio::spawn(async move { send(&router, check_request(body)).await.json() })
}

async fn check(s: &Svc, key: &str) -> Value {
    let r = check_raw(s, check_body(key, json!({"vmid": 100}), 600, 0)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.headers[header::CONTENT_TYPE], "application/json");
    r.json()
}

async fn api(s: &Svc, method: Method, path: &str, token: Option<&str>, body: Option<Value>) -> Res {
    api_on(&s.router, method, path, token, body).await
}

/// [`api`] on a router of its own (one of a split service's, or a reopened one's).
async fn api_on(router: &Router, method: Method, path: &str, token: Option<&str>, body: Option<Value>) -> Res {
    let mut req = Request::builder().method(method).uri(path);
    if let Some(t) = token {
        req = req.header(header::AUTHORIZATION, format!("Bearer {t}"));
    }
    let body = body.map_or(Body::empty(), |b| Body::from(b.to_string()));
    send(router, req.body(body).unwrap()).await
}

async fn approve(s: &Svc, id: &str, note: &str) -> Res {
    api(s, Method::POST, &format!("/v1/approvals/{id}/approve"), Some(ALICE), Some(json!({"note": note}))).await
}

async fn deny(s: &Svc, id: &str, note: &str) -> Res {
    api(s, Method::POST, &format!("/v1/approvals/{id}/deny"), Some(BOB), Some(json!({"note": note}))).await
}

fn id_of(v: &Value) -> String {
    v["approval_id"].as_str().unwrap().to_string()
}

fn form(path: &str, cookie: Option<&str>, fields: &[(&str, &str)]) -> Request<Body> {
    let body: String =
        fields.iter().map(|(k, v)| format!("{}={}", urlencode(k), urlencode(v))).collect::<Vec<_>>().join("&");
    let mut req = Request::post(path).header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
    if let Some(c) = cookie {
        req = req.header(header::COOKIE, c);
    }
    req.body(Body::from(body)).unwrap()
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn get(path: &str, cookie: Option<&str>) -> Request<Body> {
    let mut req = Request::get(path);
    if let Some(c) = cookie {
        req = req.header(header::COOKIE, c);
    }
    req.body(Body::empty()).unwrap()
}

/// Logs in; returns the cookie header value.
async fn login(s: &Svc, name: &str, token: &str) -> String {
    let r = send(&s.router, form("/login", None, &[("name", name), ("token", token), ("next", "/")])).await;
    assert_eq!(r.status, StatusCode::SEE_OTHER, "{}", r.body);
    assert_eq!(r.location(), "/");
    let set = r.headers[header::SET_COOKIE].to_str().unwrap().to_string();
    assert!(set.contains("; HttpOnly"), "{set}");
    assert!(set.contains("; SameSite=Strict"), "{set}");
    assert!(set.contains("; Path=/"), "{set}");
    let pair = set.split(';').next().unwrap().to_string();
    let value = pair.split_once('=').unwrap().1;
    assert_eq!(value.len(), 64, "32 random bytes in hex");
    pair
}

fn csrf_of(html: &str) -> String {
    let i = html.find("name=\"csrf\" value=\"").unwrap() + "name=\"csrf\" value=\"".len();
    html[i..i + 64].to_string()
}

async fn all_approvals(s: &Svc) -> Value {
    api(s, Method::GET, "/v1/approvals?state=all", Some(ALICE), None).await.json()
}

async fn page_of(s: &Svc, path: &str) -> String {
    let cookie = login(s, "alice", ALICE).await;
    let r = send(&s.router, get(path, Some(&cookie))).await;
    assert_eq!(r.status, StatusCode::OK, "{path}");
    r.body
}

/// The `<article>` of approval `id` in `html`.
fn article<'a>(html: &'a str, id: &str) -> &'a str {
    let start = html.find(&format!("<article class=\"approval\" data-approval-id=\"{id}\"")).unwrap();
    let end = start + html[start..].find("</article>").unwrap();
    &html[start..end]
}

async fn html_of_index(s: &Svc) -> String {
    page_of(s, "/").await
}

/// Opens an approval of `start_vm` by agent `grant_id` whose arguments are exactly the JSON text
/// `args` (numbers as written, not through serde_json); returns the answer.
async fn check_text(s: &Svc, grant_id: &str, label: &str, args: &str) -> Res {
    let body = format!(
        r#"{{"key":"{}","grant_id":"{grant_id}","grant":"{label}","tool":"start_vm","upstream":{UP},"arguments":{args},"request_id":"","expires_in_seconds":600,"wait_seconds":0}}"#,
        key_of(grant_id, "start_vm", args)
    );
    send(&s.router, check_request(body)).await
}

fn warnings_of(card: &str) -> Vec<&str> {
    card.split("<p class=\"warning\" data-warning=\"").skip(1).map(|rest| &rest[..rest.find('"').unwrap()]).collect()
}

/// Arguments `{"a":"xxx…"}` of exactly `len` bytes as sent.
fn args_of_len(len: usize) -> String {
    format!("{{\"a\":\"{}\"}}", "x".repeat(len - 8))
}

/// A second instance on the same database (PostgreSQL) or file (SQLite), sharing the clock.
fn second_instance(s: &Svc) -> Svc {
    let app = App::open(s.db.clone(), config(), s.clock.clone()).unwrap();
    Svc {
        router: router(app.clone()),
        app,
        clock: s.clock.clone(),
        db: s.db.clone(),
        _dir: tempfile::tempdir().unwrap(),
    }
}
