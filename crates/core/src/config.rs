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

// The errors that name these limits, as literals: each `format!` costs the wasm module bytes
// (`tests` keeps them in step with the limits).
/// A byte limit outside 1 to [`MAX_BODY_BYTES_CEILING`].
const BYTE_LIMIT_RANGE: &str = "must be between 1 and 67108864";
/// A regex longer than [`MAX_REGEX_LEN`].
const REGEX_TOO_LONG: &str = "regex longer than 1024 bytes";
/// A sliding limit's `max` over [`MAX_SLIDING_MAX`].
const SLIDING_MAX_TOO_LARGE: &str = "a sliding limit keeps one timestamp per call, so max is at most 1000";
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
    json::parse(bytes)
        .map_err(|e| ConfigErrors(vec![err(".", format!("not a strict JSON document: {}", syntax(&e, bytes)))]))
}

/// Where the policy text breaks JSON, by line and column of that text: the policy usually sits
/// inside Envoy's YAML, whose lines are others. Outside the wasm module a repeated member name is
/// named with both its places (the parser reports the object holding them); the module leaves it
/// out for its size, and `mcp-policy check` shows both.
fn syntax(e: &json::ParseError, bytes: &[u8]) -> String {
    const WITHIN: &str = " of the policy text";
    #[cfg(not(target_arch = "wasm32"))]
    if let Some((repeat, earlier)) = json::repeated_name(bytes, e) {
        use crate::wire::textpos::{line_col, visible};
        let shown = |at: usize| {
            let name = json::name_at(bytes, at).unwrap_or_default();
            let mut text: String = name.chars().take(64).map(visible).collect();
            if name.chars().nth(64).is_some() {
                text.push('…');
            }
            let place = line_col(bytes, at);
            (text, place.line, place.column)
        };
        let ((name, line, column), (first, first_line, first_column)) = (shown(repeat), shown(earlier));
        let what = e.kind.what();
        return if e.kind == json::ParseErrorKind::DuplicateKey {
            format!(
                "{what} \"{name}\" at line {line}, column {column}{WITHIN}, first at line {first_line}, column \
                 {first_column}"
            )
        } else {
            format!(
                "{what}: \"{name}\" at line {line}, column {column}{WITHIN}, and \"{first}\" at line {first_line}, \
                 column {first_column}"
            )
        };
    }
    crate::wire::textpos::describe(e, bytes, WITHIN)
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
mod tests;
