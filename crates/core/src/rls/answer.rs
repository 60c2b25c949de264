//! The rate limit service's answer, or its absence, turned into forward or refuse.
//!
//! Three kinds of outcome, kept apart because only one of them may ever forward an uncounted call:
//! - a decision (`OK` or `OVER_LIMIT`);
//! - an outage ([`Answer::Unavailable`]): the service could not be reached or did not answer in
//!   time. `failure_mode` decides: `deny` refuses `limiter_unavailable`, `allow` forwards;
//! - an unusable answer ([`Answer::Unusable`]): the service was reached but did not take the
//!   request (it rejected it, or answered something that is no decision), or the request could not
//!   be built. Refused `limiter_unavailable` whatever `failure_mode` says: what a client can
//!   provoke by the shape of its request must never become a way around the quota.

use super::{proto, NotSendable, Pending, MAX_DESCRIPTORS};
use crate::outcome::decision::DecisionKind;
use crate::outcome::refusal::{LimiterFault, Refusal, Subject};
use crate::pipeline::Outcome;
use crate::policy::Policy;
use crate::wire::mcp::Id;

use super::Element;
use crate::terms::FailureMode;

/// The gRPC statuses that mean an outage, the only ones `failure_mode` decides on:
/// - 14 UNAVAILABLE: Envoy's own callout timeout, a cluster with no healthy endpoint, a connection
///   refused or reset before an answer (Envoy answers these itself, HTTP 503/504, which gRPC reads
///   as 14), and mcp-ratelimit when its store is down or slower than `--redis-timeout`;
/// - 4 DEADLINE_EXCEEDED: a service that gave up within the caller's `grpc-timeout` (mcp-ratelimit
///   does, so that its answer arrives before the filter's timeout).
///
/// Every other status means the service took the request and would not or could not decide it:
/// 3 INVALID_ARGUMENT (a request it rejects: a client could shape one at will), 8
/// RESOURCE_EXHAUSTED and 11 OUT_OF_RANGE (a request too large), 12 UNIMPLEMENTED (no rate limit
/// service behind the cluster), 13 INTERNAL (a message it could not decode, or a stream reset after
/// its answer began), 7 PERMISSION_DENIED and 16 UNAUTHENTICATED (a service that will not serve
/// this caller), 1 CANCELLED, 2 UNKNOWN and the rest. None of them is a passing outage, and
/// forwarding on them would forward, uncounted, whatever provokes them.
pub const OUTAGE_STATUSES: [u32; 2] = [4, 14];

/// The service's answer, as far as it could be had.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Decoded(proto::Response),
    /// An outage: why (`failure_mode` decides).
    Unavailable(String),
    /// The service did not take the request, or its answer is no decision: why (always refused).
    Unusable(String),
}

/// Read a gRPC callout's result: `grpc_status` (0 OK; Envoy reports its timeout and a cluster with
/// no healthy endpoint as 14 UNAVAILABLE) and the response message.
pub fn read_answer(grpc_status: u32, body: Option<&[u8]>) -> Answer {
    if grpc_status != 0 {
        let outage = OUTAGE_STATUSES.contains(&grpc_status);
        let what = if outage { "unavailable (or too slow)" } else { "did not take the request" };
        let why = format!("rate limit service {what}: gRPC status {grpc_status}");
        return if outage { Answer::Unavailable(why) } else { Answer::Unusable(why) };
    }
    match proto::Response::decode(body.unwrap_or_default()) {
        Ok(r) => Answer::Decoded(r),
        Err(e) => Answer::Unusable(format!("rate limit service answer unreadable: {}", e.0)),
    }
}

