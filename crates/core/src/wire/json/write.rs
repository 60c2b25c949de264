//! Writing JSON text: compact, or with object members sorted (the canonical form `approval` hashes).

use super::Json;

/// Write `v` as compact JSON text. Numbers are written as their exact source text.
pub fn write(out: &mut String, v: &Json) {
    write_with(out, v, false);
}

/// Write `v` as compact JSON text with every object's members sorted by key (code point order,
/// which is the byte order of their UTF-8): the canonical form `approval` hashes. Numbers are
/// written as their exact source text.
pub fn write_sorted(out: &mut String, v: &Json) {
    write_with(out, v, true);
}

fn write_with(out: &mut String, v: &Json, sorted: bool) {
    match v {
        Json::Null => out.push_str("null"),
        Json::Bool(true) => out.push_str("true"),
        Json::Bool(false) => out.push_str("false"),
        Json::Number(n) => out.push_str(n),
        Json::String(s) => write_str(out, s),
        Json::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_with(out, item, sorted);
            }
            out.push(']');
        }
        Json::Object(members) => {
            let order = if sorted { by_name(members) } else { (0..members.len()).collect() };
            out.push('{');
            for (i, (k, item)) in order.into_iter().filter_map(|m| members.get(m)).enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_str(out, k);
                out.push(':');
                write_with(out, item, sorted);
            }
            out.push('}');
        }
    }
}

/// The indices of `members` in the order of their names (code point order). The names are sorted
/// as `&str`, the sort the policy's and the folding's names already link (a sort of the members
/// would link one more, about 2.3 KB of the .wasm): each is a slice of one text, each followed
/// there by a NUL so that every slice starts at its own offset, which gives its index back.
fn by_name(members: &[(String, Json)]) -> Vec<usize> {
    let mut text = String::new();
    let mut starts = Vec::with_capacity(members.len());
    for (k, _) in members {
        starts.push(text.len());
        text.push_str(k);
        text.push('\0');
    }
    let mut names: Vec<&str> =
        members.iter().zip(&starts).map(|((k, _), &at)| text.get(at..at + k.len()).unwrap_or_default()).collect();
    names.sort_unstable();
    let base = text.as_ptr() as usize;
    names.iter().filter_map(|n| starts.binary_search(&(n.as_ptr() as usize - base)).ok()).collect()
}

/// Write `s` as a JSON string literal (RFC 8259 §7) to `out`.
pub fn write_str(out: &mut String, s: &str) {
    out.push('"');
    // Runs of bytes that need no escape are found as the parser finds them (`scan::string_stop`,
    // eight bytes at a time) and copied whole: UTF-8 sequences are all ≥ 0x80, so a run always ends
    // on a character boundary. Only `"`, `\\` and control characters are rewritten.
    let bytes = s.as_bytes();
    let mut run = 0;
    loop {
        let i = super::scan::string_stop(bytes, run);
        out.push_str(s.get(run..i).unwrap_or(""));
        let Some(&b) = bytes.get(i) else { break };
        match b {
            b'"' => out.push_str("\\\""),
            b'\\' => out.push_str("\\\\"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            _ => out.push_str(&format!("\\u{b:04x}")),
        }
        run = i + 1;
    }
    out.push('"');
}
