//! The parsed shapes of the policy file: PolicyLayer's `policy.json`, plus one extra top-level key,
//! `gateway`, for deployment settings. Read by `read` from the strict parser's tree, then compiled
//! into a [`crate::policy::Policy`] by `compile`.
//!
//! Every object rejects unknown fields (`deny_unknown_fields`): a misspelt key in a security policy
//! must fail loudly, never be ignored. The enums of the policy (`Action`, `Window`, `Scope`,
//! `Algorithm`, `Mode`, `ApprovalMode`, `FailureMode`) are read directly into the runtime types;
//! only the written forms with no runtime twin live here (`ToolAction`, `OpName`).
//!
//! `schema/policy.schema.json` is generated from these types (`make schema`). It names the enums as
//! they were named when they had `…Spec` twins (`ActionSpec`, …), in its `$defs` (`schemars(rename)`)
//! and in the reader's messages (`config/read/spec.rs`; `serde(expecting)` for the tests' serde
//! oracle), and lists their values only (`names_only`): the published schema and the error texts
//! stay as they were.
//!
//! The `#[serde(…)]` attributes say for the schema (and the tests' serde-derived oracle of the
//! reader, `Deserialize` in tests only) what `config/read/spec.rs` says for the reader: which
//! fields have a default, and the keys as written.

#[cfg(feature = "schema")]
use std::collections::BTreeMap;

#[cfg(test)]
use serde::Deserialize;

use super::{JsonValue, Map};
#[cfg(feature = "schema")]
use crate::terms::names_only;
use crate::terms::{Action, Algorithm, ApprovalMode, AuditMode, FailureMode, Mode, PinMode, Scope, Window};

mod flows;
mod pins;
mod result;
pub use flows::FlowSpec;
pub use pins::{DefaultForSpec, PinnedSpec};
pub use result::ResultSpec;
// For `config::read` alone: reached only through the types above.
pub(super) use pins::WhenSpec;
pub(super) use result::{MarkIfSpec, RedactSpec, ResultDenySpec};

/// The whole policy document.
#[derive(Debug, Default)]
#[cfg_attr(test, derive(Deserialize))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(any(test, feature = "schema"), serde(deny_unknown_fields))]
pub struct PolicySpec {
    /// Must be `"1"`.
    #[cfg_attr(feature = "schema", schemars(extend("const" = "1")))]
    pub version: String,
    /// What happens to a tool the policy does not list. Absent means `deny`.
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    pub default: Option<Action>,
    /// Tool names (or `"*"` for all) that are denied at call time and hidden from `tools/list`.
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    #[cfg_attr(feature = "schema", schemars(inner(length(min = 1))))]
    pub hide: Vec<String>,
    /// Limits every tool call counts against, in addition to its own.
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    pub all_tools: Option<AllToolsSpec>,
    /// Rules by exact tool name.
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    #[cfg_attr(feature = "schema", schemars(extend("propertyNames" = {"minLength": 1})))]
    #[cfg_attr(feature = "schema", schemars(with = "BTreeMap<String, ToolRuleSpec>"))]
    pub tools: Map<ToolRuleSpec>,
    /// Reviewed definitions of tools not listed under `tools`, by exact name: they grant nothing
    /// by themselves (`mcp-policy pin --write` records them).
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    #[cfg_attr(feature = "schema", schemars(extend("propertyNames" = {"minLength": 1})))]
    #[cfg_attr(feature = "schema", schemars(with = "BTreeMap<String, PinnedSpec>"))]
    pub pins: Map<PinnedSpec>,
    /// Rules for the tools in `pins` not listed under `tools`, by their pinned annotations, e.g.
    /// `{"when": {"readOnlyHint": true}, "action": "allow"}`; needs `pins`.
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    pub default_for: Vec<DefaultForSpec>,
    /// Rules across calls: tools denied to a grant for a while after it carries a mark.
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    pub flows: Vec<FlowSpec>,
    /// Deployment settings (not part of PolicyLayer's format); everything has a safe default.
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    pub gateway: Option<GatewaySpec>,
}

#[derive(Debug, Default)]
#[cfg_attr(test, derive(Deserialize))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(any(test, feature = "schema"), serde(deny_unknown_fields))]
pub struct AllToolsSpec {
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    pub limits: Vec<LimitSpec>,
}

