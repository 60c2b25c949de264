//! A `tools/call` checked against the policy's `flows` (`crate::policy::flows`): refused while its
//! grant carries a mark of a flow that denies the tool, set less than the flow's `for` ago.

use crate::identity::grant::GrantId;
use crate::limits::{marks, Limiter};
use crate::outcome::refusal::{LimiterFault, Refusal, Subject};
use crate::policy::Policy;

/// The refusal of a call of `tool` by `grant`, if a flow denies it now: the first flow (in policy
/// order) with a mark that holds, naming the mark that holds longest. A mark that cannot be read
/// refuses the call (`limiter_unavailable`, fail closed). With `gateway.rate_limit_service`, the
/// marks live in the service: the checks travel with the call (`crate::pipeline::rls`).
pub(super) fn check(policy: &Policy, tool: &str, grant: &GrantId, limiter: &Limiter<'_>) -> Option<Refusal> {
    if policy.gateway.rate_limit_service.is_some() {
        return None;
    }
    for flow in policy.flows_denying(tool) {
        let mut latest: Option<(&str, u64)> = None;
        for (mark, base) in flow.marks.iter().zip(&flow.mark_bases) {
            match marks::set_at(limiter.store, grant, base) {
                Ok(Some(at)) if latest.is_none_or(|(_, l)| at > l) => latest = Some((mark, at)),
                Ok(_) => {}
                Err(u) => {
                    let subject = Subject::Tool(tool.to_owned());
                    return Some(Refusal::LimiterUnavailable { subject, fault: LimiterFault::Local(u) });
                }
            }
        }
        let Some((mark, at)) = latest else { continue };
        let lifts_at = at.saturating_add(flow.for_ms);
        if lifts_at > limiter.now_ms {
            return Some(Refusal::FlowDenied {
                tool: tool.to_owned(),
                flow: flow.name.clone(),
                rule: flow.path.clone(),
                mark: mark.to_owned(),
                reason: flow.reason.clone(),
                retry_after_seconds: (lifts_at - limiter.now_ms).div_ceil(1000).max(1),
            });
        }
    }
    None
}
