//! Cluster-wide limits through Envoy's rate limit service protocol (RLS v3,
//! `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`).
//!
//! With `gateway.rate_limit_service` set, the service decides every limit of the policy (tool
//! limits and `all_tools.limits`, scopes `grant` and `global`); shared data counts nothing. Once a
//! request is allowed by every other rule (and, for `require_approval` tools, approved), the host
//! holds it and sends one `RateLimitRequest` ([`Pending::request`]); [`on_answer`] turns the answer
//! into forward or refuse.
//!
//! Descriptors: one per (counter, scope, window) the request counts against, entries
//! `("mcp_counter", counter)` plus `("mcp_grant", hex SHA-256 of the credential)` for scope `grant`;
//! the `limit` override carries `max` per window unit, so the policy stays the one source of truth;
//! the per-descriptor `hits_addend` is the number of calls of the request that count against it.
//!
//! Failure modes: a gRPC error (including Envoy's timeout, status 14, and a cluster with no healthy
//! endpoint), an answer that cannot be decoded, and the code UNKNOWN are "unavailable": with
//! `failure_mode: "deny"` (the default) the request is refused `limiter_unavailable`; with `"allow"`
//! it is forwarded and counted as `limiter_unavailable`. The protocol cannot give quota back: a
//! request the service counted is never refused afterwards by this filter.

use serde::Deserialize;

use crate::gate::{Decision, DecisionKind, Outcome};
use crate::grant::hex;
use crate::mcp::Id;
use crate::policy::{Limit, Policy, Scope, Window};
use crate::ratelimit::GrantId;
use crate::refusal::{LimiterFault, Refusal, Subject};

pub mod proto;
pub mod upstream;

/// gRPC service and method of the rate limit service (Envoy API v3).
pub const SERVICE: &str = "envoy.service.ratelimit.v3.RateLimitService";
pub const METHOD: &str = "ShouldRateLimit";
/// Default `domain`.
pub const DEFAULT_DOMAIN: &str = "mcp";
/// Default `timeout`.
pub const DEFAULT_TIMEOUT: &str = "100ms";
/// Longest `timeout`, in milliseconds.
pub const MAX_TIMEOUT_MS: u64 = 60_000;
/// Descriptor entry keys.
pub const COUNTER_KEY: &str = "mcp_counter";
pub const GRANT_KEY: &str = "mcp_grant";

/// What happens when the service cannot decide (`gateway.rate_limit_service.failure_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(rename = "FailureModeSpec", transform = crate::config::names_only))]
#[serde(rename_all = "snake_case", expecting = "enum FailureModeSpec")]
pub enum FailureMode {
    Deny,
    Allow,
}

/// `gateway.rate_limit_service` after defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateLimitService {
    pub cluster: String,
    /// `:authority` of the callout; `None`: the cluster name (Envoy's default).
    pub authority: Option<String>,
    pub domain: String,
    /// Milliseconds.
    pub timeout_ms: u64,
    pub failure_mode: FailureMode,
}

/// Indices in [`Policy::limits`] of `limits` (references into it). A limit not found there gets
/// `usize::MAX`, which makes the plan unusable ([`Pending::request`] fails): a descriptor that
/// cannot be built refuses the call, it never skips the quota.
pub fn limit_indices(policy: &Policy, limits: &[&Limit]) -> Vec<usize> {
    limits.iter().map(|l| policy.limits.iter().position(|x| std::ptr::eq(x, *l)).unwrap_or(usize::MAX)).collect()
}

fn unit(w: Window) -> proto::Unit {
    match w {
        Window::Second => 1,
        Window::Minute => 2,
        Window::Hour => 3,
        Window::Day => 4,
    }
}

/// One message of the request that counts against descriptors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Element {
    /// `None` for a notification (never counted, kept for batch order).
    pub id: Option<Id>,
    pub tool: Option<String>,
    /// Indices into [`Pending::counted`].
    pub descriptors: Vec<usize>,
}

