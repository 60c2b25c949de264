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
//! directly instead of through a closure. Native builds, where bytes of code cost little, also check
//! skipped values on a shorter path that only ever accepts (`json/fast.rs`).

use std::borrow::Cow;
use std::fmt;

#[cfg(not(target_arch = "wasm32"))]
mod fast;
mod names;
mod number;
mod parser;
mod scan;
mod string;
#[cfg(test)]
mod tests;
mod write;

pub use names::{name_at, repeated_name};
pub use write::{write, write_sorted, write_str};

/// The one JSON value of `text` skipped twice, as `[shorter path, strict path alone]`: each the
/// result, where the reading ended and the folded name clashes counted. The native build's shorter
/// check only ever accepts, so the two must be equal on every input: the `json` fuzz target
/// (`fuzz/src/json.rs`) checks it. Not for the filter's own use.
#[cfg(not(target_arch = "wasm32"))]
#[doc(hidden)]
pub fn skip_both_ways(text: &[u8]) -> [(Result<(), ParseError>, usize, usize); 2] {
    [fast::skip_all(text, true), fast::skip_all(text, false)]
}

/// Deepest nesting of arrays and objects accepted, counting the outermost value as depth 1.
pub const MAX_DEPTH: usize = 64;
/// What the folded keys of a text's member names may take beyond twice its length, so that a short
/// text of names folding makes longer (`{"\u{fdfa}":1}`, 33 bytes once folded) is still read.
/// Small, as each event of an SSE stream is a text of its own.
const FOLD_SLACK: usize = 64;
/// Member names of one object kept on the stack for the duplicate check (`fold::clash` compares up
/// to 8 without allocating too); larger objects, and objects with an escaped name, spill into a `Vec`.
const INLINE_KEYS: usize = 8;

/// What [`Parser::object_with`] hands each member to, behind a pointer.
type MemberReader<'r, 'a> = dyn FnMut(&mut Parser<'a>, Cow<'a, str>) -> Result<(), ParseError> + 'r;

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
    /// Member names (printable ASCII aside) whose folded keys, in all, exceed twice the text's
    /// length plus [`FOLD_SLACK`] bytes.
    FoldedNamesTooLong,
    TooDeep,
}

/// A parse failure and the byte offset where it was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParseError {
    pub kind: ParseErrorKind,
    pub offset: usize,
}

impl ParseErrorKind {
    /// What went wrong, in the words every message about it uses.
    pub fn what(self) -> &'static str {
        match self {
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
            ParseErrorKind::FoldedNamesTooLong => "object keys too long to compare after case folding",
            ParseErrorKind::TooDeep => "nesting deeper than 64 levels",
        }
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at byte {}", self.kind.what(), self.offset)
    }
}

/// Parse `input` as exactly one strict JSON text.
///
/// Errors: see [`ParseErrorKind`]; the whole input is always examined, never a prefix.
pub fn parse(input: &[u8]) -> Result<Json, ParseError> {
    let (v, folded) = parse_whole(input, None)?;
    match folded {
        Some(offset) => Err(ParseError { kind: ParseErrorKind::FoldedDuplicateKey, offset }),
        None => Ok(v),
    }
}

/// Parse `input` like [`parse`], but accept objects whose keys clash only after folding: for data
/// the filter reads in part and whose folding-sensitive members its caller checks itself (the
/// `tools/list` filter checks the envelope, the result and each tool; tool input schemas may
/// legitimately hold properties `id` and `ID`).
pub fn parse_folded_keys_allowed(input: &[u8]) -> Result<Json, ParseError> {
    parse_whole(input, None).map(|(v, _)| v)
}

/// Parse `input`, a member of a text that a [`Parser`] has already read whole (the arguments or the
/// `inputResponses` of a request), like [`parse_folded_keys_allowed`], with no bound on folding its
/// member names: the first read folded them within its own, so folding them again costs no more.
/// A bound of the member's own would refuse what the whole text passed.
pub fn parse_again(input: &[u8]) -> Result<Json, ParseError> {
    parse_whole(input, Some(usize::MAX)).map(|(v, _)| v)
}

/// One JSON text and where its first object whose keys clash after folding starts, its names'
/// folding bounded by `fold_left` when given.
fn parse_whole(input: &[u8], fold_left: Option<usize>) -> Result<(Json, Option<usize>), ParseError> {
    let mut p = Parser::new(input)?;
    if let Some(left) = fold_left {
        p.fold_left = left;
    }
    let v = p.value()?;
    p.finish()?;
    Ok((v, p.first_folded))
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
    /// Bytes the folded keys of the text's member names that are not printable ASCII
    /// (`fold::clash`) may still take: twice the text's length plus [`FOLD_SLACK`]. Names total
    /// less than the text, so only names that folding makes longer reach it; it bounds the work of
    /// folding (a megabyte of U+FDFA folds to 11).
    fold_left: usize,
    /// Where the native build's shorter check (`fast`) may next be tried: at or after the byte
    /// where it last gave up, so that it reads no byte twice, however deep the value it gave up on.
    #[cfg(not(target_arch = "wasm32"))]
    fast_from: usize,
}
