//! `gateway`: the deployment settings this filter adds to PolicyLayer's `policy.json` (who the
//! caller is, sessions, approvals, the rate limit service, audit and reply shapes).

#[cfg(feature = "schema")]
use std::collections::BTreeMap;

#[cfg(test)]
use serde::Deserialize;

use super::super::Map;
use crate::terms::{Action, ApprovalMode, AuditMode, FailureMode, Mode, PinMode};

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
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = super::super::MAX_BODY_BYTES_CEILING)))]
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
    #[cfg_attr(feature = "schema", schemars(range(min = 1, max = super::super::MAX_BODY_BYTES_CEILING)))]
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
    /// Not `sha256:…`, which a set's `grant` matcher reads as a grant's id.
    #[cfg_attr(feature = "schema", schemars(regex(pattern = "^(?!sha256:)[!-~]{1,64}$")))]
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
