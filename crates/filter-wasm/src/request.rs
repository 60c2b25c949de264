//! The request side: headers, then (POST) the body until `end_of_stream` or trailers, judged by
//! `mcp_policy_core::pipeline`; acting on its outcome (forward, local reply, or hold for a callout).

use log::{info, warn};
use proxy_wasm::hostcalls;
use proxy_wasm::types::{Action, BufferType, MapType};

use super::{now_ms, Filter, HostStore, RequestState};
use mcp_policy_core::outcome::refusal::{Refusal, BODY_UNWRITABLE, HEADERS_UNREADABLE, POLICY_NOT_LOADED};
use mcp_policy_core::pipeline::rewrite::BodyRewrite;
use mcp_policy_core::pipeline::{self, HeadOutcome, Outcome, RequestHead};
use mcp_policy_core::response::ResponseFilter;
use mcp_policy_core::terms::AuditMode;
use mcp_policy_core::wire::reply::Reply;

impl Filter {
    /// Act on an outcome: record it, then forward or answer locally (or, for a call that needs
    /// approval, hold it and ask).
    pub(super) fn finish(&mut self, mut outcome: Outcome) -> Action {
        if let Some(rewrite) = outcome.rewrite.take() {
            self.rewrite = Some(rewrite);
        }
        self.session_url_elicitation |= outcome.url_elicitation;
        if let Some(grant) = outcome.grant_id {
            self.mark_grant = Some(grant);
        }
        // Taken first: a held call is finished later, when the callout answers, at its own time.
        let decided_at_ms = self.decided_at_ms.take();
        if let Some(pending) = outcome.approval.take() {
            return self.ask_approval(*pending);
        }
        if let Some(pending) = outcome.rls.take() {
            return self.ask_rls(*pending);
        }
        self.request = RequestState::Decided;
        // An approved offer's retry goes upstream rewritten; the body is set before the decision is
        // recorded, so a failure is recorded as what it is (503 `unavailable`), never as forwarded.
        if outcome.reply.is_none() {
            if let Some(rewrite) = self.rewrite.take() {
                if !self.apply(&rewrite) {
                    return self.unavailable(BODY_UNWRITABLE);
                }
                self.metrics.offer(mcp_policy_core::approval::offer::Event::Forwarded);
            }
        }
        if let Some(a) = &self.attached {
            a.stamp(&mut outcome.decision);
        }
        let d = &outcome.decision;
        self.metrics.record(d);
        if let Some(event) = outcome.offer {
            self.metrics.offer(event);
        }
        self.metrics.add_tracked_grants(super::take_registered_grants());
        // Filter state for the access log: %FILTER_STATE(wasm.mcp_decision:PLAIN)% and friends
        // (unless `gateway.filter_state` is false).
        if self.policy.as_ref().is_none_or(|p| p.gateway.filter_state) {
            set_filter_state(d);
        }
        // The audit record: one JSON object per decision (schema in the README), where `gateway.audit` says.
        let audit = self.policy.as_ref().map_or(AuditMode::Log, |p| p.gateway.audit);
        let record = |d: &mcp_policy_core::outcome::decision::Decision| {
            let ts = mcp_policy_core::outcome::audit::timestamp(decided_at_ms.unwrap_or_else(now_ms));
            d.audit_json(&ts, self.request_id.as_deref())
        };
        match audit {
            AuditMode::Log if log::log_enabled!(log::Level::Info) => info!("[ctx {}] audit {}", self.id, record(d)),
            AuditMode::AccessLog => {
                let _ = hostcalls::set_property(vec!["mcp_audit"], Some(record(d).as_bytes()));
            }
            AuditMode::Log | AuditMode::Off => {}
        }
        if let Some(p) = &self.policy {
            outcome.shape(p.gateway.refusal_shape);
        }
        match outcome.reply {
            None => {
                if let Some(policy) = self.policy.as_ref() {
                    let ids =
                        pipeline::stream_ids(policy, self.session_grant.as_ref(), self.session_upstream.as_deref());
                    self.response = ResponseFilter::forwarded(policy, &outcome.tools_list_ids)
                        .judging(policy, &outcome.decision)
                        .sealing(policy, ids);
                    self.response.set_event_stream(outcome.event_stream);
                }
                Action::Continue
            }
            Some(reply) => self.send(reply),
        }
    }

