//! The number grammar of RFC 8259 §6, shared by the strict parser and the native build's shorter
//! check: one definition, so the two cannot read a number differently. The shorter check reads the
//! integer digits of a number led by 1 to 9 itself and the rest through [`fraction_and_exponent`].

use super::{ParseError, ParseErrorKind};

/// Where the number starting at `b[i]` ends, checked against the RFC 8259 grammar.
#[inline(always)]
pub(super) fn number_end(b: &[u8], mut i: usize) -> Result<usize, ParseError> {
    if b.get(i) == Some(&b'-') {
        i += 1;
    }
    match b.get(i) {
        // "01": a leading zero is the whole integer part.
        Some(b'0') if is_digit(b, i + 1) => return Err(invalid(i + 1)),
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => i = digits(b, i + 1),
        _ => return Err(invalid(i)),
    }
    fraction_and_exponent(b, i)
}

/// Past the fraction and the exponent that follow a number's integer part ending at `b[i]`, each
/// when present; an error where one lacks its digits. Whatever follows is for the caller to judge:
/// never a digit, as every run of digits is read whole.
#[inline(always)]
pub(super) fn fraction_and_exponent(b: &[u8], mut i: usize) -> Result<usize, ParseError> {
    if b.get(i) == Some(&b'.') {
        i = some_digits(b, i + 1)?;
    }
    if let Some(b'e' | b'E') = b.get(i) {
        i += 1;
        if let Some(b'+' | b'-') = b.get(i) {
            i += 1;
        }
        i = some_digits(b, i)?;
    }
    Ok(i)
}

/// Past the run of digits at `b[i]` (none at all included).
#[inline(always)]
pub(super) fn digits(b: &[u8], mut i: usize) -> usize {
    while is_digit(b, i) {
        i += 1;
    }
    i
}

/// Past the run of at least one digit at `b[i]`.
#[inline(always)]
fn some_digits(b: &[u8], i: usize) -> Result<usize, ParseError> {
    if is_digit(b, i) {
        Ok(digits(b, i + 1))
    } else {
        Err(invalid(i))
    }
}

#[inline(always)]
fn is_digit(b: &[u8], i: usize) -> bool {
    b.get(i).is_some_and(u8::is_ascii_digit)
}

#[inline(always)]
fn invalid(offset: usize) -> ParseError {
    ParseError { kind: ParseErrorKind::InvalidNumber, offset }
}
