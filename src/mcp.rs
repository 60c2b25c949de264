//! The JSON-RPC 2.0 / MCP message model, read from one strict parse of the request body.
//!
//! Sources: JSON-RPC 2.0 specification §4–§6; MCP specification 2025-03-26 "Base Protocol" (batches)
//! and "Transports / Streamable HTTP" (one message or one batch per POST); MCP 2025-06-18
//! `server/tools` (`tools/call` params `{name, arguments}`).

use crate::json::{self, Json, ParseError, Parser};
use crate::protocol::{MetaVersion, META_VERSION_KEY};

/// A JSON-RPC id: a string, an integer or null (JSON-RPC 2.0 §4; MCP forbids null for requests, but
/// we only need to echo it). `raw` is the exact source text, echoed byte for byte in error replies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Id {
    raw: Box<str>,
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

/// The MCP methods a client may send, by name. Unknown names are kept as [`McpMethod::Other`] so
/// that the policy can deny them by default; notifications are any `notifications/…` name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum McpMethod {
    Initialize,
    Ping,
    /// `server/discover` (2026-07-28): the stateless replacement of `initialize`.
    ServerDiscover,
    /// `subscriptions/listen` (2026-07-28): opens a notification stream.
    SubscriptionsListen,
    ToolsList,
    ToolsCall,
    ResourcesList,
    ResourcesTemplatesList,
    ResourcesRead,
    ResourcesSubscribe,
    ResourcesUnsubscribe,
    PromptsList,
    PromptsGet,
    CompletionComplete,
    LoggingSetLevel,
    TasksGet,
    TasksList,
    TasksResult,
    TasksCancel,
    /// `notifications/…`, e.g. `notifications/initialized`, `notifications/cancelled`.
    Notification(String),
    /// A name MCP does not define.
    Other(String),
}

impl McpMethod {
    /// Classify a method name (case-sensitive, as MCP method names are).
    pub fn from_name(name: &str) -> Self {
        match name {
            "initialize" => McpMethod::Initialize,
            "ping" => McpMethod::Ping,
            "server/discover" => McpMethod::ServerDiscover,
            "subscriptions/listen" => McpMethod::SubscriptionsListen,
            "tools/list" => McpMethod::ToolsList,
            "tools/call" => McpMethod::ToolsCall,
            "resources/list" => McpMethod::ResourcesList,
            "resources/templates/list" => McpMethod::ResourcesTemplatesList,
            "resources/read" => McpMethod::ResourcesRead,
            "resources/subscribe" => McpMethod::ResourcesSubscribe,
            "resources/unsubscribe" => McpMethod::ResourcesUnsubscribe,
            "prompts/list" => McpMethod::PromptsList,
            "prompts/get" => McpMethod::PromptsGet,
            "completion/complete" => McpMethod::CompletionComplete,
            "logging/setLevel" => McpMethod::LoggingSetLevel,
            "tasks/get" => McpMethod::TasksGet,
            "tasks/list" => McpMethod::TasksList,
            "tasks/result" => McpMethod::TasksResult,
            "tasks/cancel" => McpMethod::TasksCancel,
            n if n.starts_with("notifications/") => McpMethod::Notification(n.to_owned()),
            n => McpMethod::Other(n.to_owned()),
        }
    }

    /// The method's wire name.
    pub fn name(&self) -> &str {
        match self {
            McpMethod::Initialize => "initialize",
            McpMethod::Ping => "ping",
            McpMethod::ServerDiscover => "server/discover",
            McpMethod::SubscriptionsListen => "subscriptions/listen",
            McpMethod::ToolsList => "tools/list",
            McpMethod::ToolsCall => "tools/call",
            McpMethod::ResourcesList => "resources/list",
            McpMethod::ResourcesTemplatesList => "resources/templates/list",
            McpMethod::ResourcesRead => "resources/read",
            McpMethod::ResourcesSubscribe => "resources/subscribe",
            McpMethod::ResourcesUnsubscribe => "resources/unsubscribe",
            McpMethod::PromptsList => "prompts/list",
            McpMethod::PromptsGet => "prompts/get",
            McpMethod::CompletionComplete => "completion/complete",
            McpMethod::LoggingSetLevel => "logging/setLevel",
            McpMethod::TasksGet => "tasks/get",
            McpMethod::TasksList => "tasks/list",
            McpMethod::TasksResult => "tasks/result",
            McpMethod::TasksCancel => "tasks/cancel",
            McpMethod::Notification(n) | McpMethod::Other(n) => n,
        }
    }
}

