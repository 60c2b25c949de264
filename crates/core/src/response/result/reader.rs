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
//! Each text is matched on its own, and the concatenation of the `text` members in document order
//! too (the content items a client shows as one text), so that a pattern split over two content
//! items (`"-----BEGIN RSA PRIV"`, `"ATE KEY-----"`) is found.

use crate::policy::needle::Needle;
use crate::wire::json::Json;

/// The part of a response that reaches the model: its `result`, else its `error`.
pub fn payload(response: &Json) -> Option<&Json> {
    response.get("result").or_else(|| response.get("error"))
}

/// The texts of a payload: every string value, depth first, in document order, and which of them
/// are `text` members.
#[derive(Debug, Default)]
pub struct Texts<'a> {
    pub all: Vec<&'a str>,
    /// Indices in `all` of the values of members named `text`.
    text_members: Vec<usize>,
}

impl<'a> Texts<'a> {
    /// The `text` members joined in document order (empty unless there are two or more).
    fn joined(&self) -> String {
        if self.text_members.len() < 2 {
            return String::new();
        }
        self.text_members.iter().filter_map(|&i| self.all.get(i).copied()).collect()
    }
}

/// Every string value of `value`, depth first, in document order.
pub fn texts(value: &Json) -> Texts<'_> {
    let mut out = Texts::default();
    collect(value, false, &mut out);
    out
}

fn collect<'a>(value: &'a Json, is_text: bool, out: &mut Texts<'a>) {
    match value {
        Json::String(s) => {
            if is_text {
                out.text_members.push(out.all.len());
            }
            out.all.push(s);
        }
        Json::Array(items) => items.iter().for_each(|v| collect(v, false, out)),
        Json::Object(members) => members.iter().for_each(|(k, v)| collect(v, k == "text", out)),
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

/// Does `needle` match in one of `texts`, or in their `text` members joined?
pub fn matches(texts: &Texts<'_>, needle: &Needle) -> bool {
    texts.all.iter().any(|t| needle.is_match(t)) || {
        let joined = texts.joined();
        !joined.is_empty() && needle.is_match(&joined)
    }
}

/// Does a match of `needle` in the `text` members joined start in one of them and end in another?
/// (Even where its part in the first is a match of its own, as `Bearer \S+` is of `Bearer s`: the
/// rest of the token would pass in the next item.)
pub fn spans_items(texts: &Texts<'_>, needle: &Needle) -> bool {
    let joined = texts.joined();
    if joined.is_empty() || !needle.may_match(&joined) {
        return false;
    }
    let mut ends = Vec::with_capacity(texts.text_members.len());
    let mut at = 0;
    for &i in &texts.text_members {
        at += texts.all.get(i).map_or(0, |t| t.len());
        ends.push(at);
    }
    // The first item end after the match's start must come before its end.
    needle
        .matches(&joined)
        .into_iter()
        .any(|(start, end)| ends.get(ends.partition_point(|&b| b <= start)).is_some_and(|&b| b < end))
}

/// The index of the first of `needles` that matches in `texts` ([`matches`]).
pub fn first_match<'n>(texts: &Texts<'_>, needles: impl IntoIterator<Item = &'n Needle>) -> Option<usize> {
    needles.into_iter().position(|n| matches(texts, n))
}

/// Replace every match of `needle` in `text` by `with` (literally); returns how many. A match that
/// is `with` already is left as it is and not counted (`Bearer [redacted]` for `Bearer \S+`), so a
/// text redacted again changes only where a new match formed.
pub fn redact(text: &mut String, needle: &Needle, with: &str) -> usize {
    if !needle.may_match(text) {
        return 0;
    }
    let mut out = String::new();
    let mut last = 0;
    let mut n = 0;
    for (start, end) in needle.matches(text) {
        if text.get(start..end) == Some(with) {
            continue;
        }
        out.push_str(text.get(last..start).unwrap_or(""));
        out.push_str(with);
        last = end;
        n += 1;
    }
    if n > 0 {
        out.push_str(text.get(last..).unwrap_or(""));
        *text = out;
    }
    n
}