/// `tools.NAME.action`: PolicyLayer's allow, deny and require approval.
// Written form only: it compiles to `policy::ToolRule::action` plus `policy::ToolRule::approval`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(test, derive(Deserialize))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(rename = "ToolActionSpec"))]
#[cfg_attr(any(test, feature = "schema"), serde(rename_all = "snake_case", expecting = "enum ToolActionSpec"))]
pub enum ToolAction {
    Allow,
    Deny,
    /// A person must approve each call (bound to grant, tool and arguments, used once) through the
    /// approval service of `gateway.approval`, after every other rule allowed it.
    RequireApproval,
}

/// `tools.NAME`: `{}` allows the tool under `default: "deny"`.
#[derive(Debug, Default)]
#[cfg_attr(test, derive(Deserialize))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(any(test, feature = "schema"), serde(deny_unknown_fields))]
pub struct ToolRuleSpec {
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    pub action: Option<ToolAction>,
    /// Shown to the agent when the tool is denied; shown to the approver and the agent when the tool
    /// requires approval.
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    pub reason: Option<String>,
    /// With `action: "require_approval"`: how long an approval request stays open, and an approval
    /// stays usable, e.g. `"30s"`, `"10m"`, `"1h"` (default `"10m"`; 1 s to 7 days).
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    #[cfg_attr(feature = "schema", schemars(regex(pattern = r"^[0-9]+ ?[a-z]+( ?[0-9]+ ?[a-z]+)*$")))]
    pub approval_timeout: Option<String>,
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    pub limits: Vec<LimitSpec>,
    /// Argument conditions that must all hold, else the call is denied.
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    pub require: Vec<ConditionSpec>,
    /// Argument conditions of which none may hold.
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    pub deny_if: Vec<ConditionSpec>,
    /// Rules on the tool's results (`max_bytes`, `deny_if`, `redact`).
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    pub result: Option<ResultSpec>,
    /// Marks a forwarded call of this tool sets on its grant once it is answered with a result
    /// (see `flows`).
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    #[cfg_attr(feature = "schema", schemars(inner(length(min = 1, max = 64))))]
    pub marks: Vec<String>,
    /// `sha256:` and 64 lowercase hex digits: the reviewed definition's hash (`mcp-policy pin`).
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    #[cfg_attr(feature = "schema", schemars(regex(pattern = "^sha256:[0-9a-f]{64}$")))]
    pub pin: Option<String>,
}

/// `{path, op, value?, reason?}`: a condition over `params.arguments` (see `conditions`).
#[derive(Debug)]
#[cfg_attr(test, derive(Deserialize))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(any(test, feature = "schema"), serde(deny_unknown_fields))]
pub struct ConditionSpec {
    /// `args.` then a dotted path with optional `[index]` steps.
    #[cfg_attr(feature = "schema", schemars(regex(pattern = r"^args(\.[^.\[\]]+|\[[0-9]+\])+$")))]
    pub path: String,
    pub op: OpName,
    /// Kept as raw JSON text so numbers stay exact.
    // (As the strict parser's tree; the description and default keep the published schema as it was.)
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    #[cfg_attr(feature = "schema", schemars(with = "Option<serde_json::Value>", extend("default" = null)))]
    pub value: Option<JsonValue>,
    /// Shown to the agent when the condition denies a call.
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    pub reason: Option<String>,
}

/// A condition's `op` as written; compiled with its `value` into a [`crate::policy::conditions::Op`], which
/// carries the value and so cannot be read on its own.
#[derive(Debug, Clone, Copy)]
#[cfg_attr(test, derive(Deserialize))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(rename = "OpSpec", transform = names_only))]
#[cfg_attr(any(test, feature = "schema"), serde(rename_all = "snake_case", expecting = "enum OpSpec"))]
pub enum OpName {
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

impl OpName {
    /// The name as written in a policy.
    pub fn name(self) -> &'static str {
        match self {
            OpName::Eq => "eq",
            OpName::Neq => "neq",
            OpName::In => "in",
            OpName::NotIn => "not_in",
            OpName::Lt => "lt",
            OpName::Lte => "lte",
            OpName::Gt => "gt",
            OpName::Gte => "gte",
            OpName::Regex => "regex",
            OpName::Contains => "contains",
            OpName::Exists => "exists",
        }
    }
}

