//! One filter configuration: `filter_name: mcp_policy` and the policy JSON of `filter_config` (a
//! `google.protobuf.StringValue`, whose string Envoy hands over as is), loaded and compiled once.

use log::{error, info, warn};

use mcp_policy_core::config;
use mcp_policy_core::limits;
use mcp_policy_core::policy::Policy;

use crate::ffi::ConfigHandle;
use crate::metrics::Metrics;
use crate::store::process_store;

/// The `filter_name` this module answers to.
pub const FILTER_NAME: &[u8] = b"mcp_policy";

/// A loaded configuration, shared by the streams of every worker thread.
pub struct Config {
    pub policy: Policy,
    pub metrics: Metrics,
}

/// Why a loaded policy cannot run in this build, if it cannot.
///
/// The rate limit service is asked over gRPC, which this build does not do (the ABI's callouts are
/// HTTP): such a policy is refused when it loads, never half served.
pub fn unsupported(policy: &Policy) -> Option<&'static str> {
    if policy.gateway.rate_limit_service.is_some() {
        return Some(
            "gateway.rate_limit_service (a gRPC callout) is not supported by the native build; use the wasm build",
        );
    }
    None
}

impl Config {
    /// Load the configuration; `None` (logged) makes Envoy refuse it.
    pub fn new(handle: &ConfigHandle, name: &[u8], bytes: &[u8]) -> Option<Config> {
        if name != FILTER_NAME {
            error!(
                "mcp-policy-filter: unknown filter_name {:?}; this module serves filter_name \"mcp_policy\"",
                String::from_utf8_lossy(name)
            );
            return None;
        }
        if bytes.is_empty() {
            error!("invalid policy at . (the whole document): the filter configuration is empty");
            return None;
        }
        let policy = match config::load_with_env(bytes, &|name| std::env::var(name).ok()) {
            Ok(p) => p,
            Err(e) => {
                error!(
                    "policy not loaded: {e}. Envoy refuses this configuration: on a reload the previous policy \
                     keeps serving, at startup Envoy exits"
                );
                return None;
            }
        };
        if let Some(why) = unsupported(&policy) {
            error!("policy not loaded: {why}. Envoy refuses this configuration");
            return None;
        }
        if let Err(e) = limits::init_lock(process_store()) {
            error!("rate limiter state unavailable: {e:?}");
            return None;
        }
        info!(
            "policy loaded: default={:?}, {} tool rules, {} limits, max_body_bytes={}",
            policy.default,
            policy.listed_tools().count(),
            policy.limits.len(),
            policy.gateway.max_body_bytes
        );
        for w in config::warnings(&policy) {
            warn!("{w}");
        }
        let metrics = Metrics::define(handle, &policy);
        Some(Config { policy, metrics })
    }
}
