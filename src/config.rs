//! The policy file: PolicyLayer's `policy.json`, plus one extra top-level key, `gateway`, for
//! deployment settings. Parsed once into `…Spec` types, then compiled into a [`Policy`].
//!
//! Every object rejects unknown fields (`deny_unknown_fields`): a misspelt key in a security policy
//! must fail loudly, never be ignored. Every error names the JSON path of the offending value.

use std::collections::BTreeMap;
use std::fmt;

use serde::Deserialize;

use crate::conditions::{self, Condition, Op};
use crate::json::{self, Json};
use crate::policy::{
    Action, Algorithm, ApprovalMode, ApprovalService, Gateway, GrantSource, Limit, Mode, Policy, Scope, ToolRule,
    Window,
};

mod de;

pub use de::JsonValue;

/// The whole policy document.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct PolicySpec {
    /// Must be `"1"`.
    #[cfg_attr(feature = "schema", schemars(extend("const" = "1")))]
    pub version: String,
    /// What happens to a tool the policy does not list. Absent means `deny`.
    #[serde(default)]
    pub default: Option<ActionSpec>,
    /// Tool names (or `"*"` for all) that are denied at call time and hidden from `tools/list`.
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(inner(length(min = 1))))]
    pub hide: Vec<String>,
    /// Limits every tool call counts against, in addition to its own.
    #[serde(default)]
    pub all_tools: Option<AllToolsSpec>,
    /// Rules by exact tool name.
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(extend("propertyNames" = {"minLength": 1})))]
    pub tools: BTreeMap<String, ToolRuleSpec>,
    /// Deployment settings (not part of PolicyLayer's format); everything has a safe default.
    #[serde(default)]
    pub gateway: Option<GatewaySpec>,
}

#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ActionSpec {
    Allow,
    Deny,
}

#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct AllToolsSpec {
    #[serde(default)]
    pub limits: Vec<LimitSpec>,
}

/// `tools.NAME.action`: PolicyLayer's allow, deny and require approval.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ToolActionSpec {
    Allow,
    Deny,
    /// A person must approve each call (bound to grant, tool and arguments, used once) through the
    /// approval service of `gateway.approval`, after every other rule allowed it.
    RequireApproval,
}

/// `tools.NAME`: `{}` allows the tool under `default: "deny"`.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ToolRuleSpec {
    #[serde(default)]
    pub action: Option<ToolActionSpec>,
    /// Shown to the agent when the tool is denied; shown to the approver and the agent when the tool
    /// requires approval.
    #[serde(default)]
    pub reason: Option<String>,
    /// With `action: "require_approval"`: how long an approval request stays open, and an approval
    /// stays usable, e.g. `"30s"`, `"10m"`, `"1h"` (default `"10m"`; 1 s to 7 days).
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(regex(pattern = r"^[0-9]+ ?[a-z]+( ?[0-9]+ ?[a-z]+)*$")))]
    pub approval_timeout: Option<String>,
    #[serde(default)]
    pub limits: Vec<LimitSpec>,
    /// Argument conditions that must all hold, else the call is denied.
    #[serde(default)]
    pub require: Vec<ConditionSpec>,
    /// Argument conditions of which none may hold.
    #[serde(default)]
    pub deny_if: Vec<ConditionSpec>,
}

/// `{path, op, value?, reason?}`: a condition over `params.arguments` (see `conditions`).
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ConditionSpec {
    /// `args.` then a dotted path with optional `[index]` steps.
    #[cfg_attr(feature = "schema", schemars(regex(pattern = r"^args(\.[^.\[\]]+|\[[0-9]+\])+$")))]
    pub path: String,
    pub op: OpSpec,
    /// Kept as raw JSON text so numbers stay exact.
    // (As the strict parser's tree; the description and default keep the published schema as it was.)
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(with = "Option<serde_json::Value>", extend("default" = null)))]
    pub value: Option<JsonValue>,
    /// Shown to the agent when the condition denies a call.
    #[serde(default)]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum OpSpec {
    Eq,
    Neq,
    In,
    NotIn,
    Lt,
    Lte,
    Gt,
    Gte,
    Regex,
    Contains,
    Exists,
}

