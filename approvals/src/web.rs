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
use crate::store::{Approval, Decided, Listed, PendingPage, State as St};
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

async fn session(app: &App, headers: &HeaderMap, take_flash: bool) -> Option<(String, Session)> {
    let id = session_id(headers)?;
    let s = app.session_get(&id, take_flash).await?;
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
pre.arguments{font-size:13px;line-height:1.4;background:var(--code);border:1px solid var(--border);border-radius:6px;padding:8px 10px;margin:6px 0;white-space:pre-wrap;overflow-wrap:anywhere}
.warning{margin:4px 0}.badge{display:inline-block;background:#fff8c5;color:#6f4e00;border:1px solid #d4a72c;border-radius:6px;padding:2px 8px;font-size:13px}
.truncated{font-size:13px;margin:2px 0 6px}
button:disabled{opacity:.4;cursor:not-allowed;filter:grayscale(.7)}
html.hold form.decide button{pointer-events:none;opacity:.45}
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

/// Keeps the decision buttons disabled (dimmed) for 1.5 s after every page load, so a click aimed
/// before a reload cannot land on another card's button; reloads when `/ui/version` changes,
/// unless a note is being typed. Without script the buttons are enabled. Each form starts with a
/// hidden, always-disabled submit button: it is the form's default button, so Enter in the note
/// field submits nothing (it would otherwise press Approve).
const SCRIPT: &str = r#"(function(){
var b=document.querySelectorAll('form.decide button:not(.no-enter)');
function hold(){for(var i=0;i<b.length;i++)b[i].disabled=true;
setTimeout(function(){for(var i=0;i<b.length;i++)b[i].disabled=false;},1500);}
hold();window.addEventListener('pageshow',function(e){if(e.persisted)hold();});
var v=document.body.getAttribute('data-version');if(!v)return;
function typing(){var n=document.querySelectorAll('input[name=note]');for(var i=0;i<n.length;i++){if(n[i]===document.activeElement||n[i].value!=='')return true;}return false;}
setInterval(function(){if(typing())return;
fetch('/ui/version',{credentials:'same-origin',cache:'no-store'}).then(function(r){if(r.status===401){location.reload();return null;}return r.ok?r.text():null;})
.then(function(t){if(t!==null&&t.trim()!==v)location.reload();}).catch(function(){});},2000);})();"#;

/// Runs in `<head>`, before anything is painted: the class `hold` on `<html>` makes the decision
/// buttons ignore the pointer (and dims them) until 1.5 s after `DOMContentLoaded`, so on a slow,
/// heavy page no card is clickable while the cards above it are still being laid out. The same
/// again when the page comes back from the back-forward cache (held already when it left). Without
/// script nothing is held.
const HEAD_SCRIPT: &str = r#"(function(){var h=document.documentElement,t=0;
function hold(){h.classList.add('hold');}
function release(){clearTimeout(t);t=setTimeout(function(){h.classList.remove('hold');},1500);}
hold();document.addEventListener('DOMContentLoaded',release);
window.addEventListener('pagehide',hold);
window.addEventListener('pageshow',function(e){if(e.persisted){hold();release();}});})();"#;

