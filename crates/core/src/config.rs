//! The policy file: PolicyLayer's `policy.json`, plus one extra top-level key, `gateway`, for
//! deployment settings. Read once, in `on_configure`: the strict parser ([`crate::wire::json`]) checks the
//! text, `read` reads its tree into the shapes of `spec`, and [`compile()`] turns them into a
//! [`Policy`].
//!
//! Every object rejects unknown fields (`deny_unknown_fields`): a misspelt key in a security policy
//! must fail loudly, never be ignored. Every error names the JSON path of the offending value.
//!
//! Layer `config` (crate docs); may use: `terms`, `wire`, `identity`, `limits`, `policy`, `rls`.

use std::fmt;

use crate::policy::Policy;
use crate::wire::json;

mod compile;
mod read;
mod set;
mod spec;

pub use compile::{compile, sessions_unbound};
pub use read::{JsonValue, Map};
pub use set::spec::PolicySetSpec;
pub use set::{AttachRule, ContainRule, Matcher, PolicySet, Shared, Why};
// The policy document's root type, the schema's root (`mcp-policy schema`); the other spec types are
// read only through it.
pub use spec::PolicySpec;

/// A policy that cannot be loaded: the JSON path of the problem and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// Dotted path from the document root, e.g. `tools.vm_agent_exec.limits[0].max`; `.` for the root.
    pub path: String,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The root has no name of its own in the dotted path: say it in words.
        let whole = if self.path == "." { " (the whole document)" } else { "" };
        write!(f, "invalid policy at {}{whole}: {}", self.path, self.message)
    }
}

/// Every problem found in a policy. Type errors stop parsing at the first; all later checks
/// (limits, conditions, gateway values) are reported together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl ConfigErrors {
    /// The first error (there is always at least one).
    pub fn first(&self) -> Option<&ConfigError> {
        self.0.first()
    }
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

fn err(path: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError { path: path.into(), message: message.into() }
}

/// Records a problem at `path`: the compiler does so in about 75 places, each of which would
/// otherwise hold its own `Vec::push`.
fn fail(errs: &mut Vec<ConfigError>, path: impl Into<String>, message: impl Into<String>) {
    errs.push(err(path, message));
}

/// The warning of a policy that admits sessions without binding them ([`sessions_unbound`]): what
/// it risks and what to set.
pub const UNBOUND_SESSIONS_WARNING: &str = "gateway.session_key is not set: session ids (Mcp-Session-Id, \
     Last-Event-ID, the HTTP+SSE session_id) are not bound to their grant, so a grant that learns another \
     grant's session id can act in that session (MCP 2024-11-05 to 2025-11-25, accepted by \
     gateway.protocol_versions). Set gateway.session_key.current_env to an \
     environment variable holding a random key of at least 32 bytes (e.g. head -c 48 /dev/urandom | base64) \
     and pass it to the wasm VM (vm_config.environment_variables.host_env_keys; the native build reads \
     Envoy's own environment), or accept only 2026-07-28";

/// What a valid policy should still change, one line each: logged as warnings when Envoy loads
/// it, and printed by `mcp-policy check`.
pub fn warnings(policy: &Policy) -> impl Iterator<Item = &'static str> {
    sessions_unbound(&policy.gateway).then_some(UNBOUND_SESSIONS_WARNING).into_iter()
}

/// Default for `gateway.max_body_bytes`: 1 MiB.
pub const DEFAULT_MAX_BODY_BYTES: u64 = 1024 * 1024;
/// Default for `gateway.max_response_bytes`: 2 MiB, below the 4 MiB stream buffer limit that the
/// shipped configs give Envoy (buffer filter `max_request_bytes`), so the filter answers first.
pub const DEFAULT_MAX_RESPONSE_BYTES: u64 = 2 * 1024 * 1024;
/// Default for `gateway.max_tracked_grants`.
pub const DEFAULT_MAX_TRACKED_GRANTS: u64 = 100_000;
/// `gateway.max_body_bytes` may not exceed this (64 MiB): the filter buffers the whole body.
pub const MAX_BODY_BYTES_CEILING: u64 = 64 * 1024 * 1024;
/// Largest `max` of a sliding limit: it stores one 8-byte timestamp per admitted call.
pub const MAX_SLIDING_MAX: u64 = 1000;

/// Longest regex source accepted in a condition, in bytes.
pub const MAX_REGEX_LEN: usize = 1024;
/// Default `approval_timeout` of a `require_approval` tool.
pub const DEFAULT_APPROVAL_TIMEOUT: &str = "10m";
/// Longest `approval_timeout`: 7 days, in seconds.
pub const MAX_APPROVAL_TIMEOUT_SECONDS: u64 = 7 * 86_400;
/// Longest `gateway.approval.timeout`, in milliseconds: the service holds a call at most 300 s.
pub const MAX_APPROVAL_CALLOUT_MS: u64 = 301_000;

/// Parse and compile a policy document (the Envoy plugin configuration bytes).
///
/// Errors: the first problem found, with its JSON path: malformed or duplicate-key JSON, unknown
/// fields, wrong types, `version` other than "1", `max` 0, empty names, bad conditions (path, op,
/// value shape, regex), bad `gateway` values.
pub fn load(bytes: &[u8]) -> Result<Policy, ConfigErrors> {
    load_with_env(bytes, &|_| None)
}

