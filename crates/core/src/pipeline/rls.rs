//! A request held while the rate limit service (`gateway.rate_limit_service`) is asked: the plan of
//! its descriptors ([`Pending`]) and the service's answer, or its absence, turned into forward or
//! refuse ([`on_answer`], [`not_sent`]). The protocol itself is `crate::rls`.
//!
//! With `flows`, the call of a tool a flow denies carries one check per mark of each such flow
//! (`crate::rls::marks`), after the limit descriptors: one round trip answers both, and a call a
//! flow refuses counts against no limit (mcp-ratelimit's decisions are all or none).
//!
//! Three kinds of outcome, kept apart because only one of them may ever forward an uncounted call:
//! - a decision (`OK` or `OVER_LIMIT`);
//! - an outage ([`Answer::Unavailable`]): the service could not be reached or did not answer in
//!   time. `failure_mode` decides: `deny` refuses `limiter_unavailable`, `allow` forwards;
//! - an unusable answer ([`Answer::Unusable`]): the service was reached but did not take the
//!   request (it rejected it, or answered something that is no decision), or the request could not
//!   be built. Refused `limiter_unavailable` whatever `failure_mode` says: what a client can
//!   provoke by the shape of its request must never become a way around the quota.

use super::Outcome;
use crate::identity::grant::{hex, GrantId};
use crate::outcome::decision::Decision;
use crate::outcome::kind::DecisionKind;
use crate::outcome::refusal::{LimiterFault, Refusal, Subject};
use crate::policy::Policy;
use crate::rls::{proto, unit, Answer, COUNTER_KEY, GRANT_KEY, MAX_DESCRIPTORS};
use crate::terms::FailureMode;
use crate::terms::Scope;
use crate::wire::mcp::Id;

/// One message of the request that counts against descriptors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Element {
    /// `None` for a notification (never counted, kept for batch order).
    pub id: Option<Id>,
    pub tool: Option<String>,
    /// Indices into [`Pending::counted`].
    pub descriptors: Vec<usize>,
    /// Indices into [`Pending::checks`].
    pub checks: Vec<usize>,
}

/// One mark checked for a flow: indices into [`Policy::flows`] and that flow's `marks`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Check {
    pub flow: usize,
    pub mark: usize,
}

/// A request held while the rate limit service is asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    /// One entry per descriptor: (index in [`Policy::limits`] of its tightest limit, hits).
    pub counted: Vec<(usize, u64)>,
    /// The flow checks, sent after the counted descriptors.
    pub checks: Vec<Check>,
    pub grant_id: GrantId,
    pub elements: Vec<Element>,
    pub batch: bool,
    /// The decision to record when the request goes upstream.
    pub decision: Decision,
    /// `tools/list` ids of the forwarded request (response filtering).
    pub tools_list_ids: Vec<Id>,
    /// Dry-run: refusals are logged as "would deny" and the request is forwarded.
    pub dry_run: bool,
    /// A limit could not be turned into a descriptor: the request must not be sent (fail closed).
    pub broken: bool,
}

impl Pending {
    /// An empty plan for one request of `grant_id`.
    pub fn new(grant_id: GrantId, batch: bool) -> Self {
        Pending {
            counted: Vec::new(),
            checks: Vec::new(),
            grant_id,
            elements: Vec::new(),
            batch,
            decision: Decision::new(DecisionKind::Allowed),
            tools_list_ids: Vec::new(),
            dry_run: false,
            broken: false,
        }
    }

    /// The plan for one message counting against `limits` (and checked against the flows that
    /// deny its tool), or `None` if there is nothing to ask.
    pub fn single(policy: &Policy, grant_id: GrantId, id: Id, tool: Option<String>, limits: &[usize]) -> Option<Self> {
        if limits.is_empty() && !policy.checks_flows_remotely(tool.as_deref()) {
            return None;
        }
        let mut p = Pending::new(grant_id, false);
        p.add(policy, Some(id), tool, limits);
        Some(p)
    }

