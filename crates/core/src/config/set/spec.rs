//! The parsed shapes of a policy set: named PolicyLayer policies, the rules that attach them to
//! callers, the identities contained, and one `gateway` for them all.

use std::collections::BTreeMap;

use serde::Deserialize;

use crate::config::spec::{GatewaySpec, PolicySpec};

/// A policy set: several named policies and the rules that attach them to callers.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
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
    pub policies: BTreeMap<String, PolicySpec>,
    /// Tried in order; the first rule whose every matcher holds attaches its policy. A caller no
    /// rule matches has no policy: every `tools/call` is refused (`no_policy`), `tools/list` is empty.
    #[serde(default)]
    pub attach: Vec<AttachSpec>,
    /// Identities cut off: a caller any entry matches has every `tools/call` refused
    /// (`contained`) whatever policy it would have, until the entry is removed.
    #[serde(default)]
    pub contain: Vec<ContainSpec>,
    /// The gateway settings of the whole set (grant source, identity, services, modes).
    #[serde(default)]
    pub gateway: Option<GatewaySpec>,
}

/// `attach[i]`: a policy and the matchers that must all hold.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct AttachSpec {
    /// A name under `policies`.
    pub policy: String,
    /// Every matcher must hold; an empty list matches every caller (a last, catch-all rule).
    #[serde(default)]
    pub when: Vec<MatcherSpec>,
}

/// `contain[i]`: the identity cut off and why.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
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
#[derive(Debug, Clone, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct MatcherSpec {
    /// A claim name of the verified payload (needs `gateway.identity`).
    #[serde(default)]
    pub claim: Option<String>,
    /// The claim is exactly this string.
    #[serde(default)]
    pub equals: Option<String>,
    /// The claim is an array holding this string, or a space-separated string (`scope`) with this entry.
    #[serde(default)]
    pub includes: Option<String>,
    /// The grant: `sha256:<64 hex>` of its credential, or a label of `gateway.grants`.
    #[serde(default)]
    pub grant: Option<String>,
}