/// One rate limit: at most `max` calls per fixed, UTC-aligned `window`, counted per `scope`.
#[derive(Debug)]
#[cfg_attr(test, derive(Deserialize))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(any(test, feature = "schema"), serde(deny_unknown_fields))]
pub struct LimitSpec {
    /// Counter name; rules naming the same counter (same window and scope) share one count.
    #[cfg_attr(feature = "schema", schemars(length(min = 1)))]
    pub counter: String,
    pub window: Window,
    /// Calls allowed per window; at least 1.
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
    pub max: u64,
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    pub scope: Scope,
    /// `fixed` (default, PolicyLayer's UTC-aligned windows) or `sliding` (any rolling window).
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    pub algorithm: Algorithm,
}

/// `gateway`: settings of this filter, absent from PolicyLayer files.
#[derive(Debug, Clone, Default)]
#[cfg_attr(test, derive(Deserialize))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(any(test, feature = "schema"), serde(deny_unknown_fields))]
pub struct GatewaySpec {
    /// Take the grant from this request header (set by a trusted earlier filter, e.g. `jwt_authn`
    /// `claim_to_headers`) instead of `Authorization: Bearer`.
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
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
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = super::MAX_BODY_BYTES_CEILING)))]
    pub max_body_bytes: Option<u64>,
    /// Most distinct grants with state in shared data: per-grant rate counters and hold-mode
    /// approval slots (default 100000). Past it, a new grant's counted calls are refused and its
    /// hold-mode approvals are asked without waiting.
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    #[cfg_attr(feature = "schema", schemars(range(min = 1)))]
    pub max_tracked_grants: Option<u64>,
    /// Allow or deny MCP methods other than `tools/call` and the lifecycle methods, by name.
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    #[cfg_attr(
        feature = "schema",
        schemars(extend("propertyNames" = {
            "minLength": 1,
            "not": {"anyOf": [{"enum": ["initialize", "ping", "server/discover", "subscriptions/listen", "tools/list", "tools/call"]}, {"pattern": "^notifications/"}]}
        }))
    )]
    #[cfg_attr(feature = "schema", schemars(with = "BTreeMap<String, Action>"))]
    pub methods: Map<Action>,
    /// `enforce` (default) or `dry_run`: compute, log and count every decision, but forward calls the
    /// policy would refuse. Protocol errors (malformed bodies, 413, 415, …) are always enforced.
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    pub mode: Option<Mode>,
    /// Per-tool overrides of `mode`, e.g. `{"vm_agent_exec": "dry_run"}`.
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    #[cfg_attr(feature = "schema", schemars(with = "BTreeMap<String, Mode>"))]
    pub tool_modes: Map<Mode>,
    /// Also remove tools that the policy denies by name from `tools/list` results (default false:
    /// as in PolicyLayer, denied tools stay visible and only `hide` removes tools).
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    pub hide_denied_tools: bool,
    /// Largest `tools/list` response the filter rewrites, in bytes (default 2097152); larger gets 502.
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = super::MAX_BODY_BYTES_CEILING)))]
    pub max_response_bytes: Option<u64>,
    /// Known grants. When non-empty, a credential whose SHA-256 is not listed gets 401, and logs
    /// and metrics use the label instead of the hash prefix.
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    pub grants: Vec<GrantSpec>,
    /// The approval service (`mcp-approvals`), required when a tool uses `require_approval`.
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    pub approval: Option<ApprovalSpec>,
    /// JSON-RPC responses a client sends to server requests (elicitation, sampling, roots): `allow`
    /// (default) forwards them; `deny` refuses them with 403, since the agent the policy constrains
    /// writes them. A batch mixing responses with requests or notifications is always refused (400).
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    pub client_responses: Option<Action>,
    /// The rate limit service (Envoy RLS v3, e.g. `mcp-ratelimit`) that decides every limit across
    /// Envoys instead of this Envoy's shared data.
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    pub rate_limit_service: Option<RateLimitServiceSpec>,
    /// The URL of this MCP server's OAuth 2.0 protected resource metadata (RFC 9728), e.g.
    /// `https://mcp.example.com/.well-known/oauth-protected-resource`. When set, the 401 for a missing
    /// grant carries `WWW-Authenticate: Bearer resource_metadata="<url>"`, from which MCP clients
    /// discover the authorization server. `https` (`http` for a loopback host only), no fragment.
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    #[cfg_attr(
        feature = "schema",
        schemars(length(min = 1, max = 2048), regex(pattern = r"^https?://[A-Za-z0-9._~:/?\[\]@!$&'()*+,;=%-]+$"))
    )]
    pub resource_metadata_url: Option<String>,
    /// MCP protocol versions accepted (default: all four the filter knows, `2025-03-26`,
    /// `2025-06-18`, `2025-11-25`, `2026-07-28`). Others get 400 −32022.
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    #[cfg_attr(
        feature = "schema",
        schemars(extend(
            "items" = {"enum": ["2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"]},
            "uniqueItems" = true,
            "minItems" = 1
        ))
    )]
    pub protocol_versions: Option<Vec<String>>,
    /// Where each decision's audit record goes: `log` (default, one info line in Envoy's log),
    /// `access_log` (the whole record in the filter-state value `wasm.mcp_audit`, for
    /// `%FILTER_STATE(wasm.mcp_audit:PLAIN)%` in the access log format), or `off`.
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    pub audit: Option<AuditMode>,
    /// Whether each decision sets the filter-state values `wasm.mcp_decision`, `wasm.mcp_tool`,
    /// `wasm.mcp_grant`, `wasm.mcp_rule` and `wasm.mcp_error` for the access log (default `true`).
    /// `false` saves their host calls (3.6–7.5 µs of Envoy CPU per request in the wasm build,
    /// docs/src/cost-and-size.md) where nothing reads them; `wasm.mcp_audit` follows `audit` either
    /// way.
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    pub filter_state: Option<bool>,
    /// Bind every `Mcp-Session-Id` to the grant that created it (HMAC-SHA-256); see the README,
    /// "Sessions bound to their grant". Absent: session ids pass unchanged.
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    pub session_key: Option<SessionKeySpec>,
    /// What a listed tool whose definition does not match its `pin` gets: `enforce` (default:
    /// removed from `tools/list`, calls refused with `pin_mismatch`) or `report` (audited only).
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    pub pins: Option<PinMode>,
    /// Who calls, from the verified token: the header Envoy's `jwt_authn` forwards the verified
    /// payload in, and the claim that becomes the grant. See the "Many agents" chapter.
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    pub identity: Option<IdentitySpec>,
    /// `error` (default) or `tool_result`: how a refused `tools/call` is answered.
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    pub refusal_shape: Option<crate::terms::RefusalShape>,
}

