//! The minimal body-reading dynamic module (the native build's floor): for each request it does what
//! the native build must do before any decision, and nothing else. It holds the request headers,
//! raises the stream's buffer limit, reads one header (`authorization`, the credential the filter
//! reads) and, at end of stream, the whole body through the same ABI calls as the native build
//! (crates/filter-native/src/ffi); then it continues. No parsing, no decision, no logging, no
//! allocation. Loaded as the native build is (`bench/envoy/filters-dynamic-minimal.yaml`), on Envoy
//! 1.40's dynamic-module ABI.

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
pub struct Header {
    key: Buffer,
    value: Buffer,
}

extern "C" {
    fn envoy_dynamic_module_callback_http_get_header(
        filter: *mut c_void,
        map: u32,
        key: Buffer,
        out: *mut Buffer,
        index: usize,
        optional_size: *mut usize,
    ) -> bool;
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

/// Bytes in body `which`, read slice by slice (the native build copies them into one buffer).
fn read_body(filter: *mut c_void, which: u32) -> usize {
    // SAFETY: `filter` is the stream's filter pointer, used inside its event hook.
    let n = unsafe { envoy_dynamic_module_callback_http_get_body_chunks_size(filter, which) };
    let mut chunks = [NULL; 16];
    if n == 0 || n > chunks.len() {
        return 0;
    }
    // SAFETY: `chunks` has room for the `n` slices Envoy just counted.
    if !unsafe { envoy_dynamic_module_callback_http_get_body_chunks(filter, which, chunks.as_mut_ptr()) } {
        return 0;
    }
    let mut sum = 0usize;
    for c in &chunks[..n] {
        if !c.ptr.is_null() {
            // SAFETY: Envoy filled (ptr, len) during this hook; it is read before the hook returns.
            let bytes = unsafe { std::slice::from_raw_parts(c.ptr, c.len) };
            sum = sum.wrapping_add(bytes.iter().map(|&b| b as usize).sum::<usize>());
        }
    }
    sum
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
        let key = b"authorization";
        let mut out = NULL;
        // SAFETY: the key is read during the call; `out` is a valid out pointer; the count may be null.
        let found = unsafe {
            envoy_dynamic_module_callback_http_get_header(
                filter_envoy_ptr,
                REQUEST_HEADERS,
                Buffer { ptr: key.as_ptr(), len: key.len() },
                &mut out,
                0,
                std::ptr::null_mut(),
            )
        };
        if found {
            m.seen += out.len;
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
        m.seen = m.seen.wrapping_add(read_body(filter_envoy_ptr, BUFFERED_REQUEST_BODY));
        // SAFETY: the stream's filter pointer, inside its event hook.
        if !unsafe { envoy_dynamic_module_callback_http_received_buffered_request_body(filter_envoy_ptr) } {
            m.seen = m.seen.wrapping_add(read_body(filter_envoy_ptr, RECEIVED_REQUEST_BODY));
        }
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