    /// Count one message against `limits` (indices into `policy.limits`). Limits with the same
    /// counter, scope and window are one descriptor (one count); its override is the smallest max.
    pub fn add(&mut self, policy: &Policy, id: Option<Id>, tool: Option<String>, limits: &[usize]) {
        let mut descriptors = Vec::new();
        for &i in limits {
            let Some(l) = policy.limits.get(i) else {
                self.broken = true;
                continue;
            };
            let same = |j: usize| {
                policy
                    .limits
                    .get(j)
                    .is_some_and(|o| o.counter == l.counter && o.scope == l.scope && o.window == l.window)
            };
            match self.counted.iter().position(|&(j, _)| same(j)) {
                Some(d) => {
                    if let Some(entry) = self.counted.get_mut(d) {
                        if !descriptors.contains(&d) {
                            entry.1 += 1;
                            descriptors.push(d);
                        }
                        if policy.limits.get(entry.0).is_some_and(|o| l.max < o.max) {
                            entry.0 = i;
                        }
                    }
                }
                None => {
                    descriptors.push(self.counted.len());
                    self.counted.push((i, 1));
                }
            }
        }
        let mut checks = Vec::new();
        if policy.checks_flows_remotely(tool.as_deref()) {
            let tool = tool.as_deref().unwrap_or_default();
            for (flow, f) in policy.flows.iter().enumerate().filter(|(_, f)| f.denies(tool)) {
                for mark in 0..f.marks.len() {
                    let check = Check { flow, mark };
                    let at = self.checks.iter().position(|c| *c == check).unwrap_or_else(|| {
                        self.checks.push(check);
                        self.checks.len() - 1
                    });
                    checks.push(at);
                }
            }
        }
        self.elements.push(Element { id, tool, descriptors, checks });
    }

    /// Does the request count against anything, or check any mark?
    pub fn is_empty(&self) -> bool {
        self.counted.is_empty() && self.checks.is_empty()
    }

    /// The `RateLimitRequest` to send, or why none can be (then [`not_sent`] refuses the request,
    /// whatever `failure_mode` says: forwarding it would skip the quota).
    pub fn request(&self, policy: &Policy, domain: &str) -> Result<proto::Request, NotSendable> {
        let broken_check = |c: &Check| policy.flows.get(c.flow).is_none_or(|f| f.marks.get(c.mark).is_none());
        if self.broken
            || self.counted.iter().any(|&(i, _)| policy.limits.get(i).is_none())
            || self.checks.iter().any(broken_check)
        {
            return Err(NotSendable::Broken);
        }
        let n = self.counted.len() + self.checks.len();
        if n > MAX_DESCRIPTORS {
            return Err(NotSendable::TooManyDescriptors(n));
        }
        let grant = hex(&self.grant_id);
        let descriptors = self
            .counted
            .iter()
            .filter_map(|&(i, hits)| {
                let l = policy.limits.get(i)?;
                // A set's policy counts its counters apart from every other policy's (`Limit::within`).
                let counter = match &policy.name {
                    Some(name) => format!("{name}/{}", l.counter),
                    None => l.counter.clone(),
                };
                let mut entries = vec![(COUNTER_KEY.to_owned(), counter)];
                if l.scope == Scope::Grant {
                    entries.push((GRANT_KEY.to_owned(), grant.clone()));
                }
                Some(proto::Descriptor {
                    entries,
                    limit: Some((u32::try_from(l.max).unwrap_or(u32::MAX), unit(l.window))),
                    hits_addend: Some(hits),
                })
            })
            .chain(self.checks.iter().filter_map(|c| {
                let f = policy.flows.get(c.flow)?;
                Some(crate::rls::marks::descriptor(policy, f.marks.get(c.mark)?, &grant, f.for_ms, false))
            }))
            .collect();
        Ok(proto::Request { domain: domain.to_owned(), descriptors, hits_addend: 0 })
    }
}

/// What a host does with a held request ([`ask`]).
#[derive(Debug)]
pub enum Ask {
    /// Send `message` (the serialized `RateLimitRequest`) to `gateway.rate_limit_service` and hold
    /// the request; [`on_answer`] finishes it with `pending`.
    Send { message: Vec<u8>, pending: Box<Pending> },
    /// Finish at once with this outcome (no service is configured, or the request cannot be put to
    /// it); `why` is for the log.
    Done { outcome: Box<Outcome>, why: String },
}

/// The first step of a held request, the same for every host: the message to send, or the outcome
/// when there is none to send.
pub fn ask(policy: &Policy, pending: Pending, now_ms: u64) -> Ask {
    let Some(svc) = policy.gateway.rate_limit_service.as_ref() else {
        let why = "no rate limit service is configured".to_owned();
        return Ask::Done { outcome: Box::new(on_answer(policy, pending, Answer::Unusable(why.clone()), now_ms)), why };
    };
    match pending.request(policy, &svc.domain) {
        Ok(r) => Ask::Send { message: r.encode(), pending: Box::new(pending) },
        Err(e) => Ask::Done {
            why: format!("rate limit request not sent: {e:?}"),
            outcome: Box::new(not_sent(policy, pending, e, now_ms)),
        },
    }
}

