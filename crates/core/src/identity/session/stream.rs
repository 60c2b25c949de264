//! The ids an SSE stream hands out, sealed as it passes (`gateway.session_key`): the value of every
//! `id` field ([`super::event`]) and the session in the URL of an `endpoint` event
//! ([`super::legacy`]). Every other byte passes unchanged.
//!
//! Fields are read as WHATWG HTML §9.2.6 reads them: lines end at CRLF, LF or CR; a field's name is
//! everything before the first `:`, its value everything after it less one leading space; one byte
//! order mark at the start of the stream is not part of the first line. An `id` whose value is
//! empty resets the client's last event id, and one containing U+0000 is ignored by clients: both
//! pass as they are. A name that is not exactly `id` (`Id`, ` id`) is no event id to a WHATWG
//! client; a lenient client that takes it as one presents the server's bare id, which is refused.

use super::{event, legacy, SessionKeys};
use crate::identity::grant::GrantId;

const BOM: &[u8] = "\u{feff}".as_bytes();

/// Seals the ids of one response's SSE stream for the grant that asked for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamIds {
    keys: SessionKeys,
    grant: GrantId,
    /// The server's `Mcp-Session-Id` of the stream, empty when there is none.
    session: Vec<u8>,
}

impl StreamIds {
    /// The ids of a stream of `grant` in the server's session `session` (empty: none).
    pub fn new(keys: SessionKeys, grant: GrantId, session: Vec<u8>) -> Self {
        StreamIds { keys, grant, session }
    }

    /// The response names its session (`initialize` creates one): its events belong to it.
    pub fn set_session(&mut self, session: &[u8]) {
        session.clone_into(&mut self.session);
    }

    /// Append `events` to `out` with their ids sealed. `events` are complete events (at the end of
    /// a stream the last may be unterminated); `at_start`: they begin the stream.
    pub fn seal_events(&self, out: &mut Vec<u8>, events: &[u8], at_start: bool) {
        let mut rest = events;
        if at_start {
            if let Some(after) = rest.strip_prefix(BOM) {
                out.extend_from_slice(BOM);
                rest = after;
            }
        }
        let mut start = 0;
        let mut at = 0;
        for (content, term) in lines(rest) {
            at += content.len() + term.len();
            if content.is_empty() {
                self.seal_event(out, rest.get(start..at).unwrap_or_default());
                start = at;
            }
        }
        self.seal_event(out, rest.get(start..).unwrap_or_default());
    }

    /// One event (its lines, the blank line that ends it included).
    fn seal_event(&self, out: &mut Vec<u8>, event: &[u8]) {
        let mut event_type: Option<&[u8]> = None;
        let mut data_lines = 0;
        for (content, _) in lines(event) {
            let (name, value) = field(content);
            match name {
                b"event" => event_type = Some(content.get(value..).unwrap_or_default()),
                b"data" => data_lines += 1,
                _ => {}
            }
        }
        // The URL is the event's data: one line, or it is passed unsealed (and its bare id refused).
        let endpoint = event_type == Some(b"endpoint") && data_lines == 1;
        for (content, term) in lines(event) {
            let (name, at) = field(content);
            let (head, value) = content.split_at(at.min(content.len()));
            let sealed = match name {
                b"id" if !value.is_empty() && !value.contains(&0) => {
                    Some(event::seal_id(&self.keys, &self.grant, &self.session, value).into_bytes())
                }
                b"data" if endpoint => legacy::seal_endpoint(value, |id| legacy::seal_id(&self.keys, &self.grant, id)),
                _ => None,
            };
            match sealed {
                Some(v) => {
                    out.extend_from_slice(head);
                    out.extend_from_slice(&v);
                }
                None => out.extend_from_slice(content),
            }
            out.extend_from_slice(term);
        }
    }
}

/// A field's name and where its value starts (after the `:` and one optional space; the line's end
/// when it has no `:`).
fn field(content: &[u8]) -> (&[u8], usize) {
    match content.iter().position(|&b| b == b':') {
        Some(colon) => {
            let name = content.get(..colon).unwrap_or_default();
            (name, if content.get(colon + 1) == Some(&b' ') { colon + 2 } else { colon + 1 })
        }
        None => (content, content.len()),
    }
}

