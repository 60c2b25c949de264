//! Which Server-Sent Events can carry a JSON-RPC message (WHATWG HTML §9.2; MCP "Transports").
//!
//! Not every SSE event on an MCP stream is JSON-RPC: the 2024-11-05 HTTP+SSE transport opens its
//! stream with `event: endpoint` whose data is a URL, and some servers end streams with
//! `data: [DONE]`. The official clients hand only `message` events to their JSON-RPC reader (the
//! Python SDK 2.x: `sse.event == "message"`; the TypeScript SDK: `!event.event || event.event ===
//! "message"`), and JSON-RPC messages are JSON objects or arrays of them.
//!
//! So an event whose data does not parse as JSON is harmless, and passed on unchanged, when it
//! cannot carry a message: its event type is something other than `message` (compared
//! ASCII-case-insensitively, so no client variant can read it as `message`), or its data does not
//! start like a JSON object or array (`{`, or `[` followed by something that can start a JSON
//! value or `]`). Every other unreadable event could carry a message, and fails closed.
//! Events whose data is JSON are filtered whatever their type.

/// Could an event with this `event` field (`None`: absent; the last one wins) and this data (the
/// `data` lines joined with `\n`) be read as a JSON-RPC message by some client?
pub fn could_carry_jsonrpc(event_type: Option<&str>, data: &str) -> bool {
    if let Some(t) = event_type {
        // WHATWG §9.2.6: an empty event type dispatches as `message`.
        if !t.is_empty() && !t.trim().eq_ignore_ascii_case("message") {
            return false;
        }
    }
    let mut rest = data.trim_start_matches(|c: char| c.is_whitespace() || c == '\u{feff}');
    match rest.chars().next() {
        Some('{') => true,
        Some('[') => {
            rest = rest.get(1..).unwrap_or("").trim_start();
            // Anything a JSON (or JSON5) value can start with, or an empty array.
            matches!(
                rest.chars().next(),
                None | Some(
                    '{' | '[' | ']' | '"' | '\'' | '-' | '+' | '.' | '0'..='9' | 't' | 'f' | 'n' | 'I' | 'N' | '/'
                )
            )
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn non_jsonrpc_events_are_recognised() {
        assert!(!could_carry_jsonrpc(Some("endpoint"), "/messages?session_id=abc"));
        assert!(!could_carry_jsonrpc(Some("endpoint"), "{\"broken"));
        assert!(!could_carry_jsonrpc(None, "[DONE]"));
        assert!(!could_carry_jsonrpc(Some("message"), " [ DONE ]"));
        assert!(!could_carry_jsonrpc(None, "hello"));
        assert!(!could_carry_jsonrpc(None, "42"));
    }

    #[test]
    fn unreadable_events_that_could_carry_a_message_are_flagged() {
        for (t, d) in [
            (None, "{not json"),
            (Some("message"), "{"),
            (Some(" Message "), "{\"id\":1"),
            (Some(""), "{x"),
            (None, "[{\"id\":1}"),
            (None, "[ {"),
            (None, "["),
            (None, "\u{feff}{"),
            (None, "[NaN, {"),
        ] {
            assert!(could_carry_jsonrpc(t, d), "{t:?} {d:?}");
        }
    }
}
