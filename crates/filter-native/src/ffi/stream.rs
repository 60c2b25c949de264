//! Calls made as HTTP streams: the rate limit service's gRPC call, whose status may come in
//! trailers, which the ABI's one-shot HTTP callout does not hand over. Envoy reports each stream
//! event by its id (`on_http_filter_http_stream_*`); the answer is read from them as they come
//! ([`AnswerReader`]) and given to the filter once an event ends the call.
//!
//! The readers live in a table per worker thread, not in the filter: Envoy may report events while
//! the filter's own hook is still starting the stream (a local reply such as "no healthy upstream"
//! comes back inline), when the filter is in use and must not be touched. Such events are read into
//! the table, and the hook that started the stream takes an answer they gave as soon as the start
//! returns. A filter's readers are dropped with the filter.

use std::cell::{Cell, RefCell};
use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};

use mcp_policy_core::rls::grpc::AnswerReader;
use mcp_policy_core::rls::Answer;

use super::boundary::on_filter;
use super::types::header_value;
use super::{Buffer, Header, Stream};
use crate::filter::Flow;

extern "C" {
    fn envoy_dynamic_module_callback_http_filter_start_http_stream(
        filter: *mut c_void,
        stream_id_out: *mut u64,
        cluster_name: Buffer,
        headers: *mut Header,
        headers_size: usize,
        body: Buffer,
        end_stream: bool,
        timeout_milliseconds: u64,
    ) -> u32;
}

/// One call in flight: its filter (the `module_ptr`), its stream id and what it has answered so far.
struct Call {
    filter: usize,
    id: u64,
    reader: AnswerReader,
}

thread_local! {
    /// The calls in flight on this worker thread (a filter has at most two: a rate limit decision
    /// and a marking).
    static CALLS: RefCell<Vec<Call>> = const { RefCell::new(Vec::new()) };
    /// The filter whose hook is inside `start_http_stream`, if any.
    static STARTING: Cell<usize> = const { Cell::new(0) };
}

impl Stream {
    /// Start a call on `cluster`: the request's headers and whole body, in one go. `filter` is the
    /// calling filter's `module_ptr`. Returns the stream's id, and the answer if the stream already
    /// ended while it started; else the answer comes to `Filter::on_call_answer`. `Err`: the
    /// `envoy_dynamic_module_type_http_callout_init_result` of a stream that did not start.
    pub fn start_call(
        &self,
        filter: usize,
        cluster: &str,
        headers: &[(&str, &str)],
        body: &[u8],
        timeout_ms: u64,
    ) -> Result<(u64, Option<Answer>), u32> {
        let outer = STARTING.with(|s| s.replace(filter));
        // SAFETY: the pointers and buffers are `start_request`'s, valid for the call.
        let started = self.start_request(cluster, headers, body, |filter, id, cluster, hs, n, body| unsafe {
            envoy_dynamic_module_callback_http_filter_start_http_stream(
                filter, id, cluster, hs, n, body, true, timeout_ms,
            )
        });
        STARTING.with(|s| s.set(outer));
        let id = started?;
        let answer = with_calls(|calls| match calls.iter().position(|c| c.filter == filter && c.id == id) {
            Some(i) if calls.get(i).is_some_and(|c| c.reader.ended()) => calls.swap_remove(i).reader.take(),
            Some(_) => None,
            None => {
                calls.push(Call { filter, id, reader: AnswerReader::default() });
                None
            }
        });
        Ok((id, answer.flatten()))
    }
}

/// Run `f` on the table; `None` if it is in use (never: nothing calls into Envoy while holding it).
fn with_calls<T>(f: impl FnOnce(&mut Vec<Call>) -> T) -> Option<T> {
    CALLS.with(|c| c.try_borrow_mut().ok().map(|mut calls| f(&mut calls)))
}

/// Drop the calls of a filter that is being destroyed (Envoy reports no more of their events).
pub(super) fn forget(filter: usize) {
    with_calls(|calls| calls.retain(|c| c.filter != filter));
}