/// Why a held request cannot be put to the service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotSendable {
    /// A limit could not be turned into a descriptor (the plan refers to a limit the policy lacks).
    Broken,
    /// More than [`MAX_DESCRIPTORS`] descriptors: the service would refuse the request.
    TooManyDescriptors(usize),
}

/// Finish a held request with the service's answer (or its absence).
pub fn on_answer(policy: &Policy, pending: Pending, answer: Answer, now_ms: u64) -> Outcome {
    let failure_mode = policy.gateway.rate_limit_service.as_ref().map_or(FailureMode::Deny, |s| s.failure_mode);
    let (why, outage) = match answer {
        Answer::Decoded(r) => {
            if let Some(out) = flow_denied(policy, &pending, &r) {
                return match out {
                    Ok(refusal) => {
                        let hit = |e: &Element| e.tool.as_deref().is_some_and(|t| refusal.flow.denies(t));
                        refuse(pending, &hit, &|s| refusal.refusal(&s))
                    }
                    Err(why) => on_answer(policy, pending, Answer::Unusable(why), now_ms),
                };
            }
            // No check holds: an OVER_LIMIT past the counted descriptors names none of them (unusable).
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
    if outage && failure_mode == FailureMode::Allow && pending.checks.is_empty() {
        let mut d = pending.decision;
        d.kind = DecisionKind::LimiterUnavailable;
        d.reason = Some(format!("{why}; forwarded (failure_mode allow)"));
        let mut out = Outcome::new(d, None);
        out.tools_list_ids = pending.tools_list_ids;
        return out;
    }
    let make = |subject: Subject| Refusal::LimiterUnavailable { subject, fault: LimiterFault::Service(why.clone()) };
    if outage && failure_mode == FailureMode::Allow {
        // Only the calls a flow checks are refused (the batch with them).
        return refuse(pending, &|e| !e.checks.is_empty(), &make);
    }
    refuse(pending, &|_| true, &make)
}

/// The flow that refuses, found in the answer: the first flow (policy order) with a mark the service
/// says holds, naming the mark that holds longest.
struct Denial<'p> {
    flow: &'p crate::policy::flows::Flow,
    mark: &'p str,
    retry_after_seconds: u64,
}

impl Denial<'_> {
    fn refusal(&self, subject: &Subject) -> Refusal {
        let tool = match subject {
            Subject::Tool(t) => t.clone(),
            _ => String::new(),
        };
        Refusal::FlowDenied {
            tool,
            flow: self.flow.name.clone(),
            rule: self.flow.path.clone(),
            mark: self.mark.to_owned(),
            reason: self.flow.reason.clone(),
            retry_after_seconds: self.retry_after_seconds,
        }
    }
}

/// `None` when no flow check holds; `Err` when the answer to a check that holds cannot be used.
fn flow_denied<'p>(policy: &'p Policy, pending: &Pending, r: &proto::Response) -> Option<Result<Denial<'p>, String>> {
    let base = pending.counted.len();
    let mut best: Option<(Check, u64)> = None;
    for (k, c) in pending.checks.iter().enumerate() {
        let Some(s) = r.statuses.get(base + k) else {
            return Some(Err(format!("rate limit service answered no status for flow check {k}")));
        };
        if s.code != proto::CODE_OVER_LIMIT {
            continue;
        }
        let Some(until) = s.until_reset_ms.filter(|&u| u > 0) else {
            return Some(Err("rate limit service answered OVER_LIMIT for a mark without the time it lifts".into()));
        };
        best = match best {
            Some((b, u)) if b.flow < c.flow || (b.flow == c.flow && u >= until) => Some((b, u)),
            _ => Some((*c, until)),
        };
    }
    let (c, until) = best?;
    let Some((flow, mark)) = policy.flows.get(c.flow).and_then(|f| Some((f, f.marks.get(c.mark)?))) else {
        return Some(Err("a flow check names a flow or mark the policy lacks".into()));
    };
    Some(Ok(Denial { flow, mark, retry_after_seconds: until.div_ceil(1000).max(1) }))
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
