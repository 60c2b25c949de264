//! The approval callout (`require_approval`): an HTTP callout through the ABI to `gateway.approval`'s
//! cluster, holding the request until the answer; the per-grant cap on held callouts (hold mode).
//! The same requests, answers and failure modes as the wasm build (crates/filter-wasm/src/approval.rs):
//! a callout that cannot start, fails, times out or answers badly refuses the call
//! (`approval_unavailable`), never forwards it.

use std::sync::Arc;

use log::{info, warn};

use mcp_policy_core::approval::{self, Answer};
use mcp_policy_core::limits::{held, Limiter};
use mcp_policy_core::pipeline::{self, PendingApproval};
use mcp_policy_core::policy::ApprovalService;

use crate::ffi::CalloutAnswer;
use crate::filter::{now_ms, Filter, Flow, RequestState};
use crate::store::process_store;

impl Filter {
    /// The approval service answered (or the callout failed): finish the held call.
    pub fn on_approval_response(&mut self, callout_id: u64, answer: CalloutAnswer) {
        if !matches!(self.request, RequestState::Approval(id, _) if id == callout_id) {
            return;
        }
        let RequestState::Approval(_, pending) = std::mem::replace(&mut self.request, RequestState::Decided) else {
            return;
        };
        self.release_held();
        let policy = Arc::clone(&self.policy);
        let answer = if answer.body_size > approval::MAX_ANSWER_BYTES {
            Answer::Unavailable(approval::ANSWER_TOO_LARGE.into())
        } else if answer.status.is_none() {
            // Reset, timed out, or unreachable: Envoy gave no answer.
            Answer::Unavailable("the approval callout failed (reset, timeout or no healthy host)".into())
        } else {
            approval::read_answer(answer.status.as_deref(), &answer.body)
        };
        if let Answer::Unavailable(why) = &answer {
            warn!(
                "[ctx {}] approval service unusable for tool '{}': {why}",
                self.id,
                mcp_policy_core::outcome::audit::log_safe(&pending.tool)
            );
        }
        let outcome = pipeline::on_approval_answer(&policy, *pending, answer, process_store(), now_ms());
        if self.finish(outcome) == Flow::Continue {
            self.resume();
        }
    }

    /// The `wait_seconds` of a callout: in hold mode, the service's wait when the grant holds fewer
    /// than `max_held_per_grant` callouts (the slot is taken), else 0.
    fn hold_slot(&mut self, svc: &ApprovalService, max_tracked_grants: u64, pending: &PendingApproval) -> u64 {
        let wait = svc.wait_seconds();
        if wait == 0 {
            return 0;
        }
        let lease = svc.timeout_ms.saturating_add(5_000);
        let store = process_store();
        match held::reserve(store, &pending.grant_id, svc.max_held_per_grant, now_ms(), lease, max_tracked_grants) {
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
    fn release_held(&mut self) {
        if let Some((grant, lease)) = self.held.take() {
            if !held::release(process_store(), &grant, now_ms(), lease) {
                warn!("[ctx {}] could not give back a held approval slot; it heals after {lease} ms", self.id);
            }
        }
    }

    /// Hold the request and ask the approval service; `on_approval_response` finishes it. A
    /// callout that cannot start refuses the call (`approval_unavailable`).
    pub(crate) fn ask_approval(&mut self, pending: PendingApproval) -> Flow {
        let policy = Arc::clone(&self.policy);
        let policy = &*policy;
        let Some(svc) = policy.gateway.approval.as_ref() else {
            let answer = Answer::Unavailable("no approval service is configured".into());
            return self.finish(pipeline::on_approval_answer(policy, pending, answer, process_store(), now_ms()));
        };
        let wait = self.hold_slot(svc, policy.gateway.max_tracked_grants, &pending);
        let callout = pending.callout(svc, self.request_id.as_deref().unwrap_or(""), wait);
        match self.stream.http_callout(&svc.cluster, &callout.headers(), callout.body.as_bytes(), svc.timeout_ms) {
            Ok(id) => {
                self.request = RequestState::Approval(id, Box::new(pending));
                Flow::Buffer
            }
            Err(code) => {
                self.release_held();
                let answer = Answer::Unavailable(pipeline::cannot_call(&svc.cluster));
                warn!(
                    "[ctx {}] approval callout failed to start: cluster '{}' ({})",
                    self.id,
                    svc.cluster,
                    crate::ffi::callout_init_result(code)
                );
                self.finish(pipeline::on_approval_answer(policy, pending, answer, process_store(), now_ms()))
            }
        }
    }

    /// The stream ended while its approval was being asked (client gone): the call never goes
    /// upstream, so its reserved quota goes back.
    pub fn abandon_approval(&mut self) {
        if !matches!(self.request, RequestState::Approval(..)) {
            return;
        }
        if let RequestState::Approval(_, pending) = std::mem::replace(&mut self.request, RequestState::Decided) {
            self.release_held();
            if let Some(adm) = pending.admission.as_ref() {
                let max_tracked_grants = self.policy.gateway.max_tracked_grants;
                Limiter { store: process_store(), now_ms: now_ms(), max_tracked_grants }.give_back(adm);
            }
            info!(
                "[ctx {}] request ended while waiting for approval of tool '{}'",
                self.id,
                mcp_policy_core::outcome::audit::log_safe(&pending.tool)
            );
        }
    }
}
