//! One HTTP stream, response side: the bound `Mcp-Session-Id` handed out, and the response plan and
//! chunk filter of `mcp_policy_core::response` acted on, as the wasm build does
//! (crates/filter-wasm/src/response.rs). A JSON body is held whole by the module (taken out of
//! Envoy's buffer chunk by chunk) and written back filtered at its end; SSE chunks are filtered as
//! they come.

use std::sync::Arc;

use std::time::SystemTime;

use log::{info, warn};

use mcp_policy_core::limits::SharedStore;
use mcp_policy_core::outcome::refusal::Refusal;
use mcp_policy_core::pipeline::{self, MarkRecord};
use mcp_policy_core::policy::Policy;
use mcp_policy_core::response::{BadUpstream, HostOp, Plan, Step};
use mcp_policy_core::terms::AuditMode;

use crate::ffi::{Body, HeaderMap};
use crate::filter::{now_ms, Filter, Flow};
use crate::store::process_store;

impl Filter {
    pub fn response_headers(&mut self, end_of_stream: bool) -> Flow {
        let policy = Arc::clone(&self.policy);
        let s = self.stream;
        if policy.gateway.session_keys.is_some() {
            let name = "mcp-session-id";
            if let Some(upstream) = s.header(HeaderMap::Response, name) {
                self.response.set_session(&upstream);
                let bound = pipeline::session_id_out(
                    &policy,
                    self.session_grant.as_ref(),
                    &upstream,
                    self.session_url_elicitation,
                );
                if !s.set_header(HeaderMap::Response, name, bound.as_ref().map(String::as_bytes)) {
                    // Never hand out an unbound session id.
                    s.reset("mcp_policy_session_id_not_bound");
                    return Flow::Stop;
                }
            }
        }
        let header = |name: &str| s.header(HeaderMap::Response, name);
        match self.response.on_headers(end_of_stream, header) {
            Plan::PassThrough => Flow::Continue,
            Plan::Unanswered => self.unanswered(true),
            Plan::FilterJson | Plan::FilterSse => {
                // The body will change length.
                let _ = s.set_header(HeaderMap::Response, "content-length", None);
                Flow::Continue
            }
            Plan::Refuse(bad) => {
                if self.refused(&bad) {
                    return Flow::Stop;
                }
                if self.marks_out.is_empty() {
                    return self.send(bad.reply());
                }
                // With the rate limit service, the error waits until the marks are recorded, as
                // one that replaces a body does (`marks_answered` sends it).
                self.error_after_marks = Some(bad.reply());
                self.send_marks(true)
            }
        }
    }

    pub fn response_body(&mut self, end_of_stream: bool) -> Flow {
        let s = self.stream;
        if let Some((_, _, at_headers)) = self.mark_call {
            if at_headers {
                return Flow::Buffer;
            }
            // Held while its marks are recorded. More of the body would pass unread: a result that
            // marks is the last message of its stream in practice; anything after it is refused.
            let more = s.body_size(Body::ReceivedResponse);
            if more > 0 && !s.received_is_buffered_response() {
                // The rest of a refused body, whose error waits for its marks: dropped, as it would
                // be after the error.
                if self.response.dropping() && s.replace_body(Body::ReceivedResponse, b"") {
                    return Flow::Buffer;
                }
                return self.mark_not_recorded("more response bytes came while they were recorded");
            }
            return Flow::Buffer;
        }
        let flow = self.response_body_step(end_of_stream);
        if flow != Flow::Continue || self.marks_out.is_empty() {
            return flow;
        }
        // Held until the service has recorded the marks (`send_marks`), then released as it stands.
        self.send_marks(false)
    }

