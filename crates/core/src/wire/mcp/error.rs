//! The protocol errors the filter answers itself, before any policy.

use super::Id;
use crate::wire::json::ParseError;

/// The protocol error kinds of JSON-RPC 2.0 §5.1 that the filter answers itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProtocolErrorKind {
    /// -32700: not one strict JSON text.
    Parse,
    /// -32600: JSON, but not a valid JSON-RPC 2.0 message.
    InvalidRequest,
    /// -32602: a `tools/call` whose params are malformed.
    InvalidParams,
}

/// Why a message was refused before policy: the kind, the id to echo, and a detail that never
/// quotes the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtocolError {
    pub kind: ProtocolErrorKind,
    pub id: Id,
    pub detail: String,
}

impl ProtocolError {
    pub(super) fn invalid(detail: impl Into<String>) -> Self {
        ProtocolError { kind: ProtocolErrorKind::InvalidRequest, id: Id::null(), detail: detail.into() }
    }
}

impl From<ParseError> for ProtocolError {
    fn from(e: ParseError) -> Self {
        ProtocolError { kind: ProtocolErrorKind::Parse, id: Id::null(), detail: e.to_string() }
    }
}
