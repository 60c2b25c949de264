//! Flows: marks set by results (`tools.NAME.marks`, `tools.NAME.result.mark_if`), kept per grant in
//! shared data, and the tools a flow denies while a mark holds (`flow_denied`).

mod decide;
mod policy_file;

use mcp_policy_core::policy::Policy;

/// The issue's policy: a secret reader, a database whose results may carry a social security
/// number, two outbound tools, and one flow; `extra` goes at the end of the document.
pub(crate) const TRIFECTA: &str = r#"{"version":"1","default":"deny",
  "tools": {"read_secret": {"marks": ["secret"]},
            "query_db": {"result": {"mark_if": [{"regex": "\\b\\d{3}-\\d{2}-\\d{4}\\b", "mark": "pii"}]}},
            "http_post": {}, "send_email": {}, "list_files": {}},
  "flows": [{"name": "no-egress-after-secrets", "if_marked": ["secret", "pii"],
             "deny": ["http_post", "send_email"], "for": "10m",
             "reason": "no outbound tools for 10 minutes after reading secrets"}]"#;

pub(crate) fn trifecta(extra: &str) -> Policy {
    let text = format!("{TRIFECTA}{extra}}}");
    mcp_policy_core::config::load(text.as_bytes()).unwrap()
}

/// The errors of loading `text`, as (path, message).
pub(crate) fn load_errors(text: &str) -> Vec<(String, String)> {
    mcp_policy_core::config::load(text.as_bytes()).unwrap_err().0.into_iter().map(|e| (e.path, e.message)).collect()
}
