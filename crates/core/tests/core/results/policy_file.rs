//! `tools.NAME.result` and `tools.NAME.pin` in the policy: compiled once, errors with their paths.

use super::{load_errors, policy};
use mcp_policy_core::terms::PinMode;

const READ_FILE: &str = r#"{"version":"1","tools":{"read_file":{"result":{
    "max_bytes": 65536,
    "deny_if": [{"regex": "-----BEGIN [A-Z ]*PRIVATE KEY-----", "reason": "a private key in a tool result"}],
    "redact":  [{"regex": "AKIA[0-9A-Z]{16}", "with": "[redacted]"}]}}}}"#;

#[test]
fn result_rules_compile_with_their_paths() {
    let p = policy(READ_FILE);
    let rules = p.result_rules("read_file").unwrap();
    assert_eq!(rules.max_bytes, Some(65536));
    assert_eq!(rules.deny_if.len(), 1);
    assert_eq!(rules.deny_if[0].reason, "a private key in a tool result");
    assert_eq!(rules.deny_path(0), "tools.read_file.result.deny_if[0]");
    assert_eq!(rules.redact[0].with, "[redacted]");
    assert!(p.has_result_rules());
    assert_eq!(p.all_result_rules().len(), 1);
    assert!(!policy(r#"{"version":"1","tools":{"a":{}}}"#).has_result_rules());
    assert_eq!(p.gateway.pins, PinMode::Enforce);
}

#[test]
fn result_rules_errors_name_their_json_path() {
    let bad = r#"{"version":"1","tools":{"t":{"result":{"max_bytes":0,
        "deny_if":[{"regex":"(","reason":"r"},{"regex":"a*"}],
        "redact":[{"regex":"x{99999999}","with":""}]}}}}"#;
    let errs = load_errors(bad);
    let paths: Vec<&str> = errs.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(
        paths,
        [
            "tools.t.result.max_bytes",
            "tools.t.result.deny_if[0].regex",
            "tools.t.result.deny_if[1].regex",
            "tools.t.result.redact[0].regex"
        ]
    );
    assert_eq!(errs[2].1, "the regex matches the empty text");
    assert!(errs[1].1.starts_with("invalid regex: "), "{}", errs[1].1);
    // Unknown keys are refused, with their path.
    let unknown = load_errors(r#"{"version":"1","tools":{"t":{"result":{"deny_if":[{"regex":"a","why":"b"}]}}}}"#);
    assert_eq!(unknown[0].0, "tools.t.result.deny_if[0].why");
    assert!(unknown[0].1.contains("unknown field `why`"), "{}", unknown[0].1);
    let unknown = load_errors(r#"{"version":"1","tools":{"t":{"result":{"max":1}}}}"#);
    assert_eq!(unknown[0].0, "tools.t.result.max");
    let missing = load_errors(r#"{"version":"1","tools":{"t":{"result":{"redact":[{"regex":"a"}]}}}}"#);
    assert_eq!(missing[0].0, "tools.t.result.redact[0]");
    assert!(missing[0].1.contains("missing field `with`"), "{}", missing[0].1);
}

#[test]
fn pins_are_sha256_and_64_lowercase_hex_digits() {
    let hex = "ab".repeat(32);
    let p =
        policy(&format!(r#"{{"version":"1","tools":{{"t":{{"pin":"sha256:{hex}"}}}},"gateway":{{"pins":"report"}}}}"#));
    assert_eq!(p.tool_rule("t").unwrap().pin, Some([0xab; 32]));
    assert_eq!(p.gateway.pins, PinMode::Report);
    for bad in [hex.to_uppercase(), hex.clone(), format!("sha256:{}", &hex[..62]), format!("sha1:{hex}")] {
        let errs = load_errors(&format!(r#"{{"version":"1","tools":{{"t":{{"pin":"{bad}"}}}}}}"#));
        assert_eq!(errs[0].0, "tools.t.pin", "{bad}");
    }
    let errs = load_errors(r#"{"version":"1","gateway":{"pins":"warn"}}"#);
    assert_eq!(errs[0].0, "gateway.pins");
}
