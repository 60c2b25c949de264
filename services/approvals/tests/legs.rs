//! Continuation legs of MCP 2026-07-28 multi-round-trip requests (`input_required`): the check
//! carries `input_responses` and `request_state`, the key binds them, the API and the page show
//! them, and an approval of one leg (or one set of answers) never covers another. Runs on SQLite,
//! and on PostgreSQL when `MCP_APPROVALS_TEST_PG` is set (`make test` runs both).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

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
const GRANT: &str = "4a4a4a4a4a4a4a4a4a4a4a4a4a4a4a4a4a4a4a4a4a4a4a4a4a4a4a4a4a4a4a4a";

fn new_db(dir: &Path) -> Location {
    static N: AtomicU64 = AtomicU64::new(0);
    match std::env::var("MCP_APPROVALS_TEST_PG").ok().filter(|s| !s.is_empty()) {
        Some(base) => {
            let name = format!("l{}_{}", std::process::id(), N.fetch_add(1, Ordering::SeqCst));
            let create = format!("CREATE DATABASE {name}");
            let url = base.clone();
            std::thread::spawn(move || {
                postgres::Client::connect(&url, postgres::NoTls).unwrap().batch_execute(&create).unwrap()
            })
            .join()
            .unwrap();
            let (prefix, _) = base.rsplit_once('/').unwrap();
            Location::Postgres(format!("{prefix}/{name}"))
        }
        None => Location::Sqlite(dir.join("approvals.sqlite")),
    }
}

struct Svc {
    router: Router,
    _dir: tempfile::TempDir,
}

fn svc() -> Svc {
    let dir = tempfile::tempdir().unwrap();
    let mut approvers = Approvers::default();
    approvers.add_spec(&format!("alice={ALICE}")).unwrap();
    let app = App::open(new_db(dir.path()), Config::new(PUBLIC, approvers), ManualClock::new(T0)).unwrap();
    Svc { router: router(app), _dir: dir }
}

struct Res {
    status: StatusCode,
    headers: HeaderMap,
    body: String,
}

async fn send(s: &Svc, req: Request<Body>) -> Res {
    let res = s.router.clone().oneshot(req).await.unwrap();
    let (status, headers) = (res.status(), res.headers().clone());
    let bytes = res.into_body().collect().await.unwrap().to_bytes();
    Res { status, headers, body: String::from_utf8(bytes.to_vec()).unwrap() }
}

/// The filter's key (crates/core/src/approval.rs `key_with`).
fn key_of(args: &str, answers: Option<&str>, state: Option<&str>) -> String {
    let mut g = [0u8; 32];
    for (i, b) in g.iter_mut().enumerate() {
        *b = u8::from_str_radix(&GRANT[2 * i..2 * i + 2], 16).unwrap();
    }
    let parse = |t: &str| mcp_policy_core::wire::json::parse(t.as_bytes()).unwrap();
    let up = mcp_approvals::store::Upstream { cluster: "mcp_a".into(), authority: "gw".into(), path: "/mcp".into() };
    mcp_policy_core::approval::key_with(&g, &up, "delete_vm", Some(&parse(args)), answers.map(parse).as_ref(), state)
}

