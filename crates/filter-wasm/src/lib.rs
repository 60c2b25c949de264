//! mcp-policy-filter: the proxy-wasm adapter of `mcp-policy-core`, the only crate that talks to
//! Envoy. It implements the core's host seams (`SharedStore` over shared data, the clock, the
//! HTTP callouts) and acts on the core's outcomes; every decision is made in the core.
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

// Natively the crate is empty: the core is tested and benchmarked on its own.
#![cfg(target_arch = "wasm32")]

use std::cell::Cell;
use std::rc::Rc;
use std::time::UNIX_EPOCH;

use proxy_wasm::hostcalls;
use proxy_wasm::traits::{Context, HttpContext};
use proxy_wasm::types::{Action, LogLevel, Status};

mod approval;
mod metrics;
mod request;
mod response;
mod rls;
mod root;
use metrics::Metrics;
use root::Root;

use mcp_policy_core::identity::grant::GrantId;
use mcp_policy_core::limits::{SharedStore, StoreError, GRANTS_KEY};
use mcp_policy_core::pipeline::{PendingApproval, RequestHead};
use mcp_policy_core::policy::Policy;
use mcp_policy_core::response::ResponseFilter;

// `main!` exports `_start` with `#[no_mangle]`, which the `unsafe_code` lint reports; the
// adapter's only exported symbols are proxy-wasm's own.
#[allow(unsafe_code)]
mod entry {
    use super::{hostcalls, LogLevel, Root};

    proxy_wasm::main! {{
        // Host calls such as get_log_level are refused during _initialize; on_vm_start refines this.
        proxy_wasm::set_log_level(LogLevel::Info);
        // Replace the SDK's hook (which unwraps the log call) with one that cannot panic itself.
        std::panic::set_hook(Box::new(|info| {
            let _ = hostcalls::log(LogLevel::Critical, &format!("mcp-policy-filter panicked: {info}; failing closed"));
        }));
        proxy_wasm::set_root_context(|id| Box::new(Root::new(id)));
    }}
}

/// proxy-wasm shared data as a [`SharedStore`].
struct HostStore;

thread_local! {
    /// Grants this VM registered (successful writes of `ratelimit::GRANTS_KEY`, each one more grant
    /// under the creation lock) and not yet added to the `mcp_policy_tracked_grants` gauge. The
    /// gauge is set from shared data when the policy loads, then only incremented: no shared-data
    /// read per call.
    static GRANTS_REGISTERED: Cell<u64> = const { Cell::new(0) };
}

/// Grants registered by this VM since the last call (see `GRANTS_REGISTERED`).
fn take_registered_grants() -> u64 {
    GRANTS_REGISTERED.with(|c| c.replace(0))
}

impl SharedStore for HostStore {
    fn get(&self, key: &str) -> Result<Option<(Vec<u8>, u32)>, StoreError> {
        match hostcalls::get_shared_data(key) {
            Ok((Some(v), Some(cas))) => Ok(Some((v, cas))),
            Ok((None, Some(cas))) => Ok(Some((Vec::new(), cas))),
            Ok((_, None)) => Ok(None),
            Err(s) => Err(host_error(s)),
        }
    }

    fn set(&self, key: &str, value: &[u8], cas: u32) -> Result<(), StoreError> {
        match hostcalls::set_shared_data(key, Some(value), (cas != 0).then_some(cas)) {
            Ok(()) => {
                if key == GRANTS_KEY {
                    GRANTS_REGISTERED.with(|c| c.set(c.get() + 1));
                }
                Ok(())
            }
            Err(Status::CasMismatch) => Err(StoreError::CasMismatch),
            Err(s) => Err(host_error(s)),
        }
    }
}

/// A shared-data call that failed, by its status (one out-of-line copy of the formatting).
#[inline(never)]
fn host_error(s: Status) -> StoreError {
    StoreError::Host(format!("{s:?}"))
}

