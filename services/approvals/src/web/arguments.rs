//! Arguments (and other JSON of the call) as the approver reads them: pretty-printed from the
//! strict parse, printable ASCII only, with the warnings (look-alike keys, numbers a server may
//! read differently, whitespace that may hide a line break) and the badges' texts.

/// The badge on a card whose arguments (or tool name) had characters escaped.
pub const ESCAPED_BADGE: &str = "contains non-ASCII or invisible characters: shown escaped";

/// The badge on a card whose arguments hold a number a server may parse to another value.
pub const NUMBERS_BADGE: &str =
    "numbers that a server may round or read differently (fractions, exponents, beyond ±2^53): shown exactly as sent";

/// The badge on a card whose arguments hold a string (or key) that may hide a line break.
pub const WHITESPACE_BADGE: &str = "strings with runs of spaces or leading/trailing whitespace: check line breaks";

/// Whether a JSON number (its text as sent) may become another value when a server parses it: a
/// fraction or an exponent (a float in most languages: `101.99999999999999999` is 102), `-0`, or
/// an integer beyond ±2^53 (not exact in a double).
pub fn number_may_change(n: &str) -> bool {
    if n.contains(['.', 'e', 'E']) || n == "-0" {
        return true;
    }
    // An integer: `-`? then digits without leading zeros (the strict parser's grammar).
    const MAX_EXACT: &str = "9007199254740992";
    let digits = n.strip_prefix('-').unwrap_or(n);
    digits.len() > MAX_EXACT.len() || (digits.len() == MAX_EXACT.len() && digits > MAX_EXACT)
}

/// Whether a string may hide a line break where the page wraps it: a run of four or more spaces,
/// or whitespace at its start or end.
pub fn whitespace_may_mislead(s: &str) -> bool {
    s.starts_with(char::is_whitespace) || s.ends_with(char::is_whitespace) || s.contains("    ")
}

/// Writes `s` with every character outside printable ASCII (0x20-0x7E) as a `\uXXXX` escape
/// (UTF-16, so astral characters become a surrogate pair) and `\` as `\\` (so a literal `\u200b`
/// typed by the agent never looks like an escaped one); with `quote`, also `"` as `\"`.
/// Returns whether anything but `\` and `"` was escaped.
fn push_visible(out: &mut String, s: &str, quote: bool) -> bool {
    let mut escaped = false;
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' if quote => out.push_str("\\\""),
            ' '..='~' => out.push(c),
            c => {
                escaped = true;
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    out.push_str(&format!("\\u{unit:04x}"));
                }
            }
        }
    }
    escaped
}

/// `s` in printable ASCII (see [`push_visible`], quotes kept), and whether anything was escaped.
pub fn visible(s: &str) -> (String, bool) {
    let mut out = String::with_capacity(s.len());
    let escaped = push_visible(&mut out, s, false);
    (out, escaped)
}

/// Arguments as the approver reads them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    /// Pretty-printed (two spaces), keys in the order sent, numbers exactly as sent, strings and
    /// keys in printable ASCII only.
    pub text: String,
    /// A character was escaped (non-ASCII or control).
    pub escaped: bool,
    /// Warnings about keys of one object that look alike.
    pub lookalikes: Vec<String>,
    /// A number may be read as another value ([`number_may_change`]).
    pub numbers: bool,
    /// A string or key has a run of spaces or leading/trailing whitespace
    /// ([`whitespace_may_mislead`]).
    pub whitespace: bool,
}

/// Pretty-prints an approval's arguments for the page: see [`Rendered`]. The text is read with the
/// filter's strict parser; should a stored text not parse (rows of an older version), it is shown
/// as it is, every character outside printable ASCII escaped.
pub fn render_arguments(raw: &str) -> Rendered {
    render_json(raw, "arguments")
}

