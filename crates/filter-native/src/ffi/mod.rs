//! The C ABI of Envoy's dynamic modules (Envoy 1.40, `source/extensions/dynamic_modules/abi.h`):
//! the callbacks this module calls, declared by hand, and safe wrappers over them. The event hooks
//! Envoy calls are in [`hooks`]; each runs the filter through one panic boundary (`boundary`). The
//! ABI's value types (buffers, headers) are in `types`. This is the only module of the crate with
//! `unsafe` code.
//!
//! Conventions of the ABI, relied on throughout:
//! - a "module buffer" (pointer, length) is owned by the module and only read during the call;
//! - an "envoy buffer" is owned by Envoy and valid until the end of the current event hook, or until
//!   a setter changes what it points into: every wrapper copies it out before returning;
//! - a filter pointer (`envoy_dynamic_module_type_http_filter_envoy_ptr`) is valid from
//!   `on_http_filter_new` until `on_http_filter_destroy`; it is only used inside event hooks of that
//!   stream, on the worker thread that runs them.

#![allow(unsafe_code)]

mod boundary;
mod callout;
pub mod hooks;
mod logging;
mod stream;
mod types;

pub use callout::{callout_init_result, CalloutAnswer};
pub use logging::{init_logging, log_built};
pub use types::{Body, Buffer, Header, HeaderMap, Headers, Level};

use std::ffi::c_void;

/// `envoy_dynamic_module_type_metrics_result_Success`.
const METRICS_SUCCESS: u32 = 0;

extern "C" {
    fn envoy_dynamic_module_callback_log(level: u32, message: Buffer);
    fn envoy_dynamic_module_callback_log_enabled(level: u32) -> bool;
    /// New in Envoy 1.40: an older Envoy has no such symbol, and the module, linked `BIND_NOW`,
    /// then fails to load (`hooks::ABI_VERSION`).
    fn envoy_dynamic_module_callback_get_runtime_bool(key: Buffer, default_value: bool) -> bool;

    fn envoy_dynamic_module_callback_http_get_headers_size(filter: *mut c_void, map: u32) -> usize;
    fn envoy_dynamic_module_callback_http_get_headers(filter: *mut c_void, map: u32, out: *mut Header) -> bool;
    fn envoy_dynamic_module_callback_http_get_header(
        filter: *mut c_void,
        map: u32,
        key: Buffer,
        out: *mut Buffer,
        index: usize,
        optional_size: *mut usize,
    ) -> bool;
    fn envoy_dynamic_module_callback_http_set_header(filter: *mut c_void, map: u32, key: Buffer, value: Buffer)
        -> bool;

    fn envoy_dynamic_module_callback_http_send_response(
        filter: *mut c_void,
        status: u32,
        headers: *mut Header,
        headers_size: usize,
        body: Buffer,
        details: Buffer,
    );
    fn envoy_dynamic_module_callback_http_filter_reset_stream(filter: *mut c_void, reason: u32, details: Buffer);
    fn envoy_dynamic_module_callback_http_filter_continue_decoding(filter: *mut c_void);
    fn envoy_dynamic_module_callback_http_filter_continue_encoding(filter: *mut c_void);
    fn envoy_dynamic_module_callback_http_get_cluster_name(filter: *mut c_void, out: *mut Buffer) -> bool;
    fn envoy_dynamic_module_callback_http_get_buffer_limit(filter: *mut c_void) -> u64;
    fn envoy_dynamic_module_callback_http_set_buffer_limit(filter: *mut c_void, limit: u64);

    fn envoy_dynamic_module_callback_http_get_body_size(filter: *mut c_void, body: u32) -> usize;
    fn envoy_dynamic_module_callback_http_get_body_chunks_size(filter: *mut c_void, body: u32) -> usize;
    fn envoy_dynamic_module_callback_http_get_body_chunks(filter: *mut c_void, body: u32, out: *mut Buffer) -> bool;
    fn envoy_dynamic_module_callback_http_drain_body(filter: *mut c_void, body: u32, bytes: usize) -> bool;
    fn envoy_dynamic_module_callback_http_append_body(filter: *mut c_void, body: u32, data: Buffer) -> bool;
    fn envoy_dynamic_module_callback_http_received_buffered_request_body(filter: *mut c_void) -> bool;
    fn envoy_dynamic_module_callback_http_received_buffered_response_body(filter: *mut c_void) -> bool;

    fn envoy_dynamic_module_callback_http_set_filter_state_bytes(
        filter: *mut c_void,
        key: Buffer,
        value: Buffer,
    ) -> bool;

    fn envoy_dynamic_module_callback_http_filter_config_define_counter(
        config: *mut c_void,
        name: Buffer,
        label_names: *mut Buffer,
        label_names_length: usize,
        id: *mut usize,
    ) -> u32;
    fn envoy_dynamic_module_callback_http_filter_config_define_gauge(
        config: *mut c_void,
        name: Buffer,
        label_names: *mut Buffer,
        label_names_length: usize,
        id: *mut usize,
    ) -> u32;
    fn envoy_dynamic_module_callback_http_filter_increment_counter(
        filter: *mut c_void,
        id: usize,
        label_values: *mut Buffer,
        label_values_length: usize,
        value: u64,
    ) -> u32;
    fn envoy_dynamic_module_callback_http_filter_increment_gauge(
        filter: *mut c_void,
        id: usize,
        label_values: *mut Buffer,
        label_values_length: usize,
        value: u64,
    ) -> u32;
}

