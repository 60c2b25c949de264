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

use crate::json::{self, Json};

/// Why a response could not be filtered (the caller answers 502).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListError {
    /// The body is not the JSON the content type promises.
    Unreadable(String),
    /// A response to the request carries a `result.tools` that is not an array of objects with names.
    Malformed(&'static str),
}

impl std::fmt::Display for ListError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ListError::Unreadable(e) => write!(f, "unreadable tools/list response: {e}"),
            ListError::Malformed(e) => write!(f, "malformed tools/list response: {e}"),
        }
    }
}

/// Do two JSON-RPC ids denote the same id? Strings by value, numbers numerically, and a string
/// that holds a number equals that number: some SDKs (e.g. the MCP Python SDK 2.x) treat `"7"` and
/// `7` as one id, so a server answering `"7"` must not slip past the filter.
fn same_id(a: &Json, b: &Json) -> bool {
    let num_eq = |x: &str, y: &str| crate::conditions::cmp_numbers(x, y) == Some(std::cmp::Ordering::Equal);
    match (a, b) {
        (Json::Number(x), Json::Number(y)) => num_eq(x, y),
        (Json::String(s), Json::Number(n)) | (Json::Number(n), Json::String(s)) => {
            matches!(json::parse(s.trim().as_bytes()), Ok(Json::Number(t)) if num_eq(&t, n))
        }
        _ => a == b,
    }
}

/// Filter one parsed JSON-RPC message (or batch of responses) in place where it answers one of
/// `request_ids`. Returns how many tools were removed, or `None` if nothing in it answers them.
fn filter_message(
    msg: &mut Json,
    request_ids: &[Json],
    hidden: &dyn Fn(&str) -> bool,
) -> Result<Option<usize>, ListError> {
    if let Json::Array(items) = msg {
        let mut total = None;
        for item in items {
            if let Some(n) = filter_one(item, request_ids, hidden)? {
                total = Some(total.unwrap_or(0) + n);
            }
        }
        return Ok(total);
    }
    filter_one(msg, request_ids, hidden)
}

/// Two member names of one object that a case-insensitive client (Go's `encoding/json`) reads as one:
/// the client might read a list the filter did not.
/// Likewise a name that folds to one of `known` without being it (`Result`, `Tools`, `Name`).
fn check_names(members: &[(String, Json)], known: &[&str]) -> Result<(), ListError> {
    let names: Vec<std::borrow::Cow<'_, str>> =
        members.iter().map(|(k, _)| std::borrow::Cow::Borrowed(k.as_str())).collect();
    if crate::fold::clash(&names).is_some() {
        return Err(ListError::Malformed("member names equal after case folding"));
    }
    if members.iter().any(|(k, _)| crate::fold::near_miss(k, known).is_some()) {
        return Err(ListError::Malformed("a member name that folds to a JSON-RPC or MCP member without being it"));
    }
    Ok(())
}

