//! The one strict JSON parser every decision is made on.
//!
//! A policy gateway and the MCP server behind it must read the same bytes the same way, or a call can
//! look harmless to one and dangerous to the other. So this parser accepts only what RFC 8259 calls a
//! JSON text, and refuses everything on which parsers are known to disagree:
//!
//! - input that is not valid UTF-8, or starts with a byte order mark (RFC 8259 §8.1);
//! - anything after the first value but whitespace (`{..}{..}`, `{..}garbage`);
//! - `NaN`, `Infinity`, leading `+`, leading zeros, bare `.5` (RFC 8259 §6);
//! - control characters in strings, unknown escapes, and `\u` escapes that leave a lone surrogate
//!   (RFC 8259 §7, §8.2);
//! - an object with the same key twice, at any depth (RFC 8259 §4 leaves the outcome undefined, and real
//!   parsers split between first-wins and last-wins); and two keys that a server may take for one,
//!   equal after case folding or removing invisible characters (`crate::wire::fold`): [`parse`] refuses
//!   those too, while the message layer counts them ([`Parser::folded_clashes`]) to answer −32600
//!   with the message's id;
//! - nesting deeper than [`MAX_DEPTH`] arrays and objects. The parser recurses at most that deep, so a
//!   body of 100,000 `[` is refused without touching the stack limit.
//!
//! Numbers are kept as their exact source text, so a JSON-RPC id such as `123456789012345678901234567890`
//! is echoed unchanged and argument conditions compare big integers without rounding through `f64`.
//!
//! # Why not serde_json
//!
//! The guide prefers a well-kept library to own code; this module (with `config::read`) is the
//! exception, because serde_json 1.0 (checked against 1.0.154, `from_slice`) reads differently on
//! exactly the points a gateway must not get wrong:
//!
//! | input | serde_json | here | test |
//! |---|---|---|---|
//! | `{"a":1,"a":2}`, at any depth | `Value` and maps keep the last (`{"a":2}`); derived structs refuse a repeated field, maps inside them still keep the last | [`ParseErrorKind::DuplicateKey`] | `refuses_what_parsers_disagree_on`, `duplicate_keys_found_in_large_objects` |
//! | `{"id":1,"ID":2}` and other names equal after folding | two different keys | refused by [`parse`], counted by [`Parser::folded_clashes`] (−32600 with the id) | `mcp::tests::folded_member_names_are_refused_with_the_id` |
//! | `123456789012345678901234567890`, `-0`, `1e400` | rounded to `1.2345678901234568e+29`, read as `-0.0`, refused as out of range (without the crate-wide `arbitrary_precision` feature) | the exact text, for id echo and condition comparison | `numbers_keep_their_exact_text`, `mcp::tests::ids_are_echoed_exactly` |
//! | nesting | a fixed limit of 128 (127 levels read), not settable | [`MAX_DEPTH`] = 64, as the README documents | `depth_limit_is_exact_and_deep_input_is_refused_cleanly` |
//! | where an error is | line and column | the exact byte offset ([`ParseError::offset`]; `textpos` makes line, column and a caret line of it for policy errors) | `depth_limit_…` (offset 64), `textpos::tests` |
//!
//! serde_json refuses, as this parser does, a byte order mark, trailing data, `NaN`, leading zeros,
//! control characters in strings, invalid UTF-8 and lone surrogate escapes; a replacement must keep
//! those too.
//!
//! Size: measured with `make build` on a module of 573,512 B: reading the policy with
//! `serde_json::from_slice` instead of a serde `Deserializer` over this parser's tree made the module 602,375 B (+28,863 B); also
//! reading bodies through `serde_json::Value` made it 612,807 B (+39,295 B), with this parser still
//! linked for the message layer. `make lint` fails when `serde_json` enters the wasm32 dependency
//! tree (`cargo tree --target wasm32-wasip1 -e normal`), so a well-meant switch cannot weaken
//! parsing unnoticed. (Native code, the CLI, the schema and the tests use serde_json freely.)
//!
//! Speed: the module is built at `opt-level = "z"`, which does not inline the per-byte helpers
//! (`peek`, `skip_ws`, `expect`): a call per byte of the body. They are `#[inline(always)]`: the
//! allowed 1 KiB decision in V8 (`bench/v8-decision`) went from 12.9 to 8.5 µs for +776 B of module.
//! Further (V8 8.7 → 5.9 µs, together with hashing the counter keys at policy load): a string
//! without escapes is a short loop inlined into its callers, member names are kept as borrowed
//! `&str` with a printable-ASCII flag for the duplicate check, and skipped objects call `skip_value`
//! directly instead of through a closure.

