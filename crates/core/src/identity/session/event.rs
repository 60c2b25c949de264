//! SSE event ids bound to the grant and the session they were sent in.
//!
//! A client resumes a stream by sending the last event id it saw as `Last-Event-ID` (WHATWG HTML
//! §9.2.4; MCP "Resumability and Redelivery"). Servers look the id up in their event store and
//! replay what followed it; a store shared by all sessions, or keyed by stream and not by session
//! (the Python SDK's session manager passes one store to every session), replays another session's
//! events to whoever names their ids. So with `gateway.session_key` each event id the server sends is
//! replaced by
//!
//! ```text
//! e1.<base64url(event id)>.<base64url(HMAC-SHA-256(key, "mcpf-event-v1" ‖ grant hash ‖
//!     len(session) ‖ session ‖ event id))>
//! ```
//!
//! where session is the server's own `Mcp-Session-Id` of the stream (empty when there is none) and
//! len its length in bytes, 8 bytes big-endian, so that session and event id cannot trade bytes. A
//! `Last-Event-ID` is forwarded only when it opens under the request's grant and session (the
//! server's id inside its bound `Mcp-Session-Id`); anything else is refused before it goes upstream.

use super::{open, seal, Kind, SessionKeys};
use crate::identity::grant::GrantId;

const EVENT: Kind = Kind { prefix: "e1.", domain: b"mcpf-event-v1" };

/// The id handed to the client for the server's event id `id`, sent on a stream of `grant` in the
/// server's session `session` (empty: none).
pub fn seal_id(keys: &SessionKeys, grant: &GrantId, session: &[u8], id: &[u8]) -> String {
    let len = u64::try_from(session.len()).unwrap_or(u64::MAX).to_be_bytes();
    seal(keys, &EVENT, grant, &[&len, session], id)
}

/// The server's event id inside `presented`, if it was sealed for `grant` and `session` under the
/// current or the previous key; `None` for anything else.
pub fn open_id(keys: &SessionKeys, grant: &GrantId, session: &[u8], presented: &[u8]) -> Option<Vec<u8>> {
    let len = u64::try_from(session.len()).unwrap_or(u64::MAX).to_be_bytes();
    open(keys, &EVENT, grant, &[&len, session], presented)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys(k: u8) -> SessionKeys {
        SessionKeys { current: vec![k; 32], previous: None }
    }

    #[test]
    fn event_ids_open_for_their_grant_and_session_only() {
        let (a, b) = ([1u8; 32], [2u8; 32]);
        let id = seal_id(&keys(b'k'), &a, b"sess-1", b"ev-7");
        assert!(id.starts_with("e1.ZXYtNw.") && id.len() == "e1.ZXYtNw.".len() + 43, "{id}");
        assert_eq!(open_id(&keys(b'k'), &a, b"sess-1", id.as_bytes()).as_deref(), Some(&b"ev-7"[..]));
        // Another grant, another session, no session, another key.
        assert_eq!(open_id(&keys(b'k'), &b, b"sess-1", id.as_bytes()), None);
        assert_eq!(open_id(&keys(b'k'), &a, b"sess-2", id.as_bytes()), None);
        assert_eq!(open_id(&keys(b'k'), &a, b"", id.as_bytes()), None);
        assert_eq!(open_id(&keys(b'x'), &a, b"sess-1", id.as_bytes()), None);
        // Session and event id cannot trade bytes: ("sess-1", "ev-7") is not ("sess-1e", "v-7").
        let shifted = seal_id(&keys(b'k'), &a, b"sess-1e", b"v-7");
        assert_eq!(open_id(&keys(b'k'), &a, b"sess-1", shifted.replacen("di03", "ZXYtNw", 1).as_bytes()), None);
        // Without a session (stateless servers) ids still bind to the grant.
        let bare = seal_id(&keys(b'k'), &a, b"", b"1");
        assert_eq!(open_id(&keys(b'k'), &a, b"", bare.as_bytes()).as_deref(), Some(&b"1"[..]));
        assert_eq!(open_id(&keys(b'k'), &b, b"", bare.as_bytes()), None);
    }

    #[test]
    fn tampered_forged_and_other_kinds_are_refused() {
        let a = [1u8; 32];
        let k = keys(b'k');
        let id = seal_id(&k, &a, b"s", b"ev-7");
        let other_event = id.replacen("ZXYtNw", "ZXYtOA", 1);
        let mut flipped = id.clone().into_bytes();
        let last = flipped.len() - 2;
        flipped[last] = if flipped[last] == b'A' { b'B' } else { b'A' };
        let session_id = super::super::wrap(&k, &a, b"ev-7");
        for forged in [
            other_event.as_bytes(),
            &flipped,
            &id.as_bytes()[..id.len() - 1],
            b"ev-7",
            b"e1.ZXYtNw.",
            b"e1.ZXYtNw",
            b"",
            // A session id over the same bytes is not an event id.
            session_id.as_bytes(),
            session_id.replacen("m1.", "e1.", 1).as_bytes(),
        ] {
            assert_eq!(open_id(&k, &a, b"s", forged), None, "{}", String::from_utf8_lossy(forged));
        }
    }

    #[test]
    fn rotation_accepts_ids_sealed_under_the_previous_key() {
        let g = [7u8; 32];
        let old = seal_id(&keys(b'k'), &g, b"s", b"e");
        let rotated = SessionKeys { current: vec![b'n'; 32], previous: Some(vec![b'k'; 32]) };
        assert_eq!(open_id(&rotated, &g, b"s", old.as_bytes()).as_deref(), Some(&b"e"[..]));
        assert_ne!(seal_id(&rotated, &g, b"s", b"e"), old);
        assert_eq!(open_id(&keys(b'n'), &g, b"s", old.as_bytes()), None);
    }
}