/// The lines of `text` as (content, terminator); a CRLF, LF or CR ends a line, the last may have none.
fn lines(text: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
    let mut rest = text;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let (content, term) = match rest.iter().position(|&b| b == b'\n' || b == b'\r') {
            None => (rest.len(), 0),
            Some(i) if rest.get(i..i + 2) == Some(b"\r\n") => (i, 2),
            Some(i) => (i, 1),
        };
        let (line, next) = rest.split_at(content + term);
        rest = next;
        Some(line.split_at(content))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids() -> StreamIds {
        StreamIds::new(SessionKeys { current: vec![b'k'; 32], previous: None }, [3; 32], b"sess".to_vec())
    }

    fn sealed(text: &str, at_start: bool) -> String {
        let mut out = Vec::new();
        ids().seal_events(&mut out, text.as_bytes(), at_start);
        String::from_utf8(out).unwrap()
    }

    fn ev(id: &str) -> String {
        event::seal_id(&ids().keys, &[3; 32], b"sess", id.as_bytes())
    }

    #[test]
    fn id_values_are_sealed_and_nothing_else_changes() {
        let stream = "event: message\r\nid: ev-1\r\ndata: {\"id\":1}\r\n\r\n: c\n\nid:ev-2\rretry: 5\r\rid: e3\n";
        let want = format!(
            "event: message\r\nid: {}\r\ndata: {{\"id\":1}}\r\n\r\n: c\n\nid:{}\rretry: 5\r\rid: {}\n",
            ev("ev-1"),
            ev("ev-2"),
            ev("e3")
        );
        assert_eq!(sealed(stream, false), want);
        // The value after one space: `id:  x` keeps the first space as part of the name's line.
        assert_eq!(sealed("id:  x\n\n", false), format!("id: {}\n\n", ev(" x")));
        // Sealed under the stream's session: another session gives another id.
        let mut other = ids();
        other.set_session(b"other");
        let mut out = Vec::new();
        other.seal_events(&mut out, b"id: ev-1\n\n", false);
        assert_ne!(String::from_utf8(out).unwrap(), format!("id: {}\n\n", ev("ev-1")));
    }

    #[test]
    fn empty_and_ignored_ids_and_other_names_pass() {
        for keep in [
            "id\n\n",
            "id:\n\n",
            "id: \r\n\r\n",
            "id: a\0b\n\n",
            "Id: x\n\n",
            " id: x\n\n",
            "idx: y\n\n",
            "data: id: z\n\n",
        ] {
            assert_eq!(sealed(keep, false), keep, "{keep:?}");
        }
        // An unterminated last event (end of stream) is sealed too.
        assert_eq!(sealed("data: x\nid: 9", false), format!("data: x\nid: {}", ev("9")));
    }

    #[test]
    fn a_bom_starts_only_the_stream() {
        assert_eq!(sealed("\u{feff}id: 1\n\n", true), format!("\u{feff}id: {}\n\n", ev("1")));
        assert_eq!(sealed("\u{feff}id: 1\n\n", false), "\u{feff}id: 1\n\n");
    }

    #[test]
    fn endpoint_events_get_their_session_sealed() {
        let legacy = |id: &str| legacy::seal_id(&ids().keys, &[3; 32], id.as_bytes());
        let stream = "event: endpoint\r\ndata: /messages/?session_id=0a1b\r\n\r\n";
        let want = format!("event: endpoint\r\ndata: /messages/?session_id={}\r\n\r\n", legacy("0a1b"));
        assert_eq!(sealed(stream, true), want);
        // Field order does not matter; the last event type wins.
        let later = "data: /m?sessionId=x\nevent: message\nevent: endpoint\n\n";
        assert_eq!(
            sealed(later, false),
            format!("data: /m?sessionId={}\nevent: message\nevent: endpoint\n\n", legacy("x"))
        );
        // Not an endpoint event, or an endpoint whose URL spans two data lines: unchanged.
        for keep in [
            "event: message\ndata: /messages/?session_id=0a1b\n\n",
            "data: /messages/?session_id=0a1b\n\n",
            "event: Endpoint\ndata: /messages/?session_id=0a1b\n\n",
            "event: endpoint\ndata: /messages/?session_id=0a1b\ndata: x\n\n",
            "event: endpoint\ndata: /messages/\n\n",
        ] {
            assert_eq!(sealed(keep, false), keep, "{keep:?}");
        }
    }
}
