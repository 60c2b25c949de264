//! The parsed shapes of a policy set: named PolicyLayer policies, the rules that attach them to
//! callers, the identities contained, and one `gateway` for them all.

#[cfg(feature = "schema")]
use std::collections::BTreeMap;

#[cfg(test)]
use serde::Deserialize;

use crate::config::spec::GatewaySpec;
#[cfg(feature = "schema")]
use crate::config::spec::PolicySpec;
use crate::config::{JsonValue, Map};

/// A policy set: several named policies and the rules that attach them to callers.
#[derive(Debug, Default)]
#[cfg_attr(test, derive(Deserialize))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(any(test, feature = "schema"), serde(deny_unknown_fields))]
pub struct PolicySetSpec {
    /// Must be `"1"`.
    #[cfg_attr(feature = "schema", schemars(extend("const" = "1")))]
    pub version: String,
    /// The policies by name (1 to 64 of `A-Z a-z 0-9 _ . -`), each a whole PolicyLayer policy
    /// without `gateway`: the gateway is one per Envoy, given at the top level.
    #[cfg_attr(
        feature = "schema",
        schemars(extend(
            "minProperties" = 1,
            "propertyNames" = {"pattern": "^[A-Za-z0-9_.-]{1,64}$"},
            "additionalProperties" = {"allOf": [{"$ref": "#/$defs/PolicySpec"}, {"not": {"required": ["gateway"]}}]}
        ))
    )]
    // Each member is read as a `PolicySpec` by `compile`, through the same reader as a plain
    // policy: one more map of `PolicySpec` here would compile that reader again into the module.
    #[cfg_attr(feature = "schema", schemars(with = "BTreeMap<String, PolicySpec>"))]
    pub policies: Map<JsonValue>,
    /// Tried in order; the first rule whose every matcher holds attaches its policy. A caller no
    /// rule matches has no policy: every `tools/call` is refused (`no_policy`), `tools/list` is empty.
    // `attach` and `contain` are read by `read` from the tree: serde's readers of three more types
    // would cost the module more than that code.
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    #[cfg_attr(feature = "schema", schemars(with = "Vec<AttachSpec>"))]
    pub attach: Option<JsonValue>,
    /// Identities cut off: a caller any entry matches has every `tools/call` refused
    /// (`contained`) whatever policy it would have, until the entry is removed.
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    #[cfg_attr(feature = "schema", schemars(with = "Vec<ContainSpec>"))]
    pub contain: Option<JsonValue>,
    /// The gateway settings of the whole set (grant source, identity, services, modes).
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    pub gateway: Option<GatewaySpec>,
}

/// `attach[i]`: a policy and the matchers that must all hold.
#[derive(Debug)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema), serde(deny_unknown_fields))]
pub struct AttachSpec {
    /// A name under `policies`.
    pub policy: String,
    /// Every matcher must hold; an empty list matches every caller (a last, catch-all rule).
    #[cfg_attr(feature = "schema", serde(default))]
    pub when: Vec<MatcherSpec>,
}

/// `contain[i]`: the identity cut off and why.
#[derive(Debug)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema), serde(deny_unknown_fields))]
pub struct ContainSpec {
    /// Every matcher must hold (at least one).
    #[cfg_attr(feature = "schema", schemars(length(min = 1)))]
    pub when: Vec<MatcherSpec>,
    /// Shown to the agent in each refusal.
    #[cfg_attr(feature = "schema", schemars(length(min = 1)))]
    pub reason: String,
}

/// One matcher: a claim of the verified token (`claim` with `equals` or `includes`), or the grant
/// (`grant`: `sha256:` and 64 hex digits, or a `gateway.grants` label).
#[derive(Debug, Clone)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema), serde(deny_unknown_fields))]
pub struct MatcherSpec {
    /// A claim name of the verified payload (needs `gateway.identity`).
    #[cfg_attr(feature = "schema", serde(default))]
    pub claim: Option<String>,
    /// The claim is exactly this string.
    #[cfg_attr(feature = "schema", serde(default))]
    pub equals: Option<String>,
    /// The claim is an array holding this string, or a space-separated string (`scope`) with this entry.
    #[cfg_attr(feature = "schema", serde(default))]
    pub includes: Option<String>,
    /// The grant: `sha256:<64 hex>` of its credential, or a label of `gateway.grants`.
    #[cfg_attr(feature = "schema", serde(default))]
    pub grant: Option<String>,
}
