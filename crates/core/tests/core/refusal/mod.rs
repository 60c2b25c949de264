//! Every `Refusal` variant: its exact code, `data.kind`, HTTP status, headers, decision kind and
//! rendered JSON-RPC error. `row` matches exhaustively, so a new variant does not compile until it
//! has a row here; `every_variant_has_a_sample` then asks for a sample of it.

use std::collections::HashSet;
use std::mem::discriminant;

use mcp_policy_core::approval::offer::ApprovalLink;
use mcp_policy_core::limits::Limit;
use mcp_policy_core::limits::Unavailable;
use mcp_policy_core::outcome::kind::DecisionKind;
use mcp_policy_core::outcome::refusal::{
    LimiterFault, Refusal, Subject, BODY_UNREADABLE, BODY_UNWRITABLE, EVENT_ID_INVALID, HEADERS_UNREADABLE,
    LAST_EVENT_ID_NOT_REWRITTEN, LEGACY_SESSION_INVALID, PATH_NOT_REWRITTEN, POLICY_NOT_LOADED,
    SESSION_ID_NOT_REWRITTEN, SESSION_INVALID,
};
use mcp_policy_core::terms::Algorithm;
use mcp_policy_core::terms::Scope;
use mcp_policy_core::terms::Window;
use mcp_policy_core::wire::mcp::Id;
use mcp_policy_core::wire::protocol::{Version, Versions};

mod answers_chapter;
mod samples;
use samples::samples;

/// The number of `Refusal` variants.
const VARIANTS: usize = 28;

struct Row {
    code: i32,
    kind: &'static str,
    status: u16,
    headers: &'static [(&'static str, &'static str)],
    decision: DecisionKind,
    /// The error response for id 7.
    json: &'static str,
}

const RETRY_1: &[(&str, &str)] = &[("retry-after", "1")];

