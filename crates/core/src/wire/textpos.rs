//! Positions in a text: byte offsets (what the JSON parser reports) turned into the line and column
//! that people and editors use, and a one-line excerpt with a caret under the column.
//!
//! Lines are counted from 1 and end at `\n`, `\r\n` or a lone `\r`, as editors count them (RFC 8259
//! whitespace allows all three, so a file saved with any of them parses). Columns are
//! counted from 1 in Unicode scalar values (characters), so `é` is one column; a tab is one column
//! too, as editors report it in their "column" (not their screen position).

use unicode_width::UnicodeWidthChar;

use crate::wire::fold;
use crate::wire::json::{ParseError, ParseErrorKind};

/// A 1-based line and column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LineCol {
    pub line: usize,
    pub column: usize,
}

/// Whether the byte at `i` ends a line: a `\n`, or a `\r` not followed by one (the `\r` of `\r\n`
/// belongs to the line's end, and a position on its `\n` is still on that line).
fn ends_line(text: &[u8], i: usize) -> bool {
    match text.get(i) {
        Some(b'\n') => true,
        Some(b'\r') => text.get(i + 1) != Some(&b'\n'),
        _ => false,
    }
}

/// The start of the line holding `offset`, and that line's number.
fn line_start(text: &[u8], offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let start = (0..offset).rev().find(|&i| ends_line(text, i)).map_or(0, |i| i + 1);
    (start, (0..offset).filter(|&i| ends_line(text, i)).count() + 1)
}

/// The line and column of byte `offset` in `text` (an offset past the end is the end). Bytes that
/// are not valid UTF-8 count as one column each.
pub fn line_col(text: &[u8], offset: usize) -> LineCol {
    let offset = offset.min(text.len());
    let (start, line) = line_start(text, offset);
    let prefix = text.get(start..offset).unwrap_or(&[]);
    LineCol { line, column: String::from_utf8_lossy(prefix).chars().count() + 1 }
}

/// Widest excerpt shown, in characters; longer lines are cut around the column with `…`.
const EXCERPT_CHARS: usize = 100;

/// The line holding byte `offset`, prefixed with its number, and a second line with `^` under the
/// column, e.g.
///
/// ```text
///    3 |   "tools": {,
///      |             ^
/// ```
///
/// Control characters and the other invisible ones of [`fold::is_invisible`] (format characters such
/// as bidi overrides, zero-width spaces) are shown as `?`: a policy file must neither drive the
/// terminal nor hide a character from its author. The caret is placed by display width (UAX #11:
/// a wide CJK character or emoji takes two cells, a combining mark none). Lines longer than 100
/// characters are cut to a window around the column.
pub fn excerpt(text: &[u8], offset: usize) -> String {
    let offset = offset.min(text.len());
    let (start, line) = line_start(text, offset);
    let end = text.get(start..).and_then(|rest| rest.iter().position(|&b| b == b'\n' || b == b'\r'));
    let end = end.map_or(text.len(), |i| start + i);
    let content = String::from_utf8_lossy(text.get(start..end).unwrap_or(&[])).into_owned();
    let chars: Vec<char> = content.chars().map(visible).collect();
    let col = line_col(text, offset).column - 1;
    // A window of EXCERPT_CHARS characters that holds the column, about a third of the way in.
    let from = if chars.len() <= EXCERPT_CHARS { 0 } else { col.saturating_sub(EXCERPT_CHARS / 3) };
    let to = (from + EXCERPT_CHARS).min(chars.len());
    let from = if to - from < EXCERPT_CHARS { to.saturating_sub(EXCERPT_CHARS) } else { from };
    let mut shown: String = chars.get(from..to).unwrap_or(&[]).iter().collect();
    let mut pad: String = chars
        .get(from..col.min(chars.len()))
        .unwrap_or(&[])
        .iter()
        .map(|&c| match c {
            '\t' => "\t",
            c => match c.width() {
                Some(0) => "",
                Some(2) => "  ",
                _ => " ",
            },
        })
        .collect();
    if from > 0 {
        shown.insert(0, '…');
        pad.insert(0, ' ');
    }
    if to < chars.len() {
        shown.push('…');
    }
    let number = line.to_string();
    let gutter = " ".repeat(number.len());
    format!("{number:>4} | {shown}\n{gutter:>4} | {pad}^")
}