/// Log `message` at `level` under Envoy's `dynamic_modules` logger.
pub fn log(level: Level, message: &str) {
    // SAFETY: the message is a module buffer read during the call only.
    unsafe { envoy_dynamic_module_callback_log(level as u32, Buffer::of(message.as_bytes())) }
}

/// Is `level` enabled for Envoy's `dynamic_modules` logger?
pub fn log_enabled(level: Level) -> bool {
    // SAFETY: a plain value in, a bool out.
    unsafe { envoy_dynamic_module_callback_log_enabled(level as u32) }
}

/// The runtime value `key` of Envoy's layered runtime as a bool, or `default` where no layer sets it
/// (a feature flag's built-in default is not seen).
pub fn runtime_bool(key: &str, default: bool) -> bool {
    // SAFETY: the key is a module buffer read during the call only; a bool out.
    unsafe { envoy_dynamic_module_callback_get_runtime_bool(Buffer::of(key.as_bytes()), default) }
}

/// The Envoy side of one filter configuration, while `on_http_filter_config_new` runs (metrics are
/// defined through it).
pub struct ConfigHandle(*mut c_void);

impl ConfigHandle {
    fn define(&self, name: &str, labels: &[&str], gauge: bool) -> Option<usize> {
        let mut names: Vec<Buffer> = labels.iter().map(|l| Buffer::of(l.as_bytes())).collect();
        let mut id = 0usize;
        let (ptr, len) = if names.is_empty() { (std::ptr::null_mut(), 0) } else { (names.as_mut_ptr(), names.len()) };
        // SAFETY: `self.0` is the config pointer of the running `on_http_filter_config_new`; the name
        // and label buffers live until the call returns; `id` is a valid out pointer.
        let r = unsafe {
            if gauge {
                envoy_dynamic_module_callback_http_filter_config_define_gauge(
                    self.0,
                    Buffer::of(name.as_bytes()),
                    ptr,
                    len,
                    &mut id,
                )
            } else {
                envoy_dynamic_module_callback_http_filter_config_define_counter(
                    self.0,
                    Buffer::of(name.as_bytes()),
                    ptr,
                    len,
                    &mut id,
                )
            }
        };
        (r == METRICS_SUCCESS).then_some(id)
    }

    /// Define counter `name` with the given label names; its id, or `None` if Envoy refused.
    pub fn counter(&self, name: &str, labels: &[&str]) -> Option<usize> {
        self.define(name, labels, false)
    }

    /// Define gauge `name`; its id, or `None` if Envoy refused.
    pub fn gauge(&self, name: &str) -> Option<usize> {
        self.define(name, &[], true)
    }
}

/// The Envoy side of one HTTP stream, valid during the event hooks of that stream.
#[derive(Clone, Copy)]
pub struct Stream(*mut c_void);

