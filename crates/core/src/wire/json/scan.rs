//! Where a run of plain string characters ends, found eight bytes at a time natively and a byte at
//! a time in the wasm module: most of a JSON text is string contents, and a tool result's text runs
//! to kilobytes between escapes.

#[cfg(not(target_arch = "wasm32"))]
const ONES: u64 = 0x0101_0101_0101_0101;
#[cfg(not(target_arch = "wasm32"))]
const HIGHS: u64 = 0x8080_8080_8080_8080;

/// The high bit of each byte of `x` below `n` (at most 0x80) is set in the result, and possibly
/// bits above the lowest such byte (a borrow travels up only from a byte that is below `n`): the
/// lowest set bit is exact, which is all [`string_stop`] reads.
#[cfg(not(target_arch = "wasm32"))]
#[inline(always)]
fn below(x: u64, n: u8) -> u64 {
    x.wrapping_sub(ONES.wrapping_mul(u64::from(n))) & !x & HIGHS
}

/// [`below`] for the bytes of `x` equal to `b`.
#[cfg(not(target_arch = "wasm32"))]
#[inline(always)]
fn equal(x: u64, b: u8) -> u64 {
    below(x ^ ONES.wrapping_mul(u64::from(b)), 1)
}

/// The stop bytes of `x` ([`string_stop`]), flagged as [`below`] flags them.
#[cfg(not(target_arch = "wasm32"))]
#[inline(always)]
fn stops(x: u64) -> u64 {
    below(x, 0x20) | equal(x, b'"') | equal(x, b'\\')
}

/// Whether `c` ends a run of plain string characters: a quote, a backslash or a control character
/// (below 0x20). [`stops`] is the same test on eight bytes at once.
#[inline(always)]
pub(super) const fn is_stop(c: u8) -> bool {
    c == b'"' || c == b'\\' || c < 0x20
}

/// The index of the first byte at or after `from` that ends a run of plain string characters
/// ([`is_stop`]); `bytes.len()` if there is none (`from` if it is past the end).
///
/// In the wasm module, a byte at a time: V8 runs the word-at-a-time search of native builds slower
/// than this loop (the allowed 1 KiB decision, `make bench-v8`: about 0.5 µs a call).
#[cfg(target_arch = "wasm32")]
#[inline]
pub(super) fn string_stop(bytes: &[u8], from: usize) -> usize {
    let Some(rest) = bytes.get(from..) else { return from };
    rest.iter().position(|&c| is_stop(c)).map_or(bytes.len(), |at| from + at)
}

/// The index of the first byte at or after `from` that ends a run of plain string characters
/// ([`is_stop`]); `bytes.len()` if there is none (`from` if it is past the end).
#[cfg(not(target_arch = "wasm32"))]
#[inline]
pub(super) fn string_stop(bytes: &[u8], from: usize) -> usize {
    let Some(rest) = bytes.get(from..) else { return from };
    let mut i = from;
    // Most member names, and many values, end within 8 bytes: those are tested as one word (a
    // byte at a time when fewer remain), which costs less than the 16-byte chunks below. Reading
    // `bench/bodies/allowed-1k.json`, a head read a byte at a time saved 2,118 instructions (−5.6%)
    // against the chunks alone, and read as one word 842 more (docs/src/cost-and-size.md,
    // Decisions).
    let rest = {
        let (head, rest) = rest.split_at(rest.len().min(8));
        let at = match head.first_chunk::<8>() {
            Some(word) => match stops(u64::from_le_bytes(*word)) {
                0 => None,
                m => Some(usize::try_from(m.trailing_zeros() / 8).unwrap_or(0)),
            },
            None => first_stop(head),
        };
        if let Some(at) = at {
            return from + at;
        }
        i += head.len();
        rest
    };
    let mut chunks = rest.chunks_exact(16);
    for chunk in chunks.by_ref() {
        let (Some(lo), Some(hi)) = (chunk.first_chunk::<8>(), chunk.last_chunk::<8>()) else { break };
        let (lo, hi) = (stops(u64::from_le_bytes(*lo)), stops(u64::from_le_bytes(*hi)));
        if lo | hi != 0 {
            let at = if lo != 0 { lo.trailing_zeros() / 8 } else { 8 + hi.trailing_zeros() / 8 };
            return i + usize::try_from(at).unwrap_or(0);
        }
        i += 16;
    }
    for &c in chunks.remainder() {
        if is_stop(c) {
            return i;
        }
        i += 1;
    }
    i
}

/// The index of the first stop byte of `bytes`, a byte at a time.
#[cfg(not(target_arch = "wasm32"))]
#[inline]
fn first_stop(bytes: &[u8]) -> Option<usize> {
    bytes.iter().position(|&c| is_stop(c))
}

/// The length in bytes of the source text of the string whose contents start at `from`, up to its
/// closing quote (escapes skipped), a control character or the end: its unescaped text is no longer.
pub(super) fn source_len(bytes: &[u8], from: usize) -> usize {
    let mut i = from;
    loop {
        i = string_stop(bytes, i);
        match bytes.get(i) {
            Some(b'\\') => i += 2,
            _ => return i.min(bytes.len()).saturating_sub(from),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every stop byte at every offset and alignment, against the byte-by-byte definition.
    #[test]
    fn finds_the_first_stop_byte() {
        let plain = |c: u8| !(c == b'"' || c == b'\\' || c < 0x20);
        for stop in [b'"', b'\\', 0x00, 0x01, 0x1F] {
            // Up to 40 bytes: the bytewise head, a 16-byte chunk and the tail after it.
            for len in 0..40 {
                for at in 0..=len {
                    let mut text = vec![b'a'; len];
                    if at < len {
                        text[at] = stop;
                        // Bytes a borrow could disturb: just above and below each stop byte.
                        if at + 1 < len {
                            text[at + 1] = 0x21;
                        }
                    }
                    for from in 0..=len {
                        let want = (from..len).find(|&i| !plain(text[i])).unwrap_or(len.max(from));
                        assert_eq!(string_stop(&text, from), want, "{text:?} from {from}");
                    }
                }
            }
        }
        for c in 0..=255u8 {
            let text = [b'a', b'b', c, b'c', 0xC3, 0xA9, b'd', b'e', b'f'];
            assert_eq!(string_stop(&text, 0), if plain(c) { 9 } else { 2 }, "{c:#x}");
        }
        assert_eq!(source_len(br#"ab\"c\\"d"#, 0), 7);
        assert_eq!(source_len(b"abc", 1), 2);
        assert_eq!(source_len(b"ab\\", 0), 3);
    }
}
