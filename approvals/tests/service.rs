//! The service driven in-process through its axum Router, on a temp-file SQLite database and a
//! manual clock; or, with `MCP_APPROVALS_TEST_PG` set to a PostgreSQL URL (`make test` runs the
//! suite both ways, through tests/harness_pg.py), on a fresh PostgreSQL database per test.
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

/// The filter's key of a call (src/approval.rs).
fn key_of(grant_id: &str, tool: &str, arguments: &str) -> String {
    let mut g = [0u8; 32];
    for (i, b) in g.iter_mut().enumerate() {
        *b = u8::from_str_radix(&grant_id[2 * i..2 * i + 2], 16).unwrap();
    }
    let args = mcp_policy_filter::json::parse_folded_keys_allowed(arguments.as_bytes()).unwrap();
    mcp_policy_filter::approval::key(&g, tool, Some(&args))
}

/// Sets `key` to the key of the body's grant_id, tool and arguments.
fn sign(mut b: Value) -> Value {
    b["key"] = json!(key_of(b["grant_id"].as_str().unwrap(), b["tool"].as_str().unwrap(), &b["arguments"].to_string()));
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

async fn check(s: &Svc, key: &str) -> Value {
    let r = check_raw(s, check_body(key, json!({"vmid": 100}), 600, 0)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.headers[header::CONTENT_TYPE], "application/json");
    r.json()
}

async fn api(s: &Svc, method: Method, path: &str, token: Option<&str>, body: Option<Value>) -> Res {
    let mut req = Request::builder().method(method).uri(path);
    if let Some(t) = token {
        req = req.header(header::AUTHORIZATION, format!("Bearer {t}"));
    }
    let body = body.map_or(Body::empty(), |b| Body::from(b.to_string()));
    send(&s.router, req.body(body).unwrap()).await
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

#[tokio::test]
async fn pending_then_approved_is_consumed_once() {
    let s = svc();
    let k = grant(1);
    let p = check(&s, &k).await;
    let id = id_of(&p);
    assert!(id.starts_with("apr_") && id.len() == 30, "{id}");
    assert_eq!(
        p,
        json!({"status": "pending", "approval_id": id, "approval_url": format!("{PUBLIC}/approvals/{id}"),
               "expires_at": T0 + 600, "expires_in_seconds": 600})
    );

    s.clock.advance(100);
    let a = approve(&s, &id, "ok for today").await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.body);
    let a = a.json();
    assert_eq!(a["state"], "approved");
    assert_eq!(a["approver"], "alice");
    assert_eq!(a["note"], "ok for today");
    assert_eq!(a["decided_at"], T0 + 100);
    // Usable for the full window from the decision.
    assert_eq!(a["expires_at"], T0 + 700);

    s.clock.advance(10);
    let c = check(&s, &k).await;
    assert_eq!(c, json!({"status": "approved", "approval_id": id, "approver": "alice", "note": "ok for today"}));

    let got = api(&s, Method::GET, &format!("/v1/approvals/{id}"), Some(BOB), None).await.json();
    assert_eq!(got["state"], "consumed");
    assert_eq!(got["consumed_at"], T0 + 110);
    assert_eq!(got["request_id"], "req-1");

    // Single use: the next identical call needs a new approval.
    let again = check(&s, &k).await;
    assert_eq!(again["status"], "pending");
    assert_ne!(id_of(&again), id);
    // Approving the consumed one again: 409.
    let r = approve(&s, &id, "").await;
    assert_eq!(r.status, StatusCode::CONFLICT);
    assert_eq!(r.json()["error"], format!("approval {id} is consumed, not pending"));
}

#[tokio::test]
async fn pending_is_idempotent_per_key() {
    let s = svc();
    let first = check(&s, &grant(2)).await;
    s.clock.advance(30);
    let second = check(&s, &grant(2)).await;
    assert_eq!(id_of(&first), id_of(&second));
    assert_eq!(second["expires_at"], T0 + 600);
    assert_eq!(second["expires_in_seconds"], 570);
    let other = check(&s, &grant(3)).await;
    assert_eq!(other["status"], "pending");
    assert_ne!(id_of(&other), id_of(&first));
    let list = api(&s, Method::GET, "/v1/approvals", Some(ALICE), None).await.json();
    let ids: Vec<&str> = list["approvals"].as_array().unwrap().iter().map(|a| a["id"].as_str().unwrap()).collect();
    assert_eq!(ids, vec![id_of(&other), id_of(&first)], "newest first");
}

#[tokio::test]
async fn denial_is_answered_while_current_then_a_new_pending() {
    let s = svc();
    let k = grant(4);
    let id = id_of(&check(&s, &k).await);
    s.clock.advance(50);
    let d = deny(&s, &id, "use start_vm on 101 instead").await;
    assert_eq!(d.status, StatusCode::OK);
    assert_eq!(d.json()["state"], "denied");
    let expected =
        json!({"status": "denied", "approval_id": id, "approver": "bob", "note": "use start_vm on 101 instead"});
    assert_eq!(check(&s, &k).await, expected);
    s.clock.advance(599);
    assert_eq!(check(&s, &k).await, expected, "still current at decided_at + 599");
    // Approving a denied one: 409.
    assert_eq!(approve(&s, &id, "").await.status, StatusCode::CONFLICT);
    s.clock.advance(1);
    let p = check(&s, &k).await;
    assert_eq!(p["status"], "pending");
    assert_ne!(id_of(&p), id);
    // The denial stays in the history as denied.
    let old = api(&s, Method::GET, &format!("/v1/approvals/{id}"), Some(ALICE), None).await.json();
    assert_eq!(old["state"], "denied");
    assert_eq!(old["approver"], "bob");
}

#[tokio::test]
async fn pending_expires() {
    let s = svc();
    let k = grant(5);
    let id = id_of(&check(&s, &k).await);
    s.clock.advance(600);
    let r = approve(&s, &id, "late").await;
    assert_eq!(r.status, StatusCode::CONFLICT);
    assert_eq!(r.json()["error"], format!("approval {id} is expired, not pending"));
    let got = api(&s, Method::GET, &format!("/v1/approvals/{id}"), Some(ALICE), None).await.json();
    assert_eq!(got["state"], "expired");
    assert_eq!(got["approver"], Value::Null);
    let p = check(&s, &k).await;
    assert_eq!(p["status"], "pending");
    assert_ne!(id_of(&p), id);
    assert_eq!(p["expires_at"], T0 + 1200);
}

#[tokio::test]
async fn approved_but_unused_expires() {
    let s = svc();
    let k = grant(6);
    let id = id_of(&check(&s, &k).await);
    s.clock.advance(599);
    assert_eq!(approve(&s, &id, "").await.status, StatusCode::OK);
    // The approver decided late: the agent still has the full window.
    s.clock.advance(599);
    let got = api(&s, Method::GET, &format!("/v1/approvals/{id}"), Some(ALICE), None).await.json();
    assert_eq!(got["state"], "approved");
    s.clock.advance(1);
    let p = check(&s, &k).await;
    assert_eq!(p["status"], "pending");
    assert_ne!(id_of(&p), id);
    let got = api(&s, Method::GET, &format!("/v1/approvals/{id}"), Some(ALICE), None).await.json();
    assert_eq!(got["state"], "expired");
    assert_eq!(got["consumed_at"], Value::Null);
}

#[tokio::test]
async fn background_expiry_marks_rows() {
    let s = svc();
    let id = id_of(&check(&s, &grant(7)).await);
    s.clock.advance(601);
    assert_eq!(s.app.expire_now().await.unwrap(), 1);
    assert_eq!(s.app.expire_now().await.unwrap(), 0);
    let list = api(&s, Method::GET, "/v1/approvals?state=expired", Some(ALICE), None).await.json();
    assert_eq!(list["approvals"][0]["id"], id);
    let m = send(&s.router, Request::get("/metrics").body(Body::empty()).unwrap()).await;
    assert!(m.body.contains("mcp_approvals_expired_total 1\n"), "{}", m.body);
    assert!(m.body.contains("mcp_approvals_opened_total 1\n"), "{}", m.body);
    assert!(m.body.contains("mcp_approvals_pending 0\n"), "{}", m.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_checks_consume_exactly_once() {
    let s = svc();
    let k = grant(8);
    let id = id_of(&check(&s, &k).await);
    assert_eq!(approve(&s, &id, "once").await.status, StatusCode::OK);
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let router = s.router.clone();
        let body = check_body(&k, json!({"vmid": 100}), 600, 0).to_string();
        tasks.push(tokio::spawn(async move {
            let req = check_request(body);
            send(&router, req).await.json()
        }));
    }
    let mut approved = 0;
    let mut pending_ids = std::collections::HashSet::new();
    for t in tasks {
        let v = t.await.unwrap();
        match v["status"].as_str().unwrap() {
            "approved" => {
                approved += 1;
                assert_eq!(id_of(&v), id);
            }
            "pending" => {
                pending_ids.insert(id_of(&v));
            }
            other => panic!("{other}"),
        }
    }
    assert_eq!(approved, 1);
    assert_eq!(pending_ids.len(), 1, "the 19 others share one new pending approval");
    assert!(!pending_ids.contains(&id));
    let m = send(&s.router, Request::get("/metrics").body(Body::empty()).unwrap()).await;
    assert!(m.body.contains("mcp_approvals_consumed_total 1\n"), "{}", m.body);
    assert!(m.body.contains("mcp_approvals_checks_total{status=\"approved\"} 1\n"), "{}", m.body);
    assert!(m.body.contains("mcp_approvals_checks_total{status=\"pending\"} 20\n"), "{}", m.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hold_mode_returns_the_decision() {
    let s = svc();
    let k = grant(9);
    let id = id_of(&check(&s, &k).await);
    let router = s.router.clone();
    let body = check_body(&k, json!({"vmid": 100}), 600, 30).to_string();
    let started = std::time::Instant::now();
    let held = tokio::spawn(async move {
        let req = check_request(body);
        send(&router, req).await.json()
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!held.is_finished());
    assert_eq!(approve(&s, &id, "go").await.status, StatusCode::OK);
    let v = tokio::time::timeout(Duration::from_secs(5), held).await.unwrap().unwrap();
    assert_eq!(v, json!({"status": "approved", "approval_id": id, "approver": "alice", "note": "go"}));
    assert!(started.elapsed() < Duration::from_secs(5));
    // Consumed by the held check.
    assert_eq!(check(&s, &k).await["status"], "pending");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hold_mode_returns_a_denial() {
    let s = svc();
    let k = grant(10);
    let id = id_of(&check(&s, &k).await);
    let router = s.router.clone();
    let body = check_body(&k, json!({"vmid": 100}), 600, 30).to_string();
    let held = tokio::spawn(async move {
        let req = check_request(body);
        send(&router, req).await.json()
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    // Unrelated activity wakes the waiter; it stays pending.
    check(&s, &grant(11)).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!held.is_finished());
    assert_eq!(deny(&s, &id, "no").await.status, StatusCode::OK);
    let v = tokio::time::timeout(Duration::from_secs(5), held).await.unwrap().unwrap();
    assert_eq!(v, json!({"status": "denied", "approval_id": id, "approver": "bob", "note": "no"}));
}

#[tokio::test]
async fn hold_mode_times_out_pending() {
    let s = svc();
    let k = grant(12);
    let started = std::time::Instant::now();
    let r = check_raw(&s, check_body(&k, json!({"vmid": 100}), 600, 1)).await;
    let elapsed = started.elapsed();
    assert!(elapsed >= Duration::from_millis(950) && elapsed < Duration::from_secs(3), "{elapsed:?}");
    let v = r.json();
    assert_eq!(v["status"], "pending");
    assert_eq!(v["expires_in_seconds"], 600);
    // The same approval as a retry sees.
    assert_eq!(check(&s, &k).await["approval_id"], v["approval_id"]);
}

#[tokio::test]
async fn hold_mode_answers_at_once_when_decided() {
    let s = svc();
    let k = grant(13);
    let id = id_of(&check(&s, &k).await);
    approve(&s, &id, "").await;
    let started = std::time::Instant::now();
    let v = check_raw(&s, check_body(&k, json!({"vmid": 100}), 600, 30)).await.json();
    assert_eq!(v["status"], "approved");
    assert!(started.elapsed() < Duration::from_secs(1));
}

#[tokio::test]
async fn approvals_survive_a_restart() {
    let s = svc();
    let k = grant(14);
    let pending_key = grant(15);
    let id = id_of(&check(&s, &k).await);
    let pending_id = id_of(&check(&s, &pending_key).await);
    approve(&s, &id, "persisted").await;
    let db = s.db.clone();
    let Svc { app, router: old_router, _dir, .. } = s;
    drop(old_router);
    drop(app);
    let clock = ManualClock::new(T0 + 10);
    let app = App::open(db.clone(), config(), clock.clone()).unwrap();
    let s2 = Svc { router: router(app.clone()), app, clock, db, _dir };
    assert_eq!(
        check(&s2, &k).await,
        json!({"status": "approved", "approval_id": id, "approver": "alice", "note": "persisted"})
    );
    let p = check(&s2, &pending_key).await;
    assert_eq!(p["approval_id"], pending_id);
    assert_eq!(p["expires_in_seconds"], 590);
}

#[tokio::test]
async fn one_pending_per_key_in_the_schema() {
    let s = svc();
    check(&s, &grant(16)).await;
    let key = key_of(&grant(16), "start_vm", r#"{"vmid":100}"#);
    match &s.db {
        Location::Sqlite(path) => {
            let conn = rusqlite::Connection::open(path).unwrap();
            let err = conn
                .execute(
                    "INSERT INTO approvals (id, key, state, grant_label, tool, arguments, request_id, created_at, \
                     expires_in, expires_at) VALUES ('apr_x', ?1, 'pending', 'g', 't', '{}', '', 0, 1, 1)",
                    [key],
                )
                .unwrap_err();
            assert!(err.to_string().contains("UNIQUE"), "{err}");
            let version: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
            assert_eq!(version, 4);
            let mode: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0)).unwrap();
            assert_eq!(mode, "wal");
        }
        Location::Postgres(url) => {
            let (err, versions) = with_pg(url.clone(), move |c| {
                let err = c
                    .execute(
                        "INSERT INTO approvals (id, key, state, grant_label, tool, arguments, request_id, created_at, \
                         expires_in, expires_at) VALUES ('apr_x', $1, 'pending', 'g', 't', '{}', '', 0, 1, 1)",
                        &[&key],
                    )
                    .unwrap_err();
                let versions: Vec<i64> = c
                    .query("SELECT version FROM mcp_approvals_migrations ORDER BY version", &[])
                    .unwrap()
                    .iter()
                    .map(|r| r.get(0))
                    .collect();
                (err.as_db_error().unwrap().constraint().map(str::to_string), versions)
            });
            assert_eq!(err.as_deref(), Some("approvals_one_pending_per_key"));
            assert_eq!(versions, vec![2, 3, 4]);
        }
    }
}

#[tokio::test]
async fn bad_check_bodies_are_400() {
    let s = svc();
    let good = check_body(&grant(17), json!({}), 600, 0);
    let cases: Vec<(Value, &str)> = vec![
        (json!({"key": "ABC"}), "key: must be 64 lowercase hex characters"),
        (json!({"key": "AB".repeat(32)}), "key: must be 64 lowercase hex characters"),
        (json!({"tool": ""}), "tool: must not be empty"),
        (json!({"tool": "t".repeat(257)}), "tool: longer than 256 bytes"),
        (json!({"expires_in_seconds": 0}), "expires_in_seconds: must be an integer in 1..=604800"),
        (json!({"expires_in_seconds": 604_801}), "expires_in_seconds: must be an integer in 1..=604800"),
        (json!({"wait_seconds": 301}), "wait_seconds: must be an integer in 0..=300"),
        (json!({"wait_seconds": "5"}), "wait_seconds: must be an integer in 0..=300"),
        (json!({"request_id": null}), "request_id: must be a string"),
    ];
    for (patch, msg) in cases {
        let mut b = good.clone();
        for (k, v) in patch.as_object().unwrap() {
            b[k] = v.clone();
        }
        let r = check_raw(&s, b).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{patch}");
        assert_eq!(r.json(), json!({"error": msg}));
    }
    let mut b = good.clone();
    b.as_object_mut().unwrap().remove("arguments");
    assert_eq!(check_raw(&s, b).await.json(), json!({"error": "arguments: missing"}));
    let r = send(&s.router, check_request("not json")).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.json(), json!({"error": "body is not strict JSON: unexpected character at byte 0"}));
    // Over 1 MiB.
    let mut big = good.clone();
    big["arguments"] = json!({"blob": "x".repeat(1 << 20)});
    assert_eq!(check_raw(&s, big).await.status, StatusCode::PAYLOAD_TOO_LARGE);
    // Nothing was opened.
    let list = api(&s, Method::GET, "/v1/approvals?state=all", Some(ALICE), None).await.json();
    assert_eq!(list, json!({"approvals": []}));
}

#[tokio::test]
async fn api_requires_a_bearer_token() {
    let s = svc();
    let id = id_of(&check(&s, &grant(18)).await);
    for (method, path) in [
        (Method::GET, "/v1/approvals".to_string()),
        (Method::GET, format!("/v1/approvals/{id}")),
        (Method::POST, format!("/v1/approvals/{id}/approve")),
        (Method::POST, format!("/v1/approvals/{id}/deny")),
    ] {
        for token in [None, Some("wrong"), Some("")] {
            let r = api(&s, method.clone(), &path, token, None).await;
            assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{method} {path} {token:?}");
            assert_eq!(r.json(), json!({"error": "missing or wrong bearer token"}));
        }
    }
    // Nothing was decided.
    let got = api(&s, Method::GET, &format!("/v1/approvals/{id}"), Some(ALICE), None).await.json();
    assert_eq!(got["state"], "pending");
    let keys: Vec<&str> = got.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        vec![
            "approval_url",
            "approver",
            "arguments",
            "consumed_at",
            "created_at",
            "decided_at",
            "expires_at",
            "grant",
            "id",
            "key",
            "note",
            "reason",
            "request_id",
            "state",
            "tool"
        ]
    );
    assert_eq!(got["arguments"], json!({"vmid": 100}));
    assert_eq!(got["reason"], "needs a human");
    assert_eq!(got["grant"], "sha256:0123456789ab");
    assert_eq!(got["approval_url"], format!("{PUBLIC}/approvals/{id}"));
    assert_eq!(
        api(&s, Method::GET, "/v1/approvals/apr_00000000000000000000000000", Some(ALICE), None).await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        api(&s, Method::POST, "/v1/approvals/apr_00000000000000000000000000/approve", Some(ALICE), None).await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(
        api(&s, Method::GET, "/v1/approvals?state=bogus", Some(ALICE), None).await.status,
        StatusCode::BAD_REQUEST
    );
    // No body is fine for approve.
    let r = api(&s, Method::POST, &format!("/v1/approvals/{id}/approve"), Some(BOB), None).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.json()["note"], "");
    assert_eq!(r.json()["approver"], "bob");
    let approved = api(&s, Method::GET, "/v1/approvals?state=approved", Some(ALICE), None).await.json();
    assert_eq!(approved["approvals"].as_array().unwrap().len(), 1);
    let pending = api(&s, Method::GET, "/v1/approvals", Some(ALICE), None).await.json();
    assert_eq!(pending, json!({"approvals": []}));
}

#[tokio::test]
async fn healthz_and_metrics() {
    let s = svc();
    let r = send(&s.router, Request::get("/healthz").body(Body::empty()).unwrap()).await;
    assert_eq!((r.status, r.body.as_str()), (StatusCode::OK, "ok"));
    check(&s, &grant(19)).await;
    let m = send(&s.router, Request::get("/metrics").body(Body::empty()).unwrap()).await;
    assert_eq!(m.status, StatusCode::OK);
    assert!(m.headers[header::CONTENT_TYPE].to_str().unwrap().starts_with("text/plain"));
    for line in [
        "mcp_approvals_opened_total 1",
        "mcp_approvals_approved_total 0",
        "mcp_approvals_denied_total 0",
        "mcp_approvals_consumed_total 0",
        "mcp_approvals_expired_total 0",
        "mcp_approvals_pending 1",
        "# TYPE mcp_approvals_pending gauge",
    ] {
        assert!(m.body.lines().any(|l| l == line), "{line} in {}", m.body);
    }
}

// ---- web pages ----

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

#[tokio::test]
async fn pages_require_login() {
    let s = svc();
    let r = send(&s.router, get("/", None)).await;
    assert_eq!(r.status, StatusCode::SEE_OTHER);
    assert_eq!(r.location(), "/login");
    let id = id_of(&check(&s, &grant(20)).await);
    let r = send(&s.router, get(&format!("/approvals/{id}"), None)).await;
    assert_eq!(r.status, StatusCode::SEE_OTHER);
    assert_eq!(r.location(), format!("/login?next=/approvals/{id}"));
    let r = send(&s.router, get("/ui/version", None)).await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    let r = send(&s.router, get("/", Some("mcp_approvals_session=forged"))).await;
    assert_eq!(r.location(), "/login");
    // A decision without a session changes nothing.
    let r = send(&s.router, form(&format!("/approvals/{id}/decision"), None, &[("decision", "approve")])).await;
    assert_eq!(r.status, StatusCode::SEE_OTHER);
    assert_eq!(r.location(), "/login");
    let r = send(&s.router, get("/login", None)).await;
    assert_eq!(r.status, StatusCode::OK);
    for needle in ["name=\"name\"", "name=\"token\"", "<button type=\"submit\">"] {
        assert!(r.body.contains(needle), "{needle}");
    }
}

#[tokio::test]
async fn wrong_token_is_refused() {
    let s = svc();
    for (name, token) in [("alice", "nope"), ("alice", BOB), ("mallory", ALICE), ("", "")] {
        let r = send(&s.router, form("/login", None, &[("name", name), ("token", token)])).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{name}");
        assert!(r.headers.get(header::SET_COOKIE).is_none());
        assert!(r.body.contains("Wrong name or token."));
    }
    // Login after a wrong attempt still works; next goes back to the approval.
    let r = send(
        &s.router,
        form("/login", None, &[("name", "bob"), ("token", BOB), ("next", "/approvals/apr_00000000000000000000000000")]),
    )
    .await;
    assert_eq!(r.location(), "/approvals/apr_00000000000000000000000000");
    let r =
        send(&s.router, form("/login", None, &[("name", "bob"), ("token", BOB), ("next", "//evil.example/")])).await;
    assert_eq!(r.location(), "/");
}

#[tokio::test]
async fn decisions_need_the_csrf_token_and_same_origin() {
    let s = svc();
    let id = id_of(&check(&s, &grant(21)).await);
    let cookie = login(&s, "alice", ALICE).await;
    let page = send(&s.router, get("/", Some(&cookie))).await;
    let csrf = csrf_of(&page.body);
    let path = format!("/approvals/{id}/decision");
    let r = send(&s.router, form(&path, Some(&cookie), &[("decision", "approve"), ("note", "x")])).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    let r = send(&s.router, form(&path, Some(&cookie), &[("decision", "approve"), ("csrf", &"0".repeat(64))])).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    // Another session's token does not work either.
    let bob = login(&s, "bob", BOB).await;
    let bob_csrf = csrf_of(&send(&s.router, get("/", Some(&bob))).await.body);
    assert_ne!(bob_csrf, csrf);
    let r = send(&s.router, form(&path, Some(&cookie), &[("decision", "approve"), ("csrf", &bob_csrf)])).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    // Cross-origin, or an opaque origin.
    for origin in ["https://evil.example", "null", "http://approvals.test:8096"] {
        let mut req = form(&path, Some(&cookie), &[("decision", "approve"), ("csrf", &csrf)]);
        req.headers_mut().insert(header::ORIGIN, origin.parse().unwrap());
        assert_eq!(send(&s.router, req).await.status, StatusCode::FORBIDDEN, "{origin}");
    }
    // The login form too.
    let mut req = form("/login", None, &[("name", "alice"), ("token", ALICE)]);
    req.headers_mut().insert(header::ORIGIN, "https://evil.example".parse().unwrap());
    assert_eq!(send(&s.router, req).await.status, StatusCode::FORBIDDEN);
    // Same origin as the Host the browser used (behind a proxy with another name): fine.
    let mut req = form("/login", None, &[("name", "alice"), ("token", ALICE)]);
    req.headers_mut().insert(header::ORIGIN, "http://10.0.0.5:8095".parse().unwrap());
    req.headers_mut().insert(header::HOST, "10.0.0.5:8095".parse().unwrap());
    assert_eq!(send(&s.router, req).await.status, StatusCode::SEE_OTHER);
    let got = api(&s, Method::GET, &format!("/v1/approvals/{id}"), Some(ALICE), None).await.json();
    assert_eq!(got["state"], "pending");
    // Same origin is fine.
    let mut req = form(&path, Some(&cookie), &[("decision", "deny"), ("csrf", &csrf)]);
    req.headers_mut().insert(header::ORIGIN, PUBLIC.parse().unwrap());
    assert_eq!(send(&s.router, req).await.status, StatusCode::SEE_OTHER);
    let got = api(&s, Method::GET, &format!("/v1/approvals/{id}"), Some(ALICE), None).await.json();
    assert_eq!(got["state"], "denied");
    // Logout needs it too, then the session is gone.
    let r = send(&s.router, form("/logout", Some(&cookie), &[])).await;
    assert_eq!(r.status, StatusCode::FORBIDDEN);
    let r = send(&s.router, form("/logout", Some(&cookie), &[("csrf", &csrf)])).await;
    assert_eq!(r.location(), "/login");
    assert_eq!(send(&s.router, get("/", Some(&cookie))).await.location(), "/login");
}

#[tokio::test]
async fn approving_through_the_page_records_approver_and_note() {
    let s = svc();
    let k = grant(23);
    let id = id_of(&check(&s, &k).await);
    let cookie = login(&s, "alice", ALICE).await;
    let page = send(&s.router, get("/", Some(&cookie))).await;
    assert_eq!(page.status, StatusCode::OK);
    let html = &page.body;
    assert!(html.contains(&format!("data-approval-id=\"{id}\"")));
    assert!(html.contains("<button type=\"submit\" name=\"decision\" value=\"approve\""));
    assert!(html.contains("<button type=\"submit\" name=\"decision\" value=\"deny\""));
    assert!(html.contains("name=\"note\""));
    assert!(html.contains("&quot;vmid&quot;: 100"), "pretty-printed arguments");
    assert!(html.contains("needs a human"));
    assert!(html.contains("sha256:0123456789ab"));
    let csrf = csrf_of(html);
    let v0 = send(&s.router, get("/ui/version", Some(&cookie))).await.body;

    s.clock.advance(5);
    let r = send(
        &s.router,
        form(
            &format!("/approvals/{id}/decision"),
            Some(&cookie),
            &[("csrf", &csrf), ("back", "/"), ("note", "ok for today"), ("decision", "approve")],
        ),
    )
    .await;
    assert_eq!(r.status, StatusCode::SEE_OTHER);
    assert_eq!(r.location(), "/");
    let v1 = send(&s.router, get("/ui/version", Some(&cookie))).await.body;
    assert_ne!(v0, v1);

    let got = api(&s, Method::GET, &format!("/v1/approvals/{id}"), Some(BOB), None).await.json();
    assert_eq!(got["state"], "approved");
    assert_eq!(got["approver"], "alice");
    assert_eq!(got["note"], "ok for today");
    assert_eq!(got["decided_at"], T0 + 5);

    // The flash message once, and the decision in the recent list.
    let page = send(&s.router, get("/", Some(&cookie))).await.body;
    assert!(
        page.contains(&format!(
            "<p class=\"flash\" id=\"flash\" role=\"status\">Approved start_vm ({id}, grant sha256:0123456789ab).</p>"
        )),
        "{page}"
    );
    assert!(page.contains("No pending approvals."));
    assert!(page.contains(&format!("<tr class=\"decision\" data-approval-id=\"{id}\">")));
    assert!(page.contains("<td class=\"approver\">alice</td><td class=\"note\">ok for today</td>"));
    let page = send(&s.router, get("/", Some(&cookie))).await.body;
    assert!(!page.contains("class=\"flash\""));

    // Deciding again from the approval's page: flash says why, back to that page.
    let r = send(
        &s.router,
        form(
            &format!("/approvals/{id}/decision"),
            Some(&cookie),
            &[("csrf", &csrf), ("back", &format!("/approvals/{id}")), ("decision", "deny")],
        ),
    )
    .await;
    assert_eq!(r.location(), format!("/approvals/{id}"));
    let one = send(&s.router, get(&format!("/approvals/{id}"), Some(&cookie))).await.body;
    assert!(one.contains(&format!("Could not deny {id}: it is already approved (by alice).")), "{one}");
    assert!(!one.contains("value=\"approve\""), "no buttons once decided");

    // The check consumes it: the recent list shows consumed.
    assert_eq!(check(&s, &k).await["status"], "approved");
    let page = send(&s.router, get("/", Some(&cookie))).await.body;
    assert!(page.contains("<td class=\"state state-consumed\">consumed</td>"));
    let missing = send(&s.router, get("/approvals/apr_00000000000000000000000000", Some(&cookie))).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn arguments_are_kept_verbatim() {
    let s = svc();
    let args = r#"{"vmid":100,"big":123456789012345678901234567890,"f":1.50}"#;
    let body = format!(
        r#"{{"key":"{}","grant_id":"{}","grant":"g","tool":"t","arguments":{args},"request_id":"","expires_in_seconds":60,"wait_seconds":0}}"#,
        key_of(&grant(24), "t", args),
        grant(24)
    );
    let r = send(&s.router, check_request(body)).await;
    let id = id_of(&r.json());
    let raw = api(&s, Method::GET, &format!("/v1/approvals/{id}"), Some(ALICE), None).await.body;
    assert!(raw.contains(&format!(r#""arguments":{args}"#)), "{raw}");
    let list = api(&s, Method::GET, "/v1/approvals", Some(ALICE), None).await.body;
    assert!(list.contains(&format!(r#""arguments":{args}"#)), "{list}");
    let cookie = login(&s, "alice", ALICE).await;
    let page = send(&s.router, get(&format!("/approvals/{id}"), Some(&cookie))).await.body;
    assert!(
        page.contains(
            "{\n  &quot;vmid&quot;: 100,\n  &quot;big&quot;: 123456789012345678901234567890,\n  &quot;f&quot;: 1.50\n}"
        ),
        "{page}"
    );
}

// ---- hardening: forged checks, cross-origin checks, listeners, caps ----

async fn all_approvals(s: &Svc) -> Value {
    api(s, Method::GET, "/v1/approvals?state=all", Some(ALICE), None).await.json()
}

#[tokio::test]
async fn a_key_of_another_call_is_refused() {
    let s = svc();
    // The page would show {"vmid": 100} while the key is the one of {"vmid": 101} (or of another
    // tool, or another agent): approving it must never let the other call through.
    let harmless = check_body(&grant(40), json!({"vmid": 100}), 600, 0);
    let forged_keys = [
        key_of(&grant(40), "start_vm", r#"{"vmid":101}"#),
        key_of(&grant(40), "delete_vm", r#"{"vmid":100}"#),
        key_of(&grant(41), "start_vm", r#"{"vmid":100}"#),
        key_of(&grant(40), "start_vm", "{}"),
    ];
    for k in forged_keys {
        let mut b = harmless.clone();
        b["key"] = json!(k);
        let r = check_raw(&s, b).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST);
        assert_eq!(r.json(), json!({"error": "key does not match grant_id, tool and arguments"}));
    }
    let mut b = harmless.clone();
    b.as_object_mut().unwrap().remove("grant_id");
    assert_eq!(check_raw(&s, b).await.json(), json!({"error": "grant_id: missing"}));
    let mut b = harmless.clone();
    b["grant_id"] = json!("sha256:0123456789ab");
    assert_eq!(check_raw(&s, b).await.json(), json!({"error": "grant_id: must be 64 lowercase hex characters"}));
    // A duplicate key inside the arguments (which value would the tool see?).
    let text = harmless.to_string().replace(r#""arguments":{"vmid":100}"#, r#""arguments":{"vmid":100,"vmid":101}"#);
    let r = send(&s.router, check_request(text)).await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert!(r.json()["error"].as_str().unwrap().starts_with("body is not strict JSON: duplicate object key at byte "));
    assert_eq!(all_approvals(&s).await, json!({"approvals": []}));
    let m = send(&s.router, get("/metrics", None)).await.body;
    assert!(m.contains("mcp_approvals_bad_requests_total 7\n"), "{m}");
    // The right key works; absent arguments are {} on both sides.
    assert_eq!(check_raw(&s, harmless).await.status, StatusCode::OK);
}

#[tokio::test]
async fn check_needs_application_json() {
    let s = svc();
    let body = check_body(&grant(42), json!({"vmid": 100}), 600, 0).to_string();
    for ct in
        [None, Some("text/plain"), Some("application/x-www-form-urlencoded"), Some("multipart/form-data; boundary=b")]
    {
        let mut req = Request::post("/v1/check");
        if let Some(ct) = ct {
            req = req.header(header::CONTENT_TYPE, ct);
        }
        let r = send(&s.router, req.body(Body::from(body.clone())).unwrap()).await;
        assert_eq!(r.status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{ct:?}");
        assert_eq!(r.json(), json!({"error": "content-type must be application/json"}));
    }
    assert_eq!(all_approvals(&s).await, json!({"approvals": []}));
    let r = send(
        &s.router,
        Request::post("/v1/check")
            .header(header::CONTENT_TYPE, "application/json; charset=utf-8")
            .body(Body::from(body))
            .unwrap(),
    )
    .await;
    assert_eq!(r.status, StatusCode::OK);
}

#[tokio::test]
async fn check_listener_is_separate() {
    let s = svc();
    let pages = mcp_approvals::page_router(s.app.clone());
    let checks = mcp_approvals::check_router(s.app.clone());
    let body = check_body(&grant(43), json!({"vmid": 100}), 600, 0).to_string();
    // --listen with --check-listen: no /v1/check.
    assert_eq!(send(&pages, check_request(body.clone())).await.status, StatusCode::NOT_FOUND);
    assert_eq!(all_approvals(&s).await, json!({"approvals": []}));
    assert_eq!(send(&pages, get("/healthz", None)).await.body, "ok");
    assert_eq!(send(&pages, get("/metrics", None)).await.status, StatusCode::OK);
    assert_eq!(send(&pages, get("/", None)).await.location(), "/login");
    // --check-listen: /v1/check and /healthz only.
    let r = send(&checks, check_request(body)).await;
    assert_eq!((r.status, r.json()["status"].clone()), (StatusCode::OK, json!("pending")));
    assert_eq!(send(&checks, get("/healthz", None)).await.body, "ok");
    for path in ["/", "/login", "/metrics", "/v1/approvals", "/ui/version"] {
        assert_eq!(send(&checks, get(path, None)).await.status, StatusCode::NOT_FOUND, "{path}");
    }
    let r = send(
        &pages,
        Request::get("/v1/approvals")
            .header(header::AUTHORIZATION, format!("Bearer {ALICE}"))
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(r.json()["approvals"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn pending_approvals_are_capped_per_grant() {
    let s = svc_with(Config { max_pending_per_grant: 3, ..config() });
    let mut ids = Vec::new();
    for vmid in 0..3 {
        let r = check_raw(&s, check_body(&grant(44), json!({"vmid": vmid}), 600, 0)).await;
        assert_eq!(r.status, StatusCode::OK);
        ids.push(id_of(&r.json()));
    }
    let r = check_raw(&s, check_body(&grant(44), json!({"vmid": 3}), 600, 0)).await;
    assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(
        r.json(),
        json!({"error": "this grant already has 3 pending approvals (at most 3 per grant): decide them or let them expire"})
    );
    // Hold mode is refused at once too.
    let started = std::time::Instant::now();
    assert_eq!(
        check_raw(&s, check_body(&grant(44), json!({"vmid": 3}), 600, 30)).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert!(started.elapsed() < Duration::from_secs(2));
    // The existing ones are still answered; another grant is not affected.
    let again = check_raw(&s, check_body(&grant(44), json!({"vmid": 1}), 600, 0)).await;
    assert_eq!((again.status, id_of(&again.json())), (StatusCode::OK, ids[1].clone()));
    assert_eq!(check_raw(&s, check_body(&grant(45), json!({"vmid": 3}), 600, 0)).await.status, StatusCode::OK);
    // A decision frees a place; so does expiry.
    assert_eq!(approve(&s, &ids[0], "").await.status, StatusCode::OK);
    let approved = check_raw(&s, check_body(&grant(44), json!({"vmid": 0}), 600, 0)).await.json();
    assert_eq!(approved["status"], "approved");
    let r = check_raw(&s, check_body(&grant(44), json!({"vmid": 3}), 600, 0)).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(
        check_raw(&s, check_body(&grant(44), json!({"vmid": 4}), 600, 0)).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
    s.clock.advance(600);
    assert_eq!(check_raw(&s, check_body(&grant(44), json!({"vmid": 4}), 600, 0)).await.status, StatusCode::OK);
    let m = send(&s.router, get("/metrics", None)).await.body;
    assert!(m.contains("mcp_approvals_checks_total{status=\"too_many_pending\"} 3\n"), "{m}");
    let total = all_approvals(&s).await["approvals"].as_array().unwrap().len();
    assert_eq!(total, 6);
}

// ---- hardening: what the approver sees ----

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

#[tokio::test]
async fn invisible_and_confusable_characters_are_shown_escaped() {
    let s = svc();
    // U+200B making a second "vmid", Cyrillic і, bidi override, U+2028, a C1 control, a BOM, NBSP
    // padding, an astral character: all escaped, with the badge and the look-alike warning.
    let args =
        "{\"vmid\":100,\"vmid\u{200b}\":101,\"cmd\":\"\u{0456}d \u{202e}fdp.exe\",\"x\":\"\u{2028}\u{0085}\u{feff}\",\
                \"pad\":\"\u{a0}\u{a0}\u{a0}rm -rf /\",\"e\":\"\u{1F600}\",\"n\":123456789012345678901234567890}";
    let body = format!(
        r#"{{"key":"{}","grant_id":"{}","grant":"g","tool":"start_vm","arguments":{args},"request_id":"r\u2028x","expires_in_seconds":60,"wait_seconds":0}}"#,
        key_of(&grant(46), "start_vm", args),
        grant(46)
    );
    let r = send(&s.router, check_request(body)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let id = id_of(&r.json());
    let want_pre = "<pre class=\"arguments\">{\n  &quot;vmid&quot;: 100,\n  &quot;vmid\\u200b&quot;: 101,\n  \
                    &quot;cmd&quot;: &quot;\\u0456d \\u202efdp.exe&quot;,\n  &quot;x&quot;: &quot;\\u2028\\u0085\\ufeff&quot;,\n  \
                    &quot;pad&quot;: &quot;\\u00a0\\u00a0\\u00a0rm -rf /&quot;,\n  &quot;e&quot;: &quot;\\ud83d\\ude00&quot;,\n  \
                    &quot;n&quot;: 123456789012345678901234567890\n}</pre>";
    for path in ["/".to_string(), format!("/approvals/{id}")] {
        let html = page_of(&s, &path).await;
        let card = article(&html, &id);
        assert!(card.contains(want_pre), "{card}");
        assert!(card.contains(
            "<p class=\"warning\" data-warning=\"escaped\"><strong class=\"badge\">contains non-ASCII or invisible characters: shown escaped</strong></p>"
        ), "{card}");
        assert!(card.contains(
            "<p class=\"warning\" data-warning=\"lookalike\"><strong class=\"badge\">keys that look alike in arguments: &quot;vmid&quot; and &quot;vmid\\u200b&quot; (equal without non-ASCII or invisible characters, punctuation or spaces, or ignoring case)</strong></p>"
        ), "{card}");
        assert!(
            card.contains(&format!("<p class=\"meta size\">arguments: {} bytes as sent</p>", args.len())),
            "{card}"
        );
        assert!(card.contains(" · request id <span class=\"mono request-id\">r\\u2028x</span>"), "{card}");
        assert!(card.contains("value=\"approve\""));
        // Nothing outside printable ASCII inside the card but our own middle dots.
        assert!(!card.contains('\u{200b}') && !card.contains('\u{202e}') && !card.contains('\u{a0}'));
        // No scroll box that could clip the arguments.
        assert!(!html.contains("max-height") && !html.contains("overflow:auto"));
    }
    // A plain card: no warnings.
    let id2 = id_of(&check(&s, &grant(47)).await);
    let html = page_of(&s, "/").await;
    let card = article(&html, &id2);
    assert!(!card.contains("class=\"warning\""), "{card}");
    assert!(card.contains("<p class=\"meta size\">arguments: 12 bytes as sent</p>"), "{card}");
    // Tool names are escaped too.
    let mut b = check_body(&grant(48), json!({}), 600, 0);
    b["tool"] = json!("start_vm\u{200b}");
    let id3 = id_of(&check_raw(&s, sign(b)).await.json());
    let html = page_of(&s, &format!("/approvals/{id3}")).await;
    let card = article(&html, &id3);
    assert!(card.contains("<span class=\"tool\">start_vm\\u200b</span>"), "{card}");
    assert!(card.contains("data-warning=\"escaped\""), "{card}");
}

#[tokio::test]
async fn long_arguments_are_approved_only_on_their_own_page() {
    let s = svc();
    let filler = "A".repeat(5000);
    let id =
        id_of(&check_raw(&s, check_body(&grant(49), json!({"cmd": filler, "then": "rm -rf /"}), 600, 0)).await.json());
    let raw = format!("{{\"cmd\":\"{filler}\",\"then\":\"rm -rf /\"}}");
    assert_eq!(raw.len(), 5028);
    let rendered = format!("{{\n  \"cmd\": \"{filler}\",\n  \"then\": \"rm -rf /\"\n}}");
    let html = page_of(&s, "/").await;
    let card = article(&html, &id);
    // Over 4096 bytes as sent: the list reads only their first 4096 bytes and shows them as sent.
    let head = raw[..4096].replace('"', "&quot;");
    assert!(card.contains(&format!("<pre class=\"arguments truncated\">{head}</pre>")), "{card}");
    assert!(card.contains(&format!(
        "<p class=\"truncated\">… 5028 bytes in all: <a href=\"/approvals/{id}\">open the approval to review them</a></p>"
    )));
    assert!(!card.contains("rm -rf"));
    assert!(!card.contains("value=\"approve\""), "no Approve on a cut card");
    assert!(card.contains("<button type=\"submit\" name=\"decision\" value=\"deny\" class=\"deny\">Deny</button>"));
    assert!(card.contains(&format!("<a href=\"/approvals/{id}\" class=\"review\">Review all arguments to approve</a>")));
    assert!(card.contains("<p class=\"meta size\">arguments: 5028 bytes as sent</p>"), "{card}");
    // The approval's page: everything, both buttons.
    let html = page_of(&s, &format!("/approvals/{id}")).await;
    let card = article(&html, &id);
    assert!(card.contains(&format!("<pre class=\"arguments\">{}</pre>", rendered.replace('"', "&quot;"))));
    assert!(
        card.contains("<button type=\"submit\" name=\"decision\" value=\"approve\" class=\"approve\">Approve</button>")
    );
    assert!(!card.contains("truncated"));
    // Exactly 4096 rendered bytes is shown whole, with Approve.
    let fits = "B".repeat(4096 - "{\n  \"c\": \"\"\n}".len());
    let id2 = id_of(&check_raw(&s, check_body(&grant(50), json!({"c": fits}), 600, 0)).await.json());
    let card = article(&html_of_index(&s).await, &id2).to_string();
    assert!(card.contains("value=\"approve\"") && !card.contains("truncated"), "{card}");
    // Short as sent (3001 bytes) but longer rendered (1500 lines): the first 4096 rendered bytes.
    let zeros = vec![0; 1500];
    let id3 = id_of(&check_raw(&s, check_body(&grant(55), json!(zeros), 600, 0)).await.json());
    let rendered = format!("[\n{}\n]", vec!["  0"; 1500].join(",\n"));
    assert_eq!(rendered.len(), 7502);
    let card = article(&html_of_index(&s).await, &id3).to_string();
    assert!(card.contains(&format!("<pre class=\"arguments truncated\">{}</pre>", &rendered[..4096])), "{card}");
    assert!(card.contains("… 7502 bytes in all: ") && !card.contains("value=\"approve\""), "{card}");
    assert!(card.contains("<p class=\"meta size\">arguments: 3001 bytes as sent</p>"), "{card}");
}

async fn html_of_index(s: &Svc) -> String {
    page_of(s, "/").await
}

#[tokio::test]
async fn buttons_wait_after_every_load() {
    let s = svc();
    check(&s, &grant(51)).await;
    let html = page_of(&s, "/").await;
    // Enabled in the HTML (no script: usable), disabled for 1.5 s by the page's script. The only
    // button disabled in the HTML is each form's hidden default button, so Enter in the note field
    // submits nothing instead of pressing Approve.
    assert_eq!(html.matches(" disabled").count(), 1, "{html}");
    assert!(html.contains(
        "class=\"decide\"><button type=\"submit\" class=\"no-enter\" disabled hidden aria-hidden=\"true\" \
         tabindex=\"-1\"></button><input type=\"hidden\" name=\"csrf\""
    ));
    assert!(html.contains("var b=document.querySelectorAll('form.decide button:not(.no-enter)');"));
    assert!(html.contains("setTimeout(function(){for(var i=0;i<b.length;i++)b[i].disabled=false;},1500);"));
    assert!(html.contains("button:disabled{opacity:.4;"));
    assert!(html.contains("<script nonce=\""));
}

#[tokio::test]
async fn index_shows_the_true_count_oldest_first() {
    let s = svc_with(Config { max_pending_per_grant: 1000, ..config() });
    let mut ids = Vec::new();
    for n in 0..205 {
        ids.push(id_of(&check_raw(&s, check_body(&grant(52), json!({"n": n}), 3600, 0)).await.json()));
        s.clock.advance(1);
    }
    let html = page_of(&s, "/").await;
    assert!(html.contains("<h2>Pending <span class=\"muted\" id=\"pending-count\">(205)</span></h2>"));
    assert!(html.contains("<p class=\"muted\" id=\"pending-shown\">showing the oldest 200 of 205</p>"));
    assert!(html.contains("<title>(205) MCP approvals</title>"));
    let shown: Vec<&str> =
        html.split("<article class=\"approval\" data-approval-id=\"").skip(1).map(|rest| &rest[..30]).collect();
    assert_eq!(shown, ids[..200].iter().map(String::as_str).collect::<Vec<_>>(), "the oldest 200, oldest first");
    // Under the limit: no "showing".
    let s = svc();
    let a = id_of(&check(&s, &grant(53)).await);
    s.clock.advance(1);
    let b = id_of(&check(&s, &grant(54)).await);
    let html = page_of(&s, "/").await;
    assert!(!html.contains("pending-shown"));
    assert!(html.find(&a).unwrap() < html.find(&b).unwrap(), "new cards join at the bottom");
}

#[tokio::test]
async fn recent_decisions_are_decisions_only() {
    let s = svc();
    let expired = id_of(&check_raw(&s, check_body(&grant(55), json!({}), 60, 0)).await.json());
    let denied = id_of(&check(&s, &grant(56)).await);
    deny(&s, &denied, "no").await;
    s.clock.advance(61);
    assert_eq!(s.app.expire_now().await.unwrap(), 1);
    let html = page_of(&s, "/").await;
    assert!(html.contains(&format!("<tr class=\"decision\" data-approval-id=\"{denied}\">")));
    assert!(!html.contains(&expired), "an expiry is not a decision");
    assert_eq!(html.matches("<tr class=\"decision\"").count(), 1);
}

#[tokio::test]
async fn retention_deletes_old_settled_approvals() {
    let s = svc();
    let day = 86_400;
    let consumed = id_of(&check(&s, &grant(57)).await);
    approve(&s, &consumed, "").await;
    assert_eq!(check(&s, &grant(57)).await["status"], "approved");
    let denied = id_of(&check(&s, &grant(58)).await);
    deny(&s, &denied, "").await;
    let expired = id_of(&check_raw(&s, check_body(&grant(59), json!({}), 60, 0)).await.json());
    s.clock.set(T0 + 90 * day);
    let pending = id_of(&check(&s, &grant(60)).await);
    // Last timestamps: expired T0 + 60 (its expiry); consumed T0 + 600 (the end of its window);
    // denied T0 + 600 (the denial's expiry). Kept until more than 90 days after them.
    s.clock.set(T0 + 60 + 90 * day);
    assert_eq!(s.app.purge_now().await.unwrap(), 0);
    s.clock.advance(1);
    assert_eq!(s.app.purge_now().await.unwrap(), 1);
    s.clock.set(T0 + 600 + 90 * day);
    assert_eq!(s.app.purge_now().await.unwrap(), 0);
    s.clock.advance(1);
    assert_eq!(s.app.purge_now().await.unwrap(), 2);
    let left = all_approvals(&s).await;
    let left: Vec<&str> = left["approvals"].as_array().unwrap().iter().map(|a| a["id"].as_str().unwrap()).collect();
    // The pending one expired meanwhile (T0 + 90 days + 600) but is recent: kept.
    assert_eq!(left, vec![pending.as_str()]);
    assert!(![consumed, denied, expired].iter().any(|id| left.contains(&id.as_str())));
    // 0 keeps everything.
    let s = svc_with(Config { retain_days: 0, ..config() });
    check_raw(&s, check_body(&grant(61), json!({}), 60, 0)).await;
    s.clock.advance(10_000 * day);
    assert_eq!(s.app.purge_now().await.unwrap(), 0);
    assert_eq!(all_approvals(&s).await["approvals"][0]["state"], "expired");
}

#[tokio::test]
async fn a_schema_1_file_is_migrated() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("old.sqlite");
    {
        let conn = rusqlite::Connection::open(&db).unwrap();
        conn.execute_batch(
            "CREATE TABLE approvals (id TEXT PRIMARY KEY, key TEXT NOT NULL, state TEXT NOT NULL \
             CHECK (state IN ('pending', 'approved', 'denied', 'consumed', 'expired')), grant_label TEXT NOT NULL, \
             tool TEXT NOT NULL, arguments TEXT NOT NULL, request_id TEXT NOT NULL, reason TEXT NOT NULL DEFAULT '', \
             created_at INTEGER NOT NULL, expires_in INTEGER NOT NULL, expires_at INTEGER NOT NULL, decided_at INTEGER, \
             approver TEXT, note TEXT NOT NULL DEFAULT '', consumed_at INTEGER, consumed_request_id TEXT) STRICT; \
             INSERT INTO approvals (id, key, state, grant_label, tool, arguments, request_id, created_at, expires_in, expires_at) \
             VALUES ('apr_00000000000000000000000000', 'k', 'pending', 'g', 't', '{}', '', 1764500000, 600, 1764500600); \
             PRAGMA user_version = 1;",
        )
        .unwrap();
    }
    let app = App::open(&db, config(), ManualClock::new(T0)).unwrap();
    let r = router(app);
    let got = send(
        &r,
        Request::get("/v1/approvals/apr_00000000000000000000000000")
            .header(header::AUTHORIZATION, format!("Bearer {ALICE}"))
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(got.json()["state"], "pending");
    let conn = rusqlite::Connection::open(&db).unwrap();
    let (v, gid): (i64, String) = conn
        .query_row("SELECT (SELECT user_version FROM pragma_user_version), grant_id FROM approvals", [], |r| {
            Ok((r.get(0)?, r.get(1)?))
        })
        .unwrap();
    assert_eq!((v, gid.as_str()), (4, ""));
}

// ---- second red-team pass: click-jacking window, numbers, whitespace, flooding ----

/// Opens an approval of `start_vm` by agent `grant_id` whose arguments are exactly the JSON text
/// `args` (numbers as written, not through serde_json); returns the answer.
async fn check_text(s: &Svc, grant_id: &str, label: &str, args: &str) -> Res {
    let body = format!(
        r#"{{"key":"{}","grant_id":"{grant_id}","grant":"{label}","tool":"start_vm","arguments":{args},"request_id":"","expires_in_seconds":600,"wait_seconds":0}}"#,
        key_of(grant_id, "start_vm", args)
    );
    send(&s.router, check_request(body)).await
}

fn warnings_of(card: &str) -> Vec<&str> {
    card.split("<p class=\"warning\" data-warning=\"").skip(1).map(|rest| &rest[..rest.find('"').unwrap()]).collect()
}

#[tokio::test]
async fn buttons_are_held_from_the_head_before_anything_paints() {
    let s = svc();
    check(&s, &grant(80)).await;
    let cookie = login(&s, "alice", ALICE).await;
    let r = send(&s.router, get("/", Some(&cookie))).await;
    let html = r.body;
    let csp = r.headers[header::CONTENT_SECURITY_POLICY].to_str().unwrap();
    let nonce = &csp[csp.find("'nonce-").unwrap() + 7..][..32];
    let head_script = format!(
        "<script nonce=\"{nonce}\">(function(){{var h=document.documentElement,t=0;\n\
         function hold(){{h.classList.add('hold');}}\n\
         function release(){{clearTimeout(t);t=setTimeout(function(){{h.classList.remove('hold');}},1500);}}\n\
         hold();document.addEventListener('DOMContentLoaded',release);\n\
         window.addEventListener('pagehide',hold);\n\
         window.addEventListener('pageshow',function(e){{if(e.persisted){{hold();release();}}}});}})();</script></head>"
    );
    let at = html.find(&head_script).unwrap_or_else(|| panic!("{html}"));
    assert!(at < html.find("<body").unwrap(), "the hold is set before <body>");
    assert!(html.find("html.hold form.decide button{pointer-events:none;opacity:.45}\n").unwrap() < at);
    // The buttons it holds; nothing is held in the HTML itself (no script: usable).
    assert!(html.contains("<form method=\"post\" action=\"/approvals/"));
    assert!(html.contains("class=\"decide\">"));
    assert!(!html.contains("class=\"hold\"") && !html.contains("<html lang=\"en\" class"));
    // The end-of-body disabling stays, with the same nonce.
    assert_eq!(html.matches(&format!("<script nonce=\"{nonce}\">")).count(), 2);
    // An approval's own page is held the same way; the login page has no script.
    let id = id_of(&check(&s, &grant(81)).await);
    let html = send(&s.router, get(&format!("/approvals/{id}"), Some(&cookie))).await.body;
    assert!(html.contains("window.addEventListener('pagehide',hold);"));
    let html = send(&s.router, get("/login", None)).await.body;
    assert!(!html.contains("<script"));
}

#[tokio::test]
async fn numbers_a_server_may_read_differently_get_a_badge() {
    let s = svc();
    let badge =
        "<p class=\"warning\" data-warning=\"numbers\"><strong class=\"badge\">numbers that a server may round or \
                 read differently (fractions, exponents, beyond ±2^53): shown exactly as sent</strong></p>";
    let cases: &[(&str, &str, bool)] = &[
        (r#"{"vmid":101.99999999999999999}"#, "{\n  &quot;vmid&quot;: 101.99999999999999999\n}", true),
        (r#"{"vmid":1e2}"#, "{\n  &quot;vmid&quot;: 1e2\n}", true),
        (r#"{"vmid":100.0}"#, "{\n  &quot;vmid&quot;: 100.0\n}", true),
        (r#"{"vmid":-0}"#, "{\n  &quot;vmid&quot;: -0\n}", true),
        (
            r#"{"a":[1,{"b":9007199254740993}]}"#,
            "{\n  &quot;a&quot;: [\n    1,\n    {\n      &quot;b&quot;: 9007199254740993\n    }\n  ]\n}",
            true,
        ),
        (r#"{"vmid":-9007199254740993}"#, "{\n  &quot;vmid&quot;: -9007199254740993\n}", true),
        (
            r#"{"vmid":123456789012345678901234567890}"#,
            "{\n  &quot;vmid&quot;: 123456789012345678901234567890\n}",
            true,
        ),
        // Exact in a double: no badge.
        (r#"{"vmid":9007199254740992}"#, "{\n  &quot;vmid&quot;: 9007199254740992\n}", false),
        (r#"{"vmid":-9007199254740992}"#, "{\n  &quot;vmid&quot;: -9007199254740992\n}", false),
        (
            r#"{"vmid":101,"z":0,"n":-5}"#,
            "{\n  &quot;vmid&quot;: 101,\n  &quot;z&quot;: 0,\n  &quot;n&quot;: -5\n}",
            false,
        ),
    ];
    for (args, pre, warn) in cases {
        let r = check_text(&s, &grant(82), "g", args).await;
        assert_eq!(r.status, StatusCode::OK, "{args}: {}", r.body);
        let id = id_of(&r.json());
        for path in ["/".to_string(), format!("/approvals/{id}")] {
            let html = page_of(&s, &path).await;
            let card = article(&html, &id);
            assert!(card.contains(&format!("<pre class=\"arguments\">{pre}</pre>")), "{args}: {card}");
            assert_eq!(warnings_of(card), if *warn { vec!["numbers"] } else { vec![] }, "{args}");
            assert_eq!(card.contains(badge), *warn, "{args}: {card}");
        }
    }
}

#[tokio::test]
async fn whitespace_and_lookalike_keys_get_warnings() {
    let s = svc();
    let ws = "<p class=\"warning\" data-warning=\"whitespace\"><strong class=\"badge\">strings with runs of spaces or \
              leading/trailing whitespace: check line breaks</strong></p>";
    let look = |path: &str, a: &str, b: &str| {
        format!(
            "<p class=\"warning\" data-warning=\"lookalike\"><strong class=\"badge\">keys that look alike in {path}: \
             &quot;{a}&quot; and &quot;{b}&quot; (equal without non-ASCII or invisible characters, punctuation or \
             spaces, or ignoring case)</strong></p>"
        )
    };
    let cases: Vec<(&str, Vec<&str>, Vec<String>)> = vec![
        (r#"{"cmd":"ls -l                                        rm -rf /"}"#, vec!["whitespace"], vec![ws.into()]),
        (r#"{"cmd":"ls    -l"}"#, vec!["whitespace"], vec![ws.into()]),
        (r#"{"cmd":" ls"}"#, vec!["whitespace"], vec![ws.into()]),
        (r#"{"cmd":"ls\n"}"#, vec!["escaped", "whitespace"], vec![ws.into()]),
        (r#"{"a":["x","y\t"]}"#, vec!["escaped", "whitespace"], vec![ws.into()]),
        // A key with trailing whitespace: both warnings.
        (
            r#"{"vmid":100,"vmid ":101}"#,
            vec!["whitespace", "lookalike"],
            vec![ws.into(), look("arguments", "vmid", "vmid ")],
        ),
        (r#"{"vm_id":100,"vm-id":101}"#, vec!["lookalike"], vec![look("arguments", "vm_id", "vm-id")]),
        (r#"{"o":{"vm.id":1,"VMID":2,"x":3}}"#, vec!["lookalike"], vec![look("arguments.o", "vm.id", "VMID")]),
        (
            r#"{"vm_id":1,"vm-id":2,"vm.id":3}"#,
            vec!["lookalike", "lookalike", "lookalike"],
            vec![
                look("arguments", "vm_id", "vm-id"),
                look("arguments", "vm_id", "vm.id"),
                look("arguments", "vm-id", "vm.id"),
            ],
        ),
        // Three spaces, inner single spaces, distinct keys: nothing.
        (r#"{"cmd":"ls   -l","vmid":1,"vmids":2,"node":"a b"}"#, vec![], vec![]),
    ];
    for (args, kinds, badges) in cases {
        let r = check_text(&s, &grant(83), "g", args).await;
        assert_eq!(r.status, StatusCode::OK, "{args}: {}", r.body);
        let id = id_of(&r.json());
        let html = page_of(&s, &format!("/approvals/{id}")).await;
        let card = article(&html, &id);
        assert_eq!(warnings_of(card), kinds, "{args}");
        for b in &badges {
            assert!(card.contains(b.as_str()), "{args}: {card}");
        }
    }
}

#[tokio::test]
async fn pending_approvals_are_capped_in_all() {
    let s = svc_with(Config { max_pending: 3, ..config() });
    let mut ids = Vec::new();
    for n in 0..3u8 {
        let r = check_raw(&s, check_body(&grant(90 + n), json!({"vmid": 1}), 600, 0)).await;
        assert_eq!(r.status, StatusCode::OK);
        ids.push(id_of(&r.json()));
    }
    // Rotating credentials does not get past it.
    for n in 3..6u8 {
        let r = check_raw(&s, check_body(&grant(90 + n), json!({"vmid": 1}), 600, 30)).await;
        assert_eq!(r.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(
            r.json(),
            json!({"error": "there are already 3 pending approvals (at most 3 in all): decide them or let them expire"})
        );
    }
    // Existing ones are still answered; a decision frees a place.
    let again = check_raw(&s, check_body(&grant(91), json!({"vmid": 1}), 600, 0)).await;
    assert_eq!((again.status, id_of(&again.json())), (StatusCode::OK, ids[1].clone()));
    assert_eq!(deny(&s, &ids[0], "no").await.status, StatusCode::OK);
    assert_eq!(check_raw(&s, check_body(&grant(93), json!({"vmid": 1}), 600, 0)).await.status, StatusCode::OK);
    assert_eq!(
        check_raw(&s, check_body(&grant(94), json!({"vmid": 1}), 600, 0)).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
    // The per-grant cap answers first when both apply.
    let s = svc_with(Config { max_pending: 2, max_pending_per_grant: 2, ..config() });
    for vmid in 0..2 {
        assert_eq!(check_raw(&s, check_body(&grant(95), json!({"vmid": vmid}), 600, 0)).await.status, StatusCode::OK);
    }
    let r = check_raw(&s, check_body(&grant(95), json!({"vmid": 2}), 600, 0)).await;
    assert_eq!(
        r.json(),
        json!({"error": "this grant already has 2 pending approvals (at most 2 per grant): decide them or let them expire"})
    );
    let r = check_raw(&s, check_body(&grant(96), json!({"vmid": 2}), 600, 0)).await;
    assert_eq!(
        r.json(),
        json!({"error": "there are already 2 pending approvals (at most 2 in all): decide them or let them expire"})
    );
    let m = send(&s.router, get("/metrics", None)).await.body;
    assert!(m.contains("mcp_approvals_checks_total{status=\"too_many_pending\"} 2\n"), "{m}");
    assert!(m.contains("mcp_approvals_pending 2\n"), "{m}");
}

/// Arguments `{"a":"xxx…"}` of exactly `len` bytes as sent.
fn args_of_len(len: usize) -> String {
    format!("{{\"a\":\"{}\"}}", "x".repeat(len - 8))
}

#[tokio::test]
async fn arguments_over_the_limit_are_413() {
    let s = svc();
    assert_eq!(mcp_approvals::DEFAULT_MAX_ARGUMENTS_BYTES, 65_536);
    assert_eq!(check_text(&s, &grant(97), "g", &args_of_len(65_536)).await.status, StatusCode::OK);
    let r = check_text(&s, &grant(97), "g", &args_of_len(65_537)).await;
    assert_eq!((r.status, r.json()), (StatusCode::PAYLOAD_TOO_LARGE, json!({"error": "arguments exceed 65536 bytes"})));
    // Checked before the key: a big body with a wrong key is 413 too.
    let mut b = check_body(&grant(97), json!({"a": "x".repeat(70_000)}), 600, 0);
    b["key"] = json!("0".repeat(64));
    let r = check_raw(&s, b).await;
    assert_eq!((r.status, r.json()), (StatusCode::PAYLOAD_TOO_LARGE, json!({"error": "arguments exceed 65536 bytes"})));
    // The limit is the flag's; whitespace sent inside the arguments counts.
    let s = svc_with(Config { max_arguments_bytes: 16, ..config() });
    assert_eq!(check_text(&s, &grant(97), "g", &args_of_len(16)).await.status, StatusCode::OK);
    let r = check_text(&s, &grant(97), "g", "{\"a\":  \"xxxxxxx\"}").await;
    assert_eq!((r.status, r.json()), (StatusCode::PAYLOAD_TOO_LARGE, json!({"error": "arguments exceed 16 bytes"})));
    let m = send(&s.router, get("/metrics", None)).await.body;
    assert!(m.contains("mcp_approvals_bad_requests_total 1\n"), "{m}");
    assert!(m.contains("mcp_approvals_opened_total 1\n"), "{m}");
}

#[test]
fn the_list_reads_at_most_4096_bytes_of_arguments_per_row() {
    use mcp_approvals::store::{Backend, CheckInput};
    let dir = tempfile::tempdir().unwrap();
    let backend = Backend::open(&new_db(dir.path()), 2).unwrap();
    // 4094 ASCII bytes then 3-byte characters: byte 4096 is inside the first one.
    let long = format!("[\"{}{}\"]", "x".repeat(4092), "\u{2028}".repeat(40_000));
    let short = "{\"vmid\":1}".to_string();
    for (n, args) in [(0u8, &long), (1, &short)] {
        let input = CheckInput {
            key: format!("{n:02x}").repeat(32),
            grant_id: grant(98),
            grant: "g".into(),
            tool: "t".into(),
            arguments: args.clone(),
            request_id: String::new(),
            expires_in: 600,
            reason: String::new(),
            input_responses: String::new(),
            request_state: None,
        };
        backend.with(|st| st.check(&input, T0 + i64::from(n), &format!("apr_{n:026}"), 20, 1000)).unwrap();
    }
    let (page, _) = backend.with(|st| st.pending(T0 + 2, 200, 4096, 10)).unwrap();
    let got: Vec<(&str, usize)> =
        page.list.iter().map(|l| (l.approval.arguments.as_str(), l.arguments_bytes)).collect();
    let cut = format!("[\"{}", "x".repeat(4092));
    assert_eq!(cut.len(), 4094);
    assert_eq!(got, vec![(cut.as_str(), long.len()), (short.as_str(), 10)]);
    assert_eq!(long.len(), 124_096);
    assert_eq!((page.total, page.grants_total, page.grants.len()), (2, 1, 1));
    assert!(!page.list[0].complete() && page.list[1].complete());
}

#[tokio::test]
async fn the_list_page_shows_the_start_of_long_arguments_as_sent() {
    let s = svc_with(Config { max_pending_per_grant: 1000, ..config() });
    // 200 pending approvals of 64 KiB of arguments each, one with characters to escape.
    let mut ids = Vec::new();
    for n in 0..200 {
        let args = if n == 0 {
            format!("{{\"a\":\"\u{200b}{}\",\"b\":1.5}}", "x".repeat(65_536 - 23))
        } else {
            args_of_len(65_537 - n.to_string().len()).replacen("{\"a\"", &format!("{{\"{n}\""), 1)
        };
        assert_eq!(args.len(), if n == 0 { 65_532 } else { 65_536 });
        let r = check_text(&s, &grant(99), "g", &args).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        ids.push(id_of(&r.json()));
        s.clock.advance(1);
    }
    let cookie = login(&s, "alice", ALICE).await;
    let started = std::time::Instant::now();
    let r = send(&s.router, get("/", Some(&cookie))).await;
    let took = started.elapsed();
    assert_eq!(r.status, StatusCode::OK);
    let html = r.body;
    eprintln!("GET / with 200 pending approvals of 64 KiB: {} bytes in {took:?}", html.len());
    assert_eq!(html.matches("<article class=\"approval\"").count(), 200);
    // The first: the start as sent, escaped, no Approve, no warnings about what was not read.
    let card = article(&html, &ids[0]);
    let head = format!("{{&quot;a&quot;:&quot;\\u200b{}", "x".repeat(4096 - 6 - 6));
    assert!(card.contains(&format!("<pre class=\"arguments truncated\">{head}</pre>")), "{card}");
    assert!(card.contains("<p class=\"truncated\">… 65532 bytes in all: "), "{card}");
    assert!(card.contains("<p class=\"meta size\">arguments: 65532 bytes as sent</p>"));
    assert_eq!(warnings_of(card), vec!["escaped"]);
    assert!(!card.contains("value=\"approve\""));
    let card = article(&html, &ids[199]);
    let head = format!("{{&quot;199&quot;:&quot;{}", "x".repeat(4096 - 8));
    assert!(card.contains(&format!("<pre class=\"arguments truncated\">{head}</pre>")), "{card}");
    assert!(card.contains("<p class=\"truncated\">… 65536 bytes in all: "), "{card}");
    // About 4 KiB per card, not 64.
    assert!(html.len() < 200 * 6 * 1024, "{}", html.len());
    // The approval's own page has all of it.
    let html = page_of(&s, &format!("/approvals/{}", ids[0])).await;
    let card = article(&html, &ids[0]);
    assert!(card
        .contains(&format!("  &quot;a&quot;: &quot;\\u200b{}&quot;,\n  &quot;b&quot;: 1.5\n}}", "x".repeat(65_513))));
    assert_eq!(warnings_of(card), vec!["escaped", "numbers"]);
}

#[tokio::test]
async fn the_heading_counts_pending_approvals_per_grant() {
    let s = svc();
    // One grant: no per-grant line.
    check_text(&s, &grant(100), "agent-a", "{\"n\":0}").await;
    assert!(!page_of(&s, "/").await.contains("pending-by-grant"));
    // Three grants: most first, then by grant id.
    for n in 1..3 {
        check_text(&s, &grant(100), "agent-a", &format!("{{\"n\":{n}}}")).await;
    }
    check_text(&s, &grant(101), "agent-<b>", "{\"n\":0}").await;
    for n in 0..2 {
        check_text(&s, &grant(102), "agent-c", &format!("{{\"n\":{n}}}")).await;
    }
    let html = page_of(&s, "/").await;
    let count = |g: u8, label: &str, n: i64| {
        format!(
            "<span class=\"grant-count\" data-grant-id=\"{}\"><span class=\"mono\">{label}</span>: {n}</span>",
            grant(g)
        )
    };
    let want = format!(
        "<h2>Pending <span class=\"muted\" id=\"pending-count\">(6)</span></h2><p class=\"muted\" id=\"pending-by-grant\">\
         by grant (3 grants): {} · {} · {}</p><section id=\"pending\">",
        count(100, "agent-a", 3),
        count(102, "agent-c", 2),
        count(101, "agent-&lt;b&gt;", 1)
    );
    assert!(html.contains(&want), "{html}");
    // Twelve grants: the top 10 and how many more.
    for g in 103..112 {
        check_text(&s, &grant(g), &format!("agent-{g}"), "{\"n\":0}").await;
    }
    let html = page_of(&s, "/").await;
    let mut tail: Vec<String> = (103..111).map(|g| count(g, &format!("agent-{g}"), 1)).collect();
    tail.insert(0, count(101, "agent-&lt;b&gt;", 1));
    let want = format!(
        "<p class=\"muted\" id=\"pending-by-grant\">by grant (12 grants): {} · {} · {} · 2 more grants</p>",
        count(100, "agent-a", 3),
        count(102, "agent-c", 2),
        tail[..8].join(" · ")
    );
    assert!(html.contains(&want), "{html}");
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

#[tokio::test]
async fn sessions_are_stored_hashed_survive_a_restart_and_end_at_logout() {
    let s = svc();
    let cookie = login(&s, "alice", ALICE).await;
    let sid = cookie.split_once('=').unwrap().1.to_string();
    let page = send(&s.router, get("/", Some(&cookie))).await;
    assert_eq!(page.status, StatusCode::OK);
    let csrf = csrf_of(&page.body);
    // The id itself is not stored, only its SHA-256.
    let stored_hash = {
        use sha2::Digest;
        let d = sha2::Sha256::digest(sid.as_bytes());
        d.iter().map(|b| format!("{b:02x}")).collect::<String>()
    };
    let stored: Vec<String> = match &s.db {
        Location::Sqlite(p) => {
            let c = rusqlite::Connection::open(p).unwrap();
            let mut st = c.prepare("SELECT id_hash FROM sessions").unwrap();
            st.query_map([], |r| r.get(0)).unwrap().map(Result::unwrap).collect()
        }
        Location::Postgres(url) => with_pg(url.clone(), |c| {
            c.query("SELECT id_hash FROM sessions", &[]).unwrap().iter().map(|r| r.get(0)).collect()
        }),
    };
    assert_eq!(stored, vec![stored_hash]);
    // A restart keeps the session (and its CSRF token).
    let db = s.db.clone();
    let clock = s.clock.clone();
    let Svc { app, router: old, _dir, .. } = s;
    drop(old);
    drop(app);
    let app = App::open(db.clone(), config(), clock.clone()).unwrap();
    let s = Svc { router: router(app.clone()), app, clock, db, _dir };
    let r = send(&s.router, get("/", Some(&cookie))).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(csrf_of(&r.body), csrf);
    // A second instance on the same database accepts it too; logout there ends it everywhere.
    let b = second_instance(&s);
    assert_eq!(send(&b.router, get("/ui/version", Some(&cookie))).await.status, StatusCode::OK);
    let out = send(&b.router, form("/logout", Some(&cookie), &[("csrf", &csrf)])).await;
    assert_eq!(out.status, StatusCode::SEE_OTHER);
    assert_eq!(send(&s.router, get("/ui/version", Some(&cookie))).await.status, StatusCode::UNAUTHORIZED);
    assert_eq!(send(&b.router, get("/ui/version", Some(&cookie))).await.status, StatusCode::UNAUTHORIZED);
    // Sessions expire after 12 hours.
    let cookie = login(&s, "alice", ALICE).await;
    assert_eq!(send(&b.router, get("/ui/version", Some(&cookie))).await.status, StatusCode::OK);
    s.clock.advance(12 * 3600);
    assert_eq!(send(&b.router, get("/ui/version", Some(&cookie))).await.status, StatusCode::UNAUTHORIZED);
}

/// PostgreSQL only: a hold-mode check waiting on one instance is woken by a decision made on
/// another (LISTEN/NOTIFY), not by its own timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hold_mode_is_woken_by_a_decision_on_another_instance() {
    if pg_base().is_none() {
        // One SQLite file serves one instance: nothing to wake across processes.
        return;
    }
    let a = svc();
    let b = second_instance(&a);
    let k = grant(70);
    let id = id_of(&check(&a, &k).await);
    let router = a.router.clone();
    let body = check_body(&k, json!({"vmid": 100}), 600, 60).to_string();
    let held = tokio::spawn(async move { send(&router, check_request(body)).await.json() });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!held.is_finished());
    let decided = std::time::Instant::now();
    assert_eq!(approve(&b, &id, "from b").await.status, StatusCode::OK);
    let v = tokio::time::timeout(Duration::from_secs(10), held).await.unwrap().unwrap();
    let waited = decided.elapsed();
    assert_eq!(v, json!({"status": "approved", "approval_id": id, "approver": "alice", "note": "from b"}));
    assert!(waited < Duration::from_secs(3), "woken {waited:?} after the decision");
}

#[tokio::test]
async fn nul_characters_are_refused_on_every_store() {
    let s = svc();
    let mut b = check_body(&grant(71), json!({"vmid": 100}), 600, 0);
    b["tool"] = json!("start\u{0}vm");
    let r = check_raw(&s, sign(b)).await;
    assert_eq!((r.status, r.json()), (StatusCode::BAD_REQUEST, json!({"error": "tool: must not contain U+0000"})));
    let mut b = check_body(&grant(71), json!({"vmid": 100}), 600, 0);
    b["reason"] = json!("a\u{0}");
    assert_eq!(check_raw(&s, b).await.status, StatusCode::BAD_REQUEST);
    // In the arguments it is an escape sequence, kept verbatim.
    let r = check_raw(&s, check_body(&grant(71), json!({"s": "a\u{0}b"}), 600, 0)).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let id = id_of(&r.json());
    let r = approve(&s, &id, "x\u{0}").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert_eq!(all_approvals(&s).await["approvals"][0]["arguments"], json!({"s": "a\u{0}b"}));
}

/// PostgreSQL only: the LISTEN connection is killed by the server; the instance reconnects and
/// cross-instance wake-ups keep working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hold_mode_wakeups_survive_a_lost_listen_connection() {
    let Some(base) = pg_base() else {
        return;
    };
    let a = svc();
    let b = second_instance(&a);
    let Location::Postgres(url) = a.db.clone() else { unreachable!() };
    let db = url.rsplit_once('/').unwrap().1.to_string();
    // Each instance opens its LISTEN connection in the background: wait until both are there (on
    // a loaded machine that can take a while), so the kill below hits both.
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let (base, db) = (base.clone(), db.clone());
        let listening: i64 = with_pg(base, move |c| {
            c.query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'mcp-approvals listen' AND datname = $1",
                &[&db],
            )
            .unwrap()
            .get(0)
        });
        if listening == 2 || std::time::Instant::now() > deadline {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let killed = with_pg(base, move |c| {
        c.query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE application_name = 'mcp-approvals listen' AND datname = $1",
            &[&db],
        )
        .unwrap()
        .len()
    });
    assert_eq!(killed, 2, "one LISTEN connection per instance");
    // Reconnects after 0.1 s (the first backoff step); give it time.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let k = grant(72);
    let id = id_of(&check(&a, &k).await);
    let router = a.router.clone();
    let body = check_body(&k, json!({"vmid": 100}), 600, 60).to_string();
    let held = tokio::spawn(async move { send(&router, check_request(body)).await.json() });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!held.is_finished());
    let decided = std::time::Instant::now();
    assert_eq!(approve(&b, &id, "after reconnect").await.status, StatusCode::OK);
    let v = tokio::time::timeout(Duration::from_secs(10), held).await.unwrap().unwrap();
    assert_eq!(v["status"], "approved");
    assert!(decided.elapsed() < Duration::from_secs(3), "woken {:?} after the decision", decided.elapsed());
}
