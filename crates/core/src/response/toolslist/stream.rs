//! An SSE stream (WHATWG HTML §9.2) split into events; the `data` of an event carrying a tool list
//! is filtered, the ids it hands out are sealed (`crate::identity::session::StreamIds`), everything else
//! passes byte for byte.

use super::{filter_message, ListError};
use crate::identity::session::StreamIds;
use crate::wire::json::{self, Json};

/// A filter of one event's JSON-RPC message ([`SseStream::push_judged`]).
pub type Judge<'a> = dyn FnMut(&mut Json, usize) -> Result<Option<usize>, ListError> + 'a;

/// An SSE stream filtered event by event as it arrives, so that long-lived streams (the GET stream,
/// resumed streams) are filtered without waiting for their end. Complete events are filtered and
/// passed on at once; an incomplete last event is held until its end arrives.
#[derive(Debug)]
pub struct SseStream {
    tail: Vec<u8>,
    at_start: bool,
    /// Largest incomplete event held, in bytes.
    max_pending: usize,
    /// Where in `tail` the search for an event's end resumes: the start of its last incomplete
    /// line (the lines before it are complete and not blank), so each byte is scanned about once.
    scanned: usize,
    /// Tool lists are filtered (else events are only split, for their ids, and never parsed).
    lists: bool,
    /// Without `lists`: an event larger than `max_pending` is passed on as it arrives, unsealed,
    /// until its blank line; `Some(at line start)` while one is.
    passing: Option<bool>,
}

impl SseStream {
    pub fn new(max_pending: usize) -> Self {
        SseStream { tail: Vec::new(), at_start: true, max_pending, scanned: 0, lists: true, passing: None }
    }

    /// A stream whose tool lists are not filtered: events are split only to seal their ids, and
    /// none is refused (an event larger than `max_pending` passes with its ids unsealed).
    pub fn ids_only(max_pending: usize) -> Self {
        SseStream { lists: false, ..Self::new(max_pending) }
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
        self.push_sealed(chunk, end, request_ids, hidden, None)
    }

    /// [`SseStream::push`], with the ids of complete events sealed by `ids`.
    pub fn push_sealed(
        &mut self,
        chunk: &[u8],
        end: bool,
        request_ids: &[Json],
        hidden: &dyn Fn(&str) -> bool,
        ids: Option<&StreamIds>,
    ) -> Result<(Vec<u8>, usize), ListError> {
        self.push_judged(chunk, end, &mut |msg, _| filter_message(msg, request_ids, hidden), ids)
    }

    /// [`SseStream::push_sealed`] with any message filter: `judge` gets each event's JSON-RPC
    /// message (and its data's length in bytes) and returns how many tools it removed, or `None` if
    /// it left the message unchanged.
    pub fn push_judged(
        &mut self,
        chunk: &[u8],
        end: bool,
        judge: &mut Judge<'_>,
        ids: Option<&StreamIds>,
    ) -> Result<(Vec<u8>, usize), ListError> {
        self.tail.extend_from_slice(chunk);
        let mut out = Vec::new();
        if let Some(line_start) = self.passing {
            let (passed, ended, line_start) = pass_event(&self.tail, line_start, end);
            out.extend(self.tail.drain(..passed));
            if !ended {
                self.passing = Some(line_start);
                return Ok((out, 0));
            }
            self.passing = None;
        }
        let split = if end {
            self.tail.len()
        } else {
            let (split, resume) = last_event_end(&self.tail, self.scanned);
            self.scanned = resume.saturating_sub(split);
            split
        };
        // Nothing complete yet: keep holding the tail as it is (no copy).
        let done = if split == 0 {
            Vec::new()
        } else {
            let rest = self.tail.split_off(split);
            std::mem::replace(&mut self.tail, rest)
        };
        let oversize = self.tail.len() > self.max_pending;
        if oversize && self.lists {
            return Err(ListError::Unreadable("an SSE event exceeds gateway.max_response_bytes".into()));
        }
        let mut removed = 0;
        if !done.is_empty() {
            let at_start = std::mem::replace(&mut self.at_start, false);
            let filtered = if self.lists {
                let (text, n) = self.filter(&done, at_start, judge)?;
                removed = n;
                text.into_bytes()
            } else {
                done
            };
            match ids {
                Some(ids) => ids.seal_events(&mut out, &filtered, at_start),
                None if out.is_empty() => out = filtered,
                None => out.extend_from_slice(&filtered),
            }
        }
        if oversize {
            // Passed as it is, so that no event is refused for its size; a CR at the end may be the
            // first half of a CRLF and waits for the next byte.
            self.at_start = false;
            let keep = usize::from(self.tail.last() == Some(&b'\r'));
            let passed = self.tail.len() - keep;
            out.extend(self.tail.drain(..passed));
            self.passing = Some(out.last().is_none_or(|&b| b == b'\n' || b == b'\r'));
            self.scanned = 0;
        }
        Ok((out, removed))
    }

