//! The message model: what a body holds, as far as decisions care.

use super::params::read_arguments;
use super::{McpMethod, ProtocolError};
use crate::wire::json::{self, Json, Parser};
use crate::wire::protocol::{Listen, MetaVersion};

/// A JSON-RPC id: a string, an integer or null (JSON-RPC 2.0 §4; MCP forbids null for requests, but
/// we only need to echo it). `raw` is the exact source text, echoed byte for byte in error replies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Id {
    pub(super) raw: Box<str>,
}

impl Id {
    /// The id `null`, used when a message's id is missing or could not be read.
    pub fn null() -> Self {
        Id { raw: "null".into() }
    }

    /// The id of a parsed value (for ids read back from a response).
    pub fn of(v: &Json) -> Self {
        let mut raw = String::new();
        json::write(&mut raw, v);
        Id { raw: raw.into() }
    }

    /// The id's JSON text, exactly as the client sent it.
    pub fn raw(&self) -> &str {
        &self.raw
    }
}

/// A validated `tools/call` (MCP `server/tools`): the tool name after JSON unescaping, and the
/// arguments object if one was sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    pub name: String,
    pub arguments: Option<Arguments>,
    /// `params.inputResponses` / `params.requestState` of a 2026-07-28 continuation leg.
    pub leg: crate::wire::leg::Leg,
}

/// `params.arguments`, already checked strictly but kept as its source text: most calls are
/// decided by name, so the value is only built ([`Arguments::value`]) for tools with conditions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arguments {
    pub(super) raw: Box<str>,
    pub(super) keys: Vec<String>,
}

impl Arguments {
    /// Arguments from the JSON text of an object (for tests and tools); errors if it is not one.
    pub fn from_json_text(text: &str) -> Result<Self, ProtocolError> {
        let mut p = Parser::new(text.as_bytes())?;
        let args = read_arguments(&mut p)?;
        p.finish()?;
        if p.folded_clashes() > 0 {
            return Err(ProtocolError::invalid("two argument names are equal after case folding"));
        }
        args.ok_or_else(|| ProtocolError::invalid("arguments must be an object"))
    }

    /// The arguments' JSON text as sent (strictly checked: one value, no duplicate keys).
    pub fn raw(&self) -> &str {
        &self.raw
    }

    /// The top-level argument names, in order (for the audit log; never the values).
    pub fn keys(&self) -> &[String] {
        &self.keys
    }

    /// The top-level argument names, moved out (`keys()` is empty afterwards): the decision record
    /// takes them without copying.
    pub fn take_keys(&mut self) -> Vec<String> {
        std::mem::take(&mut self.keys)
    }

    /// The arguments as a value (numbers keep their exact text). `None` only if the text that was
    /// read strictly does not parse again, which [`json::parse_again`] rules out; a caller that
    /// judges the value refuses then rather than read no arguments.
    pub fn value(&self) -> Option<Json> {
        json::parse_again(self.raw.as_bytes()).ok()
    }
}

/// What a request asks for, as far as policy is concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    /// `tools/call`, judged by tool name.
    Tool(ToolCall),
    /// Any other request method; `target` is its `Mcp-Name` counterpart (prompt name, resource uri);
    /// `listen`, for `subscriptions/listen` only, what its `params.notifications` asks for.
    Method { method: McpMethod, target: Option<String>, listen: Option<Listen> },
}

/// One JSON-RPC message from the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message {
    /// A request: has an id and expects a response. `meta_version`: its
    /// `params._meta["io.modelcontextprotocol/protocolVersion"]` (MCP 2026-07-28).
    Request { id: Id, call: Call, meta_version: MetaVersion },
    /// A notification (`notifications/…`, no id).
    Notification { method: McpMethod },
    /// A response to a server-to-client request (sampling, elicitation, roots).
    Response { id: Id },
}

impl Message {
    /// The id of this message if it is a `tools/list` request (its response is filtered).
    pub fn tools_list_id(&self) -> Option<Id> {
        match self {
            Message::Request { id, call: Call::Method { method: McpMethod::ToolsList, .. }, .. } => Some(id.clone()),
            _ => None,
        }
    }

    /// The id to echo in an error reply for this message (`null` for notifications).
    pub fn id(&self) -> Id {
        match self {
            Message::Request { id, .. } | Message::Response { id } => id.clone(),
            Message::Notification { .. } => Id::null(),
        }
    }
}

/// A POST body: one message, or a batch whose elements were each read on their own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    Single(Message),
    /// Elements in order; an invalid element does not hide the others.
    Batch(Vec<Result<Message, ProtocolError>>),
}
