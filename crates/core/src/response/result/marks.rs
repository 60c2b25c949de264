//! The marks a tool result sets on its call's grant (`crate::policy::flows`), found with the
//! result reader: `tools.NAME.marks` when the response answers the call with a `result` (one with
//! `isError: true` included: the tool ran, and what it returned reaches the model), and
//! `tools.NAME.result.mark_if` when its regex matches a text of the response. The host records them
//! before it lets the response go on.
//!
//! A call's reply that ends without its answer sets `tools.NAME.marks` too: the result may still
//! reach the client, replayed on another stream (a GET with `Last-Event-ID`, as MCP servers that
//! close a call's stream early have their clients poll), where the call is not known and its tool's
//! `marks` could not apply.

use super::{reader, ResultEvent};
use crate::policy::result::ResultRules;
use crate::policy::Policy;
use crate::wire::json::Json;

/// Push a `marked` event for every mark `msg` sets. `known`: `rules` hold the one tool whose call
/// `msg` answers (else every tool's rules, and only `mark_if` applies).
pub(super) fn of_response(
    msg: &Json,
    policy: &Policy,
    rules: &[(&str, &ResultRules)],
    known: bool,
    id: &Json,
    events: &mut Vec<ResultEvent>,
) {
    if known && msg.get("result").is_some() {
        for &(tool, _) in rules {
            of_tool(policy, tool, id, events);
        }
    }
    if rules.iter().all(|(_, r)| r.mark_if.is_empty()) {
        return;
    }
    let Some(payload) = reader::payload(msg) else { return };
    let texts = reader::texts(payload);
    for &(tool, r) in rules {
        for (i, m) in r.mark_if.iter().enumerate() {
            if reader::matches(&texts, &m.needle) {
                push(events, tool, id, format!("{}.result.mark_if[{i}]", r.path), &m.mark);
            }
        }
    }
}

/// Push a `marked` event for each of `tool`'s `tools.NAME.marks`.
pub(super) fn of_tool(policy: &Policy, tool: &str, id: &Json, events: &mut Vec<ResultEvent>) {
    for mark in policy.marks_of(tool) {
        push(events, tool, id, format!("tools.{tool}.marks"), mark);
    }
}

/// Push the `marked` event of `mark` for the response `id`, unless one is already pushed.
fn push(events: &mut Vec<ResultEvent>, tool: &str, id: &Json, rule: String, mark: &str) {
    if !events.iter().any(|e| e.mark.as_deref() == Some(mark) && e.id == super::event::id_text(id)) {
        events.push(ResultEvent::marked(tool, id, rule, mark));
    }
}
