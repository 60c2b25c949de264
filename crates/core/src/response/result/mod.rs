//! Rules on what a tool sends back (`tools.NAME.result`): the result reader (`reader`, pure and
//! shared), one response judged (`judge`), and the messages of a response body walked (here).
//!
//! Every response in the reply to a forwarded `tools/call` is judged: under the call's id against
//! its tool's rules, under any other against every tool's, the call's among them ([`Calls`]). A
//! tool without rules has no rules of its own: its answer is judged against every tool's, not held
//! to their size limits (another call reusing its id may be answered on its reply). A
//! response whose call is not known here (the reply to `tasks/result`, an event replayed on another
//! stream, the reply to another request) that is an error or looks like a tool result (its
//! `result` has `content` or `structuredContent`) is judged against every tool's rules: none passes
//! unread. (A call whose result is judged may not be part of a batch: `pipeline::batch`.)
//!
//! A refused result is replaced by the JSON-RPC error for its id (`result_refused`), in place: in a
//! batch reply (one arriving on a stream) the other elements stay, in an SSE stream the other events
//! stay. A redacted result is written again (compact JSON, numbers as received). Under dry run
//! (`gateway.mode`, `gateway.tool_modes`) nothing is changed; what would have happened is recorded.

use crate::outcome::decision::Decision;
use crate::outcome::refusal::Refusal;
use crate::policy::result::ResultRules;
use crate::policy::Policy;
use crate::terms::Mode;
use crate::wire::json::{self, Json};
use crate::wire::mcp::Id;

mod event;
pub mod judge;
mod marks;
pub mod pins;
pub mod reader;

pub use event::ResultEvent;
use judge::Verdict;

/// The forwarded `tools/call` a response answers, by what its reply is read for.
///
/// Every response on a call's reply may be the call's: the Python SDK writes the call's id over
/// that of any response on the call's POST stream, and reads a JSON reply's id as an integer
/// (`"07"` is 7). A response under another id may also answer another call, to which both SDKs
/// hand a JSON reply's responses by their ids.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Calls {
    /// The call (id and tool) when its tool has `result` rules.
    pub judged: Option<(Json, String)>,
    /// The id of a call of a tool without them, whose answer under that id is judged by every
    /// tool's rules but not held to their size limits.
    ruleless: Option<Json>,
    /// The call's answer was read on the reply (a response under its id, or a result that set its
    /// marks), or its marks were set when the reply or its stream ended ([`reply_ended`]). A reply
    /// the filter refused is not an answer: the client may still fetch the result on another
    /// stream (a 2024-11-05 HTTP+SSE client never reads a POST's reply).
    pub(super) answered: std::cell::Cell<bool>,
}

impl Calls {
    /// The call a forwarded request's decision names.
    pub fn of(policy: &Policy, decision: &Decision) -> Self {
        let (Some("tools/call"), Some(tool), Some(id)) = (decision.method.as_deref(), &decision.tool, &decision.id)
        else {
            return Calls::default();
        };
        let Ok(id) = json::parse(id.as_bytes()) else { return Calls::default() };
        match policy.result_rules(tool) {
            Some(_) => Calls { judged: Some((id, tool.clone())), ..Calls::default() },
            None => Calls { ruleless: Some(id), ..Calls::default() },
        }
    }
}

/// Judge every response in `msg` (one message or a batch; `size`: its bytes as received) whose
/// result the rules cover, recording what happened in `events`; what redaction adds to the texts
/// of them all is taken out of `room` ([`judge::judge`]). Returns whether `msg` changed.
pub fn judge_message(
    msg: &mut Json,
    size: usize,
    policy: &Policy,
    calls: &Calls,
    events: &mut Vec<ResultEvent>,
    room: &mut usize,
) -> bool {
    match msg {
        Json::Array(items) => {
            let mut changed = false;
            for item in items {
                changed |= judge_one(item, size, policy, calls, events, room);
            }
            changed
        }
        one => judge_one(one, size, policy, calls, events, room),
    }
}

/// The reply to the call `calls` judges ended, or its stream did: without its answer, the call's
/// `tools.NAME.marks` are set all the same ([`marks`]), once.
pub fn reply_ended(policy: &Policy, calls: &Calls, events: &mut Vec<ResultEvent>) {
    if let Some((id, tool)) = calls.judged.as_ref().filter(|_| !calls.answered.replace(true)) {
        marks::of_tool(policy, tool, id, events);
    }
}

