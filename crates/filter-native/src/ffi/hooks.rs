//! The event hooks Envoy calls (`envoy_dynamic_module_on_*`). Each one converts the raw pointers
//! into the crate's safe types and runs the safe code under `catch_unwind`: a panic never unwinds
//! into Envoy, and a stream whose hook panicked is reset (never forwarded), then ignored.

use std::ffi::{c_char, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use super::boundary::{on_filter, running};
use super::{Buffer, CalloutAnswer, ConfigHandle, Header, Stream};
use crate::config::Config;
use crate::filter::{Filter, Flow};

/// The ABI version this module was written against: `ENVOY_DYNAMIC_MODULES_ABI_VERSION` of Envoy
/// 1.40's `abi.h`. Envoy compares it with its own at load and logs `ABI version … matched`, or that
/// it is deprecated (an Envoy of another release), and loads the module all the same. So the
/// module also imports a callback that Envoy 1.40 introduced (`ffi::runtime_bool`): the `.so` is
/// linked `BIND_NOW` (build.rs), so an older Envoy fails to load it (`undefined symbol`) and
/// refuses the configuration, instead of running it against another ABI.
pub const ABI_VERSION: &str = "v0.2.0";
const ABI_VERSION_C: &[u8] = b"v0.2.0\0";

/// How this module was built (build.rs): `profile-guided` (or `profile-guided with a stale profile`),
/// `instrumented for profiling` or `without a profile`. Named in the load line, and kept in the file
/// between this prefix and a `;` (the bytes after it belong to other strings), where scripts/oci.sh
/// reads it into the OCI image's description.
#[used]
static BUILD: &str = concat!("mcp-policy-native build: ", env!("MCP_POLICY_NATIVE_BUILD"), ";");

// `envoy_dynamic_module_type_on_http_filter_*_status` values.
const CONTINUE: u32 = 0;
const STOP_ITERATION: u32 = 1;
const STOP_ITERATION_AND_BUFFER: u32 = 1;
const STOP_ITERATION_NO_BUFFER: u32 = 3;

fn headers_status(flow: Flow) -> u32 {
    match flow {
        Flow::Continue => CONTINUE,
        Flow::Stop | Flow::Buffer => STOP_ITERATION,
    }
}

fn body_status(flow: Flow) -> u32 {
    match flow {
        Flow::Continue => CONTINUE,
        Flow::Buffer => STOP_ITERATION_AND_BUFFER,
        Flow::Stop => STOP_ITERATION_NO_BUFFER,
    }
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_program_init() -> *const c_char {
    let ok = catch_unwind(|| {
        super::init_logging();
        log::info!(
            "mcp-policy-filter {} (dynamic module, ABI {ABI_VERSION} of Envoy 1.40, {}) loaded",
            mcp_policy_core::VERSION,
            env!("MCP_POLICY_NATIVE_BUILD")
        );
    });
    if ok.is_err() {
        return std::ptr::null();
    }
    ABI_VERSION_C.as_ptr().cast()
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_new(
    filter_config_envoy_ptr: *mut c_void,
    name: Buffer,
    config: Buffer,
) -> *const c_void {
    let made = catch_unwind(AssertUnwindSafe(|| {
        Config::new(&ConfigHandle(filter_config_envoy_ptr), &name.to_vec(), &config.to_vec())
    }));
    match made {
        Ok(Some(config)) => Box::into_raw(Box::new(Arc::new(config))) as *const c_void,
        _ => std::ptr::null(),
    }
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_destroy(filter_config_ptr: *const c_void) {
    if filter_config_ptr.is_null() {
        return;
    }
    // SAFETY: the pointer is the `Box<Arc<Config>>` returned by `on_http_filter_config_new`, given
    // back exactly once; filters hold their own `Arc`.
    drop(unsafe { Box::from_raw(filter_config_ptr as *mut Arc<Config>) });
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_new(
    filter_config_ptr: *const c_void,
    filter_envoy_ptr: *mut c_void,
) -> *const c_void {
    if filter_config_ptr.is_null() {
        return std::ptr::null();
    }
    // SAFETY: the pointer is a live `Box<Arc<Config>>` from `on_http_filter_config_new` (Envoy keeps
    // the configuration alive while it creates filters from it); only shared access is taken.
    let config = unsafe { &*(filter_config_ptr as *const Arc<Config>) };
    match catch_unwind(AssertUnwindSafe(|| Filter::new(Arc::clone(config), Stream(filter_envoy_ptr)))) {
        Ok(filter) => Box::into_raw(Box::new(filter)) as *const c_void,
        // A null filter makes Envoy close the stream.
        Err(_) => std::ptr::null(),
    }
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_destroy(filter_module_ptr: *const c_void) {
    if filter_module_ptr.is_null() {
        return;
    }
    super::stream::forget(filter_module_ptr as usize);
    // SAFETY: the pointer is the `Box<Filter>` from `on_http_filter_new`, given back exactly once.
    let filter = unsafe { Box::from_raw(filter_module_ptr as *mut Filter) };
    let _ = catch_unwind(AssertUnwindSafe(|| drop(filter)));
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_request_headers(
    filter_envoy_ptr: *mut c_void,
    filter_module_ptr: *const c_void,
    end_of_stream: bool,
) -> u32 {
    headers_status(on_filter(filter_envoy_ptr, filter_module_ptr, |f| f.request_headers(end_of_stream)))
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_request_body(
    filter_envoy_ptr: *mut c_void,
    filter_module_ptr: *const c_void,
    end_of_stream: bool,
) -> u32 {
    body_status(on_filter(filter_envoy_ptr, filter_module_ptr, |f| f.request_body(end_of_stream)))
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_request_trailers(
    filter_envoy_ptr: *mut c_void,
    filter_module_ptr: *const c_void,
) -> u32 {
    headers_status(on_filter(filter_envoy_ptr, filter_module_ptr, Filter::request_trailers))
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_response_headers(
    filter_envoy_ptr: *mut c_void,
    filter_module_ptr: *const c_void,
    end_of_stream: bool,
) -> u32 {
    headers_status(on_filter(filter_envoy_ptr, filter_module_ptr, |f| f.response_headers(end_of_stream)))
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_response_body(
    filter_envoy_ptr: *mut c_void,
    filter_module_ptr: *const c_void,
    end_of_stream: bool,
) -> u32 {
    body_status(on_filter(filter_envoy_ptr, filter_module_ptr, |f| f.response_body(end_of_stream)))
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_response_trailers(
    filter_envoy_ptr: *mut c_void,
    filter_module_ptr: *const c_void,
) -> u32 {
    headers_status(on_filter(filter_envoy_ptr, filter_module_ptr, Filter::response_trailers))
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_stream_complete(
    filter_envoy_ptr: *mut c_void,
    filter_module_ptr: *const c_void,
) {
    on_filter(filter_envoy_ptr, filter_module_ptr, |f| {
        f.abandon_approval();
        f.unanswered(false)
    });
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_callout_done(
    filter_envoy_ptr: *mut c_void,
    filter_module_ptr: *const c_void,
    callout_id: u64,
    result: u32,
    headers: *mut Header,
    headers_size: usize,
    body_chunks: *mut Buffer,
    body_chunks_size: usize,
) {
    let max_body = mcp_policy_core::approval::MAX_ANSWER_BYTES;
    if !filter_module_ptr.is_null() && running(filter_module_ptr) {
        // Answered inline, while the filter's own hook is starting the callout: Envoy's async client
        // may fail a request before `send` returns, and then returns no request, so the callout
        // reports that it could not start (`CannotCreateRequest`) and the filter decides on that as
        // for an unreachable service. The filter is in use by that hook: it is not touched here.
        log::debug!("callout {callout_id} answered inline (result {result}); its start reports the failure");
        return;
    }
    let answer = CalloutAnswer::read(result, headers, headers_size, body_chunks, body_chunks_size, max_body);
    on_filter(filter_envoy_ptr, filter_module_ptr, |f| {
        f.on_approval_response(callout_id, answer);
        Flow::Continue
    });
}

// Hooks of ABI features this filter does not use (per-route configuration, the configuration's
// callouts and streams, schedulers, watermarks, local-reply notices): Envoy resolves every one of
// them at load. The filter's own streams are `super::stream`'s.

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_per_route_config_new(
    _name: Buffer,
    _config: Buffer,
) -> *const c_void {
    log::error!("mcp-policy-filter has no per-route configuration; refusing it");
    std::ptr::null()
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_per_route_config_destroy(_config: *const c_void) {}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_scheduled(
    _filter_envoy_ptr: *mut c_void,
    _filter_module_ptr: *const c_void,
    _event_id: u64,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_scheduled(
    _filter_config_envoy_ptr: *mut c_void,
    _filter_config_ptr: *const c_void,
    _event_id: u64,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_http_callout_done(
    _filter_config_envoy_ptr: *mut c_void,
    _filter_config_ptr: *const c_void,
    _callout_id: u64,
    _result: u32,
    _headers: *mut Header,
    _headers_size: usize,
    _body_chunks: *mut Buffer,
    _body_chunks_size: usize,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_http_stream_headers(
    _filter_config_envoy_ptr: *mut c_void,
    _filter_config_ptr: *const c_void,
    _stream_id: u64,
    _headers: *mut Header,
    _headers_size: usize,
    _end_stream: bool,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_http_stream_data(
    _filter_config_envoy_ptr: *mut c_void,
    _filter_config_ptr: *const c_void,
    _stream_id: u64,
    _data: *const Buffer,
    _data_count: usize,
    _end_stream: bool,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_http_stream_trailers(
    _filter_config_envoy_ptr: *mut c_void,
    _filter_config_ptr: *const c_void,
    _stream_id: u64,
    _trailers: *mut Header,
    _trailers_size: usize,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_http_stream_complete(
    _filter_config_envoy_ptr: *mut c_void,
    _filter_config_ptr: *const c_void,
    _stream_id: u64,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_config_http_stream_reset(
    _filter_config_envoy_ptr: *mut c_void,
    _filter_config_ptr: *const c_void,
    _stream_id: u64,
    _reason: u32,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_downstream_above_write_buffer_high_watermark(
    _filter_envoy_ptr: *mut c_void,
    _filter_module_ptr: *const c_void,
) {
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_downstream_below_write_buffer_low_watermark(
    _filter_envoy_ptr: *mut c_void,
    _filter_module_ptr: *const c_void,
) {
}

/// `envoy_dynamic_module_type_on_http_filter_local_reply_status_Continue`: Envoy's replies go out.
#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_local_reply(
    _filter_envoy_ptr: *mut c_void,
    _filter_module_ptr: *const c_void,
    _response_code: u32,
    _details: Buffer,
    _reset_imminent: bool,
) -> u32 {
    0
}
