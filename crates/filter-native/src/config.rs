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
/// HTTP). Choosing a policy by the caller's verified identity (`gateway.identity`) is served by the
/// wasm build only. Such a policy is refused when it loads, never half served.
pub fn unsupported(policy: &Policy) -> Option<&'static str> {
    if policy.gateway.rate_limit_service.is_some() {
        return Some(
            "gateway.rate_limit_service (a gRPC callout) is not supported by the native build; use the wasm build",
        );
    }
    if policy.gateway.identity.is_some() {
        return Some(
            "gateway.identity (policies by verified identity, docs chapter \"Many agents: policies per identity\") is not \
             supported by the native build; use the wasm build",
        );
    }
    if !policy.flows.is_empty() {
        // A flow denies by marks, and marks are set as a marking result leaves the response path:
        // a host that checked flows without setting marks would never deny.
        return Some(
            "flows (rules across calls, docs chapter \"Flows: rules across calls\") are not supported by the \
             native build; use the wasm build",
        );
    }
    None
}

/// A policy set (a document with a top-level `policies`): served by the wasm build only, so refused
/// here by name rather than as an unknown key.
const SET_UNSUPPORTED: &str =
    "a policy set (top-level \"policies\", docs chapter \"Many agents: policies per identity\") is \
                               not supported by the native build; use the wasm build";

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
        let env = |name: &str| std::env::var(name).ok();
        // Read as the wasm build reads it, so an invalid document gets the same errors; a valid set
        // is then refused by name.
        let why = match config::load_set_with_env(bytes, &env) {
            Ok(set) if set.plain().is_some() => None,
            Ok(_) => Some(SET_UNSUPPORTED.to_owned()),
            Err(e) => Some(e.to_string()),
        };
        if let Some(why) = why {
            error!(
                "policy not loaded: {why}. Envoy refuses this configuration: on a reload the previous policy \
                 keeps serving, at startup Envoy exits"
            );
            return None;
        }
        let policy = match config::load_with_env(bytes, &env) {
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
