//! HTTP header values the filter reads on both sides: media types, charsets, content codings
//! (RFC 9110 §8.3.1 and §8.4). Comparisons are case-insensitive; nothing here allocates.

/// The media type of a Content-Type value, without parameters or surrounding whitespace.
pub fn media_type(v: &[u8]) -> &[u8] {
    v.split(|&b| b == b';').next().unwrap_or(b"").trim_ascii()
}

/// Is `v`'s media type `want` (case-insensitive, parameters allowed)?
pub fn is_media_type(v: &[u8], want: &str) -> bool {
    media_type(v).eq_ignore_ascii_case(want.as_bytes())
}

/// Is the `charset` parameter of a content type absent or UTF-8 (possibly quoted)?
pub fn charset_is_utf8(content_type: &[u8]) -> bool {
    content_type.split(|&b| b == b';').skip(1).all(|param| {
        let param = param.trim_ascii();
        match param.iter().position(|&b| b == b'=') {
            Some(eq) if param.get(..eq).is_some_and(|n| n.trim_ascii().eq_ignore_ascii_case(b"charset")) => {
                let value = param.get(eq + 1..).unwrap_or(b"").trim_ascii();
                let value = value.strip_prefix(b"\"").and_then(|v| v.strip_suffix(b"\"")).unwrap_or(value);
                value.eq_ignore_ascii_case(b"utf-8") || value.eq_ignore_ascii_case(b"utf8")
            }
            _ => true,
        }
    })
}

/// Is a Content-Encoding value `identity` (the only coding the filter can read)?
pub fn is_identity_encoding(v: &[u8]) -> bool {
    v.trim_ascii().eq_ignore_ascii_case(b"identity")
}

#[cfg(test)]
mod tests {
    use super::*;

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
        for bad in [
            &b"text/event-stream; charset=utf-7"[..],
            b"application/json; CHARSET=latin1",
            b"a/b; x=1; charset=\"utf-16\"",
        ] {
            assert!(!charset_is_utf8(bad), "{}", String::from_utf8_lossy(bad));
        }
    }
}