    /// Filter complete events' tool lists.
    fn filter(&self, done: &[u8], at_start: bool, judge: &mut Judge<'_>) -> Result<(String, usize), ListError> {
        let text = std::str::from_utf8(done).map_err(|_| ListError::Unreadable("SSE stream is not UTF-8".into()))?;
        let mut out = String::with_capacity(done.len());
        // WHATWG §9.2.6: one leading byte order mark is ignored by SSE parsers; keep it, parse after it.
        let text = match (at_start, text.strip_prefix('\u{feff}')) {
            (true, Some(rest)) => {
                out.push('\u{feff}');
                rest
            }
            _ => text,
        };
        let removed = filter_events(&mut out, text, judge)?;
        Ok((out, removed))
    }
}

/// In an event passed as it arrives: how many bytes of `data` belong to it, whether its blank line
/// is among them, and whether they end at the start of a line. `line_start`: `data` starts a line.
/// A CR at the end of `data` waits for the next byte unless `end`.
fn pass_event(data: &[u8], mut line_start: bool, end: bool) -> (usize, bool, bool) {
    let mut i = 0;
    while let Some(&b) = data.get(i) {
        let term = match (b, data.get(i + 1)) {
            (b'\r', Some(b'\n')) => 2,
            (b'\r', None) if !end => return (i, false, line_start),
            (b'\r' | b'\n', _) => 1,
            _ => {
                i += 1;
                line_start = false;
                continue;
            }
        };
        i += term;
        if line_start {
            return (i, true, true);
        }
        line_start = true;
    }
    (i, false, line_start)
}

/// The byte offset just after the last blank line (the end of the last complete event), or 0, and
/// where the last incomplete line starts. The search starts at `from`, the start of a line after
/// which no blank line was seen. A CR at the very end may be the first half of a CRLF, so it does not
/// end a line yet.
fn last_event_end(data: &[u8], from: usize) -> (usize, usize) {
    let mut boundary = 0;
    let mut line_start = from;
    let mut i = from;
    while i < data.len() {
        let term = match (data.get(i), data.get(i + 1)) {
            (Some(b'\r'), Some(b'\n')) => 2,
            (Some(b'\r'), None) => return (boundary, line_start),
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
    (boundary, line_start)
}

/// Filter complete events (and, at the end of a stream, an unterminated last one).
fn filter_events(out: &mut String, text: &str, judge: &mut Judge<'_>) -> Result<usize, ListError> {
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
            removed += flush_event(out, &event, judge)?;
            event.clear();
        }
        rest = next;
    }
    // WHATWG §9.2.6 says an unterminated last event is not dispatched, but some clients (httpx-sse)
    // dispatch it anyway: filter it like any other event.
    if !event.is_empty() {
        removed += flush_event(out, &event, judge)?;
    }
    Ok(removed)
}

/// Is `field` a name that a lenient SSE client reads as `data`: `data` once surrounding whitespace,
/// invisible characters (BOM, zero-width) and case are folded away (`Data`, ` data`, `data `, `DATA`,
/// `\u{feff}data`)?
fn lenient_data_field(field: &str) -> bool {
    let trimmed = field.trim_matches(|c: char| c.is_whitespace() || crate::wire::fold::is_invisible(c));
    trimmed.len() <= 16 && crate::wire::fold::name_key(trimmed) == "data"
}

fn flush_event(out: &mut String, lines: &[&str], judge: &mut Judge<'_>) -> Result<usize, ListError> {
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
        // `event: endpoint`, `data: [DONE]`, …: no client reads these as JSON-RPC (`crate::wire::sse`).
        Err(_) if !crate::wire::sse::could_carry_jsonrpc(event_type, &data) => {
            lines.iter().for_each(|l| out.push_str(l));
            return Ok(0);
        }
        Err(e) => return Err(ListError::Unreadable(format!("SSE data: {e}"))),
    };
    let Some(removed) = judge(&mut msg, data.len())? else {
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
mod tests;
