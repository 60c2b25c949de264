//! The proxy-wasm adapter: the only module that talks to Envoy.
//!
//! Envoy calls (proxy-wasm ABI 0.2.1, Envoy `envoy.filters.http.wasm`):
//! - root context: `on_vm_start` (version banner), `on_configure` (load the policy from the plugin
//!   configuration; `false` makes Envoy refuse the config);
//! - HTTP context per request: headers → (POST) body until `end_of_stream`, or trailers → decide.
//!
//! Host calls are made through `proxy_wasm::hostcalls`, which return `Result`, never through the
//! `Context` convenience methods that `unwrap()` (e.g. `get_shared_data`). A panic aborts the VM
//! (`panic = "abort"`), is logged at critical level by our hook, and Envoy's `failure_policy`
//! (FAIL_CLOSED or FAIL_RELOAD in the shipped configs) refuses traffic instead of forwarding it.

use std::rc::Rc;
use std::time::{Duration, UNIX_EPOCH};

use log::{error, info, warn};
use proxy_wasm::hostcalls;
use proxy_wasm::traits::{Context, HttpContext, RootContext};
use proxy_wasm::types::{Action, BufferType, ContextType, LogLevel, MapType, Status};

mod metrics;
mod rls;
use metrics::Metrics;

use crate::approval::{self, Answer};
use crate::config;
use crate::gate::{self, DecisionKind, HeadOutcome, Outcome, PendingApproval, RequestHead};
use crate::held;
use crate::http;
use crate::json::Json;
use crate::policy::{ApprovalService, Policy};
use crate::ratelimit::{self, GrantId, Limiter, SharedStore, StoreError};
use crate::reply::{code, Reply, RpcError};
use crate::toolslist;

proxy_wasm::main! {{
    // Host calls such as get_log_level are refused during _initialize; on_vm_start refines this.
    proxy_wasm::set_log_level(LogLevel::Info);
    // Replace the SDK's hook (which unwraps the log call) with one that cannot panic itself.
    std::panic::set_hook(Box::new(|info| {
        let _ = hostcalls::log(LogLevel::Critical, &format!("mcp-policy-filter panicked: {info}; failing closed"));
    }));
    proxy_wasm::set_root_context(|id| Box::new(Root::new(id)));
}}

/// proxy-wasm shared data as a [`SharedStore`].
struct HostStore;

impl SharedStore for HostStore {
    fn get(&self, key: &str) -> Result<Option<(Vec<u8>, u32)>, StoreError> {
        match hostcalls::get_shared_data(key) {
            Ok((Some(v), Some(cas))) => Ok(Some((v, cas))),
            Ok((None, Some(cas))) => Ok(Some((Vec::new(), cas))),
            Ok((_, None)) => Ok(None),
            Err(s) => Err(StoreError::Host(format!("{s:?}"))),
        }
    }

    fn set(&self, key: &str, value: &[u8], cas: u32) -> Result<(), StoreError> {
        match hostcalls::set_shared_data(key, Some(value), (cas != 0).then_some(cas)) {
            Ok(()) => Ok(()),
            Err(Status::CasMismatch) => Err(StoreError::CasMismatch),
            Err(s) => Err(StoreError::Host(format!("{s:?}"))),
        }
    }
}