fn page(title: &str, body: &str, version: Option<u64>, status: StatusCode) -> Response {
    let nonce = auth::random_bytes::<16>().map(|b| auth::hex(&b)).unwrap_or_default();
    let data_version = version.map(|v| format!(" data-version=\"{v}\"")).unwrap_or_default();
    let (head_script, script) = if version.is_some() {
        (
            format!("<script nonce=\"{nonce}\">{HEAD_SCRIPT}</script>"),
            format!("<script nonce=\"{nonce}\">{SCRIPT}</script>"),
        )
    } else {
        (String::new(), String::new())
    };
    let html = format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <link rel=\"icon\" href=\"data:,\"><title>{}</title><style>{CSS}</style>{head_script}</head>\n<body{data_version}><main>\n{body}\n</main>{script}</body></html>\n",
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

/// Most bytes of rendered arguments shown on the list page; longer ones are shown in full only on
/// the approval's own page, where alone they can be approved.
pub const LIST_ARGUMENTS_MAX: usize = 4096;

/// Most characters of a request id shown.
pub const REQUEST_ID_SHOWN: usize = 128;

/// The badge on a card whose arguments (or tool name) had characters escaped.
pub const ESCAPED_BADGE: &str = "contains non-ASCII or invisible characters: shown escaped";

/// The badge on a card whose arguments hold a number a server may parse to another value.
pub const NUMBERS_BADGE: &str =
    "numbers that a server may round or read differently (fractions, exponents, beyond ±2^53): shown exactly as sent";

/// The badge on a card whose arguments hold a string (or key) that may hide a line break.
pub const WHITESPACE_BADGE: &str = "strings with runs of spaces or leading/trailing whitespace: check line breaks";

/// Whether a JSON number (its text as sent) may become another value when a server parses it: a
/// fraction or an exponent (a float in most languages: `101.99999999999999999` is 102), `-0`, or
/// an integer beyond ±2^53 (not exact in a double).
pub fn number_may_change(n: &str) -> bool {
    if n.contains(['.', 'e', 'E']) || n == "-0" {
        return true;
    }
    // An integer: `-`? then digits without leading zeros (the strict parser's grammar).
    const MAX_EXACT: &str = "9007199254740992";
    let digits = n.strip_prefix('-').unwrap_or(n);
    digits.len() > MAX_EXACT.len() || (digits.len() == MAX_EXACT.len() && digits > MAX_EXACT)
}

/// Whether a string may hide a line break where the page wraps it: a run of four or more spaces,
/// or whitespace at its start or end.
pub fn whitespace_may_mislead(s: &str) -> bool {
    s.starts_with(char::is_whitespace) || s.ends_with(char::is_whitespace) || s.contains("    ")
}

/// Writes `s` with every character outside printable ASCII (0x20-0x7E) as a `\uXXXX` escape
/// (UTF-16, so astral characters become a surrogate pair) and `\` as `\\` (so a literal `\u200b`
/// typed by the agent never looks like an escaped one); with `quote`, also `"` as `\"`.
/// Returns whether anything but `\` and `"` was escaped.
fn push_visible(out: &mut String, s: &str, quote: bool) -> bool {
    let mut escaped = false;
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' if quote => out.push_str("\\\""),
            ' '..='~' => out.push(c),
            c => {
                escaped = true;
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
        }
    }
    escaped
}

/// `s` in printable ASCII (see [`push_visible`], quotes kept), and whether anything was escaped.
pub fn visible(s: &str) -> (String, bool) {
    let mut out = String::with_capacity(s.len());
    let escaped = push_visible(&mut out, s, false);
    (out, escaped)
}

/// Arguments as the approver reads them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    /// Pretty-printed (two spaces), keys in the order sent, numbers exactly as sent, strings and
    /// keys in printable ASCII only.
    pub text: String,
    /// A character was escaped (non-ASCII or control).
    pub escaped: bool,
    /// Warnings about keys of one object that look alike.
    pub lookalikes: Vec<String>,
    /// A number may be read as another value ([`number_may_change`]).
    pub numbers: bool,
    /// A string or key has a run of spaces or leading/trailing whitespace
    /// ([`whitespace_may_mislead`]).
    pub whitespace: bool,
}

/// Pretty-prints an approval's arguments for the page: see [`Rendered`]. The text is read with the
/// filter's strict parser; should a stored text not parse (rows of an older version), it is shown
/// as it is, every character outside printable ASCII escaped.
pub fn render_arguments(raw: &str) -> Rendered {
    render_json(raw, "arguments")
}

