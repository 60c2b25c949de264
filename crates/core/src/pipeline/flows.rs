//! A `tools/call` checked against the policy's `flows` (`crate::policy::flows`): refused while its
//! grant carries a mark of a flow that denies the tool, set less than the flow's `for` ago.

use crate::identity::grant::GrantId;
use crate::limits::{marks, Limiter, SharedStore, Unavailable};
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

/// What became of a mark that a tool's result sets ([`record_mark`]).
#[derive(Debug, PartialEq, Eq)]
pub enum MarkRecord {
    /// Set on the grant in the store: a call of the grant that starts after the result reached
    /// the client sees it, on any worker.
    Set,
    /// Queued for the rate limit service (`gateway.rate_limit_service`), which keeps the marks for
    /// every Envoy: the host sends the queue before the result goes on.
    Queued,
    /// The stream has no grant to set it on.
    NoGrant,
    /// The store failed.
    Failed(Unavailable),
}

impl MarkRecord {
    /// The result must not reach the client (the host resets the response): a mark that a later
    /// call would be judged by was not recorded.
    pub fn fails(&self) -> bool {
        matches!(self, MarkRecord::NoGrant | MarkRecord::Failed(_))
    }
}

/// Record `mark`, set by a result of a call of `grant` (`None`: the stream had none), before that
/// result goes on: in `store` at `now_ms`, bounded by `gateway.max_tracked_grants` as the limiter's
/// other per-grant state; with `gateway.rate_limit_service`, once in `queue` for the service.
pub fn record_mark(
    policy: &Policy,
    store: &dyn SharedStore,
    now_ms: u64,
    grant: Option<&GrantId>,
    mark: &str,
    queue: &mut Vec<String>,
) -> MarkRecord {
    let Some(grant) = grant else { return MarkRecord::NoGrant };
    if policy.gateway.rate_limit_service.is_some() {
        if !queue.iter().any(|m| m == mark) {
            queue.push(mark.to_owned());
        }
        return MarkRecord::Queued;
    }
    let limiter = Limiter { store, now_ms, max_tracked_grants: policy.gateway.max_tracked_grants };
    match marks::set(&limiter, grant, mark) {
        Ok(()) => MarkRecord::Set,
        Err(u) => MarkRecord::Failed(u),
    }
}
