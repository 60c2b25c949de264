//! `explain` of a JSON-RPC batch: one line per message, each decided as if sent alone, so that the
//! message that refuses the batch, or the tool each allowed call names, is plain to see.

use mcp_policy_core::config::PolicySet;
use mcp_policy_core::limits::MemoryStore;

use super::{decide, shown, Caller, Target};

/// The lines for a batch `body` (none when it is no JSON array): the messages, each decided alone
/// with a store of its own, at `now_ms`.
pub(super) fn lines(set: &PolicySet, body: &[u8], caller: &Caller<'_>, to: &Target, now_ms: u64) -> String {
    let Ok(serde_json::Value::Array(messages)) = serde_json::from_slice::<serde_json::Value>(body) else {
        return String::new();
    };
    let mut out = format!(
        "{:<10}{} in the batch, each decided here as if sent alone (a refused message refuses the whole batch):\n",
        "messages:",
        messages.len()
    );
    for (i, message) in messages.iter().enumerate() {
        let (_, o) = decide(set, message.to_string().as_bytes(), caller, to, &MemoryStore::new(), now_ms);
        let d = &o.decision;
        let what = match (&d.method, &d.tool) {
            (Some(m), Some(t)) => format!("{m} {t}"),
            (Some(m), None) => m.clone(),
            (None, _) => "(no method)".to_owned(),
        };
        // Named as `explain` names it alone (a call held for approval too).
        let (label, reason) = shown(&o);
        let mut line = format!("  [{i}] {what}: {label}");
        if let Some(rule) = &d.rule {
            line.push_str(&format!(" by {rule}"));
        }
        if let Some(reason) = reason {
            line.push_str(&format!(" ({reason})"));
        }
        out.push_str(&line);
        out.push('\n');
    }
    out
}
