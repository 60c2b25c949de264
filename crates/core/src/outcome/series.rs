//! Which per-tool decision counters a policy needs (`mcp_policy_tool_decisions_total{mcp_tool,
//! mcp_decision}`, listed by [`catalog`](super::catalog) for the hosts to define).
//!
//! A counter that exists reads 0 until its first decision, so Prometheus' `rate()` and `increase()`
//! see its first increment; a counter for a decision the tool's rule can never produce is only noise.
//! So each tool gets the labels its rule can produce, from the compiled policy alone:
//!
//! | label | when |
//! |---|---|
//! | `no_grant`, `invalid` | always: the grant and protocol checks (e.g. a `Mcp-Name` header mismatch) come before the rule |
//! | `hidden` | the tool is hidden (by name or `"*"`); nothing else of its rule applies |
//! | `denied` | any tool `hide` does not hide: `action: "deny"`, conditions, a flow's mark, a pin that no longer matches, a name folding onto a denied tool's, or a set's caller with no policy |
//! | `allowed` | `action: "allow"` (or `{}`; for a pinned tool without an entry, the `default_for` its annotations match; else `default: "allow"`, and for `other`) |
//! | `approved`, `approval_required`, `approval_denied`, `approval_unavailable` | `action: "require_approval"` |
//! | `rate_limited`, `limiter_unavailable` | an allowed tool with `limits`, or any `all_tools.limits` |
//! | `would_deny` | the tool's mode is `dry_run`, or `gateway.mode` is |
//!
//! `passed` never carries a tool. Should a decision outside this set still occur, the host defines
//! its counter then, so no decision goes uncounted.

use crate::policy::{Policy, Stance};
use crate::terms::Action;
use crate::terms::Mode;

/// What happens to tool results and listed definitions (`ResultEvent::label`): the labels of
/// `mcp_policy_results_<label>_total`.
pub const RESULT_LABELS: [&str; 5] = ["result_refused", "redacted", "pin_mismatch", "would_deny", "would_redact"];

/// The label a decision is counted under: its kind, `would_deny` in dry run, and `hidden` for a
/// call to a hidden tool (told apart from other denials in the counters, not in the reply).
pub fn counter_label(d: &crate::outcome::decision::Decision) -> &'static str {
    match d.refusal.as_deref() {
        _ if d.dry_run => "would_deny",
        Some(r) if r.is_hidden() => "hidden",
        _ => d.kind.as_str(),
    }
}

/// The per-tool counter name prefix of `tool` (`None`: `other`). Tool names are used in stat
/// names: `[A-Za-z0-9_-]` is kept and the rest becomes `_` (a `.` would split the tag).
pub fn tool_prefix(tool: Option<&str>) -> String {
    format!("{TOOL_DECISIONS}.{}", tool.map_or_else(|| "other".to_owned(), stat_safe))
}

/// The per-tool decision counters' family: `mcp_policy_tool_decisions_total.<tool>.<decision>`,
/// which the shipped `stats_tags` turn into the tags `mcp_tool` and `mcp_decision`.
pub const TOOL_DECISIONS: &str = "mcp_policy_tool_decisions_total";

/// `tool` with every character outside `[A-Za-z0-9_-]` made `_`.
pub fn stat_safe(tool: &str) -> String {
    tool.chars().map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' }).collect()
}

/// A counter a decision can bump besides those of its label: `mcp_policy_flow_denied_total`,
/// `mcp_policy_flow_would_deny_total` (a call a flow refused, or would have in dry run),
/// `mcp_policy_cas_retries_exhausted_total` and `mcp_policy_grant_cap_reached_total` (the local
/// limiter could not count the call).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Extra {
    FlowDenied,
    FlowWouldDeny,
    CasRetriesExhausted,
    GrantCapReached,
}

impl Extra {
    /// Every one, in the order hosts define them.
    pub const ALL: [Extra; 4] =
        [Extra::FlowDenied, Extra::FlowWouldDeny, Extra::CasRetriesExhausted, Extra::GrantCapReached];

    /// The counter's name.
    pub fn name(self) -> &'static str {
        match self {
            Extra::FlowDenied => "mcp_policy_flow_denied_total",
            Extra::FlowWouldDeny => "mcp_policy_flow_would_deny_total",
            Extra::CasRetriesExhausted => "mcp_policy_cas_retries_exhausted_total",
            Extra::GrantCapReached => "mcp_policy_grant_cap_reached_total",
        }
    }
}

/// The counters one decision bumps by one: `mcp_policy_<label>_total`, with a tool the per-tool
/// counter of `tool` under the same label (a name the policy does not give its own counters goes
/// to `other`; the host knows which it defined), and at most one [`Extra`] (a decision has one
/// refusal). Both builds count through this, so their counters cannot drift apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts<'a> {
    pub label: &'static str,
    pub tool: Option<&'a str>,
    pub extra: Option<Extra>,
}

