//! A call held for a person's approval ([`PendingApproval`]) and how the approval service's answer
//! finishes it ([`on_approval_answer`]).

use super::Outcome;
use crate::approval::offer::ApprovalLink;
use crate::approval::offer::{Event, Offer};
use crate::approval::{self, Answer, CheckRequest};
use crate::identity::grant::GrantId;
use crate::limits::{Admission, Limiter, SharedStore};
use crate::outcome::decision::Decision;
use crate::outcome::kind::DecisionKind;
use crate::outcome::refusal::Refusal;
use crate::policy::{ApprovalService, Policy};
use crate::wire::mcp::Id;

/// A call held while the approval service is asked. Owns what is needed to finish it later: the
/// quota reserved for it (given back unless it goes upstream) and the decision so far.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingApproval {
    /// SHA-256 binding key (`approval::key_for`: caller, grant, upstream, tool, arguments, leg).
    pub key: String,
    pub grant_label: String,
    /// SHA-256 of the credential.
    pub grant_id: GrantId,
    pub tool: String,
    /// The MCP server the call goes to (bound by `key`, sent to the service and shown).
    pub upstream: approval::Upstream,
    /// The arguments' JSON text as sent.
    pub arguments: Option<String>,
    /// `approval_timeout`, seconds.
    pub expires_in_seconds: u64,
    pub reason: Option<String>,
    pub id: Id,
    pub admission: Option<Admission>,
    /// With `gateway.rate_limit_service`: the limits (indices into `Policy::limits`) the service
    /// counts once the call is approved. Asked after approval, so waiting calls consume nothing.
    pub rls_limits: Vec<usize>,
    pub decision: Decision,
    /// A 2026-07-28 continuation leg's `inputResponses`/`requestState` (bound by `key`, shown).
    pub leg: crate::wire::leg::Leg,
    /// How the call is answered while its approval is pending (`crate::approval::offer`).
    pub offer: Offer,
    /// The attached policy's name and who calls, from the verified token (bound by `key`, sent
    /// to the service and shown to the approver); `None` under a plain policy without identity.
    pub caller: Option<Box<crate::identity::payload::Provenance>>,
}

impl PendingApproval {
    /// The body of the callout to the approval service (services/approvals/API.md). `request_id` is Envoy's
    /// `x-request-id`; anything but a plain token is sent as "" ([`approval::request_id_token`]).
    pub fn check_body(&self, request_id: &str, wait_seconds: u64) -> String {
        CheckRequest {
            key: &self.key,
            grant: &self.grant_label,
            grant_id: &self.grant_id,
            tool: &self.tool,
            upstream: &self.upstream,
            arguments: self.arguments.as_deref(),
            request_id: approval::request_id_token(request_id),
            expires_in_seconds: self.expires_in_seconds,
            wait_seconds,
            reason: self.reason.as_deref(),
            input_responses: self.leg.input_responses.as_deref(),
            request_state: self.leg.request_state.as_deref(),
            caller: self.caller.as_deref(),
        }
        .to_json()
    }

    /// The callout that asks `svc` about this call, as both hosts send it: a POST of
    /// [`PendingApproval::check_body`] to the service's cluster, `x-request-id` passed on only
    /// when it is a plain token.
    pub fn callout<'s>(&self, svc: &'s ApprovalService, request_id: &'s str, wait_seconds: u64) -> ApprovalCallout<'s> {
        let body = self.check_body(request_id, wait_seconds);
        ApprovalCallout {
            svc,
            length: body.len().to_string(),
            body,
            request_id: approval::request_id_token(request_id),
        }
    }
}

/// An HTTP callout to the approval service ([`PendingApproval::callout`]): the host sends
/// [`ApprovalCallout::headers`] and `body` to `svc.cluster`, and gives up after `svc.timeout_ms`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalCallout<'s> {
    svc: &'s ApprovalService,
    pub body: String,
    length: String,
    request_id: &'s str,
}

impl ApprovalCallout<'_> {
    /// The request headers, in the order they are sent.
    #[inline]
    pub fn headers(&self) -> Vec<(&str, &str)> {
        let mut headers = vec![
            (":method", "POST"),
            (":path", self.svc.path.as_str()),
            (":authority", self.svc.authority.as_str()),
            ("content-type", "application/json"),
            ("content-length", self.length.as_str()),
        ];
        if !self.request_id.is_empty() {
            headers.push(("x-request-id", self.request_id));
        }
        headers
    }
}

/// Finish a held call with the approval service's answer: forward it when approved; otherwise
/// give its reserved quota back and answer `approval_required`, `approval_denied` or
/// `approval_unavailable` (JSON-RPC errors −31007/−31008/−31009, HTTP 200, id echoed). A pending
/// approval is answered as the call's offer says (`input_required` or −32042, `crate::approval::offer`),
/// still recorded as `approval_required`.
pub fn on_approval_answer(
    policy: &Policy,
    pending: PendingApproval,
    answer: Answer,
    store: &dyn SharedStore,
    now_ms: u64,
) -> Outcome {
    let event = match pending.offer {
        Offer::InputRequired => Some(Event::InputRequired),
        Offer::UrlElicitation => Some(Event::UrlElicitation),
        Offer::Fallback => None,
    };
    let offered = match &answer {
        Answer::Pending { approval_id, approval_url, expires_in_seconds } => {
            let (approval_id, approval_url) = (approval_id.clone(), approval_url.clone());
            let link = ApprovalLink { approval_id, approval_url, expires_in_seconds: *expires_in_seconds };
            super::offer::pending_reply(policy, &pending, &link, now_ms)
        }
        _ => None,
    };
    let PendingApproval { tool, id, admission, mut decision, reason, grant_id, rls_limits, .. } = pending;
    let refusal = match answer {
        Answer::Approved { approval_id, approver: _ } => {
            decision.kind = DecisionKind::Approved;
            decision.approval_id = Some(approval_id);
            // The approval is used up; the service counts the call now (it cannot be given back).
            let rls = crate::pipeline::rls::Pending::single(policy, grant_id, id, Some(tool), &rls_limits);
            return Outcome {
                rls: rls.map(|p| Box::new(crate::pipeline::rls::Pending { decision: decision.clone(), ..p })),
                ..Outcome::new(decision, None)
            };
        }
        Answer::Pending { approval_id, approval_url, expires_in_seconds } => {
            let reason = reason.unwrap_or_else(|| approval::DEFAULT_REASON.to_owned());
            decision.approval_id = Some(approval_id.clone());
            let link = Some(ApprovalLink { approval_id, approval_url, expires_in_seconds });
            Refusal::ApprovalRequired { tool, reason, link }
        }
        Answer::Denied { approval_id, approver, note } => {
            decision.approval_id = Some(approval_id.clone());
            Refusal::ApprovalDenied { tool, approval_id, approver, note }
        }
        Answer::Unavailable(why) => Refusal::ApprovalUnavailable { tool, why },
    };
    if let Some(adm) = &admission {
        Limiter { store, now_ms, max_tracked_grants: policy.gateway.max_tracked_grants }.give_back(adm);
    }
    // The decision so far (method, tool, rule, grant, id, argument names) stays; only the outcome changes.
    let event = if offered.is_some() { event } else { None };
    let reply = offered.unwrap_or_else(|| refusal.reply(&id));
    decision.refused(refusal);
    Outcome { offer: event, ..Outcome::new(decision, Some(reply)) }
}
