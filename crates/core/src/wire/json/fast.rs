//! A shorter check of a value that no decision reads, for the native build: most of a tool call's
//! arguments, and of every body the filter only forwards.
//!
//! It reads the same grammar as [`Parser::skip_value`](super::Parser::skip_value), with the cursor
//! in a register and every scalar read inline, and it only ever *accepts*: anything it does not
//! read itself (a `\u` escape, a member name that is not printable ASCII, two member names equal
//! or equal after ASCII case folding, more than [`NAMES`] members in an object, nesting past the
//! limit, or any error) makes it give up, and the strict path reads the value from its start and
//! decides, with its own error and offset. So what it accepts is exactly what the strict path
//! accepts without counting a folded clash (`tests::fast_and_strict_skips_agree`).
//!
//! Measured on `bench/bodies/allowed-1k.json` (`read_body`, callgrind): docs/src/cost-and-size.md,
//! Decisions. The wasm module does without it: it would cost more bytes than the module's size
//! target leaves.

use super::number::{digits, fraction_and_exponent, number_end};
use super::scan;
use crate::wire::fold;

/// The one JSON value of `text` skipped, on this path (with the strict path taking over where it
/// gives up) or, with `fast` false, on the strict path alone: the result, where the cursor ended
/// and the folded clashes counted. Both must give the same (`tests`, `fuzz/src/json.rs`).
pub(super) fn skip_all(text: &[u8], fast: bool) -> (Result<(), super::ParseError>, usize, usize) {
    let mut p = match super::Parser::new(text) {
        Ok(p) => p,
        Err(e) => return (Err(e), 0, 0),
    };
    if !fast {
        p.fast_from = usize::MAX;
    }
    let r = p.skip_value().and_then(|()| p.finish());
    (r, p.pos, p.folded)
}

/// Member names of one object this path keeps for the duplicate check; an object with more is
/// left to the strict path.
const NAMES: usize = 16;

/// Where the value at `pos` (whitespace before it allowed) ends, if this path accepts it; `room`
/// is how many more levels of arrays and objects may open. `Err(at)`: it gave up at byte `at`.
#[inline]
pub(super) fn skip(src: &str, pos: usize, room: usize) -> Result<usize, usize> {
    value(src, pos, room)
}

/// The value at `i`, whitespace before it allowed. Out of line: it starts the check, and takes the
/// rare value with whitespace before it from [`member`].
fn value(src: &str, i: usize, room: usize) -> Result<usize, usize> {
    let i = ws(src.as_bytes(), i);
    match src.as_bytes().get(i) {
        // `ws` leaves none; the arm only keeps `member` from calling back here.
        Some(b' ' | b'\t' | b'\n' | b'\r') => Err(i),
        _ => member(src, i, room),
    }
}

/// The value that starts at `i`, read in its container's loop: scalars inline, arrays and objects
/// by a call. A value with whitespace before it goes through [`value`].
#[inline(always)]
fn member(src: &str, i: usize, room: usize) -> Result<usize, usize> {
    let b = src.as_bytes();
    match b.get(i) {
        Some(b'"') => string(b, i + 1),
        Some(b'1'..=b'9') => integer(b, i),
        Some(b'{') => object(src, i + 1, room),
        Some(b'[') => array(src, i + 1, room),
        Some(b't') => literal(b, i, b"true"),
        Some(b'f') => literal(b, i, b"false"),
        Some(b'n') => literal(b, i, b"null"),
        Some(b'-' | b'0') => number_end(b, i).map_err(|e| e.offset),
        Some(b' ' | b'\t' | b'\n' | b'\r') => value(src, i, room),
        _ => Err(i),
    }
}

/// A number that starts with a digit other than 0: its digits, then `number_end`'s own fraction
/// and exponent. Whatever follows the number is for the caller to judge (a comma, a bracket or
/// whitespace; anything else gives up).
#[inline(always)]
fn integer(b: &[u8], i: usize) -> Result<usize, usize> {
    fraction_and_exponent(b, digits(b, i + 1)).map_err(|e| e.offset)
}

/// Where the whitespace at `b[i]` ends: `Parser::skip_ws` on a cursor in a register. Most JSON
/// on the wire has none between tokens, so a byte above the space is answered by one comparison.
/// (Not one function for both: the wasm module, at opt-level z, grows by 260 B with the method
/// calling a forced-inline one, and stops inlining it, a call per byte, without the force.)
#[inline(always)]
fn ws(b: &[u8], i: usize) -> usize {
    match b.get(i) {
        Some(&c) if c > b' ' => i,
        _ => ws_run(b, i),
    }
}

/// [`ws`] past its first byte.
#[inline(never)]
fn ws_run(b: &[u8], mut i: usize) -> usize {
    while let Some(b' ' | b'\t' | b'\n' | b'\r') = b.get(i) {
        i += 1;
    }
    i
}

#[inline(always)]
fn literal(b: &[u8], i: usize, word: &[u8]) -> Result<usize, usize> {
    match b.get(i..i + word.len()) {
        Some(found) if found == word => Ok(i + word.len()),
        _ => Err(i),
    }
}