/// A validated `tools/call` (MCP `server/tools`): the tool name after JSON unescaping, and the
/// arguments object if one was sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolCall {
    pub name: String,
    pub arguments: Option<Arguments>,
    /// `params.inputResponses` / `params.requestState` of a 2026-07-28 continuation leg.
    pub leg: crate::leg::Leg,
}

/// `params.arguments`, already checked strictly but kept as its source text: most calls are
/// decided by name, so the value is only built ([`Arguments::value`]) for tools with conditions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arguments {
    raw: Box<str>,
    keys: Vec<String>,
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

    /// The arguments as a value (numbers keep their exact text).
    pub fn value(&self) -> Option<Json> {
        json::parse(self.raw.as_bytes()).ok()
    }
}

/// What a request asks for, as far as policy is concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    /// `tools/call`, judged by tool name.
    Tool(ToolCall),
    /// Any other request method; `target` is its `Mcp-Name` counterpart (prompt name, resource uri).
    Method { method: McpMethod, target: Option<String> },
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
    /// The id to echo in an error reply for this message (`null` for notifications).
    pub fn id(&self) -> Id {
        match self {
            Message::Request { id, .. } | Message::Response { id } => id.clone(),
            Message::Notification { .. } => Id::null(),
        }
    }
}

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
    fn invalid(detail: impl Into<String>) -> Self {
        ProtocolError { kind: ProtocolErrorKind::InvalidRequest, id: Id::null(), detail: detail.into() }
    }
}

impl From<ParseError> for ProtocolError {
    fn from(e: ParseError) -> Self {
        ProtocolError { kind: ProtocolErrorKind::Parse, id: Id::null(), detail: e.to_string() }
    }
}

/// A POST body: one message, or a batch whose elements were each read on their own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Body {
    Single(Message),
    /// Elements in order; an invalid element does not hide the others.
    Batch(Vec<Result<Message, ProtocolError>>),
}

/// Read a POST body (MCP Streamable HTTP: "the body MUST be a single JSON-RPC request, notification,
/// or response, or an array batching one or more"). The whole body is parsed strictly once.
///
/// Errors: `Parse` (−32700) if the body is not one strict JSON text, including a malformed batch
/// element; `InvalidRequest` (−32600) for a non-object, non-array top level or an empty batch; for a
/// single message, its own `InvalidRequest` or `InvalidParams`. Batch elements keep their own errors.
pub fn read_body(bytes: &[u8]) -> Result<Body, ProtocolError> {
    let mut p = Parser::new(bytes)?;
    match p.peek_non_ws() {
        Some(b'[') => {
            let mut items = Vec::new();
            p.array_with(|p| {
                items.push(read_element(p)?);
                Ok(())
            })?;
            p.finish()?;
            if items.is_empty() {
                return Err(ProtocolError::invalid("empty batch"));
            }
            Ok(Body::Batch(items))
        }
        Some(b'{') => {
            let parts = read_parts(&mut p)?;
            p.finish()?;
            let clash = p.folded_clashes() > 0;
            message_from_parts(&p, parts, clash).map(Body::Single)
        }
        _ => {
            // Valid JSON (or not) that is neither an object nor an array.
            p.skip_value()?;
            p.finish()?;
            Err(ProtocolError::invalid("a JSON-RPC message must be an object"))
        }
    }
}

/// One batch element: parse errors abort the whole body (the JSON text is broken); message errors
/// are kept per element.
fn read_element(p: &mut Parser<'_>) -> Result<Result<Message, ProtocolError>, ParseError> {
    if p.peek_non_ws() == Some(b'{') {
        let before = p.folded_clashes();
        let parts = read_parts(p)?;
        let clash = p.folded_clashes() > before;
        Ok(message_from_parts(p, parts, clash))
    } else {
        p.skip_value()?;
        Ok(Err(ProtocolError::invalid("a batch element must be an object")))
    }
}

