//! The approvers' web pages: server-rendered HTML, a session cookie, a CSRF token per session in
//! every form, and a few lines of script that reload the page when `/ui/version` changes.

use std::time::{Duration, UNIX_EPOCH};

use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Form;
use serde::Deserialize;

use crate::api::{self, MAX_NOTE};
use crate::auth::{self, ct_str_eq, is_approval_id, Session};
use crate::store::{Approval, Decided, State as St};
use crate::{App, Error};

pub const COOKIE: &str = "mcp_approvals_session";

/// HTML-escapes text for element content and quoted attribute values.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

fn session_id(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .map(|(_, v)| v.to_string())
}

fn session(app: &App, headers: &HeaderMap, take_flash: bool) -> Option<(String, Session)> {
    let id = session_id(headers)?;
    let s = app.sessions.get(&id, take_flash)?;
    Some((id, s))
}

/// The scheme://host[:port] of a URL.
fn origin_of(url: &str) -> &str {
    let after_scheme = url.find("://").map_or(0, |i| i + 3);
    let rest = url.get(after_scheme..).unwrap_or("");
    let end = rest.find('/').map_or(url.len(), |i| after_scheme + i);
    url.get(..end).unwrap_or(url)
}

/// A cross-origin `Origin` header refuses a POST. Same origin: the public URL's, or the host the
/// request was sent to.
fn origin_ok(app: &App, headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(header::ORIGIN) else {
        return true;
    };
    let Ok(origin) = origin.to_str() else {
        return false;
    };
    if origin.eq_ignore_ascii_case(origin_of(&app.config.public_url)) {
        return true;
    }
    let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
    let origin_host = origin.split_once("://").map(|(_, h)| h);
    matches!((host, origin_host), (Some(h), Some(o)) if h.eq_ignore_ascii_case(o))
}

/// Where a form may send the browser back to: `/` or an approval's page (no open redirect).
fn safe_back(back: &str) -> &str {
    match back.strip_prefix("/approvals/") {
        Some(id) if is_approval_id(id) => back,
        _ => "/",
    }
}

fn redirect(to: &str) -> Response {
    let mut res = StatusCode::SEE_OTHER.into_response();
    if let Ok(v) = HeaderValue::from_str(to) {
        res.headers_mut().insert(header::LOCATION, v);
    }
    res
}

fn forbidden(msg: &str) -> Response {
    (StatusCode::FORBIDDEN, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], msg.to_string()).into_response()
}

fn rfc3339(t: i64) -> String {
    let t = UNIX_EPOCH + Duration::from_secs(t.max(0).unsigned_abs());
    humantime::format_rfc3339_seconds(t).to_string()
}

fn span(secs: i64) -> String {
    humantime::format_duration(Duration::from_secs(secs.max(0).unsigned_abs())).to_string()
}