fn now_ms() -> u64 {
    hostcalls::get_current_time()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

struct Root {
    id: u32,
    policy: Option<Rc<Policy>>,
    metrics: Rc<Metrics>,
}

impl Root {
    fn new(id: u32) -> Self {
        Root { id, policy: None, metrics: Rc::new(Metrics::none()) }
    }
}

impl Context for Root {}

impl RootContext for Root {
    fn on_vm_start(&mut self, _vm_configuration_size: usize) -> bool {
        // Follow Envoy's wasm log level so that disabled levels cost nothing to format.
        if let Ok(level) = hostcalls::get_log_level() {
            proxy_wasm::set_log_level(level);
        }
        info!("[root {}] mcp-policy-filter {} starting", self.id, crate::VERSION);
        true
    }

    fn on_configure(&mut self, _plugin_configuration_size: usize) -> bool {
        let bytes = match hostcalls::get_buffer(BufferType::PluginConfiguration, 0, usize::MAX) {
            Ok(Some(b)) => b,
            Ok(None) => {
                error!("[root {}] invalid policy at .: the plugin configuration is empty", self.id);
                return false;
            }
            Err(s) => {
                error!("[root {}] cannot read the plugin configuration: {s:?}", self.id);
                return false;
            }
        };
        // The VM's environment (Envoy vm_config.environment_variables), for keys named by variable.
        match config::load_with_env(&bytes, &|name| std::env::var(name).ok()) {
            Ok(policy) => {
                if let Err(e) = ratelimit::init_lock(&HostStore) {
                    error!("[root {}] shared data unavailable: {e:?}", self.id);
                    return false;
                }
                info!(
                    "[root {}] policy loaded: default={:?}, {} tool rules, {} limits, max_body_bytes={}",
                    self.id,
                    policy.default,
                    policy.listed_tools().count(),
                    policy.limits.len(),
                    policy.gateway.max_body_bytes
                );
                self.metrics = Rc::new(Metrics::define(&policy));
                self.policy = Some(Rc::new(policy));
                true
            }
            Err(e) => {
                // Envoy follows this with its own `[critical] Plugin configured to fail closed failed to
                // load` lines: say first what they mean for traffic.
                error!(
                    "[root {}] policy not loaded: {e}. Envoy refuses this configuration: on a reload the \
                     previous policy keeps serving, at startup Envoy exits; its next lines (\"Plugin ... \
                     failed to load\") are about this refusal",
                    self.id
                );
                false
            }
        }
    }

    fn create_http_context(&self, context_id: u32) -> Option<Box<dyn HttpContext>> {
        Some(Box::new(Filter {
            id: context_id,
            policy: self.policy.clone(),
            metrics: Rc::clone(&self.metrics),
            head: None,
            decided: false,
            inspect: Inspect::Nothing,
            list_ids: Vec::new(),
            list_mode: None,
            sse: None,
            list_failed: false,
            request_id: None,
            approval: None,
            session_grant: None,
            held: None,
            rls: None,
        }))
    }

    fn get_type(&self) -> Option<ContextType> {
        Some(ContextType::HttpContext)
    }
}

struct Filter {
    id: u32,
    policy: Option<Rc<Policy>>,
    metrics: Rc<Metrics>,
    /// Set while a POST body is being buffered.
    head: Option<RequestHead>,
    decided: bool,
    /// Ids of the forwarded `tools/list` requests whose response must be filtered.
    list_ids: Vec<Json>,
    /// Which responses may carry a tool list that must be filtered.
    inspect: Inspect,
    /// The SSE filter of a streamed response.
    sse: Option<toolslist::SseStream>,
    /// How the response is being filtered, once its headers said so.
    list_mode: Option<ListMode>,
    /// The response could not be filtered and was replaced by an error; drop the rest.
    list_failed: bool,
    /// Envoy's `x-request-id`, for the audit log.
    request_id: Option<String>,
    /// The call held while the approval service is asked, with the callout's token.
    approval: Option<(u32, PendingApproval)>,
    /// The grant a new `Mcp-Session-Id` from the server is bound to (`gateway.session_key`).
    session_grant: Option<crate::ratelimit::GrantId>,
    /// The grant whose held-callout count (`crate::held`) this stream's callout took, and the
    /// count's lease in ms; given back when the callout answers or the stream ends.
    held: Option<(GrantId, u64)>,
    /// The request held while the rate limit service is asked, with the callout's token.
    rls: Option<(u32, crate::rls::Pending)>,
}

/// Largest approval-service answer read, in bytes; a longer one is a bad answer.
const MAX_APPROVAL_ANSWER_BYTES: usize = 64 * 1024;

/// Which responses are inspected for tool lists (only when the policy removes tools from lists).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Inspect {
    Nothing,
    /// The reply to a `tools/list` request: JSON or SSE; anything else is refused.
    ListReply,
    /// Any other forwarded request (including GET streams): SSE replies only, since a tool list
    /// can arrive on any stream (resumed streams, the GET stream).
    AnyStream,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ListMode {
    Json,
    Sse,
}

impl Context for Filter {
    fn on_grpc_call_response(&mut self, token_id: u32, status_code: u32, response_size: usize) {
        self.on_rls_response(token_id, status_code, response_size);
    }

    fn on_http_call_response(&mut self, token_id: u32, _num_headers: usize, body_size: usize, _num_trailers: usize) {
        let Some((token, pending)) = self.approval.take() else { return };
        if token != token_id {
            self.approval = Some((token, pending));
            return;
        }
        self.release_held();
        let Some(policy) = self.policy.clone() else {
            self.unconfigured();
            return;
        };
        // Envoy reports a timeout as a synthetic 504 and an unreachable service as 503.
        let status = hostcalls::get_map_value_bytes(MapType::HttpCallResponseHeaders, ":status").ok().flatten();
        let answer = if body_size > MAX_APPROVAL_ANSWER_BYTES {
            Answer::Unavailable(format!("the approval service's answer exceeds {MAX_APPROVAL_ANSWER_BYTES} bytes"))
        } else {
            let body = hostcalls::get_buffer(BufferType::HttpCallResponseBody, 0, body_size).ok().flatten();
            approval::read_answer(status.as_deref(), &body.unwrap_or_default())
        };
        if let Answer::Unavailable(why) = &answer {
            warn!("[ctx {}] approval service unusable for tool '{}': {why}", self.id, gate::log_safe(&pending.tool));
        }
        let outcome = gate::on_approval_answer(&policy, pending, answer, &HostStore, now_ms());
        if self.finish(outcome) == Action::Continue {
            if let Err(s) = hostcalls::resume_http_request() {
                warn!("[ctx {}] cannot resume the approved request ({s:?})", self.id);
            }
        }
    }
}

impl Filter {
    /// The `wait_seconds` of a callout: in hold mode, the service's wait when the grant holds fewer
    /// than `max_held_per_grant` callouts (the slot is taken), else 0 (asked without waiting, so
    /// the call gets `approval_required` or its decision at once).
    fn hold_slot(&mut self, svc: &ApprovalService, pending: &PendingApproval) -> u64 {
        let wait = svc.wait_seconds();
        if wait == 0 {
            return 0;
        }
        let lease = svc.timeout_ms.saturating_add(5_000);
        match held::reserve(&HostStore, &pending.grant_id, svc.max_held_per_grant, now_ms(), lease) {
            held::Reserve::Held => {
                self.held = Some((pending.grant_id, lease));
                wait
            }
            r => {
                info!(
                    "[ctx {}] approval of tool '{}' asked without waiting: grant {} ({r:?}, max_held_per_grant {})",
                    self.id,
                    gate::log_safe(&pending.tool),
                    pending.grant_label,
                    svc.max_held_per_grant
                );
                0
            }
        }
    }

    /// Gives back the held-callout slot this stream took, if any.
    fn release_held(&mut self) {
        if let Some((grant, lease)) = self.held.take() {
            if !held::release(&HostStore, &grant, now_ms(), lease) {
                warn!(
                    "[ctx {}] could not give back a held approval slot (shared data); it heals after {lease} ms",
                    self.id
                );
            }
        }
    }

    /// Hold the request and ask the approval service (`dispatch_http_call` to `gateway.approval`'s
    /// cluster); [`Context::on_http_call_response`] finishes it. A callout that cannot start refuses
    /// the call (`approval_unavailable`).
    fn ask_approval(&mut self, pending: PendingApproval) -> Action {
        let Some(policy) = self.policy.clone() else { return self.unconfigured() };
        let Some(svc) = policy.gateway.approval.as_ref() else {
            // config::load refuses require_approval without gateway.approval; never forward anyway.
            let answer = Answer::Unavailable("no approval service is configured".into());
            return self.finish(gate::on_approval_answer(&policy, pending, answer, &HostStore, now_ms()));
        };
        let wait = self.hold_slot(svc, &pending);
        let body = pending.check_body(self.request_id.as_deref().unwrap_or(""), wait);
        let length = body.len().to_string();
        let mut headers: Vec<(&str, &str)> = vec![
            (":method", "POST"),
            (":path", &svc.path),
            (":authority", &svc.authority),
            ("content-type", "application/json"),
            ("content-length", &length),
        ];
        let rid = approval::request_id_token(self.request_id.as_deref().unwrap_or(""));
        if !rid.is_empty() {
            headers.push(("x-request-id", rid));
        }
        let timeout = Duration::from_millis(svc.timeout_ms);
        match hostcalls::dispatch_http_call(&svc.cluster, headers, Some(body.as_bytes()), vec![], timeout) {
            Ok(token) => {
                self.decided = true;
                self.head = None;
                self.approval = Some((token, pending));
                Action::Pause
            }
            Err(s) => {
                self.release_held();
                let answer = Answer::Unavailable(format!("cannot call cluster '{}' ({s:?})", svc.cluster));
                warn!("[ctx {}] approval callout failed to start: cluster '{}' ({s:?})", self.id, svc.cluster);
                self.finish(gate::on_approval_answer(&policy, pending, answer, &HostStore, now_ms()))
            }
        }
    }

    /// Act on an outcome: record it, then forward or answer locally (or, for a call that needs
    /// approval, hold it and ask).
    fn finish(&mut self, mut outcome: Outcome) -> Action {
        if let Some(pending) = outcome.approval.take() {
            return self.ask_approval(*pending);
        }
        if let Some(pending) = outcome.rls.take() {
            return self.ask_rls(*pending);
        }
        self.decided = true;
        self.head = None;
        let d = &outcome.decision;
        self.metrics.record(d);
        if matches!(d.kind, DecisionKind::Allowed | DecisionKind::RateLimited | DecisionKind::Approved) {
            self.metrics.set_tracked_grants(ratelimit::tracked_grants(&HostStore));
        }
        // Filter state for the access log: %FILTER_STATE(wasm.mcp_decision:PLAIN)% and friends.
        let _ = hostcalls::set_property(vec!["mcp_decision"], Some(d.label().as_bytes()));
        if let Some(t) = &d.tool {
            let _ = hostcalls::set_property(vec!["mcp_tool"], Some(gate::log_safe(t).as_bytes()));
        }
        if let Some(g) = &d.grant {
            let _ = hostcalls::set_property(vec!["mcp_grant"], Some(g.as_bytes()));
        }
        if let Some(r) = &d.rule {
            let _ = hostcalls::set_property(vec!["mcp_rule"], Some(gate::log_safe(r).as_bytes()));
        }
        if let Some(k) = d.error_kind {
            let _ = hostcalls::set_property(vec!["mcp_error"], Some(k.as_bytes()));
        }
        if log::log_enabled!(log::Level::Info) {
            // The audit line: one JSON object per decision (schema in the README).
            let ts = hostcalls::get_current_time()
                .map(|t| humantime::format_rfc3339_millis(t).to_string())
                .unwrap_or_default();
            info!("[ctx {}] audit {}", self.id, d.audit_json(&ts, self.request_id.as_deref()));
        }
        match outcome.reply {
            None => {
                // Responses are inspected only when the policy removes tools from tools/list.
                if self.policy.as_ref().is_some_and(|p| p.filters_tools_list()) {
                    self.list_ids = outcome
                        .tools_list_ids
                        .iter()
                        .filter_map(|id| crate::json::parse(id.raw().as_bytes()).ok())
                        .collect();
                    self.inspect =
                        if outcome.tools_list_ids.is_empty() { Inspect::AnyStream } else { Inspect::ListReply };
                }
                Action::Continue
            }
            Some(reply) => self.send(reply),
        }
    }

    /// A `tools/list` body that cannot be filtered after its headers went out: replace it with a
    /// JSON-RPC error (framed as one SSE event in SSE mode) and drop whatever else the server sends.
    fn fail_list(&mut self, mode: ListMode, body_size: usize, end_of_stream: bool, why: &str) -> Action {
        let text = self.list_error(why);
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
        let body = self.list_error(why);
        self.list_mode = None;
        self.list_ids.clear();
        self.send(Reply { status: 502, headers: vec![], body })
    }

    /// Log and count a response whose tool list cannot be filtered; the JSON-RPC error (−31006)
    /// that replaces it, with the tools/list request's id where there is one.
    fn list_error(&self, why: &str) -> String {
        warn!("[ctx {}] tools/list response refused: {why}", self.id);
        self.metrics.record_bad_response();
        let err =
            RpcError::new(code::BAD_UPSTREAM_RESPONSE, "bad_upstream_response", format!("Bad gateway: {why}"), why);
        let id = self.list_ids.first().map_or_else(crate::mcp::Id::null, crate::mcp::Id::of);
        err.to_json(&id)
    }

    fn send(&self, reply: Reply) -> Action {
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
    fn unconfigured(&mut self) -> Action {
        let err = RpcError::new(code::INVALID_REQUEST, "unavailable", "policy not loaded", "policy not loaded");
        self.decided = true;
        self.send(Reply { status: 503, headers: vec![], body: err.to_json(&crate::mcp::Id::null()) })
    }

    fn decide_body(&mut self, body_size: usize) -> Action {
        let Some(policy) = self.policy.clone() else {
            return self.unconfigured();
        };
        let Some(head) = self.head.take() else {
            return Action::Continue;
        };
        let body = match hostcalls::get_buffer(BufferType::HttpRequestBody, 0, body_size) {
            Ok(b) => b.unwrap_or_default(),
            Err(s) => {
                warn!("[ctx {}] cannot read the request body ({s:?}); refusing", self.id);
                return self.finish(gate::body_too_large(&policy));
            }
        };
        let outcome = gate::on_body(&policy, &head, &body, &HostStore, now_ms());
        self.finish(outcome)
    }
}

impl HttpContext for Filter {
    fn on_http_request_headers(&mut self, _num_headers: usize, end_of_stream: bool) -> Action {
        let Some(policy) = self.policy.clone() else {
            return self.unconfigured();
        };
        if policy.filters_tools_list() {
            // A compressed tools/list response cannot be filtered: ask the server for identity.
            // (Header changes are only possible here, before the body says what the request is.)
            if let Err(s) = hostcalls::set_map_value_bytes(MapType::HttpRequestHeaders, "accept-encoding", None) {
                warn!("[ctx {}] cannot remove accept-encoding: {s:?}", self.id);
            }
        }
        let headers = match hostcalls::get_map_bytes(MapType::HttpRequestHeaders) {
            Ok(h) => h,
            Err(s) => {
                warn!("[ctx {}] cannot read request headers ({s:?}); refusing", self.id);
                return self.unconfigured();
            }
        };
        #[cfg(feature = "test-panic")]
        if headers.iter().any(|(k, _)| k == "x-mcp-policy-test-panic") {
            #[allow(clippy::panic)]
            {
                panic!("forced by x-mcp-policy-test-panic (test-panic build)");
            }
        }
        self.request_id = headers
            .iter()
            .find(|(k, _)| k == "x-request-id")
            .and_then(|(_, v)| std::str::from_utf8(v).ok())
            .map(str::to_owned);
        let head = RequestHead::from_headers(&policy, headers.iter().map(|(k, v)| (k.as_str(), v.as_slice())));
        match gate::check_session(&policy, &head) {
            gate::SessionCheck::Unbound => {}
            gate::SessionCheck::NoSession { grant } => self.session_grant = grant,
            gate::SessionCheck::Rewrite { grant, upstream } => {
                // The server sees its own id; the client only ever sees the bound one.
                if let Err(s) =
                    hostcalls::set_map_value_bytes(MapType::HttpRequestHeaders, "mcp-session-id", Some(&upstream))
                {
                    warn!("[ctx {}] cannot rewrite mcp-session-id ({s:?}); refusing", self.id);
                    return self.unconfigured();
                }
                self.session_grant = Some(grant);
            }
            gate::SessionCheck::Refuse(outcome) => return self.finish(*outcome),
        }
        match gate::on_headers(&policy, &head) {
            HeadOutcome::Done(outcome) => {
                if outcome.reply.is_none() && !end_of_stream {
                    // GET/DELETE carry no body in Streamable HTTP; one that does is not judged, so refuse it.
                    return self.finish(gate::unexpected_body());
                }
                self.finish(*outcome)
            }
            HeadOutcome::NeedBody if end_of_stream => {
                let outcome = gate::on_body(&policy, &head, b"", &HostStore, now_ms());
                self.finish(outcome)
            }
            HeadOutcome::NeedBody => {
                self.head = Some(head);
                Action::Continue
            }
        }
    }

    fn on_http_request_body(&mut self, body_size: usize, end_of_stream: bool) -> Action {
        if self.decided || self.head.is_none() {
            return Action::Continue;
        }
        let Some(policy) = self.policy.clone() else {
            return self.unconfigured();
        };
        if body_size > policy.gateway.max_body_bytes {
            return self.finish(gate::body_too_large(&policy));
        }
        if !end_of_stream {
            // Buffer until the end: never decide on a prefix.
            return Action::Pause;
        }
        self.decide_body(body_size)
    }

    fn on_http_response_headers(&mut self, _num_headers: usize, end_of_stream: bool) -> Action {
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

    fn on_http_response_body(&mut self, body_size: usize, end_of_stream: bool) -> Action {
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

    fn on_log(&mut self) {
        // The stream ended while its approval was being asked (client gone): the call never goes
        // upstream, so its reserved quota goes back.
        if let Some((_, pending)) = self.approval.take() {
            self.release_held();
            if let (Some(policy), Some(adm)) = (self.policy.as_ref(), pending.admission.as_ref()) {
                let max_tracked_grants = policy.gateway.max_tracked_grants;
                Limiter { store: &HostStore, now_ms: now_ms(), max_tracked_grants }.give_back(adm);
            }
            info!(
                "[ctx {}] request ended while waiting for approval of tool '{}'",
                self.id,
                gate::log_safe(&pending.tool)
            );
        }
    }

    fn on_http_request_trailers(&mut self, _num_trailers: usize) -> Action {
        // HTTP/2 bodies that end with trailers never see end_of_stream in the body callback.
        if self.decided || self.head.is_none() {
            return Action::Continue;
        }
        self.decide_body(usize::MAX)
    }
}