/// The shape of `params`, as JSON-RPC 2.0 §4.2 cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Absent,
    Object,
    Array,
    Other,
}

/// What a decision reads from `params`; everything else in it is only checked, never built.
struct Params {
    shape: Shape,
    /// A member whose name folds to one of [`PARAMS_MEMBERS`] without being it.
    near_miss: Option<&'static str>,
    name: Option<Json>,
    uri: Option<Json>,
    /// `Some(None)`: present but not an object.
    arguments: Option<Option<Arguments>>,
    meta_version: MetaVersion,
    input_responses: crate::leg::Member<Box<str>>,
    request_state: crate::leg::Member<String>,
}

impl Params {
    /// `params` of the given shape with nothing read from it yet.
    fn empty(shape: Shape) -> Self {
        Params {
            shape,
            near_miss: None,
            name: None,
            uri: None,
            arguments: None,
            meta_version: MetaVersion::Absent,
            input_responses: Default::default(),
            request_state: Default::default(),
        }
    }
}

/// The members of one message that decisions read, each strictly parsed once.
struct Parts {
    jsonrpc: Option<Json>,
    id: Option<(Json, std::ops::Range<usize>)>,
    method: Option<Json>,
    params: Params,
    has_result_or_error: bool,
    /// A member whose name folds to one of [`ENVELOPE_MEMBERS`] without being it.
    near_miss: Option<&'static str>,
}

/// The JSON-RPC 2.0 message members (§4, §5).
const ENVELOPE_MEMBERS: [&str; 6] = ["jsonrpc", "id", "method", "params", "result", "error"];
/// The `params` members MCP requests carry that servers act on (`server/tools`, `server/resources`,
/// `server/prompts`, pagination, `_meta`).
const PARAMS_MEMBERS: [&str; 7] = ["name", "arguments", "uri", "cursor", "_meta", "inputResponses", "requestState"];

fn read_parts(p: &mut Parser<'_>) -> Result<Parts, ParseError> {
    let mut parts = Parts {
        jsonrpc: None,
        id: None,
        method: None,
        params: Params::empty(Shape::Absent),
        has_result_or_error: false,
        near_miss: None,
    };
    p.object_with(|p, key| {
        match key.as_ref() {
            "jsonrpc" => parts.jsonrpc = Some(p.value()?),
            "id" => {
                let start = p.offset();
                let v = p.value()?;
                parts.id = Some((v, start..p.offset()));
            }
            "method" => parts.method = Some(p.value()?),
            "params" => parts.params = read_params(p)?,
            "result" | "error" => {
                parts.has_result_or_error = true;
                p.skip_value()?;
            }
            // Other members are ignored by JSON-RPC servers; they are still checked strictly. A name
            // that a case-insensitive decoder (Go's encoding/json) reads as a member is refused.
            other => {
                if parts.near_miss.is_none() {
                    parts.near_miss = crate::fold::near_miss(other, &ENVELOPE_MEMBERS);
                }
                p.skip_value()?
            }
        }
        Ok(())
    })?;
    Ok(parts)
}

fn read_params(p: &mut Parser<'_>) -> Result<Params, ParseError> {
    let mut params = Params::empty(Shape::Other);
    match p.peek_non_ws() {
        Some(b'{') => {
            params.shape = Shape::Object;
            p.object_with(|p, key| {
                match key.as_ref() {
                    "name" => params.name = Some(p.value()?),
                    "uri" => params.uri = Some(p.value()?),
                    "arguments" => params.arguments = Some(read_arguments(p)?),
                    "_meta" => params.meta_version = read_meta_version(p)?,
                    "inputResponses" => params.input_responses = crate::leg::read_input_responses(p)?,
                    "requestState" => params.request_state = crate::leg::read_request_state(p)?,
                    other => {
                        if params.near_miss.is_none() {
                            params.near_miss = crate::fold::near_miss(other, &PARAMS_MEMBERS);
                        }
                        p.skip_value()?
                    }
                }
                Ok(())
            })?;
        }
        Some(b'[') => {
            params.shape = Shape::Array;
            p.skip_value()?;
        }
        _ => p.skip_value()?,
    }
    Ok(params)
}