/// One event of stream `id` of `module_ptr`'s filter, read by `event`. When it ends the call (and
/// the filter is not starting it), the answer goes to the filter.
fn on_event(filter_envoy_ptr: *mut c_void, module_ptr: *const c_void, id: u64, event: impl FnOnce(&mut AnswerReader)) {
    let filter = module_ptr as usize;
    if filter == 0 {
        return;
    }
    let starting = STARTING.with(Cell::get) == filter;
    let read = catch_unwind(AssertUnwindSafe(|| {
        with_calls(|calls| {
            let i = match calls.iter().position(|c| c.filter == filter && c.id == id) {
                Some(i) => i,
                // An event reported while the stream starts: the start takes the answer.
                None if starting => {
                    calls.push(Call { filter, id, reader: AnswerReader::default() });
                    calls.len() - 1
                }
                // A call already answered, or of a filter whose readers were dropped.
                None => return None,
            };
            let call = calls.get_mut(i)?;
            event(&mut call.reader);
            if starting || !call.reader.ended() {
                return None;
            }
            calls.swap_remove(i).reader.take()
        })
        .flatten()
    }));
    let answer = match read {
        Ok(answer) => answer,
        // A reader that panicked: the call is refused. While the stream starts the filter is in use,
        // so its start takes a reader ended as a reset (13, refused) instead.
        Err(_) if starting => {
            with_calls(|calls| {
                calls.retain(|c| !(c.filter == filter && c.id == id));
                let mut reader = AnswerReader::default();
                reader.reset();
                calls.push(Call { filter, id, reader });
            });
            None
        }
        Err(_) => {
            with_calls(|calls| calls.retain(|c| !(c.filter == filter && c.id == id)));
            Some(Answer::Unusable("rate limit service answer could not be read (module panic)".into()))
        }
    };
    if let Some(answer) = answer {
        on_filter(filter_envoy_ptr, module_ptr, |f| {
            f.on_call_answer(id, answer);
            Flow::Continue
        });
    }
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_headers(
    filter_envoy_ptr: *mut c_void,
    filter_module_ptr: *const c_void,
    stream_id: u64,
    headers: *mut Header,
    headers_size: usize,
    end_stream: bool,
) {
    on_event(filter_envoy_ptr, filter_module_ptr, stream_id, |r| {
        let status = header_value(headers, headers_size, b":status");
        let grpc = header_value(headers, headers_size, b"grpc-status");
        r.headers(status, grpc, end_stream);
    });
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_data(
    filter_envoy_ptr: *mut c_void,
    filter_module_ptr: *const c_void,
    stream_id: u64,
    data: *const Buffer,
    data_count: usize,
    end_stream: bool,
) {
    on_event(filter_envoy_ptr, filter_module_ptr, stream_id, |r| {
        let chunks: &[Buffer] = if data.is_null() {
            &[]
        } else {
            // SAFETY: Envoy passes `data_count` buffers, valid until the event hook returns.
            unsafe { std::slice::from_raw_parts(data, data_count) }
        };
        for chunk in chunks {
            r.data(chunk.as_slice(), false);
        }
        if end_stream {
            r.data(&[], true);
        }
    });
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_trailers(
    filter_envoy_ptr: *mut c_void,
    filter_module_ptr: *const c_void,
    stream_id: u64,
    trailers: *mut Header,
    trailers_size: usize,
) {
    on_event(filter_envoy_ptr, filter_module_ptr, stream_id, |r| {
        r.trailers(header_value(trailers, trailers_size, b"grpc-status"));
    });
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_complete(
    filter_envoy_ptr: *mut c_void,
    filter_module_ptr: *const c_void,
    stream_id: u64,
) {
    // Every complete answer ended the call at its last event; one that did not is broken.
    on_event(filter_envoy_ptr, filter_module_ptr, stream_id, AnswerReader::reset);
}

#[no_mangle]
pub extern "C" fn envoy_dynamic_module_on_http_filter_http_stream_reset(
    filter_envoy_ptr: *mut c_void,
    filter_module_ptr: *const c_void,
    stream_id: u64,
    _reason: u32,
) {
    on_event(filter_envoy_ptr, filter_module_ptr, stream_id, AnswerReader::reset);
}
