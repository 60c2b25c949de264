//! The response side: the bound `Mcp-Session-Id` handed out, and the response plan and chunk
//! filter of `mcp_policy_core::response` acted on (`tools/list` results filtered when the policy hides tools,
//! SSE ids sealed with `gateway.session_key`; a response that cannot be filtered is refused, 502).

use log::{info, warn};
use mcp_policy_core::terms::AuditMode;
use proxy_wasm::hostcalls;
use proxy_wasm::types::{Action, BufferType, MapType};

use super::Filter;
use mcp_policy_core::outcome::refusal::Refusal;
use mcp_policy_core::pipeline::{self, MarkRecord};
use mcp_policy_core::response::{BadUpstream, HostOp, Plan, Step};

impl Filter {
    #[inline]
    pub(super) fn response_headers(&mut self, end_of_stream: bool) -> Action {
        if let Some(policy) = self.policy.clone().filter(|p| p.gateway.session_keys.is_some()) {
            let name = "mcp-session-id";
            if let Ok(Some(upstream)) = hostcalls::get_map_value_bytes(MapType::HttpResponseHeaders, name) {
                self.response.set_session(&upstream);
                let bound = pipeline::session_id_out(
                    &policy,
                    self.session_grant.as_ref(),
                    &upstream,
                    self.session_url_elicitation,
                );
                let value = bound.as_ref().map(String::as_bytes);
                if hostcalls::set_map_value_bytes(MapType::HttpResponseHeaders, name, value).is_err() {
                    // Never hand out an unbound session id.
                    let _ = hostcalls::reset_http_response();
                    return Action::Pause;
                }
            }
        }
        let header = |name: &str| hostcalls::get_map_value_bytes(MapType::HttpResponseHeaders, name).ok().flatten();
        match self.response.on_headers(end_of_stream, header) {
            Plan::PassThrough => Action::Continue,
            Plan::Unanswered => self.unanswered(true),
            Plan::FilterJson | Plan::FilterSse => {
                // The body will change length. Headers must continue here: in Envoy 1.40 a wasm filter
                // that pauses response headers never sees the body. So a body that later turns out
                // unfilterable is replaced by a JSON-RPC error under the status already sent.
                let _ = hostcalls::set_map_value_bytes(MapType::HttpResponseHeaders, "content-length", None);
                Action::Continue
            }
            Plan::Refuse(bad) => self.refuse_response(bad),
        }
    }

    #[inline]
    pub(super) fn response_body(&mut self, body_size: usize, end_of_stream: bool) -> Action {
        if let Some((_, held, _)) = self.mark_call {
            if body_size > held {
                if self.response.dropping() {
                    // The rest of a refused body, whose error waits for its marks: dropped, as it
                    // would be after the error (the error is kept; failing that, reset).
                    if let Ok(Some(error)) = hostcalls::get_buffer(BufferType::HttpResponseBody, 0, held) {
                        if hostcalls::set_buffer(BufferType::HttpResponseBody, 0, body_size, &error).is_ok() {
                            return Action::Pause;
                        }
                    }
                }
                // More of the body came while its marks are recorded: it would pass unread. A result
                // that marks is the last message of its stream in practice; anything after it is refused.
                return self.mark_not_recorded("more response bytes came while they were recorded");
            }
            return Action::Pause;
        }
        if self.mark_failed {
            return Action::Pause;
        }
        let (action, held) = self.response_body_read(body_size, end_of_stream);
        if self.marks_out.is_empty() || action != Action::Continue {
            return action;
        }
        // Held until the service has recorded the marks (`rls::marks`); `held` is what the body now
        // holds (the step may have rewritten it).
        self.send_marks(held)
    }

    /// The body's step acted on: the action and the body's length afterwards.
    fn response_body_read(&mut self, body_size: usize, end_of_stream: bool) -> (Action, usize) {
        let step = match self.response.on_body(body_size, end_of_stream) {
            Step::Read => match hostcalls::get_buffer(BufferType::HttpResponseBody, 0, body_size) {
                Ok(chunk) => {
                    let Some(policy) = self.policy.clone() else { return (self.unconfigured(), 0) };
                    let chunk = chunk.unwrap_or_default();
                    let step =
                        self.response.on_chunk_judged(&chunk, end_of_stream, &|name| policy.is_unlisted(name), &policy);
                    if self.events_recorded_or_reset() {
                        return (Action::Pause, body_size);
                    }
                    step
                }
                Err(s) => Step::Fail(self.response.host_failed(HostOp::Read, &s, end_of_stream)),
            },
            step => step,
        };
        match step {
            Step::Pass | Step::Read => (Action::Continue, body_size),
            Step::Hold => (Action::Pause, body_size),
            Step::Write { bytes, removed } => {
                if let Err(s) = hostcalls::set_buffer(BufferType::HttpResponseBody, 0, body_size, &bytes) {
                    let bad = self.response.host_failed(HostOp::Write, &s, end_of_stream);
                    return self.replace_body(body_size, bad);
                }
                if removed > 0 {
                    self.metrics.tools_removed(removed);
                }
                (Action::Continue, bytes.len())
            }
            Step::Drop => {
                let _ = hostcalls::set_buffer(BufferType::HttpResponseBody, 0, body_size, b"");
                (Action::Continue, 0)
            }
            Step::Fail(bad) => self.replace_body(body_size, bad),
        }
    }