/// [`render_arguments`] for another JSON text of the call (a continuation leg's answers); `root`
/// names it in warnings.
pub fn render_json(raw: &str, root: &str) -> Rendered {
    use mcp_policy_filter::json::Json;

    fn newline(out: &mut String, depth: usize) {
        out.push('\n');
        for _ in 0..depth {
            out.push_str("  ");
        }
    }
    fn strip(k: &str) -> String {
        k.chars().filter(|c| (' '..='~').contains(c)).collect()
    }
    /// Letters and digits only: no ASCII punctuation or space, nothing invisible (`vm_id`, `vm-id`,
    /// `vm.id`, `vmid ` and `VMID` are all `vmid`).
    fn alnum(folded: &str) -> String {
        folded.chars().filter(|c| if c.is_ascii() { c.is_ascii_alphanumeric() } else { c.is_alphanumeric() }).collect()
    }
    fn lookalikes(members: &[(String, Json)], path: &str, warnings: &mut Vec<String>) {
        let forms: Vec<[String; 4]> = members
            .iter()
            .map(|(k, _)| {
                let folded = k.to_lowercase();
                [strip(k), strip(&folded), alnum(&folded), folded]
            })
            .collect();
        for (i, a) in forms.iter().enumerate() {
            for (j, b) in forms.iter().enumerate().skip(i + 1) {
                if a.iter().zip(b.iter()).any(|(x, y)| x == y) {
                    let (Some((ka, _)), Some((kb, _))) = (members.get(i), members.get(j)) else { continue };
                    let mut w = format!("keys that look alike in {path}: \"");
                    push_visible(&mut w, ka, true);
                    w.push_str("\" and \"");
                    push_visible(&mut w, kb, true);
                    w.push_str(
                        "\" (equal without non-ASCII or invisible characters, punctuation or spaces, or ignoring case)",
                    );
                    warnings.push(w);
                }
            }
        }
    }
    fn value(v: &Json, depth: usize, path: &str, r: &mut Rendered) {
        match v {
            Json::Null => r.text.push_str("null"),
            Json::Bool(b) => r.text.push_str(if *b { "true" } else { "false" }),
            Json::Number(n) => {
                r.numbers |= number_may_change(n);
                r.text.push_str(n);
            }
            Json::String(s) => {
                r.whitespace |= whitespace_may_mislead(s);
                r.text.push('"');
                r.escaped |= push_visible(&mut r.text, s, true);
                r.text.push('"');
            }
            Json::Array(items) if items.is_empty() => r.text.push_str("[]"),
            Json::Array(items) => {
                r.text.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        r.text.push(',');
                    }
                    newline(&mut r.text, depth + 1);
                    value(item, depth + 1, &format!("{path}[{i}]"), r);
                }
                newline(&mut r.text, depth);
                r.text.push(']');
            }
            Json::Object(members) if members.is_empty() => r.text.push_str("{}"),
            Json::Object(members) => {
                lookalikes(members, path, &mut r.lookalikes);
                r.text.push('{');
                for (i, (k, item)) in members.iter().enumerate() {
                    if i > 0 {
                        r.text.push(',');
                    }
                    newline(&mut r.text, depth + 1);
                    r.text.push('"');
                    r.whitespace |= whitespace_may_mislead(k);
                    r.escaped |= push_visible(&mut r.text, k, true);
                    r.text.push_str("\": ");
                    let (shown, _) = visible(k);
                    value(item, depth + 1, &format!("{path}.{shown}"), r);
                }
                newline(&mut r.text, depth);
                r.text.push('}');
            }
        }
    }
    let mut r = Rendered {
        text: String::with_capacity(raw.len() + raw.len() / 4),
        escaped: false,
        lookalikes: vec![],
        numbers: false,
        whitespace: false,
    };
    // Keys that clash only after folding are shown (and warned about below), not refused: the page
    // displays what it is asked about.
    match mcp_policy_filter::json::parse_folded_keys_allowed(raw.as_bytes()) {
        Ok(v) => value(&v, 0, root, &mut r),
        Err(_) => r.escaped = push_visible(&mut r.text, raw, false),
    }
    r
}

/// A request id for the page: at most [`REQUEST_ID_SHOWN`] characters, in printable ASCII,
/// HTML-escaped, in a monospace span.
fn request_id_html(r: &str) -> String {
    let mut cut: String = r.chars().take(REQUEST_ID_SHOWN).collect();
    let truncated = cut.len() < r.len();
    cut = visible(&cut).0;
    if truncated {
        cut.push_str("...");
    }
    format!("<span class=\"mono request-id\">{}</span>", esc(&cut))
}

/// Where a card is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    /// `/`: long arguments cut, and then no Approve.
    List,
    /// `/approvals/{id}`: everything.
    Detail,
}