    /// Replace the buffered request body (`set_buffer`; the rewrite keeps its length, so
    /// `content-length` stays right: request headers cannot change once they continued).
    fn apply(&self, rewrite: &BodyRewrite) -> bool {
        if let Err(s) = hostcalls::set_buffer(BufferType::HttpRequestBody, 0, rewrite.replaced_bytes, &rewrite.body) {
            warn!("[ctx {}] cannot rewrite the request body ({s:?}); refusing", self.id);
            return false;
        }
        true
    }

    pub(super) fn send(&self, reply: Reply) -> Action {
        let mut headers: Vec<(&str, &str)> = vec![("content-type", "application/json")];
        headers.extend(reply.headers.iter().map(|(k, v)| (*k, v.as_str())));
        if let Err(s) = hostcalls::send_http_response(u32::from(reply.status), headers, Some(reply.body.as_bytes())) {
            // Cannot answer: reset rather than forward.
            warn!("[ctx {}] local reply failed ({s:?}); resetting the request", self.id);
            let _ = hostcalls::reset_http_request();
        }
        Action::Pause
    }

    /// No policy (cannot happen once Envoy accepted the config): refuse everything.
    pub(super) fn unconfigured(&mut self) -> Action {
        self.unavailable(POLICY_NOT_LOADED)
    }

    /// The filter cannot judge this request (`reason`, a `data.reason` of crates/core/src/outcome/refusal.rs): 503
    /// `unavailable`.
    fn unavailable(&mut self, reason: &'static str) -> Action {
        self.request = RequestState::Decided;
        self.send(Refusal::Unavailable { reason }.reply(&mcp_policy_core::wire::mcp::Id::null()))
    }

    fn decide_body(&mut self, body_size: usize) -> Action {
        let Some(policy) = self.policy.clone() else {
            return self.unconfigured();
        };
        // Callers check `wants_body` first.
        let RequestState::Body(mut head) = std::mem::replace(&mut self.request, RequestState::Headers) else {
            return Action::Continue;
        };
        if policy.gateway.approval.is_some() {
            // The cluster the route chose, read when the body is judged (after any header change of
            // ours re-ran route selection): an approval is bound to it (`approval::Upstream`).
            head.cluster = match hostcalls::get_property(vec!["xds", "cluster_name"]) {
                Ok(Some(name)) => String::from_utf8(name).ok(),
                _ => None,
            };
        }
        let body = match hostcalls::get_buffer(BufferType::HttpRequestBody, 0, body_size) {
            Ok(b) => b.unwrap_or_default(),
            Err(s) => {
                warn!("[ctx {}] cannot read the request body ({s:?}); refusing", self.id);
                return self.finish(pipeline::body_unreadable());
            }
        };
        let now = *self.decided_at_ms.insert(now_ms());
        let outcome = pipeline::on_body(&policy, &head, &body, &HostStore, now);
        self.finish(outcome)
    }

