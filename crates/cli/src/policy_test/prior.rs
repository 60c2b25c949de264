//! `state.counters` of a case: the calls a counter already counted, admitted by the filter's own
//! limiter (`limits::Limiter`) into the store the case is then decided with.

use mcp_policy_core::identity::grant::GrantId;
use mcp_policy_core::limits::{Limit, Limiter, MemoryStore};
use mcp_policy_core::policy::{Policy, Verdict};
use mcp_policy_core::terms::{Action, Window};
use mcp_policy_core::wire::mcp::{read_body, Body, Message};

use super::list;
use super::spec::Prior;

/// Most prior calls a case gives one counter: the limiter admits them one at a time.
const MOST_PRIOR_CALLS: u64 = 1_000_000;

/// Every window a limit counts in.
const WINDOWS: [Window; 4] = [Window::Second, Window::Minute, Window::Hour, Window::Day];

/// The limits the request `body` counts under `policy`, as the filter's `Policy::judge` gives them
/// (one per counter: a counter name in one window, scope and algorithm), or why it counts none.
pub(super) fn counted<'p>(policy: &'p Policy, body: &[u8]) -> Result<Vec<&'p Limit>, String> {
    let Ok(Body::Single(Message::Request { call, .. })) = read_body(body) else {
        return Err("the call counts no limit: it is no request the filter reads".into());
    };
    match policy.judge(&call) {
        Verdict::Allow { limits, .. } => Ok(limits),
        Verdict::Deny { rule, .. } => Err(format!("the call counts no limit: {rule} refuses it first")),
        Verdict::Pass => Err("the call counts no limit: it is not subject to policy".into()),
    }
}

/// `prior` calls of `counter` for `grant`, in the window of `now`, in each counter of that name
/// the call counts (`counted`), each up to the largest `max` of the limits that can count in it:
/// a counter that two tools share may hold more calls than the smaller `max` admits.
pub(super) fn fill(
    policy: &Policy,
    counted: &Result<Vec<&Limit>, String>,
    store: &MemoryStore,
    id: &GrantId,
    counter: &str,
    prior: &Prior,
    now: u64,
) -> Result<(), String> {
    let named: Vec<&Limit> = policy.limits.iter().filter(|l| l.counter == counter).collect();
    if named.is_empty() {
        let mut known: Vec<&str> = policy.limits.iter().map(|l| l.counter.as_str()).collect();
        known.sort_unstable();
        known.dedup();
        return Err(format!("the policy has no limit with this counter (its counters: {})", list(&known)));
    }
    let mine: Vec<&Limit> =
        counted.as_ref().map_err(Clone::clone)?.iter().copied().filter(|l| l.counter == counter).collect();
    if mine.is_empty() {
        let paths: Vec<&str> = named.iter().map(|l| l.path.as_str()).collect();
        return Err(format!("the call counts no limit with this counter (it is counted by {})", list(&paths)));
    }
    let windows: Vec<Window> = mine.iter().map(|l| l.window).collect();
    let wanted: Vec<(Window, u64)> = match prior {
        Prior::Calls(n) => windows.iter().map(|&w| (w, *n)).collect(),
        Prior::ByWindow(by) if by.is_empty() => return Err("no window given (second, minute, hour or day)".into()),
        Prior::ByWindow(by) => {
            let mut out = Vec::with_capacity(by.len());
            for (name, &n) in by {
                let w = WINDOWS
                    .iter()
                    .copied()
                    .find(|w| w.name() == name)
                    .ok_or_else(|| format!("{name}: not a window (second, minute, hour or day)"))?;
                if !windows.contains(&w) {
                    let names: Vec<&str> = windows.iter().map(|w| w.name()).collect();
                    return Err(format!(
                        "{name}: the call counts this counter in no such window (its windows: {})",
                        list(&names)
                    ));
                }
                out.push((w, n));
            }
            out
        }
    };
    let limiter = Limiter { store, now_ms: now, max_tracked_grants: policy.gateway.max_tracked_grants };
    for limit in mine {
        let Some(&(_, calls)) = wanted.iter().find(|(w, _)| *w == limit.window) else { continue };
        let widest = widest(policy, limit);
        if calls > widest.max {
            let w = limit.window.name();
            return Err(format!(
                "{calls} calls in the {w} window, above the max of {} ({}), the most any limit counting in it \
                 admits (by window: {{\"{w}\": N}})",
                widest.max, widest.path
            ));
        }
        if calls > MOST_PRIOR_CALLS {
            return Err(format!("{calls} calls: a case gives a counter at most {MOST_PRIOR_CALLS} prior calls"));
        }
        for _ in 0..calls {
            limiter.admit(&[widest], id).map_err(|e| format!("the limiter refused a prior call: {e:?}"))?;
        }
    }
    Ok(())
}

/// The most calls `limit`'s counter can hold: of the tools that can count in it (allowed, not
/// hidden), the largest of the `max` each applies, which is the smallest of its own and
/// `all_tools`' limits on that counter (`Policy::judge` keeps the smaller of two); the limit it
/// is, for the error.
fn widest<'p>(policy: &'p Policy, limit: &'p Limit) -> &'p Limit {
    let same = |l: &&'p Limit| l.key_base() == limit.key_base();
    let of_all: Vec<&Limit> = policy.all_tools_limits().filter(same).collect();
    let applied = |own: Vec<&'p Limit>| own.into_iter().chain(of_all.iter().copied()).min_by_key(|l| l.max);
    let per_tool = policy
        .listed_tools()
        .filter_map(|t| policy.tool_rule(t).filter(|r| r.action == Action::Allow && !policy.is_hidden(t)))
        .filter_map(|r| applied(r.limits.iter().filter_map(|&i| policy.limits.get(i)).filter(same).collect()));
    // A tool without an entry of its own, allowed by `default` or a `default_for`, counts
    // `all_tools`' limits alone.
    let unlisted =
        policy.default == Action::Allow || policy.default_for_rules().iter().any(|d| d.action == Action::Allow);
    let of_unlisted = if unlisted { applied(Vec::new()) } else { None };
    per_tool.chain(of_unlisted).fold(limit, |w, l| if l.max > w.max { l } else { w })
}
