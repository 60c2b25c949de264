//! Audit lines: argument keys not values, bounded sizes, no forged log lines.

use super::{policy, post, T0};
use mcp_policy_core::limits::MemoryStore;
use mcp_policy_core::outcome::audit;
use mcp_policy_core::pipeline;
use serde_json::{json, Value};

#[test]
fn audit_lines_carry_keys_not_values() {
    let p = policy("");
    let s = MemoryStore::new();
    let body = r#"{"jsonrpc":"2.0","id":"a-1","method":"tools/call","params":{"name":"reboot_vm","arguments":{"node":"pve","vmid":100,"secret":"hunter2"}}}"#;
    let o = pipeline::on_body(&p, &post(&p, "abc"), body.as_bytes(), &s, T0);
    let line = o.decision.audit_json("2026-11-30T09:00:00.000Z", Some("rid-1"));
    assert_eq!(
        serde_json::from_str::<Value>(&line).unwrap(),
        json!({"ts":"2026-11-30T09:00:00.000Z","decision":"denied","error":"denied","method":"tools/call","tool":"reboot_vm",
               "rule":"default","reason":"not allowed by policy (default: deny)","grant":"sha256:ba7816bf8f01","id":"a-1",
               "arg_keys":["node","vmid","secret"],"request_id":"rid-1"})
    );
    assert!(!line.contains("hunter2") && !line.contains("pve"));
}

#[test]
fn audit_lines_and_log_fields_are_bounded_and_cannot_forge_lines() {
    let p = policy("");
    let s = MemoryStore::new();
    let long_id = "9".repeat(5000);
    let keys: String = (0..100).map(|i| format!("\"k{i}\":1")).collect::<Vec<_>>().join(",");
    let name = format!("x\n[info] forged\u{1b}[31m\u{2028}{}", "y".repeat(1000));
    let body = format!(
        r#"{{"jsonrpc":"2.0","id":{long_id},"method":"tools/call","params":{{"name":{},"arguments":{{{keys}}}}}}}"#,
        serde_json::to_string(&name).unwrap()
    );
    let o = pipeline::on_body(&p, &post(&p, "a"), body.as_bytes(), &s, T0);
    let line = o.decision.audit_json("t", None);
    assert!(line.len() < 2000, "audit line is {} bytes", line.len());
    let v: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["id_bytes"], 5000);
    assert_eq!(v["arg_keys"].as_array().unwrap().len(), 32);
    assert_eq!(v["arg_keys_total"], 100);
    assert_eq!(v["tool"].as_str().unwrap().chars().count(), 257);
    let safe = audit::log_safe(&name);
    assert!(safe.starts_with("x\\u{a}[info] forged\\u{1b}[31m\\u{2028}yyy"), "{safe}");
    assert!(!safe.contains('\n') && !safe.contains('\u{1b}') && safe.chars().count() < 160);
}

#[test]
fn truncate_and_log_safe_at_their_caps() {
    // Within the byte cap: as it is. Over it in bytes but not in characters: as it is too.
    assert_eq!(audit::truncate("abc", 3), "abc");
    assert_eq!(audit::truncate("abcd", 3), "abc…");
    assert_eq!(audit::truncate("ééé", 3), "ééé");
    assert_eq!(audit::truncate("éééé", 3), "ééé…");
    assert_eq!(audit::truncate("", 0), "");
    assert_eq!(audit::truncate("a", 0), "…");
    let a128 = "a".repeat(128);
    assert_eq!(audit::log_safe(&a128), a128);
    assert_eq!(audit::log_safe(&"a".repeat(129)), format!("{a128}…"));
    assert_eq!(audit::log_safe(&"é".repeat(128)), "é".repeat(128));
    assert_eq!(audit::log_safe(&"é".repeat(129)), format!("{}…", "é".repeat(128)));
    assert_eq!(audit::log_safe("a\u{7f}b"), "a\\u{7f}b");
    assert_eq!(audit::log_safe(&format!("{}\u{7f}", "a".repeat(127))), format!("{}\\u{{7f}}", "a".repeat(127)));
    assert_eq!(audit::log_safe(" ~"), " ~");
    assert_eq!(audit::log_safe("\u{1f}\u{85}\u{2029}"), "\\u{1f}\\u{85}\\u{2029}");
}