/// [`render_arguments`] for another JSON text of the call (a continuation leg's answers); `root`
/// names it in warnings.
pub fn render_json(raw: &str, root: &str) -> Rendered {
    use mcp_policy_core::wire::json::Json;

    fn newline(out: &mut String, depth: usize) {
        out.push('\n');
        for _ in 0..depth {
            out.push_str("  ");
        }
    }
    fn strip(k: &str) -> String {
        k.chars().filter(|c| (' '..='~').contains(c)).collect()
    }
    /// Letters and digits only: no ASCII punctuation or space, nothing invisible (`vm_id`, `vm-id`,
    /// `vm.id`, `vmid ` and `VMID` are all `vmid`).
    fn alnum(folded: &str) -> String {
        folded.chars().filter(|c| if c.is_ascii() { c.is_ascii_alphanumeric() } else { c.is_alphanumeric() }).collect()
    }
    fn lookalikes(members: &[(String, Json)], path: &str, warnings: &mut Vec<String>) {
        let forms: Vec<[String; 4]> = members
            .iter()
            .map(|(k, _)| {
                let folded = k.to_lowercase();
                [strip(k), strip(&folded), alnum(&folded), folded]
            })
            .collect();
        for (i, a) in forms.iter().enumerate() {
            for (j, b) in forms.iter().enumerate().skip(i + 1) {
                if a.iter().zip(b.iter()).any(|(x, y)| x == y) {
                    let (Some((ka, _)), Some((kb, _))) = (members.get(i), members.get(j)) else { continue };
                    let mut w = format!("keys that look alike in {path}: \"");
                    push_visible(&mut w, ka, true);
                    w.push_str("\" and \"");
                    push_visible(&mut w, kb, true);
                    w.push_str(
                        "\" (equal without non-ASCII or invisible characters, punctuation or spaces, or ignoring case)",
                    );
                    warnings.push(w);
                }
            }
        }
    }
    fn value(v: &Json, depth: usize, path: &str, r: &mut Rendered) {
        match v {
            Json::Null => r.text.push_str("null"),
            Json::Bool(b) => r.text.push_str(if *b { "true" } else { "false" }),
            Json::Number(n) => {
                r.numbers |= number_may_change(n);
                r.text.push_str(n);
            }
            Json::String(s) => {
                r.whitespace |= whitespace_may_mislead(s);
                r.text.push('"');
                r.escaped |= push_visible(&mut r.text, s, true);
                r.text.push('"');
            }
            Json::Array(items) if items.is_empty() => r.text.push_str("[]"),
            Json::Array(items) => {
                r.text.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        r.text.push(',');
                    }
                    newline(&mut r.text, depth + 1);
                    value(item, depth + 1, &format!("{path}[{i}]"), r);
                }
                newline(&mut r.text, depth);
                r.text.push(']');
            }
            Json::Object(members) if members.is_empty() => r.text.push_str("{}"),
            Json::Object(members) => {
                lookalikes(members, path, &mut r.lookalikes);
                r.text.push('{');
                for (i, (k, item)) in members.iter().enumerate() {
                    if i > 0 {
                        r.text.push(',');
                    }
                    newline(&mut r.text, depth + 1);
                    r.text.push('"');
                    r.whitespace |= whitespace_may_mislead(k);
                    r.escaped |= push_visible(&mut r.text, k, true);
                    r.text.push_str("\": ");
                    let (shown, _) = visible(k);
                    value(item, depth + 1, &format!("{path}.{shown}"), r);
                }
                newline(&mut r.text, depth);
                r.text.push('}');
            }
        }
    }
    let mut r = Rendered {
        text: String::with_capacity(raw.len() + raw.len() / 4),
        escaped: false,
        lookalikes: vec![],
        numbers: false,
        whitespace: false,
    };
    // Keys that clash only after folding are shown (and warned about below), not refused: the page
    // displays what it is asked about.
    match mcp_policy_core::wire::json::parse_folded_keys_allowed(raw.as_bytes()) {
        Ok(v) => value(&v, 0, root, &mut r),
        Err(_) => r.escaped = push_visible(&mut r.text, raw, false),
    }
    r
}

