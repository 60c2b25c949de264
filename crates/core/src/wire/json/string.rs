//! Strings: the plain run read in place (borrowed), escapes and surrogate pairs checked and
//! unescaped out of line.

use std::borrow::Cow;

use super::{scan, ParseError, ParseErrorKind, Parser};

impl<'a> Parser<'a> {
    pub(super) fn hex4(&mut self) -> Result<u32, ParseError> {
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

    pub(super) fn string(&mut self) -> Result<String, ParseError> {
        self.string_cow().map(Cow::into_owned)
    }

    /// A string at the cursor: borrowed from the input when it has no escapes (the common case).
    pub(super) fn string_cow(&mut self) -> Result<Cow<'a, str>, ParseError> {
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
    pub(super) fn string_with(&mut self, build: bool) -> Result<Cow<'a, str>, ParseError> {
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
    pub(super) fn string_plain(&mut self) -> Option<&'a str> {
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
    pub(super) fn string_escaped(&mut self, build: bool) -> Result<Cow<'a, str>, ParseError> {
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