    /// The reply does not carry the call's answer: a judged call marks its grant
    /// (`ResponseFilter::on_end`). `held`: at the reply's headers (`Plan::Unanswered`), which wait
    /// until the marks are recorded, as a body would; else the stream ended (reset or not), and
    /// the marks go to shared data.
    pub(super) fn unanswered(&mut self, held: bool) -> Action {
        if let Some(policy) = &self.policy {
            self.response.on_end(policy, held);
        }
        if !held {
            // The stream is over: nothing is left to hold or reset (a reset from Envoy's log hook
            // crashes Envoy 1.40).
            self.result_events();
            return Action::Continue;
        }
        if self.events_recorded_or_reset() {
            return Action::Pause;
        }
        if self.marks_out.is_empty() {
            return Action::Continue;
        }
        // Held at its headers: no body has come yet, and what comes is passed unread (none counts
        // as more bytes while the marks are recorded).
        self.send_marks(usize::MAX)
    }

    /// What happened to tool results recorded (`result_events`); a mark that could not be recorded
    /// resets the response, never released unmarked, so that no later call slips past: returns
    /// true then.
    fn events_recorded_or_reset(&mut self) -> bool {
        self.result_events();
        if self.mark_failed {
            let _ = hostcalls::reset_http_response();
        }
        self.mark_failed
    }

    /// Audit and count what happened to tool results (never their text).
    fn result_events(&mut self) {
        let audit = self.policy.as_ref().map_or(AuditMode::Log, |p| p.gateway.audit);
        for e in self.response.take_events() {
            // A pin mismatch (later calls refused) or a verified pin, for every worker of this Envoy.
            if let Some(key) = self.policy.as_ref().and_then(|p| e.pin_marker(p)) {
                if let Err(s) = mcp_policy_core::limits::SharedStore::set(&super::HostStore, &key, b"1", 0) {
                    warn!("[ctx {}] cannot record {} in shared data: {s:?}", self.id, e.kind);
                }
            }
            if e.marker_only() {
                continue;
            }
            if let Some(mark) = e.mark.as_deref() {
                self.record_mark(&e.tool, mark);
            } else {
                self.metrics.result(&e);
            }
            if audit == AuditMode::Off {
                continue;
            }
            let record = e.audit_json(&mcp_policy_core::outcome::audit::timestamp(super::now_ms()));
            match audit {
                AuditMode::AccessLog => {
                    let _ = hostcalls::set_property(vec!["mcp_result_audit"], Some(record.as_bytes()));
                }
                _ if log::log_enabled!(log::Level::Info) => info!("[ctx {}] audit {record}", self.id),
                _ => {}
            }
        }
    }

    /// Record `mark` on the request's grant before the result that set it goes on
    /// (`pipeline::record_mark`); one that cannot be recorded resets the response.
    fn record_mark(&mut self, tool: &str, mark: &str) {
        let Some(policy) = self.policy.clone() else { return };
        let grant = self.mark_grant.as_ref();
        let record =
            pipeline::record_mark(&policy, &super::HostStore, super::now_ms(), grant, mark, &mut self.marks_out);
        self.mark_failed |= record.fails();
        match record {
            MarkRecord::Set => self.metrics.mark_set(),
            MarkRecord::Queued => {}
            MarkRecord::NoGrant => {
                warn!("[ctx {}] a result of tool '{tool}' sets mark '{mark}' on a stream without a grant", self.id);
            }
            MarkRecord::Failed(u) => {
                warn!("[ctx {}] cannot record mark '{mark}' of tool '{tool}' ({u:?})", self.id);
            }
        }
    }

    /// A body that cannot be filtered after its headers went out: the error replaces it.
    fn replace_body(&mut self, body_size: usize, bad: BadUpstream) -> (Action, usize) {
        if self.refused(&bad) {
            return (Action::Pause, body_size);
        }
        if hostcalls::set_buffer(BufferType::HttpResponseBody, 0, body_size, bad.body.as_bytes()).is_err() {
            let _ = hostcalls::reset_http_response();
        }
        (Action::Continue, bad.body.len())
    }

    /// A response that cannot be filtered, found before its body: 502, never the unfiltered list.
    fn refuse_response(&mut self, bad: BadUpstream) -> Action {
        if self.refused(&bad) {
            return Action::Pause;
        }
        if self.marks_out.is_empty() {
            return self.send(bad.reply());
        }
        // With the rate limit service, the error waits until the marks are recorded, as one that
        // replaces a body does (no body counts as more bytes meanwhile).
        self.error_after_marks = Some(bad.reply());
        self.send_marks(usize::MAX)
    }

    /// A response that cannot be filtered, refused (`bad` replaces it): the events of its results
    /// so far recorded, logged and counted (as invalid). Marks they set are recorded all the same
    /// (with the rate limit service, before the error goes on): the client may still fetch the
    /// result on another stream. One that cannot be recorded resets the response: returns true.
    fn refused(&mut self, bad: &BadUpstream) -> bool {
        if let Some(policy) = &self.policy {
            self.response.on_end(policy, true);
        }
        warn!("[ctx {}] response refused: {}", self.id, bad.why);
        self.metrics.record_bad_response(&Refusal::BadUpstreamResponse { why: bad.why.clone() });
        self.events_recorded_or_reset()
    }
}
