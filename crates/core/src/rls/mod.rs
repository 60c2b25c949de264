//! Cluster-wide limits through Envoy's rate limit service protocol (RLS v3,
//! `envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit`).
//!
//! With `gateway.rate_limit_service` set, the service decides every limit of the policy (tool
//! limits and `all_tools.limits`, scopes `grant` and `global`); shared data counts nothing. Once a
//! request is allowed by every other rule (and, for `require_approval` tools, approved), the host
//! holds it and sends one `RateLimitRequest` (`pipeline::rls::Pending::request`); [`on_answer`] turns the answer
//! into forward or refuse.
//!
//! Descriptors: one per (counter, scope, window) the request counts against, entries
//! `("mcp_counter", counter)` plus `("mcp_grant", hex SHA-256 of the credential)` for scope `grant`;
//! the `limit` override carries `max` per window unit, so the policy stays the one source of truth;
//! the per-descriptor `hits_addend` is the number of calls of the request that count against it.
//! At most [`MAX_DESCRIPTORS`] per request: a batch that would need more is refused by the filter
//! itself ([`not_sent`]), so the service is never sent a request it rejects.
//!
//! With `flows`, the service also keeps the grants' marks ([`marks`]): a call a flow denies
//! carries one check per mark after its limit descriptors, and a result that marks is held until
//! the service has recorded the mark.
//!
//! Failure modes ([`answer`]): only an outage (the service unreachable or too slow) follows
//! `failure_mode`; an answer that says the service could not take the request, or that cannot be
//! read, refuses the call whatever `failure_mode` says. The protocol cannot give quota back: a
//! request the service counted is never refused afterwards by this filter.
//!
//! Transport: the wasm build sends the message through proxy-wasm's gRPC call; the native build
//! sends it as an HTTP/2 stream through the dynamic-module ABI and reads the answer's events as
//! Envoy's gRPC client does ([`grpc`]). Both read the answer into the same [`Answer`].
//!
//! Layer `rls` (crate docs); may use: `terms`, `wire`, `identity`, `limits`, `policy`.

use crate::limits::Limit;
use crate::policy::Policy;
use crate::terms::Window;

mod answer;
pub mod grpc;
pub mod marks;
pub mod proto;
pub mod upstream;

pub use answer::{read_answer, Answer, OUTAGE_STATUSES};

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
/// (`INVALID_ARGUMENT`; its `counters::MAX_DESCRIPTORS` is this constant). `pipeline::rls::Pending::request` is
/// the one place it is checked; policy load makes sure a single call stays within it
/// (`config::compile`), so only a batch can reach it, and such a batch is refused by the filter.
pub const MAX_DESCRIPTORS: usize = 64;
/// Longest descriptor entry key or value, and domain, in bytes (mcp-ratelimit's bound, checked at
/// policy load for counter names).
pub const MAX_TEXT_BYTES: usize = 256;

/// Indices in [`Policy::limits`] of `limits` (references into it). A limit not found there gets
/// `usize::MAX`, which makes the plan unusable (`pipeline::rls::Pending::request` fails): a descriptor that
/// cannot be built refuses the call, it never skips the quota.
pub fn limit_indices(policy: &Policy, limits: &[&Limit]) -> Vec<usize> {
    limits.iter().map(|l| policy.limits.iter().position(|x| std::ptr::eq(x, *l)).unwrap_or(usize::MAX)).collect()
}

/// The RLS unit of a window.
pub fn unit(w: Window) -> proto::Unit {
    match w {
        Window::Second => 1,
        Window::Minute => 2,
        Window::Hour => 3,
        Window::Day => 4,
    }
}
