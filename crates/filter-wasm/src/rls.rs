//! The rate limit service callout: `dispatch_grpc_call` to
//! `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit` on `gateway.rate_limit_service`'s
//! cluster, holding the request until the answer (or Envoy's timeout, reported as gRPC status 14).

use std::time::Duration;

use log::warn;
use proxy_wasm::hostcalls;
use proxy_wasm::types::{Action, BufferType};

use super::{now_ms, Filter, RequestState};
use mcp_policy_core::pipeline;
use mcp_policy_core::pipeline::rls::{Ask, Pending};
use mcp_policy_core::rls::grpc::MAX_ANSWER_BYTES;
use mcp_policy_core::rls::{self, Answer};

impl Filter {
    /// Hold the request and ask the service. A callout that cannot start (e.g. an unknown cluster)
    /// is an unavailable service: the failure mode decides at once.
    pub(super) fn ask_rls(&mut self, pending: Pending) -> Action {
        let Some(policy) = self.policy.clone() else { return self.unconfigured() };
        let (message, pending) = match pipeline::rls::ask(&policy, pending, now_ms()) {
            Ask::Send { message, pending } => (message, *pending),
            Ask::Done { outcome, why } => {
                warn!("[ctx {}] {why}", self.id);
                return self.finish(*outcome);
            }
        };
        let Some(svc) = policy.gateway.rate_limit_service.as_ref() else { return self.unconfigured() };
        let timeout = Duration::from_millis(svc.timeout_ms);
        // The cluster name, or a serialized GrpcService when an authority is set: ASCII either way
        // (rls::compile bounds the lengths so that no varint byte reaches 0x80).
        let upstream = svc.upstream();
        let Ok(upstream) = std::str::from_utf8(&upstream) else {
            let answer = Answer::Unusable("the rate limit upstream is not ASCII".into());
            return self.finish(pipeline::rls::on_answer(&policy, pending, answer, now_ms()));
        };
        match hostcalls::dispatch_grpc_call(upstream, rls::SERVICE, rls::METHOD, vec![], Some(&message), timeout) {
            Ok(token) => {
                self.request = RequestState::Rls(token, pending);
                Action::Pause
            }
            Err(s) => {
                warn!("[ctx {}] rate limit callout failed to start: cluster '{}' ({s:?})", self.id, svc.cluster);
                let answer = Answer::Unavailable(pipeline::cannot_call(&svc.cluster));
                self.finish(pipeline::rls::on_answer(&policy, pending, answer, now_ms()))
            }
        }
    }

    /// The service's answer, read from the gRPC receive buffer (a failure is logged).
    fn read_grpc_answer(&self, status_code: u32, response_size: usize) -> Answer {
        let answer = if response_size > MAX_ANSWER_BYTES {
            Answer::Unusable(rls::grpc::ANSWER_TOO_LARGE.into())
        } else {
            let body = if status_code == 0 {
                hostcalls::get_buffer(BufferType::GrpcReceiveBuffer, 0, response_size).ok().flatten()
            } else {
                None
            };
            rls::read_answer(status_code, body.as_deref())
        };
        if let Answer::Unavailable(why) | Answer::Unusable(why) = &answer {
            warn!("[ctx {}] {why}", self.id);
        }
        answer
    }

    /// Hold the response body (`held` bytes) while the service records the marks its results set
    /// (`marks_out`): returns `Pause`. A callout that cannot start resets the response: a result
    /// never reaches the client unmarked.
    pub(super) fn send_marks(&mut self, held: usize) -> Action {
        let marks = std::mem::take(&mut self.marks_out);
        let (Some(policy), Some(grant)) = (self.policy.clone(), self.mark_grant) else {
            return self.mark_not_recorded("no policy or grant");
        };
        let Some(svc) = policy.gateway.rate_limit_service.as_ref() else {
            return self.mark_not_recorded("no rate limit service is configured");
        };
        let hex = mcp_policy_core::identity::grant::hex(&grant);
        let message = rls::marks::set_request(&policy, &marks, &hex, &svc.domain).encode();
        let upstream = svc.upstream();
        let Ok(upstream) = std::str::from_utf8(&upstream) else {
            return self.mark_not_recorded("the rate limit upstream is not ASCII");
        };
        let timeout = Duration::from_millis(svc.timeout_ms);
        match hostcalls::dispatch_grpc_call(upstream, rls::SERVICE, rls::METHOD, vec![], Some(&message), timeout) {
            Ok(token) => {
                self.mark_call = Some((token, held, marks.len()));
                Action::Pause
            }
            Err(s) => self.mark_not_recorded(&format!("cannot call cluster '{}' ({s:?})", svc.cluster)),
        }
    }

    /// The answer to [`Filter::send_marks`]: release the held response, or reset it.
    pub(super) fn on_marks_response(&mut self, status_code: u32, response_size: usize) {
        let Some((_, _, sent)) = self.mark_call.take() else { return };
        let answer = self.read_grpc_answer(status_code, response_size);
        match rls::marks::set_answered(&answer, sent) {
            Ok(()) => {
                for _ in 0..sent {
                    self.metrics.mark_set();
                }
                if let Some(error) = self.error_after_marks.take() {
                    self.send(error);
                } else if let Err(s) = hostcalls::resume_http_response() {
                    warn!("[ctx {}] cannot resume the response after its marks were recorded ({s:?})", self.id);
                }
            }
            Err(why) => {
                self.mark_not_recorded(&why);
            }
        }
    }

    /// A mark the service did not record: the response is reset, never released unmarked.
    pub(super) fn mark_not_recorded(&mut self, why: &str) -> Action {
        warn!("[ctx {}] marks not recorded by the rate limit service ({why}); resetting the response", self.id);
        self.mark_failed = true;
        let _ = hostcalls::reset_http_response();
        Action::Pause
    }

    /// The answer to [`Filter::ask_rls`]: forward (resume) or answer locally.
    pub(super) fn on_rls_response(&mut self, token_id: u32, status_code: u32, response_size: usize) {
        if !matches!(self.request, RequestState::Rls(token, _) if token == token_id) {
            return;
        }
        let RequestState::Rls(_, pending) = std::mem::replace(&mut self.request, RequestState::Decided) else {
            return;
        };
        let Some(policy) = self.policy.clone() else {
            self.unconfigured();
            return;
        };
        let answer = self.read_grpc_answer(status_code, response_size);
        let outcome = pipeline::rls::on_answer(&policy, pending, answer, now_ms());
        if self.finish(outcome) == Action::Continue {
            if let Err(s) = hostcalls::resume_http_request() {
                warn!("[ctx {}] cannot resume the request after the rate limit answer ({s:?})", self.id);
            }
        }
    }
}
