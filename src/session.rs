//! Sessions bound to their grant (MCP 2025-03-26 … 2025-11-25 Streamable HTTP, `Mcp-Session-Id`).
//!
//! The MCP server hands out a session id and accepts it from anyone who presents it. With
//! `gateway.session_key` the filter binds each session to the grant that created it, statelessly:
//! the id the client sees is
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
//! (`crate::offer`). On the way in the filter checks the tag against the request's grant under the
//! current key, then the previous one, and forwards the upstream id; any other id — another grant's,
//! tampered, forged, unwrapped — is refused and nothing goes upstream. No state is kept, so any Envoy
//! sharing the key accepts the id.

use crate::b64::{self, Alphabet};
use hmac::{Mac, SimpleHmac};
use sha2::Sha256;

use crate::ratelimit::GrantId;

/// Shortest key accepted, in bytes (the HMAC-SHA-256 block is 64; RFC 2104 §3 asks for at least
/// the output length, 32).
pub const MIN_KEY_BYTES: usize = 32;

const PREFIX: &str = "m1.";
const DOMAIN: &[u8] = b"mcpf-session-v1";
const PREFIX_URL: &str = "m2.";
const DOMAIN_URL: &[u8] = b"mcpf-session-v2-url-elicitation";

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

fn tag(key: &[u8], domain: &[u8], grant: &GrantId, upstream: &[u8]) -> Option<SimpleHmac<Sha256>> {
    let mut mac = SimpleHmac::<Sha256>::new_from_slice(key).ok()?;
    mac.update(domain);
    mac.update(grant);
    mac.update(upstream);
    Some(mac)
}

/// The session id handed to the client for the server's id `upstream`, created for `grant`.
pub fn wrap(keys: &SessionKeys, grant: &GrantId, upstream: &[u8]) -> String {
    wrap_with(keys, grant, upstream, false)
}

/// [`wrap`], as an `m2.` id when the client declared URL-mode elicitation.
pub fn wrap_with(keys: &SessionKeys, grant: &GrantId, upstream: &[u8], url_elicitation: bool) -> String {
    let (prefix, domain) = if url_elicitation { (PREFIX_URL, DOMAIN_URL) } else { (PREFIX, DOMAIN) };
    let mut out = String::from(prefix);
    b64::encode_into(&mut out, upstream, Alphabet::UrlNoPad);
    out.push('.');
    if let Some(mac) = tag(&keys.current, domain, grant, upstream) {
        b64::encode_into(&mut out, &mac.finalize().into_bytes(), Alphabet::UrlNoPad);
    }
    out
}

/// The server's session id inside `presented`, if it was made for `grant` under the current or the
/// previous key. `None` for anything else. The tag comparison is constant-time (`hmac::Mac::verify_slice`).
pub fn unwrap(keys: &SessionKeys, grant: &GrantId, presented: &[u8]) -> Option<Vec<u8>> {
    let (rest, domain) = match presented.strip_prefix(PREFIX.as_bytes()) {
        Some(rest) => (rest, DOMAIN),
        None => (presented.strip_prefix(PREFIX_URL.as_bytes())?, DOMAIN_URL),
    };
    let dot = rest.iter().position(|&b| b == b'.')?;
    let upstream = b64::decode(rest.get(..dot)?, Alphabet::UrlNoPad)?;
    let sig = b64::decode(rest.get(dot + 1..)?, Alphabet::UrlNoPad)?;
    let ok = |key: &[u8]| tag(key, domain, grant, &upstream).is_some_and(|m| m.verify_slice(&sig).is_ok());
    (ok(&keys.current) || keys.previous.as_deref().is_some_and(ok)).then_some(upstream)
}

/// Whether `presented` is a valid `m2.` id of `grant`: a session whose client declared URL-mode
/// elicitation at `initialize`.
pub fn declares_url_elicitation(keys: &SessionKeys, grant: &GrantId, presented: &[u8]) -> bool {
    presented.starts_with(PREFIX_URL.as_bytes()) && unwrap(keys, grant, presented).is_some()
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