/// Finish a held request with the service's answer (or its absence).
pub fn on_answer(policy: &Policy, pending: Pending, answer: Answer, now_ms: u64) -> Outcome {
    let failure_mode = policy.gateway.rate_limit_service.as_ref().map_or(FailureMode::Deny, |s| s.failure_mode);
    let (why, outage) = match answer {
        Answer::Decoded(r) => {
            let over = r.statuses.iter().position(|s| s.code == proto::CODE_OVER_LIMIT);
            match (r.overall_code, over) {
                (proto::CODE_OK, None) => {
                    let mut out = Outcome::new(pending.decision, None);
                    out.tools_list_ids = pending.tools_list_ids;
                    return out;
                }
                (proto::CODE_OK | proto::CODE_OVER_LIMIT, Some(d)) => {
                    return over_limit(policy, pending, d, &r, now_ms)
                }
                (proto::CODE_OVER_LIMIT, None) => return over_limit(policy, pending, 0, &r, now_ms),
                (c, _) => (format!("rate limit service answered code {c} (neither OK nor OVER_LIMIT)"), false),
            }
        }
        Answer::Unavailable(why) => (why, true),
        Answer::Unusable(why) => (why, false),
    };
    if outage && failure_mode == FailureMode::Allow {
        let mut d = pending.decision;
        d.kind = DecisionKind::LimiterUnavailable;
        d.reason = Some(format!("{why}; forwarded (failure_mode allow)"));
        let mut out = Outcome::new(d, None);
        out.tools_list_ids = pending.tools_list_ids;
        return out;
    }
    let make = |subject: Subject| Refusal::LimiterUnavailable { subject, fault: LimiterFault::Service(why.clone()) };
    refuse(pending, &|_| true, &make)
}

/// Finish a held request that cannot be put to the service ([`Pending::request`] said why): refused,
/// whatever `failure_mode` says. Too many descriptors is the shape of the client's batch: an
/// `invalid_request` for every call of it, refused in dry-run too (as every invalid request is);
/// a plan that could not be built is `limiter_unavailable`.
pub fn not_sent(policy: &Policy, mut pending: Pending, why: NotSendable, now_ms: u64) -> Outcome {
    match why {
        NotSendable::Broken => {
            let why = "a rate limit descriptor could not be built".to_owned();
            on_answer(policy, pending, Answer::Unusable(why), now_ms)
        }
        NotSendable::TooManyDescriptors(n) => {
            let detail = format!(
                "the calls of this request count against {n} rate limits; the rate limit service takes at most \
                 {MAX_DESCRIPTORS} in one request: send fewer calls per batch"
            );
            pending.dry_run = false;
            let make = |_: Subject| Refusal::InvalidRequest { detail: detail.clone() };
            refuse(pending, &|_| true, &make)
        }
    }
}

fn over_limit(policy: &Policy, pending: Pending, d: usize, r: &proto::Response, now_ms: u64) -> Outcome {
    let Some(limit) = pending.counted.get(d).and_then(|&(i, _)| policy.limits.get(i)) else {
        let why = "rate limit service answered OVER_LIMIT for an unknown descriptor".to_owned();
        return on_answer(policy, pending, Answer::Unusable(why), now_ms);
    };
    let len_ms = limit.window.seconds() * 1000;
    let until_ms = r.statuses.get(d).and_then(|s| s.until_reset_ms).unwrap_or(len_ms - now_ms % len_ms);
    let retry = until_ms.div_ceil(1000).max(1);
    let make = |subject: Subject| Refusal::RateLimited { subject, limit: limit.clone(), retry_after_seconds: retry };
    refuse(pending, &|e| e.descriptors.contains(&d), &make)
}

/// Refuse the request: one error for a single call; for a batch, `make`'s error for each element
/// `hit` selects and `batch_refused` for the other requests. Dry-run forwards instead.
fn refuse(pending: Pending, hit: &dyn Fn(&Element) -> bool, make: &dyn Fn(Subject) -> Refusal) -> Outcome {
    let Pending { elements, batch, mut decision, tools_list_ids, dry_run, .. } = pending;
    let first = elements.iter().find(|e| hit(e)).or(elements.first());
    let first_refusal = make(Subject::of(first.and_then(|e| e.tool.as_deref())));
    if let Some(rule) = first_refusal.rule() {
        decision.rule = Some(rule.to_owned());
    }
    let first_id = first.and_then(|e| e.id.clone()).unwrap_or_else(Id::null);
    let mut reply = first_refusal.reply(&first_id);
    decision.refused(first_refusal);
    if dry_run {
        decision.dry_run = true;
        let mut out = Outcome::new(decision, None);
        out.tools_list_ids = tools_list_ids;
        return out;
    }
    if batch {
        let parts: Vec<String> = elements
            .iter()
            .filter_map(|e| {
                let id = e.id.as_ref()?;
                Some(if hit(e) { make(Subject::of(e.tool.as_deref())) } else { Refusal::BatchRefused }.to_json(id))
            })
            .collect();
        reply.body = format!("[{}]", parts.join(","));
    }
    Outcome::new(decision, Some(reply))
}
