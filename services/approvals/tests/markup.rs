//! Markup in anything a request or an approver sends is rendered inert on the pages: the tool
//! name, argument keys and values, the grant label, the reason, the request id, the answers of a
//! continuation leg (`inputResponses`) and its `requestState`, and an approver's note. The pages
//! are `maud` templates, so every value is HTML-escaped by default; these tests pin the exact
//! escaped text and that no tag of the sender's survives. SQLite, in-process.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use axum::body::Body;
use axum::http::{header, HeaderMap, Request, StatusCode};
use axum::Router;
use http_body_util::BodyExt;
use mcp_approvals::auth::Approvers;
use mcp_approvals::store::Location;
use mcp_approvals::{router, App, Config, ManualClock};
use serde_json::{json, Value};
use tower::ServiceExt;

const ALICE: &str = "alice-token-0123456789";
const GRANT: &str = "5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b5b";

const TOOL: &str = "<script>alert(1)</script>";
const ARGS: &str = r#"{"</textarea><b>k</b>":"\"><img src=x onerror=alert(2)>","cmd":"<script>alert('x')</script>"}"#;
const ANSWERS: &str = r#"{"confirm":{"action":"accept","content":{"name":"</pre><script>alert(3)</script>"}}}"#;
const STATE: &str = "\"><iframe src=x>";
const NOTE: &str = "</textarea><img src=x onerror=alert(5)> & 'quoted'";

struct Res {
    status: StatusCode,
    headers: HeaderMap,
    body: String,
}

async fn send(router: &Router, req: Request<Body>) -> Res {
    let res = router.clone().oneshot(req).await.unwrap();
    let (status, headers) = (res.status(), res.headers().clone());
    let bytes = res.into_body().collect().await.unwrap().to_bytes();
    Res { status, headers, body: String::from_utf8(bytes.to_vec()).unwrap() }
}

fn get(path: &str, cookie: &str) -> Request<Body> {
    Request::get(path).header(header::COOKIE, cookie).body(Body::empty()).unwrap()
}

fn form(path: &str, cookie: Option<&str>, fields: &[(&str, &str)]) -> Request<Body> {
    let enc = |s: &str| s.bytes().map(|b| format!("%{b:02X}")).collect::<String>();
    let body: Vec<String> = fields.iter().map(|(k, v)| format!("{}={}", enc(k), enc(v))).collect();
    let mut req = Request::post(path).header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
    if let Some(c) = cookie {
        req = req.header(header::COOKIE, c);
    }
    req.body(Body::from(body.join("&"))).unwrap()
}

/// Opens a continuation leg of `TOOL` with `ARGS`, `ANSWERS` and `STATE`; returns its id.
async fn open(router: &Router) -> String {
    let mut g = [0u8; 32];
    for (i, b) in g.iter_mut().enumerate() {
        *b = u8::from_str_radix(&GRANT[2 * i..2 * i + 2], 16).unwrap();
    }
    let parse = |t: &str| mcp_policy_core::wire::json::parse(t.as_bytes()).unwrap();
    let up = mcp_approvals::store::Upstream {
        cluster: "<img src=x onerror=alert(5)>".into(),
        authority: "<iframe src=//evil>".into(),
        path: "/mcp?<svg onload=alert(6)>".into(),
    };
    let key =
        mcp_policy_core::approval::key_with(&g, &up, TOOL, Some(&parse(ARGS)), Some(&parse(ANSWERS)), Some(STATE));
    let body = format!(
        r#"{{"key":"{key}","grant_id":"{GRANT}","grant":"<i>grant</i>","tool":{},"upstream":{{"cluster":{},"authority":{},"path":{}}},"arguments":{ARGS},"request_id":"<svg onload=alert(4)>","expires_in_seconds":600,"wait_seconds":0,"reason":"<u>reason</u>","input_responses":{ANSWERS},"request_state":{}}}"#,
        json!(TOOL),
        json!(up.cluster),
        json!(up.authority),
        json!(up.path),
        json!(STATE)
    );
    let req = Request::post("/v1/check").header(header::CONTENT_TYPE, "application/json");
    let r = send(router, req.body(Body::from(body)).unwrap()).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let v: Value = serde_json::from_str(&r.body).unwrap();
    v["approval_id"].as_str().unwrap().to_string()
}

/// No tag of the sender's survives: the only `<script` elements are the page's own two (with the
/// response's nonce), and none of the injected elements appear.
fn assert_inert(html: &str) {
    for raw in ["<script>", "<img", "<svg", "<iframe", "<textarea", "</textarea", "<b>k", "<i>", "<u>", "</pre><script"]
    {
        assert!(!html.contains(raw), "{raw} in {html}");
    }
    assert_eq!(html.matches("<script").count(), html.matches("<script nonce=\"").count(), "{html}");
    assert!(html.matches("<script").count() <= 2, "{html}");
}

