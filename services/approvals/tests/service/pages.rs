//! The web pages: login, CSRF and same-origin checks, deciding on the page.

use super::*;

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
        r#"{{"key":"{}","grant_id":"{}","grant":"g","tool":"t","upstream":{UP},"arguments":{args},"request_id":"","expires_in_seconds":60,"wait_seconds":0}}"#,
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
