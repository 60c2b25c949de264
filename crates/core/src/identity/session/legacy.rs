//! Session ids of the 2024-11-05 HTTP+SSE transport bound to their grant.
//!
//! In that transport the client opens an SSE stream with GET; its first event, `endpoint`, carries
//! the URL the client POSTs its messages to, and the session is a query parameter of that URL
//! (`/messages/?session_id=…` in the Python SDK, `?sessionId=…` in the TypeScript and Java SDKs
//! and mark3labs' mcp-go, `?sessionid=…` in the official Go SDK). The server accepts a POST from
//! anyone who names the session. With `gateway.session_key` the filter replaces the id in the
//! `endpoint` event by
//!
//! ```text
//! l1.<base64url(session id)>.<base64url(HMAC-SHA-256(key, "mcpf-legacy-session-v1" ‖ grant hash ‖ session id))>
//! ```
//!
//! (all URL-unreserved characters), and on every request whose query names a session checks it
//! against the request's grant and forwards the server's id in its place. Query parameters are read
//! as the servers read them: split at `&`, names and values percent-decoded with `+` as a space
//! (Starlette, `URLSearchParams`, Go's `url.ParseQuery`), so `session%5Fid` is `session_id` too.

use std::ops::Range;

use super::{open, seal, Kind, SessionKeys};
use crate::identity::grant::GrantId;

const LEGACY: Kind = Kind { prefix: "l1.", domain: b"mcpf-legacy-session-v1" };

/// The query parameters that name a session in the SDKs' HTTP+SSE servers.
pub const PARAMS: [&str; 3] = ["session_id", "sessionId", "sessionid"];

/// The id handed to the client for the server's session id `id`, on a stream of `grant`.
pub fn seal_id(keys: &SessionKeys, grant: &GrantId, id: &[u8]) -> String {
    seal(keys, &LEGACY, grant, &[], id)
}

/// The server's session id inside `presented`, if it was sealed for `grant` under the current or
/// the previous key; `None` for anything else.
pub fn open_id(keys: &SessionKeys, grant: &GrantId, presented: &[u8]) -> Option<Vec<u8>> {
    open(keys, &LEGACY, grant, &[], presented)
}

/// The session parameter of a request target's query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionParam {
    Absent,
    /// One parameter: where its raw value is in the target, and the value decoded.
    One {
        value_at: Range<usize>,
        value: Vec<u8>,
    },
    /// More than one (of any of the names): servers differ on which one they read.
    Many,
}

/// The session parameter in the query of `target` (a request's `:path`, or an `endpoint` URL).
pub fn session_param(target: &[u8]) -> SessionParam {
    let mut found = SessionParam::Absent;
    for (name, value_at) in query_params(target) {
        let name_bytes = target.get(name).unwrap_or_default();
        if !PARAMS.iter().any(|p| decode(name_bytes) == p.as_bytes()) {
            continue;
        }
        if found != SessionParam::Absent {
            return SessionParam::Many;
        }
        let value = decode(target.get(value_at.clone()).unwrap_or_default());
        found = SessionParam::One { value_at, value };
    }
    found
}

/// `target` with the bytes at `value_at` replaced by `value`, percent-encoded (RFC 3986 §2.1; all but
/// the unreserved characters).
pub fn replace_value(target: &[u8], value_at: Range<usize>, value: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(target.len() + value.len() * 3);
    out.extend_from_slice(target.get(..value_at.start).unwrap_or_default());
    for &b in value {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b);
        } else {
            let digit = |n: u8| HEX.get(usize::from(n)).copied().unwrap_or(b'0');
            out.extend_from_slice(&[b'%', digit(b >> 4), digit(b & 15)]);
        }
    }
    out.extend_from_slice(target.get(value_at.end..).unwrap_or_default());
    out
}

const HEX: [u8; 16] = *b"0123456789ABCDEF";

/// The `(name, value)` byte ranges of each parameter of the query of `target` (after the first `?`,
/// up to a `#`); a parameter without `=` has an empty value range at its end.
fn query_params(target: &[u8]) -> impl Iterator<Item = (Range<usize>, Range<usize>)> + '_ {
    let start = match target.iter().position(|&b| b == b'?' || b == b'#') {
        Some(q) if target.get(q) == Some(&b'?') => q + 1,
        _ => target.len(),
    };
    let end = target.iter().skip(start).position(|&b| b == b'#').map_or(target.len(), |h| start + h);
    let query = target.get(start..end).unwrap_or_default();
    let mut at = start;
    query.split(|&b| b == b'&').filter_map(move |part| {
        let from = at;
        at += part.len() + 1;
        if part.is_empty() {
            return None;
        }
        Some(match part.iter().position(|&b| b == b'=') {
            Some(eq) => (from..from + eq, from + eq + 1..from + part.len()),
            None => (from..from + part.len(), from + part.len()..from + part.len()),
        })
    })
}