#[tokio::test]
async fn markup_from_the_call_and_the_approver_is_rendered_inert() {
    let dir = tempfile::tempdir().unwrap();
    let mut approvers = Approvers::default();
    approvers.add_spec(&format!("alice={ALICE}")).unwrap();
    let config = Config::new("http://approvals.test:8095", approvers);
    let app = App::open(Location::Sqlite(dir.path().join("a.sqlite")), config, ManualClock::new(1_764_500_000));
    let router = router(app.unwrap());
    let id = open(&router).await;

    let r = send(&router, form("/login", None, &[("name", "alice"), ("token", ALICE), ("next", "/")])).await;
    let set = r.headers[header::SET_COOKIE].to_str().unwrap();
    let cookie = set.split(';').next().unwrap().to_string();

    // Pending: on the list (answers behind the link) and on the approval's own page (all of it).
    let tool = "<span class=\"tool\">&lt;script&gt;alert(1)&lt;/script&gt;</span>";
    let key = "  &quot;&lt;/textarea&gt;&lt;b&gt;k&lt;/b&gt;&quot;: &quot;\\&quot;&gt;&lt;img src=x onerror=alert(2)&gt;&quot;,\n";
    let value = "  &quot;cmd&quot;: &quot;&lt;script&gt;alert('x')&lt;/script&gt;&quot;\n";
    let around = [
        "<span class=\"mono\">&lt;i&gt;grant&lt;/i&gt;</span>",
        "<p class=\"reason\">&lt;u&gt;reason&lt;/u&gt;</p>",
        " · request id <span class=\"mono request-id\">&lt;svg onload=alert(4)&gt;</span>",
        // The MCP server the approval is bound to, as text.
        "<p class=\"upstream\">server: cluster <b class=\"mono cluster\">&lt;img src=x onerror=alert(5)&gt;</b> · \
         <span class=\"mono target\"><span class=\"authority\">&lt;iframe src=//evil&gt;</span>\
         <span class=\"path\">/mcp?&lt;svg onload=alert(6)&gt;</span></span></p>",
    ];
    let answer = "&quot;name&quot;: &quot;&lt;/pre&gt;&lt;script&gt;alert(3)&lt;/script&gt;&quot;\n";
    let state = "<pre class=\"request-state\">&quot;&gt;&lt;iframe src=x&gt;</pre>";
    let page = format!("/approvals/{id}");
    for path in ["/", page.as_str()] {
        let r = send(&router, get(path, &cookie)).await;
        assert_eq!(r.status, StatusCode::OK);
        let html = &r.body;
        assert_inert(html);
        for want in [tool, key, value].iter().chain(&around) {
            assert!(html.contains(want), "{path}: {want} not in {html}");
        }
        assert_eq!(html.contains(answer), path != "/", "{path}: {html}");
        assert_eq!(html.contains(state), path != "/", "{path}: {html}");
        let csp = r.headers[header::CONTENT_SECURITY_POLICY].to_str().unwrap();
        assert!(csp.contains("script-src 'nonce-"), "{csp}");
        assert_eq!(r.headers[header::X_FRAME_OPTIONS], "DENY");
        assert_eq!(r.headers[header::REFERRER_POLICY], "same-origin");
    }
    let html = send(&router, get(&page, &cookie)).await.body;
    assert!(html.contains("<title>&lt;script&gt;alert(1)&lt;/script&gt; · MCP approvals</title>"), "{html}");

    // Denied with a note carrying markup: the flash, the card and the recent decisions.
    let i = html.find("name=\"csrf\" value=\"").unwrap() + "name=\"csrf\" value=\"".len();
    let csrf = &html[i..i + 64];
    let fields = [("decision", "deny"), ("note", NOTE), ("csrf", csrf), ("back", page.as_str())];
    let r = send(&router, form(&format!("{page}/decision"), Some(&cookie), &fields)).await;
    assert_eq!((r.status, r.headers[header::LOCATION].to_str().unwrap()), (StatusCode::SEE_OTHER, page.as_str()));
    let note = "&lt;/textarea&gt;&lt;img src=x onerror=alert(5)&gt; &amp; 'quoted'";
    let html = send(&router, get(&page, &cookie)).await.body;
    assert_inert(&html);
    let flash = format!(
        "<p class=\"flash\" id=\"flash\" role=\"status\">Denied &lt;script&gt;alert(1)&lt;/script&gt; ({id}, grant &lt;i&gt;grant&lt;/i&gt;).</p>"
    );
    assert!(html.contains(&flash), "{html}");
    assert!(html.contains(&format!("<p class=\"note\">note: {note}</p>")), "{html}");
    let html = send(&router, get("/", &cookie)).await.body;
    assert_inert(&html);
    assert!(html.contains("<td class=\"tool\">&lt;script&gt;alert(1)&lt;/script&gt;</td>"), "{html}");
    assert!(html.contains("<td class=\"mono cluster\">&lt;img src=x onerror=alert(5)&gt;</td>"), "{html}");
    assert!(html.contains(&format!("<td class=\"approver\">alice</td><td class=\"note\">{note}</td>")), "{html}");
}

#[tokio::test]
async fn the_login_page_keeps_its_next_target_inert() {
    let dir = tempfile::tempdir().unwrap();
    let config = Config::new("http://approvals.test:8095", Approvers::default());
    let app = App::open(Location::Sqlite(dir.path().join("a.sqlite")), config, ManualClock::new(1_764_500_000));
    let router = router(app.unwrap());
    // Only `/` or an approval's page is kept as the target; anything else becomes `/`.
    let req = Request::get("/login?next=/approvals/%22%3E%3Cscript%3Ealert(1)%3C/script%3E").body(Body::empty());
    let html = send(&router, req.unwrap()).await.body;
    assert!(html.contains("<input type=\"hidden\" name=\"next\" value=\"/\">"), "{html}");
    assert!(!html.contains("<script"), "{html}");
}
