//! Checks and their outcomes: pending, approved once, denied, expiry, hold mode, restarts, the
//! schema's one-pending rule, bad bodies, the JSON API, `/healthz` and `/metrics`.

use super::*;

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
    let started = std::time::Instant::now();
    let held = held_check(&s, &k, 30);
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
    let held = held_check(&s, &k, 30);
    tokio::time::sleep(Duration::from_millis(200)).await;
    // An approval opened elsewhere changes no waiting check's answer: it wakes none (an agent that
    // opens many would otherwise make every held check run again each time).
    let settled = s.app.subscribe_settled();
    check(&s, &grant(11)).await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!held.is_finished());
    assert!(!settled.has_changed().unwrap());
    assert_eq!(deny(&s, &id, "no").await.status, StatusCode::OK);
    assert!(settled.has_changed().unwrap());
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
            assert_eq!(version, 6);
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
            assert_eq!(versions, vec![2, 3, 4, 5, 6]);
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
            "act",
            "approval_url",
            "approver",
            "arguments",
            "client_id",
            "consumed_at",
            "created_at",
            "decided_at",
            "expires_at",
            "grant",
            "id",
            "key",
            "note",
            "policy",
            "reason",
            "request_id",
            "state",
            "subject",
            "tool",
            "upstream"
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
    let m = send(&s.router, Request::get("/metrics").body(Body::empty()).unwrap()).await;
    assert!(m.body.lines().any(|l| l == "mcp_approvals_oldest_pending_age_seconds 0"), "{}", m.body);
    check(&s, &grant(19)).await;
    s.clock.advance(30);
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
        "mcp_approvals_oldest_pending_age_seconds 30",
    ] {
        assert!(m.body.lines().any(|l| l == line), "{line} in {}", m.body);
    }
}
