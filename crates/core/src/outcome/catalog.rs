//! Every stat a filter defines, by name ([`catalog`]): both hosts define what this lists and count
//! through [`series::counts`](super::series::counts), so the names an operator's dashboards and
//! alerts use are one list, whichever build runs.

use super::series::{self, Extra, LABELS, RESULT_LABELS};
use crate::approval::offer::Event;
use crate::policy::Policy;

/// `mcp_policy_tracked_grants`: the grants the local limiter tracks (a gauge).
pub const TRACKED_GRANTS: &str = "mcp_policy_tracked_grants";
/// Tools removed from `tools/list` results.
pub const TOOLS_LIST_REMOVED: &str = "mcp_policy_tools_list_removed_total";
/// Redactions made in tool results (not counted in dry run).
pub const REDACTIONS: &str = "mcp_policy_redactions_total";
/// Marks set on grants by tool results (`flows`).
pub const MARKS_SET: &str = "mcp_policy_marks_set_total";

/// Counter names by what they count.
pub type Named<K> = Vec<(K, String)>;

/// The counters to define for a policy or a set ([`catalog`]). The gauge and the single counters
/// are the constants of this module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Catalog {
    /// `mcp_policy_<label>_total`, for every decision label.
    pub totals: Named<&'static str>,
    /// Each tool any of the policies names (sorted, once), with its per-tool counters: the labels
    /// any of them can count for it (`series::possible`).
    pub per_tool: Vec<(String, Named<&'static str>)>,
    /// The per-tool counters of `other`, every tool no policy names.
    pub other_tool: Named<&'static str>,
    /// `mcp_policy_approval_offers_<event>_total`.
    pub offers: Named<Event>,
    /// `mcp_policy_results_<label>_total`.
    pub results: Named<&'static str>,
    /// The counters a decision can bump besides its label's ([`Extra::name`]).
    pub extras: Named<Extra>,
}

/// What a filter defines for `policies`: one, or every policy of a set and the one for callers
/// with none (a tool's series are those any of them can count).
pub fn catalog(policies: &[&Policy]) -> Catalog {
    let possible = |tool: Option<&str>| {
        let mut labels: Vec<&'static str> = Vec::new();
        for p in policies {
            for l in series::possible(p, tool) {
                if !labels.contains(&l) {
                    labels.push(l);
                }
            }
        }
        let prefix = series::tool_prefix(tool);
        labels.into_iter().map(|l| (l, format!("{prefix}.{l}"))).collect()
    };
    let mut names: Vec<&str> = policies.iter().flat_map(|p| p.named_tools()).collect();
    names.sort_unstable();
    names.dedup();
    Catalog {
        totals: LABELS.iter().map(|l| (*l, format!("mcp_policy_{l}_total"))).collect(),
        per_tool: names.into_iter().map(|t| (t.to_owned(), possible(Some(t)))).collect(),
        other_tool: possible(None),
        offers: Event::ALL.iter().map(|e| (*e, format!("mcp_policy_approval_offers_{}_total", e.as_str()))).collect(),
        results: RESULT_LABELS.iter().map(|l| (*l, format!("mcp_policy_results_{l}_total"))).collect(),
        extras: Extra::ALL.iter().map(|e| (*e, e.name().to_owned())).collect(),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::config;

    fn names<K>(named: &Named<K>) -> Vec<&str> {
        named.iter().map(|(_, n)| n.as_str()).collect()
    }

    #[test]
    fn every_name_a_host_defines() {
        let a = config::load(
            br#"{"version":"1","default":"deny","tools":{"list_vms":{"limits":[{"counter":"c","window":"minute","max":1}]},"delete vm":{"action":"deny"}}}"#,
        )
        .unwrap();
        let b =
            config::load(br#"{"version":"1","default":"allow","tools":{"list_vms":{}},"gateway":{"mode":"dry_run"}}"#)
                .unwrap();
        let c = catalog(&[&a, &b]);
        assert_eq!(
            names(&c.totals),
            [
                "mcp_policy_allowed_total",
                "mcp_policy_approved_total",
                "mcp_policy_approval_required_total",
                "mcp_policy_approval_denied_total",
                "mcp_policy_approval_unavailable_total",
                "mcp_policy_passed_total",
                "mcp_policy_denied_total",
                "mcp_policy_hidden_total",
                "mcp_policy_rate_limited_total",
                "mcp_policy_no_grant_total",
                "mcp_policy_invalid_total",
                "mcp_policy_limiter_unavailable_total",
                "mcp_policy_would_deny_total",
            ]
        );
        assert!(c.totals.iter().all(|(l, n)| *n == format!("mcp_policy_{l}_total")));
        // Tools sorted and once each; a tool's series are those either policy can count, the name
        // made stat-safe, the key the tool's own name.
        let tools: Vec<(&str, Vec<&str>)> = c.per_tool.iter().map(|(t, n)| (t.as_str(), names(n))).collect();
        assert_eq!(
            tools,
            [
                (
                    "delete vm",
                    vec![
                        "mcp_policy_tool_decisions_total.delete_vm.denied",
                        "mcp_policy_tool_decisions_total.delete_vm.no_grant",
                        "mcp_policy_tool_decisions_total.delete_vm.invalid",
                        // From the second policy, which allows it by default, in dry run.
                        "mcp_policy_tool_decisions_total.delete_vm.allowed",
                        "mcp_policy_tool_decisions_total.delete_vm.would_deny",
                    ]
                ),
                (
                    "list_vms",
                    vec![
                        "mcp_policy_tool_decisions_total.list_vms.allowed",
                        "mcp_policy_tool_decisions_total.list_vms.denied",
                        "mcp_policy_tool_decisions_total.list_vms.rate_limited",
                        "mcp_policy_tool_decisions_total.list_vms.no_grant",
                        "mcp_policy_tool_decisions_total.list_vms.invalid",
                        "mcp_policy_tool_decisions_total.list_vms.limiter_unavailable",
                        "mcp_policy_tool_decisions_total.list_vms.would_deny",
                    ]
                ),
            ]
        );
        assert_eq!(
            names(&c.other_tool),
            [
                "mcp_policy_tool_decisions_total.other.denied",
                "mcp_policy_tool_decisions_total.other.no_grant",
                "mcp_policy_tool_decisions_total.other.invalid",
                "mcp_policy_tool_decisions_total.other.allowed",
                "mcp_policy_tool_decisions_total.other.would_deny",
            ]
        );
        assert_eq!(
            names(&c.offers),
            [
                "mcp_policy_approval_offers_input_required_total",
                "mcp_policy_approval_offers_url_elicitation_total",
                "mcp_policy_approval_offers_forwarded_total",
                "mcp_policy_approval_offers_state_invalid_total",
                "mcp_policy_approval_offers_declined_total",
            ]
        );
        assert_eq!(
            names(&c.results),
            [
                "mcp_policy_results_result_refused_total",
                "mcp_policy_results_redacted_total",
                "mcp_policy_results_pin_mismatch_total",
                "mcp_policy_results_would_deny_total",
                "mcp_policy_results_would_redact_total",
            ]
        );
        assert_eq!(
            names(&c.extras),
            [
                "mcp_policy_flow_denied_total",
                "mcp_policy_flow_would_deny_total",
                "mcp_policy_cas_retries_exhausted_total",
                "mcp_policy_grant_cap_reached_total",
            ]
        );
    }
}
