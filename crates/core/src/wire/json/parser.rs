//! The cursor's grammar: values, objects, arrays, numbers and literals, and checking a value
//! without building it ([`Parser::skip_value`]).

use std::borrow::Cow;

use super::names::MemberNames;
use super::number::number_end;
use super::{Json, MemberReader, ParseError, ParseErrorKind, Parser, FOLD_SLACK, MAX_DEPTH};

impl<'a> Parser<'a> {
    /// Start a parse. Checks UTF-8 and the byte order mark up front, so later steps work on `str`.
    pub fn new(input: &'a [u8]) -> Result<Self, ParseError> {
        if input.starts_with(b"\xEF\xBB\xBF") {
            return Err(ParseError { kind: ParseErrorKind::ByteOrderMark, offset: 0 });
        }
        let src = std::str::from_utf8(input)
            .map_err(|e| ParseError { kind: ParseErrorKind::InvalidUtf8, offset: e.valid_up_to() })?;
        let mut p = Parser {
            src,
            pos: 0,
            depth: 0,
            folded: 0,
            first_folded: None,
            fold_left: input.len().saturating_mul(2).saturating_add(FOLD_SLACK),
            #[cfg(not(target_arch = "wasm32"))]
            fast_from: 0,
        };
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

    pub(super) fn err(&self, kind: ParseErrorKind) -> ParseError {
        ParseError { kind, offset: self.pos }
    }

    #[inline(always)]
    pub(super) fn peek(&self) -> Option<u8> {
        self.src.as_bytes().get(self.pos).copied()
    }

    #[inline(always)]
    pub(super) fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.peek() {
            self.pos += 1;
        }
    }

    #[inline(always)]
    pub(super) fn expect(&mut self, byte: u8) -> Result<(), ParseError> {
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

    pub(super) fn enter(&mut self) -> Result<(), ParseError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return Err(self.err(ParseErrorKind::TooDeep));
        }
        Ok(())
    }

    pub(super) fn literal(&mut self, word: &str, v: Json) -> Result<Json, ParseError> {
        if self.src.get(self.pos..).is_some_and(|rest| rest.starts_with(word)) {
            self.pos += word.len();
            Ok(v)
        } else if self.src.len() - self.pos < word.len() && word.starts_with(self.src.get(self.pos..).unwrap_or("")) {
            Err(ParseError { kind: ParseErrorKind::UnexpectedEnd, offset: self.src.len() })
        } else {
            Err(self.err(ParseErrorKind::UnexpectedCharacter))
        }
    }

    pub(super) fn array(&mut self) -> Result<Json, ParseError> {
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
    pub(super) fn object_dyn(&mut self, mut each: Option<&mut MemberReader<'_, 'a>>) -> Result<(), ParseError> {
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
                    match keys.clash(&mut self.fold_left) {
                        Ok(None) => {}
                        Ok(Some(crate::wire::fold::Clash::Exact)) => {
                            return Err(ParseError { kind: ParseErrorKind::DuplicateKey, offset: open })
                        }
                        Err(crate::wire::fold::TooLong) => {
                            return Err(ParseError { kind: ParseErrorKind::FoldedNamesTooLong, offset: open })
                        }
                        Ok(Some(crate::wire::fold::Clash::Folded)) => {
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
        #[cfg(not(target_arch = "wasm32"))]
        if self.pos >= self.fast_from {
            match super::fast::skip(self.src, self.pos, MAX_DEPTH.saturating_sub(self.depth)) {
                Ok(end) => {
                    self.pos = end;
                    return Ok(());
                }
                Err(at) => self.fast_from = at.max(self.pos + 1),
            }
        }
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

    pub(super) fn number(&mut self) -> Result<Json, ParseError> {
        let start = self.pos;
        let end = self.number_end()?;
        self.pos = end;
        Ok(Json::Number(self.src.get(start..end).unwrap_or("0").into()))
    }

    /// Where the number at the cursor ends, checked against the RFC 8259 grammar.
    #[inline(always)]
    pub(super) fn number_end(&self) -> Result<usize, ParseError> {
        number_end(self.src.as_bytes(), self.pos)
    }
}
