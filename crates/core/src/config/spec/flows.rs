//! `flows`: rules across calls (see `crate::policy::flows`).

#[cfg(test)]
use serde::Deserialize;

/// One flow: while a grant carries one of `if_marked` (set less than `for` ago), the tools of
/// `deny` are refused to it (`flow_denied`).
#[derive(Debug)]
#[cfg_attr(test, derive(Deserialize))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(any(test, feature = "schema"), serde(deny_unknown_fields))]
pub struct FlowSpec {
    /// Named in refusals, audit records and metrics; unique.
    #[cfg_attr(feature = "schema", schemars(regex(pattern = "^[A-Za-z0-9_.:-]{1,64}$")))]
    pub name: String,
    /// Marks (set by `tools.NAME.marks` or `tools.NAME.result.mark_if`) of which any one denies.
    #[cfg_attr(feature = "schema", schemars(length(min = 1)))]
    pub if_marked: Vec<String>,
    /// Tool names denied (matched as `action: "deny"` matches: folded), or `"*"`: every tool but
    /// the ones that set the flow's marks.
    #[cfg_attr(feature = "schema", schemars(length(min = 1)))]
    pub deny: Vec<String>,
    /// How long after the latest mark the tools stay denied, e.g. `"10m"` (1 s to 30 days).
    #[cfg_attr(any(test, feature = "schema"), serde(rename = "for"))]
    #[cfg_attr(feature = "schema", schemars(regex(pattern = r"^[0-9]+ ?[a-z]+( ?[0-9]+ ?[a-z]+)*$")))]
    pub for_: String,
    /// Shown to the agent in the refusal.
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    pub reason: Option<String>,
}
