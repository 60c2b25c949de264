//! Hardening: forged checks, cross-origin checks, the separate check listener, the per-grant cap.

use super::*;

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
        // The same call to another MCP server.
        key_to(
            &grant(40),
            &json!({"cluster": "mcp_b", "authority": "gw:10000", "path": "/b/mcp"}),
            "start_vm",
            r#"{"vmid":100}"#,
        ),
    ];
    for k in forged_keys {
        let mut b = harmless.clone();
        b["key"] = json!(k);
        let r = check_raw(&s, b).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST);
        assert_eq!(r.json(), json!({"error": "key does not match grant_id, upstream, tool and arguments"}));
    }
    let mut b = harmless.clone();
    b.as_object_mut().unwrap().remove("upstream");
    assert_eq!(check_raw(&s, b).await.json(), json!({"error": "upstream: missing"}));
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
    assert!(m.contains("mcp_approvals_bad_requests_total 9\n"), "{m}");
    // The right key works; absent arguments are {} on both sides.
    assert_eq!(check_raw(&s, harmless).await.status, StatusCode::OK);
}

/// Two MCP servers behind one Envoy: an approval given for a call to one is never used by the
/// identical call to the other, which opens its own; each approval names its server in the API and
/// on its page.
#[tokio::test]
async fn the_same_call_to_another_upstream_needs_its_own_approval() {
    let s = svc();
    let up_b = json!({"cluster": "mcp_b", "authority": "gw:10000", "path": "/b/mcp"});
    let on = |upstream: &Value| {
        let mut b = check_body(&grant(48), json!({"vmid": 100}), 600, 0);
        b["upstream"] = upstream.clone();
        sign(b)
    };
    let a = check_raw(&s, on(&up_a())).await.json();
    assert_eq!(a["status"], "pending");
    assert_eq!(approve(&s, &id_of(&a), "").await.status, StatusCode::OK);
    // Server B: not approved, a pending approval of its own.
    let b = check_raw(&s, on(&up_b)).await.json();
    assert_eq!(b["status"], "pending");
    assert_ne!(id_of(&b), id_of(&a));
    // Server A: the approval given for it lets its call through, once.
    let used = check_raw(&s, on(&up_a())).await.json();
    assert_eq!((used["status"].clone(), id_of(&used)), (json!("approved"), id_of(&a)));
    assert_eq!(check_raw(&s, on(&up_b)).await.json()["approval_id"], b["approval_id"]);
    for (id, up) in [(id_of(&a), up_a()), (id_of(&b), up_b.clone())] {
        let got = api(&s, Method::GET, &format!("/v1/approvals/{id}"), Some(ALICE), None).await.json();
        assert_eq!(got["upstream"], up, "{id}");
    }
    let html = page_of(&s, &format!("/approvals/{}", id_of(&b))).await;
    assert!(
        article(&html, &id_of(&b)).contains(
            "<p class=\"upstream\">server: cluster <b class=\"mono cluster\">mcp_b</b> · <span class=\"mono target\">\
             <span class=\"authority\">gw:10000</span><span class=\"path\">/b/mcp</span></span></p>"
        ),
        "{html}"
    );
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
    // SIGTERM: both listeners report not-serving at once, so Envoy drains this instance.
    s.app.begin_shutdown();
    for router in [&pages, &checks] {
        let r = send(router, get("/healthz", None)).await;
        assert_eq!((r.status, r.body.as_str()), (StatusCode::SERVICE_UNAVAILABLE, "shutting down"));
    }
    for path in ["/", "/login", "/metrics", "/v1/approvals", "/ui/version"] {
        assert_eq!(send(&checks, get(path, None)).await.status, StatusCode::NOT_FOUND, "{path}");
    }
    let r = api_on(&pages, Method::GET, "/v1/approvals", Some(ALICE), None).await;
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
