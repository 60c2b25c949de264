//! What a refusal is about ([`Subject`]), why a call could not be counted ([`LimiterFault`]), and
//! the fixed `data.reason` texts the refusals share.

use std::fmt;

use crate::limits::Unavailable;

/// What a policy refusal is about, as its message names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    /// `tool 'NAME'`; also `data.tool`.
    Tool(String),
    /// `method NAME`: any other request method.
    Method(String),
    /// `the call`: a request the rate limit service refused without a tool to name.
    Call,
    /// `client response`: a JSON-RPC response sent by the client (`gateway.client_responses`).
    ClientResponse,
}

impl Subject {
    /// The subject of a call to `tool`, or of any call when there is none.
    pub fn of(tool: Option<&str>) -> Self {
        tool.map_or(Subject::Call, |t| Subject::Tool(t.to_owned()))
    }

    pub(super) fn tool(&self) -> Option<&str> {
        match self {
            Subject::Tool(t) => Some(t),
            _ => None,
        }
    }
}

impl fmt::Display for Subject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Subject::Tool(t) => write!(f, "tool '{t}'"),
            Subject::Method(m) => write!(f, "method {m}"),
            Subject::Call => f.write_str("the call"),
            Subject::ClientResponse => f.write_str("client response"),
        }
    }
}

/// Why a call could not be counted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LimiterFault {
    /// The local limiter over shared data.
    Local(Unavailable),
    /// The rate limit service (`gateway.rate_limit_service`): unreachable, late or unreadable.
    Service(String),
}

/// `data.reason` of `session_invalid` for an `Mcp-Session-Id`.
pub const SESSION_INVALID: &str =
    "this Mcp-Session-Id was not issued to this grant by this gateway; start a new session";
/// `data.reason` of `session_invalid` for a `Last-Event-ID`.
pub const EVENT_ID_INVALID: &str =
    "this Last-Event-ID was not issued to this grant on this Mcp-Session-Id by this gateway; reconnect without it";
/// `data.reason` of `session_invalid` for the HTTP+SSE session in the query (`session_id`, `sessionId`, `sessionid`).
pub const LEGACY_SESSION_INVALID: &str =
    "this session id (query parameter) was not issued to this grant by this gateway; open a new SSE stream";
/// `data.reason` of `no_policy`.
pub const NO_POLICY: &str = "no policy is attached to this caller (no attach rule of the policy set matches it)";
pub(super) const PIN_MISMATCH: &str = "the tool's definition changed since it was pinned (tools.NAME.pin)";
pub(super) const BATCH_REFUSED: &str = "another message in the batch was refused";
pub(super) const METHOD_NOT_ALLOWED: &str = "MCP Streamable HTTP uses POST, GET and DELETE only";
/// `data.reason` of [`Refusal::Unavailable`] when the plugin has no policy.
pub const POLICY_NOT_LOADED: &str = "policy not loaded";
/// `data.reason` of [`Refusal::Unavailable`] when the host could not hand over the request body.
pub const BODY_UNREADABLE: &str = "the request body could not be read";
/// `data.reason` of [`Refusal::Unavailable`] when the host could not hand over the request headers.
pub const HEADERS_UNREADABLE: &str = "the request headers could not be read";
/// `data.reason` of [`Refusal::Unavailable`] when the host could not replace the client's
/// Mcp-Session-Id with the server's before forwarding.
pub const SESSION_ID_NOT_REWRITTEN: &str = "the Mcp-Session-Id header could not be rewritten";
/// `data.reason` of [`Refusal::Unavailable`] when the host could not replace the client's
/// Last-Event-ID with the server's event id before forwarding.
pub const LAST_EVENT_ID_NOT_REWRITTEN: &str = "the Last-Event-ID header could not be rewritten";
/// `data.reason` of [`Refusal::Unavailable`] when the host could not replace the session id in the
/// request's query with the server's before forwarding.
pub const PATH_NOT_REWRITTEN: &str = "the request path could not be rewritten";
/// `data.reason` of [`Refusal::Unavailable`] when the host could not set a rewritten request body.
pub const BODY_UNWRITABLE: &str = "the request body could not be rewritten";
