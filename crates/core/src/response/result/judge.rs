//! One JSON-RPC response judged against the `result` rules of the tools it may answer.

use super::reader;
use crate::outcome::refusal::Refusal;
use crate::policy::result::ResultRules;
use crate::wire::json::Json;

/// What the rules make of one response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// No rule fired: the response passes as it came.
    Clean,
    /// `count` matches of `redact` rules were replaced (only counted under dry run).
    Redacted { count: usize },
    /// Refused (`result_refused`): larger than `max_bytes`, or a `deny_if` matched.
    Refused(Refusal),
}

/// Judge `response` (one JSON-RPC response, `size` bytes as received) against `rules` (tool name
/// and rules; several when the call it answers is not known). With `apply`, redactions are made in
/// place; without (dry run), only counted. `gateway_max` is `gateway.max_response_bytes`.
pub fn judge(
    response: &mut Json,
    size: usize,
    rules: &[(&str, &ResultRules)],
    gateway_max: usize,
    apply: bool,
) -> Verdict {
    for (tool, r) in rules {
        let max = r.max_bytes_or(gateway_max);
        if size > max {
            return Verdict::Refused(Refusal::ResultRefused {
                tool: (*tool).to_owned(),
                rule: format!("{}.result.max_bytes", r.path),
                reason: format!("the tool result is larger than {max} bytes"),
            });
        }
    }
    let payload_member = if response.get("result").is_some() { "result" } else { "error" };
    let Json::Object(members) = response else { return Verdict::Clean };
    let Some((_, payload)) = members.iter_mut().find(|(k, _)| k == payload_member) else { return Verdict::Clean };
    {
        let texts = reader::texts(payload);
        if let Some(refusal) = denied(&texts, rules) {
            return Verdict::Refused(refusal);
        }
        // A text to redact split over two `text` items, which each redaction of one item leaves
        // whole: a client that joins them reads it, as `deny_if` and `mark_if` do.
        for (tool, r) in rules {
            if r.redact.iter().any(|d| reader::spans_items(&texts, &d.needle)) {
                return Verdict::Refused(Refusal::ResultRefused {
                    tool: (*tool).to_owned(),
                    rule: format!("{}.result.redact", r.path),
                    reason: "a text to redact spans two content items".to_owned(),
                });
            }
        }
    }
    let mut count = 0;
    let redacts = || rules.iter().flat_map(|(_, r)| r.redact.iter());
    if redacts().next().is_none() {
        return Verdict::Clean;
    }
    if apply {
        reader::for_each_text_mut(payload, &mut |text| {
            for r in redacts() {
                count += reader::redact(text, &r.needle, &r.with);
            }
        });
        // Taking a match out may join what was around it into a text a `deny_if` refuses.
        if count > 0 {
            if let Some(refusal) = denied(&reader::texts(payload), rules) {
                return Verdict::Refused(refusal);
            }
        }
    } else {
        for text in reader::texts(payload).all {
            for r in redacts() {
                if r.needle.may_match(text) {
                    count += r.needle.matches(text).len();
                }
            }
        }
    }
    if count == 0 {
        Verdict::Clean
    } else {
        Verdict::Redacted { count }
    }
}

/// The refusal of the first `deny_if` that matches in a payload's `texts`, if one does.
fn denied(texts: &reader::Texts<'_>, rules: &[(&str, &ResultRules)]) -> Option<Refusal> {
    rules.iter().find_map(|(tool, r)| {
        let i = reader::first_match(texts, r.deny_if.iter().map(|d| &d.needle))?;
        Some(Refusal::ResultRefused {
            tool: (*tool).to_owned(),
            rule: r.deny_path(i),
            reason: r.deny_if.get(i).map(|d| d.reason.clone()).unwrap_or_default(),
        })
    })
}
