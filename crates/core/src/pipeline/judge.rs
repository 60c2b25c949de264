//! One JSON-RPC message judged against the policy and the limits, with a known grant.

use super::{PendingApproval, RequestHead};
use crate::approval;
use crate::identity::grant::Grant;
use crate::limits::{self, Admission, Limiter};
use crate::outcome::decision::Decision;
use crate::outcome::kind::DecisionKind;
use crate::outcome::refusal::{LimiterFault, Refusal, Subject};
use crate::policy::{NeedsApproval, Policy, Stance, Verdict};
use crate::terms::Action;
use crate::wire::mcp::{Call, Message};

/// How one message fared.
pub(super) enum Judged {
    /// Forward; with the rate limit service, after it admits the limits listed (indices).
    Forward(Decision, Option<Admission>, Vec<usize>),
    Refused(Refusal),
    /// Allowed by every rule, quota reserved; a person must approve it.
    Ask(Box<PendingApproval>),
}

/// `head` gives the upstream a call that needs approval is bound to ([`RequestHead::upstream`]).
pub(super) fn judge_message(
    policy: &Policy,
    head: &RequestHead,
    msg: &Message,
    grant: &Grant,
    limiter: &Limiter<'_>,
) -> Judged {
    let mut d = Decision::new(DecisionKind::Passed);
    d.grant = Some(grant.label());
    let Message::Request { call, .. } = msg else {
        if let Message::Notification { method } = msg {
            d.method = Some(method.name().to_owned());
        }
        if matches!(msg, Message::Response { .. }) && policy.gateway.client_responses == Action::Deny {
            let reason = "responses from the client are denied by policy (gateway.client_responses)";
            let (subject, rule, reason) = (Subject::ClientResponse, "gateway.client_responses".into(), reason.into());
            return Judged::Refused(Refusal::Denied { subject, rule, reason });
        }
        return Judged::Forward(d, None, Vec::new());
    };
    // The decision records the method and tool once (`body::describe` keeps them); the refusal's
    // subject is only built when there is a refusal.
    let (method, tool): (&str, Option<&str>) = match call {
        Call::Tool(t) => ("tools/call", Some(&t.name)),
        Call::Method { method, .. } => (method.name(), None),
    };
    d.method = Some(method.to_owned());
    d.tool = tool.map(str::to_owned);
    let subject = || match tool {
        Some(t) => Subject::Tool(t.to_owned()),
        None => Subject::Method(method.to_owned()),
    };
    match policy.judge(call) {
        Verdict::Pass => Judged::Forward(d, None, Vec::new()),
        Verdict::Deny { rule, reason } => Judged::Refused(match &policy.stance {
            Stance::Attached => Refusal::Denied { subject: subject(), rule, reason },
            Stance::Unattached => Refusal::NoPolicy { subject: subject() },
            Stance::Contained { reason } => Refusal::Contained { subject: subject(), reason: reason.clone() },
        }),
        Verdict::Allow { mut rule, limits, approval } => {
            if let Some(refusal) = tool.and_then(|t| pin_mismatch(policy, t, limiter)) {
                d.rule = Some(rule);
                return Judged::Refused(refusal);
            }
            if let Some(t) = tool.filter(|t| !pin_verified(policy, t, limiter)) {
                // Allowed by `default_for` on a definition this Envoy has not seen match its pin:
                // `default` decides (fail closed).
                if policy.default != Action::Allow {
                    let reason = format!(
                        "{rule} allows the tool only once this Envoy has listed it (tools/list) matching its pin \
                         (pins.{t}.pin); not allowed by policy until then (default: deny)"
                    );
                    return Judged::Refused(Refusal::Denied { subject: subject(), rule, reason });
                }
                rule = "default".into();
            }
            if let Some(refusal) = tool.and_then(|t| super::flows::check(policy, t, &grant.id, limiter)) {
                return Judged::Refused(refusal);
            }
            d.kind = DecisionKind::Allowed;
            d.rule = Some(rule);
            // The MCP server the approval is for; none readable: refused before any quota is taken.
            let upstream = match (approval, call) {
                (Some(_), Call::Tool(t)) => match head.upstream() {
                    Ok(u) => Some(u),
                    Err(why) => {
                        let (tool, why) = (t.name.clone(), why.to_owned());
                        return Judged::Refused(Refusal::ApprovalUnavailable { tool, why });
                    }
                },
                _ => None,
            };
            let ask = |d: Decision, adm: Option<Admission>, counted: Vec<usize>, need: &NeedsApproval| {
                let (Call::Tool(t), Some(upstream)) = (call, upstream) else { return Judged::Forward(d, adm, counted) };
                let args = t.arguments.as_ref();
                let value = args.and_then(crate::wire::mcp::Arguments::value);
                Judged::Ask(Box::new(PendingApproval {
                    key: approval::key_for(
                        head.caller.get(),
                        &grant.id,
                        &upstream,
                        &t.name,
                        value.as_ref(),
                        t.leg.input_responses_value().as_ref(),
                        t.leg.request_state.as_deref(),
                    ),
                    grant_label: grant.label(),
                    grant_id: grant.id,
                    tool: t.name.clone(),
                    upstream,
                    arguments: args.map(|a| a.raw().to_owned()),
                    expires_in_seconds: need.timeout_seconds,
                    reason: need.reason.clone(),
                    id: msg.id(),
                    admission: adm,
                    rls_limits: counted,
                    decision: d,
                    leg: t.leg.clone(),
                    offer: crate::approval::offer::Offer::Fallback,
                    caller: head.caller.get().cloned().map(Box::new),
                }))
            };
            let service = policy.gateway.rate_limit_service.is_some();
            if limits.is_empty() || service {
                // With the rate limit service, shared data counts nothing: the limits travel with the call.
                let counted = if service { crate::rls::limit_indices(policy, &limits) } else { Vec::new() };
                return match approval {
                    Some(need) => ask(d, None, counted, need),
                    None => Judged::Forward(d, None, counted),
                };
            }
            match limiter.admit(&limits, &grant.id) {
                Ok(adm) => match approval {
                    Some(need) => ask(d, Some(adm), Vec::new(), need),
                    None => Judged::Forward(d, Some(adm), Vec::new()),
                },
                Err(limits::NotAdmitted::Limited { limit, retry_after_seconds }) => {
                    Judged::Refused(Refusal::RateLimited {
                        subject: subject(),
                        limit: limit.clone(),
                        retry_after_seconds,
                    })
                }
                Err(limits::NotAdmitted::Unavailable(u)) => {
                    Judged::Refused(Refusal::LimiterUnavailable { subject: subject(), fault: LimiterFault::Local(u) })
                }
            }
        }
    }
}

