//! The parsed shapes of the policy file: PolicyLayer's `policy.json`, plus one extra top-level key,
//! `gateway`, for deployment settings. Read by `read` from the strict parser's tree, then compiled
//! into a [`crate::policy::Policy`] by `compile`.
//!
//! Every object rejects unknown fields (`deny_unknown_fields`): a misspelt key in a security policy
//! must fail loudly, never be ignored. The enums of the policy (`Action`, `Window`, `Scope`,
//! `Algorithm`, `Mode`, `ApprovalMode`, `FailureMode`) are read directly into the runtime types;
//! only the written forms with no runtime twin live here (`ToolAction`, `OpName`).
//!
//! `schema/policy.schema.json` is generated from these types (`make schema`). It names the enums as
//! they were named when they had `…Spec` twins (`ActionSpec`, …), in its `$defs` (`schemars(rename)`)
//! and in the reader's messages (`config/read/spec.rs`; `serde(expecting)` for the tests' serde
//! oracle), and lists their values only (`names_only`): the published schema and the error texts
//! stay as they were.
//!
//! The `#[serde(…)]` attributes say for the schema (and the tests' serde-derived oracle of the
//! reader, `Deserialize` in tests only) what `config/read/spec.rs` says for the reader: which
//! fields have a default, and the keys as written.

#[cfg(feature = "schema")]
use std::collections::BTreeMap;

#[cfg(test)]
use serde::Deserialize;

use super::{JsonValue, Map};
#[cfg(feature = "schema")]
use crate::terms::names_only;
use crate::terms::{Action, Algorithm, Scope, Window};

mod flows;
mod gateway;
mod pins;
mod result;
pub use flows::FlowSpec;
pub use gateway::{ApprovalSpec, GatewaySpec, GrantSpec, IdentitySpec, RateLimitServiceSpec, SessionKeySpec};
pub use pins::{DefaultForSpec, PinnedSpec};
pub use result::ResultSpec;
// For `config::read` alone: reached only through the types above.
pub(super) use pins::WhenSpec;
pub(super) use result::{MarkIfSpec, RedactSpec, ResultDenySpec};

/// The whole policy document.
#[derive(Debug, Default)]
#[cfg_attr(test, derive(Deserialize))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(any(test, feature = "schema"), serde(deny_unknown_fields))]
pub struct PolicySpec {
    /// Must be `"1"`.
    #[cfg_attr(feature = "schema", schemars(extend("const" = "1")))]
    pub version: String,
    /// What happens to a tool the policy does not list. Absent means `deny`.
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    pub default: Option<Action>,
    /// Tool names (or `"*"` for all) that are denied at call time and hidden from `tools/list`.
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    #[cfg_attr(feature = "schema", schemars(inner(length(min = 1))))]
    pub hide: Vec<String>,
    /// Limits every tool call counts against, in addition to its own.
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    pub all_tools: Option<AllToolsSpec>,
    /// Rules by exact tool name.
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    #[cfg_attr(feature = "schema", schemars(extend("propertyNames" = {"minLength": 1})))]
    #[cfg_attr(feature = "schema", schemars(with = "BTreeMap<String, ToolRuleSpec>"))]
    pub tools: Map<ToolRuleSpec>,
    /// Reviewed definitions of tools not listed under `tools`, by exact name: they grant nothing
    /// by themselves (`mcp-policy pin --write` records them).
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    #[cfg_attr(feature = "schema", schemars(extend("propertyNames" = {"minLength": 1})))]
    #[cfg_attr(feature = "schema", schemars(with = "BTreeMap<String, PinnedSpec>"))]
    pub pins: Map<PinnedSpec>,
    /// Rules for the tools in `pins` not listed under `tools`, by their pinned annotations, e.g.
    /// `{"when": {"readOnlyHint": true}, "action": "allow"}`; needs `pins`.
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    pub default_for: Vec<DefaultForSpec>,
    /// Rules across calls: tools denied to a grant for a while after it carries a mark.
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    pub flows: Vec<FlowSpec>,
    /// Deployment settings (not part of PolicyLayer's format); everything has a safe default.
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    pub gateway: Option<GatewaySpec>,
}

#[derive(Debug, Default)]
#[cfg_attr(test, derive(Deserialize))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(any(test, feature = "schema"), serde(deny_unknown_fields))]
pub struct AllToolsSpec {
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    pub limits: Vec<LimitSpec>,
}

/// `tools.NAME.action`: PolicyLayer's allow, deny and require approval.
// Written form only: it compiles to `policy::ToolRule::action` plus `policy::ToolRule::approval`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(test, derive(Deserialize))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(rename = "ToolActionSpec"))]
#[cfg_attr(any(test, feature = "schema"), serde(rename_all = "snake_case", expecting = "enum ToolActionSpec"))]
pub enum ToolAction {
    Allow,
    Deny,
    /// A person must approve each call (bound to grant, tool and arguments, used once) through the
    /// approval service of `gateway.approval`, after every other rule allowed it.
    RequireApproval,
}

