//! Reading a `/v1/check` body (API.md "Filter -> service"): one pass of the filter's strict parser
//! (`mcp_policy_core::wire::json::Parser`: duplicate keys at any depth, lone surrogate escapes, NaN and
//! the like refused), keeping the exact text of `arguments` and `input_responses` as the filter sent
//! them, then the key recomputed with the filter's own `approval::key_with` (over the grant, the
//! upstream, the tool, the arguments and a leg's answers and state).

use std::collections::HashMap;

use mcp_policy_core::identity::grant::from_hex32 as hex32;
use mcp_policy_core::wire::json::{Json, Parser};

use crate::api::{MAX_CALLER, MAX_EXPIRES_IN, MAX_GRANT, MAX_REASON, MAX_REQUEST_ID, MAX_TOOL, MAX_WAIT};
use crate::store::{Caller, CheckInput, Upstream};

/// The 400 answer when the key sent is not the key of the call shown to the approver.
pub const KEY_MISMATCH: &str = "key does not match grant_id, upstream, tool and arguments";

/// Parses and validates a `/v1/check` body; the message is the 400 answer.
///
/// The body is read with the filter's strict parser (`mcp_policy_core::wire::json`: duplicate keys,
/// lone surrogates, ... refused), and the approval key is recomputed from `grant_id`, `tool` and
/// `arguments` with the filter's own `approval::key`: a check whose `key` differs is refused, so
/// the call a person approves is exactly the call the key lets through.
pub fn parse_check(body: &[u8]) -> Result<(CheckInput, i64), String> {
    parse_check_limited(body, usize::MAX).map_err(|e| match e {
        CheckError::Bad(msg) => msg,
        CheckError::ArgumentsTooLarge(max) => arguments_too_large(max),
    })
}

/// Why a `/v1/check` body is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CheckError {
    /// 400 with this message.
    Bad(String),
    /// 413: the arguments' JSON text is longer than this many bytes (`--max-arguments-bytes`).
    ArgumentsTooLarge(usize),
}

impl From<String> for CheckError {
    fn from(msg: String) -> Self {
        CheckError::Bad(msg)
    }
}

impl From<&str> for CheckError {
    fn from(msg: &str) -> Self {
        CheckError::Bad(msg.to_string())
    }
}

/// The 413 message.
pub fn arguments_too_large(max: usize) -> String {
    format!("arguments exceed {max} bytes")
}

/// Longest `request_state` accepted, in bytes (an opaque token issued by the MCP server).
pub const MAX_REQUEST_STATE: usize = 16_384;
/// Longest `upstream.cluster` and `upstream.authority`, in bytes.
pub const MAX_UPSTREAM_NAME: usize = 1024;
/// Longest `upstream.path`, in bytes (query included).
pub const MAX_UPSTREAM_PATH: usize = 16_384;

/// The 400 answer for an `upstream` that is not `{"cluster","authority","path"}`.
pub const UPSTREAM_SHAPE: &str = "upstream: must be an object of three non-empty strings: cluster, authority and path";

/// `upstream` as the filter sends it: `{"cluster": …, "authority": …, "path": …}`, each a non-empty
/// string without U+0000, and nothing else (every member is bound by the key, so none may be
/// ignored).
fn upstream(value: Option<&Json>) -> Result<Upstream, String> {
    let Some(value) = value else { return Err("upstream: missing".into()) };
    let Json::Object(members) = value else { return Err(UPSTREAM_SHAPE.into()) };
    let mut found: [Option<&str>; 3] = [None; 3];
    for (name, v) in members {
        let slot = match name.as_str() {
            "cluster" => 0,
            "authority" => 1,
            "path" => 2,
            _ => return Err(UPSTREAM_SHAPE.into()),
        };
        match (v, found.get_mut(slot)) {
            (Json::String(s), Some(f)) if !s.is_empty() && f.is_none() => *f = Some(s),
            _ => return Err(UPSTREAM_SHAPE.into()),
        }
    }
    let [Some(cluster), Some(authority), Some(path)] = found else { return Err(UPSTREAM_SHAPE.into()) };
    if [cluster, authority, path].iter().any(|s| s.contains('\0')) {
        return Err("upstream: must not contain U+0000".into());
    }
    if cluster.len() > MAX_UPSTREAM_NAME || authority.len() > MAX_UPSTREAM_NAME {
        return Err(format!("upstream: cluster and authority at most {MAX_UPSTREAM_NAME} bytes"));
    }
    if path.len() > MAX_UPSTREAM_PATH {
        return Err(format!("upstream: path at most {MAX_UPSTREAM_PATH} bytes"));
    }
    Ok(Upstream { cluster: cluster.to_owned(), authority: authority.to_owned(), path: path.to_owned() })
}