/// `_meta`: only its protocol version is read (MCP 2026-07-28 "per-request protocol fields").
fn read_meta_version(p: &mut Parser<'_>) -> Result<MetaVersion, ParseError> {
    if p.peek_non_ws() != Some(b'{') {
        p.skip_value()?;
        return Ok(MetaVersion::Invalid);
    }
    let mut version = MetaVersion::Absent;
    p.object_with(|p, key| {
        if key.as_ref() == META_VERSION_KEY {
            version = match p.value()? {
                Json::String(s) => MetaVersion::Str(s),
                _ => MetaVersion::Invalid,
            };
            Ok(())
        } else {
            p.skip_value()
        }
    })?;
    Ok(version)
}

/// `arguments`: an object is checked and kept as text with its keys; anything else is `None`.
fn read_arguments(p: &mut Parser<'_>) -> Result<Option<Arguments>, ParseError> {
    let start = p.offset();
    if p.peek_non_ws() != Some(b'{') {
        p.skip_value()?;
        return Ok(None);
    }
    let start = start.max(p.offset());
    let mut keys = Vec::new();
    p.object_with(|p, key| {
        keys.push(key.into_owned());
        p.skip_value()
    })?;
    Ok(Some(Arguments { raw: p.slice(start..p.offset()).into(), keys }))
}

/// Build one message from its parts. `clash`: an object in it holds two member names equal after
/// folding. Every −32600 and −32602 echoes the message's id when it has a valid one (JSON-RPC 2.0
/// §5: `null` only when the id cannot be determined).
fn message_from_parts(p: &Parser<'_>, parts: Parts, clash: bool) -> Result<Message, ProtocolError> {
    let Parts { jsonrpc, id, method, mut params, has_result_or_error, near_miss } = parts;
    // A valid id, or `Err(())` for one that is present but not a string, an integer or null.
    let id = match id {
        None => Ok(None),
        Some((Json::String(_) | Json::Null, range)) => Ok(Some(Id { raw: p.slice(range).into() })),
        Some((Json::Number(text), _)) if is_integer(&text) => Ok(Some(Id { raw: text })),
        Some(_) => Err(()),
    };
    // The id to echo: none when it is invalid, or when another member folds to "id".
    let echo = match (&id, near_miss) {
        (_, Some("id")) | (Err(()), _) => Id::null(),
        (Ok(id), _) => id.clone().unwrap_or_else(Id::null),
    };
    let invalid = |detail: &str| ProtocolError {
        kind: ProtocolErrorKind::InvalidRequest,
        id: echo.clone(),
        detail: detail.into(),
    };
    if let Some(member) = near_miss {
        return Err(invalid(&format!("a member name that folds to \"{member}\" without being it")));
    }
    if clash {
        return Err(invalid(
            "an object holds two member names that are equal after case folding or removing invisible characters",
        ));
    }
    if jsonrpc.as_ref().and_then(Json::as_str) != Some("2.0") {
        return Err(invalid("\"jsonrpc\" must be \"2.0\""));
    }
    let Ok(id) = id else { return Err(invalid("\"id\" must be a string, an integer or null")) };
    let method = match method {
        None => None,
        Some(Json::String(m)) => Some(McpMethod::from_name(&m)),
        Some(_) => return Err(invalid("\"method\" must be a string")),
    };
    if let (Some(_), Some(member)) = (&method, params.near_miss) {
        return Err(ProtocolError {
            kind: ProtocolErrorKind::InvalidParams,
            id: echo,
            detail: format!("a \"params\" member name that folds to \"{member}\" without being it"),
        });
    }
    match (method, id, has_result_or_error) {
        (Some(_), _, true) => Err(invalid("\"method\" together with \"result\" or \"error\"")),
        (None, Some(id), true) => Ok(Message::Response { id }),
        (None, None, true) => Err(invalid("a response needs an \"id\"")),
        (None, _, false) => Err(invalid("neither \"method\" nor \"result\"/\"error\"")),
        (Some(method @ McpMethod::Notification(_)), None, false) => {
            check_params_shape(params.shape, Id::null())?;
            Ok(Message::Notification { method })
        }
        (Some(McpMethod::Notification(_)), Some(_), false) => {
            Err(invalid("a notifications/ method must not carry an \"id\""))
        }
        (Some(_), None, false) => Err(invalid("a request method needs an \"id\"")),
        (Some(method), Some(id), false) => {
            let meta_version = std::mem::take(&mut params.meta_version);
            let call = request_call(method, params, &id)?;
            Ok(Message::Request { id, call, meta_version })
        }
    }
}