impl OpSpec {
    /// The name as written in a policy.
    pub fn name(self) -> &'static str {
        match self {
            OpSpec::Eq => "eq",
            OpSpec::Neq => "neq",
            OpSpec::In => "in",
            OpSpec::NotIn => "not_in",
            OpSpec::Lt => "lt",
            OpSpec::Lte => "lte",
            OpSpec::Gt => "gt",
            OpSpec::Gte => "gte",
            OpSpec::Regex => "regex",
            OpSpec::Contains => "contains",
            OpSpec::Exists => "exists",
        }
    }
}

/// One rate limit: at most `max` calls per fixed, UTC-aligned `window`, counted per `scope`.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct LimitSpec {
    /// Counter name; rules naming the same counter (same window and scope) share one count.
    #[cfg_attr(feature = "schema", schemars(length(min = 1)))]
    pub counter: String,
    pub window: WindowSpec,
    /// Calls allowed per window; at least 1.
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
    pub max: u64,
    #[serde(default)]
    pub scope: ScopeSpec,
    /// `fixed` (default, PolicyLayer's UTC-aligned windows) or `sliding` (any rolling window).
    #[serde(default)]
    pub algorithm: AlgorithmSpec,
}

#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum AlgorithmSpec {
    #[default]
    Fixed,
    Sliding,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum WindowSpec {
    Second,
    Minute,
    Hour,
    Day,
}

#[derive(Debug, Clone, Copy, Default, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ScopeSpec {
    #[default]
    Grant,
    Global,
}

