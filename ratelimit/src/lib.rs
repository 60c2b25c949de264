//! `mcp-ratelimit`: Envoy's rate limit service protocol (RLS v3) over Redis or memory, for
//! mcp-policy-filter (see ratelimit/README.md).
//!
//! - [`counters`]: a `RateLimitRequest` into the counters it touches (limits from the descriptors'
//!   `limit` overrides);
//! - [`store`]: one atomic check-then-increment-all-or-none per request, in Redis (a Lua script) or
//!   memory;
//! - [`service`]: the tonic `RateLimitService`;
//! - [`metrics`]: the Prometheus text of `/metrics`.

pub mod counters;
pub mod metrics;
pub mod service;
pub mod store;