/// JSON-RPC 2.0 §4.2: params, if present, is an object or an array.
fn check_params_shape(shape: Shape, id: Id) -> Result<(), ProtocolError> {
    match shape {
        Shape::Absent | Shape::Object | Shape::Array => Ok(()),
        Shape::Other => Err(ProtocolError {
            kind: ProtocolErrorKind::InvalidParams,
            id,
            detail: "\"params\" must be an object".into(),
        }),
    }
}

fn request_call(method: McpMethod, mut params: Params, id: &Id) -> Result<Call, ProtocolError> {
    check_params_shape(params.shape, id.clone())?;
    let bad =
        |detail: &str| ProtocolError { kind: ProtocolErrorKind::InvalidParams, id: id.clone(), detail: detail.into() };
    match method {
        McpMethod::ToolsCall => {
            if params.shape != Shape::Object {
                return Err(bad("tools/call needs \"params\" with a \"name\""));
            }
            let name = match params.name {
                Some(Json::String(n)) => n,
                Some(_) => return Err(bad("\"params.name\" must be a string")),
                None => return Err(bad("tools/call needs \"params.name\"")),
            };
            let leg = crate::leg::leg_of(
                std::mem::take(&mut params.input_responses),
                std::mem::take(&mut params.request_state),
            )
            .map_err(bad)?;
            match params.arguments {
                None => Ok(Call::Tool(ToolCall { name, arguments: None, leg })),
                Some(Some(arguments)) => Ok(Call::Tool(ToolCall { name, arguments: Some(arguments), leg })),
                Some(None) => Err(bad("\"params.arguments\" must be an object")),
            }
        }
        method => {
            let target = match method {
                McpMethod::ResourcesRead | McpMethod::ResourcesSubscribe | McpMethod::ResourcesUnsubscribe => {
                    params.uri
                }
                McpMethod::PromptsGet => params.name,
                _ => None,
            };
            let target = match target {
                Some(Json::String(s)) => Some(s),
                _ => None,
            };
            Ok(Call::Method { method, target })
        }
    }
}