/// `gateway.identity`.
#[derive(Debug, Clone)]
#[cfg_attr(test, derive(Deserialize))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(any(test, feature = "schema"), serde(deny_unknown_fields))]
pub struct IdentitySpec {
    /// The header `jwt_authn` fills with the verified payload (`forward_payload_header`), e.g.
    /// `x-jwt-payload`. Strip it at the edge: only `jwt_authn` may set it.
    #[cfg_attr(feature = "schema", schemars(regex(pattern = r"^[A-Za-z0-9_.-]+$")))]
    pub payload_header: String,
    /// The claim whose value becomes the grant (default `sub`).
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    #[cfg_attr(feature = "schema", schemars(length(min = 1)))]
    pub grant_claim: Option<String>,
}

/// `gateway.session_key`: secrets of at least 32 bytes (UTF-8 text, used as HMAC keys as is), each
/// given inline or as the name of an environment variable of the wasm VM (Envoy
/// `vm_config.environment_variables`), which keeps the secret out of the plugin configuration.
#[derive(Debug, Clone, Default)]
#[cfg_attr(test, derive(Deserialize))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(any(test, feature = "schema"), serde(deny_unknown_fields))]
pub struct SessionKeySpec {
    /// The key new session ids are made with (or `current_env`).
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    #[cfg_attr(feature = "schema", schemars(length(min = 32)))]
    pub current: Option<String>,
    /// The environment variable holding `current`.
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    pub current_env: Option<String>,
    /// The key before it, still accepted during a rotation; remove it once sessions made under it
    /// have ended.
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    #[cfg_attr(feature = "schema", schemars(length(min = 32)))]
    pub previous: Option<String>,
    /// The environment variable holding `previous`.
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    pub previous_env: Option<String>,
}