fn row(r: &Refusal) -> Row {
    use DecisionKind::*;
    let (code, kind, status, headers, decision, json): (i32, &str, u16, &[(&str, &str)], DecisionKind, &str) = match r {
        Refusal::ParseError { .. } => (
            -32700,
            "parse_error",
            400,
            &[],
            Invalid,
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32700,"message":"Parse error: trailing data","data":{"kind":"parse_error","reason":"trailing data"}}}"#,
        ),
        Refusal::InvalidRequest { .. } => (
            -32600,
            "invalid_request",
            400,
            &[],
            Invalid,
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32600,"message":"Invalid Request: empty batch","data":{"kind":"invalid_request","reason":"empty batch"}}}"#,
        ),
        Refusal::InvalidParams { .. } => (
            -32602,
            "invalid_params",
            400,
            &[],
            Invalid,
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"Invalid params: \"params.name\" must be a string","data":{"kind":"invalid_params","reason":"\"params.name\" must be a string"}}}"#,
        ),
        Refusal::HeaderMismatch { .. } => (
            -32020,
            "header_mismatch",
            400,
            &[],
            Invalid,
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32020,"message":"Header mismatch: Mcp-Method header does not match the body's method","data":{"kind":"header_mismatch","reason":"Mcp-Method header does not match the body's method"}}}"#,
        ),
        Refusal::UnsupportedProtocolVersion { requested, .. } if requested.is_empty() => (
            -32022,
            "unsupported_protocol_version",
            400,
            &[],
            Invalid,
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32022,"message":"Unsupported protocol version: w","data":{"kind":"unsupported_protocol_version","reason":"w","supported":[]}}}"#,
        ),
        Refusal::UnsupportedProtocolVersion { .. } => (
            -32022,
            "unsupported_protocol_version",
            400,
            &[],
            Invalid,
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32022,"message":"Unsupported protocol version: protocol version is not accepted by this gateway (gateway.protocol_versions)","data":{"kind":"unsupported_protocol_version","reason":"protocol version is not accepted by this gateway (gateway.protocol_versions)","requested":"2024-11-05","supported":["2025-03-26","2025-06-18","2025-11-25","2026-07-28"]}}}"#,
        ),
        Refusal::StrayCredential { .. } => (
            -32600,
            "stray_credential",
            400,
            &[],
            Invalid,
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32600,"message":"Invalid Request: no access_token","data":{"kind":"stray_credential","reason":"no access_token"}}}"#,
        ),
        Refusal::MethodNotAllowed => (
            -32600,
            "method_not_allowed",
            405,
            &[("allow", "GET, POST, DELETE")],
            Invalid,
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32600,"message":"Invalid Request: MCP Streamable HTTP uses POST, GET and DELETE only","data":{"kind":"method_not_allowed","reason":"MCP Streamable HTTP uses POST, GET and DELETE only"}}}"#,
        ),
        Refusal::UnsupportedMediaType { .. } => (
            -32600,
            "unsupported_media_type",
            415,
            &[],
            Invalid,
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32600,"message":"Invalid Request: Content-Type must be application/json","data":{"kind":"unsupported_media_type","reason":"Content-Type must be application/json"}}}"#,
        ),
        Refusal::BodyTooLarge { .. } => (
            -32600,
            "body_too_large",
            413,
            &[],
            Invalid,
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32600,"message":"Invalid Request: request body exceeds 1024 bytes","data":{"kind":"body_too_large","reason":"request body exceeds 1024 bytes"}}}"#,
        ),
        Refusal::SessionInvalid { why } if *why == EVENT_ID_INVALID => (
            -31010,
            "session_invalid",
            404,
            &[],
            Invalid,
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-31010,"message":"Not Found: this Last-Event-ID was not issued to this grant on this Mcp-Session-Id by this gateway; reconnect without it","data":{"kind":"session_invalid","reason":"this Last-Event-ID was not issued to this grant on this Mcp-Session-Id by this gateway; reconnect without it"}}}"#,
        ),
        Refusal::SessionInvalid { why } if *why == LEGACY_SESSION_INVALID => (
            -31010,
            "session_invalid",
            404,
            &[],
            Invalid,
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-31010,"message":"Not Found: this session id (query parameter) was not issued to this grant by this gateway; open a new SSE stream","data":{"kind":"session_invalid","reason":"this session id (query parameter) was not issued to this grant by this gateway; open a new SSE stream"}}}"#,
        ),
        Refusal::SessionInvalid { why } => {
            assert_eq!(*why, SESSION_INVALID, "a reason without its row");
            (
                -31010,
                "session_invalid",
                404,
                &[],
                Invalid,
                r#"{"jsonrpc":"2.0","id":7,"error":{"code":-31010,"message":"Not Found: this Mcp-Session-Id was not issued to this grant by this gateway; start a new session","data":{"kind":"session_invalid","reason":"this Mcp-Session-Id was not issued to this grant by this gateway; start a new session"}}}"#,
            )
        }
        Refusal::NoGrant { .. } => (
            -31003,
            "no_grant",
            401,
            &[("www-authenticate", "Bearer")],
            NoGrant,
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-31003,"message":"Unauthorized: no token","data":{"kind":"no_grant","reason":"no token"}}}"#,
        ),
        Refusal::Denied { subject: Subject::ClientResponse, .. } => (
            -31001,
            "denied",
            403,
            &[],
            Denied,
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-31001,"message":"client response denied: r","data":{"kind":"denied","reason":"r","rule":"gateway.client_responses"}}}"#,
        ),
        Refusal::Denied { subject: Subject::Method(_), .. } => (
            -31001,
            "denied",
            200,
            &[],
            Denied,
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-31001,"message":"method resources/read denied: r","data":{"kind":"denied","reason":"r","rule":"gateway.methods.resources/read"}}}"#,
        ),
        Refusal::MethodNotFound { version: Version::V2026_07_28, .. } => (
            -32601,
            "method_not_found",
            404,
            &[],
            Denied,
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"Method not found: method ping does not exist in MCP 2026-07-28","data":{"kind":"method_not_found","reason":"method ping does not exist in MCP 2026-07-28","rule":"protocol_version"}}}"#,
        ),
        Refusal::MethodNotFound { .. } => (
            -32601,
            "method_not_found",
            200,
            &[],
            Denied,
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32601,"message":"Method not found: method x/y is not an MCP method this gateway knows","data":{"kind":"method_not_found","reason":"method x/y is not an MCP method this gateway knows","rule":"unknown_method"}}}"#,
        ),
        Refusal::Denied { rule, .. } if rule == "hide" => (
            -31001,
            "denied",
            200,
            &[],
            Denied,
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-31001,"message":"tool 'h' denied: tool is hidden by policy","data":{"kind":"denied","tool":"h","reason":"tool is hidden by policy","rule":"hide"}}}"#,
        ),
        Refusal::Denied { .. } => (
            -31001,
            "denied",
            200,
            &[],
            Denied,
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-31001,"message":"tool 'x' denied: no \"x\"","data":{"kind":"denied","tool":"x","reason":"no \"x\"","rule":"tools.x"}}}"#,
        ),
        Refusal::NoPolicy { .. } => (
            -31001,
            "no_policy",
            200,
            &[],
            Denied,
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-31001,"message":"tool 'x' denied: no policy is attached to this caller (no attach rule of the policy set matches it)","data":{"kind":"no_policy","tool":"x","reason":"no policy is attached to this caller (no attach rule of the policy set matches it)"}}}"#,
        ),
        Refusal::Contained { .. } => (
            -31001,
            "contained",
            200,
            &[],
            Denied,
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-31001,"message":"tool 'x' denied: incident 42","data":{"kind":"contained","tool":"x","reason":"incident 42"}}}"#,
        ),
        Refusal::RateLimited { subject: Subject::Call, .. } => (
            -31002,
            "rate_limited",
            200,
            RETRY_1,
            RateLimited,
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-31002,"message":"the call rate limited: limit exec (10 per minute) reached; retry in 1 s","data":{"kind":"rate_limited","reason":"limit exec (10 per minute) reached","rule":"tools.x.limits[0]","retry_after_seconds":1,"counter":"exec"}}}"#,
        ),
        Refusal::RateLimited { .. } => (
            -31002,
            "rate_limited",
            200,
            &[("retry-after", "42")],
            RateLimited,
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-31002,"message":"tool 'x' rate limited: limit exec (10 per minute) reached; retry in 42 s","data":{"kind":"rate_limited","tool":"x","reason":"limit exec (10 per minute) reached","rule":"tools.x.limits[0]","retry_after_seconds":42,"counter":"exec"}}}"#,
        ),
        Refusal::LimiterUnavailable { fault: LimiterFault::Service(_), .. } => (
            -31004,
            "limiter_unavailable",
            200,
            RETRY_1,
            LimiterUnavailable,
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-31004,"message":"the call refused: gRPC status 14","data":{"kind":"limiter_unavailable","reason":"gRPC status 14","retry_after_seconds":1}}}"#,
        ),
        Refusal::LimiterUnavailable { .. } => (
            -31004,
            "limiter_unavailable",
            200,
            RETRY_1,
            LimiterUnavailable,
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-31004,"message":"tool 'x' refused: rate limiter contention: retries exhausted","data":{"kind":"limiter_unavailable","tool":"x","reason":"rate limiter contention: retries exhausted","retry_after_seconds":1}}}"#,
        ),
        Refusal::BatchRefused => (
            -31005,
            "batch_refused",
            200,
            &[],
            Invalid,
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-31005,"message":"Batch refused: another message in the batch was refused","data":{"kind":"batch_refused","reason":"another message in the batch was refused"}}}"#,
        ),
        Refusal::BadUpstreamResponse { .. } => (
            -31006,
            "bad_upstream_response",
            502,
            &[],
            Invalid,
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-31006,"message":"Bad gateway: not JSON","data":{"kind":"bad_upstream_response","reason":"not JSON"}}}"#,
        ),
        Refusal::ResultRefused { .. } => (
            -31012,
            "result_refused",
            200,
            &[],
            Denied,
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-31012,"message":"tool 'read_file' result refused: a private key","data":{"kind":"result_refused","tool":"read_file","reason":"a private key","rule":"tools.read_file.result.deny_if[0]"}}}"#,
        ),
        Refusal::PinMismatch { .. } => (
            -31013,
            "pin_mismatch",
            200,
            &[],
            Denied,
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-31013,"message":"tool 'list_vms' refused: the tool's definition changed since it was pinned (tools.NAME.pin)","data":{"kind":"pin_mismatch","tool":"list_vms","reason":"the tool's definition changed since it was pinned (tools.NAME.pin)"}}}"#,
        ),
        Refusal::FlowDenied { .. } => (
            -31014,
            "flow_denied",
            200,
            &[("retry-after", "600")],
            Denied,
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-31014,"message":"tool 'http_post' denied by flow 'no-egress': no egress after secrets; retry in 600 s","data":{"kind":"flow_denied","tool":"http_post","reason":"no egress after secrets","rule":"flows[0]","retry_after_seconds":600,"flow":"no-egress","mark":"secret"}}}"#,
        ),
        Refusal::ApprovalRequired { link: None, .. } => (
            -31007,
            "approval_required",
            200,
            &[],
            ApprovalRequired,
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-31007,"message":"tool 'x' requires approval: alone","data":{"kind":"approval_required","tool":"x","reason":"alone"}}}"#,
        ),
        Refusal::ApprovalRequired { .. } => (
            -31007,
            "approval_required",
            200,
            &[],
            ApprovalRequired,
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-31007,"message":"tool 'x' requires approval: ask an approver to approve it at http://a/apr_1, then retry the identical call","data":{"kind":"approval_required","tool":"x","reason":"costs money","expires_in_seconds":300,"approval_id":"apr_1","approval_url":"http://a/apr_1"}}}"#,
        ),
        Refusal::UrlElicitationRequired { .. } => (
            -32042,
            "approval_required",
            200,
            &[],
            ApprovalRequired,
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32042,"message":"tool 'x' requires approval: open http://a/apr_1 to approve it","data":{"kind":"approval_required","tool":"x","reason":"costs \"money\"","elicitations":[{"mode":"url","url":"http://a/apr_1","elicitationId":"apr_1","message":"costs \"money\""}]}}}"#,
        ),
        Refusal::ApprovalDenied { note, .. } if note.is_empty() => (
            -31008,
            "approval_denied",
            200,
            &[],
            ApprovalDenied,
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-31008,"message":"tool 'x' was denied by an approver: denied by an approver","data":{"kind":"approval_denied","tool":"x","reason":"denied by an approver","approval_id":"apr_1","approver":"ann","note":""}}}"#,
        ),
        Refusal::ApprovalDenied { .. } => (
            -31008,
            "approval_denied",
            200,
            &[],
            ApprovalDenied,
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-31008,"message":"tool 'x' was denied by an approver: no","data":{"kind":"approval_denied","tool":"x","reason":"no","approval_id":"apr_1","approver":"ann","note":"no"}}}"#,
        ),
        Refusal::ApprovalUnavailable { .. } => (
            -31009,
            "approval_unavailable",
            200,
            RETRY_1,
            ApprovalUnavailable,
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-31009,"message":"tool 'x' refused: approval could not be checked: timeout","data":{"kind":"approval_unavailable","tool":"x","reason":"timeout","retry_after_seconds":1}}}"#,
        ),
        Refusal::ApprovalStateInvalid { .. } => (
            -31011,
            "approval_state_invalid",
            400,
            &[],
            Invalid,
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-31011,"message":"Invalid params: params.requestState has expired; call the tool again without it","data":{"kind":"approval_state_invalid","tool":"x","reason":"params.requestState has expired; call the tool again without it"}}}"#,
        ),
        Refusal::Unavailable { reason } if *reason == POLICY_NOT_LOADED => (
            -32600,
            "unavailable",
            503,
            &[],
            Invalid,
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32600,"message":"policy not loaded","data":{"kind":"unavailable","reason":"policy not loaded"}}}"#,
        ),
        Refusal::Unavailable { reason } if *reason == BODY_UNREADABLE => (
            -32600,
            "unavailable",
            503,
            &[],
            Invalid,
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32600,"message":"the request body could not be read","data":{"kind":"unavailable","reason":"the request body could not be read"}}}"#,
        ),
        Refusal::Unavailable { reason } if *reason == HEADERS_UNREADABLE => (
            -32600,
            "unavailable",
            503,
            &[],
            Invalid,
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32600,"message":"the request headers could not be read","data":{"kind":"unavailable","reason":"the request headers could not be read"}}}"#,
        ),
        Refusal::Unavailable { reason } if *reason == LAST_EVENT_ID_NOT_REWRITTEN => (
            -32600,
            "unavailable",
            503,
            &[],
            Invalid,
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32600,"message":"the Last-Event-ID header could not be rewritten","data":{"kind":"unavailable","reason":"the Last-Event-ID header could not be rewritten"}}}"#,
        ),
        Refusal::Unavailable { reason } if *reason == PATH_NOT_REWRITTEN => (
            -32600,
            "unavailable",
            503,
            &[],
            Invalid,
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32600,"message":"the request path could not be rewritten","data":{"kind":"unavailable","reason":"the request path could not be rewritten"}}}"#,
        ),
        Refusal::Unavailable { reason } if *reason == BODY_UNWRITABLE => (
            -32600,
            "unavailable",
            503,
            &[],
            Invalid,
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32600,"message":"the request body could not be rewritten","data":{"kind":"unavailable","reason":"the request body could not be rewritten"}}}"#,
        ),
        Refusal::Unavailable { reason } => {
            assert_eq!(*reason, SESSION_ID_NOT_REWRITTEN, "a reason without its row");
            (
                -32600,
                "unavailable",
                503,
                &[],
                Invalid,
                r#"{"jsonrpc":"2.0","id":7,"error":{"code":-32600,"message":"the Mcp-Session-Id header could not be rewritten","data":{"kind":"unavailable","reason":"the Mcp-Session-Id header could not be rewritten"}}}"#,
            )
        }
    };
    Row { code, kind, status, headers, decision, json }
}

