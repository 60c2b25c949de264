//! The value types of the ABI (`envoy_dynamic_module_type_*`): buffers, headers and the enums the
//! callbacks take, laid out as `abi.h` lays them out.

/// `envoy_dynamic_module_type_envoy_buffer` / `_module_buffer`: bytes and a length.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Buffer {
    pub(super) ptr: *const u8,
    pub(super) len: usize,
}

impl Buffer {
    pub(super) const NULL: Buffer = Buffer { ptr: std::ptr::null(), len: 0 };

    pub(super) fn of(bytes: &[u8]) -> Buffer {
        Buffer { ptr: bytes.as_ptr(), len: bytes.len() }
    }

    /// A copy of the bytes an Envoy-owned buffer points at (empty for a null buffer).
    pub(super) fn to_vec(self) -> Vec<u8> {
        self.as_slice().to_vec()
    }

    /// The bytes an Envoy-owned buffer points at (empty for a null buffer). Only for a buffer Envoy
    /// filled during the current event hook, read before the hook returns or a setter is called.
    pub(super) fn as_slice<'a>(self) -> &'a [u8] {
        if self.ptr.is_null() || self.len == 0 {
            return &[];
        }
        // SAFETY: Envoy filled this buffer during the current callback; (ptr, len) stays valid until
        // the event hook returns or a setter is called; callers read it before either.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

/// The headers of one map, read in place: no copy of a name or value. Valid until the event hook
/// returns or the stream's headers are changed, so read them before setting any header.
pub struct Headers<'a> {
    pub(super) raw: Vec<Header>,
    pub(super) _stream: std::marker::PhantomData<&'a ()>,
}

impl Headers<'_> {
    /// Every (name, value), in order. A name that is not UTF-8 reads as U+FFFD: every name the
    /// filter reads is ASCII (the configuration checks those it takes), so such a name is one it
    /// skips, as it would skip the name read lossily.
    pub fn pairs(&self) -> impl Iterator<Item = (&str, &[u8])> + Clone {
        fn name(b: &[u8]) -> &str {
            // Envoy's codecs take no byte but ASCII in a header name. `str::from_utf8`, a call
            // into std, cost about 130 instructions a name.
            if b.is_ascii() {
                // SAFETY: a string of ASCII bytes is valid UTF-8.
                return unsafe { std::str::from_utf8_unchecked(b) };
            }
            std::str::from_utf8(b).unwrap_or("\u{fffd}")
        }
        self.raw.iter().map(|h| (name(h.key.as_slice()), h.value.as_slice()))
    }
}

/// `envoy_dynamic_module_type_envoy_http_header` / `_module_http_header`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Header {
    pub(super) key: Buffer,
    pub(super) value: Buffer,
}

impl Header {
    /// Module headers borrowing `headers`' names and values, for a callout or a stream to start.
    pub(super) fn array(headers: &[(&str, &str)]) -> Vec<Header> {
        headers.iter().map(|(k, v)| Header { key: Buffer::of(k.as_bytes()), value: Buffer::of(v.as_bytes()) }).collect()
    }
}

/// The value of header `name` in the array of `size` headers Envoy passed to an event hook (a
/// callout's or a stream's answer).
pub(super) fn header_value<'a>(headers: *const Header, size: usize, name: &[u8]) -> Option<&'a [u8]> {
    if headers.is_null() {
        return None;
    }
    // SAFETY: Envoy passes `size` headers, valid until the event hook returns; callers read the
    // value before then.
    let hs = unsafe { std::slice::from_raw_parts(headers, size) };
    hs.iter().find(|h| h.key.as_slice() == name).map(|h| h.value.as_slice())
}

/// `envoy_dynamic_module_type_http_header_type`.
#[derive(Clone, Copy)]
pub enum HeaderMap {
    Request = 0,
    Response = 2,
}

/// `envoy_dynamic_module_type_http_body_type`.
#[derive(Clone, Copy)]
pub enum Body {
    ReceivedRequest = 0,
    BufferedRequest = 1,
    ReceivedResponse = 2,
    BufferedResponse = 3,
}

/// `envoy_dynamic_module_type_log_level`.
#[derive(Clone, Copy)]
pub enum Level {
    Trace = 0,
    Debug = 1,
    Info = 2,
    Warn = 3,
    Error = 4,
    Critical = 5,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names are read as they are when ASCII or UTF-8, and as U+FFFD (a name the filter never
    /// reads) when not UTF-8; values are left as bytes.
    #[test]
    fn header_names_read_as_text() {
        let names: [&[u8]; 4] = [b"content-length", b"x-\xffbad", b"caf\xc3\xa9", b""];
        let raw = names.iter().map(|n| Header { key: Buffer::of(n), value: Buffer::of(b"v\xff") }).collect();
        let headers = Headers { raw, _stream: std::marker::PhantomData };
        let read: Vec<(&str, &[u8])> = headers.pairs().collect();
        let want: Vec<(&str, &[u8])> =
            vec![("content-length", b"v\xff"), ("\u{fffd}", b"v\xff"), ("café", b"v\xff"), ("", b"v\xff")];
        assert_eq!(read, want);
    }
}
