//! The approval callout (`require_approval`): `dispatch_http_call` to `gateway.approval`'s cluster,
//! holding the request until the answer; the per-grant cap on held callouts (hold mode).

use std::time::Duration;

use log::{info, warn};
use proxy_wasm::hostcalls;
use proxy_wasm::types::{Action, BufferType, MapType};

use super::{now_ms, Filter, HostStore, RequestState};
use mcp_policy_core::approval::{self, Answer};
use mcp_policy_core::limits::held;
use mcp_policy_core::limits::Limiter;
use mcp_policy_core::pipeline::{self, PendingApproval};
use mcp_policy_core::policy::ApprovalService;

impl Filter {
    /// The approval service answered (or Envoy gave up: a synthetic `:status`): finish the held call.
    #[inline]
    pub(super) fn on_approval_response(&mut self, token_id: u32, body_size: usize) {
        if !matches!(self.request, RequestState::Approval(token, _) if token == token_id) {
            return;
        }
        let RequestState::Approval(_, pending) = std::mem::replace(&mut self.request, RequestState::Decided) else {
            return;
        };
        self.release_held();
        let Some(policy) = self.policy.clone() else {
            self.unconfigured();
            return;
        };
        // Envoy reports a timeout as a synthetic 504 and an unreachable service as 503.
        let status = hostcalls::get_map_value_bytes(MapType::HttpCallResponseHeaders, ":status").ok().flatten();
        let answer = if body_size > approval::MAX_ANSWER_BYTES {
            Answer::Unavailable(approval::ANSWER_TOO_LARGE.into())
        } else {
            let body = hostcalls::get_buffer(BufferType::HttpCallResponseBody, 0, body_size).ok().flatten();
            approval::read_answer(status.as_deref(), &body.unwrap_or_default())
        };
        if let Answer::Unavailable(why) = &answer {
            warn!(
                "[ctx {}] approval service unusable for tool '{}': {why}",
                self.id,
                mcp_policy_core::outcome::audit::log_safe(&pending.tool)
            );
        }
        let outcome = pipeline::on_approval_answer(&policy, pending, answer, &HostStore, now_ms());
        if self.finish(outcome) == Action::Continue {
            if let Err(s) = hostcalls::resume_http_request() {
                warn!("[ctx {}] cannot resume the approved request ({s:?})", self.id);
            }
        }
    }

    /// The `wait_seconds` of a callout: in hold mode, the service's wait when the grant holds fewer
    /// than `max_held_per_grant` callouts (the slot is taken), else 0 (asked without waiting, so
    /// the call gets `approval_required` or its decision at once).
    fn hold_slot(&mut self, svc: &ApprovalService, max_tracked_grants: u64, pending: &PendingApproval) -> u64 {
        let wait = svc.wait_seconds();
        if wait == 0 {
            return 0;
        }
        let lease = svc.timeout_ms.saturating_add(5_000);
        match held::reserve(&HostStore, &pending.grant_id, svc.max_held_per_grant, now_ms(), lease, max_tracked_grants)
        {
            held::Reserve::Held => {
                self.held = Some((pending.grant_id, lease));
                wait
            }
            r => {
                info!(
                    "[ctx {}] approval of tool '{}' asked without waiting: grant {} ({r:?}, max_held_per_grant {})",
                    self.id,
                    mcp_policy_core::outcome::audit::log_safe(&pending.tool),
                    pending.grant_label,
                    svc.max_held_per_grant
                );
                0
            }
        }
    }

    /// Gives back the held-callout slot this stream took, if any.
    pub(super) fn release_held(&mut self) {
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
    pub(super) fn ask_approval(&mut self, pending: PendingApproval) -> Action {
        let Some(policy) = self.policy.clone() else { return self.unconfigured() };
        let Some(svc) = policy.gateway.approval.as_ref() else {
            // config::load refuses require_approval without gateway.approval; never forward anyway.
            let answer = Answer::Unavailable("no approval service is configured".into());
            return self.finish(pipeline::on_approval_answer(&policy, pending, answer, &HostStore, now_ms()));
        };
        let wait = self.hold_slot(svc, policy.gateway.max_tracked_grants, &pending);
        let callout = pending.callout(svc, self.request_id.as_deref().unwrap_or(""), wait);
        let timeout = Duration::from_millis(svc.timeout_ms);
        match hostcalls::dispatch_http_call(
            &svc.cluster,
            callout.headers(),
            Some(callout.body.as_bytes()),
            vec![],
            timeout,
        ) {
            Ok(token) => {
                self.request = RequestState::Approval(token, pending);
                Action::Pause
            }
            Err(s) => {
                self.release_held();
                let answer = Answer::Unavailable(pipeline::cannot_call(&svc.cluster));
                warn!("[ctx {}] approval callout failed to start: cluster '{}' ({s:?})", self.id, svc.cluster);
                self.finish(pipeline::on_approval_answer(&policy, pending, answer, &HostStore, now_ms()))
            }
        }
    }

    /// The stream ended while its approval was being asked (client gone): the call never goes
    /// upstream, so its reserved quota goes back.
    #[inline]
    pub(super) fn abandon_approval(&mut self) {
        if !matches!(self.request, RequestState::Approval(..)) {
            return;
        }
        if let RequestState::Approval(_, pending) = std::mem::replace(&mut self.request, RequestState::Decided) {
            self.release_held();
            if let (Some(policy), Some(adm)) = (self.policy.as_ref(), pending.admission.as_ref()) {
                let max_tracked_grants = policy.gateway.max_tracked_grants;
                Limiter { store: &HostStore, now_ms: now_ms(), max_tracked_grants }.give_back(adm);
            }
            info!(
                "[ctx {}] request ended while waiting for approval of tool '{}'",
                self.id,
                mcp_policy_core::outcome::audit::log_safe(&pending.tool)
            );
        }
    }
}