/// `gateway`: settings of this filter, absent from PolicyLayer files.
#[derive(Debug, Default, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct GatewaySpec {
    /// Take the grant from this request header (set by a trusted earlier filter, e.g. `jwt_authn`
    /// `claim_to_headers`) instead of `Authorization: Bearer`.
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(regex(pattern = r"^[A-Za-z0-9_.-]+$")))]
    #[cfg_attr(
        feature = "schema",
        schemars(extend("not" = {
            "type": "string",
            "pattern": "^(?:[Aa][Uu][Tt][Hh][Oo][Rr][Ii][Zz][Aa][Tt][Ii][Oo][Nn]|[Cc][Oo][Oo][Kk][Ii][Ee]|[Hh][Oo][Ss][Tt])$"
        }))
    )]
    pub grant_header: Option<String>,
    /// Largest request body judged, in bytes (default 1048576). Larger bodies get 413.
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = MAX_BODY_BYTES_CEILING)))]
    pub max_body_bytes: Option<u64>,
    /// Most distinct grants the rate limiter tracks (default 100000); new grants past it are refused.
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
    pub max_tracked_grants: Option<u64>,
    /// Allow or deny MCP methods other than `tools/call` and the lifecycle methods, by name.
    #[serde(default)]
    #[cfg_attr(
        feature = "schema",
        schemars(extend("propertyNames" = {
            "minLength": 1,
            "not": {"anyOf": [{"enum": ["initialize", "ping", "server/discover", "subscriptions/listen", "tools/list", "tools/call"]}, {"pattern": "^notifications/"}]}
        }))
    )]
    pub methods: BTreeMap<String, ActionSpec>,
    /// `enforce` (default) or `dry_run`: compute, log and count every decision, but forward calls the
    /// policy would refuse. Protocol errors (malformed bodies, 413, 415, …) are always enforced.
    #[serde(default)]
    pub mode: Option<ModeSpec>,
    /// Per-tool overrides of `mode`, e.g. `{"vm_agent_exec": "dry_run"}`.
    #[serde(default)]
    pub tool_modes: BTreeMap<String, ModeSpec>,
    /// Also remove tools that the policy denies by name from `tools/list` results (default false:
    /// as in PolicyLayer, denied tools stay visible and only `hide` removes tools).
    #[serde(default)]
    pub hide_denied_tools: bool,
    /// Largest `tools/list` response the filter rewrites, in bytes (default 2097152); larger gets 502.
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = MAX_BODY_BYTES_CEILING)))]
    pub max_response_bytes: Option<u64>,
    /// Known grants. When non-empty, a credential whose SHA-256 is not listed gets 401, and logs
    /// and metrics use the label instead of the hash prefix.
    #[serde(default)]
    pub grants: Vec<GrantSpec>,
    /// The approval service (`mcp-approvals`), required when a tool uses `require_approval`.
    #[serde(default)]
    pub approval: Option<ApprovalSpec>,
    /// JSON-RPC responses a client sends to server requests (elicitation, sampling, roots): `allow`
    /// (default) forwards them; `deny` refuses them with 403, since the agent the policy constrains
    /// writes them. A batch mixing responses with requests or notifications is always refused (400).
    #[serde(default)]
    pub client_responses: Option<ActionSpec>,
    /// The rate limit service (Envoy RLS v3, e.g. `mcp-ratelimit`) that decides every limit across
    /// Envoys instead of this Envoy's shared data.
    #[serde(default)]
    pub rate_limit_service: Option<crate::rls::RateLimitServiceSpec>,
    /// The URL of this MCP server's OAuth 2.0 protected resource metadata (RFC 9728), e.g.
    /// `https://mcp.example.com/.well-known/oauth-protected-resource`. When set, the 401 for a missing
    /// grant carries `WWW-Authenticate: Bearer resource_metadata="<url>"`, from which MCP clients
    /// discover the authorization server. `https` (`http` for a loopback host only), no fragment.
    #[serde(default)]
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = 2048), regex(pattern = r"^https?://[A-Za-z0-9._~:/?\[\]@!$&'()*+,;=%-]+$"))
    )]
    pub resource_metadata_url: Option<String>,
    /// MCP protocol versions accepted (default: all four the filter knows, `2025-03-26`,
    /// `2025-06-18`, `2025-11-25`, `2026-07-28`). Others get 400 −32022.
    #[serde(default)]
    #[cfg_attr(
        feature = "schema",
        schemars(extend(
            "items" = {"enum": ["2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"]},
            "uniqueItems" = true,
            "minItems" = 1
        ))
    )]
    pub protocol_versions: Option<Vec<String>>,
    /// Bind every `Mcp-Session-Id` to the grant that created it (HMAC-SHA-256); see the README,
    /// "Sessions bound to their grant". Absent: session ids pass unchanged.
    #[serde(default)]
    pub session_key: Option<SessionKeySpec>,
}

/// `gateway.session_key`: secrets of at least 32 bytes (UTF-8 text, used as HMAC keys as is), each
/// given inline or as the name of an environment variable of the wasm VM (Envoy
/// `vm_config.environment_variables`), which keeps the secret out of the plugin configuration.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SessionKeySpec {
    /// The key new session ids are made with (or `current_env`).
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(length(min = 32)))]
    pub current: Option<String>,
    /// The environment variable holding `current`.
    #[serde(default)]
    pub current_env: Option<String>,
    /// The key before it, still accepted during a rotation; remove it once sessions made under it
    /// have ended.
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(length(min = 32)))]
    pub previous: Option<String>,
    /// The environment variable holding `previous`.
    #[serde(default)]
    pub previous_env: Option<String>,
}