    #[inline]
    pub(super) fn request_headers(&mut self, end_of_stream: bool) -> Action {
        let Some(policy) = self.policy.clone() else {
            return self.unconfigured();
        };
        if policy.reads_responses() {
            // A compressed response cannot be read: ask the server for identity.
            // (Header changes are only possible here, before the body says what the request is.)
            if let Err(s) = hostcalls::set_map_value_bytes(MapType::HttpRequestHeaders, "accept-encoding", None) {
                warn!("[ctx {}] cannot remove accept-encoding: {s:?}", self.id);
            }
        }
        let headers = match hostcalls::get_map_bytes(MapType::HttpRequestHeaders) {
            Ok(h) => h,
            Err(s) => {
                warn!("[ctx {}] cannot read request headers ({s:?}); refusing", self.id);
                return self.unavailable(HEADERS_UNREADABLE);
            }
        };
        #[cfg(feature = "test-panic")]
        if headers.iter().any(|(k, _)| k == "x-mcp-policy-test-panic") {
            #[allow(clippy::panic)]
            {
                panic!("forced by x-mcp-policy-test-panic (test-panic build)");
            }
        }
        let mut head = RequestHead::from_headers(&policy, headers.iter().map(|(k, v)| (k.as_str(), v.as_slice())));
        self.request_id = head.request_id.take();
        let plan = pipeline::request_headers(self.set.as_deref(), policy, &head, end_of_stream);
        self.policy = Some(std::rc::Rc::clone(&plan.policy));
        self.attached = plan.attached;
        if let Some(bound) = plan.binding {
            // The server sees its own ids; the client only ever sees the bound ones.
            for (name, value, reason) in bound.rewrites() {
                if let Err(s) = hostcalls::set_map_value_bytes(MapType::HttpRequestHeaders, name, Some(value)) {
                    warn!("[ctx {}] cannot rewrite {name} ({s:?}); refusing", self.id);
                    return self.unavailable(reason);
                }
            }
            self.session_url_elicitation = bound.url_elicitation;
            self.session_grant = bound.grant;
            self.session_upstream = bound.session;
        }
        let policy = plan.policy;
        match plan.next {
            HeadOutcome::Done(outcome) => self.finish(*outcome),
            HeadOutcome::NeedBody if end_of_stream => {
                let now = *self.decided_at_ms.insert(now_ms());
                let outcome = pipeline::on_body(&policy, &head, b"", &HostStore, now);
                self.finish(outcome)
            }
            HeadOutcome::NeedBody => {
                self.request = RequestState::Body(head);
                Action::Continue
            }
        }
    }

    #[inline]
    pub(super) fn request_body(&mut self, body_size: usize, end_of_stream: bool) -> Action {
        if !self.request.wants_body() {
            return Action::Continue;
        }
        let Some(policy) = self.policy.clone() else {
            return self.unconfigured();
        };
        if body_size > policy.gateway.max_body_bytes {
            return self.finish(pipeline::body_too_large(&policy));
        }
        if !end_of_stream {
            // Buffer until the end: never decide on a prefix.
            return Action::Pause;
        }
        self.decide_body(body_size)
    }

    #[inline]
    pub(super) fn request_trailers(&mut self) -> Action {
        // HTTP/2 bodies that end with trailers never see end_of_stream in the body callback.
        if !self.request.wants_body() {
            return Action::Continue;
        }
        self.decide_body(usize::MAX)
    }
}

/// The per-decision filter-state values, one `set_property` each (the SDK's path `wasm.<name>` in
/// Envoy's filter state, readable as `%FILTER_STATE(wasm.<name>:PLAIN)%`).
fn set_filter_state(d: &mcp_policy_core::outcome::decision::Decision) {
    let _ = hostcalls::set_property(vec!["mcp_decision"], Some(d.label().as_bytes()));
    if let Some(t) = &d.tool {
        let _ =
            hostcalls::set_property(vec!["mcp_tool"], Some(mcp_policy_core::outcome::audit::log_safe(t).as_bytes()));
    }
    if let Some(g) = &d.grant {
        let _ = hostcalls::set_property(vec!["mcp_grant"], Some(g.as_bytes()));
    }
    if let Some(r) = &d.rule {
        let _ =
            hostcalls::set_property(vec!["mcp_rule"], Some(mcp_policy_core::outcome::audit::log_safe(r).as_bytes()));
    }
    if let Some(k) = d.error_kind() {
        let _ = hostcalls::set_property(vec!["mcp_error"], Some(k.as_bytes()));
    }
    if let Some(p) = &d.provenance {
        if let Some(name) = &p.policy {
            let _ = hostcalls::set_property(vec!["mcp_policy"], Some(name.as_bytes()));
        }
        let safe = mcp_policy_core::outcome::audit::log_safe;
        if let Some(s) = &p.subject {
            let _ = hostcalls::set_property(vec!["mcp_subject"], Some(safe(s).as_bytes()));
        }
        if let Some(c) = &p.client_id {
            let _ = hostcalls::set_property(vec!["mcp_client_id"], Some(safe(c).as_bytes()));
        }
        if !p.act.is_empty() {
            let _ = hostcalls::set_property(vec!["mcp_act"], Some(safe(&p.act.join(" ")).as_bytes()));
        }
    }
}
