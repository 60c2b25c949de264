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
//! At most [`MAX_DESCRIPTORS`] per request: a batch that would need more is refused by the filter
//! itself ([`not_sent`]), so the service is never sent a request it rejects.
//!
//! Failure modes ([`answer`]): only an outage (the service unreachable or too slow) follows
//! `failure_mode`; an answer that says the service could not take the request, or that cannot be
//! read, refuses the call whatever `failure_mode` says. The protocol cannot give quota back: a
//! request the service counted is never refused afterwards by this filter.

use crate::identity::grant::hex;
use crate::identity::grant::GrantId;
use crate::limits::Limit;
use crate::outcome::decision::Decision;
use crate::outcome::decision::DecisionKind;
use crate::policy::{Policy, Scope, Window};
use crate::wire::mcp::Id;

mod answer;
pub mod proto;
pub mod upstream;

pub use answer::{not_sent, on_answer, read_answer, Answer, OUTAGE_STATUSES};

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
/// Most descriptors in one `RateLimitRequest`: mcp-ratelimit refuses a request with more
/// (`INVALID_ARGUMENT`; its `counters::MAX_DESCRIPTORS` is this constant). [`Pending::request`] is
/// the one place it is checked; policy load makes sure a single call stays within it
/// (`config::compile`), so only a batch can reach it, and such a batch is refused by the filter.
pub const MAX_DESCRIPTORS: usize = 64;
/// Longest descriptor entry key or value, and domain, in bytes (mcp-ratelimit's bound, checked at
/// policy load for counter names).
pub const MAX_TEXT_BYTES: usize = 256;

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

    /// The `RateLimitRequest` to send, or why none can be (then [`not_sent`] refuses the request,
    /// whatever `failure_mode` says: forwarding it would skip the quota).
    pub fn request(&self, policy: &Policy, domain: &str) -> Result<proto::Request, NotSendable> {
        if self.broken || self.counted.iter().any(|&(i, _)| policy.limits.get(i).is_none()) {
            return Err(NotSendable::Broken);
        }
        if self.counted.len() > MAX_DESCRIPTORS {
            return Err(NotSendable::TooManyDescriptors(self.counted.len()));
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

/// Why a held request cannot be put to the service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotSendable {
    /// A limit could not be turned into a descriptor (the plan refers to a limit the policy lacks).
    Broken,
    /// More than [`MAX_DESCRIPTORS`] descriptors: the service would refuse the request.
    TooManyDescriptors(usize),
}