/// The 400 answer for a caller sent in part.
pub const CALLER_PARTIAL: &str = "policy, subject, client_id and act: send all four or none";

/// The members naming the caller: all four (the filter's `CheckRequest` sends them together) or
/// none. `policy`, `subject` and `client_id` are strings or `null`; `act` an array of at most
/// `MAX_ACTORS` strings; each at most [`MAX_CALLER`] bytes, without U+0000.
fn caller(members: &HashMap<String, Member<'_>>) -> Result<Option<Caller>, String> {
    const NAMES: [&str; 4] = ["policy", "subject", "client_id", "act"];
    let sent = NAMES.iter().filter(|n| members.contains_key(**n)).count();
    if sent == 0 {
        return Ok(None);
    }
    if sent < NAMES.len() {
        return Err(CALLER_PARTIAL.into());
    }
    let text = |name: &str, s: &str| -> Result<String, String> {
        if s.contains('\0') {
            return Err(format!("{name}: must not contain U+0000"));
        }
        if s.len() > MAX_CALLER {
            return Err(format!("{name}: longer than {MAX_CALLER} bytes"));
        }
        Ok(s.to_owned())
    };
    let opt = |name: &str| -> Result<Option<String>, String> {
        match members.get(name).map(|m| &m.value) {
            Some(Json::Null) => Ok(None),
            Some(Json::String(s)) => text(name, s).map(Some),
            _ => Err(format!("{name}: must be a string or null")),
        }
    };
    let max_actors = mcp_policy_core::identity::payload::MAX_ACTORS;
    let act = match members.get("act").map(|m| &m.value) {
        Some(Json::Array(items)) if items.len() <= max_actors => items
            .iter()
            .map(|i| match i {
                Json::String(s) => text("act", s),
                _ => Err("act: must be an array of strings".to_owned()),
            })
            .collect::<Result<Vec<_>, _>>()?,
        Some(Json::Array(_)) => return Err(format!("act: at most {max_actors} actors")),
        _ => return Err("act: must be an array of strings".into()),
    };
    Ok(Some(Caller { policy: opt("policy")?, subject: opt("subject")?, client_id: opt("client_id")?, act }))
}

/// One member as read: its value and, for the members kept verbatim, its source text.
struct Member<'a> {
    value: Json,
    raw: &'a str,
}

