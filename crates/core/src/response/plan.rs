//! The response plan, decided from the response headers: pass, filter, or refuse with 502.
//!
//! The header rules for a response that may carry a tool list (each refused with 502):
//! - a reply to `tools/list` that is neither `application/json` nor `text/event-stream` (a `202`
//!   without a body passes: the 2024-11-05 HTTP+SSE transport only acknowledges a POST there, and
//!   the reply comes on the SSE stream, which is filtered);
//! - a `content-encoding` other than `identity` (the request's `accept-encoding` was removed, so a
//!   server that compresses anyway is not understood);
//! - a `charset` other than UTF-8, or one in RFC 2231's form (clients decode by the declared
//!   charset; the filter reads UTF-8);
//! - a JSON reply whose `content-length` exceeds `gateway.max_response_bytes`.
//!
//! Every JSON or SSE reply is read, whatever request it answers: the SDKs hand each response of
//! a JSON reply to the request its id names. Any other reply to a request that is not `tools/list`
//! or a judged `tools/call` passes, unless a client could read it as messages all the same: a
//! content type that names JSON or SSE without being exactly one of them, or a 2xx reply to a GET
//! that accepts events and is not SSE (both refused with 502).
//!
//! A reply read only for the ids it hands out (`gateway.session_key`, no tool list to filter) is
//! never refused: an SSE stream is read unless content-encoded, anything else passes.

use super::{BadUpstream, Framing, ResponseFilter, Scope, State};
use crate::response::toolslist::SseStream;
use crate::wire::http;

/// What the host does with a response, once its headers are in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// Forward it untouched.
    PassThrough,
    /// A JSON `tools/list` reply: hold the body until whole, then filter it. The body changes
    /// length: remove `content-length`.
    FilterJson,
    /// An SSE stream: filter it (tool lists, ids) event by event as it arrives. Remove `content-length`.
    FilterSse,
    /// Answer 502 with this JSON-RPC error instead ([`BadUpstream::reply`]).
    Refuse(BadUpstream),
    /// Forward it untouched, but it does not answer the `tools/call` it replies to (a 202
    /// acknowledgement, the 2024-11-05 HTTP+SSE transport, whose results come on the GET stream;
    /// or no body): first set the call's marks ([`ResponseFilter::on_end`], `held`) and hold the
    /// response until they are recorded.
    Unanswered,
}

impl ResponseFilter {
    /// The plan for the response headers; `header` reads one by its lowercase name (`:status`
    /// included), and is called only for the headers a rule needs. `end_of_stream`: the response
    /// has no body. Call once per response.
    pub fn on_headers(&mut self, end_of_stream: bool, header: impl Fn(&str) -> Option<Vec<u8>>) -> Plan {
        let State::Awaiting(scope) = self.state else { return Plan::PassThrough };
        self.state = State::Pass;
        let unanswered = if scope == Scope::CallReply { Plan::Unanswered } else { Plan::PassThrough };
        if end_of_stream {
            return unanswered;
        }
        let content_type = header("content-type").unwrap_or_default();
        let is_sse = http::is_media_type(&content_type, "text/event-stream");
        if scope == Scope::Ids {
            // Read only for its ids: an encoded stream passes unsealed (its bare ids are refused
            // when presented back), and nothing here is refused.
            if !is_sse || header("content-encoding").is_some_and(|enc| !http::is_identity_encoding(&enc)) {
                return Plan::PassThrough;
            }
            self.framing = Framing::Sse;
            self.state = State::Sse(SseStream::ids_only(self.max_bytes));
            return Plan::FilterSse;
        }
        let reply = matches!(scope, Scope::ListReply | Scope::CallReply);
        let framing = if is_sse {
            Framing::Sse
        } else if http::is_media_type(&content_type, "application/json") {
            // The reply to any request too: the SDKs hand each response in it to the request its
            // id names, so a tool list or a tool result may come as the reply to another request.
            Framing::Json
        } else if !self.event_stream && header(":status").as_deref() == Some(&b"202"[..]) {
            // The 2024-11-05 HTTP+SSE transport only acknowledges a POST (202, no JSON-RPC body);
            // the reply comes on the SSE stream, which is filtered there. A judged call is not
            // known there, so its acknowledgement sets its marks. (Clients read no 202's body to
            // a POST; a GET's they read as events, as any other 2xx.)
            return unanswered;
        } else if reply
            || http::names_a_message_type(&content_type)
            || self.event_stream && header(":status").is_some_and(|s| s.first() == Some(&b'2'))
        {
            // The reply to `tools/list` or a judged `tools/call` is one of these two. Clients read
            // more than these two exactly: the Python SDK a POST's reply whose content type starts
            // with either, the TypeScript SDK (1.x) one that contains either, and a GET's 2xx body
            // as events whatever its content type.
            return self.refuse("the response is neither application/json nor text/event-stream");
        } else {
            return unanswered;
        };
        if header("content-encoding").is_some_and(|enc| !http::is_identity_encoding(&enc)) {
            if self.ids.is_empty() && self.calls.judged.is_some() {
                return self.refuse("the response is content-encoded and its tool result cannot be read");
            }
            return self.refuse("the response is content-encoded and its tool list cannot be filtered");
        }
        if !http::charset_is_utf8(&content_type) {
            // Clients decode by the declared charset; the filter reads UTF-8. They must agree.
            return self.refuse("the response declares a charset other than utf-8");
        }
        self.framing = framing;
        if framing == Framing::Sse {
            self.state = State::Sse(SseStream::new(self.max_bytes));
            return Plan::FilterSse;
        }
        let too_long =
            header("content-length").and_then(|v| http::content_length(&v)).is_some_and(|len| len > self.max_bytes);
        if too_long {
            if let Some((rule, why)) = self.call_oversize() {
                return Plan::Refuse(self.fail_rule(why, Some(&rule), true));
            }
            return self.refuse(self.too_large());
        }
        self.state = State::Json;
        Plan::FilterJson
    }

    /// For the reply to a `tools/call` whose results are judged: the `max_bytes` rule it exceeds
    /// and why (the size limit held is that rule's, or the largest of several).
    pub(super) fn call_oversize(&self) -> Option<(String, String)> {
        let (_, tool) = self.calls.judged.as_ref().filter(|_| self.ids.is_empty())?;
        Some((
            format!("tools.{tool}.result.max_bytes"),
            format!("the tool result is larger than {} bytes", self.max_bytes),
        ))
    }

    /// Why a reply over the limit held with no call of its own is refused: a tool list's is
    /// `gateway.max_response_bytes`, a task's result's the largest `max_bytes` of the result rules.
    pub(super) fn too_large(&self) -> &'static str {
        if !self.ids.is_empty() {
            "the tools/list response exceeds gateway.max_response_bytes"
        } else if self.results {
            "the response exceeds the largest max_bytes of the result rules"
        } else {
            "the response exceeds gateway.max_response_bytes"
        }
    }

    /// Refuse the whole response (a local 502, [`BadUpstream::reply`]).
    fn refuse(&mut self, why: &str) -> Plan {
        Plan::Refuse(self.fail(why.into(), true))
    }
}
