//! An SSE stream (WHATWG HTML §9.2) split into events; the `data` of an event carrying a tool list
//! is filtered, everything else passes byte for byte.

use super::{filter_message, ListError};
use crate::json::{self, Json};

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
    use crate::toolslist::filter_sse;

    fn hide(name: &str) -> bool {
        name.starts_with("delete_") || name == "*secret"
    }

    fn id(n: &str) -> Vec<Json> {
        vec![json::parse(n.as_bytes()).unwrap()]
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
