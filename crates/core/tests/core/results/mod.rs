//! Result rules and pins: the policy (`tools.NAME.result`, `tools.NAME.pin`, `pins`, `default_for`,
//! `gateway.pins`), the result reader, and the response filter judging `tools/call` results.

mod default_for;
pub(crate) mod filter;
mod hostile;
mod pins;
mod policy_file;
mod props;
mod reader;

use mcp_policy_core::policy::Policy;

/// The policy `text`, which must load.
pub(crate) fn policy(text: &str) -> Policy {
    mcp_policy_core::config::load(text.as_bytes()).unwrap()
}

/// The errors of loading `text`, as (path, message).
pub(crate) fn load_errors(text: &str) -> Vec<(String, String)> {
    mcp_policy_core::config::load(text.as_bytes()).unwrap_err().0.into_iter().map(|e| (e.path, e.message)).collect()
}
