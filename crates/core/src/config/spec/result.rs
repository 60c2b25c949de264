//! `tools.NAME.result`: rules on what the tool sends back (see `crate::policy::result`).

#[cfg(test)]
use serde::Deserialize;

/// `tools.NAME.result`: checked against every text of the tool's results that the model would see.
#[derive(Debug, Default)]
#[cfg_attr(test, derive(Deserialize))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(any(test, feature = "schema"), serde(deny_unknown_fields))]
pub struct ResultSpec {
    /// Largest response carrying the result, in bytes (default `gateway.max_response_bytes`); a
    /// larger one is refused (`result_refused`).
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = super::super::MAX_BODY_BYTES_CEILING)))]
    pub max_bytes: Option<u64>,
    /// A result in which one of these regexes matches is refused (`result_refused`).
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    pub deny_if: Vec<ResultDenySpec>,
    /// Each match of these regexes is replaced by `with`, in order.
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    pub redact: Vec<RedactSpec>,
    /// A result in which `regex` matches sets `mark` on the call's grant (see `flows`).
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    pub mark_if: Vec<MarkIfSpec>,
}

/// `{regex, mark}`: a result in which `regex` matches marks its grant with `mark`.
#[derive(Debug)]
#[cfg_attr(test, derive(Deserialize))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(any(test, feature = "schema"), serde(deny_unknown_fields))]
pub struct MarkIfSpec {
    /// Rust `regex` syntax (the `regex-lite` subset), matched against each decoded text.
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 1024)))]
    pub regex: String,
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 64)))]
    pub mark: String,
}

/// `{regex, reason}`: refuse a result in which `regex` matches.
#[derive(Debug)]
#[cfg_attr(test, derive(Deserialize))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(any(test, feature = "schema"), serde(deny_unknown_fields))]
pub struct ResultDenySpec {
    /// Rust `regex` syntax (the `regex-lite` subset), matched against each decoded text.
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 1024)))]
    pub regex: String,
    /// Shown to the agent in the refusal (never the matched text).
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    pub reason: Option<String>,
}

/// `{regex, with}`: replace every match of `regex` by `with` (taken literally).
#[derive(Debug)]
#[cfg_attr(test, derive(Deserialize))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(any(test, feature = "schema"), serde(deny_unknown_fields))]
pub struct RedactSpec {
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 1024)))]
    pub regex: String,
    /// The replacement text (no `$1` expansion).
    pub with: String,
}
