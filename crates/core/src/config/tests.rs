//! Tests of `config::load`: what a policy loads to, and each error with its JSON path.

use super::*;
use crate::policy::GrantSource;
use crate::terms::Action;
use crate::terms::Algorithm;
use crate::terms::Scope;
use crate::terms::Window;

fn load_err(text: &str) -> ConfigError {
    load(text.as_bytes()).unwrap_err().0.remove(0)
}

#[test]
fn every_error_after_parsing_is_reported() {
    let e = load(
        br#"{"version":"2","hide":[""],"tools":{"a":{"limits":[{"counter":"c","window":"day","max":0}],
            "require":[{"path":"x","op":"eq","value":1}]}},"gateway":{"max_body_bytes":0}}"#,
    )
    .unwrap_err();
    let paths: Vec<&str> = e.0.iter().map(|e| e.path.as_str()).collect();
    assert_eq!(
        paths,
        ["version", "hide[0]", "tools.a.require[0].path", "tools.a.limits[0].max", "gateway.max_body_bytes"]
    );
    assert!(e.to_string().starts_with("invalid policy at version: must be \"1\"; invalid policy at hide[0]"));
}

#[test]
fn seed_policy_loads() {
    let p = load(br#"{"version":"1","default":"deny","tools":{"vm_agent_exec":{"limits":[{"counter":"vm_agent_exec_rate","window":"minute","max":10,"scope":"grant"}]}}}"#)
        .unwrap();
    assert_eq!(p.default, Action::Deny);
    assert_eq!(p.limits.len(), 1);
    assert_eq!(p.limits[0].max, 10);
    assert_eq!(p.limits[0].window, Window::Minute);
    assert_eq!(p.limits[0].scope, Scope::Grant);
    assert_eq!(p.limits[0].path, "tools.vm_agent_exec.limits[0]");
    assert_eq!(p.gateway.max_body_bytes, 1_048_576);
    assert_eq!(p.gateway.grant, GrantSource::Bearer);
}

#[test]
fn errors_name_the_json_path() {
    assert_eq!(load_err(r#"{"version":"1","tools":{"x":{"actoin":"deny"}}}"#).path, "tools.x.actoin");
    assert!(load_err(r#"{"version":"1","tools":{"x":{"actoin":"deny"}}}"#).message.contains("unknown field `actoin`"));
    assert_eq!(
        load_err(r#"{"version":"1","tools":{"x":{"limits":[{"counter":"c","window":"fortnight","max":1}]}}}"#).path,
        "tools.x.limits[0].window"
    );
    assert_eq!(
        load_err(r#"{"version":"1","tools":{"x":{"limits":[{"counter":"c","window":"minute","max":0}]}}}"#),
        ConfigError { path: "tools.x.limits[0].max".into(), message: "must be at least 1".into() }
    );
    assert_eq!(
        load_err(r#"{"version":"1","tools":{"x":{"limits":[{"counter":"c","window":"minute","max":-1}]}}}"#).path,
        "tools.x.limits[0].max"
    );
    assert_eq!(load_err(r#"{"version":"2"}"#).path, "version");
    assert_eq!(load_err(r#"{"default":"deny"}"#).path, ".");
    assert_eq!(load_err(r#"{"version":"1","defualt":"deny"}"#).path, "defualt");
    assert_eq!(load_err(r#"{"version":"1","default":"maybe"}"#).path, "default");
    assert_eq!(
        load_err(r#"{"version":"1","tools":{"x":{"require":[{"path":"args.a","op":"like","value":1}]}}}"#).path,
        "tools.x.require[0].op"
    );
    assert_eq!(
        load_err(r#"{"version":"1","tools":{"x":{"require":[{"path":"vmid","op":"eq","value":1}]}}}"#),
        ConfigError { path: "tools.x.require[0].path".into(), message: "must start with \"args.\"".into() }
    );
    assert_eq!(
        load_err(r#"{"version":"1","tools":{"x":{"deny_if":[{"path":"args.c","op":"regex","value":"("}]}}}"#).path,
        "tools.x.deny_if[0].value"
    );
    assert_eq!(
        load_err(r#"{"version":"1","tools":{"x":{"deny_if":[{"path":"args.c","op":"in","value":5}]}}}"#),
        ConfigError { path: "tools.x.deny_if[0].value".into(), message: "op in needs an array".into() }
    );
    assert_eq!(
        load_err(r#"{"version":"1","tools":{"x":{"require":[{"path":"args.c","op":"lt","value":"5"}]}}}"#).path,
        "tools.x.require[0].value"
    );
    assert_eq!(
        load_err(r#"{"version":"1","tools":{"x":{"require":[{"path":"args.c","op":"eq"}]}}}"#).path,
        "tools.x.require[0].value"
    );
    assert_eq!(
        load_err(r#"{"version":"1","tools":{"x":{"require":[{"path":"args.c","op":"exists","value":1}]}}}"#).path,
        "tools.x.require[0].value"
    );
    assert_eq!(
        load_err(r#"{"version":"1","tools":{"x":{"require":[{"path":"args.c","op":"eq","value":1,"extra":0}]}}}"#).path,
        "tools.x.require[0].extra"
    );
    assert_eq!(load_err(r#"{"version":"1","gateway":{"max_body_bytes":0}}"#).path, "gateway.max_body_bytes");
    assert_eq!(load_err(r#"{"version":"1","gateway":{"grant_header":"Authorization"}}"#).path, "gateway.grant_header");
    assert_eq!(
        load_err(r#"{"version":"1","gateway":{"methods":{"tools/call":"allow"}}}"#).path,
        "gateway.methods.tools/call"
    );
    assert_eq!(load_err(r#"{"version":"1","gateway":{"colour":"red"}}"#).path, "gateway.colour");
    assert_eq!(load_err(r#"{"version":"1","hide":[""]}"#).path, "hide[0]");
    assert_eq!(
        load_err(r#"{"version":"1","all_tools":{"limits":[{"counter":"","window":"day","max":1}]}}"#).path,
        "all_tools.limits[0].counter"
    );
}

#[test]
fn arrays_never_stand_in_for_objects() {
    let cases = [
        (r#"{"version":"1","tools":{"x":["deny","why"]}}"#, "tools.x", "must be an object, not array"),
        (r#"{"version":"1","tools":{"x":[]}}"#, "tools.x", "must be an object, not array"),
        (r#"{"version":"1","gateway":[]}"#, "gateway", "must be an object, not array"),
        (
            r#"{"version":"1","all_tools":{"limits":[["c","minute",1,"grant"]]}}"#,
            "all_tools.limits[0]",
            "must be an object, not array",
        ),
        (
            r#"{"version":"1","tools":{"x":{"require":[["args.a","eq",1]]}}}"#,
            "tools.x.require[0]",
            "must be an object, not array",
        ),
        (r#"{"version":"1","gateway":{"grants":[["ab","c"]]}}"#, "gateway.grants[0]", "must be an object, not array"),
        (r#"["1"]"#, ".", "must be an object, not array"),
    ];
    for (text, path, message) in cases {
        assert_eq!(load_err(text), ConfigError { path: path.into(), message: message.into() }, "{text}");
    }
}

#[test]
fn duplicate_keys_in_a_policy_are_refused() {
    // Named, with both places, counted in the policy text (which sits in Envoy's YAML); a folded
    // pair names both spellings. A name's invisible characters show as `?`.
    let cases = [
        (
            "{\"version\":\"1\",\n\"tools\":{\"x\":{},\n \"x\":{\"action\":\"deny\"}}}",
            "not a strict JSON document: duplicate object key \"x\" at line 3, column 2 of the policy text, first at \
             line 2, column 10",
        ),
        (
            r#"{"version":"1","tools":{"Tool":{},"t\u200bool":{}}}"#,
            "not a strict JSON document: object keys equal after case folding or removing invisible characters: \
             \"t?ool\" at line 1, column 35 of the policy text, and \"Tool\" at line 1, column 25",
        ),
        (
            r#"{"version":"1","tools":{"x":{},}}"#,
            "not a strict JSON document: unexpected character at line 1, column 32 of the policy text",
        ),
    ];
    for (text, message) in cases {
        assert_eq!(load_err(text), ConfigError { path: ".".into(), message: message.into() }, "{text}");
    }
}

#[test]
fn sliding_limits_and_grant_registry() {
    let p = load(br#"{"version":"1","tools":{"x":{"limits":[{"counter":"c","window":"hour","max":1000,"algorithm":"sliding"}]}},
        "gateway":{"grants":[{"sha256":"BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD","label":"agent-a"}]}}"#)
        .unwrap();
    assert_eq!(p.limits[0].algorithm, Algorithm::Sliding);
    let id = crate::identity::grant::Grant::from_credential(b"abc").id;
    assert_eq!(p.gateway.grants.get(&id).map(String::as_str), Some("agent-a"));
    assert_eq!(
        load_err(r#"{"version":"1","tools":{"x":{"limits":[{"counter":"c","window":"hour","max":1001,"algorithm":"sliding"}]}}}"#).path,
        "tools.x.limits[0].max"
    );
    assert_eq!(
        load_err(r#"{"version":"1","gateway":{"grants":[{"sha256":"abc","label":"a"}]}}"#).path,
        "gateway.grants[0].sha256"
    );
    assert_eq!(
        load_err(r#"{"version":"1","gateway":{"grants":[{"sha256":"ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad","label":""}]}}"#).path,
        "gateway.grants[0].label"
    );
}

#[test]
fn resource_metadata_url_is_checked_at_load() {
    let url = "https://mcp.example.com/.well-known/oauth-protected-resource";
    let p = load(format!(r#"{{"version":"1","gateway":{{"resource_metadata_url":"{url}"}}}}"#).as_bytes()).unwrap();
    assert_eq!(p.gateway.resource_metadata_url.as_deref(), Some(url));
    assert_eq!(load(br#"{"version":"1"}"#).unwrap().gateway.resource_metadata_url, None);
    assert_eq!(
        load_err(r#"{"version":"1","gateway":{"resource_metadata_url":"http://mcp.example.com/x"}}"#),
        ConfigError {
            path: "gateway.resource_metadata_url".into(),
            message: "must use https (RFC 9728 §3); http is accepted for localhost, 127.x.y.z and [::1] only".into()
        }
    );
    assert_eq!(
        load_err(r#"{"version":"1","gateway":{"resource_metadata_url":"https://a.example/\""}}"#).path,
        "gateway.resource_metadata_url"
    );
    assert_eq!(
        load_err(r#"{"version":"1","gateway":{"resource_metadata_url":7}}"#).path,
        "gateway.resource_metadata_url"
    );
}

#[test]
fn gateway_audit_modes() {
    use crate::terms::AuditMode;
    let audit = |gw: &str| load(format!(r#"{{"version":"1","gateway":{{{gw}}}}}"#).as_bytes()).map(|p| p.gateway.audit);
    assert_eq!(audit(""), Ok(AuditMode::Log));
    assert_eq!(audit(r#""audit":null"#), Ok(AuditMode::Log));
    assert_eq!(audit(r#""audit":"log""#), Ok(AuditMode::Log));
    assert_eq!(audit(r#""audit":"access_log""#), Ok(AuditMode::AccessLog));
    assert_eq!(audit(r#""audit":"off""#), Ok(AuditMode::Off));
    assert_eq!(
        load_err(r#"{"version":"1","gateway":{"audit":"syslog"}}"#),
        ConfigError {
            path: "gateway.audit".into(),
            message: "unknown variant `syslog`, expected one of `log`, `access_log`, `off`".into()
        }
    );
    assert_eq!(load_err(r#"{"version":"1","gateway":{"audit":"Log"}}"#).path, "gateway.audit");
}

#[test]
fn gateway_filter_state() {
    let fs =
        |gw: &str| load(format!(r#"{{"version":"1","gateway":{{{gw}}}}}"#).as_bytes()).map(|p| p.gateway.filter_state);
    assert_eq!(fs(""), Ok(true));
    assert_eq!(fs(r#""filter_state":null"#), Ok(true));
    assert_eq!(fs(r#""filter_state":true"#), Ok(true));
    assert_eq!(fs(r#""filter_state":false"#), Ok(false));
    let e = load_err(r#"{"version":"1","gateway":{"filter_state":"off"}}"#);
    assert_eq!(e.path, "gateway.filter_state");
    assert_eq!(e.message, "invalid type: string \"off\", expected a boolean");
    assert_eq!(load_err(r#"{"version":"1","gateway":{"filterState":false}}"#).path, "gateway.filterState");
}

#[test]
fn default_is_deny_when_absent() {
    assert_eq!(load(br#"{"version":"1"}"#).unwrap().default, Action::Deny);
    assert_eq!(load(br#"{"version":"1","default":"allow"}"#).unwrap().default, Action::Allow);
}

#[test]
fn a_policy_needs_a_session_key_when_it_accepts_a_version_with_sessions() {
    const KEY: &str = "0123456789abcdef0123456789abcdef";
    let warned = |gw: &str| {
        let p = load_with_env(format!(r#"{{"version":"1","gateway":{{{gw}}}}}"#).as_bytes(), &|_| Some(KEY.into()))
            .unwrap();
        (sessions_unbound(&p.gateway), warnings(&p).collect::<Vec<_>>())
    };
    // Every version is accepted by default; three of them carry Mcp-Session-Id.
    assert_eq!(warned(""), (true, vec![UNBOUND_SESSIONS_WARNING]));
    for versions in [r#"["2025-03-26"]"#, r#"["2025-06-18","2026-07-28"]"#, r#"["2025-11-25"]"#] {
        assert!(warned(&format!(r#""protocol_versions":{versions}"#)).0, "{versions}");
    }
    // With a key (inline or by variable), or with only 2026-07-28 (no sessions), nothing to say.
    assert_eq!(warned(&format!(r#""session_key":{{"current":"{KEY}"}}"#)), (false, vec![]));
    assert_eq!(warned(r#""session_key":{"current_env":"MCPF_SESSION_KEY"}"#), (false, vec![]));
    assert_eq!(warned(r#""protocol_versions":["2026-07-28"]"#), (false, vec![]));
    // The warning says what to set.
    for piece in ["gateway.session_key.current_env", "at least 32 bytes", "host_env_keys", "2026-07-28"] {
        assert!(UNBOUND_SESSIONS_WARNING.contains(piece), "{piece}");
    }
}

#[test]
fn the_errors_naming_a_limit_name_it() {
    assert_eq!(super::BYTE_LIMIT_RANGE, format!("must be between 1 and {}", super::MAX_BODY_BYTES_CEILING));
    assert_eq!(super::REGEX_TOO_LONG, format!("regex longer than {} bytes", super::MAX_REGEX_LEN));
    assert_eq!(
        super::SLIDING_MAX_TOO_LARGE,
        format!("a sliding limit keeps one timestamp per call, so max is at most {}", super::MAX_SLIDING_MAX)
    );
}
