//! Request checks shared by the pages and forms: the session cookie, the same-origin check,
//! where a form may send the browser back to, redirects and the 403 answer.

use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::auth::{is_approval_id, Session};
use crate::App;

pub const COOKIE: &str = "mcp_approvals_session";

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

pub(crate) async fn session(app: &App, headers: &HeaderMap, take_flash: bool) -> Option<(String, Session)> {
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
pub(crate) fn origin_ok(app: &App, headers: &HeaderMap) -> bool {
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
pub(crate) fn safe_back(back: &str) -> &str {
    match back.strip_prefix("/approvals/") {
        Some(id) if is_approval_id(id) => back,
        _ => "/",
    }
}

pub(crate) fn redirect(to: &str) -> Response {
    let mut res = StatusCode::SEE_OTHER.into_response();
    if let Ok(v) = HeaderValue::from_str(to) {
        res.headers_mut().insert(header::LOCATION, v);
    }
    res
}

pub(crate) fn forbidden(msg: &str) -> Response {
    (StatusCode::FORBIDDEN, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], msg.to_string()).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

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
