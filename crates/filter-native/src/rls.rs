//! The rate limit service call (`gateway.rate_limit_service`): the gRPC call
//! `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`, made as an HTTP/2 stream through
//! the ABI (`mcp_policy_core::rls::grpc`: the request Envoy's gRPC client would send, the answer,
//! trailers included, read as it reads it; `crate::ffi::stream`), on the configured cluster, which
//! must be HTTP/2. The same requests, decisions and failure modes as the wasm build
//! (crates/filter-wasm/src/rls.rs): the request is held until the answer, or Envoy's timeout (a
//! local reply read as gRPC status 14); a result that sets a mark is held until the service has
//! recorded it, else the response is reset.

use std::sync::Arc;

use log::warn;

use mcp_policy_core::pipeline;
use mcp_policy_core::pipeline::rls::{Ask, Pending};
use mcp_policy_core::policy::RateLimitService;
use mcp_policy_core::rls::grpc;
use mcp_policy_core::rls::{self, Answer};

use crate::filter::{now_ms, Filter, Flow, RequestState};

/// The message framed and sent to `svc`: the stream's id and, if the stream already ended while it
/// started, its answer; or why it could not start.
fn call(filter: &Filter, svc: &RateLimitService, message: &[u8]) -> Result<(u64, Option<Answer>), String> {
    let headers = grpc::request_headers(svc);
    let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    // The filter's address is the `module_ptr` Envoy reports the stream's events with.
    let key = std::ptr::from_ref(filter) as usize;
    filter
        .stream
        .start_call(key, &svc.cluster, &headers, &grpc::frame(message), svc.timeout_ms)
        .map_err(|code| format!("{} ({})", pipeline::cannot_call(&svc.cluster), crate::ffi::callout_init_result(code)))
}

/// Log an answer that is no decision.
fn log_answer(filter: &Filter, answer: &Answer) {
    if let Answer::Unavailable(why) | Answer::Unusable(why) = answer {
        warn!("[ctx {}] {why}", filter.id);
    }
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
            Ok((id, None)) => {
                self.request = RequestState::Rls(id, pending);
                Flow::Buffer
            }
            Ok((_, Some(answer))) => {
                log_answer(self, &answer);
                self.finish(pipeline::rls::on_answer(&policy, *pending, answer, now_ms()))
            }
            Err(why) => {
                warn!("[ctx {}] rate limit call failed to start: {why}", self.id);
                let answer = Answer::Unavailable(pipeline::cannot_call(&svc.cluster));
                self.finish(pipeline::rls::on_answer(&policy, *pending, answer, now_ms()))
            }
        }
    }

    /// The answer to [`Filter::ask_rls`]: forward (resume) or answer locally.
    fn on_rls_answer(&mut self, answer: Answer) {
        let RequestState::Rls(_, pending) = std::mem::replace(&mut self.request, RequestState::Decided) else {
            return;
        };
        let policy = Arc::clone(&self.policy);
        log_answer(self, &answer);
        let outcome = pipeline::rls::on_answer(&policy, *pending, answer, now_ms());
        if self.finish(outcome) == Flow::Continue {
            self.resume();
        }
    }

    /// Hold the response body (`at_headers`: the response, at its headers) while the service
    /// records the marks its results set (`marks_out`): returns `Buffer` (Envoy keeps the body
    /// until the answer). A callout that cannot start resets the response: a result never reaches
    /// the client unmarked.
    pub(crate) fn send_marks(&mut self, at_headers: bool) -> Flow {
        let marks = std::mem::take(&mut self.marks_out);
        let policy = Arc::clone(&self.policy);
        let Some(grant) = self.mark_grant else { return self.mark_not_recorded("no grant") };
        let Some(svc) = policy.gateway.rate_limit_service.as_ref() else {
            return self.mark_not_recorded("no rate limit service is configured");
        };
        let hex = mcp_policy_core::identity::grant::hex(&grant);
        let message = rls::marks::set_request(&policy, &marks, &hex, &svc.domain).encode();
        match call(self, svc, &message) {
            Ok((id, None)) => {
                self.mark_call = Some((id, marks.len(), at_headers));
                Flow::Buffer
            }
            // Answered while the call started: the response goes on (its error is sent, or it is
            // reset) from this hook.
            Ok((_, Some(answer))) => self.marks_answered(&answer, marks.len()),
            Err(why) => self.mark_not_recorded(&why),
        }
    }

    /// The service's answer to a marking of `sent` marks: once recorded, the error of a reply
    /// refused at its headers is sent (`Stop`), else the response goes on (`Continue`); a marking
    /// not recorded resets the response.
    fn marks_answered(&mut self, answer: &Answer, sent: usize) -> Flow {
        log_answer(self, answer);
        match rls::marks::set_answered(answer, sent) {
            Ok(()) => {
                for _ in 0..sent {
                    self.config.metrics.mark_set(&self.stream);
                }
                match self.error_after_marks.take() {
                    Some(error) => self.send(error),
                    None => Flow::Continue,
                }
            }
            Err(why) => self.mark_not_recorded(&why),
        }
    }

    /// A mark the service did not record: the response is reset, never released unmarked.
    pub(crate) fn mark_not_recorded(&mut self, why: &str) -> Flow {
        warn!("[ctx {}] marks not recorded by the rate limit service ({why}); resetting the response", self.id);
        self.mark_failed = true;
        self.stream.reset("mcp_policy_mark_not_recorded");
        Flow::Stop
    }

    /// A call's answer, from `crate::ffi::stream`: the rate limit decision's or a marking's.
    pub fn on_call_answer(&mut self, id: u64, answer: Answer) {
        if let Some((call, sent, _)) = self.mark_call {
            if call == id {
                self.mark_call = None;
                // Held while the marks were recorded: released as it stands, its error sent, or
                // reset.
                if self.marks_answered(&answer, sent) == Flow::Continue {
                    self.resume_response();
                }
                return;
            }
        }
        if matches!(self.request, RequestState::Rls(call, _) if call == id) {
            self.on_rls_answer(answer);
        }
    }
}
