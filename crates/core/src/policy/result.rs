//! The compiled `tools.NAME.result` rules and `tools.NAME.pin`: what the filter checks in what a
//! tool sends back (the reader is `crate::response::result`).

use super::needle::Needle;

/// `tools.NAME.result`, compiled once at configure time.
#[derive(Debug, Clone)]
pub struct ResultRules {
    /// `tools.NAME`: the prefix of every rule path named in refusals and audit records.
    pub path: String,
    /// `max_bytes`; `None` means `gateway.max_response_bytes`.
    pub max_bytes: Option<usize>,
    /// `deny_if[i]`: the regex and the reason shown to the agent.
    pub deny_if: Vec<ResultDeny>,
    /// `redact[i]`: the regex and its literal replacement.
    pub redact: Vec<Redact>,
    /// `mark_if[i]`: a match marks the call's grant (`crate::policy::flows`).
    pub mark_if: Vec<MarkIf>,
}

/// One `deny_if` entry.
#[derive(Debug, Clone)]
pub struct ResultDeny {
    pub needle: Needle,
    pub reason: String,
}

/// One `mark_if` entry: a match marks the call's grant with `mark`, which flows read
/// (`crate::policy::flows`).
#[derive(Debug, Clone)]
pub struct MarkIf {
    pub needle: Needle,
    pub mark: String,
}

/// One `redact` entry.
#[derive(Debug, Clone)]
pub struct Redact {
    pub needle: Needle,
    pub with: String,
}

/// `data.reason` of a `deny_if` entry written without one.
pub const DEFAULT_RESULT_REASON: &str = "the tool result matched a deny_if rule";

impl ResultRules {
    /// The largest response carrying a result of this tool, in bytes.
    pub fn max_bytes_or(&self, gateway_max: usize) -> usize {
        self.max_bytes.unwrap_or(gateway_max)
    }

    /// The policy path of `deny_if[i]`.
    pub fn deny_path(&self, i: usize) -> String {
        format!("{}.result.deny_if[{i}]", self.path)
    }
}

/// A `tools.NAME.pin`: the SHA-256 of the tool's canonical definition (`crate::wire::pin`).
pub type Pin = [u8; 32];
