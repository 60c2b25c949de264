//! Filtering `tools/list` results (MCP `server/tools`, "Listing Tools").
//!
//! The response to a `tools/list` request comes back either as one JSON-RPC response
//! (`application/json`) or as a Server-Sent Events stream (`text/event-stream`, WHATWG HTML §9.2)
//! whose events may include notifications before the result. Only the JSON-RPC response whose id
//! matches the request is rewritten: tools the policy hides are removed from `result.tools`; every
//! other field of the result (`nextCursor`, `_meta`, …) and of each kept tool is preserved. Every other
//! SSE event, comment, `id:` and `event:` line is passed through byte for byte.
//!
//! Anything that cannot be read with certainty is an error, so the caller answers 502 instead of
//! passing the unfiltered list.
//!
//! - `message`: one JSON-RPC message (or batch) filtered where it answers the request;
//! - `stream`: an SSE stream split into events and filtered event by event.

use crate::wire::json::{self, Json};

mod message;
mod stream;
pub(crate) use message::{filter_message, same_id};
pub use stream::{Judge, SseStream};

/// Why a response could not be filtered (the caller answers 502).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListError {
    /// The body is not the JSON the content type promises (a `tools/list` response or a tool result).
    Unreadable(String),
    /// The message's member names clash once folded (a tool result's too), or a response to the
    /// request carries a `result.tools` that is not an array of objects with names.
    Malformed(&'static str),
}

impl std::fmt::Display for ListError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ListError::Unreadable(e) => write!(f, "unreadable response: {e}"),
            ListError::Malformed(e) => write!(f, "malformed response: {e}"),
        }
    }
}

/// Filter an `application/json` response body. Returns the new body and the number of tools removed
/// (the body is returned unchanged, byte for byte, when it is not the matching response).
pub fn filter_json(
    body: &[u8],
    request_ids: &[Json],
    hidden: &dyn Fn(&str) -> bool,
) -> Result<(Vec<u8>, usize), ListError> {
    let mut msg = json::parse_folded_keys_allowed(body).map_err(|e| ListError::Unreadable(e.to_string()))?;
    match filter_message(&mut msg, request_ids, hidden)? {
        None => Ok((body.to_vec(), 0)),
        Some(removed) => {
            let mut out = String::with_capacity(body.len());
            json::write(&mut out, &msg);
            Ok((out.into_bytes(), removed))
        }
    }
}

/// Filter a whole `text/event-stream` body: every event is kept; the `data` of an event carrying a
/// tool list is replaced by one `data:` line with the filtered JSON.
pub fn filter_sse(
    body: &[u8],
    request_ids: &[Json],
    hidden: &dyn Fn(&str) -> bool,
) -> Result<(Vec<u8>, usize), ListError> {
    SseStream::new(usize::MAX).push(body, true, request_ids, hidden)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hidden tools of these tests.
    pub(super) fn hide(name: &str) -> bool {
        name.starts_with("delete_") || name == "*secret"
    }

    /// The request ids `[n]` (`n` a JSON text).
    pub(super) fn id(n: &str) -> Vec<Json> {
        vec![json::parse(n.as_bytes()).unwrap()]
    }

    #[test]
    fn json_results_keep_everything_but_hidden_tools() {
        let body = br#"{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"list_vms","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}},{"name":"delete_vm","inputSchema":{}}],"nextCursor":"c2"}}"#;
        let (out, removed) = filter_json(body, &id("7"), &hide).unwrap();
        assert_eq!(removed, 1);
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            r#"{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"list_vms","inputSchema":{"type":"object"},"annotations":{"readOnlyHint":true}}],"nextCursor":"c2"}}"#
        );
        // Same id written differently still matches.
        assert_eq!(filter_json(body, &id("7.0"), &hide).unwrap().1, 1);
    }

    #[test]
    fn batched_responses_are_filtered_per_element() {
        let body = br#"[{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"delete_vm"},{"name":"a"}]}}]"#;
        let (out, removed) = filter_json(body, &id("2"), &hide).unwrap();
        assert_eq!(removed, 1);
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            r#"[{"jsonrpc":"2.0","id":1,"result":{}},{"jsonrpc":"2.0","id":2,"result":{"tools":[{"name":"a"}]}}]"#
        );
    }

    #[test]
    fn tool_lists_are_filtered_whatever_their_id() {
        let body = br#"{"jsonrpc":"2.0","id":8,"result":{"tools":[{"name":"delete_vm"}]}}"#;
        let expected = br#"{"jsonrpc":"2.0","id":8,"result":{"tools":[]}}"#;
        assert_eq!(filter_json(body, &id("7"), &hide).unwrap(), (expected.to_vec(), 1));
        let as_string = br#"{"jsonrpc":"2.0","id":"7","result":{}}"#;
        assert_eq!(filter_json(as_string, &id("7"), &hide), Err(ListError::Malformed("result has no tools")));
    }

    #[test]
    fn folded_names_in_a_list_are_malformed_but_not_in_schemas() {
        let folded = Err(ListError::Malformed("member names equal after case folding"));
        for body in [
            &br#"{"jsonrpc":"2.0","id":7,"result":{"tools":[],"Tools":[{"name":"delete_vm"}]}}"#[..],
            br#"{"jsonrpc":"2.0","id":7,"Result":{"tools":[{"name":"delete_vm"}]},"result":{"tools":[]}}"#,
            br#"{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"a","Name":"delete_vm"}]}}"#,
        ] {
            assert_eq!(filter_json(body, &id("7"), &hide), folded, "{}", String::from_utf8_lossy(body));
        }
        let near = br#"{"jsonrpc":"2.0","id":7,"Result":{"tools":[{"name":"delete_vm"}]}}"#;
        assert!(matches!(filter_json(near, &id("7"), &hide), Err(ListError::Malformed(_))));
        let schema = br#"{"jsonrpc":"2.0","id":7,"result":{"tools":[{"name":"a","inputSchema":{"properties":{"id":{},"ID":{}}}}]}}"#;
        assert_eq!(filter_json(schema, &id("7"), &hide).unwrap().1, 0);
    }

    #[test]
    fn other_responses_pass_unchanged() {
        let body = br#"{"jsonrpc":"2.0","id":8,"result":{"resources":[{"name":"delete_vm"}]}}"#;
        assert_eq!(filter_json(body, &id("7"), &hide).unwrap(), (body.to_vec(), 0));
        let err = br#"{"jsonrpc":"2.0","id":7,"error":{"code":-32603,"message":"x"}}"#;
        assert_eq!(filter_json(err, &id("7"), &hide).unwrap(), (err.to_vec(), 0));
    }

    #[test]
    fn unreadable_or_malformed_results_are_errors() {
        assert!(matches!(filter_json(b"{", &id("1"), &hide), Err(ListError::Unreadable(_))));
        assert!(matches!(filter_json(br#"{"id":1,"id":1}"#, &id("1"), &hide), Err(ListError::Unreadable(_))));
        assert_eq!(
            filter_json(br#"{"id":1,"result":{"tools":{}}}"#, &id("1"), &hide),
            Err(ListError::Malformed("result.tools is not an array"))
        );
        assert_eq!(
            filter_json(br#"{"id":1,"result":{"tools":[{"title":"x"}]}}"#, &id("1"), &hide),
            Err(ListError::Malformed("a tool has no string name"))
        );
        assert_eq!(
            filter_json(br#"{"id":1,"result":{}}"#, &id("1"), &hide),
            Err(ListError::Malformed("result has no tools"))
        );
    }
}
