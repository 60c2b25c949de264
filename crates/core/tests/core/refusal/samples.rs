//! One sample of every `Refusal` variant, the rows of the table test.

use super::*;

fn limit() -> Limit {
    Limit::new("exec".into(), Window::Minute, 10, Scope::Grant, Algorithm::Fixed, "tools.x.limits[0]".into())
}

pub(super) fn samples() -> Vec<Refusal> {
    vec![
        Refusal::ParseError { detail: "trailing data".into() },
        Refusal::InvalidRequest { detail: "empty batch".into() },
        Refusal::InvalidParams { detail: "\"params.name\" must be a string".into() },
        Refusal::HeaderMismatch { why: "Mcp-Method header does not match the body's method" },
        Refusal::UnsupportedProtocolVersion {
            why: "protocol version is not accepted by this gateway (gateway.protocol_versions)".into(),
            requested: "2024-11-05".into(),
            supported: Versions::ALL,
        },
        Refusal::UnsupportedProtocolVersion {
            why: "w".into(),
            requested: String::new(),
            supported: Versions::default(),
        },
        Refusal::StrayCredential { why: "no access_token" },
        Refusal::MethodNotAllowed,
        Refusal::UnsupportedMediaType { why: "Content-Type must be application/json" },
        Refusal::BodyTooLarge { max_bytes: 1024 },
        Refusal::SessionInvalid { why: SESSION_INVALID },
        Refusal::SessionInvalid { why: EVENT_ID_INVALID },
        Refusal::SessionInvalid { why: LEGACY_SESSION_INVALID },
        Refusal::NoGrant { reason: "no token", challenge: "Bearer".into() },
        Refusal::Denied { subject: Subject::Tool("x".into()), rule: "tools.x".into(), reason: "no \"x\"".into() },
        Refusal::MethodNotFound {
            rule: "protocol_version",
            reason: "method ping does not exist in MCP 2026-07-28".into(),
            version: Version::V2026_07_28,
        },
        Refusal::MethodNotFound {
            rule: "unknown_method",
            reason: "method x/y is not an MCP method this gateway knows".into(),
            version: Version::V2025_11_25,
        },
        Refusal::Denied {
            subject: Subject::Method("resources/read".into()),
            rule: "gateway.methods.resources/read".into(),
            reason: "r".into(),
        },
        Refusal::Denied {
            subject: Subject::ClientResponse,
            rule: "gateway.client_responses".into(),
            reason: "r".into(),
        },
        Refusal::Denied {
            subject: Subject::Tool("h".into()),
            rule: "hide".into(),
            reason: "tool is hidden by policy".into(),
        },
        Refusal::NoPolicy { subject: Subject::Tool("x".into()) },
        Refusal::Contained { subject: Subject::Tool("x".into()), reason: "incident 42".into() },
        Refusal::RateLimited { subject: Subject::Tool("x".into()), limit: limit(), retry_after_seconds: 42 },
        Refusal::RateLimited { subject: Subject::Call, limit: limit(), retry_after_seconds: 1 },
        Refusal::LimiterUnavailable {
            subject: Subject::Tool("x".into()),
            fault: LimiterFault::Local(Unavailable::CasRetriesExhausted),
        },
        Refusal::LimiterUnavailable { subject: Subject::Call, fault: LimiterFault::Service("gRPC status 14".into()) },
        Refusal::BatchRefused,
        Refusal::BadUpstreamResponse { why: "not JSON".into() },
        Refusal::ResultRefused {
            tool: "read_file".into(),
            rule: "tools.read_file.result.deny_if[0]".into(),
            reason: "a private key".into(),
        },
        Refusal::PinMismatch { tool: "list_vms".into() },
        Refusal::FlowDenied {
            tool: "http_post".into(),
            flow: "no-egress".into(),
            rule: "flows[0]".into(),
            mark: "secret".into(),
            reason: "no egress after secrets".into(),
            retry_after_seconds: 600,
        },
        Refusal::ApprovalRequired {
            tool: "x".into(),
            reason: "costs money".into(),
            link: Some(ApprovalLink {
                approval_id: "apr_1".into(),
                approval_url: "http://a/apr_1".into(),
                expires_in_seconds: 300,
            }),
        },
        Refusal::ApprovalRequired { tool: "x".into(), reason: "alone".into(), link: None },
        Refusal::UrlElicitationRequired {
            tool: "x".into(),
            reason: "costs \"money\"".into(),
            link: ApprovalLink {
                approval_id: "apr_1".into(),
                approval_url: "http://a/apr_1".into(),
                expires_in_seconds: 300,
            },
        },
        Refusal::ApprovalDenied {
            tool: "x".into(),
            approval_id: "apr_1".into(),
            approver: "ann".into(),
            note: "no".into(),
        },
        Refusal::ApprovalDenied {
            tool: "x".into(),
            approval_id: "apr_1".into(),
            approver: "ann".into(),
            note: String::new(),
        },
        Refusal::ApprovalUnavailable { tool: "x".into(), why: "timeout".into() },
        Refusal::ApprovalStateInvalid {
            tool: "x".into(),
            why: "params.requestState has expired; call the tool again without it",
        },
        Refusal::Unavailable { reason: POLICY_NOT_LOADED },
        Refusal::Unavailable { reason: BODY_UNREADABLE },
        Refusal::Unavailable { reason: HEADERS_UNREADABLE },
        Refusal::Unavailable { reason: SESSION_ID_NOT_REWRITTEN },
        Refusal::Unavailable { reason: LAST_EVENT_ID_NOT_REWRITTEN },
        Refusal::Unavailable { reason: PATH_NOT_REWRITTEN },
        Refusal::Unavailable { reason: BODY_UNWRITABLE },
    ]
}