/// The end of the string whose contents start at `i` (after its closing quote). Escapes other
/// than `\u` are checked here; `\u` (a surrogate pair to match) is the strict path's.
#[inline(always)]
fn string(b: &[u8], mut i: usize) -> Result<usize, usize> {
    loop {
        i = scan::string_stop(b, i);
        match b.get(i) {
            Some(b'"') => return Ok(i + 1),
            Some(b'\\') => i = escape(b, i)?,
            _ => return Err(i),
        }
    }
}

/// Past the escape at `i` (a backslash), if it is one this path reads.
#[inline(always)]
fn escape(b: &[u8], i: usize) -> Result<usize, usize> {
    match b.get(i + 1) {
        Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => Ok(i + 2),
        _ => Err(i),
    }
}

/// The bytes of a member name this path reads: printable ASCII (`fold::plain_ascii`) but a quote
/// or a backslash, that is the plain bytes below 0x7F.
static NAME: [bool; 256] = plain_below(0x7F);

/// The bytes below `end` that are not `scan::is_stop`. Run at compile time, where an index out of
/// range fails the build.
#[allow(clippy::indexing_slicing)]
const fn plain_below(end: u16) -> [bool; 256] {
    let mut t = [false; 256];
    let mut c: u8 = 0;
    while (c as u16) < end {
        t[c as usize] = !scan::is_stop(c);
        if c == u8::MAX {
            break;
        }
        c += 1;
    }
    t
}

fn object(src: &str, i: usize, room: usize) -> Result<usize, usize> {
    let b = src.as_bytes();
    let room = room.checked_sub(1).ok_or(i)?;
    let mut i = ws(b, i);
    if b.get(i) == Some(&b'}') {
        return Ok(i + 1);
    }
    // Where each name starts, for the duplicate check: it ends at the next quote, as it holds no
    // escape. Only read when two names share a bit of `seen` (below), so most objects never
    // compare a pair.
    let mut names = [0usize; NAMES];
    let mut count = 0;
    let mut seen = 0u64;
    let mut alike = false;
    loop {
        if b.get(i) != Some(&b'"') {
            return Err(i);
        }
        // A name of printable ASCII without escapes (`fold::plain_ascii`), else the strict path's.
        let mut end = i + 1;
        while let Some(&c) = b.get(end) {
            if NAME.get(usize::from(c)) != Some(&true) {
                break;
            }
            end += 1;
        }
        if b.get(end) != Some(&b'"') {
            return Err(end);
        }
        let bit = signature(end - i - 1, b.get(i + 1).copied());
        alike |= seen & bit != 0;
        seen |= bit;
        *names.get_mut(count).ok_or(i)? = i + 1;
        count += 1;
        i = end + 1;
        if b.get(i) != Some(&b':') {
            i = ws(b, i);
            if b.get(i) != Some(&b':') {
                return Err(i);
            }
        }
        i = member(src, i + 1, room)?;
        let mut next = b.get(i);
        if !matches!(next, Some(b',' | b'}')) {
            i = ws(b, i);
            next = b.get(i);
        }
        match next {
            Some(b',') => i = ws(b, i + 1),
            Some(b'}') if !alike => return Ok(i + 1),
            Some(b'}') => {
                let mut kept = [""; NAMES];
                for (slot, &start) in kept.iter_mut().zip(names.get(..count).unwrap_or(&[])) {
                    // From after a quote to the next quote: character boundaries.
                    let len = b.get(start..).and_then(|rest| rest.iter().position(|&c| c == b'"'));
                    *slot = src.get(start..start + len.ok_or(i)?).ok_or(i)?;
                }
                return match fold::clash_plain(kept.get(..count).unwrap_or(&[])) {
                    None => Ok(i + 1),
                    Some(_) => Err(i),
                };
            }
            _ => return Err(i),
        }
    }
}

/// A member name's bit in its object's set of signatures: two names equal, or equal in ASCII case,
/// have the same length and first letter, so the same bit; names with bits of their own cannot
/// clash.
///
/// `len` is the name's length and `first` the byte after its opening quote (its closing quote when
/// it is empty).
#[inline(always)]
fn signature(len: usize, first: Option<u8>) -> u64 {
    let first = first.map_or(0, |c| c.to_ascii_lowercase());
    1u64 << ((len.wrapping_mul(7) ^ usize::from(first)) & 63)
}

fn array(src: &str, i: usize, room: usize) -> Result<usize, usize> {
    let b = src.as_bytes();
    let room = room.checked_sub(1).ok_or(i)?;
    let mut i = ws(b, i);
    if b.get(i) == Some(&b']') {
        return Ok(i + 1);
    }
    loop {
        i = member(src, i, room)?;
        let mut next = b.get(i);
        if !matches!(next, Some(b',' | b']')) {
            i = ws(b, i);
            next = b.get(i);
        }
        match next {
            Some(b',') => i += 1,
            Some(b']') => return Ok(i + 1),
            _ => return Err(i),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::indexing_slicing, clippy::cast_possible_truncation)]
mod tests;
