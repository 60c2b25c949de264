//! What every page shares: the HTML document around a body (with the CSP and the scripts), the
//! header with the approver and Sign out, the flash message, times, and HTML escaping.

use std::time::{Duration, UNIX_EPOCH};

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use super::assets::{CSS, HEAD_SCRIPT, SCRIPT};
use crate::auth::{self, Session};

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

pub(crate) fn rfc3339(t: i64) -> String {
    let t = UNIX_EPOCH + Duration::from_secs(t.max(0).unsigned_abs());
    humantime::format_rfc3339_seconds(t).to_string()
}

pub(crate) fn span(secs: i64) -> String {
    humantime::format_duration(Duration::from_secs(secs.max(0).unsigned_abs())).to_string()
}

pub(crate) fn page(title: &str, body: &str, version: Option<u64>, status: StatusCode) -> Response {
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

pub(crate) fn top(s: &Session) -> String {
    format!(
        "<header class=\"top\"><h1><a href=\"/\">MCP approvals</a></h1>\
         <form method=\"post\" action=\"/logout\"><span class=\"muted\">signed in as <b id=\"approver\">{}</b></span> \
         <input type=\"hidden\" name=\"csrf\" value=\"{}\"><button type=\"submit\" class=\"logout\">Sign out</button></form></header>",
        esc(&s.approver),
        esc(&s.csrf)
    )
}

pub(crate) fn flash(s: &Session) -> String {
    s.flash
        .as_deref()
        .map(|f| format!("<p class=\"flash\" id=\"flash\" role=\"status\">{}</p>", esc(f)))
        .unwrap_or_default()
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
}