/// `gateway.approval`: where and how the filter asks a person to approve a call.
#[derive(Debug, Clone, Default)]
#[cfg_attr(test, derive(Deserialize))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(any(test, feature = "schema"), serde(deny_unknown_fields))]
pub struct ApprovalSpec {
    /// The Envoy cluster of the approval service (defined in the bootstrap or by CDS).
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 256)))]
    pub cluster: String,
    /// Path of its check endpoint (default `/v1/check`).
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    #[cfg_attr(feature = "schema", schemars(regex(pattern = "^/[!-~]*$")))]
    pub path: Option<String>,
    /// `:authority` of the callout (default: the cluster name).
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    #[cfg_attr(feature = "schema", schemars(regex(pattern = "^[!-~]{1,256}$")))]
    pub authority: Option<String>,
    /// Callout timeout, e.g. `"5s"` (default `"5s"` in retry mode, `"30s"` in hold mode; at most
    /// `"301s"`; at least `"2s"` in hold mode). A timeout refuses the call (`approval_unavailable`).
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    pub timeout: Option<String>,
    /// `retry` (default): a pending call is refused with `approval_required` and the agent retries;
    /// `hold`: the call waits while the service long-polls for a decision.
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    pub mode: Option<ApprovalMode>,
    /// Hold mode: most calls of one grant waiting for a decision at once, per Envoy process
    /// (default 8, 1 to 10000). More calls are asked without waiting (`approval_required`). A
    /// grant's first held call counts it against `gateway.max_tracked_grants`.
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = 10000)))]
    pub max_held_per_grant: Option<u32>,
}

/// One registered grant: the SHA-256 of its token (64 hex digits) and a label for logs.
#[derive(Debug, Clone)]
#[cfg_attr(test, derive(Deserialize))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(any(test, feature = "schema"), serde(deny_unknown_fields))]
pub struct GrantSpec {
    #[cfg_attr(feature = "schema", schemars(regex(pattern = "^[0-9A-Fa-f]{64}$")))]
    pub sha256: String,
    #[cfg_attr(feature = "schema", schemars(regex(pattern = "^[!-~]{1,64}$")))]
    pub label: String,
}

/// `gateway.rate_limit_service`: the rate limit service that decides every limit of the policy.
#[derive(Debug, Clone, Default)]
#[cfg_attr(test, derive(Deserialize))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(any(test, feature = "schema"), serde(deny_unknown_fields))]
pub struct RateLimitServiceSpec {
    /// The Envoy cluster of the service (HTTP/2: `typed_extension_protocol_options` with
    /// `explicit_http_config.http2_protocol_options`).
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 256)))]
    pub cluster: String,
    /// `:authority` of the gRPC callout, a host or `host:port` (default: the cluster name). Set it
    /// when the cluster name is not a valid host, e.g. Istio's `outbound|PORT||HOST` (give `HOST`):
    /// HTTP/2 servers reset a stream whose `:authority` holds `|` (tonic/hyper do).
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    #[cfg_attr(feature = "schema", schemars(regex(pattern = "^[A-Za-z0-9._~!$&'()*+,;=:%\\[\\]-]{1,256}$")))]
    pub authority: Option<String>,
    /// The RLS `domain` (default `"mcp"`).
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    #[cfg_attr(feature = "schema", schemars(length(min = 1, max = 256)))]
    pub domain: Option<String>,
    /// The longest wait for an answer, e.g. `"100ms"` (default; 1 ms to 60 s).
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    pub timeout: Option<String>,
    /// `deny` (default): a service that cannot answer refuses the call (`limiter_unavailable`);
    /// `allow`: the call is forwarded and counted as `limiter_unavailable`.
    #[cfg_attr(any(test, feature = "schema"), serde(default))]
    pub failure_mode: Option<FailureMode>,
}