/// Does `payload` look like a `tools/call` result (MCP `CallToolResult`)?
fn looks_like_tool_result(msg: &Json) -> bool {
    msg.get("result").is_some_and(|r| r.get("content").is_some() || r.get("structuredContent").is_some())
}

fn judge_one(
    msg: &mut Json,
    size: usize,
    policy: &Policy,
    calls: &Calls,
    events: &mut Vec<ResultEvent>,
    room: &mut usize,
) -> bool {
    let (result, error) = (msg.get("result").is_some(), msg.get("error").is_some());
    if !result && !error {
        return false; // a request or notification from the server, not a response
    }
    let bears = |id: &Json| msg.get("id").is_some_and(|got| crate::response::toolslist::same_id(id, got));
    // The answer to a call of a tool without rules, under its own id, is most likely that tool's,
    // but a client that sends another call under the same id while this one is in flight has the
    // server answer that call here (the SDKs' servers route a response to the latest request
    // under its id). So it is judged by every tool's rules as any other, without their size
    // limits, which are not its own.
    let ruleless = calls.ruleless.as_ref().is_some_and(bears);
    // The call whose reply this is, if known, and whether the response bears its id: then its
    // rules, held on the stack (no allocation); else every tool's, its own among them.
    let known = calls.judged.as_ref().map(|(_, tool)| tool.as_str());
    let own = calls.judged.as_ref().filter(|(id, _)| bears(id));
    let (one, all);
    let rules: &[(&str, &ResultRules)] = match own {
        Some((_, tool)) => {
            one = policy.result_rules(tool).map(|r| (tool.as_str(), r));
            one.as_slice()
        }
        // An error may answer any call: the client shows its message and data.
        None if known.is_some() || error || looks_like_tool_result(msg) => {
            all = policy.all_result_rules();
            &all
        }
        None => return false,
    };
    let Some(&(first_tool, _)) = rules.first() else { return false };
    // A result whose call is not known is judged by every tool's rules: in dry run only when every
    // one of those tools is, since it may be any of them.
    let dry_run = rules.iter().all(|(tool, _)| policy.mode_for(Some(tool)) == Mode::DryRun);
    // One response holds a `result` or an `error`, and no `method`. Clients differ on what they
    // make of any other (pydantic reads `result` beside `error` as the error, and `"method":null`
    // beside `result` as the result), so it is refused.
    let proper = !(result && error) && msg.get("method").is_none();
    let verdict = if !proper {
        Verdict::Refused(Refusal::ResultRefused {
            tool: first_tool.to_owned(),
            rule: format!("tools.{first_tool}.result"),
            reason: "the tool result is not one JSON-RPC response".to_owned(),
        })
    } else {
        // An error that may answer any call is read for what it says, not held to every tool's
        // size limit; on a call's reply it is held to the call's (the Python SDK hands it to the
        // call whatever its id).
        let size = if !ruleless && (known.is_some() || looks_like_tool_result(msg)) { size } else { 0 };
        judge::judge(msg, size, rules, policy.gateway.max_response_bytes, !dry_run, room)
    };
    // Judging changes texts of the payload only: the id is still there.
    let id = msg.get("id").unwrap_or(&Json::Null);
    let marking = dry_run || !matches!(verdict, Verdict::Refused(_));
    if marking {
        marks::of_response(msg, policy, rules, known.is_some(), id, events);
    }
    // The call is answered by a response under its id, or by a result on its reply that set its
    // marks. An error under another id may answer another call (TypeScript's client hands it to
    // the call its id names), and a message that is not one response answers none: this call's
    // result may still come, replayed on another stream.
    if proper && (own.is_some() || marking && result) {
        calls.answered.set(true);
    }
    match verdict {
        Verdict::Clean => false,
        Verdict::Redacted { count } => {
            events.push(ResultEvent::redacted(first_tool, id, count, dry_run));
            !dry_run
        }
        Verdict::Refused(refusal) => {
            events.push(ResultEvent::refused(&refusal, id, dry_run));
            if dry_run {
                return false;
            }
            let id = id.clone();
            replace_by_error(msg, &refusal, &id);
            true
        }
    }
}

/// Replace `msg` by the JSON-RPC error of `refusal` for `id`.
fn replace_by_error(msg: &mut Json, refusal: &Refusal, id: &Json) {
    let text = refusal.to_json(&Id::of(id));
    // The refusal renders valid JSON; should it ever not parse, the result is dropped all the same.
    *msg = json::parse(text.as_bytes()).unwrap_or(Json::Null);
}