const CSS: &str = r#"
:root{color-scheme:light dark;--fg:#1f2328;--muted:#59636e;--bg:#f6f8fa;--card:#fff;--border:#d1d9e0;--code:#f6f8fa}
@media (prefers-color-scheme:dark){:root{--fg:#e6edf3;--muted:#9198a1;--bg:#0d1117;--card:#151b23;--border:#3d444d;--code:#0d1117}}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif}
main{max-width:980px;margin:0 auto;padding:12px 16px 40px}
header.top{display:flex;justify-content:space-between;align-items:center;gap:12px;flex-wrap:wrap;border-bottom:1px solid var(--border);padding-bottom:8px}
h1{font-size:19px;margin:6px 0}h2{font-size:16px;margin:22px 0 6px}
a{color:#0969da;text-underline-offset:3px}
.mono,.tool,pre{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,"Liberation Mono",monospace}
.approval{background:var(--card);border:1px solid var(--border);border-radius:8px;padding:10px 14px;margin:10px 0}
.approval h3{margin:0 0 4px;font-size:16px;display:flex;gap:10px;flex-wrap:wrap;align-items:baseline}
.grant,.meta,.muted{color:var(--muted);font-size:13px}
.reason{margin:4px 0}
pre.arguments{font-size:13px;line-height:1.4;background:var(--code);border:1px solid var(--border);border-radius:6px;padding:8px 10px;margin:6px 0;white-space:pre-wrap;overflow-wrap:anywhere;max-height:28em;overflow:auto}
form.decide{display:flex;gap:8px;flex-wrap:wrap;align-items:center;margin-top:8px}
input[type=text],input[type=password]{font:inherit;padding:6px 8px;border:1px solid var(--border);border-radius:6px;background:var(--card);color:var(--fg)}
form.decide input[name=note]{flex:1;min-width:14em}
button{font:inherit;font-weight:600;padding:6px 16px;border-radius:6px;border:1px solid var(--border);cursor:pointer;background:var(--card);color:var(--fg)}
button.approve{background:#1f883d;border-color:#1a7f37;color:#fff}
button.deny{background:#cf222e;border-color:#a40e26;color:#fff}
.flash{background:#ddf4ff;color:#0a3069;border:1px solid #54aeff;padding:8px 12px;border-radius:6px;margin:10px 0}
.error{background:#ffebe9;color:#82071e;border:1px solid #ff8182;padding:8px 12px;border-radius:6px;margin:10px 0}
table{width:100%;border-collapse:collapse;font-size:13px}
th,td{border-bottom:1px solid var(--border);padding:5px 6px;text-align:left;vertical-align:top;overflow-wrap:anywhere}
.state{font-weight:600}.state-consumed,.state-approved{color:#1a7f37}.state-denied{color:#cf222e}.state-expired{color:var(--muted)}.state-pending{color:#9a6700}
form.login{display:grid;gap:10px;max-width:360px;margin-top:16px}
"#;

/// Reloads when `/ui/version` changes, unless a note is being typed.
const SCRIPT: &str = r#"(function(){
var v=document.body.getAttribute('data-version');if(!v)return;
function typing(){var n=document.querySelectorAll('input[name=note]');for(var i=0;i<n.length;i++){if(n[i]===document.activeElement||n[i].value!=='')return true;}return false;}
setInterval(function(){if(typing())return;
fetch('/ui/version',{credentials:'same-origin',cache:'no-store'}).then(function(r){if(r.status===401){location.reload();return null;}return r.ok?r.text():null;})
.then(function(t){if(t!==null&&t.trim()!==v)location.reload();}).catch(function(){});},2000);})();"#;

fn page(title: &str, body: &str, version: Option<u64>, status: StatusCode) -> Response {
    let nonce = auth::random_bytes::<16>().map(|b| auth::hex(&b)).unwrap_or_default();
    let data_version = version.map(|v| format!(" data-version=\"{v}\"")).unwrap_or_default();
    let script = if version.is_some() { format!("<script nonce=\"{nonce}\">{SCRIPT}</script>") } else { String::new() };
    let html = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <link rel=\"icon\" href=\"data:,\"><title>{}</title><style>{CSS}</style></head>\n<body{data_version}><main>\n{body}\n</main>{script}</body></html>\n",
        esc(title)
    );
    let csp = format!(
        "default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'nonce-{nonce}'; connect-src 'self'; \
         form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    );
    let mut res = (status, [(header::CONTENT_TYPE, "text/html; charset=utf-8")], html).into_response();
    if let Ok(v) = HeaderValue::from_str(&csp) {
        res.headers_mut().insert(header::CONTENT_SECURITY_POLICY, v);
    }
    res
}

fn top(s: &Session) -> String {
    format!(
        "<header class=\"top\"><h1><a href=\"/\">MCP approvals</a></h1>\
         <form method=\"post\" action=\"/logout\"><span class=\"muted\">signed in as <b id=\"approver\">{}</b></span> \
         <input type=\"hidden\" name=\"csrf\" value=\"{}\"><button type=\"submit\" class=\"logout\">Sign out</button></form></header>",
        esc(&s.approver),
        esc(&s.csrf)
    )
}

fn flash(s: &Session) -> String {
    s.flash
        .as_deref()
        .map(|f| format!("<p class=\"flash\" id=\"flash\" role=\"status\">{}</p>", esc(f)))
        .unwrap_or_default()
}

/// Re-indents JSON text (two spaces, like `serde_json::to_string_pretty`) without parsing numbers
/// or strings, so what the approver reads is exactly what the call carries.
pub fn pretty(json: &str) -> String {
    fn newline(out: &mut String, depth: usize) {
        out.push('\n');
        for _ in 0..depth {
            out.push_str("  ");
        }
    }
    let mut out = String::with_capacity(json.len() + json.len() / 4);
    let mut depth = 0usize;
    let mut in_str = false;
    let mut escaped = false;
    let mut chars = json.chars().peekable();
    while let Some(c) = chars.next() {
        if in_str {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_str = false;
            }
            continue;
        }
        match c {
            '"' => {
                in_str = true;
                out.push(c);
            }
            '{' | '[' => {
                while chars.peek().is_some_and(|c| c.is_ascii_whitespace()) {
                    chars.next();
                }
                let close = if c == '{' { '}' } else { ']' };
                out.push(c);
                if chars.peek() == Some(&close) {
                    chars.next();
                    out.push(close);
                } else {
                    depth += 1;
                    newline(&mut out, depth);
                }
            }
            '}' | ']' => {
                depth = depth.saturating_sub(1);
                newline(&mut out, depth);
                out.push(c);
            }
            ',' => {
                out.push(',');
                newline(&mut out, depth);
            }
            ':' => out.push_str(": "),
            c if c.is_ascii_whitespace() => {}
            c => out.push(c),
        }
    }
    out
}

/// One approval's card; with the decision form when pending.
fn card(a: &Approval, s: &Session, now: i64, back: &str) -> String {
    let id = esc(&a.id);
    let mut h = format!(
        "<article class=\"approval\" data-approval-id=\"{id}\" data-state=\"{state}\" id=\"{id}\">\
         <h3><span class=\"tool\">{tool}</span><span class=\"grant\">grant <span class=\"mono\">{grant}</span></span>\
         <span class=\"state state-{state}\">{state}</span></h3>",
        state = a.state.as_str(),
        tool = esc(&a.tool),
        grant = esc(&a.grant),
    );
    if !a.reason.is_empty() {
        h.push_str(&format!("<p class=\"reason\">{}</p>", esc(&a.reason)));
    }
    h.push_str(&format!("<pre class=\"arguments\">{}</pre>", esc(&pretty(&a.arguments))));
    let mut meta = format!(
        "opened <time datetime=\"{c}\" title=\"{c}\">{} ago</time>",
        span(now - a.created_at),
        c = rfc3339(a.created_at)
    );
    match a.state {
        St::Pending | St::Approved => meta.push_str(&format!(
            " · expires in <time datetime=\"{e}\" title=\"{e}\">{}</time>",
            span(a.expires_at - now),
            e = rfc3339(a.expires_at)
        )),
        _ => {}
    }
    if let (Some(t), Some(who)) = (a.decided_at, &a.approver) {
        meta.push_str(&format!(
            " · decided by <b class=\"approver\">{}</b> at <time datetime=\"{t}\">{t}</time>",
            esc(who),
            t = rfc3339(t)
        ));
    }
    if let Some(t) = a.consumed_at {
        meta.push_str(&format!(" · used at <time datetime=\"{t}\">{t}</time>", t = rfc3339(t)));
        if let Some(r) = a.consumed_request_id.as_deref().filter(|r| !r.is_empty()) {
            meta.push_str(&format!(" (request <span class=\"mono\">{}</span>)", esc(r)));
        }
    }
    if !a.request_id.is_empty() {
        meta.push_str(&format!(" · opened by request <span class=\"mono\">{}</span>", esc(&a.request_id)));
    }
    h.push_str(&format!("<p class=\"meta\">{meta} · <a href=\"/approvals/{id}\" class=\"mono\">{id}</a></p>"));
    if !a.note.is_empty() {
        h.push_str(&format!("<p class=\"note\">note: {}</p>", esc(&a.note)));
    }
    if a.state == St::Pending {
        h.push_str(&format!(
            "<form method=\"post\" action=\"/approvals/{id}/decision\" class=\"decide\">\
             <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\"><input type=\"hidden\" name=\"back\" value=\"{back}\">\
             <input type=\"text\" name=\"note\" placeholder=\"note (optional)\" maxlength=\"{MAX_NOTE}\" autocomplete=\"off\">\
             <button type=\"submit\" name=\"decision\" value=\"approve\" class=\"approve\">Approve</button>\
             <button type=\"submit\" name=\"decision\" value=\"deny\" class=\"deny\">Deny</button></form>",
            csrf = esc(&s.csrf),
            back = esc(back),
        ));
    }
    h.push_str("</article>");
    h
}

fn recent_table(list: &[Approval]) -> String {
    if list.is_empty() {
        return "<p class=\"muted\">No decisions yet.</p>".to_string();
    }
    let mut h = String::from(
        "<table id=\"recent\"><thead><tr><th>when</th><th>state</th><th>tool</th><th>grant</th><th>approver</th>\
         <th>note</th><th>approval</th></tr></thead><tbody>",
    );
    for a in list {
        let when = a.consumed_at.or(a.decided_at).unwrap_or(a.expires_at);
        h.push_str(&format!(
            "<tr class=\"decision\" data-approval-id=\"{id}\"><td><time datetime=\"{w}\">{w}</time></td>\
             <td class=\"state state-{st}\">{st}</td><td class=\"tool\">{tool}</td><td class=\"mono\">{grant}</td>\
             <td class=\"approver\">{who}</td><td class=\"note\">{note}</td><td><a class=\"mono\" href=\"/approvals/{id}\">{id}</a></td></tr>",
            id = esc(&a.id),
            w = rfc3339(when),
            st = a.state.as_str(),
            tool = esc(&a.tool),
            grant = esc(&a.grant),
            who = esc(a.approver.as_deref().unwrap_or("—")),
            note = esc(&a.note),
        ));
    }
    h.push_str("</tbody></table>");
    h
}

/// `GET /`: pending approvals (oldest first) and the last 50 decisions.
pub async fn index(State(app): State<App>, headers: HeaderMap) -> Response {
    let Some((_, s)) = session(&app, &headers, true) else {
        return redirect("/login");
    };
    let version = app.version();
    let lists = app
        .db(|st, now| {
            let (pending, changes) = st.pending(now)?;
            let recent = st.recent(50)?;
            Ok(((pending, recent, now), changes))
        })
        .await;
    let (pending, recent, now) = match lists {
        Ok(x) => x,
        Err(e) => return e.into_response(),
    };
    // An expiry just applied bumps the version: the page carries the new one.
    let version = version.max(app.version());
    let mut body = top(&s);
    body.push_str(&flash(&s));
    body.push_str(&format!("<h2>Pending <span class=\"muted\" id=\"pending-count\">({})</span></h2>", pending.len()));
    body.push_str("<section id=\"pending\">");
    if pending.is_empty() {
        body.push_str("<p class=\"empty muted\">No pending approvals.</p>");
    }
    for a in &pending {
        body.push_str(&card(a, &s, now, "/"));
    }
    body.push_str("</section><h2>Recent decisions</h2><section id=\"decisions\">");
    body.push_str(&recent_table(&recent));
    body.push_str("</section>");
    let title =
        if pending.is_empty() { "MCP approvals".to_string() } else { format!("({}) MCP approvals", pending.len()) };
    page(&title, &body, Some(version), StatusCode::OK)
}

/// `GET /approvals/{id}`: one approval (the `approval_url`).
pub async fn one(State(app): State<App>, headers: HeaderMap, Path(id): Path<String>) -> Response {
    let Some((_, s)) = session(&app, &headers, true) else {
        let next = if is_approval_id(&id) { format!("/login?next=/approvals/{id}") } else { "/login".into() };
        return redirect(&next);
    };
    let version = app.version();
    let found = if is_approval_id(&id) {
        match app.db(move |st, now| st.get(&id, now).map(|(a, c)| ((a, now), c))).await {
            Ok(x) => x,
            Err(e) => return e.into_response(),
        }
    } else {
        (None, 0)
    };
    let mut body = top(&s);
    body.push_str(&flash(&s));
    match found {
        (Some(a), now) => {
            let back = format!("/approvals/{}", a.id);
            body.push_str(&card(&a, &s, now, &back));
            body.push_str("<p><a href=\"/\">All pending approvals</a></p>");
            page(&format!("{} · MCP approvals", a.tool), &body, Some(version.max(app.version())), StatusCode::OK)
        }
        (None, _) => {
            body.push_str("<p class=\"error\">No such approval.</p><p><a href=\"/\">All pending approvals</a></p>");
            page("Not found · MCP approvals", &body, None, StatusCode::NOT_FOUND)
        }
    }
}

#[derive(Deserialize)]
pub struct NextQuery {
    #[serde(default)]
    next: String,
}

fn login_page(next: &str, error: Option<&str>, status: StatusCode) -> Response {
    let err = error.map(|e| format!("<p class=\"error\" id=\"login-error\">{}</p>", esc(e))).unwrap_or_default();
    let body = format!(
        "<header class=\"top\"><h1>MCP approvals</h1></header>{err}\
         <form method=\"post\" action=\"/login\" class=\"login\">\
         <input type=\"hidden\" name=\"next\" value=\"{}\">\
         <label>Name<br><input type=\"text\" name=\"name\" autocomplete=\"username\" required autofocus></label>\
         <label>Token<br><input type=\"password\" name=\"token\" autocomplete=\"current-password\" required></label>\
         <button type=\"submit\">Sign in</button></form>",
        esc(safe_back(next))
    );
    page("Sign in · MCP approvals", &body, None, status)
}

/// `GET /login`.
pub async fn login_form(State(app): State<App>, headers: HeaderMap, Query(q): Query<NextQuery>) -> Response {
    if session(&app, &headers, false).is_some() {
        return redirect(safe_back(&q.next));
    }
    login_page(&q.next, None, StatusCode::OK)
}

#[derive(Deserialize)]
pub struct LoginForm {
    #[serde(default)]
    name: String,
    #[serde(default)]
    token: String,
    #[serde(default)]
    next: String,
}

fn cookie(app: &App, value: &str, max_age: u64) -> String {
    let secure = if app.config.public_url.starts_with("https://") { "; Secure" } else { "" };
    format!("{COOKIE}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age}{secure}")
}

/// `POST /login`.
pub async fn login(State(app): State<App>, headers: HeaderMap, Form(f): Form<LoginForm>) -> Response {
    if !origin_ok(&app, &headers) {
        return forbidden("cross-origin request refused");
    }
    let Some(name) = app.config.approvers.login(f.name.trim(), &f.token).map(str::to_string) else {
        tracing::warn!(name = %f.name.chars().take(64).collect::<String>(), "failed login");
        // Slows down guessing.
        tokio::time::sleep(Duration::from_millis(300)).await;
        return login_page(&f.next, Some("Wrong name or token."), StatusCode::UNAUTHORIZED);
    };
    let id = match app.sessions.create(&name) {
        Ok(id) => id,
        Err(e) => return Error::Internal(e).into_response(),
    };
    tracing::info!(approver = %name, "login");
    let mut res = redirect(safe_back(&f.next));
    if let Ok(v) = HeaderValue::from_str(&cookie(&app, &id, crate::auth::SESSION_TTL.as_secs())) {
        res.headers_mut().insert(header::SET_COOKIE, v);
    }
    res
}

#[derive(Deserialize)]
pub struct CsrfForm {
    #[serde(default)]
    csrf: String,
}

/// `POST /logout`.
pub async fn logout(State(app): State<App>, headers: HeaderMap, Form(f): Form<CsrfForm>) -> Response {
    let Some((id, s)) = session(&app, &headers, false) else {
        return redirect("/login");
    };
    if !origin_ok(&app, &headers) || !ct_str_eq(&f.csrf, &s.csrf) {
        return forbidden("bad or missing CSRF token");
    }
    app.sessions.remove(&id);
    let mut res = redirect("/login");
    if let Ok(v) = HeaderValue::from_str(&cookie(&app, "", 0)) {
        res.headers_mut().insert(header::SET_COOKIE, v);
    }
    res
}

#[derive(Deserialize)]
pub struct DecisionForm {
    #[serde(default)]
    decision: String,
    #[serde(default)]
    note: String,
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    back: String,
}

/// `POST /approvals/{id}/decision`.
pub async fn decision(
    State(app): State<App>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Form(f): Form<DecisionForm>,
) -> Response {
    let Some((sid, s)) = session(&app, &headers, false) else {
        return redirect("/login");
    };
    if !origin_ok(&app, &headers) {
        return forbidden("cross-origin request refused");
    }
    if !ct_str_eq(&f.csrf, &s.csrf) {
        return forbidden("bad or missing CSRF token");
    }
    let approve = match f.decision.as_str() {
        "approve" => true,
        "deny" => false,
        _ => return (StatusCode::BAD_REQUEST, "decision must be approve or deny").into_response(),
    };
    let note = f.note.trim().to_string();
    if note.len() > MAX_NOTE {
        return (StatusCode::BAD_REQUEST, "note too long").into_response();
    }
    let back = safe_back(&f.back).to_string();
    if !is_approval_id(&id) {
        return (StatusCode::NOT_FOUND, "no such approval").into_response();
    }
    let msg = match api::decide(&app, id.clone(), approve, s.approver.clone(), note).await {
        Ok(Decided::Ok(a)) => {
            format!("{} {} ({}, grant {}).", if approve { "Approved" } else { "Denied" }, a.tool, a.id, a.grant)
        }
        Ok(Decided::NotPending(a)) => format!(
            "Could not {} {}: it is already {}{}.",
            if approve { "approve" } else { "deny" },
            a.id,
            a.state.as_str(),
            a.approver.as_deref().map(|w| format!(" (by {w})")).unwrap_or_default()
        ),
        Ok(Decided::NotFound) => return (StatusCode::NOT_FOUND, "no such approval").into_response(),
        Err(e) => return e.into_response(),
    };
    app.sessions.set_flash(&sid, msg);
    redirect(&back)
}

/// `GET /ui/version`: changes whenever an approval is opened, decided, consumed or expired.
pub async fn version(State(app): State<App>, headers: HeaderMap) -> Response {
    if session(&app, &headers, false).is_none() {
        return (StatusCode::UNAUTHORIZED, "login required").into_response();
    }
    // Lazy expiry here too, so pages notice approvals running out.
    if let Err(e) = app.db(|st, now| Ok(((), st.expire(now)?))).await {
        return e.into_response();
    }
    ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], app.version().to_string()).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes() {
        assert_eq!(
            esc(r#"<script>alert("x")</script>&'"#),
            "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;&#39;"
        );
    }

    #[test]
    fn pretty_prints_verbatim() {
        let text = r#" {"a" : [1, 2.50, {}, [ ]], "n":123456789012345678901234567890,"s":"x,{\"y\":[1]}\\","e":{}} "#;
        let want = "{\n  \"a\": [\n    1,\n    2.50,\n    {},\n    []\n  ],\n  \"n\": 123456789012345678901234567890,\n  \"s\": \"x,{\\\"y\\\":[1]}\\\\\",\n  \"e\": {}\n}";
        assert_eq!(pretty(text), want);
        let v: serde_json::Value = serde_json::from_str(r#"{"b":[true,null,"z"],"a":{"c":-1e5}}"#).unwrap();
        assert_eq!(pretty(&v.to_string()), serde_json::to_string_pretty(&v).unwrap());
        assert_eq!(pretty("{}"), "{}");
        assert_eq!(pretty("7"), "7");
    }

    #[test]
    fn origins_and_back() {
        assert_eq!(origin_of("https://a.example:8443/x/y"), "https://a.example:8443");
        assert_eq!(origin_of("http://127.0.0.1:8095"), "http://127.0.0.1:8095");
        assert_eq!(safe_back("/"), "/");
        assert_eq!(safe_back("//evil.example"), "/");
        assert_eq!(safe_back("/approvals/../x"), "/");
        assert_eq!(safe_back("/approvals/apr_0123456789abcdefghjkmnpqrs"), "/approvals/apr_0123456789abcdefghjkmnpqrs");
    }
}
