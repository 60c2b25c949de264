//! mcp-policy-filter-native: the filter as an Envoy dynamic module, a native shared object that
//! Envoy (1.40, and 1.41 by Envoy's compatibility rule) loads through
//! `envoy.filters.http.dynamic_modules`. It is a second adapter of `mcp-policy-core`, beside the
//! proxy-wasm one (crates/filter-wasm): the same configuration, replies, headers, audit record,
//! stats and filter-state keys; every decision is made in the core.
//!
//! - `ffi`: the C ABI (the only `unsafe` code) and the event hooks, each under `catch_unwind`;
//! - `config`: one filter configuration (the policy, its stats);
//! - `filter`, `response`: one HTTP stream, request and response side;
//! - `store`: the limiter's state in process memory, shared by every worker thread;
//! - `metrics`: the stats, with the wasm build's names;
//! - `stamp`: the audit record's `ts`.
//!
//! - `approval`: the approval callout (an HTTP callout through the ABI);
//! - `rls`: the rate limit service's gRPC call (`gateway.rate_limit_service`), made as an HTTP/2
//!   stream through the ABI, which has no gRPC client (`mcp_policy_core::rls::grpc`), its answer
//!   read with its trailers as Envoy's gRPC client reads it.
//!
//! The difference from the wasm build: no sandbox. A panic resets the stream (the request is never
//! forwarded), but a fault outside Rust's control would take Envoy down.

// The wasm target builds only crates/filter-wasm; this crate is native only.
#![cfg(not(target_arch = "wasm32"))]

/// Every allocation of the module (the request's parse, decision and stats) goes through
/// mimalloc; Envoy's own memory is untouched (the module never frees what Envoy allocated, nor the
/// reverse: every buffer crossing the ABI is copied or borrowed).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

pub mod approval;
pub mod config;
pub mod ffi;
pub mod filter;
pub mod metrics;
mod response;
pub mod rls;
mod stamp;
pub mod store;
