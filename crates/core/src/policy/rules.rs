//! The compiled rules of the policy's `tools`: a tool's rule, its limits, its approval.

use crate::policy::conditions::Condition;
use crate::terms::Action;

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
    /// `result`: rules on what the tool sends back.
    pub result: Option<crate::policy::result::ResultRules>,
    /// `marks`: set on the grant when a forwarded call is answered with a result (`flows`).
    pub marks: Vec<String>,
    /// `pin`: the SHA-256 of the reviewed definition.
    pub pin: Option<crate::policy::result::Pin>,
}

impl ToolRule {
    /// Does the rule hold its tool to more than the default allows: an approval, a limit, an
    /// argument condition, result rules, marks or a pin?
    pub fn restricts(&self) -> bool {
        self.restricts_calls() || self.pin.is_some()
    }

    /// Does the rule hold the tool's calls to more than the default allows: an approval, a limit,
    /// an argument condition, result rules or marks (a pin aside, which a `tools/list` checks)?
    #[inline]
    pub fn restricts_calls(&self) -> bool {
        self.approval.is_some()
            || !self.limits.is_empty()
            || !self.require.is_empty()
            || !self.deny_if.is_empty()
            || self.result.is_some()
            || !self.marks.is_empty()
    }
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
