//! The marks a tool result sets on its call's grant (`crate::policy::flows`), found with the
//! result reader: `tools.NAME.marks` when the response answers the call with a `result` (one with
//! `isError: true` included: the tool ran, and what it returned reaches the model), and
//! `tools.NAME.result.mark_if` when its regex matches a text of the response. The host records them
//! before it lets the response go on.

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
    let mut push = |tool: &str, rule: String, mark: &str| {
        if !events.iter().any(|e| e.mark.as_deref() == Some(mark) && e.id == super::event::id_text(id)) {
            events.push(ResultEvent::marked(tool, id, rule, mark));
        }
    };
    if known && msg.get("result").is_some() {
        for &(tool, _) in rules {
            for mark in policy.marks_of(tool) {
                push(tool, format!("tools.{tool}.marks"), mark);
            }
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
                push(tool, format!("{}.result.mark_if[{i}]", r.path), &m.mark);
            }
        }
    }
}
