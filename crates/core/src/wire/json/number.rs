//! The number grammar of RFC 8259 §6, shared by the strict parser and the native build's shorter
//! check: one definition, so the two cannot read a number differently.

use super::{ParseError, ParseErrorKind};

/// Where the number starting at `b[i]` ends, checked against the RFC 8259 grammar.
#[inline(always)]
pub(super) fn number_end(b: &[u8], mut i: usize) -> Result<usize, ParseError> {
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
