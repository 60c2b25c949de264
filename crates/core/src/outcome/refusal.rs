//! Every refusal the filter answers, as one type: [`Refusal`], one variant per `data.kind`.
//!
//! A variant carries what its reply says (tool, reason, limit, approval…) and gives everything else
//! from one table: the JSON-RPC code ([`crate::wire::reply::code`]), `data.kind`, the HTTP status, the
//! extra headers (`retry-after`, `www-authenticate`, `allow`) and the [`DecisionKind`] it is counted
//! and logged under. [`Refusal::to_json`] renders the error response (JSON-RPC 2.0 §5.1, shape in
//! `crate::wire::reply`) and [`Refusal::reply`] the whole local reply; nothing else builds one.
//!
//! A new refusal kind is a new variant: the compiler then asks for its row in every `match` here,
//! and `tests/core/refusal/mod.rs` for its row in the table test.

use std::borrow::Cow;

use super::kind::DecisionKind;
use crate::approval::offer::ApprovalLink;
use crate::limits::Limit;
use crate::wire::mcp::{Id, ProtocolError, ProtocolErrorKind};
use crate::wire::protocol::{Version, Versions};
use crate::wire::reply::{code, Reply, RpcError};

mod render;
mod subject;

pub use subject::*;

/// One refusal: a local reply instead of forwarding. Variants are named after their `data.kind`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// −32700, 400: the body is not one strict JSON text.
    ParseError { detail: String },
    /// −32600, 400: JSON, but not a valid JSON-RPC message here (also a GET/DELETE with a body, a
    /// batch where the version has none, a mixed batch, sessions or client responses in 2026-07-28).
    InvalidRequest { detail: String },
    /// −32602, 400: malformed `params`.
    InvalidParams { detail: String },
    /// −32020, 400: `Mcp-Method`/`Mcp-Name` (or `MCP-Protocol-Version`) disagree with the body.
    HeaderMismatch { why: &'static str },
    /// −32022, 400: the version is unknown or not accepted; `data.requested` (when one was sent)
    /// and `data.supported` (`gateway.protocol_versions`).
    UnsupportedProtocolVersion { why: String, requested: String, supported: Versions },
    /// −32600, 400: a credential outside the grant's one place (`crate::identity::stray`).
    StrayCredential { why: &'static str },
    /// −32600, 405, `allow: GET, POST, DELETE`.
    MethodNotAllowed,
    /// −32600, 415: not `application/json` in UTF-8, or an encoded body.
    UnsupportedMediaType { why: &'static str },
    /// −32600, 413: a body over `gateway.max_body_bytes` (bytes); never judged on a prefix.
    BodyTooLarge { max_bytes: usize },
    /// −31010, 404: an `Mcp-Session-Id` ([`SESSION_INVALID`]), `Last-Event-ID`
    /// ([`EVENT_ID_INVALID`]) or HTTP+SSE session id in the query ([`LEGACY_SESSION_INVALID`]) not
    /// issued to this grant, so that clients start over.
    SessionInvalid { why: &'static str },
    /// −31003, 401 with a `www-authenticate` challenge (RFC 6750, RFC 9728).
    NoGrant { reason: &'static str, challenge: String },
    /// −32601, 404 in 2026-07-28 and 200 before (`VersionRules::method_not_found_status`): a
    /// request method the request's version does not define (`rule` `protocol_version`) or MCP does
    /// not define (`unknown_method`), not named in `gateway.methods`. A policy decision (counted
    /// `denied`, passed on in dry-run) answered as the version's specification asks.
    MethodNotFound { rule: &'static str, reason: String, version: Version },
    /// −31001, 200; 403 when what is denied is a client response (`gateway.client_responses`).
    Denied { subject: Subject, rule: String, reason: String },
    /// −31001, 200: the caller has no policy: no `attach` rule of the policy set matches it.
    NoPolicy { subject: Subject },
    /// −31001, 200: the caller is contained (`contain` of the policy set), with the operator's reason.
    Contained { subject: Subject, reason: String },
    /// −31002, 200, `retry-after`: `limit` is exhausted for `retry_after_seconds`.
    RateLimited { subject: Subject, limit: Limit, retry_after_seconds: u64 },
    /// −31004, 200, `retry-after: 1`: the call could not be counted (fail closed).
    LimiterUnavailable { subject: Subject, fault: LimiterFault },
    /// −31005, 200: an allowed element of a batch refused because another one was. Never a decision
    /// of its own: a batch is recorded under the refusal that caused it.
    BatchRefused,
    /// −31006, 502: a `tools/list` response the filter cannot filter.
    BadUpstreamResponse { why: String },
    /// −31007, 200: the tool needs a person's approval. With `link`, the approval service opened a
    /// request; without, none can be opened (a call that needs approval inside a batch).
    ApprovalRequired { tool: String, reason: String, link: Option<ApprovalLink> },
    /// −31008, 200: an approver denied this exact call.
    ApprovalDenied { tool: String, approval_id: String, approver: String, note: String },
    /// −31009, 200, `retry-after: 1`: the approval service could not be asked (fail closed).
    ApprovalUnavailable { tool: String, why: String },
    /// −31011, 400: the retry of a call offered for approval through `input_required` carries a
    /// `requestState` (or an answer to the gateway's request) this gateway did not seal for this grant
    /// and call, or one that expired (`crate::approval::offer`).
    ApprovalStateInvalid { tool: String, why: &'static str },
    /// −32042 URLElicitationRequiredError (MCP 2025-11-25, client/elicitation), 200, `data.kind`
    /// `approval_required`: [`Refusal::ApprovalRequired`] offered to a session whose client declared
    /// URL-mode elicitation at `initialize`; `data.elicitations` holds one URL elicitation of the
    /// approval page, which the client can open natively ([`crate::approval::offer`]). The retry is the
    /// identical call.
    UrlElicitationRequired { tool: String, reason: String, link: ApprovalLink },
    /// −31012, 200: a `tools/call` result refused by `tools.NAME.result` (`rule`: the `deny_if[i]`
    /// or `max_bytes` path), or one that cannot be read with certainty (`rule`: `tools.NAME.result`).
    /// Never quotes the result.
    ResultRefused { tool: String, rule: String, reason: String },
    /// −31013, 200: the tool's definition in `tools/list` did not match `tools.NAME.pin`.
    PinMismatch { tool: String },
    /// −31014, 200, `retry-after`: `flow` (at `rule`, `flows[i]`) denies the tool while the grant
    /// carries `mark`, for `retry_after_seconds` more.
    FlowDenied { tool: String, flow: String, rule: String, mark: String, reason: String, retry_after_seconds: u64 },
    /// −32600 `unavailable`, 503: the filter cannot judge at all ([`POLICY_NOT_LOADED`],
    /// [`BODY_UNREADABLE`], [`HEADERS_UNREADABLE`], [`SESSION_ID_NOT_REWRITTEN`],
    /// [`LAST_EVENT_ID_NOT_REWRITTEN`], [`PATH_NOT_REWRITTEN`], [`BODY_UNWRITABLE`]): a fault on the
    /// proxy's side, not the client's, which a retry may clear.
    Unavailable { reason: &'static str },
}

impl Refusal {
    /// The refusal of a message that is not valid JSON-RPC/MCP (`crate::wire::mcp::read_body`).
    pub fn protocol(e: &ProtocolError) -> Self {
        let detail = e.detail.clone();
        match e.kind {
            ProtocolErrorKind::Parse => Refusal::ParseError { detail },
            ProtocolErrorKind::InvalidRequest => Refusal::InvalidRequest { detail },
            ProtocolErrorKind::InvalidParams => Refusal::InvalidParams { detail },
        }
    }

    /// The JSON-RPC error code.
    pub fn code(&self) -> i32 {
        match self {
            Refusal::ParseError { .. } => code::PARSE_ERROR,
            Refusal::InvalidParams { .. } => code::INVALID_PARAMS,
            Refusal::InvalidRequest { .. }
            | Refusal::StrayCredential { .. }
            | Refusal::MethodNotAllowed
            | Refusal::UnsupportedMediaType { .. }
            | Refusal::BodyTooLarge { .. }
            | Refusal::Unavailable { .. } => code::INVALID_REQUEST,
            Refusal::HeaderMismatch { .. } => code::HEADER_MISMATCH,
            Refusal::UnsupportedProtocolVersion { .. } => code::UNSUPPORTED_PROTOCOL_VERSION,
            Refusal::SessionInvalid { .. } => code::SESSION_INVALID,
            Refusal::NoGrant { .. } => code::NO_GRANT,
            Refusal::MethodNotFound { .. } => code::METHOD_NOT_FOUND,
            Refusal::Denied { .. } | Refusal::NoPolicy { .. } | Refusal::Contained { .. } => code::DENIED,
            Refusal::RateLimited { .. } => code::RATE_LIMITED,
            Refusal::LimiterUnavailable { .. } => code::LIMITER_UNAVAILABLE,
            Refusal::BatchRefused => code::BATCH_REFUSED,
            Refusal::BadUpstreamResponse { .. } => code::BAD_UPSTREAM_RESPONSE,
            Refusal::ApprovalRequired { .. } => code::APPROVAL_REQUIRED,
            Refusal::ApprovalDenied { .. } => code::APPROVAL_DENIED,
            Refusal::ApprovalUnavailable { .. } => code::APPROVAL_UNAVAILABLE,
            Refusal::ApprovalStateInvalid { .. } => code::APPROVAL_STATE_INVALID,
            Refusal::UrlElicitationRequired { .. } => code::URL_ELICITATION_REQUIRED,
            Refusal::ResultRefused { .. } => code::RESULT_REFUSED,
            Refusal::PinMismatch { .. } => code::PIN_MISMATCH,
            Refusal::FlowDenied { .. } => code::FLOW_DENIED,
        }
    }

    /// `data.kind`.
    pub fn kind(&self) -> &'static str {
        match self {
            Refusal::ParseError { .. } => "parse_error",
            Refusal::InvalidRequest { .. } => "invalid_request",
            Refusal::InvalidParams { .. } => "invalid_params",
            Refusal::HeaderMismatch { .. } => "header_mismatch",
            Refusal::UnsupportedProtocolVersion { .. } => "unsupported_protocol_version",
            Refusal::StrayCredential { .. } => "stray_credential",
            Refusal::MethodNotAllowed => "method_not_allowed",
            Refusal::UnsupportedMediaType { .. } => "unsupported_media_type",
            Refusal::BodyTooLarge { .. } => "body_too_large",
            Refusal::SessionInvalid { .. } => "session_invalid",
            Refusal::NoGrant { .. } => "no_grant",
            Refusal::MethodNotFound { .. } => "method_not_found",
            Refusal::Denied { .. } => "denied",
            Refusal::NoPolicy { .. } => "no_policy",
            Refusal::Contained { .. } => "contained",
            Refusal::RateLimited { .. } => "rate_limited",
            Refusal::LimiterUnavailable { .. } => "limiter_unavailable",
            Refusal::BatchRefused => "batch_refused",
            Refusal::BadUpstreamResponse { .. } => "bad_upstream_response",
            Refusal::ApprovalRequired { .. } | Refusal::UrlElicitationRequired { .. } => "approval_required",
            Refusal::ApprovalDenied { .. } => "approval_denied",
            Refusal::ApprovalUnavailable { .. } => "approval_unavailable",
            Refusal::ApprovalStateInvalid { .. } => "approval_state_invalid",
            Refusal::Unavailable { .. } => "unavailable",
            Refusal::ResultRefused { .. } => "result_refused",
            Refusal::PinMismatch { .. } => "pin_mismatch",
            Refusal::FlowDenied { .. } => "flow_denied",
        }
    }

    /// The HTTP status of the local reply (a batch's reply has its own: 400 if an element is
    /// invalid, else 200).
    pub fn status(&self) -> u16 {
        match self {
            Refusal::ParseError { .. }
            | Refusal::InvalidRequest { .. }
            | Refusal::InvalidParams { .. }
            | Refusal::HeaderMismatch { .. }
            | Refusal::UnsupportedProtocolVersion { .. }
            | Refusal::StrayCredential { .. }
            | Refusal::ApprovalStateInvalid { .. } => 400,
            Refusal::NoGrant { .. } => 401,
            Refusal::Denied { subject: Subject::ClientResponse, .. } => 403,
            Refusal::SessionInvalid { .. } => 404,
            Refusal::MethodNotFound { version, .. } => version.rules().method_not_found_status,
            Refusal::MethodNotAllowed => 405,
            Refusal::BodyTooLarge { .. } => 413,
            Refusal::UnsupportedMediaType { .. } => 415,
            Refusal::BadUpstreamResponse { .. } => 502,
            Refusal::Unavailable { .. } => 503,
            Refusal::Denied { .. }
            | Refusal::NoPolicy { .. }
            | Refusal::Contained { .. }
            | Refusal::RateLimited { .. }
            | Refusal::LimiterUnavailable { .. }
            | Refusal::BatchRefused
            | Refusal::ApprovalRequired { .. }
            | Refusal::UrlElicitationRequired { .. }
            | Refusal::ApprovalDenied { .. }
            | Refusal::ApprovalUnavailable { .. }
            | Refusal::ResultRefused { .. }
            | Refusal::PinMismatch { .. }
            | Refusal::FlowDenied { .. } => 200,
        }
    }

    /// Headers of the local reply besides `content-type: application/json`.
    pub fn headers(&self) -> Vec<(&'static str, String)> {
        match self {
            Refusal::MethodNotAllowed => vec![("allow", "GET, POST, DELETE".into())],
            Refusal::NoGrant { challenge, .. } => vec![("www-authenticate", challenge.clone())],
            Refusal::RateLimited { retry_after_seconds, .. } | Refusal::FlowDenied { retry_after_seconds, .. } => {
                vec![("retry-after", retry_after_seconds.to_string())]
            }
            Refusal::LimiterUnavailable { .. } | Refusal::ApprovalUnavailable { .. } => {
                vec![("retry-after", "1".into())]
            }
            _ => Vec::new(),
        }
    }

    /// What the decision is counted and logged as.
    pub fn decision_kind(&self) -> DecisionKind {
        match self {
            Refusal::NoGrant { .. } => DecisionKind::NoGrant,
            Refusal::Denied { .. }
            | Refusal::MethodNotFound { .. }
            | Refusal::NoPolicy { .. }
            | Refusal::Contained { .. }
            | Refusal::ResultRefused { .. }
            | Refusal::PinMismatch { .. }
            | Refusal::FlowDenied { .. } => DecisionKind::Denied,
            Refusal::RateLimited { .. } => DecisionKind::RateLimited,
            Refusal::LimiterUnavailable { .. } => DecisionKind::LimiterUnavailable,
            Refusal::ApprovalRequired { .. } | Refusal::UrlElicitationRequired { .. } => DecisionKind::ApprovalRequired,
            Refusal::ApprovalDenied { .. } => DecisionKind::ApprovalDenied,
            Refusal::ApprovalUnavailable { .. } => DecisionKind::ApprovalUnavailable,
            Refusal::ParseError { .. }
            | Refusal::InvalidRequest { .. }
            | Refusal::InvalidParams { .. }
            | Refusal::HeaderMismatch { .. }
            | Refusal::UnsupportedProtocolVersion { .. }
            | Refusal::StrayCredential { .. }
            | Refusal::MethodNotAllowed
            | Refusal::UnsupportedMediaType { .. }
            | Refusal::BodyTooLarge { .. }
            | Refusal::SessionInvalid { .. }
            | Refusal::BatchRefused
            | Refusal::BadUpstreamResponse { .. }
            | Refusal::ApprovalStateInvalid { .. }
            | Refusal::Unavailable { .. } => DecisionKind::Invalid,
        }
    }

    /// `data.reason`: why, for the agent (never quotes the body or a credential).
    pub fn reason(&self) -> Cow<'_, str> {
        match self {
            Refusal::ParseError { detail } | Refusal::InvalidRequest { detail } | Refusal::InvalidParams { detail } => {
                Cow::Borrowed(detail)
            }
            Refusal::UnsupportedProtocolVersion { why, .. }
            | Refusal::BadUpstreamResponse { why }
            | Refusal::ApprovalUnavailable { why, .. } => Cow::Borrowed(why),
            Refusal::HeaderMismatch { why }
            | Refusal::StrayCredential { why }
            | Refusal::ApprovalStateInvalid { why, .. }
            | Refusal::UnsupportedMediaType { why } => Cow::Borrowed(why),
            Refusal::MethodNotAllowed => Cow::Borrowed(METHOD_NOT_ALLOWED),
            Refusal::BodyTooLarge { max_bytes } => Cow::Owned(format!("request body exceeds {max_bytes} bytes")),
            Refusal::SessionInvalid { why } => Cow::Borrowed(why),
            Refusal::NoGrant { reason, .. } | Refusal::Unavailable { reason } => Cow::Borrowed(reason),
            Refusal::NoPolicy { .. } => Cow::Borrowed(NO_POLICY),
            Refusal::Denied { reason, .. }
            | Refusal::MethodNotFound { reason, .. }
            | Refusal::Contained { reason, .. }
            | Refusal::ApprovalRequired { reason, .. }
            | Refusal::UrlElicitationRequired { reason, .. }
            | Refusal::ResultRefused { reason, .. }
            | Refusal::FlowDenied { reason, .. } => Cow::Borrowed(reason),
            Refusal::PinMismatch { .. } => Cow::Borrowed(PIN_MISMATCH),
            Refusal::RateLimited { limit, .. } => {
                Cow::Owned(format!("limit {} ({} per {}) reached", limit.counter, limit.max, limit.window.name()))
            }
            Refusal::LimiterUnavailable { fault: LimiterFault::Local(u), .. } => Cow::Borrowed(u.reason()),
            Refusal::LimiterUnavailable { fault: LimiterFault::Service(why), .. } => Cow::Borrowed(why),
            Refusal::BatchRefused => Cow::Borrowed(BATCH_REFUSED),
            Refusal::ApprovalDenied { note, .. } if note.is_empty() => Cow::Borrowed("denied by an approver"),
            Refusal::ApprovalDenied { note, .. } => Cow::Borrowed(note),
        }
    }

    /// `data.tool`: the tool the refusal is about, if it is about one.
    pub fn tool(&self) -> Option<&str> {
        match self {
            Refusal::Denied { subject, .. }
            | Refusal::NoPolicy { subject }
            | Refusal::Contained { subject, .. }
            | Refusal::RateLimited { subject, .. }
            | Refusal::LimiterUnavailable { subject, .. } => subject.tool(),
            Refusal::ApprovalRequired { tool, .. }
            | Refusal::UrlElicitationRequired { tool, .. }
            | Refusal::ApprovalDenied { tool, .. }
            | Refusal::ApprovalUnavailable { tool, .. }
            | Refusal::ApprovalStateInvalid { tool, .. }
            | Refusal::ResultRefused { tool, .. }
            | Refusal::PinMismatch { tool }
            | Refusal::FlowDenied { tool, .. } => Some(tool),
            _ => None,
        }
    }

    /// `data.rule`: the policy path that refused (a rule, a limit, `hide`, `gateway.client_responses`).
    pub fn rule(&self) -> Option<&str> {
        match self {
            Refusal::Denied { rule, .. } | Refusal::ResultRefused { rule, .. } | Refusal::FlowDenied { rule, .. } => {
                Some(rule)
            }
            Refusal::MethodNotFound { rule, .. } => Some(rule),
            Refusal::RateLimited { limit, .. } => Some(&limit.path),
            _ => None,
        }
    }

    /// A tool hidden by the policy's `hide` list (counted as `hidden`; answered as `denied`).
    pub fn is_hidden(&self) -> bool {
        matches!(self, Refusal::Denied { rule, .. } if rule == crate::policy::HIDE_RULE)
    }
}