/// `gateway.approval`: where and how the filter asks a person to approve a call.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ApprovalSpec {
    /// The Envoy cluster of the approval service (defined in the bootstrap or by CDS).
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 256)))]
    pub cluster: String,
    /// Path of its check endpoint (default `/v1/check`).
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(regex(pattern = "^/[!-~]*$")))]
    pub path: Option<String>,
    /// `:authority` of the callout (default: the cluster name).
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(regex(pattern = "^[!-~]{1,256}$")))]
    pub authority: Option<String>,
    /// Callout timeout, e.g. `"5s"` (default `"5s"` in retry mode, `"30s"` in hold mode; at most
    /// `"301s"`; at least `"2s"` in hold mode). A timeout refuses the call (`approval_unavailable`).
    #[serde(default)]
    pub timeout: Option<String>,
    /// `retry` (default): a pending call is refused with `approval_required` and the agent retries;
    /// `hold`: the call waits while the service long-polls for a decision.
    #[serde(default)]
    pub mode: Option<ApprovalModeSpec>,
    /// Hold mode: most calls of one grant waiting for a decision at once, per Envoy process
    /// (default 8, 1 to 10000). More calls are asked without waiting (`approval_required`).
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 10000)))]
    pub max_held_per_grant: Option<u32>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ApprovalModeSpec {
    Retry,
    Hold,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum ModeSpec {
    Enforce,
    DryRun,
}

fn mode(m: ModeSpec) -> Mode {
    match m {
        ModeSpec::Enforce => Mode::Enforce,
        ModeSpec::DryRun => Mode::DryRun,
    }
}

/// One registered grant: the SHA-256 of its token (64 hex digits) and a label for logs.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct GrantSpec {
    #[cfg_attr(feature = "schema", schemars(regex(pattern = "^[0-9A-Fa-f]{64}$")))]
    pub sha256: String,
    #[cfg_attr(feature = "schema", schemars(regex(pattern = "^[!-~]{1,64}$")))]
    pub label: String,
}

/// A policy that cannot be loaded: the JSON path of the problem and what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// Dotted path from the document root, e.g. `tools.vm_agent_exec.limits[0].max`; `.` for the root.
    pub path: String,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid policy at {}: {}", self.path, self.message)
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
    // Same strict reading as request bodies: a duplicate key in a policy is as ambiguous as in a call.
    let doc = json::parse(bytes).map_err(|e| {
        ConfigErrors(vec![err(".", format!("not a strict JSON document: {}", crate::textpos::describe(&e, bytes)))])
    })?;
    // Arrays never stand in for objects, and enums are strings only: see `de`.
    let mut spec: PolicySpec = de::from_json(&doc).map_err(|e| ConfigErrors(vec![err(e.path(), e.message())]))?;
    if let Some(k) = spec.gateway.as_mut().and_then(|g| g.session_key.as_mut()) {
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
                    format!("environment variable {name} is not set in the wasm VM (vm_config.environment_variables)"),
                )),
            }
        }
        if !errs.is_empty() {
            return Err(ConfigErrors(errs));
        }
    }
    compile(spec)
}

fn action(a: ActionSpec) -> Action {
    match a {
        ActionSpec::Allow => Action::Allow,
        ActionSpec::Deny => Action::Deny,
    }
}

fn compile_limit(spec: &LimitSpec, path: String) -> Result<Limit, ConfigError> {
    if spec.counter.is_empty() {
        return Err(err(format!("{path}.counter"), "must not be empty"));
    }
    if spec.max == 0 {
        return Err(err(format!("{path}.max"), "must be at least 1"));
    }
    if matches!(spec.algorithm, AlgorithmSpec::Sliding) && spec.max > MAX_SLIDING_MAX {
        return Err(err(
            format!("{path}.max"),
            format!("a sliding limit keeps one timestamp per call, so max is at most {MAX_SLIDING_MAX}"),
        ));
    }
    Ok(Limit {
        counter: spec.counter.clone(),
        window: match spec.window {
            WindowSpec::Second => Window::Second,
            WindowSpec::Minute => Window::Minute,
            WindowSpec::Hour => Window::Hour,
            WindowSpec::Day => Window::Day,
        },
        max: spec.max,
        scope: match spec.scope {
            ScopeSpec::Grant => Scope::Grant,
            ScopeSpec::Global => Scope::Global,
        },
        algorithm: match spec.algorithm {
            AlgorithmSpec::Fixed => Algorithm::Fixed,
            AlgorithmSpec::Sliding => Algorithm::Sliding,
        },
        path,
    })
}

/// Longest regex source accepted in a condition, in bytes.
pub const MAX_REGEX_LEN: usize = 1024;