/// A check body as the filter sends it (text, so the answers' bytes are exactly these).
fn body(answers: Option<&str>, state: Option<&str>, key: &str) -> String {
    let mut b = format!(
        r#"{{"key":"{key}","grant_id":"{GRANT}","grant":"sha256:4a4a","tool":"delete_vm","upstream":{{"cluster":"mcp_a","authority":"gw","path":"/mcp"}},"arguments":{{"vmid":100}},"request_id":"r","expires_in_seconds":600,"wait_seconds":0"#
    );
    if let Some(a) = answers {
        b.push_str(&format!(r#","input_responses":{a}"#));
    }
    if let Some(s) = state {
        b.push_str(&format!(r#","request_state":{}"#, json!(s)));
    }
    b.push('}');
    b
}

async fn check(s: &Svc, answers: Option<&str>, state: Option<&str>) -> Res {
    let key = key_of(r#"{"vmid":100}"#, answers, state);
    let req = Request::post("/v1/check").header(header::CONTENT_TYPE, "application/json");
    send(s, req.body(Body::from(body(answers, state, &key))).unwrap()).await
}

async fn check_ok(s: &Svc, answers: Option<&str>, state: Option<&str>) -> Value {
    let r = check(s, answers, state).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    serde_json::from_str(&r.body).unwrap()
}

async fn api(s: &Svc, method: Method, path: &str) -> Value {
    let req = Request::builder().method(method).uri(path).header(header::AUTHORIZATION, format!("Bearer {ALICE}"));
    let body = if path.ends_with("approve") { Body::from("{}") } else { Body::empty() };
    let r = send(s, req.body(body).unwrap()).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    serde_json::from_str(&r.body).unwrap()
}

const ANSWERS: &str = r#"{"confirm": {"action":"accept","content":{"name":"web-01\u200b"}}}"#;

#[tokio::test]
async fn each_leg_needs_its_own_approval_and_shows_its_answers() {
    let s = svc();
    // Leg 1: approved and consumed.
    let p1 = check_ok(&s, None, None).await;
    assert_eq!(p1["status"], "pending");
    let id1 = p1["approval_id"].as_str().unwrap().to_string();
    api(&s, Method::POST, &format!("/v1/approvals/{id1}/approve")).await;
    assert_eq!(check_ok(&s, None, None).await["status"], "approved");
    let first = api(&s, Method::GET, &format!("/v1/approvals/{id1}")).await;
    assert_eq!((first.get("continuation"), first.get("input_responses")), (None, None));

    // Leg 2 (the server answered input_required): a new approval, showing the answers as sent.
    let p2 = check_ok(&s, Some(ANSWERS), Some("st-1")).await;
    assert_eq!(p2["status"], "pending");
    let id2 = p2["approval_id"].as_str().unwrap().to_string();
    assert_ne!(id2, id1);
    let got = api(&s, Method::GET, &format!("/v1/approvals/{id2}")).await;
    assert_eq!(got["continuation"], true);
    assert_eq!(got["input_responses"], json!({"confirm":{"action":"accept","content":{"name":"web-01\u{200b}"}}}));
    assert_eq!(got["request_state"], "st-1");
    assert_eq!(got["key"], key_of(r#"{"vmid":100}"#, Some(ANSWERS), Some("st-1")));

    // Other answers or another state: other approvals, still pending after leg 2 is approved.
    let other = r#"{"confirm":{"action":"accept","content":{"name":"db-01"}}}"#;
    let p3 = check_ok(&s, Some(other), Some("st-1")).await;
    let p4 = check_ok(&s, Some(ANSWERS), Some("st-2")).await;
    let p5 = check_ok(&s, Some(ANSWERS), None).await;
    let ids: Vec<&str> = [&p3, &p4, &p5].iter().map(|p| p["approval_id"].as_str().unwrap()).collect();
    assert!(ids.iter().all(|i| *i != id2 && *i != id1), "{ids:?}");
    api(&s, Method::POST, &format!("/v1/approvals/{id2}/approve")).await;
    for (a, st) in [(Some(other), Some("st-1")), (Some(ANSWERS), Some("st-2")), (Some(ANSWERS), None), (None, None)] {
        assert_eq!(check_ok(&s, a, st).await["status"], "pending", "{a:?} {st:?}");
    }
    // The same answers written differently are the same call.
    let same = r#"{"confirm":{"content":{"name":"web-01\u200B"},"action":"accept"}}"#;
    let ok = check_ok(&s, Some(same), Some("st-1")).await;
    assert_eq!((ok["status"].as_str(), ok["approval_id"].as_str()), (Some("approved"), Some(id2.as_str())));
    assert_eq!(check_ok(&s, Some(ANSWERS), Some("st-1")).await["status"], "pending", "used once");

    // The page shows the answers escaped, whole, with the continuation badge; the list only a notice.
    let r = send(
        &s,
        Request::post("/login")
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(Body::from(format!("name=alice&token={ALICE}&next=%2F")))
            .unwrap(),
    )
    .await;
    let cookie = r.headers[header::SET_COOKIE].to_str().unwrap().split(';').next().unwrap().to_string();
    let page = |path: String| Request::get(path).header(header::COOKIE, cookie.clone()).body(Body::empty()).unwrap();
    let id3 = ids[0];
    let html = send(&s, page(format!("/approvals/{id3}"))).await.body;
    assert!(html.contains(mcp_approvals::web::leg::CONTINUATION_BADGE.split(':').next().unwrap()), "{html}");
    assert!(html.contains("<pre class=\"arguments input-responses\">{\n  &quot;confirm&quot;: {\n    &quot;action&quot;: &quot;accept&quot;,\n    &quot;content&quot;: {\n      &quot;name&quot;: &quot;db-01&quot;\n    }\n  }\n}</pre>"), "{html}");
    assert!(html.contains("<pre class=\"request-state\">st-1</pre>"), "{html}");
    assert!(html.contains("value=\"approve\""), "approved from its own page");
    let id4 = ids[1];
    let html = send(&s, page(format!("/approvals/{id4}"))).await.body;
    assert!(html.contains("data-warning=\"answers-escaped\""), "{html}");
    assert!(html.contains("web-01\\u200b"), "{html}");
    let list = send(&s, page("/".into())).await.body;
    let card = &list[list.find(&format!("data-approval-id=\"{id3}\"")).unwrap()..];
    let card = &card[..card.find("</article>").unwrap()];
    assert!(card.contains("open the approval to review the answers"), "{card}");
    assert!(card.contains("Review the answers to approve") && !card.contains("value=\"approve\""), "{card}");
    assert!(!card.contains("db-01"), "{card}");
}

#[tokio::test]
async fn leg_fields_are_checked() {
    let s = svc();
    let key = key_of(r#"{"vmid":100}"#, Some(ANSWERS), Some("st-1"));
    let post = |b: String| {
        Request::post("/v1/check").header(header::CONTENT_TYPE, "application/json").body(Body::from(b)).unwrap()
    };
    // The key must cover the answers: the key of leg 1 with leg 2's answers is refused.
    let r = send(&s, post(body(Some(ANSWERS), Some("st-1"), &key_of(r#"{"vmid":100}"#, None, None)))).await;
    assert_eq!(
        (r.status, r.body.as_str()),
        (StatusCode::BAD_REQUEST, r#"{"error":"key does not match grant_id, upstream, tool and arguments"}"#)
    );
    for (b, want) in [
        (body(Some("[]"), Some("st-1"), &key), "input_responses: must be an object"),
        (
            body(Some(ANSWERS), None, &key).replace("}}}}", "}}},\"request_state\":5}"),
            "request_state: must be a string",
        ),
        (body(Some(r#"{"a":1,"a":2}"#), None, &key), "body is not strict JSON: duplicate object key at byte "),
    ] {
        let r = send(&s, post(b)).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
        let err: Value = serde_json::from_str(&r.body).unwrap();
        assert!(err["error"].as_str().unwrap().starts_with(want), "{want}: {}", r.body);
    }
    assert_eq!(check(&s, Some(ANSWERS), Some("st-1")).await.status, StatusCode::OK);
}