/// What `d` counts ([`Counts`]).
pub fn counts(d: &crate::outcome::decision::Decision) -> Counts<'_> {
    use crate::limits::Unavailable;
    use crate::outcome::refusal::{LimiterFault, Refusal};
    let extra = match d.refusal.as_deref() {
        Some(Refusal::FlowDenied { .. }) if d.dry_run => Some(Extra::FlowWouldDeny),
        Some(Refusal::FlowDenied { .. }) => Some(Extra::FlowDenied),
        Some(Refusal::LimiterUnavailable { fault: LimiterFault::Local(Unavailable::CasRetriesExhausted), .. }) => {
            Some(Extra::CasRetriesExhausted)
        }
        Some(Refusal::LimiterUnavailable { fault: LimiterFault::Local(Unavailable::GrantCapReached), .. }) => {
            Some(Extra::GrantCapReached)
        }
        _ => None,
    };
    Counts { label: counter_label(d), tool: d.tool.as_deref(), extra }
}

/// Every decision label, in the order of the README's table.
pub const LABELS: [&str; 13] = [
    "allowed",
    "approved",
    "approval_required",
    "approval_denied",
    "approval_unavailable",
    "passed",
    "denied",
    "hidden",
    "rate_limited",
    "no_grant",
    "invalid",
    "limiter_unavailable",
    "would_deny",
];