/// Parses and validates a `/v1/check` body with a limit on the arguments' (and on a continuation
/// leg's answers') JSON text as sent (`--max-arguments-bytes`). The message of
/// [`CheckError::Bad`] is the 400 answer.
pub fn parse_check_limited(body: &[u8], max_arguments: usize) -> Result<(CheckInput, i64), CheckError> {
    let strict = |e: mcp_policy_core::wire::json::ParseError| CheckError::Bad(format!("body is not strict JSON: {e}"));
    let mut p = Parser::new(body).map_err(strict)?;
    if p.peek_non_ws() != Some(b'{') {
        // Not strict JSON at all is told as such; strict JSON of another type is not an object.
        p.skip_value().map_err(strict)?;
        p.finish().map_err(strict)?;
        return Err("body must be a JSON object".into());
    }
    // Keys that clash only after case folding are not refused here: the filter refuses such calls
    // before they are held, and the page shows (and warns about) whatever it is given.
    let mut members: HashMap<String, Member<'_>> = HashMap::new();
    p.object_with(|p, key| {
        p.peek_non_ws();
        let start = p.offset();
        let value = p.value()?;
        members.insert(key.into_owned(), Member { value, raw: p.slice(start..p.offset()) });
        Ok(())
    })
    .map_err(strict)?;
    p.finish().map_err(strict)?;

    let string = |name: &str, max: usize| -> Result<String, String> {
        match members.get(name).map(|m| &m.value) {
            // U+0000 fits no PostgreSQL text: refused alike on every store.
            Some(Json::String(s)) if s.contains('\0') => Err(format!("{name}: must not contain U+0000")),
            Some(Json::String(s)) if s.len() <= max => Ok(s.clone()),
            Some(Json::String(_)) => Err(format!("{name}: longer than {max} bytes")),
            Some(_) => Err(format!("{name}: must be a string")),
            None => Err(format!("{name}: missing")),
        }
    };
    let int = |name: &str, min: i64, max: i64| -> Result<i64, String> {
        match members.get(name).map(|m| &m.value) {
            Some(Json::Number(n)) if n.parse::<i64>().is_ok_and(|n| (min..=max).contains(&n)) => {
                Ok(n.parse::<i64>().unwrap_or(min))
            }
            Some(_) => Err(format!("{name}: must be an integer in {min}..={max}")),
            None => Err(format!("{name}: missing")),
        }
    };
    let key = string("key", 64)?;
    if hex32(&key).is_none() {
        return Err("key: must be 64 lowercase hex characters".into());
    }
    let grant_id = string("grant_id", 64)?;
    let Some(grant_id_bytes) = hex32(&grant_id) else {
        return Err("grant_id: must be 64 lowercase hex characters".into());
    };
    let grant = string("grant", MAX_GRANT)?;
    let tool = string("tool", MAX_TOOL)?;
    if tool.is_empty() {
        return Err("tool: must not be empty".into());
    }
    let upstream = upstream(members.get("upstream").map(|m| &m.value))?;
    // The arguments are kept as the exact text the filter sent (numbers beyond f64 precision stay
    // as they are: the approver sees the call's real values).
    let Some(arguments) = members.get("arguments") else { return Err("arguments: missing".into()) };
    if arguments.raw.len() > max_arguments {
        return Err(CheckError::ArgumentsTooLarge(max_arguments));
    }
    // A continuation leg (MCP 2026-07-28): its answers are an object, kept as sent, bound by the key.
    let input_responses = match members.get("input_responses") {
        None | Some(Member { value: Json::Null, .. }) => None,
        Some(m @ Member { value: Json::Object(_), .. }) => {
            if m.raw.len() > max_arguments {
                return Err(CheckError::ArgumentsTooLarge(max_arguments));
            }
            Some(m)
        }
        Some(_) => return Err("input_responses: must be an object".into()),
    };
    let request_state = match members.get("request_state") {
        None | Some(Member { value: Json::Null, .. }) => None,
        Some(_) => Some(string("request_state", MAX_REQUEST_STATE)?),
    };
    let request_id = string("request_id", MAX_REQUEST_ID)?;
    let expires_in = int("expires_in_seconds", 1, MAX_EXPIRES_IN)?;
    let wait = int("wait_seconds", 0, MAX_WAIT)?;
    let reason = match members.get("reason").map(|m| &m.value) {
        None | Some(Json::Null) => String::new(),
        Some(_) => string("reason", MAX_REASON)?,
    };
    let caller = caller(&members)?;
    let expected = mcp_policy_core::approval::key_for(
        caller.as_ref(),
        &grant_id_bytes,
        &upstream,
        &tool,
        Some(&arguments.value),
        input_responses.map(|m| &m.value),
        request_state.as_deref(),
    );
    if !bool::from(subtle::ConstantTimeEq::ct_eq(expected.as_bytes(), key.as_bytes())) {
        return Err(KEY_MISMATCH.into());
    }
    let input = CheckInput {
        key,
        grant_id,
        grant,
        tool,
        upstream,
        arguments: arguments.raw.to_owned(),
        request_id,
        expires_in,
        reason,
        input_responses: input_responses.map(|m| m.raw.to_owned()).unwrap_or_default(),
        request_state,
        caller,
    };
    Ok((input, wait))
}