/// `c` as error text shows it to a person: a control character or another invisible one of
/// [`fold::is_invisible`] (a bidi override, a zero-width space, a NUL) becomes `?`, so that text
/// from a file can neither drive the terminal nor hide or reorder what is read. Tabs and line
/// breaks are kept: they are the text's own layout.
pub fn visible(c: char) -> char {
    if c != '\t' && c != '\n' && fold::is_invisible(c) {
        '?'
    } else {
        c
    }
}

/// A strict-JSON parse error with its line and column instead of its byte offset, e.g.
/// `unexpected character at line 3, column 14`. The message never quotes the input.
///
/// Data after the value names both places, since the place where the parser stopped is rarely where
/// the mistake is: a stray `}` closes the document early, and the error is only found at the text
/// that follows it. So: `the top-level object closes at line 21, column 2; line 26, column 4 has
/// more (data after the JSON value)`.
///
/// `within` follows the first place named, to say what text the lines count in when it is not the
/// file a reader sees (a policy inside Envoy's YAML): `" of the policy text"`.
pub fn describe(e: &ParseError, text: &[u8], within: &str) -> String {
    let full = e.to_string();
    let what = full.strip_suffix(&format!(" at byte {}", e.offset)).unwrap_or(&full);
    let at = line_col(text, e.offset);
    if let (ParseErrorKind::TrailingData, Some(close)) = (e.kind, value_end(text, e.offset)) {
        let value = match text.get(close) {
            Some(b'}') => "object",
            Some(b']') => "array",
            _ => "value",
        };
        let closed = line_col(text, close);
        return format!(
            "the top-level {value} closes at line {}, column {}{within}; line {}, column {} has more ({what})",
            closed.line, closed.column, at.line, at.column
        );
    }
    format!("{what} at line {}, column {}{within}", at.line, at.column)
}

