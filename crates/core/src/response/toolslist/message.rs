//! One JSON-RPC message (or batch of responses) whose `result.tools` is filtered in place when it
//! answers a `tools/list` request, or carries a tool list whatever its id says.

use super::ListError;
use crate::wire::json::{self, Json};

/// Do two JSON-RPC ids denote the same id? Strings by value, numbers numerically, and a string
/// that holds a number equals that number: some SDKs (e.g. the MCP Python SDK 2.x) treat `"7"` and
/// `7` as one id, so a server answering `"7"` must not slip past the filter.
pub(crate) fn same_id(a: &Json, b: &Json) -> bool {
    let num_eq = |x: &str, y: &str| crate::wire::numbers::cmp_numbers(x, y) == Some(std::cmp::Ordering::Equal);
    match (a, b) {
        (Json::Number(x), Json::Number(y)) => num_eq(x, y),
        (Json::String(s), Json::Number(n)) | (Json::Number(n), Json::String(s)) => {
            matches!(json::parse(s.trim().as_bytes()), Ok(Json::Number(t)) if num_eq(&t, n))
        }
        _ => a == b,
    }
}

/// Filter one parsed JSON-RPC message (or batch of responses) in place where it answers one of
/// `request_ids`. Returns how many tools were removed, or `None` if nothing in it answers them.
pub(crate) fn filter_message(
    msg: &mut Json,
    request_ids: &[Json],
    hidden: &dyn Fn(&str) -> bool,
) -> Result<Option<usize>, ListError> {
    if let Json::Array(items) = msg {
        let mut total = None;
        for item in items {
            if let Some(n) = filter_one(item, request_ids, hidden)? {
                total = Some(total.unwrap_or(0) + n);
            }
        }
        return Ok(total);
    }
    filter_one(msg, request_ids, hidden)
}

/// Two member names of one object that a case-insensitive client (Go's `encoding/json`) reads as one:
/// the client might read a list the filter did not.
/// Likewise a name that folds to one of `known` without being it (`Result`, `Tools`, `Name`).
fn check_names(members: &[(String, Json)], known: &[&str]) -> Result<(), ListError> {
    let names: Vec<&str> = members.iter().map(|(k, _)| k.as_str()).collect();
    // The parse already folded these names within its budget: folding them again costs no more.
    let mut unbounded = usize::MAX;
    if crate::wire::fold::clash(&names, &mut unbounded) != Ok(None) {
        return Err(ListError::Malformed("member names equal after case folding"));
    }
    if members.iter().any(|(k, _)| crate::wire::fold::near_miss(k, known).is_some()) {
        return Err(ListError::Malformed("a member name that folds to a JSON-RPC or MCP member without being it"));
    }
    Ok(())
}

fn filter_one(msg: &mut Json, request_ids: &[Json], hidden: &dyn Fn(&str) -> bool) -> Result<Option<usize>, ListError> {
    let Json::Object(members) = msg else { return Ok(None) };
    check_names(members, &["jsonrpc", "id", "result", "error", "method", "params"])?;
    let answers_request = members.iter().any(|(k, v)| k == "id" && request_ids.iter().any(|r| same_id(v, r)));
    // Fail closed: any result carrying a tool list is filtered, whatever its id says.
    let carries_tools = members.iter().any(|(k, v)| k == "result" && v.get("tools").is_some());
    if !answers_request && !carries_tools {
        return Ok(None);
    }
    let Some((_, result)) = members.iter_mut().find(|(k, _)| k == "result") else {
        return Ok(Some(0)); // an error response: nothing to filter
    };
    let Json::Object(result) = result else { return Err(ListError::Malformed("result is not an object")) };
    check_names(result, &["tools"])?;
    let Some((_, tools)) = result.iter_mut().find(|(k, _)| k == "tools") else {
        return Err(ListError::Malformed("result has no tools"));
    };
    let Json::Array(items) = tools else { return Err(ListError::Malformed("result.tools is not an array")) };
    let before = items.len();
    let mut keep = Vec::with_capacity(before);
    for tool in items.drain(..) {
        if let Json::Object(fields) = &tool {
            check_names(fields, &["name"])?;
        }
        let name = tool.get("name").and_then(Json::as_str).ok_or(ListError::Malformed("a tool has no string name"))?;
        if !hidden(name) {
            keep.push(tool);
        }
    }
    let removed = before - keep.len();
    *items = keep;
    Ok(Some(removed))
}