fn compile_conditions(specs: &[ConditionSpec], base: &str, errs: &mut Vec<ConfigError>) -> Vec<Condition> {
    let mut out = Vec::new();
    for (i, c) in specs.iter().enumerate() {
        match compile_condition(c, format!("{base}[{i}]")) {
            Ok(cond) => out.push(cond),
            Err(e) => errs.push(e),
        }
    }
    out
}

fn compile_condition(spec: &ConditionSpec, rule: String) -> Result<Condition, ConfigError> {
    let path = conditions::parse_path(&spec.path).map_err(|m| err(format!("{rule}.path"), m))?;
    let vpath = format!("{rule}.value");
    let value = spec.value.as_ref().map(|v| v.0.clone());
    let need = |what: &str| err(&vpath, format!("op {} needs {what}", spec.op.name()));
    let op = match (spec.op, value) {
        (OpSpec::Exists, None) => Op::Exists(true),
        (OpSpec::Exists, Some(Json::Bool(b))) => Op::Exists(b),
        (OpSpec::Exists, Some(_)) => return Err(need("no value, or a boolean")),
        (_, None) => return Err(need("a value")),
        (OpSpec::Eq, Some(v)) => Op::Eq(v),
        (OpSpec::Neq, Some(v)) => Op::Neq(v),
        (OpSpec::In, Some(Json::Array(v))) => Op::In(v),
        (OpSpec::NotIn, Some(Json::Array(v))) => Op::NotIn(v),
        (OpSpec::In | OpSpec::NotIn, Some(_)) => return Err(need("an array")),
        (OpSpec::Lt, Some(v @ Json::Number(_))) => Op::Lt(v),
        (OpSpec::Lte, Some(v @ Json::Number(_))) => Op::Lte(v),
        (OpSpec::Gt, Some(v @ Json::Number(_))) => Op::Gt(v),
        (OpSpec::Gte, Some(v @ Json::Number(_))) => Op::Gte(v),
        (OpSpec::Lt | OpSpec::Lte | OpSpec::Gt | OpSpec::Gte, Some(_)) => return Err(need("a number")),
        (OpSpec::Regex, Some(Json::String(src))) => {
            if src.len() > MAX_REGEX_LEN {
                return Err(err(&vpath, format!("regex longer than {MAX_REGEX_LEN} bytes")));
            }
            Op::Regex(regex_lite::Regex::new(&src).map_err(|e| err(&vpath, format!("invalid regex: {e}")))?)
        }
        (OpSpec::Regex, Some(_)) => return Err(need("a string (the regex)")),
        (OpSpec::Contains, Some(v)) => Op::Contains(v),
    };
    Ok(Condition { path_text: spec.path.clone(), path, op, reason: spec.reason.clone(), rule })
}

/// Default `approval_timeout` of a `require_approval` tool.
pub const DEFAULT_APPROVAL_TIMEOUT: &str = "10m";
/// Longest `approval_timeout`: 7 days, in seconds.
pub const MAX_APPROVAL_TIMEOUT_SECONDS: u64 = 7 * 86_400;
/// Longest `gateway.approval.timeout`, in milliseconds: the service holds a call at most 300 s.
pub const MAX_APPROVAL_CALLOUT_MS: u64 = 301_000;

/// A duration such as `"30s"`, `"10m"` or `"1h 30m"` (humantime syntax) in milliseconds, between
/// `min_ms` and `max_ms`.
fn duration_ms(text: &str, min_ms: u64, max_ms: u64) -> Result<u64, String> {
    let d = humantime::parse_duration(text).map_err(|e| format!("not a duration like \"30s\" or \"10m\": {e}"))?;
    let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    if ms < min_ms || ms > max_ms {
        return Err(format!("must be between {} ms and {} s", min_ms, max_ms / 1000));
    }
    Ok(ms)
}

