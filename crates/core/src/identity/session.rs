//! Sessions bound to their grant: the ids the MCP server hands out, sealed to the grant they were
//! handed to, so that no other grant can use them.
//!
//! The MCP server hands out a session id and accepts it from anyone who presents it. With
//! `gateway.session_key` the filter binds each session to the grant that created it, statelessly:
//! the `Mcp-Session-Id` (MCP 2025-03-26 … 2025-11-25 Streamable HTTP) the client sees is
//!
//! ```text
//! m1.<base64url(upstream id)>.<base64url(HMAC-SHA-256(key, "mcpf-session-v1" ‖ grant hash ‖ upstream id))>
//! ```
//!
//! (RFC 2104 HMAC; base64url without padding, RFC 4648 §5; the grant hash is the 32-byte SHA-256 of
//! the credential). A session whose client declared URL-mode elicitation at `initialize`
//! (`capabilities.elicitation.url`, MCP 2025-11-25) gets an `m2.` id instead, made the same way under
//! the domain `"mcpf-session-v2-url-elicitation"`: the flag is covered by the tag, so an `m1.` id
//! cannot be turned into an `m2.` one; pending approvals on it are offered as −32042
//! (`crate::approval::offer`). On the way in the filter checks the tag against the request's grant under the
//! current key, then the previous one, and forwards the upstream id; any other id — another grant's,
//! tampered, forged, unwrapped — is refused and nothing goes upstream. No state is kept, so any Envoy
//! sharing the key accepts the id.
//!
//! The same seal, under its own prefix and domain, covers the other ids a server hands out that name
//! what a client may read or write: SSE event ids, which `Last-Event-ID` presents back to resume a
//! stream ([`event`]), and the session id in the URL of the 2024-11-05 HTTP+SSE transport's
//! `endpoint` event ([`legacy`]). [`stream`] rewrites both as an SSE stream passes.

use crate::wire::b64::{self, Alphabet};
use hmac::{Mac, SimpleHmac};
use sha2::Sha256;

use crate::identity::grant::GrantId;

pub mod event;
pub mod legacy;
pub mod stream;

pub use stream::StreamIds;

/// Shortest key accepted, in bytes (the HMAC-SHA-256 block is 64; RFC 2104 §3 asks for at least
/// the output length, 32).
pub const MIN_KEY_BYTES: usize = 32;

/// One kind of sealed id: what it starts with, and the HMAC domain that keeps its tags apart from
/// every other kind's (the domains differ in their first bytes).
struct Kind {
    prefix: &'static str,
    domain: &'static [u8],
}

const SESSION: Kind = Kind { prefix: "m1.", domain: b"mcpf-session-v1" };
const SESSION_URL: Kind = Kind { prefix: "m2.", domain: b"mcpf-session-v2-url-elicitation" };

/// `gateway.session_key`: the key new ids are made with, and the one before it (still accepted).
#[derive(Clone, PartialEq, Eq)]
pub struct SessionKeys {
    pub current: Vec<u8>,
    pub previous: Option<Vec<u8>>,
}

impl std::fmt::Debug for SessionKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SessionKeys(..)")
    }
}

/// The tag's HMAC over the kind's domain, the grant hash, `context` in order, then the sealed value.
fn tag(key: &[u8], kind: &Kind, grant: &GrantId, context: &[&[u8]], value: &[u8]) -> Option<SimpleHmac<Sha256>> {
    let mut mac = SimpleHmac::<Sha256>::new_from_slice(key).ok()?;
    mac.update(kind.domain);
    mac.update(grant);
    for part in context {
        mac.update(part);
    }
    mac.update(value);
    Some(mac)
}

/// `value` sealed for `grant` under the current key: `<prefix><base64url(value)>.<base64url(tag)>`,
/// the tag over `context` then `value`.
fn seal(keys: &SessionKeys, kind: &Kind, grant: &GrantId, context: &[&[u8]], value: &[u8]) -> String {
    let mut out = String::with_capacity(kind.prefix.len() + value.len().div_ceil(3) * 4 + 44);
    out.push_str(kind.prefix);
    b64::encode_into(&mut out, value, Alphabet::UrlNoPad);
    out.push('.');
    if let Some(mac) = tag(&keys.current, kind, grant, context, value) {
        b64::encode_into(&mut out, &mac.finalize().into_bytes(), Alphabet::UrlNoPad);
    }
    out
}

