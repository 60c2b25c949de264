//! The minimal body-reading dynamic module (the native build's floor): for each request it does what
//! the native build must do before any decision, through the same ABI calls
//! (crates/filter-native/src/ffi), and nothing else. It holds the request headers, reads them all in
//! place and finds `authorization` (the credential the filter reads) among them, raises the stream's
//! buffer limit; at the end of the stream it sizes the body and copies it into one buffer, as the
//! native build does before it parses it; then it continues. No parsing, no decision, no logging, no
//! filter state, no metrics. Loaded as the native build is
//! (`bench/envoy/filters-dynamic-minimal.yaml`), on Envoy 1.40's dynamic-module ABI.

// The hooks' signatures are Envoy's ABI: they take Envoy's pointers and hand them back to its callbacks.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

use std::ffi::{c_char, c_void};

const ABI_VERSION: &[u8] = b"v0.2.0\0";
const CONTINUE: u32 = 0;
const STOP_ITERATION: u32 = 1;
const STOP_ITERATION_AND_BUFFER: u32 = 1;
const REQUEST_HEADERS: u32 = 0;
const RECEIVED_REQUEST_BODY: u32 = 0;
const BUFFERED_REQUEST_BODY: u32 = 1;
/// The native build's default `gateway.max_body_bytes`.
const BODY_LIMIT: u64 = 1 << 20;

#[repr(C)]
#[derive(Clone, Copy)]
pub struct Buffer {
    ptr: *const u8,
    len: usize,
}

const NULL: Buffer = Buffer { ptr: std::ptr::null(), len: 0 };

#[repr(C)]
#[derive(Clone, Copy)]
pub struct Header {
    key: Buffer,
    value: Buffer,
}

extern "C" {
    fn envoy_dynamic_module_callback_http_get_headers_size(filter: *mut c_void, map: u32) -> usize;
    fn envoy_dynamic_module_callback_http_get_headers(filter: *mut c_void, map: u32, out: *mut Header) -> bool;
    fn envoy_dynamic_module_callback_http_get_body_size(filter: *mut c_void, body: u32) -> usize;
    fn envoy_dynamic_module_callback_http_get_buffer_limit(filter: *mut c_void) -> u64;
    fn envoy_dynamic_module_callback_http_set_buffer_limit(filter: *mut c_void, limit: u64);
    fn envoy_dynamic_module_callback_http_get_body_chunks_size(filter: *mut c_void, body: u32) -> usize;
    fn envoy_dynamic_module_callback_http_get_body_chunks(filter: *mut c_void, body: u32, out: *mut Buffer) -> bool;
    fn envoy_dynamic_module_callback_http_received_buffered_request_body(filter: *mut c_void) -> bool;
}

/// One stream: the bytes read, kept so that the reads cannot be optimised away.
struct Minimal {
    seen: usize,
}

/// Append body `which` to `out`, copied once from Envoy's slices, as the native build does
/// (`Stream::append_body`): the slice descriptors on the stack unless there are more than 16.
fn append_body(filter: *mut c_void, which: u32, out: &mut Vec<u8>) {
    // SAFETY: `filter` is the stream's filter pointer, used inside its event hook.
    let n = unsafe { envoy_dynamic_module_callback_http_get_body_chunks_size(filter, which) };
    if n == 0 {
        return;
    }
    let mut inline = [NULL; 16];
    let mut heap = Vec::new();
    let chunks: &mut [Buffer] = match inline.get_mut(..n) {
        Some(c) => c,
        None => {
            heap.resize(n, NULL);
            &mut heap
        }
    };
    // SAFETY: `chunks` has room for the `n` slices Envoy just counted.
    if !unsafe { envoy_dynamic_module_callback_http_get_body_chunks(filter, which, chunks.as_mut_ptr()) } {
        return;
    }
    for c in chunks.iter() {
        if !c.ptr.is_null() {
            // SAFETY: Envoy filled (ptr, len) during this hook; it is read before the hook returns.
            out.extend_from_slice(unsafe { std::slice::from_raw_parts(c.ptr, c.len) });
        }
    }
}