/// The start of an approval's arguments as sent (JSON text, possibly cut inside a value) for the
/// list page, in printable ASCII: every other character as a `\uXXXX` escape (as JSON would
/// write it inside a string), but newlines kept (in valid JSON text they are only ever whitespace
/// between values) and `\` as it is (the text is JSON: its own escapes stay readable). At most
/// `max` bytes, never ending inside an escape. Returns the text and whether anything was escaped.
pub fn raw_prefix_visible(raw: &str, max: usize) -> (String, bool) {
    let mut out = String::with_capacity(raw.len().min(max));
    let mut escaped = false;
    for c in raw.chars() {
        let mut one = String::new();
        match c {
            ' '..='~' | '\n' => one.push(c),
            c => {
                escaped = true;
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    one.push_str(&format!("\\u{unit:04x}"));
                }
            }
        }
        if out.len() + one.len() > max {
            break;
        }
        out.push_str(&one);
    }
    (out, escaped)
}

/// One approval's card; with the decision form when pending. `arguments_bytes` is the size of the
/// arguments in all: on the list page `a.arguments` may hold only their first bytes.
fn card(a: &Approval, arguments_bytes: usize, s: &Session, now: i64, back: &str, view: View) -> String {
    let id = esc(&a.id);
    let (tool, tool_escaped) = visible(&a.tool);
    // Only the start of long arguments is read for the list page: shown as sent (escaped), with
    // no warnings about the rest and no Approve button.
    let complete = a.arguments.len() == arguments_bytes;
    let rendered = if complete {
        render_arguments(&a.arguments)
    } else {
        let (text, escaped) = raw_prefix_visible(&a.arguments, LIST_ARGUMENTS_MAX);
        Rendered { text, escaped, lookalikes: vec![], numbers: false, whitespace: false }
    };
    let mut h = format!(
        "<article class=\"approval\" data-approval-id=\"{id}\" data-state=\"{state}\" id=\"{id}\">\
         <h3><span class=\"tool\">{tool}</span><span class=\"grant\">grant <span class=\"mono\">{grant}</span></span>\
         <span class=\"state state-{state}\">{state}</span></h3>",
        state = a.state.as_str(),
        tool = esc(&tool),
        grant = esc(&a.grant),
    );
    if rendered.escaped || tool_escaped {
        h.push_str(&format!(
            "<p class=\"warning\" data-warning=\"escaped\"><strong class=\"badge\">{ESCAPED_BADGE}</strong></p>"
        ));
    }
    if rendered.numbers {
        h.push_str(&format!(
            "<p class=\"warning\" data-warning=\"numbers\"><strong class=\"badge\">{}</strong></p>",
            esc(NUMBERS_BADGE)
        ));
    }
    if rendered.whitespace {
        h.push_str(&format!(
            "<p class=\"warning\" data-warning=\"whitespace\"><strong class=\"badge\">{}</strong></p>",
            esc(WHITESPACE_BADGE)
        ));
    }
    for w in &rendered.lookalikes {
        h.push_str(&format!(
            "<p class=\"warning\" data-warning=\"lookalike\"><strong class=\"badge\">{}</strong></p>",
            esc(w)
        ));
    }
    if !a.reason.is_empty() {
        h.push_str(&format!("<p class=\"reason\">{}</p>", esc(&a.reason)));
    }
    h.push_str(&format!("<p class=\"meta size\">arguments: {arguments_bytes} bytes as sent</p>"));
    let cut = !complete || (view == View::List && rendered.text.len() > LIST_ARGUMENTS_MAX);
    if cut {
        // The rendered text is ASCII: any byte index is a character boundary. Cut arguments: the
        // size as sent; whole ones rendered too long: the size rendered.
        let head = rendered.text.get(..LIST_ARGUMENTS_MAX).unwrap_or(&rendered.text);
        let all = if complete { rendered.text.len() } else { arguments_bytes };
        h.push_str(&format!(
            "<pre class=\"arguments truncated\">{}</pre><p class=\"truncated\">… {all} bytes in all: \
             <a href=\"/approvals/{id}\">open the approval to review them</a></p>",
            esc(head),
        ));
    } else {
        h.push_str(&format!("<pre class=\"arguments\">{}</pre>", esc(&rendered.text)));
    }
    // A continuation leg: its answers in full on the approval's page; on the list only a notice.
    let leg_unseen = a.is_continuation() && view == View::List;
    if a.is_continuation() {
        h.push_str(&crate::web_leg::section(a, view == View::Detail));
    }
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
            meta.push_str(&format!(" by request id {}", request_id_html(r)));
        }
    }
    if !a.request_id.is_empty() {
        meta.push_str(&format!(" · request id {}", request_id_html(&a.request_id)));
    }
    h.push_str(&format!("<p class=\"meta\">{meta} · <a href=\"/approvals/{id}\" class=\"mono\">{id}</a></p>"));
    if !a.note.is_empty() {
        h.push_str(&format!("<p class=\"note\">note: {}</p>", esc(&a.note)));
    }
    if a.state == St::Pending {
        let approve = if leg_unseen {
            format!("<a href=\"/approvals/{id}\" class=\"review\">Review the answers to approve</a>")
        } else if cut {
            format!("<a href=\"/approvals/{id}\" class=\"review\">Review all arguments to approve</a>")
        } else {
            "<button type=\"submit\" name=\"decision\" value=\"approve\" class=\"approve\">Approve</button>".to_string()
        };
        h.push_str(&format!(
            "<form method=\"post\" action=\"/approvals/{id}/decision\" class=\"decide\">\
             <button type=\"submit\" class=\"no-enter\" disabled hidden aria-hidden=\"true\" tabindex=\"-1\"></button>\
             <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\"><input type=\"hidden\" name=\"back\" value=\"{back}\">\
             <input type=\"text\" name=\"note\" placeholder=\"note (optional)\" maxlength=\"{MAX_NOTE}\" autocomplete=\"off\">\
             {approve}<button type=\"submit\" name=\"decision\" value=\"deny\" class=\"deny\">Deny</button></form>",
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
            tool = esc(&visible(&a.tool).0),
            grant = esc(&a.grant),
            who = esc(a.approver.as_deref().unwrap_or("—")),
            note = esc(&a.note),
        ));
    }
    h.push_str("</tbody></table>");
    h
}

