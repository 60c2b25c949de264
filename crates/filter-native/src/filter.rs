//! One HTTP stream, request side: headers, then (POST) the body until `end_of_stream` or trailers,
//! judged by `mcp_policy_core::pipeline`, and its outcome acted on exactly as the wasm build does
//! (crates/filter-wasm/src/request.rs): the same replies, filter-state keys, audit record and stats.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use log::warn;

use mcp_policy_core::identity::grant::GrantId;
use mcp_policy_core::outcome::decision::Decision;
use mcp_policy_core::outcome::refusal::{Refusal, BODY_UNREADABLE, BODY_UNWRITABLE, HEADERS_UNREADABLE};
use mcp_policy_core::pipeline::rewrite::BodyRewrite;
use mcp_policy_core::pipeline::{self, Attached, HeadOutcome, Outcome, PendingApproval, RequestHead};
use mcp_policy_core::policy::Policy;
use mcp_policy_core::response::ResponseFilter;
use mcp_policy_core::terms::AuditMode;
use mcp_policy_core::wire::reply::Reply;

use crate::config::Config;
use crate::ffi::{Body, HeaderMap, Level, Stream};
use crate::store::process_store;

/// What a hook tells Envoy: go on, stop (answered, or waiting), or stop and buffer the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Continue,
    Stop,
    Buffer,
}

/// How far a request got. It lives inside the stream's boxed `Filter`, so the head is kept inline
/// (boxing it would cost every POST one more allocation).
#[allow(clippy::large_enum_variant)]
pub(crate) enum RequestState {
    /// The headers are not judged yet.
    Headers,
    /// A POST body is being buffered; the head is judged with it.
    Body(RequestHead),
    /// Held while the approval service is asked, with the callout's id.
    Approval(u64, Box<PendingApproval>),
    /// Held while the rate limit service is asked, with the callout's id.
    Rls(u64, Box<mcp_policy_core::pipeline::rls::Pending>),
    /// Decided: forwarded or answered locally.
    Decided,
}

/// Calls into Envoy that may run this stream's hooks again at once: made by the hook after the
/// filter is left (`ffi::hooks`).
#[derive(Default)]
pub struct Effects {
    /// A local reply to send.
    pub reply: Option<Reply>,
    /// Continue decoding a request held for a callout.
    pub resume: bool,
    /// Continue encoding a response held while its marks were recorded.
    pub resume_response: bool,
}

impl Effects {
    /// Carry them out on `stream`.
    pub fn apply(self, stream: Stream) {
        if let Some(reply) = self.reply {
            let mut headers: Vec<(&str, &str)> = vec![("content-type", "application/json")];
            headers.extend(reply.headers.iter().map(|(k, v)| (*k, v.as_str())));
            stream.send_response(u32::from(reply.status), &headers, reply.body.as_bytes());
        } else if self.resume {
            stream.continue_decoding();
        }
        if self.resume_response {
            stream.continue_encoding();
        }
    }
}

/// Stream ids for log lines (`[ctx N]`), unique in the process.
static NEXT_CTX: AtomicU64 = AtomicU64::new(1);

pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)).unwrap_or(0)
}

pub struct Filter {
    pub(crate) id: u64,
    pub(crate) config: Arc<Config>,
    /// The request's policy: the configuration's, or (with a set) the one chosen for the caller.
    pub(crate) policy: Arc<Policy>,
    /// The request's policy and caller, once chosen from the set: recorded in every decision.
    attached: Option<Attached>,
    /// Envoy's side of the stream, refreshed by every hook.
    pub(crate) stream: Stream,
    /// A hook of this stream panicked: the stream was reset and is ignored from then on.
    pub(crate) poisoned: bool,
    pub(crate) request: RequestState,
    pub(crate) response: ResponseFilter,
    pub(crate) request_id: Option<String>,
    pub(crate) session_grant: Option<GrantId>,
    session_upstream: Option<Vec<u8>>,
    pub(crate) session_url_elicitation: bool,
    decided_at_ms: Option<u64>,
    /// The grant whose held-callout count this stream's callout took, and the count's lease in ms.
    pub(crate) held: Option<(GrantId, u64)>,
    /// The body to forward instead of the received one, once the request goes upstream.
    rewrite: Option<BodyRewrite>,
    /// A JSON response body held whole until its end (`Step::Hold`), taken out of Envoy's buffers.
    pub(crate) held_response: Vec<u8>,
    /// The grant of the forwarded request: the marks its results set go on it (`flows`).
    pub(crate) mark_grant: Option<GrantId>,
    /// A mark could not be recorded: the response is reset, never released unmarked.
    pub(crate) mark_failed: bool,
    /// With `gateway.rate_limit_service`: the marks the response's results set, to send to the service.
    pub(crate) marks_out: Vec<String>,
    /// The response held while the service records marks: the callout's id, how many marks were
    /// sent, and whether it waits at its headers (`Plan::Unanswered`: its body, passed unread, is
    /// buffered meanwhile) rather than with its body.
    pub(crate) mark_call: Option<(u64, usize, bool)>,
    /// The error that replaces a reply refused at its headers, sent once the service has recorded
    /// the marks the refusal set.
    pub(crate) error_after_marks: Option<Reply>,
    /// The request came with a `content-length` header.
    has_length: bool,
    /// The length of a held body that came without `content-length`: set as that header when the
    /// request goes upstream, as Envoy's buffer filter does, so the upstream sees the same request
    /// from either build.
    missing_length: Option<usize>,
    /// Calls into Envoy left for the hook to make after leaving the filter.
    effects: Effects,
}

