//! Base64 (RFC 4648 §4 standard alphabet, §5 URL-safe alphabet) for short header values: SEP-2243
//! `=?base64?…?=` names and bound session ids.
//!
//! Own code for size: the `base64` crate measured about 10 KB of the wasm here and `base64ct` about
//! 7.5 KB; this is under 1 KB. `tests/core/b64.rs` checks it against the `base64` crate (encoding, and
//! canonical-only decoding) on random inputs.

const STD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// An alphabet and whether `=` padding is written and required.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Alphabet {
    /// RFC 4648 §4, padded (SEP-2243).
    Standard,
    /// RFC 4648 §5, unpadded (session ids).
    UrlNoPad,
}

impl Alphabet {
    fn table(self) -> &'static [u8; 64] {
        match self {
            Alphabet::Standard => STD,
            Alphabet::UrlNoPad => URL,
        }
    }

    /// The digit of the character `c`, if it is one of the alphabet: by ranges, one comparison
    /// chain per character (values of a few hundred bytes, such as a verified token's payload).
    fn digit(self, c: u8) -> Option<u32> {
        let (d62, d63) = match self {
            Alphabet::Standard => (b'+', b'/'),
            Alphabet::UrlNoPad => (b'-', b'_'),
        };
        match c {
            b'A'..=b'Z' => Some(u32::from(c - b'A')),
            b'a'..=b'z' => Some(u32::from(c - b'a') + 26),
            b'0'..=b'9' => Some(u32::from(c - b'0') + 52),
            _ if c == d62 => Some(62),
            _ if c == d63 => Some(63),
            _ => None,
        }
    }
}

/// Append the encoding of `data` to `out`.
pub fn encode_into(out: &mut String, data: &[u8], alphabet: Alphabet) {
    let t = alphabet.table();
    for chunk in data.chunks(3) {
        let b = [
            chunk.first().copied().unwrap_or(0),
            chunk.get(1).copied().unwrap_or(0),
            chunk.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                let digit = t.get(((n >> (18 - 6 * i)) & 63) as usize).copied().unwrap_or(b'=');
                out.push(char::from(digit));
            } else if alphabet == Alphabet::Standard {
                out.push('=');
            }
        }
    }
}

/// Decode `text`; `None` unless it is the canonical encoding of some bytes (exact padding for
/// `Standard`, none for `UrlNoPad`, zero unused bits), so that one value has one spelling.
pub fn decode(text: &[u8], alphabet: Alphabet) -> Option<Vec<u8>> {
    let body = match alphabet {
        Alphabet::Standard => {
            if text.len() % 4 != 0 {
                return None;
            }
            let pad = text.iter().rev().take_while(|&&c| c == b'=').count();
            if pad > 2 {
                return None;
            }
            text.get(..text.len() - pad)?
        }
        Alphabet::UrlNoPad => text,
    };
    if body.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(body.len() * 3 / 4);
    let (whole, tail) = body.split_at(body.len() - body.len() % 4);
    // Whole groups of four characters, three bytes each, appended as an array of known length: a
    // verified token's payload runs to a few hundred characters, and a slice whose length is known
    // only at run time is copied by a call to memcpy, for three bytes. The tail (two or three
    // characters) is the only group that can carry unused bits.
    // The bits of a group's characters, first character highest.
    let bits = |chars: &[u8]| chars.iter().try_fold(0u32, |n, &c| Some((n << 6) | alphabet.digit(c)?));
    for group in whole.chunks_exact(4) {
        let [_, a, b, c] = bits(group)?.to_be_bytes();
        out.extend_from_slice(&[a, b, c]);
    }
    if !tail.is_empty() {
        let n = bits(tail)?;
        // Two characters carry one byte and 4 unused bits, three carry two bytes and 2 unused
        // bits; canonical: the unused bits are zero.
        let unused = if tail.len() == 2 { 4 } else { 2 };
        if n & ((1 << unused) - 1) != 0 {
            return None;
        }
        let n = n >> unused;
        if tail.len() == 3 {
            out.push((n >> 8) as u8);
        }
        out.push(n as u8);
    }
    Some(out)
}