/// The value inside `presented` if it was sealed as `kind` for `grant` and `context` under the
/// current or the previous key; `None` for anything else. The tag comparison is constant-time
/// (`hmac::Mac::verify_slice`).
fn open(keys: &SessionKeys, kind: &Kind, grant: &GrantId, context: &[&[u8]], presented: &[u8]) -> Option<Vec<u8>> {
    let rest = presented.strip_prefix(kind.prefix.as_bytes())?;
    let dot = rest.iter().position(|&b| b == b'.')?;
    let value = b64::decode(rest.get(..dot)?, Alphabet::UrlNoPad)?;
    let sig = b64::decode(rest.get(dot + 1..)?, Alphabet::UrlNoPad)?;
    let ok = |key: &[u8]| tag(key, kind, grant, context, &value).is_some_and(|m| m.verify_slice(&sig).is_ok());
    (ok(&keys.current) || keys.previous.as_deref().is_some_and(ok)).then_some(value)
}

/// The session id handed to the client for the server's id `upstream`, created for `grant`.
pub fn wrap(keys: &SessionKeys, grant: &GrantId, upstream: &[u8]) -> String {
    wrap_with(keys, grant, upstream, false)
}

/// [`wrap`], as an `m2.` id when the client declared URL-mode elicitation.
pub fn wrap_with(keys: &SessionKeys, grant: &GrantId, upstream: &[u8], url_elicitation: bool) -> String {
    seal(keys, if url_elicitation { &SESSION_URL } else { &SESSION }, grant, &[], upstream)
}

/// The server's session id inside `presented`, if it was made for `grant` under the current or the
/// previous key. `None` for anything else.
pub fn unwrap(keys: &SessionKeys, grant: &GrantId, presented: &[u8]) -> Option<Vec<u8>> {
    let kind = if presented.starts_with(SESSION_URL.prefix.as_bytes()) { &SESSION_URL } else { &SESSION };
    open(keys, kind, grant, &[], presented)
}

/// Whether `presented` is a valid `m2.` id of `grant`: a session whose client declared URL-mode
/// elicitation at `initialize`.
pub fn declares_url_elicitation(keys: &SessionKeys, grant: &GrantId, presented: &[u8]) -> bool {
    presented.starts_with(SESSION_URL.prefix.as_bytes()) && unwrap(keys, grant, presented).is_some()
}
#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> SessionKeys {
        SessionKeys { current: b"k".repeat(32), previous: None }
    }

    #[test]
    fn ids_round_trip_for_their_grant_only() {
        let (a, b) = ([1u8; 32], [2u8; 32]);
        let id = wrap(&keys(), &a, b"0123abcd");
        assert!(id.starts_with("m1.MDEyM2FiY2Q.") && id.len() == "m1.MDEyM2FiY2Q.".len() + 43, "{id}");
        assert!(id.bytes().all(|c| c.is_ascii_graphic()));
        assert_eq!(unwrap(&keys(), &a, id.as_bytes()).as_deref(), Some(&b"0123abcd"[..]));
        assert_eq!(unwrap(&keys(), &b, id.as_bytes()), None);
        // Tampered: another upstream id with the same tag, a flipped tag character, a cut tag.
        let other = id.replacen("MDEyM2FiY2Q", "MDEyM2FiY2U", 1);
        assert_eq!(unwrap(&keys(), &a, other.as_bytes()), None);
        let mut flipped = id.clone().into_bytes();
        let last = flipped.len() - 2;
        flipped[last] = if flipped[last] == b'A' { b'B' } else { b'A' };
        assert_eq!(unwrap(&keys(), &a, &flipped), None);
        assert_eq!(unwrap(&keys(), &a, &id.as_bytes()[..id.len() - 1]), None);
        for forged in [&b""[..], b"0123abcd", b"m1.", b"m1.MDEyM2FiY2Q.", b"m1.MDEyM2FiY2Q"] {
            assert_eq!(unwrap(&keys(), &a, forged), None);
        }
    }

    #[test]
    fn rotation_accepts_the_previous_key() {
        let g = [7u8; 32];
        let old = wrap(&keys(), &g, b"s");
        let rotated = SessionKeys { current: b"n".repeat(32), previous: Some(b"k".repeat(32)) };
        assert_eq!(unwrap(&rotated, &g, old.as_bytes()).as_deref(), Some(&b"s"[..]));
        let dropped = SessionKeys { current: b"n".repeat(32), previous: None };
        assert_eq!(unwrap(&dropped, &g, old.as_bytes()), None);
        assert_ne!(wrap(&rotated, &g, b"s"), old);
    }
}