#[test]
fn every_refusal_has_its_exact_code_kind_status_headers_and_json() {
    let id: Id = Id::of(&mcp_policy_core::wire::json::parse(b"7").unwrap());
    for r in samples() {
        let want = row(&r);
        assert_eq!(r.code(), want.code, "{r:?}");
        assert_eq!(r.kind(), want.kind, "{r:?}");
        assert_eq!(r.status(), want.status, "{r:?}");
        let owned = r.headers();
        let headers: Vec<(&str, &str)> = owned.iter().map(|(k, v)| (*k, v.as_str())).collect();
        assert_eq!(headers, want.headers, "{r:?}");
        assert_eq!(r.decision_kind(), want.decision, "{r:?}");
        assert_eq!(r.to_json(&id), want.json, "{r:?}");
        let reply = r.reply(&id);
        assert_eq!((reply.status, reply.body.as_str()), (want.status, want.json), "{r:?}");
        // The code and kind in the body are the ones the accessors give; the body is JSON.
        let v: serde_json::Value = serde_json::from_str(&reply.body).unwrap();
        assert_eq!(v["error"]["code"], want.code);
        assert_eq!(v["error"]["data"]["kind"], want.kind);
        assert_eq!(v["error"]["data"]["reason"], r.reason().as_ref());
        assert_eq!(v["error"]["data"]["tool"].as_str(), r.tool());
        assert_eq!(v["error"]["data"]["rule"].as_str(), r.rule());
    }
}

#[test]
fn every_variant_has_a_sample() {
    let seen: HashSet<_> = samples().iter().map(discriminant).collect();
    assert_eq!(seen.len(), VARIANTS, "add a sample of the new variant to samples() and raise VARIANTS");
    let kinds: HashSet<_> = samples().iter().map(Refusal::kind).collect();
    // One variant per data.kind, except that approval_required has two renderings: −31007 for every
    // client, −32042 for a 2025-11-25 client that declared URL elicitation (the spec's own error).
    assert_eq!(kinds.len(), VARIANTS - 1, "one variant per data.kind");
}

#[test]
fn only_a_denial_by_hide_is_hidden() {
    let hidden: Vec<bool> = samples().iter().map(Refusal::is_hidden).collect();
    assert_eq!(hidden.iter().filter(|h| **h).count(), 1);
    assert!(Refusal::Denied { subject: Subject::Tool("h".into()), rule: "hide".into(), reason: "r".into() }.is_hidden());
}
