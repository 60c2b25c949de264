//! `flows` and the marks of `tools.NAME.marks` and `tools.NAME.result.mark_if`: every error with
//! its JSON path.

use std::collections::{BTreeMap, BTreeSet};

use super::{duration_ms, Errors};
use crate::config::fail;
use crate::config::spec::FlowSpec;
use crate::policy::flows::Flow;
use crate::policy::{NameMap, ToolRule};

/// The longest `for` of a flow: 30 days.
pub const MAX_FLOW_SECONDS: u64 = 30 * 24 * 3600;
/// Most flows in one policy (each is checked on every call of the tools it denies).
pub const MAX_FLOWS: usize = 64;
/// More than [`MAX_FLOWS`] flows: a literal, as a `format!` costs the wasm module bytes (`tests`
/// keeps the two in step).
const TOO_MANY_FLOWS: &str = "at most 64 flows";
/// With `gateway.rate_limit_service`: most marks named by all flows together (one descriptor each
/// on a call the flows deny; half of `crate::rls::MAX_DESCRIPTORS`, the rest left for its limits).
pub const MAX_REMOTE_CHECKS: usize = 32;

/// A mark's name: 1 to 64 of `A-Z a-z 0-9 _ . : -` (it is named in refusals, metrics and keys).
pub(super) fn mark_name(name: &str, path: &str, errs: &mut Errors) {
    let ok = (1..=64).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':' | b'-'));
    if !ok {
        fail(errs, path, "must be 1 to 64 characters of A-Z, a-z, 0-9, _, ., : and -");
    }
}

/// `tools.NAME.marks` at `path` (`tools.NAME`).
pub(super) fn tool_marks(marks: &[String], path: &str, errs: &mut Errors) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (i, m) in marks.iter().enumerate() {
        mark_name(m, &format!("{path}.marks[{i}]"), errs);
        if out.contains(m) {
            fail(errs, format!("{path}.marks[{i}]"), "duplicate mark");
        }
        out.push(m.clone());
    }
    out
}

/// The tools that can set each mark (`marks` or `result.mark_if`).
fn setters(tools: &NameMap<ToolRule>) -> BTreeMap<&str, BTreeSet<String>> {
    let mut by_mark: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for (name, rule) in tools {
        let conditional = rule.result.iter().flat_map(|r| r.mark_if.iter().map(|m| m.mark.as_str()));
        for mark in rule.marks.iter().map(String::as_str).chain(conditional) {
            by_mark.entry(mark).or_default().insert(name.clone());
        }
    }
    by_mark
}

/// `flows`: names unique, every mark one some tool sets, `deny` not empty, `for` 1 s to 30 days.
/// Under `gateway.rate_limit_service`, the marks live in the service (`crate::rls::marks`); the
/// flows together name at most [`MAX_REMOTE_CHECKS`] marks, so that a call's checks and limits fit
/// in one request.
pub(super) fn flows(
    specs: &[FlowSpec],
    tools: &NameMap<ToolRule>,
    rate_limit_service: bool,
    errs: &mut Errors,
) -> Vec<Flow> {
    if specs.is_empty() {
        return Vec::new();
    }
    let checks: usize = specs.iter().map(|f| f.if_marked.len()).sum();
    if rate_limit_service && checks > MAX_REMOTE_CHECKS {
        fail(
            errs,
            "flows",
            format!(
                "with gateway.rate_limit_service, the flows together name at most {MAX_REMOTE_CHECKS} marks \
                 (they name {checks}): a call carries one descriptor per mark of each flow that denies it"
            ),
        );
    }
    if specs.len() > MAX_FLOWS {
        fail(errs, "flows", TOO_MANY_FLOWS);
    }
    let setters = setters(tools);
    let mut names = BTreeSet::new();
    let mut out = Vec::new();
    for (i, f) in specs.iter().enumerate() {
        let path = format!("flows[{i}]");
        mark_name(&f.name, &format!("{path}.name"), errs);
        if !names.insert(f.name.as_str()) {
            fail(errs, format!("{path}.name"), "duplicate flow name");
        }
        if f.if_marked.is_empty() {
            fail(errs, format!("{path}.if_marked"), "must name at least one mark");
        }
        let mut except = BTreeSet::new();
        for (j, m) in f.if_marked.iter().enumerate() {
            match setters.get(m.as_str()) {
                Some(by) => except.extend(by.iter().cloned()),
                None => fail(
                    errs,
                    format!("{path}.if_marked[{j}]"),
                    format!("no tool sets the mark \"{m}\" (tools.NAME.marks or tools.NAME.result.mark_if)"),
                ),
            }
        }
        if f.deny.is_empty() {
            fail(errs, format!("{path}.deny"), "must name at least one tool, or \"*\"");
        }
        for (j, d) in f.deny.iter().enumerate() {
            if d.is_empty() {
                fail(errs, format!("{path}.deny[{j}]"), "must not be empty");
            }
        }
        let for_ms = match duration_ms(&f.for_, "\"10m\" or \"1h\"", 1000, MAX_FLOW_SECONDS * 1000) {
            Ok(ms) => ms,
            Err(m) => {
                fail(errs, format!("{path}.for"), m);
                0
            }
        };
        let mut flow = Flow::new(f.name.clone(), path, f.if_marked.clone(), &f.deny, except);
        flow.for_ms = for_ms;
        if let Some(r) = &f.reason {
            flow.reason = r.clone();
        }
        out.push(flow);
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_count_error_names_the_limit() {
        assert_eq!(super::TOO_MANY_FLOWS, format!("at most {} flows", super::MAX_FLOWS));
    }
}
