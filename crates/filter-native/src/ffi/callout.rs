//! HTTP callouts (the approval service's): started here, and their answer read out of the
//! arguments Envoy passes to `on_http_filter_http_callout_done`.

use std::ffi::c_void;

use super::types::header_value;
use super::{Buffer, Header, Stream};

extern "C" {
    fn envoy_dynamic_module_callback_http_filter_http_callout(
        filter: *mut c_void,
        callout_id_out: *mut u64,
        cluster_name: Buffer,
        headers: *mut Header,
        headers_size: usize,
        body: Buffer,
        timeout_milliseconds: u64,
    ) -> u32;
}

impl Stream {
    /// Start a callout or a stream with `start`, an ABI function taking the filter, an out pointer
    /// for the id, the cluster name, the header array and its length, and the body: the id, or the
    /// ABI's init result code when it did not start.
    pub(super) fn start_request(
        &self,
        cluster: &str,
        headers: &[(&str, &str)],
        body: &[u8],
        start: impl FnOnce(*mut c_void, *mut u64, Buffer, *mut Header, usize, Buffer) -> u32,
    ) -> Result<u64, u32> {
        let mut hs = Header::array(headers);
        let mut id = 0u64;
        // The header array, its buffers, the cluster name and the body outlive the call (Envoy copies
        // them into its request); `id` is a valid out pointer.
        match start(self.0, &mut id, Buffer::of(cluster.as_bytes()), hs.as_mut_ptr(), hs.len(), Buffer::of(body)) {
            0 => Ok(id),
            r => Err(r),
        }
    }

    /// Start an HTTP callout to `cluster`; its id, or the ABI's init result code when it cannot start.
    /// The answer arrives in `on_http_filter_http_callout_done` with that id.
    pub fn http_callout(
        &self,
        cluster: &str,
        headers: &[(&str, &str)],
        body: &[u8],
        timeout_ms: u64,
    ) -> Result<u64, u32> {
        // SAFETY: the pointers and buffers are `start_request`'s, valid for the call.
        self.start_request(cluster, headers, body, |filter, id, cluster, hs, n, body| unsafe {
            envoy_dynamic_module_callback_http_filter_http_callout(filter, id, cluster, hs, n, body, timeout_ms)
        })
    }
}

/// The answer to an HTTP callout (the approval service's): its `:status` and body, copied out of
/// Envoy's buffers (`None` status: the callout failed, was reset or its answer was too large).
pub struct CalloutAnswer {
    /// `envoy_dynamic_module_type_http_callout_result`: 0 Success, 1 Reset, 2 ExceedResponseBufferLimit.
    pub result: u32,
    pub status: Option<Vec<u8>>,
    pub body: Vec<u8>,
    pub body_size: usize,
}

impl CalloutAnswer {
    /// Read from the arguments of `on_http_filter_http_callout_done`, keeping at most `max_body` bytes.
    pub(super) fn read(
        result: u32,
        headers: *const Header,
        headers_size: usize,
        chunks: *const Buffer,
        chunks_size: usize,
        max_body: usize,
    ) -> Self {
        let mut answer = CalloutAnswer { result, status: None, body: Vec::new(), body_size: 0 };
        if result != 0 {
            return answer;
        }
        answer.status = header_value(headers, headers_size, b":status").map(<[u8]>::to_vec);
        if !chunks.is_null() {
            // SAFETY: Envoy passes `chunks_size` body slices, valid until the hook returns.
            let cs = unsafe { std::slice::from_raw_parts(chunks, chunks_size) };
            answer.body_size = cs.iter().map(|c| c.len).sum();
            if answer.body_size <= max_body {
                for c in cs {
                    answer.body.extend_from_slice(c.as_slice());
                }
            }
        }
        answer
    }
}

/// The name of a result code of `envoy_dynamic_module_callback_http_filter_http_callout` when the
/// callout did not start (`envoy_dynamic_module_type_http_callout_init_result` of Envoy 1.40's
/// ABI), for log lines.
pub fn callout_init_result(code: u32) -> &'static str {
    match code {
        1 => "MissingRequiredHeaders",
        2 => "ClusterNotFound",
        3 => "DuplicateCalloutId",
        4 => "CannotCreateRequest",
        _ => "unknown callout result",
    }
}
