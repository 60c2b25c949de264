//! `pins` and `default_for`: reviewed definitions of tools the policy does not list under `tools`,
//! and the rules that decide such tools by their pinned annotations (see `crate::policy::pinned`).

#[cfg(test)]
use serde::Deserialize;

use super::super::JsonValue;
use crate::terms::Action;

/// `pins.NAME`: the reviewed definition of a tool the policy does not list under `tools`. It
/// grants nothing by itself; `default_for` may decide the tool by `annotations`.
#[derive(Debug)]
#[cfg_attr(test, derive(Deserialize))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(any(test, feature = "schema"), serde(deny_unknown_fields))]
pub struct PinnedSpec {
    /// `sha256:` and 64 lowercase hex digits: the reviewed definition's hash (`mcp-policy pin`).
    #[cfg_attr(feature = "schema", schemars(regex(pattern = "^sha256:[0-9a-f]{64}$")))]
    pub pin: String,
    /// The tool's `annotations` as reviewed (absent: the tool lists none; `null` as listed). A
    /// listed definition must match `pin` and carry exactly these annotations.
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    #[cfg_attr(
        feature = "schema",
        schemars(with = "Option<Option<serde_json::Map<String, serde_json::Value>>>", extend("default" = null))
    )]
    pub annotations: Option<JsonValue>,
}

/// `default_for[i]`: for a tool in `pins` and not in `tools`, the action when its pinned
/// annotations match `when`. The first rule that matches decides; none: `default`.
#[derive(Debug)]
#[cfg_attr(test, derive(Deserialize))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(any(test, feature = "schema"), serde(deny_unknown_fields))]
pub struct DefaultForSpec {
    /// The annotation values to match (each given one must hold; MCP's defaults for absent ones).
    pub when: WhenSpec,
    pub action: Action,
    /// Shown to the agent when the rule denies a call.
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    pub reason: Option<String>,
}

/// The MCP tool annotations (hints) a `default_for` rule matches; at least one.
#[derive(Debug, Default)]
#[cfg_attr(test, derive(Deserialize))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(extend("minProperties" = 1)))]
#[cfg_attr(any(test, feature = "schema"), serde(deny_unknown_fields))]
pub struct WhenSpec {
    #[cfg_attr(any(test, feature = "schema"), serde(default, rename = "readOnlyHint"))]
    pub read_only_hint: Option<bool>,
    #[cfg_attr(any(test, feature = "schema"), serde(default, rename = "destructiveHint"))]
    pub destructive_hint: Option<bool>,
    #[cfg_attr(any(test, feature = "schema"), serde(default, rename = "idempotentHint"))]
    pub idempotent_hint: Option<bool>,
    #[cfg_attr(any(test, feature = "schema"), serde(default, rename = "openWorldHint"))]
    pub open_world_hint: Option<bool>,
}
