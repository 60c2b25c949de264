//! The rate limit service callout (`gateway.rate_limit_service`): the gRPC call
//! `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`, made as an HTTP/2 request through
//! the ABI's HTTP callout (`mcp_policy_core::rls::grpc`: the request Envoy's gRPC client would send,
//! the answer read as it reads it), on the configured cluster, which must be HTTP/2. The same
//! requests, decisions and failure modes as the wasm build (crates/filter-wasm/src/rls.rs): the
//! request is held until the answer, or Envoy's timeout (a local reply read as gRPC status 14);
//! a result that sets a mark is held until the service has recorded it, else the response is reset.

use std::sync::Arc;

use log::warn;

use mcp_policy_core::pipeline;
use mcp_policy_core::pipeline::rls::{Ask, Pending};
use mcp_policy_core::policy::RateLimitService;
use mcp_policy_core::rls::grpc::{self, Received, MAX_ANSWER_BYTES};
use mcp_policy_core::rls::{self, Answer};

use crate::ffi::CalloutAnswer;
use crate::filter::{now_ms, Filter, Flow, RequestState};

/// The message framed and sent to `svc`; the callout's id, or why it could not start.
fn call(filter: &Filter, svc: &RateLimitService, message: &[u8]) -> Result<u64, String> {
    let headers = grpc::request_headers(svc);
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    filter
        .stream
        .http_callout(&svc.cluster, &headers, &grpc::frame(message), svc.timeout_ms)
        .map_err(|code| format!("{} ({})", pipeline::cannot_call(&svc.cluster), crate::ffi::callout_init_result(code)))
}

/// The service's answer, read from the callout's (a failure is logged).
fn read(filter: &Filter, answer: &CalloutAnswer) -> Answer {
    // The framed message: 5 bytes of gRPC frame header, then at most MAX_ANSWER_BYTES.
    let received = if answer.body_size > MAX_ANSWER_BYTES + 5 || answer.too_large() {
        Received::TooLarge
    } else if answer.status.is_none() {
        Received::Reset
    } else {
        Received::Answer {
            status: answer.status.as_deref(),
            grpc_status: answer.grpc_status.as_deref(),
            body: &answer.body,
        }
    };
    let answer = grpc::read_http_answer(received);
    if let Answer::Unavailable(why) | Answer::Unusable(why) = &answer {
        warn!("[ctx {}] {why}", filter.id);
    }
    answer
}

impl Filter {
    /// Hold the request and ask the service. A callout that cannot start (e.g. an unknown cluster)
    /// is an unavailable service: the failure mode decides at once.
    pub(crate) fn ask_rls(&mut self, pending: Pending) -> Flow {
        let policy = Arc::clone(&self.policy);
        let (message, pending) = match pipeline::rls::ask(&policy, pending, now_ms()) {
            Ask::Send { message, pending } => (message, pending),
            Ask::Done { outcome, why } => {
                warn!("[ctx {}] {why}", self.id);
                return self.finish(*outcome);
            }
        };
        let Some(svc) = policy.gateway.rate_limit_service.as_ref() else {
            let answer = Answer::Unusable("no rate limit service is configured".into());
            return self.finish(pipeline::rls::on_answer(&policy, *pending, answer, now_ms()));
        };
        match call(self, svc, &message) {
            Ok(id) => {
                self.request = RequestState::Rls(id, pending);
                Flow::Buffer
            }
            Err(why) => {
                warn!("[ctx {}] rate limit callout failed to start: {why}", self.id);
                let answer = Answer::Unavailable(pipeline::cannot_call(&svc.cluster));
                self.finish(pipeline::rls::on_answer(&policy, *pending, answer, now_ms()))
            }
        }
    }

    /// The answer to [`Filter::ask_rls`]: forward (resume) or answer locally.
    pub(crate) fn on_rls_response(&mut self, callout_id: u64, answer: CalloutAnswer) {
        if !matches!(self.request, RequestState::Rls(id, _) if id == callout_id) {
            return;
        }
        let RequestState::Rls(_, pending) = std::mem::replace(&mut self.request, RequestState::Decided) else {
            return;
        };
        let policy = Arc::clone(&self.policy);
        let answer = read(self, &answer);
        let outcome = pipeline::rls::on_answer(&policy, *pending, answer, now_ms());
        if self.finish(outcome) == Flow::Continue {
            self.resume();
        }
    }

    /// Hold the response body while the service records the marks its results set (`marks_out`):
    /// returns `Buffer` (Envoy keeps the body until the answer). A callout that cannot start resets
    /// the response: a result never reaches the client unmarked.
    pub(crate) fn send_marks(&mut self) -> Flow {
        let marks = std::mem::take(&mut self.marks_out);
        let policy = Arc::clone(&self.policy);
        let Some(grant) = self.mark_grant else { return self.mark_not_recorded("no grant") };
        let Some(svc) = policy.gateway.rate_limit_service.as_ref() else {
            return self.mark_not_recorded("no rate limit service is configured");
        };
        let hex = mcp_policy_core::identity::grant::hex(&grant);
        let message = rls::marks::set_request(&policy, &marks, &hex, &svc.domain).encode();
        match call(self, svc, &message) {
            Ok(id) => {
                self.mark_call = Some((id, marks.len()));
                Flow::Buffer
            }
            Err(why) => self.mark_not_recorded(&why),
        }
    }

    /// The answer to [`Filter::send_marks`]: release the held response, or reset it.
    pub(crate) fn on_marks_response(&mut self, answer: CalloutAnswer) {
        let Some((_, sent)) = self.mark_call.take() else { return };
        let answer = read(self, &answer);
        match rls::marks::set_answered(&answer, sent) {
            Ok(()) => {
                for _ in 0..sent {
                    self.config.metrics.mark_set(&self.stream);
                }
                self.resume_response();
            }
            Err(why) => {
                self.mark_not_recorded(&why);
            }
        }
    }

    /// A mark the service did not record: the response is reset, never released unmarked.
    pub(crate) fn mark_not_recorded(&mut self, why: &str) -> Flow {
        warn!("[ctx {}] marks not recorded by the rate limit service ({why}); resetting the response", self.id);
        self.mark_failed = true;
        self.stream.reset("mcp_policy_mark_not_recorded");
        Flow::Stop
    }

    /// A callout answered: the approval service's, the rate limit service's, or a marking's.
    pub fn on_callout_done(&mut self, callout_id: u64, answer: CalloutAnswer) {
        if self.mark_call.is_some_and(|(id, _)| id == callout_id) {
            self.on_marks_response(answer);
        } else if matches!(self.request, RequestState::Rls(id, _) if id == callout_id) {
            self.on_rls_response(callout_id, answer);
        } else {
            self.on_approval_response(callout_id, answer);
        }
    }
}
