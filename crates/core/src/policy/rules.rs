//! The compiled rules of the policy's `tools`: a tool's rule, its limits, its approval.

use super::{Action, Algorithm, Scope, Window};
use crate::policy::conditions::Condition;

/// A compiled rate limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limit {
    pub counter: String,
    pub window: Window,
    pub max: u64,
    pub scope: Scope,
    pub algorithm: Algorithm,
    /// JSON path of the limit in the policy, e.g. `tools.vm_agent_exec.limits[0]`.
    pub path: String,
    /// The hashed part of its shared-data counter key ([`crate::limits::counter_base`]); private,
    /// so [`Limit::new`] is the only way to make a limit and the base always matches its fields.
    key_base: [u8; 16],
}

impl Limit {
    /// A limit with its counter key's base computed (once, when the policy is compiled).
    pub fn new(counter: String, window: Window, max: u64, scope: Scope, algorithm: Algorithm, path: String) -> Self {
        let key_base = crate::limits::counter_base(&counter, scope, window, algorithm);
        Limit { counter, window, max, scope, algorithm, path, key_base }
    }

    /// The hashed part of this limit's counter key, computed by [`Limit::new`].
    pub fn key_base(&self) -> &[u8; 16] {
        &self.key_base
    }
}

/// A compiled `tools.NAME` rule. `limits` index [`Policy::limits`].
#[derive(Debug, Clone)]
pub struct ToolRule {
    /// The tool by name: `Deny` for `action: "deny"`, else `Allow` (`require_approval` included:
    /// its calls are judged like allowed ones, then `approval` applies).
    pub action: Action,
    /// The rule's `reason`: shown to the agent when the tool is denied.
    pub reason: Option<String>,
    /// `action: "require_approval"`: each call the other rules allow needs a person's approval.
    pub approval: Option<NeedsApproval>,
    pub limits: Vec<usize>,
    pub require: Vec<Condition>,
    pub deny_if: Vec<Condition>,
}

/// `action: "require_approval"` of a tool: its calls need a person's approval before they may go
/// upstream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NeedsApproval {
    /// Seconds an approval request stays open, and an approval stays usable (`approval_timeout`,
    /// default 10 minutes, 1 s to 7 days).
    pub timeout_seconds: u64,
    /// The rule's `reason`, shown to the approver and the agent.
    pub reason: Option<String>,
}
