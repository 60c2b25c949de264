//! `mcp-ratelimit`: Envoy's rate limit service protocol (RLS v3) over Redis or memory, for
//! mcp-policy-filter (see services/ratelimit/README.md).
//!
//! - [`counters`]: a `RateLimitRequest` into the counters it touches (limits from the descriptors'
//!   `limit` overrides);
//! - [`store`]: one atomic check-then-increment-all-or-none per request, in Redis (a Lua script) or
//!   memory;
//! - [`decide`]: one decision within the caller's `grpc-timeout`, a late count taken back;
//! - [`service`]: the tonic `RateLimitService`;
//! - [`eviction`]: whether Redis may evict counters (then every decision is UNAVAILABLE);
//! - [`redact`]: the Redis URL without its password, for every log line and message;
//! - [`metrics`]: the Prometheus text of `/metrics`.

pub mod counters;
pub mod decide;
pub mod eviction;
pub mod metrics;
pub mod redact;
pub mod service;
pub mod store;
