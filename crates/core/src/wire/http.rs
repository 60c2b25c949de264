//! HTTP header values the filter reads on both sides: media types, charsets, content codings
//! (RFC 9110 §8.3.1 and §8.4) and content lengths (§8.6). Comparisons are case-insensitive; nothing
//! here allocates.

/// A `Content-Length` value (RFC 9110 §8.6: `1*DIGIT`): digits only, and a length past `usize`
/// saturates (as good as infinite). Anything else, a sign or spaces included, is not a length:
/// Envoy refuses such a value itself on either side.
pub fn content_length(v: &[u8]) -> Option<usize> {
    if v.is_empty() || !v.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(v.iter().fold(0usize, |n, d| n.saturating_mul(10).saturating_add(usize::from(d - b'0'))))
}

/// The media type of a Content-Type value, without parameters or surrounding whitespace.
pub fn media_type(v: &[u8]) -> &[u8] {
    v.split(|&b| b == b';').next().unwrap_or(b"").trim_ascii()
}

/// Is `v`'s media type `want` (case-insensitive, parameters allowed)?
pub fn is_media_type(v: &[u8], want: &str) -> bool {
    media_type(v).eq_ignore_ascii_case(want.as_bytes())
}

/// Does a Content-Type value name JSON or SSE anywhere (`application/json`, `text/event-stream`,
/// any case)? MCP clients read a reply as messages on less than the exact media type: the Python
/// SDK when the value starts with either, the TypeScript SDK (1.x) when it contains either.
pub fn names_a_message_type(v: &[u8]) -> bool {
    holds(v, b"application/json") || holds(v, b"text/event-stream")
}

/// Does the header value `v` hold `name` anywhere, in any case?
pub fn holds(v: &[u8], name: &[u8]) -> bool {
    v.windows(name.len()).any(|w| w.eq_ignore_ascii_case(name))
}

/// Is the `charset` parameter of a content type absent or UTF-8 (possibly quoted)? A charset in
/// RFC 2231's extended form (`charset*=utf-8''utf-7`, `charset*0=…`) is not: Python's
/// `email.message`, which httpx reads the charset with, decodes by it.
pub fn charset_is_utf8(content_type: &[u8]) -> bool {
    content_type.split(|&b| b == b';').skip(1).all(|param| {
        let param = param.trim_ascii();
        match param.iter().position(|&b| b == b'=') {
            Some(eq) if param.get(..eq).is_some_and(|n| n.trim_ascii().eq_ignore_ascii_case(b"charset")) => {
                let value = param.get(eq + 1..).unwrap_or(b"").trim_ascii();
                let value = value.strip_prefix(b"\"").and_then(|v| v.strip_suffix(b"\"")).unwrap_or(value);
                value.eq_ignore_ascii_case(b"utf-8") || value.eq_ignore_ascii_case(b"utf8")
            }
            _ => !extended_charset(param),
        }
    })
}

/// Does a content-type parameter name a charset in RFC 2231's extended form (`charset*`,
/// `charset*0`, `charset*0*`)?
fn extended_charset(param: &[u8]) -> bool {
    param.get(..7).is_some_and(|name| name.eq_ignore_ascii_case(b"charset")) && param.get(7) == Some(&b'*')
}

/// May a request with this Content-Type be read as UTF-8 JSON? Yes when it declares no `charset`,
/// or exactly one whose value is `utf-8` (any case, optionally quoted). A second `charset` (servers
/// differ on which one wins), any other charset, or a `charset` without a value is refused: a server
/// that honours it decodes other characters than the filter judged (RFC 8259 §8.1, RFC 9110 §8.3.2).
pub fn request_charset_ok(content_type: &[u8]) -> bool {
    let mut seen = false;
    content_type.split(|&b| b == b';').skip(1).all(|param| {
        let param = param.trim_ascii();
        let (name, value) = match param.iter().position(|&b| b == b'=') {
            Some(eq) => {
                (param.get(..eq).unwrap_or(b"").trim_ascii(), Some(param.get(eq + 1..).unwrap_or(b"").trim_ascii()))
            }
            None => (param, None),
        };
        if !name.eq_ignore_ascii_case(b"charset") {
            return !extended_charset(name);
        }
        let Some(value) = value else { return false };
        let value = match value.strip_prefix(b"\"").and_then(|v| v.strip_suffix(b"\"")) {
            // A quoted-string may escape any character (RFC 9110 §5.6.4).
            Some(quoted) => quoted.iter().filter(|&&b| b != b'\\').copied().collect::<Vec<u8>>(),
            None => value.to_vec(),
        };
        let ok = !seen && value.eq_ignore_ascii_case(b"utf-8");
        seen = true;
        ok
    })
}

