//! The response side: the bound `Mcp-Session-Id` handed out, and `tools/list` results filtered
//! (`crate::toolslist`) when the policy hides tools; a response that cannot be filtered is refused (502).

use log::warn;
use proxy_wasm::hostcalls;
use proxy_wasm::types::{Action, BufferType, MapType};

use super::{Filter, Inspect, ListMode};
use crate::gate;
use crate::http;
use crate::refusal::Refusal;
use crate::toolslist;

impl Filter {
    #[inline]
    pub(super) fn response_headers(&mut self, end_of_stream: bool) -> Action {
        if let Some(policy) = self.policy.clone().filter(|p| p.gateway.session_keys.is_some()) {
            let name = "mcp-session-id";
            if let Ok(Some(upstream)) = hostcalls::get_map_value_bytes(MapType::HttpResponseHeaders, name) {
                let bound = gate::session_id_out(&policy, self.session_grant.as_ref(), &upstream);
                let value = bound.as_ref().map(String::as_bytes);
                if hostcalls::set_map_value_bytes(MapType::HttpResponseHeaders, name, value).is_err() {
                    // Never hand out an unbound session id.
                    let _ = hostcalls::reset_http_response();
                    return Action::Pause;
                }
            }
        }
        if self.inspect == Inspect::Nothing || end_of_stream {
            return Action::Continue;
        }
        let header = |name: &str| hostcalls::get_map_value_bytes(MapType::HttpResponseHeaders, name).ok().flatten();
        let content_type = header("content-type").unwrap_or_default();
        let mode = if http::is_media_type(&content_type, "text/event-stream") {
            ListMode::Sse
        } else if self.inspect != Inspect::ListReply {
            // A JSON reply to another request answers that request only: not a tool list.
            return Action::Continue;
        } else if http::is_media_type(&content_type, "application/json") {
            ListMode::Json
        } else if header(":status").as_deref() == Some(&b"202"[..]) {
            // The 2024-11-05 HTTP+SSE transport only acknowledges a POST (202, no JSON-RPC body);
            // the reply comes on the SSE stream, which is filtered there.
            return Action::Continue;
        } else {
            return self.bad_gateway("the tools/list response has an unexpected content type");
        };
        if let Some(enc) = header("content-encoding") {
            if !http::is_identity_encoding(&enc) {
                return self.bad_gateway("the response is content-encoded and its tool list cannot be filtered");
            }
        }
        if !http::charset_is_utf8(&content_type) {
            // Clients decode by the declared charset; the filter reads UTF-8. They must agree.
            return self.bad_gateway("the response declares a charset other than utf-8");
        }
        let Some(policy) = self.policy.clone() else { return self.unconfigured() };
        let too_long = header("content-length")
            .and_then(|v| std::str::from_utf8(&v).ok().and_then(|t| t.trim().parse::<usize>().ok()))
            .is_some_and(|len| len > policy.gateway.max_response_bytes);
        if mode == ListMode::Json && too_long {
            return self.bad_gateway("the tools/list response exceeds gateway.max_response_bytes");
        }
        if mode == ListMode::Sse {
            self.sse = Some(toolslist::SseStream::new(policy.gateway.max_response_bytes));
        }
        self.list_mode = Some(mode);
        // The body will change length. Headers must continue here: in Envoy 1.40 a wasm filter that
        // pauses response headers never sees the body. So a body that later turns out unfilterable
        // is replaced by a JSON-RPC error under the status already sent (see `fail_list`).
        let _ = hostcalls::set_map_value_bytes(MapType::HttpResponseHeaders, "content-length", None);
        Action::Continue
    }

