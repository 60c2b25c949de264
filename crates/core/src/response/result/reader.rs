//! The result reader: every text of a JSON-RPC response that a model may be shown, decoded as the
//! client decodes it, and which patterns match in it. Pure, and shared by every rule that reads
//! what a tool sends back.
//!
//! What is read: every string value under the response's `result` (or `error`), at any depth.
//! That covers `content[].text`, embedded resource text (`content[].resource.text`), every string
//! leaf of `structuredContent`, `_meta`, and content types MCP may add later: reading everything is
//! the fail-closed choice. JSON escapes are already decoded by the parser (`\u002d` is `-`). Member
//! names are not read. Byte strings in base64 (`data`, `blob`) are read as their base64 text.
//!
//! Each text is matched on its own, and the text items joined in document order too (the `text` of
//! the `content` items of type `text`, which a client shows as one text, with nothing or a line
//! break between them), so that a pattern split over two content items (`"-----BEGIN RSA PRIV"`,
//! `"ATE KEY-----"`) is found.

use crate::policy::needle::Needle;
use crate::wire::json::Json;

/// The part of a response that reaches the model: its `result`, else its `error`.
pub fn payload(response: &Json) -> Option<&Json> {
    response.get("result").or_else(|| response.get("error"))
}

/// The texts of a payload: every string value, depth first, in document order, and which of them
/// are the `text` of its `content` items of type `text`, the items a client shows as one text.
#[derive(Debug, Default)]
pub struct Texts<'a> {
    pub all: Vec<&'a str>,
    /// Indices in `all` of the `text` of each `content` item of type `text`.
    text_members: Vec<usize>,
}

/// What a client may put between the `text` items it shows as one text: nothing, or a line break.
const JOINS: [&str; 2] = ["", "\n"];

impl<'a> Texts<'a> {
    /// The text items joined by `sep` in document order, and where each lies in it (empty unless
    /// there are two or more).
    fn joined(&self, sep: &str) -> (String, Vec<(usize, usize)>) {
        let (mut joined, mut spans) = (String::new(), Vec::new());
        if self.text_members.len() < 2 {
            return (joined, spans);
        }
        for text in self.text_members.iter().filter_map(|&i| self.all.get(i)) {
            if !spans.is_empty() {
                joined.push_str(sep);
            }
            spans.push((joined.len(), joined.len() + text.len()));
            joined.push_str(text);
        }
        (joined, spans)
    }
}

/// Every string value of `value`, depth first, in document order. A `text` member elsewhere
/// (`_meta.text`, `resource.text`, `structuredContent.text`, an image item's) is read on its own,
/// never joined: placed between two items, it would part what a client joins.
pub fn texts(value: &Json) -> Texts<'_> {
    let mut out = Texts::default();
    let Json::Object(members) = value else {
        collect(value, false, &mut out);
        return out;
    };
    for (k, v) in members {
        match v {
            Json::Array(items) if k == "content" => {
                for item in items {
                    let text_item = item.get("type").and_then(Json::as_str) == Some("text");
                    collect(item, text_item, &mut out);
                }
            }
            _ => collect(v, false, &mut out),
        }
    }
    out
}

/// `text_item`: `value` is a `content` item of type `text`, whose `text` is joined.
fn collect<'a>(value: &'a Json, text_item: bool, out: &mut Texts<'a>) {
    match value {
        Json::String(s) => out.all.push(s),
        Json::Array(items) => items.iter().for_each(|v| collect(v, false, out)),
        Json::Object(members) => {
            for (k, v) in members {
                if text_item && k == "text" && matches!(v, Json::String(_)) {
                    out.text_members.push(out.all.len());
                }
                collect(v, false, out);
            }
        }
        Json::Null | Json::Bool(_) | Json::Number(_) => {}
    }
}

/// Apply `f` to every string value of `value`, depth first, in document order.
pub fn for_each_text_mut(value: &mut Json, f: &mut dyn FnMut(&mut String)) {
    match value {
        Json::String(s) => f(s),
        Json::Array(items) => items.iter_mut().for_each(|v| for_each_text_mut(v, f)),
        Json::Object(members) => members.iter_mut().for_each(|(_, v)| for_each_text_mut(v, f)),
        Json::Null | Json::Bool(_) | Json::Number(_) => {}
    }
}