    /// The body's step acted on.
    fn response_body_step(&mut self, end_of_stream: bool) -> Flow {
        let s = self.stream;
        let received = s.body_size(Body::ReceivedResponse);
        let size = self.held_response.len().saturating_add(received);
        // Bytes held earlier and read now: if the filter lets them through as they were, they go back.
        let mut held_back: Option<Vec<u8>> = None;
        let step = match self.response.on_body(size, end_of_stream) {
            Step::Hold => {
                // Keep the bytes here, out of Envoy's buffer (whose limit would otherwise end the stream).
                match s.body(Body::ReceivedResponse) {
                    Some(chunk) if s.replace_body(Body::ReceivedResponse, b"") => {
                        self.held_response.extend_from_slice(&chunk);
                        return Flow::Stop;
                    }
                    _ => Step::Fail(self.response.host_failed(HostOp::Read, &"body not readable", end_of_stream)),
                }
            }
            Step::Read => match s.body(Body::ReceivedResponse) {
                Some(chunk) => {
                    let mut bytes = std::mem::take(&mut self.held_response);
                    let had_held = !bytes.is_empty();
                    bytes.extend_from_slice(&chunk);
                    let policy = Arc::clone(&self.policy);
                    let step =
                        self.response.on_chunk_judged(&bytes, end_of_stream, &|name| policy.is_unlisted(name), &policy);
                    if self.events_recorded_or_reset() {
                        return Flow::Stop;
                    }
                    if had_held {
                        held_back = Some(bytes);
                    }
                    step
                }
                None => Step::Fail(self.response.host_failed(HostOp::Read, &"body not readable", end_of_stream)),
            },
            step => step,
        };
        match step {
            Step::Pass | Step::Read => {
                if !self.held_response.is_empty() {
                    let mut bytes = std::mem::take(&mut self.held_response);
                    bytes.extend_from_slice(&s.body(Body::ReceivedResponse).unwrap_or_default());
                    held_back = Some(bytes);
                }
                if let Some(bytes) = held_back {
                    // Bytes held and then let through as they were: they go out whole, in order.
                    if !s.replace_body(Body::ReceivedResponse, &bytes) {
                        s.reset("mcp_policy_body_unwritable");
                        return Flow::Stop;
                    }
                }
                Flow::Continue
            }
            Step::Hold => Flow::Stop,
            Step::Write { bytes, removed } => {
                if !s.replace_body(Body::ReceivedResponse, &bytes) {
                    let bad = self.response.host_failed(HostOp::Write, &"body not writable", end_of_stream);
                    return self.replace_with_error(bad);
                }
                if removed > 0 {
                    self.config.metrics.tools_removed(&s, removed);
                }
                Flow::Continue
            }
            Step::Drop => {
                let _ = s.replace_body(Body::ReceivedResponse, b"");
                Flow::Continue
            }
            Step::Fail(bad) => self.replace_with_error(bad),
        }
    }

    pub fn response_trailers(&mut self) -> Flow {
        if self.mark_call.is_some() {
            // They follow the held body once its marks are recorded.
            return Flow::Stop;
        }
        if self.response.held_json().is_none() {
            return Flow::Continue;
        }
        // A held JSON body that ended in trailers (HTTP/2 allows it): the body hook never saw its
        // end, so it is filtered here, whole, and written ahead of the trailers (Envoy adds it to
        // the stream before them).
        let s = self.stream;
        let bytes = std::mem::take(&mut self.held_response);
        let policy = Arc::clone(&self.policy);
        let step = match self.response.on_body(bytes.len(), true) {
            Step::Read => {
                let step = self.response.on_chunk_judged(&bytes, true, &|name| policy.is_unlisted(name), &policy);
                if self.events_recorded_or_reset() {
                    return Flow::Stop;
                }
                step
            }
            step => step,
        };
        let out = match step {
            Step::Pass | Step::Read => bytes,
            Step::Write { bytes, removed } => {
                if removed > 0 {
                    self.config.metrics.tools_removed(&s, removed);
                }
                bytes
            }
            Step::Drop => Vec::new(),
            Step::Hold => {
                // Not at a body's end; never passed unread.
                s.reset("mcp_policy_body_unwritable");
                return Flow::Stop;
            }
            Step::Fail(bad) => {
                if self.refused(&bad) {
                    return Flow::Stop;
                }
                bad.body.into_bytes()
            }
        };
        if !s.add_body(Body::BufferedResponse, &out) {
            s.reset("mcp_policy_body_unwritable");
            return Flow::Stop;
        }
        if self.marks_out.is_empty() {
            return Flow::Continue;
        }
        // The body waits with its trailers until the service has recorded the marks
        // (`send_marks`), then both go on.
        self.send_marks(false)
    }

