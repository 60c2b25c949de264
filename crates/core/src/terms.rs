//! The terms a policy is written with: actions, windows, scopes, algorithms and modes. Each is read
//! from the policy text directly (`config::read`), as its `snake_case` name; the compiled
//! [`crate::policy::Policy`] uses the same types.
//!
//! Their schema and the reader's messages keep the names the published schema gave them (`ActionSpec`,
//! …) and list only the names (`config::spec` explains why).
//!
//! Layer `terms`, the lowest: uses no other layer.

#[cfg(test)]
use serde::Deserialize;

/// Allow or deny, as written in `default`, `gateway.methods` and `gateway.client_responses`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(test, derive(Deserialize))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema), schemars(rename = "ActionSpec", transform = names_only))]
#[cfg_attr(any(test, feature = "schema"), serde(rename_all = "snake_case", expecting = "enum ActionSpec"))]
pub enum Action {
    Allow,
    Deny,
}

/// A fixed, UTC-aligned window (PolicyLayer semantics): minute windows start at :00 of each minute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(test, derive(Deserialize))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema), schemars(rename = "WindowSpec", transform = names_only))]
#[cfg_attr(any(test, feature = "schema"), serde(rename_all = "snake_case", expecting = "enum WindowSpec"))]
pub enum Window {
    Second,
    Minute,
    Hour,
    Day,
}

impl Window {
    /// Length in seconds.
    pub fn seconds(self) -> u64 {
        match self {
            Window::Second => 1,
            Window::Minute => 60,
            Window::Hour => 3600,
            Window::Day => 86_400,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Window::Second => "second",
            Window::Minute => "minute",
            Window::Hour => "hour",
            Window::Day => "day",
        }
    }
}

/// Enforce decisions, or only log and count them ("would deny") and forward the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(test, derive(Deserialize))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema), schemars(rename = "ModeSpec", transform = names_only))]
#[cfg_attr(any(test, feature = "schema"), serde(rename_all = "snake_case", expecting = "enum ModeSpec"))]
pub enum Mode {
    Enforce,
    DryRun,
}

/// Who shares a counter: each grant its own (the default), or everyone one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[cfg_attr(test, derive(Deserialize))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema), schemars(rename = "ScopeSpec", transform = names_only))]
#[cfg_attr(any(test, feature = "schema"), serde(rename_all = "snake_case", expecting = "enum ScopeSpec"))]
pub enum Scope {
    #[default]
    Grant,
    Global,
}

/// How a limit counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[cfg_attr(test, derive(Deserialize))]
#[cfg_attr(
    feature = "schema",
    derive(schemars::JsonSchema),
    schemars(rename = "AlgorithmSpec", transform = names_only)
)]
#[cfg_attr(any(test, feature = "schema"), serde(rename_all = "snake_case", expecting = "enum AlgorithmSpec"))]
pub enum Algorithm {
    /// At most `max` per UTC-aligned window (PolicyLayer); up to 2×max across a window edge. The
    /// default.
    #[default]
    Fixed,
    /// At most `max` in any rolling window of the window's length.
    Sliding,
}

impl Algorithm {
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Fixed => "fixed",
            Algorithm::Sliding => "sliding",
        }
    }
}

/// How the filter waits for a person's decision (`gateway.approval.mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(test, derive(Deserialize))]
#[cfg_attr(
    feature = "schema",
    derive(schemars::JsonSchema),
    schemars(rename = "ApprovalModeSpec", transform = names_only)
)]
#[cfg_attr(any(test, feature = "schema"), serde(rename_all = "snake_case", expecting = "enum ApprovalModeSpec"))]
pub enum ApprovalMode {
    /// Ask once; a pending approval is answered at once with `approval_required` and the agent retries.
    Retry,
    /// The service holds the callout (long poll) until a decision or the callout timeout.
    Hold,
}

/// Where the audit record of each decision goes (`gateway.audit`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(test, derive(Deserialize))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(rename = "AuditSpec", transform = names_only))]
#[cfg_attr(any(test, feature = "schema"), serde(rename_all = "snake_case", expecting = "enum AuditSpec"))]
pub enum AuditMode {
    /// One info line `[ctx N] audit {record}` in Envoy's log (skipped when the `wasm` log level is
    /// above info).
    #[default]
    Log,
    /// The whole record as the filter-state value `wasm.mcp_audit`, for Envoy's access logger
    /// (`%FILTER_STATE(wasm.mcp_audit:PLAIN)%`); nothing is logged.
    AccessLog,
    /// No audit record.
    Off,
}

/// `gateway.pins`: what a listed tool whose definition does not match its `pin` gets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(test, derive(Deserialize))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(rename = "PinsSpec", transform = names_only))]
#[cfg_attr(any(test, feature = "schema"), serde(rename_all = "snake_case", expecting = "enum PinsSpec"))]
pub enum PinMode {
    /// Removed from `tools/list`, and its calls refused (`pin_mismatch`) until the policy changes.
    #[default]
    Enforce,
    /// Only audited and counted: the tool stays listed and callable.
    Report,
}

/// What happens when the service cannot decide (`gateway.rate_limit_service.failure_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(test, derive(Deserialize))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(rename = "FailureModeSpec", transform = names_only))]
#[cfg_attr(any(test, feature = "schema"), serde(rename_all = "snake_case", expecting = "enum FailureModeSpec"))]
pub enum FailureMode {
    Deny,
    Allow,
}

/// Schema transform for the policy enums: the values as one plain `{"type": "string", "enum": […]}`,
/// without the descriptions that the runtime types' doc comments would add (the fields that use an
/// enum describe its values).
#[cfg(feature = "schema")]
pub(crate) fn names_only(schema: &mut schemars::Schema) {
    let mut names = Vec::new();
    let parts = schema.get("oneOf").and_then(|v| v.as_array()).cloned().unwrap_or_else(|| vec![schema.clone().into()]);
    for part in &parts {
        if let Some(values) = part.get("enum").and_then(|v| v.as_array()) {
            names.extend(values.iter().cloned());
        }
        if let Some(value) = part.get("const") {
            names.push(value.clone());
        }
    }
    *schema = schemars::json_schema!({"type": "string", "enum": names});
}

/// `gateway.refusal_shape`: how a refused `tools/call` is answered. `error` (default): a JSON-RPC
/// error; `tool_result`: a successful JSON-RPC response whose result is a failed tool call
/// (`isError: true`, the reason as text), PolicyLayer's shape, which a model reads as any failed
/// tool call. Every other refusal stays an error.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(test, derive(Deserialize))]
#[cfg_attr(
    feature = "schema",
    derive(schemars::JsonSchema),
    schemars(rename = "RefusalShapeSpec", transform = names_only)
)]
#[cfg_attr(any(test, feature = "schema"), serde(rename_all = "snake_case", expecting = "enum RefusalShapeSpec"))]
pub enum RefusalShape {
    #[default]
    Error,
    ToolResult,
}