/// The start of an approval's arguments as sent (JSON text, possibly cut inside a value) for the
/// list page, in printable ASCII: every other character as a `\uXXXX` escape (as JSON would
/// write it inside a string), but newlines kept (in valid JSON text they are only ever whitespace
/// between values) and `\` as it is (the text is JSON: its own escapes stay readable). At most
/// `max` bytes, never ending inside an escape. Returns the text and whether anything was escaped.
pub fn raw_prefix_visible(raw: &str, max: usize) -> (String, bool) {
    let mut out = String::with_capacity(raw.len().min(max));
    let mut escaped = false;
    for c in raw.chars() {
        let mut one = String::new();
        match c {
            ' '..='~' | '\n' => one.push(c),
            c => {
                escaped = true;
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    one.push_str(&format!("\\u{unit:04x}"));
                }
            }
        }
        if out.len() + one.len() > max {
            break;
        }
        out.push_str(&one);
    }
    (out, escaped)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(raw: &str) -> String {
        render_arguments(raw).text
    }

    #[test]
    fn pretty_prints_verbatim() {
        let raw = r#" {"a" : [1, 2.50, {}, [ ]], "n":123456789012345678901234567890,"s":"x,{\"y\":[1]}\\","e":{},"z":-1E+5} "#;
        let want = "{\n  \"a\": [\n    1,\n    2.50,\n    {},\n    []\n  ],\n  \"n\": 123456789012345678901234567890,\n  \"s\": \"x,{\\\"y\\\":[1]}\\\\\",\n  \"e\": {},\n  \"z\": -1E+5\n}";
        assert_eq!(
            render_arguments(raw),
            Rendered { text: want.into(), escaped: false, lookalikes: vec![], numbers: true, whitespace: false }
        );
        // Keys in the order sent (not sorted), numbers as sent (not -100000.0).
        assert_eq!(
            text(r#"{"b":[true,null,"z"],"a":{"c":-1e5}}"#),
            "{\n  \"b\": [\n    true,\n    null,\n    \"z\"\n  ],\n  \"a\": {\n    \"c\": -1e5\n  }\n}"
        );
        assert_eq!(text("{}"), "{}");
        assert_eq!(text("7"), "7");
        assert_eq!(text("9007199254740993"), "9007199254740993");
    }

    #[test]
    fn escapes_everything_outside_printable_ascii() {
        let cases: &[(&str, &str)] = &[
            // U+200B zero-width space making a second "vmid".
            (r#"{"vmid":100,"vmid\u200b":101}"#, "{\n  \"vmid\": 100,\n  \"vmid\\u200b\": 101\n}"),
            // Cyrillic і (U+0456), sent raw.
            ("{\"cmd\":\"\u{0456}d\"}", "{\n  \"cmd\": \"\\u0456d\"\n}"),
            // Bidi override, line separator, C1 control, BOM, NBSP, DEL, tab, newline.
            (
                "[\"a\u{202e}b\",\"\u{2028}\",\"\u{0085}\",\"\u{feff}\",\"\u{a0}\u{a0}x\",\"\u{7f}\",\"\\t\\n\\u0000\"]",
                "[\n  \"a\\u202eb\",\n  \"\\u2028\",\n  \"\\u0085\",\n  \"\\ufeff\",\n  \"\\u00a0\\u00a0x\",\n  \"\\u007f\",\n  \"\\u0009\\u000a\\u0000\"\n]",
            ),
            // Astral: a surrogate pair.
            ("{\"e\":\"\u{1F600}\"}", "{\n  \"e\": \"\\ud83d\\ude00\"\n}"),
        ];
        for (raw, want) in cases {
            let r = render_arguments(raw);
            assert_eq!(r.text, *want, "{raw}");
            assert!(r.escaped, "{raw}");
            assert!(r.text.bytes().all(|b| b == b'\n' || (0x20..=0x7e).contains(&b)));
        }
        // A literal backslash-u typed by the agent stays distinguishable from an escaped character.
        let r = render_arguments(r#"{"k":"\\u200b"}"#);
        assert_eq!(r.text, "{\n  \"k\": \"\\\\u200b\"\n}");
        assert!(!r.escaped);
        assert_eq!(visible("start\u{200b}vm\\"), ("start\\u200bvm\\\\".to_string(), true));
        assert_eq!(visible("start_vm \"x\""), ("start_vm \"x\"".to_string(), false));
    }

    #[test]
    fn warns_about_lookalike_keys() {
        let r = render_arguments(r#"{"vmid":100,"vmid\u200b":101}"#);
        assert_eq!(
            r.lookalikes,
            vec!["keys that look alike in arguments: \"vmid\" and \"vmid\\u200b\" (equal without non-ASCII or invisible characters, punctuation or spaces, or ignoring case)"]
        );
        let r = render_arguments(r#"{"opts":[{"Force":true,"force":false}],"x":{"a":1}}"#);
        assert_eq!(
            r.lookalikes,
            vec!["keys that look alike in arguments.opts[0]: \"Force\" and \"force\" (equal without non-ASCII or invisible characters, punctuation or spaces, or ignoring case)"]
        );
        assert!(!r.escaped);
        // Cyrillic capital and small letters fold together too; plain distinct keys do not warn.
        assert_eq!(render_arguments("{\"\u{0406}d\":1,\"\u{0456}d\":2}").lookalikes.len(), 1);
        assert_eq!(render_arguments(r#"{"vmid":1,"vmids":2,"node":"a"}"#).lookalikes, Vec::<String>::new());
        // Equal once punctuation, spaces and case are ignored.
        let r = render_arguments(r#"{"vm_id":1,"vm-id":2,"Vm.Id":3,"vmid ":4,"vmids":5}"#);
        let pairs: Vec<&str> = r.lookalikes.iter().map(|w| w.split(": ").nth(1).unwrap_or("")).collect();
        assert_eq!(
            pairs,
            vec![
                "\"vm_id\" and \"vm-id\" (equal without non-ASCII or invisible characters, punctuation or spaces, or ignoring case)",
                "\"vm_id\" and \"Vm.Id\" (equal without non-ASCII or invisible characters, punctuation or spaces, or ignoring case)",
                "\"vm_id\" and \"vmid \" (equal without non-ASCII or invisible characters, punctuation or spaces, or ignoring case)",
                "\"vm-id\" and \"Vm.Id\" (equal without non-ASCII or invisible characters, punctuation or spaces, or ignoring case)",
                "\"vm-id\" and \"vmid \" (equal without non-ASCII or invisible characters, punctuation or spaces, or ignoring case)",
                "\"Vm.Id\" and \"vmid \" (equal without non-ASCII or invisible characters, punctuation or spaces, or ignoring case)",
            ]
        );
        // Different levels never collide.
        assert_eq!(render_arguments(r#"{"a":{"a":1}}"#).lookalikes, Vec::<String>::new());
    }

    #[test]
    fn numbers_that_may_change() {
        let cases: &[(&str, bool)] = &[
            ("0", false),
            ("-5", false),
            ("101", false),
            ("9007199254740992", false),
            ("-9007199254740992", false),
            ("1000000000000000", false),
            ("9007199254740993", true),
            ("-9007199254740993", true),
            ("10000000000000000", true),
            ("101.99999999999999999", true),
            ("1.0", true),
            ("1e2", true),
            ("1E-2", true),
            ("-0", true),
            ("-0.0", true),
        ];
        for (n, want) in cases {
            assert_eq!(number_may_change(n), *want, "{n}");
        }
    }

    #[test]
    fn whitespace_that_may_mislead() {
        let cases: &[(&str, bool)] = &[
            ("", false),
            ("ls -l", false),
            ("a   b", false),
            ("a    b", true),
            (" a", true),
            ("a ", true),
            ("a\n", true),
            ("\ta", true),
            ("a\u{a0}", true),
        ];
        for (s, want) in cases {
            assert_eq!(whitespace_may_mislead(s), *want, "{s:?}");
        }
        let r = render_arguments(r#"{"k":"a    b"}"#);
        assert!(r.whitespace && !r.numbers && !r.escaped);
        assert!(render_arguments(r#"{" k":1}"#).whitespace);
        assert!(!render_arguments(r#"{"k":"a b","n":1}"#).whitespace);
    }

    #[test]
    fn raw_prefix_is_escaped_and_capped() {
        assert_eq!(raw_prefix_visible("{\"a\":\"\\u200b\"}", 100), ("{\"a\":\"\\u200b\"}".to_string(), false));
        assert_eq!(
            raw_prefix_visible("[\n\"\u{200b}\t\u{1F600}\"", 100),
            ("[\n\"\\u200b\\u0009\\ud83d\\ude00\"".to_string(), true)
        );
        // Never ends inside an escape.
        assert_eq!(raw_prefix_visible("ab\u{200b}", 7), ("ab".to_string(), true));
        assert_eq!(raw_prefix_visible("ab\u{200b}", 8), ("ab\\u200b".to_string(), true));
    }

    #[test]
    fn unreadable_stored_text_is_still_escaped() {
        let r = render_arguments("{\"a\":1,\"a\":\"\u{200b}\"}");
        assert_eq!(r.text, "{\"a\":1,\"a\":\"\\u200b\"}");
        assert!(r.escaped);
    }
}