use std::borrow::Cow;
use std::fmt;

mod scan;

/// Deepest nesting of arrays and objects accepted, counting the outermost value as depth 1.
pub const MAX_DEPTH: usize = 64;
/// Member names of one object kept on the stack for the duplicate check (`fold::clash` compares up
/// to 8 without allocating too); larger objects, and objects with an escaped name, spill into a `Vec`.
const INLINE_KEYS: usize = 8;

/// What [`Parser::object_with`] hands each member to, behind a pointer.
type MemberReader<'r, 'a> = dyn FnMut(&mut Parser<'a>, Cow<'a, str>) -> Result<(), ParseError> + 'r;

/// The member names of one object, for the duplicate check: the first [`INLINE_KEYS`] borrowed
/// from the input on the stack (most objects: no allocation, nothing to drop); past that, or once
/// a name had an escape (an owned, unescaped name), all of them in `owned` and a `Vec` of views.
#[derive(Default)]
struct MemberNames<'a> {
    inline: [&'a str; INLINE_KEYS],
    count: usize,
    /// A name in `inline` is not printable ASCII (so the cheap comparison does not apply).
    not_plain: bool,
    owned: Vec<Cow<'a, str>>,
}

impl<'a> MemberNames<'a> {
    /// A name borrowed from the input.
    #[inline(always)]
    fn push_borrowed(&mut self, name: &'a str) {
        if self.owned.is_empty() {
            if let Some(slot) = self.inline.get_mut(self.count) {
                *slot = name;
                self.not_plain |= !crate::wire::fold::plain_ascii(name);
                self.count += 1;
                return;
            }
        }
        self.spill(&Cow::Borrowed(name));
    }

    /// A name past [`INLINE_KEYS`], or an unescaped (owned) one: every name from here on is kept
    /// in `owned`. `&Cow`, not `&str`: a borrowed name keeps borrowing the input (`'a`).
    #[allow(clippy::ptr_arg)]
    #[inline(never)]
    fn spill(&mut self, key: &Cow<'a, str>) {
        if self.owned.is_empty() {
            let count = self.count;
            self.owned.extend(self.inline.iter().take(count).map(|name| Cow::Borrowed(*name)));
        }
        self.owned.push(key.clone());
        self.count += 1;
    }

    fn clash(&self) -> Option<crate::wire::fold::Clash> {
        if self.count < 2 {
            return None;
        }
        if self.owned.is_empty() {
            let names = self.inline.get(..self.count).unwrap_or(&[]);
            if self.not_plain {
                crate::wire::fold::clash(names)
            } else {
                crate::wire::fold::clash_plain(names)
            }
        } else {
            let names: Vec<&str> = self.owned.iter().map(|k| k.as_ref()).collect();
            crate::wire::fold::clash(&names)
        }
    }
}

/// A parsed JSON value. Object members keep their order; keys are unique (duplicates are a parse error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Json {
    Null,
    Bool(bool),
    /// The number's exact source text, already checked against the RFC 8259 number grammar.
    Number(Box<str>),
    String(String),
    Array(Vec<Json>),
    Object(Vec<(String, Json)>),
}

impl Json {
    /// The member `key` of an object, or `None` (also for non-objects).
    pub fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Object(members) => members.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// The string value, if this is a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Json::String(s) => Some(s),
            _ => None,
        }
    }

    /// A short name of the JSON type, for error messages that must not echo values.
    pub fn type_name(&self) -> &'static str {
        match self {
            Json::Null => "null",
            Json::Bool(_) => "boolean",
            Json::Number(_) => "number",
            Json::String(_) => "string",
            Json::Array(_) => "array",
            Json::Object(_) => "object",
        }
    }
}

/// Why a body is not one strict JSON text. Messages never quote the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParseErrorKind {
    Empty,
    InvalidUtf8,
    ByteOrderMark,
    UnexpectedEnd,
    UnexpectedCharacter,
    TrailingData,
    InvalidNumber,
    InvalidEscape,
    LoneSurrogate,
    ControlCharacter,
    DuplicateKey,
    /// Two keys of one object equal after case folding or removing invisible characters.
    FoldedDuplicateKey,
    TooDeep,
}