fn compile_approval(a: &ApprovalSpec, errs: &mut Vec<ConfigError>) -> Option<ApprovalService> {
    let before = errs.len();
    let printable = |s: &str| !s.is_empty() && s.len() <= 256 && s.bytes().all(|b| b.is_ascii_graphic());
    if !printable(&a.cluster) {
        errs.push(err(
            "gateway.approval.cluster",
            "must be 1 to 256 printable ASCII characters (an Envoy cluster name)",
        ));
    }
    let path = a.path.clone().unwrap_or_else(|| "/v1/check".to_owned());
    if !path.starts_with('/') || !printable(&path) {
        errs.push(err("gateway.approval.path", "must start with '/' and hold only printable ASCII characters"));
    }
    let authority = a.authority.clone().unwrap_or_else(|| a.cluster.clone());
    if a.authority.is_some() && !printable(&authority) {
        errs.push(err("gateway.approval.authority", "must be 1 to 256 printable ASCII characters"));
    }
    let mode = match a.mode {
        Some(ApprovalModeSpec::Hold) => ApprovalMode::Hold,
        Some(ApprovalModeSpec::Retry) | None => ApprovalMode::Retry,
    };
    let (default, min) = match mode {
        ApprovalMode::Retry => ("5s", 1),
        ApprovalMode::Hold => ("30s", 2000),
    };
    let timeout_ms = match duration_ms(a.timeout.as_deref().unwrap_or(default), min, MAX_APPROVAL_CALLOUT_MS) {
        Ok(ms) => ms,
        Err(m) => {
            errs.push(err("gateway.approval.timeout", m));
            0
        }
    };
    let max_held_per_grant = a.max_held_per_grant.unwrap_or(crate::held::DEFAULT_MAX_HELD_PER_GRANT);
    if !(1..=crate::held::MAX_MAX_HELD_PER_GRANT).contains(&max_held_per_grant) {
        errs.push(err("gateway.approval.max_held_per_grant", "must be an integer from 1 to 10000"));
    }
    (errs.len() == before).then_some(ApprovalService {
        cluster: a.cluster.clone(),
        path,
        authority,
        timeout_ms,
        mode,
        max_held_per_grant,
    })
}

/// Lifecycle methods always pass, so `gateway.methods` may not name them; `tools/call` is governed
/// by `tools` and `default`.
const NOT_CONFIGURABLE: [&str; 6] =
    ["initialize", "ping", "server/discover", "subscriptions/listen", "tools/list", "tools/call"];