/// Percent-decoding with `+` as a space (`application/x-www-form-urlencoded`); an invalid `%`
/// escape stays as it is, as in the servers' decoders.
fn decode(raw: &[u8]) -> Vec<u8> {
    let hex = |b: Option<&u8>| b.and_then(|&b| char::from(b).to_digit(16));
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while let Some(&b) = raw.get(i) {
        match (b, hex(raw.get(i + 1)), hex(raw.get(i + 2))) {
            (b'%', Some(h), Some(l)) => {
                out.push(u8::try_from(h * 16 + l).unwrap_or(b'%'));
                i += 3;
            }
            (b'+', _, _) => {
                out.push(b' ');
                i += 1;
            }
            _ => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

/// The `endpoint` event's URL with its session parameter sealed by `seal` (the decoded id in, the
/// sealed one out); `None` (pass the URL as it is) when it names no session or names more than one.
pub fn seal_endpoint(url: &[u8], seal: impl Fn(&[u8]) -> String) -> Option<Vec<u8>> {
    match session_param(url) {
        SessionParam::One { value_at, value } => Some(replace_value(url, value_at, seal(&value).as_bytes())),
        SessionParam::Absent | SessionParam::Many => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(target: &str) -> (String, Vec<u8>) {
        match session_param(target.as_bytes()) {
            SessionParam::One { value_at, value } => (target[value_at].to_owned(), value),
            other => panic!("{target}: {other:?}"),
        }
    }

    #[test]
    fn session_parameters_are_read_as_servers_read_them() {
        assert_eq!(one("/messages/?session_id=abc"), ("abc".into(), b"abc".to_vec()));
        assert_eq!(one("/messages?sessionId=a%2Fb+c&x=1"), ("a%2Fb+c".into(), b"a/b c".to_vec()));
        assert_eq!(one("/m?x=1&session%5Fid=l1.x.y"), ("l1.x.y".into(), b"l1.x.y".to_vec()));
        assert_eq!(one("/m?session_id"), (String::new(), Vec::new()));
        // The official Go SDK's name, which it reads case-sensitively.
        assert_eq!(one("/m?sessionid=a"), ("a".into(), b"a".to_vec()));
        assert_eq!(one("/m?&&session_id=%zz%4#frag&session_id=x"), ("%zz%4".into(), b"%zz%4".to_vec()));
        for absent in
            ["/messages/", "/m?SessionId=a", "/m?session_id_=a&xsession_id=b", "/m#?session_id=a", "/m?a=session_id"]
        {
            assert_eq!(session_param(absent.as_bytes()), SessionParam::Absent, "{absent}");
        }
        for many in [
            "/m?session_id=a&session_id=a",
            "/m?sessionId=a&session_id=b",
            "/m?session_id=a&session%5fid=b",
            "/m?sessionid=a&sessionId=b",
        ] {
            assert_eq!(session_param(many.as_bytes()), SessionParam::Many, "{many}");
        }
    }

    #[test]
    fn values_are_replaced_percent_encoded_and_the_rest_kept() {
        let t = b"/messages/?a=1&session_id=l1.x.y&b=2";
        let SessionParam::One { value_at, .. } = session_param(t) else { panic!() };
        assert_eq!(replace_value(t, value_at.clone(), b"abc-123"), b"/messages/?a=1&session_id=abc-123&b=2");
        assert_eq!(replace_value(t, value_at, b"a/b c%\xff~"), b"/messages/?a=1&session_id=a%2Fb%20c%25%FF~&b=2");
    }

    #[test]
    fn endpoint_urls_get_their_session_sealed() {
        let seal = |v: &[u8]| format!("S({})", String::from_utf8_lossy(v));
        let url = b"/messages/?session_id=0a1b";
        assert_eq!(seal_endpoint(url, seal).as_deref(), Some(&b"/messages/?session_id=S%280a1b%29"[..]));
        let abs = b"http://h:1/m?sessionId=x%20y#f";
        assert_eq!(seal_endpoint(abs, seal).as_deref(), Some(&b"http://h:1/m?sessionId=S%28x%20y%29#f"[..]));
        assert_eq!(seal_endpoint(b"/messages/", seal), None);
        assert_eq!(seal_endpoint(b"/m?session_id=a&sessionId=b", seal), None);
    }

    #[test]
    fn legacy_ids_open_for_their_grant_only() {
        let k = SessionKeys { current: vec![b'k'; 32], previous: None };
        let (a, b) = ([1u8; 32], [2u8; 32]);
        let id = seal_id(&k, &a, b"0a1b2c");
        assert!(id.starts_with("l1.MGExYjJj.") && id.bytes().all(|c| c.is_ascii_alphanumeric() || b"-_.".contains(&c)));
        assert_eq!(open_id(&k, &a, id.as_bytes()).as_deref(), Some(&b"0a1b2c"[..]));
        assert_eq!(open_id(&k, &b, id.as_bytes()), None);
        assert_eq!(open_id(&k, &a, b"0a1b2c"), None);
        assert_eq!(open_id(&k, &a, id.replacen("MGExYjJj", "MGExYjJk", 1).as_bytes()), None);
        // A session id or an event id over the same bytes is not a legacy session id.
        assert_eq!(open_id(&k, &a, super::super::wrap(&k, &a, b"0a1b2c").replacen("m1.", "l1.", 1).as_bytes()), None);
        let rotated = SessionKeys { current: vec![b'n'; 32], previous: Some(vec![b'k'; 32]) };
        assert_eq!(open_id(&rotated, &a, id.as_bytes()).as_deref(), Some(&b"0a1b2c"[..]));
        assert_eq!(open_id(&SessionKeys { current: vec![b'n'; 32], previous: None }, &a, id.as_bytes()), None);
    }
}