/// JSON-RPC ids must be integers if numbers ("SHOULD NOT contain fractional parts"; MCP: "string or
/// integer"). `text` is already a valid JSON number.
fn is_integer(text: &str) -> bool {
    !text.contains(['.', 'e', 'E'])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn single(body: &str) -> Result<Message, ProtocolError> {
        match read_body(body.as_bytes())? {
            Body::Single(m) => Ok(m),
            Body::Batch(_) => panic!("batch"),
        }
    }

    fn err(body: &str) -> (ProtocolErrorKind, String) {
        let e = single(body).unwrap_err();
        (e.kind, e.id.raw().to_owned())
    }

    #[test]
    fn reads_a_tool_call() {
        let m = single(r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"delete\u005fvm","arguments":{"vmid":100}}}"#)
            .unwrap();
        assert_eq!(
            m,
            Message::Request {
                id: Id { raw: "7".into() },
                meta_version: MetaVersion::Absent,
                call: Call::Tool(ToolCall {
                    name: "delete_vm".into(),
                    arguments: Some(Arguments { raw: r#"{"vmid":100}"#.into(), keys: vec!["vmid".into()] }),
                    leg: Default::default(),
                }),
            }
        );
    }

    #[test]
    fn ids_are_echoed_exactly() {
        let id = |body: &str| single(body).unwrap().id().raw().to_owned();
        assert_eq!(
            id(r#"{"jsonrpc":"2.0","id":123456789012345678901234567890,"method":"ping"}"#),
            "123456789012345678901234567890"
        );
        assert_eq!(id(r#"{"jsonrpc":"2.0","id":"a\u0062c","method":"ping"}"#), r#""a\u0062c""#);
        assert_eq!(id(r#"{"jsonrpc":"2.0","id":-5,"method":"ping"}"#), "-5");
        assert_eq!(id(r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#), "null");
    }

    #[test]
    fn invalid_envelopes_are_minus_32600_echoing_a_valid_id() {
        use ProtocolErrorKind::*;
        let inv = |id: &str| (InvalidRequest, id.to_owned());
        // The id is valid: echoed, so that the client can match the error (JSON-RPC 2.0 §5).
        assert_eq!(err(r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#), inv("1"));
        assert_eq!(err(r#"{"jsonrpc":"2.0","id":"a","method":"ping","result":{}}"#), inv(r#""a""#));
        assert_eq!(err(r#"{"jsonrpc":"2.0","id":1,"method":"ping","error":{}}"#), inv("1"));
        assert_eq!(err(r#"{"jsonrpc":"2.0","id":1,"method":"notifications/initialized"}"#), inv("1"));
        assert_eq!(err(r#"{"jsonrpc":"2.0","id":1}"#), inv("1"));
        assert_eq!(err(r#"{"jsonrpc":"2.0","id":1,"method":5}"#), inv("1"));
        assert_eq!(err(r#"{"id":7,"method":"ping"}"#), inv("7"));
        // No id, or one that is not a string, an integer or null: null.
        assert_eq!(err(r#"{"id":{},"method":"ping"}"#), inv("null"));
        assert_eq!(err(r#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#), inv("null"));
        assert_eq!(err(r#"{"jsonrpc":"2.0","id":[1],"method":"ping"}"#), inv("null"));
        assert_eq!(err(r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#), inv("null"));
        assert_eq!(err(r#"{"jsonrpc":"2.0","id":1e3,"method":"ping"}"#), inv("null"));
        assert_eq!(err(r#"{"jsonrpc":"2.0","id":true,"method":"ping"}"#), inv("null"));
        assert_eq!(err(r#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"x"}}"#), inv("null"));
        assert_eq!(err(r#"{"jsonrpc":"2.0","result":{}}"#), inv("null"));
        assert_eq!(read_body(b"[]").unwrap_err().kind, InvalidRequest);
        assert_eq!(read_body(b"42").unwrap_err().kind, InvalidRequest);
        assert_eq!(read_body(b"\"x\"").unwrap_err().kind, InvalidRequest);
    }

    #[test]
    fn folded_member_names_are_refused_with_the_id() {
        use ProtocolErrorKind::*;
        // Two names of one object that a case-insensitive decoder takes for one: -32600, id echoed.
        for body in [
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"list_vms","Name":"delete_vm"}}"#,
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"a","arguments":{"cmd":"ls","CMD":"rm"}}}"#,
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"a","arguments":{"x":{"y":[{"k":1,"\u212a":2}]}}}}"#,
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"a","arguments":{"cmd":1,"cmd\u0000":2}}}"#,
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"a","arguments":{"cmd":1,"c\u200bmd":2}}}"#,
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","Method":"x","params":{"name":"a"}}"#,
        ] {
            assert_eq!(err(body), (InvalidRequest, "4".to_owned()), "{body}");
        }
        // A member that folds to a known name without being it.
        assert_eq!(err(r#"{"jsonrpc":"2.0","id":4,"Method":"tools/call"}"#), (InvalidRequest, "4".into()));
        assert_eq!(
            err(r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","param\u017f":{}}"#),
            (InvalidRequest, "4".into())
        );
        assert_eq!(err(r#"{"jsonrpc":"2.0","id":4,"ID":5,"method":"ping"}"#), (InvalidRequest, "null".into()));
        assert_eq!(
            err(r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name\u0000":"x","arguments":{}}}"#),
            (InvalidParams, "4".into())
        );
        assert_eq!(
            err(r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"a","Arguments":{}}}"#),
            (InvalidParams, "4".into())
        );
        // Exact duplicates stay parse errors; distinct names pass.
        assert_eq!(read_body(br#"{"jsonrpc":"2.0","id":4,"id":4,"method":"ping"}"#).unwrap_err().kind, Parse);
        assert!(single(
            r#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"a","arguments":{"a":1,"b":{"a":2}}}}"#
        )
        .is_ok());
        // In a batch, only the element with the clash is refused.
        let Body::Batch(items) = read_body(
            br#"[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"a","NAME":"b"}}]"#,
        )
        .unwrap() else {
            panic!("not a batch")
        };
        assert!(items[0].is_ok());
        assert_eq!(items[1].as_ref().unwrap_err().id.raw(), "2");
    }

    #[test]
    fn bad_tool_params_are_minus_32602_with_id() {
        use ProtocolErrorKind::*;
        let ip = (InvalidParams, "3".to_owned());
        assert_eq!(err(r#"{"jsonrpc":"2.0","id":3,"method":"tools/call"}"#), ip);
        assert_eq!(err(r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{}}"#), ip);
        assert_eq!(err(r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":5}}"#), ip);
        assert_eq!(err(r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"a","arguments":[]}}"#), ip);
        assert_eq!(err(r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"a","arguments":null}}"#), ip);
        assert_eq!(err(r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":"x"}"#), ip);
        assert_eq!(err(r#"{"jsonrpc":"2.0","id":3,"method":"ping","params":"x"}"#), ip);
    }

    #[test]
    fn parse_errors_are_minus_32700() {
        for body in [
            "",
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","name":"b"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","method":"tools/call"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping"}{"x":1}"#,
            r#"[{"jsonrpc":"2.0","id":1,"method":"ping"},]"#,
            r#"[{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":1,"a":1}}]"#,
        ] {
            let e = read_body(body.as_bytes()).unwrap_err();
            assert_eq!((e.kind, e.id.raw()), (ProtocolErrorKind::Parse, "null"), "{body}");
        }
    }

    #[test]
    fn batches_keep_each_element() {
        let Body::Batch(items) = read_body(
            br#"[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"}},5,{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":"r","result":{}}]"#,
        )
        .unwrap() else {
            panic!("not a batch")
        };
        assert_eq!(items.len(), 4);
        assert_eq!(
            items[0],
            Ok(Message::Request {
                id: Id { raw: "1".into() },
                meta_version: MetaVersion::Absent,
                call: Call::Tool(ToolCall { name: "a".into(), arguments: None, leg: Default::default() })
            })
        );
        assert_eq!(items[1].as_ref().unwrap_err().kind, ProtocolErrorKind::InvalidRequest);
        assert_eq!(
            items[2],
            Ok(Message::Notification { method: McpMethod::Notification("notifications/initialized".into()) })
        );
        assert_eq!(items[3], Ok(Message::Response { id: Id { raw: "\"r\"".into() } }));
    }

    #[test]
    fn method_names_round_trip() {
        for name in [
            "initialize",
            "ping",
            "server/discover",
            "subscriptions/listen",
            "tools/list",
            "tools/call",
            "resources/list",
            "resources/templates/list",
            "resources/read",
            "resources/subscribe",
            "resources/unsubscribe",
            "prompts/list",
            "prompts/get",
            "completion/complete",
            "logging/setLevel",
            "tasks/get",
            "tasks/list",
            "tasks/result",
            "tasks/cancel",
            "notifications/cancelled",
            "x/unknown",
        ] {
            assert_eq!(McpMethod::from_name(name).name(), name);
        }
        assert_eq!(McpMethod::from_name("Tools/Call"), McpMethod::Other("Tools/Call".into()));
    }

    #[test]
    fn method_targets_are_read_for_header_checks() {
        let m = single(r#"{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///x"}}"#).unwrap();
        assert_eq!(
            m,
            Message::Request {
                id: Id { raw: "1".into() },
                meta_version: MetaVersion::Absent,
                call: Call::Method { method: McpMethod::ResourcesRead, target: Some("file:///x".into()) }
            }
        );
    }
}
