//! One filter configuration: `filter_name: mcp_policy` and the policy JSON of `filter_config` (a
//! `google.protobuf.StringValue`, whose string Envoy hands over as is), loaded and compiled once,
//! as the wasm build's `on_configure` does (crates/filter-wasm/src/root.rs): a plain policy, or a
//! policy set (`policies`/`attach`/`contain`) from which each request's policy is chosen, and
//! `gateway.identity` read the same way.

use std::sync::Arc;

use log::{error, info, warn};

use mcp_policy_core::config::{self, PolicySet};
use mcp_policy_core::limits;
use mcp_policy_core::policy::Policy;

use crate::ffi::{self, ConfigHandle};
use crate::metrics::Metrics;
use crate::store::process_store;

/// The `filter_name` this module answers to.
pub const FILTER_NAME: &[u8] = b"mcp_policy";

/// Envoy's runtime flag under which `/stats/prometheus` names a dynamic module's stats as the wasm
/// build's are named (`mcp_policy_allowed_total`), not `envoy_dynamicmodulescustom_mcp_policy_…`.
pub const STRIP_STAT_PREFIX: &str = "envoy.reloadable_features.dynamic_modules_strip_custom_stat_prefix";

/// A loaded configuration, shared by the streams of every worker thread.
pub struct Config {
    /// The request's policy when nothing is chosen (a plain policy without `gateway.identity`),
    /// else the set's base (its gateway settings) until the request's policy is chosen.
    pub policy: Arc<Policy>,
    /// The set to choose each request's policy from: a set, or a plain policy with
    /// `gateway.identity` (whose verified payload is read even though there is one policy).
    pub set: Option<PolicySet>,
    pub metrics: Metrics,
}

// One configuration serves every worker thread (`ffi::hooks` shares it behind an `Arc`).
const _: () = {
    const fn shared<T: Send + Sync>() {}
    shared::<Config>();
};

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
            error!(
                "policy not loaded: invalid policy at . (the whole document): the filter configuration is \
                 empty; give filter_config a google.protobuf.StringValue whose value is the policy JSON. \
                 Envoy refuses this configuration"
            );
            return None;
        }
        let env = |name: &str| std::env::var(name).ok();
        let set = match config::load_set_with_env(bytes, &env) {
            Ok(set) => set,
            Err(e) => {
                error!(
                    "policy not loaded: {e}. Envoy refuses this configuration: on a reload the previous policy \
                     keeps serving; at startup Envoy exits, or with the policy from ECDS answers every \
                     request 500 until a valid one is applied"
                );
                return None;
            }
        };
        // A plain policy without an identity is the request's policy as is: nothing to choose.
        let policy = Arc::clone(set.plain().unwrap_or_else(|| set.base()));
        let chooses = set.plain().is_none() || policy.gateway.identity.is_some();
        if set.plain().is_none() {
            info!(
                "policy set loaded: {} policies, {} attach rules, {} contained",
                set.members().len(),
                set.rules().len(),
                set.contained().len()
            );
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
        let mut all: Vec<&Policy> = set.members().iter().map(|p| &**p).collect();
        all.push(set.base());
        let metrics = Metrics::define(handle, &all);
        // Off by default in Envoy 1.40: the shipped bootstraps and recipes turn it on, and the
        // dashboards and alerts (deploy/observability) read the names it gives.
        if !ffi::runtime_bool(STRIP_STAT_PREFIX, false) {
            warn!(
                "runtime flag {STRIP_STAT_PREFIX} is not on: /stats/prometheus names this filter's stats \
                 envoy_dynamicmodulescustom_mcp_policy_*, where the shipped dashboards and alerts read mcp_policy_*; \
                 set it in the bootstrap's layered_runtime (docs/src/deploy/native.md, Differences that show)"
            );
        }
        Some(Config { policy, set: chooses.then_some(set), metrics })
    }
}
