//! The compiled `gateway` settings: where the grant comes from, limits on bodies, modes, and
//! the services the filter calls (approval service, rate limit service).

use std::collections::HashMap;

use crate::terms::{Action, ApprovalMode, Mode};

/// Where the grant (the caller's credential) comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GrantSource {
    /// `Authorization: Bearer <token>` (RFC 6750 §2.1).
    Bearer,
    /// A trusted header set by an earlier filter; lower-case name.
    Header(String),
}

/// `gateway` settings after defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gateway {
    pub grant: GrantSource,
    /// Bytes.
    pub max_body_bytes: usize,
    pub max_tracked_grants: u64,
    /// Registered grants by SHA-256 of the token, with their labels; empty means any token.
    pub grants: HashMap<[u8; 32], String, crate::policy::NameHasher>,
    /// Also remove tools denied by name from `tools/list` results.
    pub hide_denied_tools: bool,
    /// Largest `tools/list` response filtered, in bytes; larger ones get 502.
    pub max_response_bytes: usize,
    /// `gateway.mode`.
    pub mode: Mode,
    /// `gateway.tool_modes`: per-tool overrides of `mode`.
    pub tool_modes: crate::policy::NameMap<Mode>,
    /// `gateway.approval`: the approval service, required when a tool uses `require_approval`.
    pub approval: Option<ApprovalService>,
    /// `gateway.protocol_versions`: the MCP protocol versions accepted.
    pub protocol_versions: crate::wire::protocol::Versions,
    /// `gateway.session_key`: bind `Mcp-Session-Id` to its grant.
    pub session_keys: Option<crate::identity::session::SessionKeys>,
    /// `gateway.client_responses`: forward (`Allow`, default) or refuse (`Deny`) JSON-RPC responses
    /// from the client.
    pub client_responses: Action,
    /// `gateway.rate_limit_service`: when set, it decides every limit instead of shared data.
    pub rate_limit_service: Option<RateLimitService>,
    /// `gateway.audit`: where each decision's audit record goes (default: the log).
    pub audit: crate::terms::AuditMode,
    /// `gateway.filter_state`: set the per-decision filter-state values (default true).
    pub filter_state: bool,
    /// `gateway.resource_metadata_url`: the RFC 9728 protected resource metadata URL named in the
    /// `WWW-Authenticate` challenge of every 401 (checked by `challenge::check_resource_metadata_url`).
    pub resource_metadata_url: Option<String>,
    /// `gateway.pins`: enforce (default) or only report pin mismatches.
    pub pins: crate::terms::PinMode,
    /// `gateway.identity`: who calls, from the verified token's payload; `None`: the grant alone.
    pub identity: Option<IdentitySource>,
    /// `gateway.refusal_shape`: how a refused `tools/call` is answered.
    pub refusal_shape: crate::terms::RefusalShape,
}

/// `gateway.identity` after defaults: the header `jwt_authn` forwards the verified payload in
/// (`forward_payload_header`) and the claim that becomes the grant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdentitySource {
    /// Lower-case header name.
    pub payload_header: String,
    pub grant_claim: String,
}

/// `gateway.approval` after defaults: where the filter asks for approvals (an Envoy cluster).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalService {
    /// Envoy cluster name of the approval service.
    pub cluster: String,
    /// Request path of the check endpoint (default `/v1/check`).
    pub path: String,
    /// `:authority` of the callout (default: the cluster name).
    pub authority: String,
    /// Callout timeout in milliseconds (default 5000 in retry mode, 30000 in hold mode).
    pub timeout_ms: u64,
    pub mode: ApprovalMode,
    /// Hold mode: most held callouts of one grant at once, per Envoy process (`crate::limits::held`).
    pub max_held_per_grant: u32,
}

impl ApprovalService {
    /// How long the service may hold a callout in hold mode, in seconds: one second less than the
    /// callout timeout, so its answer arrives before Envoy gives up. 0 in retry mode.
    pub fn wait_seconds(&self) -> u64 {
        match self.mode {
            ApprovalMode::Retry => 0,
            ApprovalMode::Hold => (self.timeout_ms / 1000).saturating_sub(1).max(1),
        }
    }
}

/// `gateway.rate_limit_service` after defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateLimitService {
    pub cluster: String,
    /// `:authority` of the callout; `None`: the cluster name (Envoy's default).
    pub authority: Option<String>,
    pub domain: String,
    /// Milliseconds.
    pub timeout_ms: u64,
    pub failure_mode: crate::terms::FailureMode,
}