/// Turn a parsed spec into the runtime policy.
pub fn compile(spec: PolicySpec) -> Result<Policy, ConfigErrors> {
    let mut errs: Vec<ConfigError> = Vec::new();
    if spec.version != "1" {
        errs.push(err("version", "must be \"1\""));
    }
    for (i, name) in spec.hide.iter().enumerate() {
        if name.is_empty() {
            errs.push(err(format!("hide[{i}]"), "must not be empty"));
        }
    }
    let mut limits = Vec::new();
    let mut all_tools = Vec::new();
    if let Some(all) = &spec.all_tools {
        for (i, l) in all.limits.iter().enumerate() {
            match compile_limit(l, format!("all_tools.limits[{i}]")) {
                Ok(limit) => {
                    all_tools.push(limits.len());
                    limits.push(limit);
                }
                Err(e) => errs.push(e),
            }
        }
    }
    let mut tools = std::collections::HashMap::new();
    for (name, rule) in &spec.tools {
        let path = format!("tools.{name}");
        if name.is_empty() {
            errs.push(err("tools", "tool names must not be empty"));
        }
        let require = compile_conditions(&rule.require, &format!("{path}.require"), &mut errs);
        let deny_if = compile_conditions(&rule.deny_if, &format!("{path}.deny_if"), &mut errs);
        let mut own = Vec::new();
        for (i, l) in rule.limits.iter().enumerate() {
            match compile_limit(l, format!("{path}.limits[{i}]")) {
                Ok(limit) => {
                    own.push(limits.len());
                    limits.push(limit);
                }
                Err(e) => errs.push(e),
            }
        }
        let approval_timeout_seconds = match (rule.action, &rule.approval_timeout) {
            (Some(ToolActionSpec::RequireApproval), t) => {
                let text = t.as_deref().unwrap_or(DEFAULT_APPROVAL_TIMEOUT);
                match duration_ms(text, 1000, MAX_APPROVAL_TIMEOUT_SECONDS * 1000) {
                    Ok(ms) => Some(ms.div_ceil(1000)),
                    Err(m) => {
                        errs.push(err(format!("{path}.approval_timeout"), m));
                        None
                    }
                }
            }
            (_, Some(_)) => {
                errs.push(err(format!("{path}.approval_timeout"), "only applies to action \"require_approval\""));
                None
            }
            (_, None) => None,
        };
        tools.insert(
            name.clone(),
            ToolRule {
                action: match rule.action {
                    Some(ToolActionSpec::Deny) => Action::Deny,
                    Some(ToolActionSpec::Allow | ToolActionSpec::RequireApproval) | None => Action::Allow,
                },
                reason: rule.reason.clone(),
                approval_timeout_seconds,
                limits: own,
                require,
                deny_if,
            },
        );
    }
    let gw = spec.gateway.unwrap_or_default();
    let grant = match gw.grant_header {
        None => GrantSource::Bearer,
        Some(h) => {
            let lower = h.to_ascii_lowercase();
            let valid = !lower.is_empty()
                && lower.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
                && !matches!(lower.as_str(), "authorization" | "cookie" | "host");
            if !valid {
                errs.push(err(
                    "gateway.grant_header",
                    "must be a plain header name (letters, digits, '-', '_', '.'), not authorization, cookie or host",
                ));
            }
            GrantSource::Header(lower)
        }
    };
    let max_body_bytes = gw.max_body_bytes.unwrap_or(DEFAULT_MAX_BODY_BYTES);
    if max_body_bytes == 0 || max_body_bytes > MAX_BODY_BYTES_CEILING {
        errs.push(err("gateway.max_body_bytes", format!("must be between 1 and {MAX_BODY_BYTES_CEILING}")));
    }
    let max_response_bytes = gw.max_response_bytes.unwrap_or(DEFAULT_MAX_RESPONSE_BYTES);
    if max_response_bytes == 0 || max_response_bytes > MAX_BODY_BYTES_CEILING {
        errs.push(err("gateway.max_response_bytes", format!("must be between 1 and {MAX_BODY_BYTES_CEILING}")));
    }
    let max_tracked_grants = gw.max_tracked_grants.unwrap_or(DEFAULT_MAX_TRACKED_GRANTS);
    if max_tracked_grants == 0 {
        errs.push(err("gateway.max_tracked_grants", "must be at least 1"));
    }
    let mut registry = std::collections::HashMap::new();
    for (i, g) in gw.grants.iter().enumerate() {
        let path = format!("gateway.grants[{i}]");
        let Some(id) = crate::grant::from_hex32(&g.sha256.to_ascii_lowercase()) else {
            errs.push(err(format!("{path}.sha256"), "must be 64 hex digits (the SHA-256 of the token)"));
            continue;
        };
        if g.label.is_empty() || g.label.len() > 64 || !g.label.bytes().all(|b| b.is_ascii_graphic()) {
            errs.push(err(format!("{path}.label"), "must be 1 to 64 printable ASCII characters"));
        }
        if registry.insert(id, g.label.clone()).is_some() {
            errs.push(err(format!("{path}.sha256"), "listed twice"));
        }
    }
    let approval = gw.approval.as_ref().and_then(|a| compile_approval(a, &mut errs));
    if let Some(Err(m)) = gw.resource_metadata_url.as_deref().map(crate::challenge::check_resource_metadata_url) {
        errs.push(err("gateway.resource_metadata_url", m));
    }
    if gw.approval.is_none() {
        for (name, rule) in &spec.tools {
            if rule.action == Some(ToolActionSpec::RequireApproval) {
                errs.push(err(
                    format!("tools.{name}.action"),
                    "require_approval needs gateway.approval (the Envoy cluster of the approval service)",
                ));
            }
        }
    }
    let protocol_versions = compile_versions(gw.protocol_versions.as_deref(), &mut errs);
    let session_keys = gw.session_key.as_ref().map(|k| {
        let min = crate::session::MIN_KEY_BYTES;
        let current = k.current.clone().unwrap_or_default();
        if k.current.is_none() && k.current_env.is_none() {
            errs.push(err("gateway.session_key.current", "required (or current_env)"));
        } else if current.len() < min {
            errs.push(err("gateway.session_key.current", format!("must be at least {min} bytes")));
        }
        if k.previous.as_ref().is_some_and(|p| p.len() < min) {
            errs.push(err("gateway.session_key.previous", format!("must be at least {min} bytes")));
        }
        if k.previous.as_ref() == Some(&current) {
            errs.push(err("gateway.session_key.previous", "must differ from current"));
        }
        crate::session::SessionKeys {
            current: current.into_bytes(),
            previous: k.previous.as_ref().map(|p| p.as_bytes().to_vec()),
        }
    });
    let rate_limit_service = gw.rate_limit_service.as_ref().and_then(|r| {
        crate::rls::compile(r, &limits).map_err(|e| errs.extend(e.into_iter().map(|(p, m)| err(p, m)))).ok()
    });
    let mut methods = std::collections::HashMap::new();
    for (name, a) in gw.methods {
        if NOT_CONFIGURABLE.contains(&name.as_str()) || name.starts_with("notifications/") || name.is_empty() {
            errs.push(err(
                format!("gateway.methods.{name}"),
                "lifecycle methods always pass and tools/call follows tools/default; list other methods here",
            ));
        }
        methods.insert(name, action(a));
    }
    if !errs.is_empty() {
        return Err(ConfigErrors(errs));
    }
    Ok(Policy::new(
        spec.default.map(action).unwrap_or(Action::Deny),
        spec.hide,
        tools,
        all_tools,
        limits,
        methods,
        Gateway {
            grant,
            max_body_bytes: usize::try_from(max_body_bytes).unwrap_or(usize::MAX),
            max_tracked_grants,
            grants: registry,
            hide_denied_tools: gw.hide_denied_tools,
            mode: gw.mode.map(mode).unwrap_or(Mode::Enforce),
            tool_modes: gw.tool_modes.into_iter().map(|(k, v)| (k, mode(v))).collect(),
            max_response_bytes: usize::try_from(max_response_bytes).unwrap_or(usize::MAX),
            approval,
            protocol_versions,
            session_keys,
            client_responses: gw.client_responses.map(action).unwrap_or(Action::Allow),
            rate_limit_service,
            resource_metadata_url: gw.resource_metadata_url,
        },
    ))
}

/// `gateway.protocol_versions`: known versions, each once, at least one.
fn compile_versions(spec: Option<&[String]>, errs: &mut Vec<ConfigError>) -> crate::protocol::Versions {
    use crate::protocol::{Version, Versions};
    let Some(list) = spec else { return Versions::ALL };
    let mut set = Versions::default();
    if list.is_empty() {
        errs.push(err("gateway.protocol_versions", "must list at least one version"));
    }
    for (i, name) in list.iter().enumerate() {
        match Version::parse(name) {
            Some(v) if set.contains(v) => errs.push(err(format!("gateway.protocol_versions[{i}]"), "listed twice")),
            Some(v) => set.insert(v),
            None => errs.push(err(
                format!("gateway.protocol_versions[{i}]"),
                "unknown MCP protocol version; known: 2025-03-26, 2025-06-18, 2025-11-25, 2026-07-28",
            )),
        }
    }
    set
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let id = crate::grant::Grant::from_credential(b"abc").id;
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
    fn default_is_deny_when_absent() {
        assert_eq!(load(br#"{"version":"1"}"#).unwrap().default, Action::Deny);
        assert_eq!(load(br#"{"version":"1","default":"allow"}"#).unwrap().default, Action::Allow);
    }
}