/// The offset of the last byte of the top-level value, when trailing data starts at `offset`: the
/// last byte before it that is not JSON whitespace (RFC 8259 §2).
pub fn value_end(text: &[u8], offset: usize) -> Option<usize> {
    text.get(..offset)?.iter().rposition(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::json;

    #[test]
    fn lines_and_columns() {
        let t = b"{\n  \"a\": 1,\n  \"b\": x\n}";
        assert_eq!(line_col(t, 0), LineCol { line: 1, column: 1 });
        assert_eq!(line_col(t, 1), LineCol { line: 1, column: 2 });
        assert_eq!(line_col(t, 2), LineCol { line: 2, column: 1 });
        let x = t.iter().position(|&b| b == b'x').unwrap();
        assert_eq!(line_col(t, x), LineCol { line: 3, column: 8 });
        assert_eq!(line_col(t, 10_000), LineCol { line: 4, column: 2 });
        // Columns count characters, not bytes.
        assert_eq!(line_col("\"é\" x".as_bytes(), 5), LineCol { line: 1, column: 5 });
        assert_eq!(line_col(b"a\r\nb", 3), LineCol { line: 2, column: 1 });
    }

    /// `\r\n` is one line break, and so is a lone `\r`; a position on the `\r` or the `\n` of a
    /// line's end is on that line.
    #[test]
    fn every_line_ending_editors_count() {
        let t = b"a\r\nb\rc\nd\r\re";
        let at = |c: u8| t.iter().position(|&b| b == c).unwrap();
        let lc = |i: usize| (line_col(t, i).line, line_col(t, i).column);
        assert_eq!(
            [at(b'a'), at(b'b'), at(b'c'), at(b'd'), at(b'e')].map(lc),
            [(1, 1), (2, 1), (3, 1), (4, 1), (6, 1)]
        );
        // The `\r` and the `\n` of `a\r\n`, the lone `\r` after b, the two after d.
        assert_eq!([1, 2, 4, 8, 9].map(lc), [(1, 2), (1, 3), (2, 2), (4, 2), (5, 1)]);
        assert_eq!(excerpt(t, at(b'c')), "   3 | c\n     | ^");
        // Past the line's last character, the caret stands just after it.
        assert_eq!(excerpt(t, 2), "   1 | a\n     |  ^");
        // A policy saved with old Mac line endings: the error is on its own line.
        let t = b"{\r  \"version\": \"1\",\r  \"tools\": {,\r}\r";
        let e = json::parse(t).unwrap_err();
        assert_eq!(describe(&e, t, ""), "unexpected character at line 3, column 13");
        assert_eq!(excerpt(t, e.offset), "   3 |   \"tools\": {,\n     |             ^");
    }

    #[test]
    fn parse_errors_name_line_and_column() {
        let t = b"{\n  \"version\": \"1\",\n  \"tools\": {,\n}\n";
        let e = json::parse(t).unwrap_err();
        assert_eq!(describe(&e, t, ""), "unexpected character at line 3, column 13");
        assert_eq!(excerpt(t, e.offset), "   3 |   \"tools\": {,\n     |             ^");
        let t = b"{\"a\":1,\"a\":2}";
        let e = json::parse(t).unwrap_err();
        assert!(describe(&e, t, "").starts_with("duplicate object key at line 1, column "), "{}", describe(&e, t, ""));
        // The end of the input.
        let t = b"{\n";
        let e = json::parse(t).unwrap_err();
        assert_eq!(describe(&e, t, ""), "unexpected end of input at line 2, column 1");
        assert_eq!(excerpt(t, e.offset), "   2 | \n     | ^");
    }

    #[test]
    fn data_after_the_value_names_where_the_document_closed() {
        let t = b"{\n  \"version\": \"1\",\n  \"tools\": {}\n}\n  }\n  ,\"x\": 1\n}";
        let e = json::parse(t).unwrap_err();
        assert_eq!(
            describe(&e, t, ""),
            "the top-level object closes at line 4, column 1; line 5, column 3 has more (data after the JSON value)"
        );
        assert_eq!(value_end(t, e.offset), Some(t.windows(3).position(|w| w == b"\n}\n").unwrap() + 1));
        let t = b"[1]\n2";
        let e = json::parse(t).unwrap_err();
        assert_eq!(
            describe(&e, t, ""),
            "the top-level array closes at line 1, column 3; line 2, column 1 has more (data after the JSON value)"
        );
        let t = b"1 2";
        let e = json::parse(t).unwrap_err();
        assert_eq!(
            describe(&e, t, ""),
            "the top-level value closes at line 1, column 1; line 1, column 3 has more (data after the JSON value)"
        );
    }

    #[test]
    fn excerpts_keep_tabs_hide_controls_and_cut_long_lines() {
        assert_eq!(excerpt(b"\t\"a\": \x1b[2J x", 11), "   1 | \t\"a\": ?[2J x\n     | \t          ^");
        let long = format!("{{\"k\": [{}x]}}", "1, ".repeat(100));
        let at = long.find('x').unwrap();
        let shown = excerpt(long.as_bytes(), at);
        let (first, second) = shown.split_once('\n').unwrap();
        assert!(first.starts_with("   1 | …") && first.ends_with("x]}"), "{first}");
        assert_eq!(first.chars().count() - 7, EXCERPT_CHARS + 1);
        // The caret sits under the x.
        let caret = second.chars().count() - 1;
        assert_eq!(first.chars().nth(caret), Some('x'), "{shown}");
    }

    #[test]
    fn excerpts_hide_invisible_characters_and_place_the_caret_by_display_width() {
        // A zero-width space, a right-to-left override and a tag character are shown as `?`, one
        // column each, so the caret stays under the x.
        let t = "\"a\u{200b}b\u{202e}\u{e0041}\": x".as_bytes();
        assert_eq!(excerpt(t, t.len() - 1), "   1 | \"a?b??\": x\n     |          ^");
        // Wide characters take two cells, combining marks none.
        let t = "{\"検索\": {}, \"🚀\": x}".as_bytes();
        let at = t.iter().position(|&b| b == b'x').unwrap();
        assert_eq!(excerpt(t, at), "   1 | {\"検索\": {}, \"🚀\": x}\n     |                    ^");
        let t = "{\"cafe\u{301}\u{301}\": x}".as_bytes();
        let at = t.iter().position(|&b| b == b'x').unwrap();
        assert_eq!(excerpt(t, at), "   1 | {\"cafe\u{301}\u{301}\": x}\n     |          ^");
    }
}