/// Is a Content-Encoding value `identity` (the only coding the filter can read)?
pub fn is_identity_encoding(v: &[u8]) -> bool {
    v.trim_ascii().eq_ignore_ascii_case(b"identity")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `1*DIGIT` only; a length past `usize` saturates.
    #[test]
    fn content_lengths() {
        let cases: [(&[u8], Option<usize>); 10] = [
            (b"0", Some(0)),
            (b"300", Some(300)),
            (b"007", Some(7)),
            (b"18446744073709551616", Some(usize::MAX)),
            (b"99999999999999999999999999", Some(usize::MAX)),
            (b"", None),
            (b"+5", None),
            (b" 5", None),
            (b"-1", None),
            (b"1e9", None),
        ];
        for (value, want) in cases {
            assert_eq!(content_length(value), want, "{}", String::from_utf8_lossy(value));
        }
    }

    #[test]
    fn content_types() {
        assert_eq!(media_type(b" Text/Event-Stream ; charset=UTF-8"), b"Text/Event-Stream");
        assert!(is_media_type(b" Text/Event-Stream ; charset=UTF-8", "text/event-stream"));
        assert!(!is_media_type(b"text/plain; a=application/json", "application/json"));
        assert!(is_identity_encoding(b" IDENTITY ") && !is_identity_encoding(b"identity, gzip"));
        for ok in [
            &b"application/json"[..],
            b"application/json; charset=utf-8",
            b"text/event-stream;charset=\"UTF-8\"",
            b"a/b; x=y",
        ] {
            assert!(charset_is_utf8(ok), "{}", String::from_utf8_lossy(ok));
        }
        for ok in [
            &b"application/json"[..],
            b"application/json; charset=utf-8",
            b"application/json;CHARSET=\"UTF-8\"",
            b"application/json; charset=\"utf\\-8\"",
            b"application/json; x=y",
        ] {
            assert!(request_charset_ok(ok), "{}", String::from_utf8_lossy(ok));
        }
        for bad in [
            &b"application/json; charset=utf-8; charset=utf-7"[..],
            b"application/json; charset=utf-8; charset=utf-8",
            b"application/json; charset=utf-7",
            b"application/json; charset=UTF-16LE",
            b"application/json; charset=\"iso-8859-1\"",
            b"application/json; charset",
            b"application/json; charset=",
            b"application/json; charset=utf8",
        ] {
            assert!(!request_charset_ok(bad), "{}", String::from_utf8_lossy(bad));
        }
        for bad in [
            &b"text/event-stream; charset=utf-7"[..],
            b"application/json; CHARSET=latin1",
            b"a/b; x=1; charset=\"utf-16\"",
        ] {
            assert!(!charset_is_utf8(bad), "{}", String::from_utf8_lossy(bad));
        }
        // RFC 2231's extended and continued parameters, which Python's `email.message` decodes by.
        for bad in [
            &b"text/event-stream; charset*=utf-8''utf-7"[..],
            b"text/event-stream; charset*0=utf-; charset*1=7",
            b"application/json; CHARSET*=us-ascii''utf-8",
            b"application/json; charset=utf-8; charset*0*=utf-8''utf-7",
        ] {
            assert!(!charset_is_utf8(bad) && !request_charset_ok(bad), "{}", String::from_utf8_lossy(bad));
        }
        assert!(charset_is_utf8(b"a/b; charsets=x") && request_charset_ok(b"a/b; charsets=x; x*=y"));
    }
}