fn filter_one(msg: &mut Json, request_ids: &[Json], hidden: &dyn Fn(&str) -> bool) -> Result<Option<usize>, ListError> {
    let Json::Object(members) = msg else { return Ok(None) };
    check_names(members, &["jsonrpc", "id", "result", "error", "method", "params"])?;
    let answers_request = members.iter().any(|(k, v)| k == "id" && request_ids.iter().any(|r| same_id(v, r)));
    // Fail closed: any result carrying a tool list is filtered, whatever its id says.
    let carries_tools = members.iter().any(|(k, v)| k == "result" && v.get("tools").is_some());
    if !answers_request && !carries_tools {
        return Ok(None);
    }
    let Some((_, result)) = members.iter_mut().find(|(k, _)| k == "result") else {
        return Ok(Some(0)); // an error response: nothing to filter
    };
    let Json::Object(result) = result else { return Err(ListError::Malformed("result is not an object")) };
    check_names(result, &["tools"])?;
    let Some((_, tools)) = result.iter_mut().find(|(k, _)| k == "tools") else {
        return Err(ListError::Malformed("result has no tools"));
    };
    let Json::Array(items) = tools else { return Err(ListError::Malformed("result.tools is not an array")) };
    let before = items.len();
    let mut keep = Vec::with_capacity(before);
    for tool in items.drain(..) {
        if let Json::Object(fields) = &tool {
            check_names(fields, &["name"])?;
        }
        let name = tool.get("name").and_then(Json::as_str).ok_or(ListError::Malformed("a tool has no string name"))?;
        if !hidden(name) {
            keep.push(tool);
        }
    }
    let removed = before - keep.len();
    *items = keep;
    Ok(Some(removed))
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

/// An SSE stream filtered event by event as it arrives, so that long-lived streams (the GET stream,
/// resumed streams) are filtered without waiting for their end. Complete events are filtered and
/// passed on at once; an incomplete last event is held until its end arrives.
#[derive(Debug)]
pub struct SseStream {
    tail: Vec<u8>,
    at_start: bool,
    /// Largest incomplete event held, in bytes.
    max_pending: usize,
}

impl SseStream {
    pub fn new(max_pending: usize) -> Self {
        SseStream { tail: Vec::new(), at_start: true, max_pending }
    }

    /// Feed the next chunk (`end`: it is the last). Returns the bytes to pass on now and how many
    /// tools were removed from them.
    pub fn push(
        &mut self,
        chunk: &[u8],
        end: bool,
        request_ids: &[Json],
        hidden: &dyn Fn(&str) -> bool,
    ) -> Result<(Vec<u8>, usize), ListError> {
        self.tail.extend_from_slice(chunk);
        let split = if end { self.tail.len() } else { last_event_end(&self.tail) };
        let rest = self.tail.split_off(split);
        let done = std::mem::replace(&mut self.tail, rest);
        if self.tail.len() > self.max_pending {
            return Err(ListError::Unreadable("an SSE event exceeds gateway.max_response_bytes".into()));
        }
        if done.is_empty() {
            return Ok((Vec::new(), 0));
        }
        let text = std::str::from_utf8(&done).map_err(|_| ListError::Unreadable("SSE stream is not UTF-8".into()))?;
        let mut out = String::with_capacity(done.len());
        // WHATWG §9.2.6: one leading byte order mark is ignored by SSE parsers; keep it, parse after it.
        let text = match (self.at_start, text.strip_prefix('\u{feff}')) {
            (true, Some(rest)) => {
                out.push('\u{feff}');
                rest
            }
            _ => text,
        };
        self.at_start = false;
        let removed = filter_events(&mut out, text, request_ids, hidden)?;
        Ok((out.into_bytes(), removed))
    }
}

/// The byte offset just after the last blank line (the end of the last complete event), or 0.
/// A CR at the very end may be the first half of a CRLF, so it does not end a line yet.
fn last_event_end(data: &[u8]) -> usize {
    let mut boundary = 0;
    let mut line_start = 0;
    let mut i = 0;
    while i < data.len() {
        let term = match (data.get(i), data.get(i + 1)) {
            (Some(b'\r'), Some(b'\n')) => 2,
            (Some(b'\r'), None) => return boundary,
            (Some(b'\r' | b'\n'), _) => 1,
            _ => {
                i += 1;
                continue;
            }
        };
        if i == line_start {
            boundary = i + term;
        }
        i += term;
        line_start = i;
    }
    boundary
}

/// Filter complete events (and, at the end of a stream, an unterminated last one).
fn filter_events(
    out: &mut String,
    text: &str,
    request_ids: &[Json],
    hidden: &dyn Fn(&str) -> bool,
) -> Result<usize, ListError> {
    let mut removed = 0;
    // Split into lines keeping their terminators (CRLF, LF or CR), then group into events.
    let mut event: Vec<&str> = Vec::new();
    let mut rest = text;
    loop {
        let end = rest.find(['\n', '\r']);
        let (line, next) = match end {
            None => (rest, ""),
            Some(i) => {
                let term = if rest.get(i..i + 2) == Some("\r\n") { 2 } else { 1 };
                (rest.get(..i + term).unwrap_or(rest), rest.get(i + term..).unwrap_or(""))
            }
        };
        if line.is_empty() {
            break;
        }
        let bare = line.trim_end_matches(['\n', '\r']);
        event.push(line);
        if bare.is_empty() {
            removed += flush_event(out, &event, request_ids, hidden)?;
            event.clear();
        }
        rest = next;
    }
    // WHATWG §9.2.6 says an unterminated last event is not dispatched, but some clients (httpx-sse)
    // dispatch it anyway: filter it like any other event.
    if !event.is_empty() {
        removed += flush_event(out, &event, request_ids, hidden)?;
    }
    Ok(removed)
}

/// Is `field` a name that a lenient SSE client reads as `data`: `data` once surrounding whitespace,
/// invisible characters (BOM, zero-width) and case are folded away (`Data`, ` data`, `data `, `DATA`,
/// `\u{feff}data`)?
fn lenient_data_field(field: &str) -> bool {
    let trimmed = field.trim_matches(|c: char| c.is_whitespace() || crate::fold::is_invisible(c));
    trimmed.len() <= 16 && crate::fold::name_key(trimmed) == "data"
}

fn flush_event(
    out: &mut String,
    lines: &[&str],
    request_ids: &[Json],
    hidden: &dyn Fn(&str) -> bool,
) -> Result<usize, ListError> {
    let mut data: Option<String> = None;
    let mut event_type: Option<&str> = None;
    for line in lines {
        let bare = line.trim_end_matches(['\n', '\r']);
        let (field, value) = match bare.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (bare, ""),
        };
        if field == "event" {
            event_type = Some(value);
        } else if field != "data" && lenient_data_field(field) {
            // WHATWG readers ignore this line; lenient MCP clients read it as data. The event cannot
            // be read one way for both, so it is not passed on.
            return Err(ListError::Unreadable("an SSE field name that lenient clients read as data".into()));
        }
        if field == "data" {
            let d = data.get_or_insert_with(String::new);
            if !d.is_empty() {
                d.push('\n');
            }
            d.push_str(value);
        }
    }
    let Some(data) = data.filter(|d| !d.trim().is_empty()) else {
        lines.iter().for_each(|l| out.push_str(l));
        return Ok(0);
    };
    let mut msg = match json::parse_folded_keys_allowed(data.as_bytes()) {
        Ok(m) => m,
        // `event: endpoint`, `data: [DONE]`, …: no client reads these as JSON-RPC (`crate::sse`).
        Err(_) if !crate::sse::could_carry_jsonrpc(event_type, &data) => {
            lines.iter().for_each(|l| out.push_str(l));
            return Ok(0);
        }
        Err(e) => return Err(ListError::Unreadable(format!("SSE data: {e}"))),
    };
    let Some(removed) = filter_message(&mut msg, request_ids, hidden)? else {
        lines.iter().for_each(|l| out.push_str(l));
        return Ok(0);
    };
    let mut wrote_data = false;
    for line in lines {
        let bare = line.trim_end_matches(['\n', '\r']);
        if bare == "data" || bare.starts_with("data:") {
            if !wrote_data {
                let term = line.get(bare.len()..).unwrap_or("\n");
                out.push_str("data: ");
                json::write(out, &msg);
                out.push_str(if term.is_empty() { "\n" } else { term });
                wrote_data = true;
            }
        } else {
            out.push_str(line);
        }
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hide(name: &str) -> bool {
        name.starts_with("delete_") || name == "*secret"
    }

    fn id(n: &str) -> Vec<Json> {
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
    fn sse_unterminated_last_event_and_bom_are_filtered() {
        let stream = "\u{feff}data: {\"id\":3,\"result\":{\"tools\":[{\"name\":\"delete_vm\"},{\"name\":\"a\"}]}}\r";
        let (out, removed) = filter_sse(stream.as_bytes(), &id("3"), &hide).unwrap();
        assert_eq!(removed, 1);
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            "\u{feff}data: {\"id\":3,\"result\":{\"tools\":[{\"name\":\"a\"}]}}\r"
        );
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

    #[test]
    fn sse_keeps_framing_ids_and_other_events() {
        let stream = concat!(
            ": keep-alive comment\r\n\r\n",
            "event: message\r\nid: ev-1\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":1}}\r\n\r\n",
            "event: message\r\nid: ev-2\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"L1\",\r\ndata: \"result\":{\"tools\":[{\"name\":\"delete_vm\"},{\"name\":\"list_vms\"}]}}\r\n\r\n",
        );
        let (out, removed) = filter_sse(stream.as_bytes(), &id("\"L1\""), &hide).unwrap();
        assert_eq!(removed, 1);
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            concat!(
                ": keep-alive comment\r\n\r\n",
                "event: message\r\nid: ev-1\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":1}}\r\n\r\n",
                "event: message\r\nid: ev-2\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"L1\",\"result\":{\"tools\":[{\"name\":\"list_vms\"}]}}\r\n\r\n",
            )
        );
    }

    #[test]
    fn streams_are_filtered_event_by_event_across_any_chunking() {
        let stream = concat!(
            "\u{feff}event: message\r\nid: 1\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\"}\r\n\r\n",
            "data: {\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{\"tools\":[{\"name\":\"delete_vm\"},{\"name\":\"é\"}]}}\r\n\r\n",
            ": comment\n\n",
        );
        let (whole, removed) = filter_sse(stream.as_bytes(), &[], &hide).unwrap();
        assert_eq!(removed, 1);
        assert!(!std::str::from_utf8(&whole).unwrap().contains("delete_vm"));
        // Every split point, including inside CRLF pairs and multi-byte characters, gives the same bytes.
        let bytes = stream.as_bytes();
        for cut in 0..bytes.len() {
            let mut s = SseStream::new(1 << 20);
            let (mut out, mut n) = s.push(&bytes[..cut], false, &[], &hide).unwrap();
            let (more, m) = s.push(&bytes[cut..], true, &[], &hide).unwrap();
            out.extend(more);
            n += m;
            assert_eq!((out.as_slice(), n), (whole.as_slice(), 1), "cut at {cut}");
        }
    }

    #[test]
    fn complete_events_pass_before_the_stream_ends() {
        let mut s = SseStream::new(64);
        let (out, _) = s
            .push(b"data: {\"id\":1,\"result\":{\"tools\":[{\"name\":\"delete_x\"}]}}\n\ndata: {", false, &[], &hide)
            .unwrap();
        assert_eq!(std::str::from_utf8(&out).unwrap(), "data: {\"id\":1,\"result\":{\"tools\":[]}}\n\n");
        assert!(matches!(s.push(&[b'x'; 100], false, &[], &hide), Err(ListError::Unreadable(_))));
    }

    #[test]
    fn sse_lenient_data_fields_are_refused() {
        let list = "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"tools\":[{\"name\":\"delete_vm\"}]}}";
        for field in
            ["Data", " data", "data ", "DATA", "\u{feff}data", "\u{feff}\u{feff}data", "d\u{200b}ata", "\tdata"]
        {
            let stream = format!("event: message\n{field}: {list}\n\n");
            assert_eq!(
                filter_sse(stream.as_bytes(), &id("3"), &hide),
                Err(ListError::Unreadable("an SSE field name that lenient clients read as data".into())),
                "{field:?}"
            );
        }
        // A second BOM at the start of the stream is part of the first field name.
        let stream = format!("\u{feff}\u{feff}data: {list}\n\n");
        assert!(filter_sse(stream.as_bytes(), &id("3"), &hide).is_err());
        // Other fields pass untouched.
        let ok = "event: message\nid: 1\nretry: 5\ndatum: x\ndata: {\"id\":9,\"result\":{}}\n\n";
        assert_eq!(filter_sse(ok.as_bytes(), &id("3"), &hide).unwrap(), (ok.as_bytes().to_vec(), 0));
    }

    #[test]
    fn sse_with_lf_and_unparsable_data() {
        let stream = "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"tools\":[]}}\n\n";
        assert_eq!(filter_sse(stream.as_bytes(), &id("3"), &hide).unwrap(), (stream.as_bytes().to_vec(), 0));
        let bad = "data: {not json\n\n";
        assert!(matches!(filter_sse(bad.as_bytes(), &id("3"), &hide), Err(ListError::Unreadable(_))));
        assert!(matches!(filter_sse(b"\xff\n\n", &id("3"), &hide), Err(ListError::Unreadable(_))));
    }
}
