//! What every page shares: the HTML document around a body (with the CSP and the scripts), the
//! header with the approver and Sign out, the flash message, and times.
//!
//! Every page is a `maud` template: each `(…)` splice is HTML-escaped (`&`, `<`, `>`, `"`; all
//! attribute values are written in double quotes), so a value from a request cannot become markup.
//! Only the style sheet and the scripts, constants of this crate, are spliced `PreEscaped`.

use std::time::{Duration, UNIX_EPOCH};

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use maud::{html, Markup, PreEscaped};

use super::assets::{CSS, HEAD_SCRIPT, SCRIPT};
use crate::auth::{self, Session};

pub(crate) fn rfc3339(t: i64) -> String {
    let t = UNIX_EPOCH + Duration::from_secs(t.max(0).unsigned_abs());
    humantime::format_rfc3339_seconds(t).to_string()
}

pub(crate) fn span(secs: i64) -> String {
    humantime::format_duration(Duration::from_secs(secs.max(0).unsigned_abs())).to_string()
}

/// The whole document around `body`: with `version` (a signed-in page) the scripts that hold the
/// decision buttons after a load and reload the page when `/ui/version` changes.
pub(crate) fn page(title: &str, body: Markup, version: Option<u64>, status: StatusCode) -> Response {
    let nonce = auth::random_bytes::<16>().map(|b| auth::hex(&b)).unwrap_or_default();
    let html = html! {
        (PreEscaped("<!doctype html>\n"))
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                link rel="icon" href="data:,";
                title { (title) }
                style { (PreEscaped(CSS)) }
                @if version.is_some() {
                    script nonce=(nonce) { (PreEscaped(HEAD_SCRIPT)) }
                }
            }
            "\n"
            body data-version=[version] {
                main { "\n" (body) "\n" }
                @if version.is_some() {
                    script nonce=(nonce) { (PreEscaped(SCRIPT)) }
                }
            }
        }
        "\n"
    };
    let csp = format!(
        "default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src 'nonce-{nonce}'; connect-src 'self'; \
         form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    );
    let mut res = (status, [(header::CONTENT_TYPE, "text/html; charset=utf-8")], html.into_string()).into_response();
    if let Ok(v) = HeaderValue::from_str(&csp) {
        res.headers_mut().insert(header::CONTENT_SECURITY_POLICY, v);
    }
    res
}

/// The header: the title linking to `/`, the approver's name and Sign out (with the CSRF token).
pub(crate) fn top(s: &Session) -> Markup {
    html! {
        header.top {
            h1 { a href="/" { "MCP approvals" } }
            form method="post" action="/logout" {
                span.muted { "signed in as " b #approver { (s.approver) } }
                " "
                input type="hidden" name="csrf" value=(s.csrf);
                button type="submit" class="logout" { "Sign out" }
            }
        }
    }
}

/// The message of the last decision, shown once.
pub(crate) fn flash(s: &Session) -> Markup {
    html! {
        @if let Some(f) = &s.flash {
            p.flash #flash role="status" { (f) }
        }
    }
}

/// A warning badge; `kind` names it for tests and styles (`data-warning`).
pub(crate) fn badge(kind: &str, text: &str) -> Markup {
    html! { p.warning data-warning=(kind) { strong.badge { (text) } } }
}