/// May an allow of `tool` stand, as far as its pin goes? Always, unless the allow rests on
/// `default_for` (`Policy::allow_needs_verified_pin`): then only once this Envoy has seen the
/// definition match its pin (the marker `crate::limits::pin_verified_key`). A marker that cannot
/// be read counts as absent (fail closed).
fn pin_verified(policy: &Policy, tool: &str, limiter: &Limiter<'_>) -> bool {
    let Some(pin) = policy.allow_needs_verified_pin(tool) else { return true };
    matches!(limiter.store.get(&crate::limits::pin_verified_key(tool, pin)), Ok(Some(_)))
}

/// A pinned tool whose listed definition did not match its pin in this Envoy (the marker in shared
/// data, `crate::limits::pin_mismatch_key`), under `gateway.pins: "enforce"`: refused. A marker that
/// cannot be read refuses too (fail closed).
fn pin_mismatch(policy: &Policy, tool: &str, limiter: &Limiter<'_>) -> Option<Refusal> {
    let pin = policy.pin(tool)?;
    if policy.gateway.pins != crate::terms::PinMode::Enforce {
        return None;
    }
    match limiter.store.get(&crate::limits::pin_mismatch_key(tool, pin)) {
        Ok(None) => None,
        Ok(Some(_)) | Err(_) => Some(Refusal::PinMismatch { tool: tool.to_owned() }),
    }
}
