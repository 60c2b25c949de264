//! The envelope: a POST body read as one message or a batch, each message's JSON-RPC members
//! checked (JSON-RPC 2.0 §4–§6) and turned into a [`Message`].

use super::member::skip_unknown;
use super::params::{check_params_shape, read_params, request_call, Params, Shape};
use super::{Body, Id, McpMethod, Message, ProtocolError, ProtocolErrorKind};
use std::borrow::Cow;

use crate::wire::json::{Json, ParseError, Parser};

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

/// The members of one message that decisions read, each strictly parsed once. `jsonrpc` and
/// `method`: `Some(None)` when present but not a string; borrowed from the body (no allocation).
struct Parts<'a> {
    jsonrpc: Option<Option<Cow<'a, str>>>,
    id: Option<(Json, std::ops::Range<usize>)>,
    method: Option<Option<Cow<'a, str>>>,
    params: Params,
    has_result_or_error: bool,
    /// A member whose name folds to one of [`ENVELOPE_MEMBERS`] without being it.
    near_miss: Option<&'static str>,
}

/// The JSON-RPC 2.0 message members (§4, §5).
const ENVELOPE_MEMBERS: [&str; 6] = ["jsonrpc", "id", "method", "params", "result", "error"];

fn read_parts<'a>(p: &mut Parser<'a>) -> Result<Parts<'a>, ParseError> {
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
            "jsonrpc" => parts.jsonrpc = Some(p.str_value()?),
            "id" => {
                let start = p.offset();
                let v = p.value()?;
                parts.id = Some((v, start..p.offset()));
            }
            "method" => parts.method = Some(p.str_value()?),
            "params" => parts.params = read_params(p)?,
            "result" | "error" => {
                parts.has_result_or_error = true;
                p.skip_value()?;
            }
            // Other members are ignored by JSON-RPC servers; they are still checked strictly. A name
            // that a case-insensitive decoder (Go's encoding/json) reads as a member is refused.
            other => skip_unknown(p, other, &ENVELOPE_MEMBERS, &mut parts.near_miss)?,
        }
        Ok(())
    })?;
    Ok(parts)
}

/// Build one message from its parts. `clash`: an object in it holds two member names equal after
/// folding. Every −32600 and −32602 echoes the message's id when it has a valid one (JSON-RPC 2.0
/// §5: `null` only when the id cannot be determined).
fn message_from_parts(p: &Parser<'_>, parts: Parts<'_>, clash: bool) -> Result<Message, ProtocolError> {
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
    if jsonrpc.flatten().as_deref() != Some("2.0") {
        return Err(invalid("\"jsonrpc\" must be \"2.0\""));
    }
    let Ok(id) = id else { return Err(invalid("\"id\" must be a string, an integer or null")) };
    let method = match method {
        None => None,
        Some(Some(m)) => Some(McpMethod::from_name(&m)),
        Some(None) => return Err(invalid("\"method\" must be a string")),
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
            check_params_shape(params.shape, &Id::null())?;
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

/// JSON-RPC ids must be integers if numbers ("SHOULD NOT contain fractional parts"; MCP: "string or
/// integer"). `text` is already a valid JSON number.
fn is_integer(text: &str) -> bool {
    !text.contains(['.', 'e', 'E'])
}
