//! `mcp-policy pin URL --write POLICY.json`: add the pins to a policy file. Every tool the policy
//! lists under `tools` gets its `pin` (replacing an older one). A listed tool the policy does not
//! name is added as `{"pin": …}` only under `default: "allow"`: under `default: "deny"` a new
//! entry would allow it, so it is left out and named on stderr. The result must load (exactly as
//! the filter loads it) before the file is replaced; member order is kept.

use std::collections::BTreeMap;

use mcp_policy_core::wire::json::{self, Json};

use crate::{Failure, Report, INVALID_POLICY, OK, USAGE_OR_IO};

fn fail(status: u8, message: impl std::fmt::Display) -> Failure {
    Failure { status, message: format!("mcp-policy pin: {message}") }
}

pub fn write(path: &str, pins: &BTreeMap<String, String>) -> Result<Report, Failure> {
    let text = std::fs::read(path).map_err(|e| fail(USAGE_OR_IO, format!("cannot read {path}: {e}")))?;
    let mut doc = json::parse(&text).map_err(|e| fail(INVALID_POLICY, format!("{path}: not strict JSON: {e}")))?;
    let default_allow = doc.get("default").and_then(Json::as_str) == Some("allow");
    let Json::Object(root) = &mut doc else { return Err(fail(INVALID_POLICY, format!("{path}: not an object"))) };
    if !root.iter().any(|(k, _)| k == "tools") {
        root.push(("tools".into(), Json::Object(Vec::new())));
    }
    let Some((_, Json::Object(tools))) = root.iter_mut().find(|(k, _)| k == "tools") else {
        return Err(fail(INVALID_POLICY, format!("{path}: tools is not an object")));
    };
    let mut skipped = Vec::new();
    for (name, p) in pins {
        match tools.iter_mut().find(|(k, _)| k == name) {
            Some((_, Json::Object(rule))) => match rule.iter_mut().find(|(k, _)| k == "pin") {
                Some((_, v)) => *v = Json::String(p.clone()),
                None => rule.push(("pin".into(), Json::String(p.clone()))),
            },
            Some(_) => return Err(fail(INVALID_POLICY, format!("{path}: tools.{name} is not an object"))),
            None if default_allow => {
                tools.push((name.clone(), Json::Object(vec![("pin".into(), Json::String(p.clone()))])))
            }
            None => skipped.push(name.as_str()),
        }
    }
    let mut out = String::new();
    pretty(&mut out, &doc, 0);
    out.push('\n');
    if let Err(e) = mcp_policy_core::config::load(out.as_bytes()) {
        return Err(fail(INVALID_POLICY, format!("{path}: the policy with its pins does not load: {e}")));
    }
    let tmp = format!("{path}.pin.tmp");
    std::fs::write(&tmp, &out)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| fail(USAGE_OR_IO, format!("cannot write {path}: {e}")))?;
    let mut stderr = String::new();
    for name in &skipped {
        stderr.push_str(&format!(
            "mcp-policy pin: {name} not added: the policy does not list it, and under default \"deny\" a new entry would allow it\n"
        ));
    }
    let added = pins.len() - skipped.len();
    Ok(Report { stdout: format!("{path}: {added} pins written\n"), stderr, status: OK })
}

/// `v` as indented JSON (two spaces), members in their order.
fn pretty(out: &mut String, v: &Json, depth: usize) {
    let pad = |out: &mut String, d: usize| out.push_str(&"  ".repeat(d));
    match v {
        Json::Array(items) if !items.is_empty() => {
            out.push_str("[\n");
            for (i, item) in items.iter().enumerate() {
                pad(out, depth + 1);
                pretty(out, item, depth + 1);
                out.push_str(if i + 1 < items.len() { ",\n" } else { "\n" });
            }
            pad(out, depth);
            out.push(']');
        }
        Json::Object(members) if !members.is_empty() => {
            out.push_str("{\n");
            for (i, (k, item)) in members.iter().enumerate() {
                pad(out, depth + 1);
                json::write_str(out, k);
                out.push_str(": ");
                pretty(out, item, depth + 1);
                out.push_str(if i + 1 < members.len() { ",\n" } else { "\n" });
            }
            pad(out, depth);
            out.push('}');
        }
        other => json::write(out, other),
    }
}
