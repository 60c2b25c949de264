//! A regex searched for faster when every match starts with the same plain text ([`Needle`]):
//! result rules scan whole tool results (up to their `max_bytes`), argument conditions whole string
//! arguments (up to `gateway.max_body_bytes`); `regex-lite` alone reads about 30 MB/s natively and a
//! fourth of that in the wasm module.

use regex_lite::Regex;

/// A compiled regex (of a result rule or an argument condition), with the literal text every match
/// starts with when the pattern has one (`AKIA` for `AKIA[0-9A-Z]{16}`). Then a match can only start where the literal
/// occurs: the text is searched for the literal (a substring search), and the regex is run anchored
/// there only (`\A(?:…)`), which is much faster than running `regex-lite` over the whole text. The
/// pattern starts with plain characters, so no assertion looks before the anchored start.
#[derive(Debug, Clone)]
pub struct Needle {
    pub regex: Regex,
    literal: Option<(Box<str>, Regex)>,
}

impl Needle {
    pub fn new(regex: Regex) -> Self {
        let literal = literal_prefix(regex.as_str()).and_then(|l| {
            let anchored = Regex::new(&format!("\\A(?:{})", regex.as_str())).ok()?;
            Some((l.into_boxed_str(), anchored))
        });
        Needle { regex, literal }
    }

    /// Does the regex match anywhere in `text`?
    pub fn is_match(&self, text: &str) -> bool {
        let Some((lit, anchored)) = &self.literal else { return self.regex.is_match(text) };
        // `contains` first: on x86-64 it has a SIMD path for short literals that `find` lacks,
        // and most texts hold no occurrence at all.
        if !self.may_match(text) {
            return false;
        }
        for (tried, i) in starts(text, lit).enumerate() {
            if tried == ANCHORED_TRIES {
                return self.regex.find_at(text, i).is_some();
            }
            if text.get(i..).is_some_and(|t| anchored.is_match(t)) {
                return true;
            }
        }
        false
    }

    /// Could the regex match in `text`? (False only when its literal prefix is absent.)
    pub fn may_match(&self, text: &str) -> bool {
        self.literal.as_ref().is_none_or(|(l, _)| text.len() >= l.len() && text.contains(&**l))
    }

    /// The non-empty matches in `text`, leftmost first, not overlapping: (start, end) byte offsets.
    pub fn matches(&self, text: &str) -> Vec<(usize, usize)> {
        let Some((lit, anchored)) = &self.literal else {
            return self.regex.find_iter(text).filter(|m| m.start() < m.end()).map(|m| (m.start(), m.end())).collect();
        };
        let mut out = Vec::new();
        let mut from = 0;
        let mut missed = 0;
        for i in starts(text, lit) {
            if i < from {
                continue;
            }
            if missed == ANCHORED_TRIES {
                // The rest in unanchored runs, each from the end of the last match: every match
                // starts with the literal, so none is empty.
                let mut at = i;
                while let Some(m) = self.regex.find_at(text, at).filter(|m| m.end() > at) {
                    out.push((m.start(), m.end()));
                    at = m.end();
                }
                break;
            }
            match text.get(i..).and_then(|t| anchored.find(t)).filter(|m| m.end() > 0) {
                Some(m) => {
                    out.push((i, i + m.end()));
                    from = i + m.end();
                }
                None => missed += 1,
            }
        }
        out
    }
}

/// Anchored runs that may miss where the literal occurs before the rest of the text is searched in
/// one unanchored run: an anchored run may read to the end of the text (`rm .*-rf` over
/// `rm rm rm …`), so one at every occurrence would cost the square of the text's length, and each
/// miss allowed adds up to one more reading of the text. With two, such a text costs about three
/// times what `regex-lite` alone takes over it (150 against 55 ms for 1 MiB natively; eight took
/// 445 against 70), while a literal that starts a match where it occurs, or occurs once or twice,
/// is still found without running the regex over the rest.
const ANCHORED_TRIES: usize = 2;

/// Every byte offset in `text` where `lit` occurs, overlapping occurrences included. (A text
/// shorter than `lit` is not searched: setting up the substring search costs more than most short
/// texts of a result take to scan.)
fn starts<'a>(text: &'a str, lit: &'a str) -> impl Iterator<Item = usize> + 'a {
    let mut from = if text.len() < lit.len() { text.len() + 1 } else { 0 };
    std::iter::from_fn(move || {
        let i = from + text.get(from..)?.find(lit)?;
        from = i + lit.chars().next().map_or(1, char::len_utf8);
        Some(i)
    })
}

/// The literal text every match of `pattern` starts with, if it is sure: the leading run of plain
/// characters (letters, digits, space and punctuation with no meaning in a regex), without its last
/// character when a quantifier follows it (`?`, `*`, `{`, and `+` too: regex-lite takes a second
/// quantifier after it, as in `b+*`, which may repeat `b` no times). None for patterns with an
/// alternation or inline flags (`(?i)` changes what a literal matches).
pub fn literal_prefix(pattern: &str) -> Option<String> {
    if pattern.contains('|') || pattern.contains("(?") {
        return None;
    }
    let plain = |c: char| c.is_ascii_alphanumeric() || " -_:/=@#%&!~,;'\"<>".contains(c);
    let mut lit: String = pattern.chars().take_while(|&c| plain(c)).collect();
    if matches!(pattern.get(lit.len()..).and_then(|rest| rest.chars().next()), Some('?' | '*' | '{' | '+')) {
        lit.pop();
    }
    (!lit.is_empty()).then_some(lit)
}