fn now_ms() -> u64 {
    hostcalls::get_current_time()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

struct Filter {
    id: u32,
    /// The request's policy: the plain one, or (with `set`) the set's base until the request's is chosen.
    policy: Option<Rc<Policy>>,
    /// The policy set to choose the request's policy from; `None` for a plain policy without identity.
    set: Option<Rc<mcp_policy_core::config::PolicySet>>,
    /// The request's policy and caller, once chosen: recorded in every decision.
    attached: Option<mcp_policy_core::pipeline::Attached>,
    metrics: Rc<Metrics>,
    /// How far the request got.
    request: RequestState,
    /// The response side: what the response is inspected for, and how far it got.
    response: ResponseFilter,
    /// Envoy's `x-request-id`, for the audit log.
    request_id: Option<String>,
    /// The grant a new `Mcp-Session-Id` from the server is bound to (`gateway.session_key`).
    session_grant: Option<mcp_policy_core::identity::grant::GrantId>,
    /// The server's own `Mcp-Session-Id` of the request, whose stream's event ids are bound to it.
    session_upstream: Option<Vec<u8>>,
    /// The session's client declared URL elicitation: its id is handed out as `m2.` (`mcp_policy_core::approval::offer`).
    session_url_elicitation: bool,
    /// The grant whose held-callout count (`mcp_policy_core::limits::held`) this stream's callout took, and the
    /// count's lease in ms; given back when the callout answers or the stream ends.
    held: Option<(GrantId, u64)>,
    /// The body to forward instead of the received one, once the request goes upstream (`mcp_policy_core::pipeline::rewrite`).
    rewrite: Option<mcp_policy_core::pipeline::rewrite::BodyRewrite>,
    /// The clock reading (ms since the epoch) the request's decision was made with, reused for the
    /// audit record's `ts`: one clock read per decision.
    decided_at_ms: Option<u64>,
    /// The grant of the forwarded request: the marks its results set go on it (`flows`).
    mark_grant: Option<GrantId>,
    /// A mark could not be recorded: the response is reset, never released unmarked.
    mark_failed: bool,
    /// With `gateway.rate_limit_service`: the marks the response's results set, to send to the service.
    marks_out: Vec<String>,
    /// The response body held while the service records marks: the callout's token, the bytes held
    /// and how many marks were sent.
    mark_call: Option<(u32, usize, usize)>,
    /// The error that replaces a reply refused at its headers, sent once the service has recorded
    /// the marks the refusal set.
    error_after_marks: Option<mcp_policy_core::wire::reply::Reply>,
}

/// How far a request got: its headers, its body, a callout it is held for, or its decision.
enum RequestState {
    /// The headers are not judged yet.
    Headers,
    /// A POST body is being buffered; the head is judged with it.
    Body(RequestHead),
    /// Held while the approval service is asked, with the callout's token.
    Approval(u32, PendingApproval),
    /// Held while the rate limit service is asked, with the callout's token.
    Rls(u32, mcp_policy_core::pipeline::rls::Pending),
    /// Decided: forwarded or answered locally.
    Decided,
}

impl RequestState {
    /// Is a body awaited (the headers asked for it, and nothing was decided yet)?
    fn wants_body(&self) -> bool {
        matches!(self, RequestState::Body(_))
    }
}

impl Context for Filter {
    fn on_grpc_call_response(&mut self, token_id: u32, status_code: u32, response_size: usize) {
        if self.mark_call.is_some_and(|(t, _, _)| t == token_id) {
            self.on_marks_response(status_code, response_size);
            return;
        }
        self.on_rls_response(token_id, status_code, response_size);
    }

    fn on_http_call_response(&mut self, token_id: u32, _num_headers: usize, body_size: usize, _num_trailers: usize) {
        self.on_approval_response(token_id, body_size);
    }
}

impl HttpContext for Filter {
    fn on_http_request_headers(&mut self, _num_headers: usize, end_of_stream: bool) -> Action {
        self.request_headers(end_of_stream)
    }

    fn on_http_request_body(&mut self, body_size: usize, end_of_stream: bool) -> Action {
        self.request_body(body_size, end_of_stream)
    }

    fn on_http_request_trailers(&mut self, _num_trailers: usize) -> Action {
        self.request_trailers()
    }

    fn on_http_response_headers(&mut self, _num_headers: usize, end_of_stream: bool) -> Action {
        self.response_headers(end_of_stream)
    }

    fn on_http_response_body(&mut self, body_size: usize, end_of_stream: bool) -> Action {
        self.response_body(body_size, end_of_stream)
    }

    /// A JSON body held to its end that ended in trailers (HTTP/2 allows it): the body callback
    /// never saw `end_of_stream`, so the held body is read here, whole, as at its end. Without this
    /// Envoy would release it unread.
    fn on_http_response_trailers(&mut self, _num_trailers: usize) -> Action {
        if self.mark_call.is_some() || self.mark_failed {
            return Action::Pause;
        }
        match self.response.held_json() {
            Some(size) => self.response_body(size, true),
            None => Action::Continue,
        }
    }

    fn on_log(&mut self) {
        self.abandon_approval();
        self.unanswered(false);
    }
}