fn with_stream(module_ptr: *const c_void, f: impl FnOnce(&mut Minimal)) {
    if !module_ptr.is_null() {
        // SAFETY: the pointer is the `Box<Minimal>` from `on_http_filter_new`, alive until destroy,
        // used on the stream's worker thread only.
        f(unsafe { &mut *(module_ptr as *mut Minimal) });
    }
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_program_init() -> *const c_char {
    ABI_VERSION.as_ptr().cast()
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_new(
    _filter_config_envoy_ptr: *mut c_void,
    _name: Buffer,
    _config: Buffer,
) -> *const c_void {
    // Any non-null pointer: the module has no configuration.
    ABI_VERSION.as_ptr().cast()
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_destroy(_filter_config_ptr: *const c_void) {}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_new(
    _filter_config_ptr: *const c_void,
    _filter_envoy_ptr: *mut c_void,
) -> *const c_void {
    Box::into_raw(Box::new(Minimal { seen: 0 })) as *const c_void
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_destroy(filter_module_ptr: *const c_void) {
    if !filter_module_ptr.is_null() {
        // SAFETY: the `Box<Minimal>` from `on_http_filter_new`, given back exactly once.
        let m = unsafe { Box::from_raw(filter_module_ptr as *mut Minimal) };
        std::hint::black_box(m.seen);
    }
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_request_headers(
    filter_envoy_ptr: *mut c_void,
    filter_module_ptr: *const c_void,
    end_of_stream: bool,
) -> u32 {
    with_stream(filter_module_ptr, |m| {
        // SAFETY: the stream's filter pointer, inside its event hook.
        let n = unsafe { envoy_dynamic_module_callback_http_get_headers_size(filter_envoy_ptr, REQUEST_HEADERS) };
        let mut headers = vec![Header { key: NULL, value: NULL }; n];
        // SAFETY: `headers` has room for the `n` headers Envoy just counted in the same map.
        if n > 0
            && unsafe {
                envoy_dynamic_module_callback_http_get_headers(filter_envoy_ptr, REQUEST_HEADERS, headers.as_mut_ptr())
            }
        {
            for h in &headers {
                if h.key.len == 13 && !h.key.ptr.is_null() {
                    // SAFETY: Envoy filled (ptr, len) during this hook; it is read before the hook returns.
                    if unsafe { std::slice::from_raw_parts(h.key.ptr, h.key.len) } == b"authorization" {
                        m.seen += h.value.len;
                    }
                }
            }
        }
        if !end_of_stream {
            // SAFETY: the stream's filter pointer, inside its event hook.
            unsafe {
                if envoy_dynamic_module_callback_http_get_buffer_limit(filter_envoy_ptr) < BODY_LIMIT {
                    envoy_dynamic_module_callback_http_set_buffer_limit(filter_envoy_ptr, BODY_LIMIT);
                }
            }
        }
    });
    if end_of_stream {
        CONTINUE
    } else {
        STOP_ITERATION
    }
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_request_body(
    filter_envoy_ptr: *mut c_void,
    filter_module_ptr: *const c_void,
    end_of_stream: bool,
) -> u32 {
    if !end_of_stream {
        return STOP_ITERATION_AND_BUFFER;
    }
    with_stream(filter_module_ptr, |m| {
        // SAFETY: the stream's filter pointer, inside its event hook.
        let (received_is_buffered, size) = unsafe {
            let buffered = envoy_dynamic_module_callback_http_received_buffered_request_body(filter_envoy_ptr);
            let mut size = envoy_dynamic_module_callback_http_get_body_size(filter_envoy_ptr, BUFFERED_REQUEST_BODY);
            if !buffered {
                size += envoy_dynamic_module_callback_http_get_body_size(filter_envoy_ptr, RECEIVED_REQUEST_BODY);
            }
            (buffered, size)
        };
        let mut body = Vec::with_capacity(size);
        append_body(filter_envoy_ptr, BUFFERED_REQUEST_BODY, &mut body);
        if !received_is_buffered {
            append_body(filter_envoy_ptr, RECEIVED_REQUEST_BODY, &mut body);
        }
        m.seen = m.seen.wrapping_add(std::hint::black_box(&body).len());
    });
    CONTINUE
}

// Every other hook Envoy resolves at load: they do nothing.

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_request_trailers(_: *mut c_void, _: *const c_void) -> u32 {
    CONTINUE
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_response_headers(
    _: *mut c_void,
    _: *const c_void,
    _: bool,
) -> u32 {
    CONTINUE
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_response_body(_: *mut c_void, _: *const c_void, _: bool) -> u32 {
    CONTINUE
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_response_trailers(_: *mut c_void, _: *const c_void) -> u32 {
    CONTINUE
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_stream_complete(_: *mut c_void, _: *const c_void) {}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_callout_done(
    _: *mut c_void,
    _: *const c_void,
    _: u64,
    _: u32,
    _: *mut Header,
    _: usize,
    _: *mut Buffer,
    _: usize,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_headers(
    _: *mut c_void,
    _: *const c_void,
    _: u64,
    _: *mut Header,
    _: usize,
    _: bool,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_data(
    _: *mut c_void,
    _: *const c_void,
    _: u64,
    _: *const Buffer,
    _: usize,
    _: bool,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_trailers(
    _: *mut c_void,
    _: *const c_void,
    _: u64,
    _: *mut Header,
    _: usize,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_complete(_: *mut c_void, _: *const c_void, _: u64) {}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_reset(
    _: *mut c_void,
    _: *const c_void,
    _: u64,
    _: u32,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_per_route_config_new(_: Buffer, _: Buffer) -> *const c_void {
    std::ptr::null()
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_per_route_config_destroy(_: *const c_void) {}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_scheduled(_: *mut c_void, _: *const c_void, _: u64) {}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_scheduled(_: *mut c_void, _: *const c_void, _: u64) {}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_http_callout_done(
    _: *mut c_void,
    _: *const c_void,
    _: u64,
    _: u32,
    _: *mut Header,
    _: usize,
    _: *mut Buffer,
    _: usize,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_http_stream_headers(
    _: *mut c_void,
    _: *const c_void,
    _: u64,
    _: *mut Header,
    _: usize,
    _: bool,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_http_stream_data(
    _: *mut c_void,
    _: *const c_void,
    _: u64,
    _: *const Buffer,
    _: usize,
    _: bool,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_http_stream_trailers(
    _: *mut c_void,
    _: *const c_void,
    _: u64,
    _: *mut Header,
    _: usize,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_http_stream_complete(
    _: *mut c_void,
    _: *const c_void,
    _: u64,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_http_stream_reset(
    _: *mut c_void,
    _: *const c_void,
    _: u64,
    _: u32,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_downstream_above_write_buffer_high_watermark(
    _: *mut c_void,
    _: *const c_void,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_downstream_below_write_buffer_low_watermark(
    _: *mut c_void,
    _: *const c_void,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_local_reply(
    _: *mut c_void,
    _: *const c_void,
    _: u32,
    _: Buffer,
    _: bool,
) -> u32 {
    CONTINUE
}
