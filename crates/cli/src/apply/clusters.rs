//! The service clusters a policy names, against those of the running Envoy (`apply`'s warnings).

use mcp_policy_core::config;
use mcp_policy_core::terms::FailureMode;
use serde_json::Value;

use super::admin_get;
use crate::check::key_from_env;

/// A warning for each service cluster the policy names (`gateway.approval.cluster`,
/// `gateway.rate_limit_service.cluster`) that Envoy's admin `/clusters` does not list: Envoy loads
/// such a policy (an ECDS filter's clusters are not checked against the bootstrap), and what needs
/// the service then fails as the policy says. Nothing when the list cannot be read.
pub(super) fn missing(policy: &str, authority: &str) -> Vec<String> {
    let Ok(set) = config::load_set_with_env(policy.as_bytes(), &key_from_env) else { return Vec::new() };
    let Ok(listed) = admin_get(authority, "/clusters?format=json") else { return Vec::new() };
    let Ok(listed) = serde_json::from_str::<Value>(&listed) else { return Vec::new() };
    let known: Vec<&str> = listed
        .get("cluster_statuses")
        .and_then(Value::as_array)
        .map(|all| all.iter().filter_map(|c| c.get("name").and_then(Value::as_str)).collect())
        .unwrap_or_default();
    let gw = &set.base().gateway;
    let rls_fails = match gw.rate_limit_service.as_ref().map(|r| r.failure_mode) {
        Some(FailureMode::Allow) => {
            "calls are forwarded without its limits (failure_mode: allow), and the flows' tools refused"
        }
        _ => "every call it decides is refused",
    };
    let named = [
        gw.approval
            .as_ref()
            .map(|a| ("gateway.approval.cluster", a.cluster.as_str(), "every call that needs approval is refused")),
        gw.rate_limit_service.as_ref().map(|r| ("gateway.rate_limit_service.cluster", r.cluster.as_str(), rls_fails)),
    ];
    named
        .into_iter()
        .flatten()
        .filter(|(_, cluster, _)| !known.contains(cluster))
        .map(|(path, cluster, fails)| {
            format!("warning: {path} '{cluster}' is not a cluster of this Envoy (admin /clusters): {fails} until it is")
        })
        .collect()
}