/// A parse failure and the byte offset where it was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParseError {
    pub kind: ParseErrorKind,
    pub offset: usize,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            ParseErrorKind::Empty => "empty body",
            ParseErrorKind::InvalidUtf8 => "invalid UTF-8",
            ParseErrorKind::ByteOrderMark => "byte order mark before the JSON text",
            ParseErrorKind::UnexpectedEnd => "unexpected end of input",
            ParseErrorKind::UnexpectedCharacter => "unexpected character",
            ParseErrorKind::TrailingData => "data after the JSON value",
            ParseErrorKind::InvalidNumber => "invalid number",
            ParseErrorKind::InvalidEscape => "invalid escape sequence",
            ParseErrorKind::LoneSurrogate => "unpaired UTF-16 surrogate escape",
            ParseErrorKind::ControlCharacter => "unescaped control character in string",
            ParseErrorKind::DuplicateKey => "duplicate object key",
            ParseErrorKind::FoldedDuplicateKey => {
                "object keys equal after case folding or removing invisible characters"
            }
            ParseErrorKind::TooDeep => "nesting deeper than 64 levels",
        };
        write!(f, "{what} at byte {}", self.offset)
    }
}

/// Parse `input` as exactly one strict JSON text.
///
/// Errors: see [`ParseErrorKind`]; the whole input is always examined, never a prefix.
pub fn parse(input: &[u8]) -> Result<Json, ParseError> {
    let mut p = Parser::new(input)?;
    let v = p.value()?;
    p.finish()?;
    if let Some(offset) = p.first_folded {
        return Err(ParseError { kind: ParseErrorKind::FoldedDuplicateKey, offset });
    }
    Ok(v)
}

/// Parse `input` like [`parse`], but accept objects whose keys clash only after folding: for data
/// the filter reads in part and whose folding-sensitive members its caller checks itself (the
/// `tools/list` filter checks the envelope, the result and each tool; tool input schemas may
/// legitimately hold properties `id` and `ID`).
pub fn parse_folded_keys_allowed(input: &[u8]) -> Result<Json, ParseError> {
    let mut p = Parser::new(input)?;
    let v = p.value()?;
    p.finish()?;
    Ok(v)
}

/// A cursor over one JSON text. The message layer drives it directly for the top level so that it can
/// keep the raw text of members such as the JSON-RPC `id`.
pub struct Parser<'a> {
    src: &'a str,
    pos: usize,
    depth: usize,
    /// Objects seen so far whose keys clash after folding, and where the first one starts.
    folded: usize,
    first_folded: Option<usize>,
}

impl<'a> Parser<'a> {
    /// Start a parse. Checks UTF-8 and the byte order mark up front, so later steps work on `str`.
    pub fn new(input: &'a [u8]) -> Result<Self, ParseError> {
        if input.starts_with(b"\xEF\xBB\xBF") {
            return Err(ParseError { kind: ParseErrorKind::ByteOrderMark, offset: 0 });
        }
        let src = std::str::from_utf8(input)
            .map_err(|e| ParseError { kind: ParseErrorKind::InvalidUtf8, offset: e.valid_up_to() })?;
        let mut p = Parser { src, pos: 0, depth: 0, folded: 0, first_folded: None };
        p.skip_ws();
        if p.pos >= src.len() {
            return Err(ParseError { kind: ParseErrorKind::Empty, offset: p.pos });
        }
        Ok(p)
    }

    /// How many objects parsed so far hold two keys that are equal after folding (`fold::name_key`)
    /// without being equal. The parse goes on; callers compare counts around a message.
    pub fn folded_clashes(&self) -> usize {
        self.folded
    }

