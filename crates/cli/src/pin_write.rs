//! `mcp-policy pin URL --write POLICY.json`: add the pins to a policy file. Every tool the policy
//! lists under `tools` gets its `pin` (replacing an older one). Every other listed tool is
//! recorded under `pins` with its pin and its annotations (replacing an older entry): `pins`
//! grants nothing by itself, so writing pins never allows a tool; only the policy's own
//! `default_for` rules may then decide such a tool by its reviewed annotations. The result must
//! load (exactly as the filter loads it) before the file is replaced; member order is kept.

use std::collections::BTreeMap;

use mcp_policy_core::wire::json::{self, Json};

use crate::{Failure, Report, INVALID_POLICY, OK, USAGE_OR_IO};

/// A listed tool's pin, and its annotations as listed (`pins.NAME.annotations`).
pub struct Listed {
    pub pin: String,
    pub annotations: Option<Json>,
}

fn fail(status: u8, message: impl std::fmt::Display) -> Failure {
    Failure { status, message: format!("mcp-policy pin: {message}") }
}

/// The object member `key` of `root`, added empty if absent.
fn section<'a>(
    root: &'a mut Vec<(String, Json)>,
    key: &str,
    path: &str,
) -> Result<&'a mut Vec<(String, Json)>, Failure> {
    if !root.iter().any(|(k, _)| k == key) {
        root.push((key.into(), Json::Object(Vec::new())));
    }
    match root.iter_mut().find(|(k, _)| k == key) {
        Some((_, Json::Object(members))) => Ok(members),
        _ => Err(fail(INVALID_POLICY, format!("{path}: {key} is not an object"))),
    }
}

pub fn write(path: &str, pins: &BTreeMap<String, Listed>) -> Result<Report, Failure> {
    let text = std::fs::read(path).map_err(|e| fail(USAGE_OR_IO, format!("cannot read {path}: {e}")))?;
    let mut doc = json::parse(&text).map_err(|e| fail(INVALID_POLICY, format!("{path}: not strict JSON: {e}")))?;
    let Json::Object(root) = &mut doc else { return Err(fail(INVALID_POLICY, format!("{path}: not an object"))) };
    let mut listed = Vec::new();
    let tools = section(root, "tools", path)?;
    for (name, p) in pins {
        match tools.iter_mut().find(|(k, _)| k == name) {
            Some((_, Json::Object(rule))) => {
                match rule.iter_mut().find(|(k, _)| k == "pin") {
                    Some((_, v)) => *v = Json::String(p.pin.clone()),
                    None => rule.push(("pin".into(), Json::String(p.pin.clone()))),
                }
                listed.push(name.as_str());
            }
            Some(_) => return Err(fail(INVALID_POLICY, format!("{path}: tools.{name} is not an object"))),
            None => {}
        }
    }
    let recorded = section(root, "pins", path)?;
    // A tool now listed under `tools` has its pin there (one tool, one pin).
    recorded.retain(|(k, _)| !listed.contains(&k.as_str()));
    for (name, p) in pins.iter().filter(|(n, _)| !listed.contains(&n.as_str())) {
        let mut entry = vec![("pin".to_owned(), Json::String(p.pin.clone()))];
        if let Some(a) = &p.annotations {
            entry.push(("annotations".into(), a.clone()));
        }
        match recorded.iter_mut().find(|(k, _)| k == name) {
            Some((_, v)) => *v = Json::Object(entry),
            None => recorded.push((name.clone(), Json::Object(entry))),
        }
    }
    if recorded.is_empty() {
        root.retain(|(k, _)| k != "pins");
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
    let (n, m) = (listed.len(), pins.len() - listed.len());
    Ok(Report {
        stdout: format!("{path}: {n} pins written in tools, {m} in pins (reviewed definitions; they allow nothing)\n"),
        stderr: String::new(),
        status: OK,
    })
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

#[cfg(test)]
mod tests {
    use super::*;

    fn listed(pin: char, annotations: Option<&str>) -> Listed {
        Listed {
            pin: format!("sha256:{}", pin.to_string().repeat(64)),
            annotations: annotations.map(|a| json::parse(a.as_bytes()).unwrap()),
        }
    }

    #[test]
    fn listed_tools_get_their_pin_others_are_recorded_in_pins_with_their_annotations() {
        let dir = std::env::temp_dir().join(format!("mcp-policy-pin-write-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("policy.json");
        let path = path.to_str().unwrap();
        std::fs::write(
            path,
            r#"{"version": "1", "default": "deny", "tools": {"start_vm": {"action": "deny"}},
                "pins": {"start_vm": {"pin": "sha256:0000000000000000000000000000000000000000000000000000000000000000"},
                         "old": {"pin": "sha256:1111111111111111111111111111111111111111111111111111111111111111"}},
                "default_for": [{"when": {"readOnlyHint": true}, "action": "allow"}]}"#,
        )
        .unwrap();
        let mut pins = BTreeMap::new();
        pins.insert("start_vm".to_owned(), listed('a', Some(r#"{"destructiveHint":false}"#)));
        pins.insert("list_vms".to_owned(), listed('b', Some(r#"{"readOnlyHint":true,"title":"VMs"}"#)));
        pins.insert("old".to_owned(), listed('c', None));
        let report = write(path, &pins).unwrap_or_else(|e| panic!("{}", e.message));
        assert_eq!(
            report.stdout,
            format!("{path}: 1 pins written in tools, 2 in pins (reviewed definitions; they allow nothing)\n")
        );
        let a = "a".repeat(64);
        let (b, c) = ("b".repeat(64), "c".repeat(64));
        assert_eq!(
            std::fs::read_to_string(path).unwrap(),
            format!(
                r#"{{
  "version": "1",
  "default": "deny",
  "tools": {{
    "start_vm": {{
      "action": "deny",
      "pin": "sha256:{a}"
    }}
  }},
  "pins": {{
    "old": {{
      "pin": "sha256:{c}"
    }},
    "list_vms": {{
      "pin": "sha256:{b}",
      "annotations": {{
        "readOnlyHint": true,
        "title": "VMs"
      }}
    }}
  }},
  "default_for": [
    {{
      "when": {{
        "readOnlyHint": true
      }},
      "action": "allow"
    }}
  ]
}}
"#
            )
        );
        // Recorded, not allowed: the written policy denies list_vms until default_for's verified allow.
        let policy = mcp_policy_core::config::load(&std::fs::read(path).unwrap()).unwrap();
        assert!(policy.tool_rule("list_vms").is_none());
        assert_eq!(policy.pinned_tools().count(), 2);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_policy_that_would_not_load_is_left_as_it_was() {
        let dir = std::env::temp_dir().join(format!("mcp-policy-pin-bad-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("policy.json");
        let path = path.to_str().unwrap();
        let text = r#"{"version": "1", "default": "allow"}"#;
        std::fs::write(path, text).unwrap();
        let mut pins = BTreeMap::new();
        pins.insert("t".to_owned(), listed('a', Some(r#"{"readOnlyHint":"yes"}"#)));
        let Err(e) = write(path, &pins) else { panic!("written") };
        assert_eq!(e.status, INVALID_POLICY);
        assert!(e.message.contains("pins.t.annotations.readOnlyHint: must be a boolean"), "{}", e.message);
        assert_eq!(std::fs::read_to_string(path).unwrap(), text);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