    #[inline]
    pub(super) fn response_body(&mut self, body_size: usize, end_of_stream: bool) -> Action {
        if self.list_failed {
            // The error already went out: drop the rest of the unfiltered stream.
            let _ = hostcalls::set_buffer(BufferType::HttpResponseBody, 0, body_size, b"");
            return Action::Continue;
        }
        let Some(mode) = self.list_mode else { return Action::Continue };
        let Some(policy) = self.policy.clone() else { return self.unconfigured() };
        let hidden = |name: &str| policy.is_unlisted(name);
        if mode == ListMode::Sse {
            // Streamed: complete events are filtered and passed on at once; a partial event waits.
            let chunk = match hostcalls::get_buffer(BufferType::HttpResponseBody, 0, body_size) {
                Ok(b) => b.unwrap_or_default(),
                Err(s) => {
                    return self.fail_list(mode, body_size, end_of_stream, &format!("cannot read the response: {s:?}"))
                }
            };
            let Some(stream) = self.sse.as_mut() else { return Action::Continue };
            return match stream.push(&chunk, end_of_stream, &self.list_ids, &hidden) {
                Ok((out, removed)) => {
                    if out != chunk {
                        if let Err(s) = hostcalls::set_buffer(BufferType::HttpResponseBody, 0, body_size, &out) {
                            return self.fail_list(mode, body_size, end_of_stream, &format!("cannot rewrite: {s:?}"));
                        }
                    }
                    if removed > 0 {
                        self.metrics.tools_removed(removed);
                    }
                    Action::Continue
                }
                Err(e) => self.fail_list(mode, body_size, end_of_stream, &e.to_string()),
            };
        }
        if body_size > policy.gateway.max_response_bytes {
            return self.fail_list(
                mode,
                body_size,
                end_of_stream,
                "the tools/list response exceeds gateway.max_response_bytes",
            );
        }
        if !end_of_stream {
            return Action::Pause;
        }
        let body = match hostcalls::get_buffer(BufferType::HttpResponseBody, 0, body_size) {
            Ok(b) => b.unwrap_or_default(),
            Err(s) => return self.bad_gateway(&format!("cannot read the response body: {s:?}")),
        };
        match toolslist::filter_json(&body, &self.list_ids, &hidden) {
            Ok((new_body, removed)) => {
                self.list_mode = None;
                if removed > 0 {
                    if let Err(s) = hostcalls::set_buffer(BufferType::HttpResponseBody, 0, body_size, &new_body) {
                        return self.fail_list(
                            mode,
                            body_size,
                            true,
                            &format!("cannot rewrite the response body: {s:?}"),
                        );
                    }
                    self.metrics.tools_removed(removed);
                }
                Action::Continue
            }
            Err(e) => self.fail_list(mode, body_size, true, &e.to_string()),
        }
    }

    /// A `tools/list` body that cannot be filtered after its headers went out: replace it with a
    /// JSON-RPC error (framed as one SSE event in SSE mode) and drop whatever else the server sends.
    fn fail_list(&mut self, mode: ListMode, body_size: usize, end_of_stream: bool, why: &str) -> Action {
        let text = self.list_error(why).body;
        let body = match mode {
            ListMode::Json => text,
            ListMode::Sse => format!("event: message\ndata: {text}\n\n"),
        };
        if hostcalls::set_buffer(BufferType::HttpResponseBody, 0, body_size, body.as_bytes()).is_err() {
            let _ = hostcalls::reset_http_response();
        }
        self.list_mode = None;
        self.list_failed = !end_of_stream;
        Action::Continue
    }

    /// A `tools/list` response that cannot be filtered, found from its headers: 502, never the
    /// unfiltered list.
    fn bad_gateway(&mut self, why: &str) -> Action {
        let reply = self.list_error(why);
        self.list_mode = None;
        self.list_ids.clear();
        self.send(reply)
    }

    /// Log and count a response whose tool list cannot be filtered; the local reply (502, −31006
    /// `bad_upstream_response`) that replaces it, with the tools/list request's id where there is one.
    fn list_error(&self, why: &str) -> crate::reply::Reply {
        warn!("[ctx {}] tools/list response refused: {why}", self.id);
        let refusal = Refusal::BadUpstreamResponse { why: why.to_owned() };
        self.metrics.record_bad_response(&refusal);
        let id = self.list_ids.first().map_or_else(crate::mcp::Id::null, crate::mcp::Id::of);
        refusal.reply(&id)
    }
}