    /// The reply does not carry the call's answer: a judged call marks its grant
    /// (`ResponseFilter::on_end`), as the wasm build does. `held`: at the reply's headers
    /// (`Plan::Unanswered`), which wait until the marks are recorded, as a body would; else the
    /// stream ended (reset or not), and the marks go to the process's store.
    pub fn unanswered(&mut self, held: bool) -> Flow {
        self.response.on_end(&self.policy, held);
        if !held {
            // The stream is over: nothing is left to hold or reset.
            self.result_events();
            return Flow::Continue;
        }
        if self.events_recorded_or_reset() {
            return Flow::Stop;
        }
        if self.marks_out.is_empty() {
            return Flow::Continue;
        }
        self.send_marks(true)
    }

    /// A body that cannot be filtered after its headers went out: the error replaces it.
    fn replace_with_error(&mut self, bad: BadUpstream) -> Flow {
        self.held_response.clear();
        if self.refused(&bad) {
            return Flow::Stop;
        }
        if !self.stream.replace_body(Body::ReceivedResponse, bad.body.as_bytes()) {
            self.stream.reset("mcp_policy_body_unwritable");
            return Flow::Stop;
        }
        Flow::Continue
    }

    /// What happened to tool results recorded (`result_events`); a mark that could not be recorded
    /// resets the response, never released unmarked, so that no later call slips past: returns
    /// true then.
    fn events_recorded_or_reset(&mut self) -> bool {
        self.result_events();
        if self.mark_failed {
            self.stream.reset("mcp_policy_mark_not_recorded");
        }
        self.mark_failed
    }

    /// Audit and count what happened to tool results (never their text), as the wasm build: the
    /// same counters, the audit record in the log or in filter state `wasm.mcp_result_audit`, a
    /// mark (`flows`) recorded on the request's grant, and a pin mismatch or a verified pin marked
    /// in the process's store (`ResultEvent::pin_marker`).
    fn result_events(&mut self) {
        let config = Arc::clone(&self.config);
        let policy = Arc::clone(&self.policy);
        let audit = policy.gateway.audit;
        for e in self.response.take_events() {
            if let Some(key) = e.pin_marker(&policy) {
                if let Err(s) = SharedStore::set(process_store(), &key, b"1", 0) {
                    warn!("[ctx {}] cannot record {} in the shared store: {s:?}", self.id, e.kind);
                }
            }
            if e.marker_only() {
                continue;
            }
            if let Some(mark) = e.mark.as_deref() {
                self.record_mark(&policy, &e.tool, mark);
            } else {
                config.metrics.result(&self.stream, &e);
            }
            if audit == AuditMode::Off {
                continue;
            }
            let record = || e.audit_json(&crate::stamp::audit_ts(SystemTime::now()));
            match audit {
                AuditMode::AccessLog => {
                    let _ = self.stream.set_filter_state("wasm.mcp_result_audit", record().as_bytes());
                }
                _ if log::log_enabled!(log::Level::Info) => info!("[ctx {}] audit {}", self.id, record()),
                _ => {}
            }
        }
    }

    /// Record `mark` on the request's grant before the result that set it goes on, in the
    /// process's store, shared and exact across workers (`pipeline::record_mark`); one that cannot
    /// be recorded resets the response.
    fn record_mark(&mut self, policy: &Policy, tool: &str, mark: &str) {
        let grant = self.mark_grant.as_ref();
        let record = pipeline::record_mark(policy, process_store(), now_ms(), grant, mark, &mut self.marks_out);
        self.mark_failed |= record.fails();
        match record {
            MarkRecord::Set => self.config.metrics.mark_set(&self.stream),
            MarkRecord::Queued => {}
            MarkRecord::NoGrant => {
                warn!("[ctx {}] a result of tool '{tool}' sets mark '{mark}' on a stream without a grant", self.id);
            }
            MarkRecord::Failed(u) => {
                warn!("[ctx {}] cannot record mark '{mark}' of tool '{tool}' ({u:?})", self.id);
            }
        }
    }

    /// A response that cannot be filtered, refused (`bad` replaces it): the events of its results
    /// so far recorded, logged and counted (as invalid). Marks they set are recorded all the same
    /// (with the rate limit service, before the error goes on): the client may still fetch the
    /// result on another stream. One that cannot be recorded resets the response: returns true.
    fn refused(&mut self, bad: &BadUpstream) -> bool {
        self.response.on_end(&self.policy, true);
        warn!("[ctx {}] response refused: {}", self.id, bad.why);
        self.config.metrics.record_bad_response(&self.stream, &Refusal::BadUpstreamResponse { why: bad.why.clone() });
        self.events_recorded_or_reset()
    }
}
