//! Which MCP protocol version a POST is read by, and what that version forbids (`crate::wire::protocol`).
//!
//! Refusals here are protocol errors (decision `invalid`, always enforced, also in dry-run), except
//! a method that does not exist in the request's version (rule `protocol_version`), or a request
//! method MCP does not define (rule `unknown_method`): a policy denial that `gateway.methods` can
//! lift by name, answered as the version's specification answers a method a server does not
//! implement (−32601 Method not found; HTTP 404 in 2026-07-28, 200 before).

use super::{refuse, HeaderValue, Outcome, RequestHead};
use crate::outcome::refusal::Refusal;
use crate::policy::Policy;
use crate::wire::mcp::{Call, Id, McpMethod, Message};
use crate::wire::protocol::{self, MetaVersion, Version, VersionError};

fn header_str(h: &HeaderValue) -> Option<Result<&str, ()>> {
    match h {
        HeaderValue::Absent => None,
        HeaderValue::One(v) => Some(std::str::from_utf8(v).map_err(|_| ())),
        HeaderValue::Many => Some(Err(())),
    }
}

fn refused(refusal: Refusal, id: &Id) -> Box<Outcome> {
    Box::new(refuse(refusal, id))
}

/// The refusal of a version that cannot be used (HTTP 400 in every case).
fn version_refusal(policy: &Policy, e: VersionError) -> Refusal {
    match e {
        VersionError::Mismatch(why) => Refusal::HeaderMismatch { why },
        VersionError::MissingMeta => Refusal::InvalidParams {
            detail: "an MCP 2026-07-28 request needs params._meta[\"io.modelcontextprotocol/protocolVersion\"]".into(),
        },
        VersionError::Unsupported(requested) => {
            let why = if requested.is_empty() {
                "a request without MCP-Protocol-Version is read as 2025-03-26, which gateway.protocol_versions does not accept".to_owned()
            } else {
                "protocol version is not accepted by this gateway (gateway.protocol_versions)".to_owned()
            };
            Refusal::UnsupportedProtocolVersion { why, requested, supported: policy.gateway.protocol_versions }
        }
    }
}

/// The version of one message, after the checks its version asks for: a known, accepted version;
/// no `Mcp-Session-Id` and no client responses in 2026-07-28; the method exists in the version.
/// Else its refusal: a single message's, and each element's of a batch.
pub(super) fn of_message(policy: &Policy, head: &RequestHead, msg: &Message) -> Result<Version, Box<Refusal>> {
    let (meta, is_request) = match msg {
        Message::Request { meta_version, .. } => (meta_version.clone(), true),
        _ => (MetaVersion::Absent, false),
    };
    let is_initialize =
        matches!(msg, Message::Request { call: Call::Method { method: McpMethod::Initialize, .. }, .. });
    let version = protocol::detect(
        header_str(&head.protocol_version),
        &meta,
        is_request,
        policy.gateway.protocol_versions,
        is_initialize,
    )
    .map_err(|e| Box::new(version_refusal(policy, e)))?;
    let rules = version.rules();
    let forbidden = |why: &str| Box::new(Refusal::InvalidRequest { detail: why.to_owned() });
    if !rules.sessions && head.session_id != HeaderValue::Absent {
        return Err(forbidden("MCP 2026-07-28 has no sessions: Mcp-Session-Id must not be sent"));
    }
    let name = match msg {
        Message::Response { .. } if !rules.client_responses => {
            return Err(forbidden("MCP 2026-07-28 has no client responses on POST"));
        }
        Message::Response { .. } => return Ok(version),
        Message::Request { call: Call::Tool(_), .. } => "tools/call",
        Message::Request { call: Call::Method { method, .. }, .. } => method.name(),
        Message::Notification { method } => method.name(),
    };
    let not_found = if protocol::row_of(name).is_some() {
        // Defined by another version: lifted only by an explicit allow.
        (protocol::method(version, name).is_none() && !policy.allows_method_by_name(name))
            .then(|| ("protocol_version", format!("method {name} does not exist in MCP {}", version.as_str())))
    } else {
        // Defined by no version: any `gateway.methods` entry decides it (policy::judge).
        (is_request && !policy.names_method(name))
            .then(|| ("unknown_method", format!("method {name} is not an MCP method this gateway knows")))
    };
    match not_found {
        Some((rule, reason)) => Err(Box::new(Refusal::MethodNotFound { rule, reason, version })),
        None => Ok(version),
    }
}

/// A batch: read by the header's version (or the assumed one), which must allow batches.
pub(super) fn of_batch(policy: &Policy, head: &RequestHead) -> Result<Version, Box<Outcome>> {
    let id = Id::null();
    let version = protocol::detect(
        header_str(&head.protocol_version),
        &MetaVersion::Absent,
        false,
        policy.gateway.protocol_versions,
        false,
    )
    .map_err(|e| refused(version_refusal(policy, e), &id))?;
    if !version.rules().batches {
        let why = format!("JSON-RPC batches are not part of MCP {} (removed in 2025-06-18)", version.as_str());
        return Err(refused(Refusal::InvalidRequest { detail: why }, &id));
    }
    Ok(version)
}

/// A GET or DELETE: a `MCP-Protocol-Version` header, if sent, must name an accepted version.
pub(super) fn of_stream(policy: &Policy, head: &RequestHead) -> Result<(), Box<Outcome>> {
    let header = header_str(&head.protocol_version);
    protocol::detect(header, &MetaVersion::Absent, false, policy.gateway.protocol_versions, true)
        .map(|_| ())
        .map_err(|e| refused(version_refusal(policy, e), &Id::null()))
}
