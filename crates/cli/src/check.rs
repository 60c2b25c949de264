//! `mcp-policy check`, the warnings a valid policy still deserves (`config::warnings`, also logged
//! by the filter at load), and the keys a policy names by environment variable.

use mcp_policy_filter::config;
use mcp_policy_filter::policy::Policy;
use mcp_policy_filter::session::MIN_KEY_BYTES;

use super::{load_policy, summary, usage_error, Failure, Report, OK};

/// The value of a key the policy names by variable (`gateway.session_key.current_env`,
/// `previous_env`): this process's own variable when it is set; otherwise a stand-in of the least
/// length, one per name, so that the rest of the policy is still checked. The filter reads the wasm
/// VM's environment, not this one (`make reload` runs apart from Envoy), and refuses the policy
/// there when the variable is missing.
pub fn key_from_env(name: &str) -> Option<String> {
    std::env::var(name).ok().or_else(|| Some(format!("{name}={}", "-".repeat(MIN_KEY_BYTES))))
}

/// The warnings of a valid policy, one `FILE: warning: …` line each (for stderr).
pub fn warning_lines(path: &str, policy: &Policy) -> String {
    config::warnings(policy).map(|w| format!("{path}: warning: {w}\n")).collect()
}

/// `check FILE...`: a summary line per valid policy (stdout) and its warnings (stderr); every error
/// of an invalid one (stderr).
pub fn check(files: &[String]) -> Result<Report, Failure> {
    if files.is_empty() {
        return Err(usage_error("check needs at least one POLICY.json"));
    }
    if let Some(opt) = files.iter().find(|f| f.starts_with("--")) {
        return Err(usage_error(format!("unknown option {opt}")));
    }
    let mut report = Report { stdout: String::new(), stderr: String::new(), status: OK };
    for file in files {
        match load_policy(file) {
            Ok(p) => {
                report.stdout.push_str(&format!("{file}: {}\n", summary(&p)));
                report.stderr.push_str(&warning_lines(file, &p));
            }
            Err(f) => {
                report.stderr.push_str(&f.message);
                report.stderr.push('\n');
                report.status = report.status.max(f.status);
            }
        }
    }
    Ok(report)
}