/// The labels a call to `tool` can be counted under (`None`: the `other` bucket, tools the policy
/// does not name), in the order of [`LABELS`]. Every call that `hide` does not hide can be counted
/// `denied`: by a flow's mark, a pin that no longer matches, a name that folds onto a denied tool's,
/// or, under a policy set, as a caller with no policy or a contained one (the set's stand-in, which
/// refuses nothing else).
pub fn possible(policy: &Policy, tool: Option<&str>) -> Vec<&'static str> {
    let mut can = vec!["no_grant", "invalid"];
    let dry_run = policy.gateway.mode == Mode::DryRun || policy.mode_for(tool) == Mode::DryRun;
    if dry_run {
        can.push("would_deny");
    }
    let hidden = match tool {
        Some(t) => policy.is_hidden(t),
        None => policy.is_hidden(""), // only `"*"` hides a tool the policy does not name
    };
    if !matches!(policy.stance, Stance::Attached) {
        can.push("denied");
    } else if hidden {
        can.push("hidden");
    } else {
        can.push("denied");
        let rule = tool.and_then(|t| policy.tool_rule(t));
        // As `Policy::judge`: the tool's entry, else the `default_for` its pinned annotations
        // match, else `default`.
        let action = match rule {
            Some(r) => r.action,
            None => tool.and_then(|t| policy.default_for(t)).map_or(policy.default, |d| d.action),
        };
        if action == Action::Allow {
            let approval = rule.is_some_and(|r| r.approval.is_some());
            if approval {
                can.extend(["approved", "approval_required", "approval_denied", "approval_unavailable"]);
            } else {
                can.push("allowed");
            }
            if rule.is_some_and(|r| !r.limits.is_empty()) || policy.has_all_tools_limits() {
                can.extend(["rate_limited", "limiter_unavailable"]);
            }
        }
    }
    LABELS.iter().copied().filter(|l| can.contains(l)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config;

    fn labels(policy: &str, tool: Option<&str>) -> Vec<&'static str> {
        // The shipped policies read their session key from the VM's environment.
        let key = |_: &str| Some("k".repeat(32));
        possible(&config::load_with_env(policy.as_bytes(), &key).unwrap(), tool)
    }

    #[test]
    fn every_decision_kind_has_a_label() {
        use crate::outcome::kind::DecisionKind::{self, *};
        // Exhaustive: a new `DecisionKind` stops compiling here; number it, and add it to
        // `DecisionKind::ALL` (in this order) and to `LABELS`.
        let position = |k: DecisionKind| match k {
            Allowed => 0,
            Passed => 1,
            Denied => 2,
            RateLimited => 3,
            NoGrant => 4,
            Invalid => 5,
            LimiterUnavailable => 6,
            Approved => 7,
            ApprovalRequired => 8,
            ApprovalDenied => 9,
            ApprovalUnavailable => 10,
        };
        let positions: Vec<usize> = DecisionKind::ALL.iter().map(|k| position(*k)).collect();
        assert_eq!(positions, (0..11).collect::<Vec<_>>());
        // The host defines the `mcp_policy_<label>_total` counters from LABELS only: a kind missing
        // there would go uncounted. LABELS is the kinds plus the two labels that are no kind.
        let mut kinds: Vec<&str> = DecisionKind::ALL.iter().map(|k| k.as_str()).collect();
        kinds.extend(["hidden", "would_deny"]);
        kinds.sort_unstable();
        let mut labels = LABELS.to_vec();
        labels.sort_unstable();
        assert_eq!(kinds, labels);
    }

    #[test]
    fn what_a_decision_counts() {
        use crate::limits::Unavailable;
        use crate::outcome::decision::Decision;
        use crate::outcome::kind::DecisionKind;
        use crate::outcome::refusal::{LimiterFault, Refusal, Subject};
        let mut d = Decision::new(DecisionKind::Allowed);
        assert_eq!(counts(&d), Counts { label: "allowed", tool: None, extra: None });
        d.tool = Some("list_vms".into());
        assert_eq!(counts(&d), Counts { label: "allowed", tool: Some("list_vms"), extra: None });
        let limiter =
            |u| Refusal::LimiterUnavailable { subject: Subject::Tool("t".into()), fault: LimiterFault::Local(u) };
        d.refused(limiter(Unavailable::GrantCapReached));
        assert_eq!(
            counts(&d),
            Counts { label: "limiter_unavailable", tool: Some("list_vms"), extra: Some(Extra::GrantCapReached) }
        );
        d.refused(limiter(Unavailable::CasRetriesExhausted));
        assert_eq!(counts(&d).extra, Some(Extra::CasRetriesExhausted));
        d.refused(limiter(Unavailable::LockBusy));
        assert_eq!(counts(&d).extra, None);
        let flow = Refusal::FlowDenied {
            tool: "t".into(),
            flow: "f".into(),
            rule: "r".into(),
            mark: "m".into(),
            reason: "x".into(),
            retry_after_seconds: 0,
        };
        d.refused(flow);
        assert_eq!(counts(&d), Counts { label: "denied", tool: Some("list_vms"), extra: Some(Extra::FlowDenied) });
        d.dry_run = true;
        assert_eq!(
            counts(&d),
            Counts { label: "would_deny", tool: Some("list_vms"), extra: Some(Extra::FlowWouldDeny) }
        );
        let names: Vec<&str> = Extra::ALL.iter().map(|e| e.name()).collect();
        assert_eq!(
            names,
            [
                "mcp_policy_flow_denied_total",
                "mcp_policy_flow_would_deny_total",
                "mcp_policy_cas_retries_exhausted_total",
                "mcp_policy_grant_cap_reached_total"
            ]
        );
    }

    #[test]
    fn the_shipped_policy() {
        let p = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../envoy/policy.json")).unwrap();
        // Every call `hide` does not hide can be denied (a flow, a pin, a name folding onto a denied one).
        assert_eq!(labels(&p, Some("list_vms")), ["allowed", "denied", "no_grant", "invalid"]);
        assert_eq!(
            labels(&p, Some("vm_agent_exec")),
            ["allowed", "denied", "rate_limited", "no_grant", "invalid", "limiter_unavailable"]
        );
        assert_eq!(
            labels(&p, Some("start_vm")),
            [
                "approved",
                "approval_required",
                "approval_denied",
                "approval_unavailable",
                "denied",
                "no_grant",
                "invalid"
            ]
        );
        assert_eq!(labels(&p, None), ["denied", "no_grant", "invalid"]);
    }

    #[test]
    fn hidden_denied_conditions_all_tools_and_dry_run() {
        let p = r#"{"version":"1","default":"allow","hide":["delete_vm"],
            "all_tools":{"limits":[{"counter":"all","window":"minute","max":100}]},
            "tools":{"stop_vm":{"action":"deny"},
                     "exec":{"require":[{"path":"args.vmid","op":"in","value":[100]}]}},
            "gateway":{"tool_modes":{"stop_vm":"dry_run"}}}"#;
        assert_eq!(labels(p, Some("delete_vm")), ["hidden", "no_grant", "invalid"]);
        assert_eq!(labels(p, Some("stop_vm")), ["denied", "no_grant", "invalid", "would_deny"]);
        assert_eq!(
            labels(p, Some("exec")),
            ["allowed", "denied", "rate_limited", "no_grant", "invalid", "limiter_unavailable"]
        );
        assert_eq!(
            labels(p, None),
            ["allowed", "denied", "rate_limited", "no_grant", "invalid", "limiter_unavailable"]
        );
        let all_hidden = r#"{"version":"1","hide":["*"],"gateway":{"mode":"dry_run"}}"#;
        assert_eq!(labels(all_hidden, None), ["hidden", "no_grant", "invalid", "would_deny"]);
    }

    /// Under a policy set, the stand-in for a caller with no policy (or a contained one) refuses
    /// every tool as `no_policy` or `contained`, counted `denied`, and never as `hidden`.
    #[test]
    fn the_stand_in_of_a_set_counts_denied_only() {
        let set = std::fs::read("../../bench/policy-set-bench.json").unwrap();
        let set = config::load_set_with_env(&set, &|_: &str| Some("k".repeat(32))).unwrap();
        assert_eq!(possible(set.base(), Some("list_vms")), ["denied", "no_grant", "invalid"]);
        assert_eq!(possible(set.base(), None), ["denied", "no_grant", "invalid"]);
    }

    /// A pinned tool without an entry is decided by the `default_for` its annotations match.
    #[test]
    fn a_pinned_tool_follows_its_default_for() {
        let p = r#"{"version":"1","default":"deny",
            "pins":{"read":{"pin":"sha256:0000000000000000000000000000000000000000000000000000000000000000",
                            "annotations":{"readOnlyHint":true}}},
            "default_for":[{"when":{"readOnlyHint":true},"action":"allow"}]}"#;
        assert_eq!(labels(p, Some("read")), ["allowed", "denied", "no_grant", "invalid"]);
    }
}
