//! Pinned tool definitions in `tools/list` results: a listed tool whose definition does not match
//! its pin (`crate::wire::pin`), or, for a tool in `pins`, whose annotations are not the recorded
//! ones, is removed under `gateway.pins: "enforce"` and recorded either way. A tool in `pins` that
//! matches is recorded as verified when `default_for` may allow it (`crate::policy::pinned`).

use super::ResultEvent;
use crate::policy::Policy;
use crate::terms::PinMode;
use crate::wire::json::Json;

/// Check every tool list in `msg` (one message or a batch; any result carrying `tools`) against
/// the pins. Returns how many tools were removed, or `None` if no pinned tool was listed.
pub fn check_lists(msg: &mut Json, policy: &Policy, events: &mut Vec<ResultEvent>) -> Option<usize> {
    match msg {
        Json::Array(items) => {
            let mut total = None;
            for item in items {
                if let Some(n) = check_one(item, policy, events) {
                    total = Some(total.unwrap_or(0) + n);
                }
            }
            total
        }
        one => check_one(one, policy, events),
    }
}

fn check_one(msg: &mut Json, policy: &Policy, events: &mut Vec<ResultEvent>) -> Option<usize> {
    let Json::Object(members) = msg else { return None };
    let (_, result) = members.iter_mut().find(|(k, _)| k == "result")?;
    let Json::Object(result) = result else { return None };
    let (_, tools) = result.iter_mut().find(|(k, _)| k == "tools")?;
    let Json::Array(tools) = tools else { return None };
    let report = policy.gateway.pins == PinMode::Report;
    let mut pinned = false;
    let before = tools.len();
    tools.retain(|tool| {
        let Some((name, pin)) = tool.get("name").and_then(Json::as_str).and_then(|n| policy.pin(n).map(|p| (n, p)))
        else {
            return true;
        };
        pinned = true;
        let recorded = policy.pinned(name);
        if crate::wire::pin::hash(tool) == *pin && recorded.is_none_or(|p| p.annotations_match(tool)) {
            if recorded.is_some() && policy.has_default_for() {
                events.push(ResultEvent::pin_verified(name));
            }
            return true;
        }
        events.push(ResultEvent::pin_mismatch(name, policy.pin_rule(name), report));
        report
    });
    pinned.then_some(before - tools.len())
}