/// A request held while the rate limit service is asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pending {
    /// One entry per descriptor: (index in [`Policy::limits`] of its tightest limit, hits).
    pub counted: Vec<(usize, u64)>,
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
            grant_id,
            elements: Vec::new(),
            batch,
            decision: Decision::new(DecisionKind::Allowed),
            tools_list_ids: Vec::new(),
            dry_run: false,
            broken: false,
        }
    }

    /// The plan for one message counting against `limits`, or `None` if there are none.
    pub fn single(policy: &Policy, grant_id: GrantId, id: Id, tool: Option<String>, limits: &[usize]) -> Option<Self> {
        if limits.is_empty() {
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
        self.elements.push(Element { id, tool, descriptors });
    }

    /// Does the request count against anything?
    pub fn is_empty(&self) -> bool {
        self.counted.is_empty()
    }

    /// The `RateLimitRequest` to send. Errors: a descriptor that could not be built (the call is
    /// then refused as with an unavailable service, never forwarded uncounted).
    pub fn request(&self, policy: &Policy, domain: &str) -> Result<proto::Request, String> {
        if self.broken || self.counted.iter().any(|&(i, _)| policy.limits.get(i).is_none()) {
            return Err("a rate limit descriptor could not be built".to_owned());
        }
        let grant = hex(&self.grant_id);
        let descriptors = self
            .counted
            .iter()
            .filter_map(|&(i, hits)| {
                let l = policy.limits.get(i)?;
                let mut entries = vec![(COUNTER_KEY.to_owned(), l.counter.clone())];
                if l.scope == Scope::Grant {
                    entries.push((GRANT_KEY.to_owned(), grant.clone()));
                }
                Some(proto::Descriptor {
                    entries,
                    limit: Some((u32::try_from(l.max).unwrap_or(u32::MAX), unit(l.window))),
                    hits_addend: Some(hits),
                })
            })
            .collect();
        Ok(proto::Request { domain: domain.to_owned(), descriptors, hits_addend: 0 })
    }
}

/// The service's answer, as far as it could be had.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Decoded(proto::Response),
    /// Why there is no usable answer.
    Unavailable(String),
}

/// Read a gRPC callout's result: `grpc_status` (0 OK; Envoy reports its timeout and a cluster with
/// no healthy endpoint as 14 UNAVAILABLE) and the response message.
pub fn read_answer(grpc_status: u32, body: Option<&[u8]>) -> Answer {
    if grpc_status != 0 {
        let what = if grpc_status == 14 { " (unavailable, or no answer within the timeout)" } else { "" };
        return Answer::Unavailable(format!("rate limit service failed: gRPC status {grpc_status}{what}"));
    }
    match proto::Response::decode(body.unwrap_or_default()) {
        Ok(r) => Answer::Decoded(r),
        Err(e) => Answer::Unavailable(format!("rate limit service answer unreadable: {}", e.0)),
    }
}

/// Finish a held request with the service's answer (or its absence).
pub fn on_answer(policy: &Policy, pending: Pending, answer: Answer, now_ms: u64) -> Outcome {
    let failure_mode = policy.gateway.rate_limit_service.as_ref().map_or(FailureMode::Deny, |s| s.failure_mode);
    let why = match answer {
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
                (c, _) => format!("rate limit service answered code {c} (neither OK nor OVER_LIMIT)"),
            }
        }
        Answer::Unavailable(why) => why,
    };
    if failure_mode == FailureMode::Allow {
        let mut d = pending.decision;
        d.kind = DecisionKind::LimiterUnavailable;
        d.reason = Some(format!("{why}; forwarded (failure_mode allow)"));
        let mut out = Outcome::new(d, None);
        out.tools_list_ids = pending.tools_list_ids;
        return out;
    }
    let make = |subject: Subject| Refusal::LimiterUnavailable { subject, fault: LimiterFault::Service(why.clone()) };
    refuse(pending, |_| true, &make)
}

fn over_limit(policy: &Policy, pending: Pending, d: usize, r: &proto::Response, now_ms: u64) -> Outcome {
    let Some(limit) = pending.counted.get(d).and_then(|&(i, _)| policy.limits.get(i)) else {
        let why = "rate limit service answered OVER_LIMIT for an unknown descriptor".to_owned();
        return on_answer(policy, pending, Answer::Unavailable(why), now_ms);
    };
    let len_ms = limit.window.seconds() * 1000;
    let until_ms = r.statuses.get(d).and_then(|s| s.until_reset_ms).unwrap_or(len_ms - now_ms % len_ms);
    let retry = until_ms.div_ceil(1000).max(1);
    let make = |subject: Subject| Refusal::RateLimited { subject, limit: limit.clone(), retry_after_seconds: retry };
    refuse(pending, |e| e.descriptors.contains(&d), &make)
}

/// Refuse the request: one error for a single call; for a batch, `make`'s error for each element
/// `hit` selects and `batch_refused` for the other requests. Dry-run forwards instead.
fn refuse(pending: Pending, hit: impl Fn(&Element) -> bool, make: &dyn Fn(Subject) -> Refusal) -> Outcome {
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