    /// The source text of `range` (used for raw ids).
    pub fn slice(&self, range: std::ops::Range<usize>) -> &'a str {
        self.src.get(range).unwrap_or("")
    }

    fn err(&self, kind: ParseErrorKind) -> ParseError {
        ParseError { kind, offset: self.pos }
    }

    #[inline(always)]
    fn peek(&self) -> Option<u8> {
        self.src.as_bytes().get(self.pos).copied()
    }

    #[inline(always)]
    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    #[inline(always)]
    fn expect(&mut self, byte: u8) -> Result<(), ParseError> {
        match self.peek() {
            Some(b) if b == byte => {
                self.pos += 1;
                Ok(())
            }
            Some(_) => Err(self.err(ParseErrorKind::UnexpectedCharacter)),
            None => Err(self.err(ParseErrorKind::UnexpectedEnd)),
        }
    }

    /// After the top-level value: only whitespace may follow.
    pub fn finish(&mut self) -> Result<(), ParseError> {
        self.skip_ws();
        if self.pos < self.src.len() {
            return Err(self.err(ParseErrorKind::TrailingData));
        }
        Ok(())
    }

    /// The next byte that is not whitespace, without consuming it.
    pub fn peek_non_ws(&mut self) -> Option<u8> {
        self.skip_ws();
        self.peek()
    }

    /// Parse one value at the cursor.
    pub fn value(&mut self) -> Result<Json, ParseError> {
        self.skip_ws();
        match self.peek() {
            None => Err(self.err(ParseErrorKind::UnexpectedEnd)),
            Some(b'{') => {
                let mut members = Vec::new();
                self.object_with(|p, key| {
                    members.push((key.into_owned(), p.value()?));
                    Ok(())
                })?;
                Ok(Json::Object(members))
            }
            Some(b'[') => self.array(),
            Some(b'"') => Ok(Json::String(self.string()?)),
            Some(b't') => self.literal("true", Json::Bool(true)),
            Some(b'f') => self.literal("false", Json::Bool(false)),
            Some(b'n') => self.literal("null", Json::Null),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(_) => Err(self.err(ParseErrorKind::UnexpectedCharacter)),
        }
    }

    fn enter(&mut self) -> Result<(), ParseError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.err(ParseErrorKind::TooDeep));
        }
        Ok(())
    }

    fn literal(&mut self, word: &str, v: Json) -> Result<Json, ParseError> {
        if self.src.get(self.pos..).is_some_and(|rest| rest.starts_with(word)) {
            self.pos += word.len();
            Ok(v)
        } else if self.src.len() - self.pos < word.len() && word.starts_with(self.src.get(self.pos..).unwrap_or("")) {
            Err(ParseError { kind: ParseErrorKind::UnexpectedEnd, offset: self.src.len() })
        } else {
            Err(self.err(ParseErrorKind::UnexpectedCharacter))
        }
    }

    fn array(&mut self) -> Result<Json, ParseError> {
        let mut items = Vec::new();
        self.array_with(|p| {
            items.push(p.value()?);
            Ok(())
        })?;
        Ok(Json::Array(items))
    }

    /// Parse an object at the cursor, handing each key to `each` with the parser positioned on its
    /// value, which `each` must consume (`value`, `skip_value`, or the message layer's own reading).
    /// Duplicate keys (compared after unescaping) are an error.
    pub fn object_with(
        &mut self,
        mut each: impl FnMut(&mut Self, Cow<'a, str>) -> Result<(), ParseError>,
    ) -> Result<(), ParseError> {
        self.object_dyn(Some(&mut each))
    }

    /// [`Parser::object_with`]'s one body: not generic, so its callers share this code. `None`
    /// skips every value ([`Parser::skip_value`] called directly, not through a closure: most
    /// objects of a body are skipped).
    fn object_dyn(&mut self, mut each: Option<&mut MemberReader<'_, 'a>>) -> Result<(), ParseError> {
        self.enter()?;
        let open = self.pos;
        self.expect(b'{')?;
        let mut keys = MemberNames::default();
        self.skip_ws();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            self.depth -= 1;
            return Ok(());
        }
        loop {
            self.skip_ws();
            if self.peek() != Some(b'"') {
                return Err(if self.peek().is_none() {
                    self.err(ParseErrorKind::UnexpectedEnd)
                } else {
                    self.err(ParseErrorKind::UnexpectedCharacter)
                });
            }
            let key = match self.string_plain() {
                Some(name) => {
                    keys.push_borrowed(name);
                    Cow::Borrowed(name)
                }
                None => {
                    let key = self.string_escaped(true)?;
                    keys.spill(&key);
                    key
                }
            };
            self.skip_ws();
            self.expect(b':')?;
            self.skip_ws();
            match each.as_mut() {
                Some(each) => each(self, key)?,
                None => self.skip_value()?,
            }
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b'}') => {
                    self.pos += 1;
                    self.depth -= 1;
                    match keys.clash() {
                        None => {}
                        Some(crate::wire::fold::Clash::Exact) => {
                            return Err(ParseError { kind: ParseErrorKind::DuplicateKey, offset: open })
                        }
                        Some(crate::wire::fold::Clash::Folded) => {
                            self.folded += 1;
                            self.first_folded.get_or_insert(open);
                        }
                    }
                    return Ok(());
                }
                Some(_) => return Err(self.err(ParseErrorKind::UnexpectedCharacter)),
                None => return Err(self.err(ParseErrorKind::UnexpectedEnd)),
            }
        }
    }

    /// Check one value at the cursor exactly as strictly as [`Parser::value`], without building it:
    /// the fast path for the parts of a message that no decision reads.
    pub fn skip_value(&mut self) -> Result<(), ParseError> {
        self.skip_ws();
        match self.peek() {
            None => Err(self.err(ParseErrorKind::UnexpectedEnd)),
            Some(b'{') => self.object_dyn(None),
            Some(b'[') => self.array_with(|p| p.skip_value()),
            Some(b'"') => self.string_with(false).map(drop),
            Some(b't') => self.literal("true", Json::Null).map(drop),
            Some(b'f') => self.literal("false", Json::Null).map(drop),
            Some(b'n') => self.literal("null", Json::Null).map(drop),
            Some(b'-' | b'0'..=b'9') => self.number_end().map(|end| self.pos = end),
            Some(_) => Err(self.err(ParseErrorKind::UnexpectedCharacter)),
        }
    }

    /// A string value at the cursor, borrowed from the input when it has no escapes; any other
    /// value is checked as strictly ([`Parser::skip_value`]) and gives `None`. For members that must
    /// be strings and are only compared (`jsonrpc`, `method`): no allocation.
    pub fn str_value(&mut self) -> Result<Option<Cow<'a, str>>, ParseError> {
        if self.peek_non_ws() == Some(b'"') {
            return self.string_cow().map(Some);
        }
        self.skip_value().map(|()| None)
    }

    /// The byte offset of the cursor (for raw slices of what was just read).
    pub fn offset(&self) -> usize {
        self.pos
    }

    /// Parse an array at the cursor, handing each element to `each` with the parser positioned on it.
    /// Used for JSON-RPC batches, whose elements the message layer parses itself.
    pub fn array_with(&mut self, mut each: impl FnMut(&mut Self) -> Result<(), ParseError>) -> Result<(), ParseError> {
        self.enter()?;
        self.expect(b'[')?;
        self.skip_ws();
        if self.peek() == Some(b']') {
            self.pos += 1;
            self.depth -= 1;
            return Ok(());
        }
        loop {
            self.skip_ws();
            each(self)?;
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.pos += 1,
                Some(b']') => {
                    self.pos += 1;
                    self.depth -= 1;
                    return Ok(());
                }
                Some(_) => return Err(self.err(ParseErrorKind::UnexpectedCharacter)),
                None => return Err(self.err(ParseErrorKind::UnexpectedEnd)),
            }
        }
    }

    fn number(&mut self) -> Result<Json, ParseError> {
        let start = self.pos;
        let end = self.number_end()?;
        self.pos = end;
        Ok(Json::Number(self.src.get(start..end).unwrap_or("0").into()))
    }

    /// Where the number at the cursor ends, checked against the RFC 8259 grammar.
    #[inline(always)]
    fn number_end(&self) -> Result<usize, ParseError> {
        let b = self.src.as_bytes();
        let mut i = self.pos;
        let digit = |i: usize| b.get(i).is_some_and(u8::is_ascii_digit);
        if b.get(i) == Some(&b'-') {
            i += 1;
        }
        match b.get(i) {
            Some(b'0') => i += 1,
            Some(b'1'..=b'9') => {
                while digit(i) {
                    i += 1;
                }
            }
            _ => return Err(ParseError { kind: ParseErrorKind::InvalidNumber, offset: i }),
        }
        if b.get(i) == Some(&b'.') {
            i += 1;
            if !digit(i) {
                return Err(ParseError { kind: ParseErrorKind::InvalidNumber, offset: i });
            }
            while digit(i) {
                i += 1;
            }
        }
        if let Some(b'e' | b'E') = b.get(i) {
            i += 1;
            if let Some(b'+' | b'-') = b.get(i) {
                i += 1;
            }
            if !digit(i) {
                return Err(ParseError { kind: ParseErrorKind::InvalidNumber, offset: i });
            }
            while digit(i) {
                i += 1;
            }
        }
        // "01" or "-0.5x": what follows a number must end it.
        if digit(i) {
            return Err(ParseError { kind: ParseErrorKind::InvalidNumber, offset: i });
        }
        Ok(i)
    }

    fn hex4(&mut self) -> Result<u32, ParseError> {
        let digits = self
            .src
            .get(self.pos..self.pos + 4)
            .ok_or(ParseError { kind: ParseErrorKind::UnexpectedEnd, offset: self.src.len() })?;
        if !digits.bytes().all(|c| c.is_ascii_hexdigit()) {
            return Err(self.err(ParseErrorKind::InvalidEscape));
        }
        let v = u32::from_str_radix(digits, 16).map_err(|_| self.err(ParseErrorKind::InvalidEscape))?;
        self.pos += 4;
        Ok(v)
    }

    fn string(&mut self) -> Result<String, ParseError> {
        self.string_cow().map(Cow::into_owned)
    }

    /// A string at the cursor: borrowed from the input when it has no escapes (the common case).
    fn string_cow(&mut self) -> Result<Cow<'a, str>, ParseError> {
        self.string_with(true)
    }

    /// A string at the cursor, checked as strictly either way; unescaped into an owned string only
    /// when `build` (else an empty one: `skip_value` needs no value, so no allocation).
    ///
    /// The common case, no escape and no control character up to the closing quote, is
    /// [`Parser::string_plain`], inlined into its callers; the rest is [`Parser::string_escaped`],
    /// out of line. (One call per string cost about 40 instructions of a ~100-instruction short
    /// string.)
    #[inline(always)]
    fn string_with(&mut self, build: bool) -> Result<Cow<'a, str>, ParseError> {
        match self.string_plain() {
            Some(s) => Ok(Cow::Borrowed(s)),
            None => self.string_escaped(build),
        }
    }

    /// A string at the cursor without escapes or control characters: borrowed, the cursor after
    /// its closing quote. `None`, the cursor unchanged, for anything else (no string here, an
    /// escape, a control character, the end of the input), which [`Parser::string_escaped`] reads
    /// from the start. Returned in registers: a `Result<Cow<str>, ParseError>` built on the stack
    /// byte by byte and read back whole stalls the CPU once per member name (measured: 14% of the
    /// native decision).
    #[inline(always)]
    fn string_plain(&mut self) -> Option<&'a str> {
        let bytes = self.src.as_bytes();
        if bytes.get(self.pos) != Some(&b'"') {
            return None;
        }
        let first = self.pos + 1;
        let i = scan::string_stop(bytes, first);
        if bytes.get(i) != Some(&b'"') {
            return None;
        }
        // Both ends are ASCII quotes, so always character boundaries.
        let s = self.src.get(first..i)?;
        self.pos = i + 1;
        Some(s)
    }

    /// A string at the cursor that [`Parser::string_plain`] did not take (an escape, a control
    /// character, the end of the input, or no string here), read from its opening quote: unescaped
    /// into an owned string when `build`.
    #[inline(never)]
    fn string_escaped(&mut self, build: bool) -> Result<Cow<'a, str>, ParseError> {
        self.expect(b'"')?;
        let bytes = self.src.as_bytes();
        // Unescaped, the text is no longer than its source: one allocation, however long.
        let mut out = if build { String::with_capacity(scan::source_len(bytes, self.pos)) } else { String::new() };
        let mut run = self.pos;
        loop {
            self.pos = scan::string_stop(bytes, self.pos);
            let Some(&c) = bytes.get(self.pos) else {
                return Err(self.err(ParseErrorKind::UnexpectedEnd));
            };
            match c {
                b'"' => {
                    if build {
                        out.push_str(self.src.get(run..self.pos).unwrap_or(""));
                    }
                    self.pos += 1;
                    return Ok(Cow::Owned(out));
                }
                b'\\' => {
                    if build {
                        out.push_str(self.src.get(run..self.pos).unwrap_or(""));
                    }
                    self.pos += 1;
                    let Some(&e) = bytes.get(self.pos) else {
                        return Err(self.err(ParseErrorKind::UnexpectedEnd));
                    };
                    self.pos += 1;
                    let ch = match e {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => {
                            let at = self.pos - 2;
                            let hi = self.hex4()?;
                            let code = if (0xD800..0xDC00).contains(&hi) {
                                if bytes.get(self.pos) != Some(&b'\\') || bytes.get(self.pos + 1) != Some(&b'u') {
                                    return Err(ParseError { kind: ParseErrorKind::LoneSurrogate, offset: at });
                                }
                                self.pos += 2;
                                let lo = self.hex4()?;
                                if !(0xDC00..0xE000).contains(&lo) {
                                    return Err(ParseError { kind: ParseErrorKind::LoneSurrogate, offset: at });
                                }
                                0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00)
                            } else if (0xDC00..0xE000).contains(&hi) {
                                return Err(ParseError { kind: ParseErrorKind::LoneSurrogate, offset: at });
                            } else {
                                hi
                            };
                            match char::from_u32(code) {
                                Some(ch) => ch,
                                None => return Err(ParseError { kind: ParseErrorKind::InvalidEscape, offset: at }),
                            }
                        }
                        _ => return Err(ParseError { kind: ParseErrorKind::InvalidEscape, offset: self.pos - 2 }),
                    };
                    if build {
                        out.push(ch);
                    }
                    run = self.pos;
                }
                // `string_stop` stops at nothing else: a control character.
                _ => return Err(self.err(ParseErrorKind::ControlCharacter)),
            }
        }
    }
}

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
            let mut order: Vec<&(String, Json)> = members.iter().collect();
            if sorted {
                order.sort_unstable_by(|a, b| a.0.cmp(&b.0));
            }
            out.push('{');
            for (i, (k, item)) in order.into_iter().enumerate() {
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

/// Write `s` as a JSON string literal (RFC 8259 §7) to `out`.
pub fn write_str(out: &mut String, s: &str) {
    out.push('"');
    // Runs of bytes that need no escape are copied whole (UTF-8 sequences are all ≥ 0x80, so a run
    // always ends on a character boundary); only `"`, `\\` and control characters are rewritten.
    let mut run = 0;
    for (i, b) in s.bytes().enumerate() {
        let escaped = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x00..=0x1F => "",
            _ => continue,
        };
        out.push_str(s.get(run..i).unwrap_or(""));
        if escaped.is_empty() {
            out.push_str(&format!("\\u{b:04x}"));
        } else {
            out.push_str(escaped);
        }
        run = i + 1;
    }
    out.push_str(s.get(run..).unwrap_or(""));
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kind(input: &[u8]) -> ParseErrorKind {
        parse(input).unwrap_err().kind
    }

    #[test]
    fn accepts_every_value_kind() {
        let v = parse(br#" {"a":[1,-2.5e+3,true,false,null,"x\u00e9\ud83d\ude00\n"],"b":{}} "#).unwrap();
        assert_eq!(
            v,
            Json::Object(vec![
                (
                    "a".into(),
                    Json::Array(vec![
                        Json::Number("1".into()),
                        Json::Number("-2.5e+3".into()),
                        Json::Bool(true),
                        Json::Bool(false),
                        Json::Null,
                        Json::String("x\u{e9}\u{1F600}\n".into()),
                    ])
                ),
                ("b".into(), Json::Object(vec![])),
            ])
        );
    }

    #[test]
    fn numbers_keep_their_exact_text() {
        assert_eq!(
            parse(b"123456789012345678901234567890").unwrap(),
            Json::Number("123456789012345678901234567890".into())
        );
        assert_eq!(parse(b"-0").unwrap(), Json::Number("-0".into()));
        assert_eq!(parse(b"1E5").unwrap(), Json::Number("1E5".into()));
    }

    #[test]
    fn refuses_what_parsers_disagree_on() {
        assert_eq!(kind(b""), ParseErrorKind::Empty);
        assert_eq!(kind(b"  \n"), ParseErrorKind::Empty);
        assert_eq!(kind(b"\xEF\xBB\xBF{}"), ParseErrorKind::ByteOrderMark);
        assert_eq!(kind(b"{}{}"), ParseErrorKind::TrailingData);
        assert_eq!(kind(b"{} x"), ParseErrorKind::TrailingData);
        assert_eq!(kind(b"NaN"), ParseErrorKind::UnexpectedCharacter);
        assert_eq!(kind(b"[Infinity]"), ParseErrorKind::UnexpectedCharacter);
        assert_eq!(kind(b"+1"), ParseErrorKind::UnexpectedCharacter);
        assert_eq!(kind(b"01"), ParseErrorKind::InvalidNumber);
        assert_eq!(kind(b"1."), ParseErrorKind::InvalidNumber);
        assert_eq!(kind(b".5"), ParseErrorKind::UnexpectedCharacter);
        assert_eq!(kind(b"1e"), ParseErrorKind::InvalidNumber);
        assert_eq!(kind(br#""\ud800""#), ParseErrorKind::LoneSurrogate);
        assert_eq!(kind(br#""\udc00""#), ParseErrorKind::LoneSurrogate);
        assert_eq!(kind(br#""\ud800\u0041""#), ParseErrorKind::LoneSurrogate);
        assert_eq!(kind(br#""\x""#), ParseErrorKind::InvalidEscape);
        assert_eq!(kind(br#""\u12g4""#), ParseErrorKind::InvalidEscape);
        assert_eq!(kind(b"\"a\tb\""), ParseErrorKind::ControlCharacter);
        assert_eq!(kind(b"\"\xff\""), ParseErrorKind::InvalidUtf8);
        assert_eq!(kind(b"\"\xed\xa0\x80\""), ParseErrorKind::InvalidUtf8);
        assert_eq!(kind(br#"{"a":1,"a":2}"#), ParseErrorKind::DuplicateKey);
        assert_eq!(kind(br#"{"a":1,"\u0061":2}"#), ParseErrorKind::DuplicateKey);
        assert_eq!(kind(br#"[{"x":{"b":1,"c":2,"b":3}}]"#), ParseErrorKind::DuplicateKey);
        assert_eq!(kind(b"[1,]"), ParseErrorKind::UnexpectedCharacter);
        assert_eq!(kind(br#"{"a":1,}"#), ParseErrorKind::UnexpectedCharacter);
        assert_eq!(kind(b"{'a':1}"), ParseErrorKind::UnexpectedCharacter);
        assert_eq!(kind(b"[1"), ParseErrorKind::UnexpectedEnd);
        assert_eq!(kind(b"tru"), ParseErrorKind::UnexpectedEnd);
        assert_eq!(kind(b"trux"), ParseErrorKind::UnexpectedCharacter);
        assert_eq!(kind(b"\"abc"), ParseErrorKind::UnexpectedEnd);
    }

    #[test]
    fn duplicate_keys_found_in_large_objects() {
        let mut body = String::from("{");
        for i in 0..1000 {
            body.push_str(&format!("\"k{i}\":{i},"));
        }
        body.push_str("\"k500\":0}");
        assert_eq!(kind(body.as_bytes()), ParseErrorKind::DuplicateKey);
        let ok = body.replace("\"k500\":0}", "\"k1000\":0}");
        assert!(matches!(parse(ok.as_bytes()), Ok(Json::Object(m)) if m.len() == 1001));
    }

    #[test]
    fn depth_limit_is_exact_and_deep_input_is_refused_cleanly() {
        let at_limit = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert!(parse(at_limit.as_bytes()).is_ok());
        let over = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
        assert_eq!(kind(over.as_bytes()), ParseErrorKind::TooDeep);
        let huge = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(parse(huge.as_bytes()).unwrap_err(), ParseError { kind: ParseErrorKind::TooDeep, offset: 64 });
        let objects = "{\"a\":".repeat(100_000);
        assert_eq!(kind(objects.as_bytes()), ParseErrorKind::TooDeep);
    }

    #[test]
    fn write_round_trips() {
        let text = r#"{"a":[1,-2.5E+3,true,false,null,"x\u00e9\n"],"b":{},"n":123456789012345678901234567890}"#;
        let v = parse(text.as_bytes()).unwrap();
        let mut out = String::new();
        write(&mut out, &v);
        assert_eq!(
            out,
            "{\"a\":[1,-2.5E+3,true,false,null,\"x\u{e9}\\n\"],\"b\":{},\"n\":123456789012345678901234567890}"
        );
        assert_eq!(parse(out.as_bytes()).unwrap(), v);
    }

    #[test]
    fn write_str_escapes_exactly_quote_backslash_and_control_characters() {
        let mut out = String::new();
        write_str(&mut out, "a\"b\\c\n\r\t\u{0}\u{8}\u{c}\u{1f}\u{7f}é😀\u{2028}z");
        assert_eq!(out, "\"a\\\"b\\\\c\\n\\r\\t\\u0000\\u0008\\u000c\\u001f\u{7f}é😀\u{2028}z\"");
        out.clear();
        write_str(&mut out, "\u{1}");
        assert_eq!(out, "\"\\u0001\"");
        out.clear();
        write_str(&mut out, "");
        assert_eq!(out, "\"\"");
    }

    #[test]
    fn write_str_round_trips_through_the_parser() {
        for s in ["plain", "quote\" back\\ nl\n tab\t ctl\u{1}", "é😀"] {
            let mut out = String::new();
            write_str(&mut out, s);
            assert_eq!(parse(out.as_bytes()).unwrap(), Json::String(s.into()));
        }
    }
}