/// Most pending cards on `/` (the oldest).
pub const PENDING_SHOWN: u32 = 200;

/// Most grants named with their count of pending approvals on `/`.
pub const GRANTS_SHOWN: u32 = 10;

/// `GET /`: the oldest 200 pending approvals (oldest first: new ones join at the bottom, so cards
/// never move under the pointer) and the last 50 decisions. The store gives at most the first
/// [`LIST_ARGUMENTS_MAX`] bytes of each card's arguments; the page is rendered after the store is
/// released, on a blocking thread.
pub async fn index(State(app): State<App>, headers: HeaderMap) -> Response {
    let Some((_, s)) = session(&app, &headers, true).await else {
        return redirect("/login");
    };
    let version = app.version();
    let lists = app
        .db(|st, now| {
            let (pending, changes) = st.pending(now, PENDING_SHOWN, LIST_ARGUMENTS_MAX, GRANTS_SHOWN)?;
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
    let total = pending.total;
    let body = match tokio::task::spawn_blocking(move || index_body(&s, &pending, &recent, now)).await {
        Ok(body) => body,
        Err(e) => return Error::Internal(format!("render task: {e}")).into_response(),
    };
    let title = if total == 0 { "MCP approvals".to_string() } else { format!("({total}) MCP approvals") };
    page(&title, &body, Some(version), StatusCode::OK)
}

/// A grant label for the page: at most 64 characters, in printable ASCII, HTML-escaped.
fn grant_html(g: &str) -> String {
    let mut cut: String = g.chars().take(64).collect();
    let truncated = cut.len() < g.len();
    cut = visible(&cut).0;
    if truncated {
        cut.push_str("...");
    }
    esc(&cut)
}

/// The body of `GET /`.
fn index_body(s: &Session, pending: &PendingPage, recent: &[Approval], now: i64) -> String {
    let total = pending.total;
    let mut body = top(s);
    body.push_str(&flash(s));
    body.push_str(&format!("<h2>Pending <span class=\"muted\" id=\"pending-count\">({total})</span></h2>"));
    if pending.grants_total > 1 {
        // A flood by one or a few grants is visible at once.
        let counts: Vec<String> = pending
            .grants
            .iter()
            .map(|g| {
                format!(
                    "<span class=\"grant-count\" data-grant-id=\"{}\"><span class=\"mono\">{}</span>: {}</span>",
                    esc(&g.grant_id),
                    grant_html(&g.grant),
                    g.pending
                )
            })
            .collect();
        let more = pending.grants_total - i64::try_from(pending.grants.len()).unwrap_or(0);
        let more = if more > 0 { format!(" · {more} more grants") } else { String::new() };
        body.push_str(&format!(
            "<p class=\"muted\" id=\"pending-by-grant\">by grant ({} grants): {}{more}</p>",
            pending.grants_total,
            counts.join(" · ")
        ));
    }
    if usize::try_from(total).unwrap_or(usize::MAX) > pending.list.len() {
        body.push_str(&format!(
            "<p class=\"muted\" id=\"pending-shown\">showing the oldest {} of {total}</p>",
            pending.list.len()
        ));
    }
    body.push_str("<section id=\"pending\">");
    if pending.list.is_empty() {
        body.push_str("<p class=\"empty muted\">No pending approvals.</p>");
    }
    for Listed { approval, arguments_bytes } in &pending.list {
        body.push_str(&card(approval, *arguments_bytes, s, now, "/", View::List));
    }
    body.push_str("</section><h2>Recent decisions</h2><section id=\"decisions\">");
    body.push_str(&recent_table(recent));
    body.push_str("</section>");
    body
}

/// `GET /approvals/{id}`: one approval (the `approval_url`).
pub async fn one(State(app): State<App>, headers: HeaderMap, Path(id): Path<String>) -> Response {
    let Some((_, s)) = session(&app, &headers, true).await else {
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
            body.push_str(&card(&a, a.arguments.len(), &s, now, &back, View::Detail));
            body.push_str("<p><a href=\"/\">All pending approvals</a></p>");
            page(
                &format!("{} · MCP approvals", visible(&a.tool).0),
                &body,
                Some(version.max(app.version())),
                StatusCode::OK,
            )
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
    if session(&app, &headers, false).await.is_some() {
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
        tracing::warn!(name = ?f.name.chars().take(64).collect::<String>(), "failed login");
        // Slows down guessing.
        tokio::time::sleep(Duration::from_millis(300)).await;
        return login_page(&f.next, Some("Wrong name or token."), StatusCode::UNAUTHORIZED);
    };
    let id = match app.session_create(&name).await {
        Ok(id) => id,
        Err(e) => return e.into_response(),
    };
    tracing::info!(approver = ?name, "login");
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
    let Some((id, s)) = session(&app, &headers, false).await else {
        return redirect("/login");
    };
    if !origin_ok(&app, &headers) || !ct_str_eq(&f.csrf, &s.csrf) {
        return forbidden("bad or missing CSRF token");
    }
    if let Err(e) = app.session_remove(&id).await {
        return e.into_response();
    }
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
    let Some((sid, s)) = session(&app, &headers, false).await else {
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
    if note.contains('\0') {
        return (StatusCode::BAD_REQUEST, "note must not contain U+0000").into_response();
    }
    let back = safe_back(&f.back).to_string();
    if !is_approval_id(&id) {
        return (StatusCode::NOT_FOUND, "no such approval").into_response();
    }
    let msg = match api::decide(&app, id.clone(), approve, s.approver.clone(), note).await {
        Ok(Decided::Ok(a)) => {
            format!(
                "{} {} ({}, grant {}).",
                if approve { "Approved" } else { "Denied" },
                visible(&a.tool).0,
                a.id,
                a.grant
            )
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
    app.session_set_flash(&sid, msg).await;
    redirect(&back)
}

/// `GET /ui/version`: changes whenever an approval is opened, decided, consumed or expired.
pub async fn version(State(app): State<App>, headers: HeaderMap) -> Response {
    if session(&app, &headers, false).await.is_none() {
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

    fn text(raw: &str) -> String {
        render_arguments(raw).text
    }

    #[test]
    fn pretty_prints_verbatim() {
        let raw = r#" {"a" : [1, 2.50, {}, [ ]], "n":123456789012345678901234567890,"s":"x,{\"y\":[1]}\\","e":{},"z":-1E+5} "#;
        let want = "{\n  \"a\": [\n    1,\n    2.50,\n    {},\n    []\n  ],\n  \"n\": 123456789012345678901234567890,\n  \"s\": \"x,{\\\"y\\\":[1]}\\\\\",\n  \"e\": {},\n  \"z\": -1E+5\n}";
        assert_eq!(
            render_arguments(raw),
            Rendered { text: want.into(), escaped: false, lookalikes: vec![], numbers: true, whitespace: false }
        );
        // Keys in the order sent (not sorted), numbers as sent (not -100000.0).
        assert_eq!(
            text(r#"{"b":[true,null,"z"],"a":{"c":-1e5}}"#),
            "{\n  \"b\": [\n    true,\n    null,\n    \"z\"\n  ],\n  \"a\": {\n    \"c\": -1e5\n  }\n}"
        );
        assert_eq!(text("{}"), "{}");
        assert_eq!(text("7"), "7");
        assert_eq!(text("9007199254740993"), "9007199254740993");
    }

    #[test]
    fn escapes_everything_outside_printable_ascii() {
        let cases: &[(&str, &str)] = &[
            // U+200B zero-width space making a second "vmid".
            (r#"{"vmid":100,"vmid\u200b":101}"#, "{\n  \"vmid\": 100,\n  \"vmid\\u200b\": 101\n}"),
            // Cyrillic і (U+0456), sent raw.
            ("{\"cmd\":\"\u{0456}d\"}", "{\n  \"cmd\": \"\\u0456d\"\n}"),
            // Bidi override, line separator, C1 control, BOM, NBSP, DEL, tab, newline.
            (
                "[\"a\u{202e}b\",\"\u{2028}\",\"\u{0085}\",\"\u{feff}\",\"\u{a0}\u{a0}x\",\"\u{7f}\",\"\\t\\n\\u0000\"]",
                "[\n  \"a\\u202eb\",\n  \"\\u2028\",\n  \"\\u0085\",\n  \"\\ufeff\",\n  \"\\u00a0\\u00a0x\",\n  \"\\u007f\",\n  \"\\u0009\\u000a\\u0000\"\n]",
            ),
            // Astral: a surrogate pair.
            ("{\"e\":\"\u{1F600}\"}", "{\n  \"e\": \"\\ud83d\\ude00\"\n}"),
        ];
        for (raw, want) in cases {
            let r = render_arguments(raw);
            assert_eq!(r.text, *want, "{raw}");
            assert!(r.escaped, "{raw}");
            assert!(r.text.bytes().all(|b| b == b'\n' || (0x20..=0x7e).contains(&b)));
        }
        // A literal backslash-u typed by the agent stays distinguishable from an escaped character.
        let r = render_arguments(r#"{"k":"\\u200b"}"#);
        assert_eq!(r.text, "{\n  \"k\": \"\\\\u200b\"\n}");
        assert!(!r.escaped);
        assert_eq!(visible("start\u{200b}vm\\"), ("start\\u200bvm\\\\".to_string(), true));
        assert_eq!(visible("start_vm \"x\""), ("start_vm \"x\"".to_string(), false));
    }

    #[test]
    fn warns_about_lookalike_keys() {
        let r = render_arguments(r#"{"vmid":100,"vmid\u200b":101}"#);
        assert_eq!(
            r.lookalikes,
            vec!["keys that look alike in arguments: \"vmid\" and \"vmid\\u200b\" (equal without non-ASCII or invisible characters, punctuation or spaces, or ignoring case)"]
        );
        let r = render_arguments(r#"{"opts":[{"Force":true,"force":false}],"x":{"a":1}}"#);
        assert_eq!(
            r.lookalikes,
            vec!["keys that look alike in arguments.opts[0]: \"Force\" and \"force\" (equal without non-ASCII or invisible characters, punctuation or spaces, or ignoring case)"]
        );
        assert!(!r.escaped);
        // Cyrillic capital and small letters fold together too; plain distinct keys do not warn.
        assert_eq!(render_arguments("{\"\u{0406}d\":1,\"\u{0456}d\":2}").lookalikes.len(), 1);
        assert_eq!(render_arguments(r#"{"vmid":1,"vmids":2,"node":"a"}"#).lookalikes, Vec::<String>::new());
        // Equal once punctuation, spaces and case are ignored.
        let r = render_arguments(r#"{"vm_id":1,"vm-id":2,"Vm.Id":3,"vmid ":4,"vmids":5}"#);
        let pairs: Vec<&str> = r.lookalikes.iter().map(|w| w.split(": ").nth(1).unwrap_or("")).collect();
        assert_eq!(
            pairs,
            vec![
                "\"vm_id\" and \"vm-id\" (equal without non-ASCII or invisible characters, punctuation or spaces, or ignoring case)",
                "\"vm_id\" and \"Vm.Id\" (equal without non-ASCII or invisible characters, punctuation or spaces, or ignoring case)",
                "\"vm_id\" and \"vmid \" (equal without non-ASCII or invisible characters, punctuation or spaces, or ignoring case)",
                "\"vm-id\" and \"Vm.Id\" (equal without non-ASCII or invisible characters, punctuation or spaces, or ignoring case)",
                "\"vm-id\" and \"vmid \" (equal without non-ASCII or invisible characters, punctuation or spaces, or ignoring case)",
                "\"Vm.Id\" and \"vmid \" (equal without non-ASCII or invisible characters, punctuation or spaces, or ignoring case)",
            ]
        );
        // Different levels never collide.
        assert_eq!(render_arguments(r#"{"a":{"a":1}}"#).lookalikes, Vec::<String>::new());
    }

    #[test]
    fn numbers_that_may_change() {
        let cases: &[(&str, bool)] = &[
            ("0", false),
            ("-5", false),
            ("101", false),
            ("9007199254740992", false),
            ("-9007199254740992", false),
            ("1000000000000000", false),
            ("9007199254740993", true),
            ("-9007199254740993", true),
            ("10000000000000000", true),
            ("101.99999999999999999", true),
            ("1.0", true),
            ("1e2", true),
            ("1E-2", true),
            ("-0", true),
            ("-0.0", true),
        ];
        for (n, want) in cases {
            assert_eq!(number_may_change(n), *want, "{n}");
        }
    }

    #[test]
    fn whitespace_that_may_mislead() {
        let cases: &[(&str, bool)] = &[
            ("", false),
            ("ls -l", false),
            ("a   b", false),
            ("a    b", true),
            (" a", true),
            ("a ", true),
            ("a\n", true),
            ("\ta", true),
            ("a\u{a0}", true),
        ];
        for (s, want) in cases {
            assert_eq!(whitespace_may_mislead(s), *want, "{s:?}");
        }
        let r = render_arguments(r#"{"k":"a    b"}"#);
        assert!(r.whitespace && !r.numbers && !r.escaped);
        assert!(render_arguments(r#"{" k":1}"#).whitespace);
        assert!(!render_arguments(r#"{"k":"a b","n":1}"#).whitespace);
    }

    #[test]
    fn raw_prefix_is_escaped_and_capped() {
        assert_eq!(raw_prefix_visible("{\"a\":\"\\u200b\"}", 100), ("{\"a\":\"\\u200b\"}".to_string(), false));
        assert_eq!(
            raw_prefix_visible("[\n\"\u{200b}\t\u{1F600}\"", 100),
            ("[\n\"\\u200b\\u0009\\ud83d\\ude00\"".to_string(), true)
        );
        // Never ends inside an escape.
        assert_eq!(raw_prefix_visible("ab\u{200b}", 7), ("ab".to_string(), true));
        assert_eq!(raw_prefix_visible("ab\u{200b}", 8), ("ab\\u200b".to_string(), true));
    }

    #[test]
    fn unreadable_stored_text_is_still_escaped() {
        let r = render_arguments("{\"a\":1,\"a\":\"\u{200b}\"}");
        assert_eq!(r.text, "{\"a\":1,\"a\":\"\\u200b\"}");
        assert!(r.escaped);
    }

    #[test]
    fn request_ids_are_cut_and_escaped() {
        assert_eq!(request_id_html("req-1"), "<span class=\"mono request-id\">req-1</span>");
        assert_eq!(request_id_html("a\nb<"), "<span class=\"mono request-id\">a\\u000ab&lt;</span>");
        let long = "x".repeat(200);
        assert_eq!(request_id_html(&long), format!("<span class=\"mono request-id\">{}...</span>", "x".repeat(128)));
        assert_eq!(
            request_id_html(&"x".repeat(128)),
            format!("<span class=\"mono request-id\">{}</span>", "x".repeat(128))
        );
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
