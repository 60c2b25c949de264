//! `params`: the members a decision reads (`name`, `uri`, `arguments`, `_meta`'s protocol version,
//! a continuation leg's members, a `subscriptions/listen` filter), each checked strictly, and the
//! [`Call`] they make.

use super::member::skip_unknown;
use super::{Arguments, Call, Id, McpMethod, ProtocolError, ProtocolErrorKind, ToolCall};
use crate::wire::json::{Json, ParseError, Parser};
use crate::wire::protocol::{Listen, MetaVersion, META_VERSION_KEY};

/// The shape of `params`, as JSON-RPC 2.0 §4.2 cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Shape {
    Absent,
    Object,
    Array,
    Other,
}

/// What a decision reads from `params`; everything else in it is only checked, never built.
pub(super) struct Params {
    pub(super) shape: Shape,
    /// A member whose name folds to one of [`PARAMS_MEMBERS`] without being it.
    pub(super) near_miss: Option<&'static str>,
    name: Option<Json>,
    uri: Option<Json>,
    /// `Some(None)`: present but not an object.
    arguments: Option<Option<Arguments>>,
    pub(super) meta_version: MetaVersion,
    /// `_meta`'s client capabilities declare URL-mode elicitation (`crate::approval::offer`).
    url_elicitation: bool,
    input_responses: crate::wire::leg::Member<Box<str>>,
    request_state: crate::wire::leg::Member<String>,
    /// `notifications` (a `subscriptions/listen` filter): what it asks for, or why it cannot be read.
    notifications: Option<Result<Listen, &'static str>>,
}

impl Params {
    /// `params` of the given shape with nothing read from it yet.
    pub(super) fn empty(shape: Shape) -> Self {
        Params {
            shape,
            near_miss: None,
            name: None,
            uri: None,
            arguments: None,
            meta_version: MetaVersion::Absent,
            url_elicitation: false,
            input_responses: Default::default(),
            request_state: Default::default(),
            notifications: None,
        }
    }
}

/// The `params` members MCP requests carry that servers act on (`server/tools`, `server/resources`,
/// `server/prompts`, pagination, `_meta`, the `subscriptions/listen` filter).
const PARAMS_MEMBERS: [&str; 8] =
    ["name", "arguments", "uri", "cursor", "_meta", "inputResponses", "requestState", "notifications"];

pub(super) fn read_params(p: &mut Parser<'_>) -> Result<Params, ParseError> {
    let mut params = Params::empty(Shape::Other);
    match p.peek_non_ws() {
        Some(b'{') => {
            params.shape = Shape::Object;
            p.object_with(|p, key| {
                match key.as_ref() {
                    "name" => params.name = Some(p.value()?),
                    "uri" => params.uri = Some(p.value()?),
                    "arguments" => params.arguments = Some(read_arguments(p)?),
                    "_meta" => (params.meta_version, params.url_elicitation) = read_meta(p)?,
                    "inputResponses" => params.input_responses = crate::wire::leg::read_input_responses(p)?,
                    "requestState" => params.request_state = crate::wire::leg::read_request_state(p)?,
                    "notifications" => params.notifications = Some(Listen::from_filter(&p.value()?)),
                    other => skip_unknown(p, other, &PARAMS_MEMBERS, &mut params.near_miss)?,
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

/// `_meta`: its protocol version, and whether its client capabilities declare URL-mode elicitation
/// (MCP 2026-07-28 "per-request protocol fields"); nothing else is read.
fn read_meta(p: &mut Parser<'_>) -> Result<(MetaVersion, bool), ParseError> {
    if p.peek_non_ws() != Some(b'{') {
        p.skip_value()?;
        return Ok((MetaVersion::Invalid, false));
    }
    let mut version = MetaVersion::Absent;
    let mut url_elicitation = false;
    p.object_with(|p, key| {
        if key.as_ref() == META_VERSION_KEY {
            version = match p.value()? {
                Json::String(s) => MetaVersion::Str(s),
                _ => MetaVersion::Invalid,
            };
            Ok(())
        } else if key.as_ref() == CAPABILITIES_META_KEY {
            url_elicitation = declares_url_elicitation(&p.value()?);
            Ok(())
        } else {
            p.skip_value()
        }
    })?;
    Ok((version, url_elicitation))
}

/// `arguments`: an object is checked and kept as text with its keys; anything else is `None`.
pub(super) fn read_arguments(p: &mut Parser<'_>) -> Result<Option<Arguments>, ParseError> {
    let start = p.offset();
    if p.peek_non_ws() != Some(b'{') {
        p.skip_value()?;
        return Ok(None);
    }
    let start = start.max(p.offset());
    // Room for a tool's usual few arguments at the first: growing from four reallocates at the
    // fifth (about 300 instructions natively); a call without arguments allocates nothing.
    let mut keys = Vec::new();
    p.object_with(|p, key| {
        if keys.is_empty() {
            keys.reserve(8);
        }
        keys.push(key.into_owned());
        p.skip_value()
    })?;
    Ok(Some(Arguments { raw: p.slice(start..p.offset()).into(), keys }))
}

/// JSON-RPC 2.0 §4.2: params, if present, is an object or an array.
pub(super) fn check_params_shape(shape: Shape, id: &Id) -> Result<(), ProtocolError> {
    match shape {
        Shape::Absent | Shape::Object | Shape::Array => Ok(()),
        Shape::Other => Err(ProtocolError {
            kind: ProtocolErrorKind::InvalidParams,
            id: id.clone(),
            detail: "\"params\" must be an object".into(),
        }),
    }
}

pub(super) fn request_call(method: McpMethod, mut params: Params, id: &Id) -> Result<Call, ProtocolError> {
    check_params_shape(params.shape, id)?;
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
            let leg = crate::wire::leg::leg_of(
                std::mem::take(&mut params.input_responses),
                std::mem::take(&mut params.request_state),
            )
            .map_err(bad)?;
            let leg = crate::wire::leg::Leg { url_elicitation: params.url_elicitation, ..leg };
            match params.arguments {
                None => Ok(Call::Tool(ToolCall { name, arguments: None, leg })),
                Some(Some(arguments)) => Ok(Call::Tool(ToolCall { name, arguments: Some(arguments), leg })),
                Some(None) => Err(bad("\"params.arguments\" must be an object")),
            }
        }
        McpMethod::SubscriptionsListen => match (params.shape, params.notifications) {
            (Shape::Object, Some(Ok(listen))) => Ok(Call::Method { method, target: None, listen: Some(listen) }),
            (Shape::Object, Some(Err(detail))) => Err(bad(detail)),
            _ => Err(bad("subscriptions/listen needs \"params.notifications\"")),
        },
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
            Ok(Call::Method { method, target, listen: None })
        }
    }
}

/// The `params._meta` key of a 2026-07-28 request's client capabilities.
pub const CAPABILITIES_META_KEY: &str = "io.modelcontextprotocol/clientCapabilities";

/// Whether a `clientCapabilities` object declares URL-mode elicitation: `elicitation.url` is an
/// object (`{"elicitation":{"form":{},"url":{}}}`).
pub fn declares_url_elicitation(capabilities: &Json) -> bool {
    matches!(capabilities.get("elicitation").and_then(|e| e.get("url")), Some(Json::Object(_)))
}