/// [`load`], with `env` giving the values of environment variables that the policy names
/// (`gateway.session_key.current_env`, `previous_env`); the host passes the wasm VM's environment.
pub fn load_with_env(bytes: &[u8], env: &dyn Fn(&str) -> Option<String>) -> Result<Policy, ConfigErrors> {
    let doc = parse(bytes)?;
    // Arrays never stand in for objects, and enums are strings only: see `read`.
    let mut spec: PolicySpec = read::from_json(&doc).map_err(|e| ConfigErrors(vec![err(e.path(), e.message())]))?;
    resolve_env(spec.gateway.as_mut(), env)?;
    compile(spec)
}

/// [`load_with_env`] for the whole plugin configuration: a plain policy (one policy for every
/// caller) or, when the document has a top-level `policies`, a policy set (see `set`).
pub fn load_set_with_env(bytes: &[u8], env: &dyn Fn(&str) -> Option<String>) -> Result<PolicySet, ConfigErrors> {
    let doc = parse(bytes)?;
    if doc.get("policies").is_none() {
        let mut spec: PolicySpec = read::from_json(&doc).map_err(|e| ConfigErrors(vec![err(e.path(), e.message())]))?;
        resolve_env(spec.gateway.as_mut(), env)?;
        return compile(spec).map(PolicySet::single);
    }
    let mut spec: PolicySetSpec = read::from_json(&doc).map_err(|e| ConfigErrors(vec![err(e.path(), e.message())]))?;
    resolve_env(spec.gateway.as_mut(), env)?;
    set::compile(spec)
}

/// [`load_set_with_env`] without environment variables.
pub fn load_set(bytes: &[u8]) -> Result<PolicySet, ConfigErrors> {
    load_set_with_env(bytes, &|_| None)
}

fn parse(bytes: &[u8]) -> Result<json::Json, ConfigErrors> {
    // Same strict reading as request bodies: a duplicate key in a policy is as ambiguous as in a call.
    json::parse(bytes).map_err(|e| {
        ConfigErrors(vec![err(
            ".",
            format!("not a strict JSON document: {}", crate::wire::textpos::describe(&e, bytes)),
        )])
    })
}

/// Resolve `gateway.session_key.current_env` and `previous_env` through `env`.
fn resolve_env(
    gateway: Option<&mut spec::GatewaySpec>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<(), ConfigErrors> {
    if let Some(k) = gateway.and_then(|g| g.session_key.as_mut()) {
        let mut errs = Vec::new();
        for (value, name, path) in [
            (&mut k.current, &k.current_env, "gateway.session_key.current_env"),
            (&mut k.previous, &k.previous_env, "gateway.session_key.previous_env"),
        ] {
            let Some(name) = name else { continue };
            if value.is_some() {
                errs.push(err(path, "give the key inline or by environment variable, not both"));
            }
            match env(name) {
                Some(v) => *value = Some(v),
                None => errs.push(err(
                    path,
                    format!(
                        "environment variable {name} is not set (the wasm build reads the VM's: \
                         vm_config.environment_variables; the native build Envoy's own)"
                    ),
                )),
            }
        }
        if !errs.is_empty() {
            return Err(ConfigErrors(errs));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
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
        assert!(load_err(r#"{"version":"1","tools":{"x":{"actoin":"deny"}}}"#)
            .message
            .contains("unknown field `actoin`"));
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
            load_err(r#"{"version":"1","tools":{"x":{"require":[{"path":"args.c","op":"eq","value":1,"extra":0}]}}}"#)
                .path,
            "tools.x.require[0].extra"
        );
        assert_eq!(load_err(r#"{"version":"1","gateway":{"max_body_bytes":0}}"#).path, "gateway.max_body_bytes");
        assert_eq!(
            load_err(r#"{"version":"1","gateway":{"grant_header":"Authorization"}}"#).path,
            "gateway.grant_header"
        );
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
            (
                r#"{"version":"1","gateway":{"grants":[["ab","c"]]}}"#,
                "gateway.grants[0]",
                "must be an object, not array",
            ),
            (r#"["1"]"#, ".", "must be an object, not array"),
        ];
        for (text, path, message) in cases {
            assert_eq!(load_err(text), ConfigError { path: path.into(), message: message.into() }, "{text}");
        }
    }

    #[test]
    fn duplicate_keys_in_a_policy_are_refused() {
        let e = load_err(r#"{"version":"1","tools":{"x":{},"x":{"action":"deny"}}}"#);
        assert_eq!(e.path, ".");
        assert!(e.message.contains("duplicate object key"), "{e}");
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
                message: "must use https (RFC 9728 §3); http is accepted for localhost, 127.x.y.z and [::1] only"
                    .into()
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
        let audit =
            |gw: &str| load(format!(r#"{{"version":"1","gateway":{{{gw}}}}}"#).as_bytes()).map(|p| p.gateway.audit);
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
        let fs = |gw: &str| {
            load(format!(r#"{{"version":"1","gateway":{{{gw}}}}}"#).as_bytes()).map(|p| p.gateway.filter_state)
        };
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
}