/// Does `needle` match in one of `texts`, or in their text items joined (either way)?
pub fn matches(texts: &Texts<'_>, needle: &Needle) -> bool {
    texts.all.iter().any(|t| needle.is_match(t))
        || JOINS.iter().any(|sep| {
            let (joined, _) = texts.joined(sep);
            !joined.is_empty() && needle.is_match(&joined)
        })
}

/// Is there a match of `needle` in the text items joined (either way) that redacting each item
/// on its own, as [`to_redact`] does with `withs`, leaves to a client that joins them? One that runs
/// from one item into the next or over the line break between them (even where its part in the
/// first is a match of its own, as `Bearer \S+` is of `Bearer s`: the rest of the token would pass
/// in the next item), or one within an item that the item alone does not show (`\b` where two
/// items meet).
pub fn left_by_items(texts: &Texts<'_>, needle: &Needle, withs: &[&str]) -> bool {
    // Each item's own matches, found once, when a joined match first falls in it.
    let mut own: Vec<Option<Vec<(usize, usize)>>> = vec![None; texts.text_members.len()];
    JOINS.iter().any(|sep| {
        let (joined, spans) = texts.joined(sep);
        to_redact(&joined, needle, withs).into_iter().any(|(start, end)| {
            // The item the match starts in: the last that starts at or before it.
            let Some(i) = spans.partition_point(|&(a, _)| a <= start).checked_sub(1) else { return true };
            let (Some(&(a, b)), Some(found)) = (spans.get(i), own.get_mut(i)) else { return true };
            let found = found.get_or_insert_with(|| {
                let item = texts.text_members.get(i).and_then(|&k| texts.all.get(k));
                item.map_or_else(Vec::new, |t| to_redact(t, needle, withs))
            });
            end > b || found.binary_search(&(start - a, end - a)).is_err()
        })
    })
}

/// The index of the first of `needles` that matches in `texts` ([`matches`]).
pub fn first_match<'n>(texts: &Texts<'_>, needles: impl IntoIterator<Item = &'n Needle>) -> Option<usize> {
    needles.into_iter().position(|n| matches(texts, n))
}

/// The matches of `needle` in `text` that a redaction replaces: all but those within text that
/// `withs` (the replacements of the rules redacting it) already hold, which is the operator's own
/// text (`Bearer [redacted]` for `Bearer \S+`; `example.com` in `user@example.com` written for
/// another rule's match). So a text redacted again changes only where a new match formed.
pub fn to_redact(text: &str, needle: &Needle, withs: &[&str]) -> Vec<(usize, usize)> {
    if !needle.may_match(text) {
        return Vec::new();
    }
    let mut found = needle.matches(text);
    found.retain(|&m| !withs.iter().any(|w| within(text.as_bytes(), w.as_bytes(), m)));
    found
}

/// Does an occurrence of `w` in `text` hold the match `start..end`? Only the places where such an
/// occurrence would start are compared, from `end - w.len()` to `start`.
fn within(text: &[u8], w: &[u8], (start, end): (usize, usize)) -> bool {
    let near = text.get(end.saturating_sub(w.len())..start.saturating_add(w.len()).min(text.len()));
    !w.is_empty() && end - start <= w.len() && near.is_some_and(|near| near.windows(w.len()).any(|c| c == w))
}

/// Replace the matches of `needle` in `text` that [`to_redact`] gives by `with` (literally);
/// returns how many, or `None`, leaving `text` as it is, when the redacted text would be longer
/// than `max_len` bytes (a short match replaced by a long `with` many times over).
pub fn redact(text: &mut String, needle: &Needle, with: &str, withs: &[&str], max_len: usize) -> Option<usize> {
    let found = to_redact(text, needle, withs);
    if found.is_empty() {
        return Some(0);
    }
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for &(start, end) in &found {
        out.push_str(text.get(last..start).unwrap_or(""));
        out.push_str(with);
        last = end;
        if out.len() > max_len {
            return None;
        }
    }
    out.push_str(text.get(last..).unwrap_or(""));
    if out.len() > max_len {
        return None;
    }
    *text = out;
    Some(found.len())
}