impl Stream {
    /// Every header of `map`, in order (names are lower case in Envoy), read in place ([`Headers`]).
    pub fn headers(&self, map: HeaderMap) -> Option<Headers<'_>> {
        // SAFETY: `self.0` is this stream's filter pointer, used inside one of its event hooks.
        let n = unsafe { envoy_dynamic_module_callback_http_get_headers_size(self.0, map as u32) };
        let mut raw = vec![Header { key: Buffer::NULL, value: Buffer::NULL }; n];
        if n > 0 {
            // SAFETY: `raw` has room for the `n` headers Envoy just counted in the same map.
            let ok = unsafe { envoy_dynamic_module_callback_http_get_headers(self.0, map as u32, raw.as_mut_ptr()) };
            if !ok {
                return None;
            }
        }
        Some(Headers { raw, _stream: std::marker::PhantomData })
    }

    /// The first value of header `name` in `map`.
    pub fn header(&self, map: HeaderMap, name: &str) -> Option<Vec<u8>> {
        let mut out = Buffer::NULL;
        // SAFETY: the key is a module buffer; `out` is a valid out pointer; the optional count may be null.
        let ok = unsafe {
            envoy_dynamic_module_callback_http_get_header(
                self.0,
                map as u32,
                Buffer::of(name.as_bytes()),
                &mut out,
                0,
                std::ptr::null_mut(),
            )
        };
        (ok && !out.ptr.is_null()).then(|| out.to_vec())
    }

    /// Set header `name` of `map` to `value`, or remove it (`None`).
    pub fn set_header(&self, map: HeaderMap, name: &str, value: Option<&[u8]>) -> bool {
        let value = value.map_or(Buffer::NULL, Buffer::of);
        // SAFETY: both buffers are module buffers read during the call.
        unsafe { envoy_dynamic_module_callback_http_set_header(self.0, map as u32, Buffer::of(name.as_bytes()), value) }
    }

    /// Answer locally with `status`, `headers` and `body`.
    pub fn send_response(&self, status: u32, headers: &[(&str, &str)], body: &[u8]) {
        let mut hs: Vec<Header> = headers
            .iter()
            .map(|(k, v)| Header { key: Buffer::of(k.as_bytes()), value: Buffer::of(v.as_bytes()) })
            .collect();
        // SAFETY: the header array and the buffers it points into outlive the call.
        unsafe {
            envoy_dynamic_module_callback_http_send_response(
                self.0,
                status,
                hs.as_mut_ptr(),
                hs.len(),
                Buffer::of(body),
                // No details: Envoy then logs `dynamic_module` as %RESPONSE_CODE_DETAILS% (the
                // wasm build's is empty; docs/src/deploy/native.md, Differences that show).
                Buffer::NULL,
            )
        }
    }

    /// Reset the stream (`LocalReset`): what is left when nothing else is safe.
    pub fn reset(&self, details: &str) {
        // SAFETY: reason 0 is `LocalReset`; the details are a module buffer.
        unsafe { envoy_dynamic_module_callback_http_filter_reset_stream(self.0, 0, Buffer::of(details.as_bytes())) }
    }

    /// Let the request held by this filter go on (after a callout answered).
    pub fn continue_decoding(&self) {
        // SAFETY: `self.0` is this stream's filter pointer, used inside one of its event hooks.
        unsafe { envoy_dynamic_module_callback_http_filter_continue_decoding(self.0) }
    }

    /// Let the response held by this filter go on (after a callout answered).
    pub fn continue_encoding(&self) {
        // SAFETY: `self.0` is this stream's filter pointer, used inside one of its event hooks.
        unsafe { envoy_dynamic_module_callback_http_filter_continue_encoding(self.0) }
    }

    /// Raise this stream's buffer limit to at least `bytes` (it is never lowered). Envoy answers a
    /// held body over the limit with its own plain-text 413 before the filter sees it; the limit
    /// starts at the listener's `per_connection_buffer_limit_bytes` (1 MiB by default).
    pub fn raise_buffer_limit(&self, bytes: usize) {
        let bytes = u64::try_from(bytes).unwrap_or(u64::MAX);
        // SAFETY: `self.0` is this stream's filter pointer, used inside one of its event hooks.
        let limit = unsafe { envoy_dynamic_module_callback_http_get_buffer_limit(self.0) };
        if limit < bytes {
            // SAFETY: as above; Envoy takes the limit by value.
            unsafe { envoy_dynamic_module_callback_http_set_buffer_limit(self.0, bytes) }
        }
    }

    /// The cluster the route chose for this request.
    pub fn cluster_name(&self) -> Option<String> {
        let mut out = Buffer::NULL;
        // SAFETY: `out` is a valid out pointer, copied out at once.
        let ok = unsafe { envoy_dynamic_module_callback_http_get_cluster_name(self.0, &mut out) };
        (ok && !out.ptr.is_null()).then(|| String::from_utf8_lossy(out.as_slice()).into_owned())
    }

    /// Bytes in body `which`.
    pub fn body_size(&self, which: Body) -> usize {
        // SAFETY: `self.0` is this stream's filter pointer.
        unsafe { envoy_dynamic_module_callback_http_get_body_size(self.0, which as u32) }
    }

    /// A copy of body `which` (empty if Envoy has none).
    pub fn body(&self, which: Body) -> Option<Vec<u8>> {
        let mut out = Vec::new();
        self.append_body(which, &mut out).then_some(out)
    }

    /// Append body `which` to `out`, copied once from Envoy's slices; false if Envoy could not
    /// give them.
    pub fn append_body(&self, which: Body, out: &mut Vec<u8>) -> bool {
        // SAFETY: `self.0` is this stream's filter pointer.
        let n = unsafe { envoy_dynamic_module_callback_http_get_body_chunks_size(self.0, which as u32) };
        if n == 0 {
            return true;
        }
        // A body comes in a few slices: their descriptors stay on the stack unless there are many.
        let mut inline = [Buffer::NULL; 16];
        let mut heap = Vec::new();
        let chunks: &mut [Buffer] = match inline.get_mut(..n) {
            Some(c) => c,
            None => {
                heap.resize(n, Buffer::NULL);
                &mut heap
            }
        };
        // SAFETY: `chunks` has room for the `n` slices Envoy just counted in the same body.
        let ok =
            unsafe { envoy_dynamic_module_callback_http_get_body_chunks(self.0, which as u32, chunks.as_mut_ptr()) };
        if !ok {
            return false;
        }
        out.reserve(chunks.iter().map(|c| c.len).sum());
        for c in chunks.iter() {
            out.extend_from_slice(c.as_slice());
        }
        true
    }

    /// Add `bytes` to the end of body `which`: for `BufferedResponse` in the response-trailers hook,
    /// data Envoy sends ahead of the trailers.
    pub fn add_body(&self, which: Body, bytes: &[u8]) -> bool {
        // SAFETY: append to this stream's body; `bytes` is a module buffer.
        bytes.is_empty()
            || unsafe { envoy_dynamic_module_callback_http_append_body(self.0, which as u32, Buffer::of(bytes)) }
    }

    /// Replace all of body `which` by `bytes`.
    pub fn replace_body(&self, which: Body, bytes: &[u8]) -> bool {
        let size = self.body_size(which);
        // SAFETY: drain this stream's body.
        let drained = unsafe { envoy_dynamic_module_callback_http_drain_body(self.0, which as u32, size) };
        drained && self.add_body(which, bytes)
    }

    /// Is the received request body the buffered one (Envoy re-delivering what a filter held)?
    pub fn received_is_buffered_request(&self) -> bool {
        // SAFETY: `self.0` is this stream's filter pointer.
        unsafe { envoy_dynamic_module_callback_http_received_buffered_request_body(self.0) }
    }

    /// Is the received response body the buffered one (Envoy re-delivering what a filter held)?
    pub fn received_is_buffered_response(&self) -> bool {
        // SAFETY: `self.0` is this stream's filter pointer.
        unsafe { envoy_dynamic_module_callback_http_received_buffered_response_body(self.0) }
    }

    /// Set filter-state `key` to `value` (a string accessor, readable as `%FILTER_STATE(key:PLAIN)%`).
    pub fn set_filter_state(&self, key: &str, value: &[u8]) -> bool {
        // SAFETY: both buffers are module buffers read during the call.
        unsafe {
            envoy_dynamic_module_callback_http_set_filter_state_bytes(
                self.0,
                Buffer::of(key.as_bytes()),
                Buffer::of(value),
            )
        }
    }

    /// Add `by` to counter `id` (with label values, if it was defined with label names).
    pub fn count(&self, id: usize, labels: &[&str], by: u64) {
        let mut values: Vec<Buffer> = labels.iter().map(|l| Buffer::of(l.as_bytes())).collect();
        let (ptr, len) =
            if values.is_empty() { (std::ptr::null_mut(), 0) } else { (values.as_mut_ptr(), values.len()) };
        // SAFETY: `id` was defined by this stream's configuration; the label buffers outlive the call.
        unsafe { envoy_dynamic_module_callback_http_filter_increment_counter(self.0, id, ptr, len, by) };
    }

    /// Add `by` to gauge `id`.
    pub fn gauge_add(&self, id: usize, by: u64) {
        // SAFETY: `id` was defined by this stream's configuration; no labels.
        unsafe { envoy_dynamic_module_callback_http_filter_increment_gauge(self.0, id, std::ptr::null_mut(), 0, by) };
    }
}