impl Filter {
    pub fn new(config: Arc<Config>, stream: Stream) -> Self {
        Filter {
            id: NEXT_CTX.fetch_add(1, Ordering::Relaxed),
            policy: Arc::clone(&config.policy),
            attached: None,
            config,
            stream,
            poisoned: false,
            request: RequestState::Headers,
            response: ResponseFilter::pass(),
            request_id: None,
            session_grant: None,
            session_upstream: None,
            session_url_elicitation: false,
            decided_at_ms: None,
            held: None,
            rewrite: None,
            held_response: Vec::new(),
            mark_grant: None,
            mark_failed: false,
            marks_out: Vec::new(),
            mark_call: None,
            error_after_marks: None,
            has_length: false,
            missing_length: None,
            effects: Effects::default(),
        }
    }

    /// Act on an outcome: record it, then forward or answer locally.
    pub(crate) fn finish(&mut self, mut outcome: Outcome) -> Flow {
        if let Some(rewrite) = outcome.rewrite.take() {
            self.rewrite = Some(rewrite);
        }
        self.session_url_elicitation |= outcome.url_elicitation;
        if let Some(grant) = outcome.grant_id {
            self.mark_grant = Some(grant);
        }
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
                self.config.metrics.offer(&self.stream, mcp_policy_core::approval::offer::Event::Forwarded);
            }
        }
        if let Some(a) = &self.attached {
            a.stamp(&mut outcome.decision);
        }
        let config = Arc::clone(&self.config);
        let policy = Arc::clone(&self.policy);
        let d = &outcome.decision;
        config.metrics.record(&self.stream, d);
        if let Some(event) = outcome.offer {
            config.metrics.offer(&self.stream, event);
        }
        config.metrics.add_tracked_grants(&self.stream, process_store().take_registered_grants());
        if policy.gateway.filter_state {
            self.set_filter_state(d);
        }
        let ts = || {
            let at = decided_at_ms.map_or_else(SystemTime::now, |ms| UNIX_EPOCH + Duration::from_millis(ms));
            crate::stamp::audit_ts(at)
        };
        match policy.gateway.audit {
            // `[ctx N] audit {…}` at info, as `info!` would log it, built once in a reused buffer.
            AuditMode::Log => crate::ffi::log_built(Level::Info, |line| {
                let _ = write!(line, "[ctx {}] audit ", self.id);
                d.write_audit_json(line, &ts(), self.request_id.as_deref());
            }),
            AuditMode::AccessLog => {
                let _ = self
                    .stream
                    .set_filter_state("wasm.mcp_audit", d.audit_json(&ts(), self.request_id.as_deref()).as_bytes());
            }
            AuditMode::Off => {}
        }
        outcome.shape(policy.gateway.refusal_shape);
        match outcome.reply {
            None => {
                if let Some(length) = self.missing_length.take().map(|n| n.to_string()) {
                    if !self.stream.set_header(HeaderMap::Request, "content-length", Some(length.as_bytes())) {
                        warn!("[ctx {}] cannot set content-length; the body goes upstream without it", self.id);
                    }
                }
                let policy = &*policy;
                let ids = pipeline::stream_ids(policy, self.session_grant.as_ref(), self.session_upstream.as_deref());
                self.response = ResponseFilter::forwarded(policy, &outcome.tools_list_ids)
                    .judging(policy, &outcome.decision)
                    .sealing(policy, ids);
                self.response.set_event_stream(outcome.event_stream);
                Flow::Continue
            }
            Some(reply) => self.send(reply),
        }
    }

    /// Replace the first `replaced_bytes` bytes of the request body (the rewrite keeps the body's
    /// length, so `content-length` stays right). The body is what Envoy buffered plus, in a body
    /// hook, the chunk at hand; the rewritten body goes where Envoy will forward it from.
    fn apply(&self, rewrite: &BodyRewrite) -> bool {
        let s = &self.stream;
        let Some(buffered) = s.body(Body::BufferedRequest) else { return false };
        let received = if s.received_is_buffered_request() {
            Vec::new()
        } else {
            s.body(Body::ReceivedRequest).unwrap_or_default()
        };
        let mut body = [buffered.as_slice(), received.as_slice()].concat();
        if rewrite.replaced_bytes > body.len() {
            warn!("[ctx {}] cannot rewrite the request body (shorter than the rewrite); refusing", self.id);
            return false;
        }
        body.splice(..rewrite.replaced_bytes, rewrite.body.iter().copied());
        if buffered.is_empty() {
            return s.replace_body(Body::ReceivedRequest, &body);
        }
        (received.is_empty() || s.replace_body(Body::ReceivedRequest, b""))
            && s.replace_body(Body::BufferedRequest, &body)
    }

    /// The per-decision filter-state values, under the wasm build's keys (`wasm.<name>`), so the
    /// same `%FILTER_STATE(wasm.mcp_decision:PLAIN)%` access-log formats work with either build.
    fn set_filter_state(&self, d: &Decision) {
        let s = &self.stream;
        let _ = s.set_filter_state("wasm.mcp_decision", d.label().as_bytes());
        if let Some(t) = &d.tool {
            let _ = s.set_filter_state("wasm.mcp_tool", mcp_policy_core::outcome::audit::log_safe(t).as_bytes());
        }
        if let Some(g) = &d.grant {
            let _ = s.set_filter_state("wasm.mcp_grant", g.as_bytes());
        }
        if let Some(r) = &d.rule {
            let _ = s.set_filter_state("wasm.mcp_rule", mcp_policy_core::outcome::audit::log_safe(r).as_bytes());
        }
        if let Some(k) = d.error_kind() {
            let _ = s.set_filter_state("wasm.mcp_error", k.as_bytes());
        }
        if let Some(p) = &d.provenance {
            if let Some(name) = &p.policy {
                let _ = s.set_filter_state("wasm.mcp_policy", name.as_bytes());
            }
            let safe = mcp_policy_core::outcome::audit::log_safe;
            if let Some(v) = &p.subject {
                let _ = s.set_filter_state("wasm.mcp_subject", safe(v).as_bytes());
            }
            if let Some(c) = &p.client_id {
                let _ = s.set_filter_state("wasm.mcp_client_id", safe(c).as_bytes());
            }
            if !p.act.is_empty() {
                let _ = s.set_filter_state("wasm.mcp_act", safe(&p.act.join(" ")).as_bytes());
            }
        }
    }

    /// Answer locally with `reply`. The reply is sent when the hook has returned from the filter
    /// (`Filter::take_effects`): Envoy runs a local reply through the encoder hooks of this same
    /// stream at once, which must not meet a borrow of the filter still in use.
    pub(crate) fn send(&mut self, reply: Reply) -> Flow {
        self.effects.reply = Some(reply);
        Flow::Stop
    }

    /// Let the held request go on, once the hook has returned from the filter (as `send`).
    pub(crate) fn resume(&mut self) {
        self.effects.resume = true;
    }

    /// Let the held response go on, once the hook has returned from the filter.
    pub(crate) fn resume_response(&mut self) {
        self.effects.resume_response = true;
    }

    /// What the hook must do on Envoy's side after leaving the filter.
    pub(crate) fn take_effects(&mut self) -> Effects {
        std::mem::take(&mut self.effects)
    }

    /// The filter cannot judge this request: 503 `unavailable` with `reason`.
    pub(crate) fn unavailable(&mut self, reason: &'static str) -> Flow {
        self.request = RequestState::Decided;
        self.send(Refusal::Unavailable { reason }.reply(&mcp_policy_core::wire::mcp::Id::null()))
    }

    /// The whole request body: what Envoy buffered, then the chunk at hand (unless that chunk is
    /// the buffered body itself).
    fn request_body_bytes(&self, with_received: bool) -> Option<Vec<u8>> {
        let s = &self.stream;
        let mut body = Vec::with_capacity(s.body_size(Body::BufferedRequest));
        if !s.append_body(Body::BufferedRequest, &mut body) {
            return None;
        }
        if with_received && !s.received_is_buffered_request() && !s.append_body(Body::ReceivedRequest, &mut body) {
            return None;
        }
        Some(body)
    }

    fn decide_body(&mut self, with_received: bool) -> Flow {
        let RequestState::Body(mut head) = std::mem::replace(&mut self.request, RequestState::Headers) else {
            return Flow::Continue;
        };
        if self.policy.gateway.approval.is_some() {
            // The cluster the route chose: an approval is bound to it (`approval::Upstream`).
            head.cluster = self.stream.cluster_name();
        }
        let Some(body) = self.request_body_bytes(with_received) else {
            warn!("[ctx {}] cannot read the request body; refusing", self.id);
            let _ = BODY_UNREADABLE;
            return self.finish(pipeline::body_unreadable());
        };
        if !self.has_length {
            self.missing_length = Some(body.len());
        }
        let now = *self.decided_at_ms.insert(now_ms());
        let policy = Arc::clone(&self.policy);
        let outcome = pipeline::on_body(&policy, &head, &body, process_store(), now);
        self.finish(outcome)
    }

    pub fn request_headers(&mut self, end_of_stream: bool) -> Flow {
        let s = self.stream;
        if self.policy.reads_responses() && !s.set_header(HeaderMap::Request, "accept-encoding", None) {
            warn!("[ctx {}] cannot remove accept-encoding", self.id);
        }
        // The headers are read in place (`ffi::Headers`): every use of them ends here, before any
        // header of the stream is set below.
        let mut head = {
            let Some(headers) = s.headers(HeaderMap::Request) else {
                warn!("[ctx {}] cannot read request headers; refusing", self.id);
                return self.unavailable(HEADERS_UNREADABLE);
            };
            let headers = headers.pairs();
            self.has_length = headers.clone().any(|(k, _)| k == "content-length");
            #[cfg(feature = "test-panic")]
            if headers.clone().any(|(k, _)| k == "x-mcp-policy-test-panic") {
                #[allow(clippy::panic)]
                {
                    panic!("forced by x-mcp-policy-test-panic (test-panic build)");
                }
            }
            RequestHead::from_headers(&self.policy, headers)
        };
        self.request_id = head.request_id.take();
        let plan = pipeline::request_headers(self.config.set.as_ref(), Arc::clone(&self.policy), &head, end_of_stream);
        self.policy = plan.policy;
        self.attached = plan.attached;
        if let Some(bound) = plan.binding {
            for (name, value, reason) in bound.rewrites() {
                if !s.set_header(HeaderMap::Request, name, Some(value)) {
                    warn!("[ctx {}] cannot rewrite {name}; refusing", self.id);
                    return self.unavailable(reason);
                }
            }
            self.session_url_elicitation = bound.url_elicitation;
            self.session_grant = bound.grant;
            self.session_upstream = bound.session;
        }
        match plan.next {
            HeadOutcome::Done(outcome) => self.finish(*outcome),
            HeadOutcome::NeedBody if end_of_stream => {
                let now = *self.decided_at_ms.insert(now_ms());
                let outcome = pipeline::on_body(&self.policy, &head, b"", process_store(), now);
                self.finish(outcome)
            }
            HeadOutcome::NeedBody => {
                self.request = RequestState::Body(head);
                // Hold the headers until the body is judged: nothing reaches the upstream before.
                // The stream's buffer limit is raised to the body limit, so that the filter, not
                // Envoy, answers an oversized body (JSON-RPC 413): no buffer filter is needed.
                s.raise_buffer_limit(self.policy.gateway.max_body_bytes);
                Flow::Stop
            }
        }
    }

    pub fn request_body(&mut self, end_of_stream: bool) -> Flow {
        if !matches!(self.request, RequestState::Body(_)) {
            return Flow::Continue;
        }
        let s = self.stream;
        let mut size = s.body_size(Body::BufferedRequest);
        if !s.received_is_buffered_request() {
            size = size.saturating_add(s.body_size(Body::ReceivedRequest));
        }
        if size > self.policy.gateway.max_body_bytes {
            let policy = Arc::clone(&self.policy);
            return self.finish(pipeline::body_too_large(&policy));
        }
        if !end_of_stream {
            // Buffer until the end: never decide on a prefix.
            return Flow::Buffer;
        }
        self.decide_body(true)
    }

    pub fn request_trailers(&mut self) -> Flow {
        // HTTP/2 bodies that end with trailers never see end_of_stream in the body hook.
        if !matches!(self.request, RequestState::Body(_)) {
            return Flow::Continue;
        }
        self.decide_body(false)
    }
}