/// `tools.NAME`: `{}` allows the tool under `default: "deny"`.
#[derive(Debug, Default)]
#[cfg_attr(test, derive(Deserialize))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(any(test, feature = "schema"), serde(deny_unknown_fields))]
pub struct ToolRuleSpec {
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    pub action: Option<ToolAction>,
    /// Shown to the agent when the tool is denied; shown to the approver and the agent when the tool
    /// requires approval.
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    pub reason: Option<String>,
    /// With `action: "require_approval"`: how long an approval request stays open, and an approval
    /// stays usable, e.g. `"30s"`, `"10m"`, `"1h"` (default `"10m"`; 1 s to 7 days).
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    #[cfg_attr(feature = "schema", schemars(regex(pattern = r"^[0-9]+ ?[a-z]+( ?[0-9]+ ?[a-z]+)*$")))]
    pub approval_timeout: Option<String>,
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    pub limits: Vec<LimitSpec>,
    /// Argument conditions that must all hold, else the call is denied.
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    pub require: Vec<ConditionSpec>,
    /// Argument conditions of which none may hold.
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    pub deny_if: Vec<ConditionSpec>,
    /// Rules on the tool's results (`max_bytes`, `deny_if`, `redact`).
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    pub result: Option<ResultSpec>,
    /// Marks a forwarded call of this tool sets on its grant once it is answered with a result
    /// (see `flows`).
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    #[cfg_attr(feature = "schema", schemars(inner(length(min = 1, max = 64))))]
    pub marks: Vec<String>,
    /// `sha256:` and 64 lowercase hex digits: the reviewed definition's hash (`mcp-policy pin`).
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    #[cfg_attr(feature = "schema", schemars(regex(pattern = "^sha256:[0-9a-f]{64}$")))]
    pub pin: Option<String>,
}

/// `{path, op, value?, reason?}`: a condition over `params.arguments` (see `conditions`).
#[derive(Debug)]
#[cfg_attr(test, derive(Deserialize))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(any(test, feature = "schema"), serde(deny_unknown_fields))]
pub struct ConditionSpec {
    /// `args.` then a dotted path with optional `[index]` steps.
    #[cfg_attr(feature = "schema", schemars(regex(pattern = r"^args(\.[^.\[\]]+|\[[0-9]+\])+$")))]
    pub path: String,
    pub op: OpName,
    /// Kept as raw JSON text so numbers stay exact.
    // (As the strict parser's tree; the description and default keep the published schema as it was.)
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    #[cfg_attr(feature = "schema", schemars(with = "Option<serde_json::Value>", extend("default" = null)))]
    pub value: Option<JsonValue>,
    /// Shown to the agent when the condition denies a call.
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    pub reason: Option<String>,
}

/// A condition's `op` as written; compiled with its `value` into a [`crate::policy::conditions::Op`], which
/// carries the value and so cannot be read on its own.
#[derive(Debug, Clone, Copy)]
#[cfg_attr(test, derive(Deserialize))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(rename = "OpSpec", transform = names_only))]
#[cfg_attr(any(test, feature = "schema"), serde(rename_all = "snake_case", expecting = "enum OpSpec"))]
pub enum OpName {
    Eq,
    Neq,
    In,
    NotIn,
    Lt,
    Lte,
    Gt,
    Gte,
    Regex,
    Contains,
    Exists,
}

impl OpName {
    /// The name as written in a policy.
    pub fn name(self) -> &'static str {
        match self {
            OpName::Eq => "eq",
            OpName::Neq => "neq",
            OpName::In => "in",
            OpName::NotIn => "not_in",
            OpName::Lt => "lt",
            OpName::Lte => "lte",
            OpName::Gt => "gt",
            OpName::Gte => "gte",
            OpName::Regex => "regex",
            OpName::Contains => "contains",
            OpName::Exists => "exists",
        }
    }
}

/// One rate limit: at most `max` calls per fixed, UTC-aligned `window`, counted per `scope`.
#[derive(Debug)]
#[cfg_attr(test, derive(Deserialize))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(any(test, feature = "schema"), serde(deny_unknown_fields))]
pub struct LimitSpec {
    /// Counter name; rules naming the same counter (same window and scope) share one count.
    #[cfg_attr(feature = "schema", schemars(length(min = 1)))]
    pub counter: String,
    pub window: Window,
    /// Calls allowed per window; at least 1.
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
    pub max: u64,
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    pub scope: Scope,
    /// `fixed` (default, PolicyLayer's UTC-aligned windows) or `sliding` (any rolling window).
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    pub algorithm: Algorithm,
}
