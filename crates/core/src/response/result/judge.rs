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
/// place; without (dry run), only counted. `gateway_max` is `gateway.max_response_bytes`. What
/// redaction adds to the texts is taken out of `room`: what the limit leaves the responses at hand
/// (a JSON body, a batch's responses among them; the SSE events of one chunk).
pub fn judge(
    response: &mut Json,
    size: usize,
    rules: &[(&str, &ResultRules)],
    gateway_max: usize,
    apply: bool,
    room: &mut usize,
) -> Verdict {
    let mut max = usize::MAX;
    for (tool, r) in rules {
        max = max.min(r.max_bytes_or(gateway_max));
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
    if let Some(refusal) = denied(&reader::texts(payload), rules) {
        return Verdict::Refused(refusal);
    }
    let redacts = || rules.iter().flat_map(|(_, r)| r.redact.iter());
    let withs: Vec<&str> = redacts().map(|r| r.with.as_str()).collect();
    if withs.is_empty() {
        return Verdict::Clean;
    }
    // Dry run redacts a copy: what it counts and checks is what enforcing would send.
    let mut copy;
    let target = if apply {
        payload
    } else {
        copy = payload.clone();
        &mut copy
    };
    // Taking a match out may join what was around it into a new one (an empty `with` in
    // `AKAKIA…IA…`): the texts are redacted again until a pass changes nothing. What redaction
    // adds stays within `room`, which bounds the memory the result takes and the work of every
    // later reading: a one-byte match replaced by a long `with` would otherwise grow it many times
    // over.
    let mut count = 0;
    // The rules a refusal of redaction names: the first tool's with `redact` rules.
    let first = rules.iter().find(|(_, r)| !r.redact.is_empty());
    for pass in 1..=REDACT_PASSES {
        let (mut changed, mut overgrown) = (0, false);
        reader::for_each_text_mut(target, &mut |text| {
            for r in redacts() {
                let len = text.len();
                // No overflow: `room` is at most 64 MiB (the most any response is held to), and a
                // text at most that plus what redaction added, which came out of `room`; the text
                // grows by `room` at most, so the subtraction stays at or above zero.
                match reader::redact(text, &r.needle, &r.with, &withs, len + *room) {
                    Some(n) => changed += n,
                    None => overgrown = true,
                }
                *room = *room + len - text.len();
            }
        });
        if let Some((tool, r)) = first.filter(|_| overgrown) {
            let reason = format!("redacting the result makes it larger than {max} bytes");
            return Verdict::Refused(redact_refusal(tool, &r.path, &reason));
        }
        if changed == 0 {
            break;
        }
        if let Some((tool, r)) = first.filter(|_| pass == REDACT_PASSES) {
            return Verdict::Refused(redact_refusal(tool, &r.path, "redacting the result does not settle"));
        }
        count += changed;
    }
    // What the redacted items leave to a client that joins them (a key split over two items), and
    // where a redaction took something out, what it joined into a text a `deny_if` refuses.
    let texts = reader::texts(target);
    let refused = if count > 0 { denied(&texts, rules) } else { None };
    if let Some(refusal) = refused.or_else(|| split(&texts, rules, &withs)) {
        return Verdict::Refused(refusal);
    }
    if count == 0 {
        Verdict::Clean
    } else {
        Verdict::Redacted { count }
    }
}

/// Passes of every `redact` rule over a result's texts before what is left must be what the last
/// pass left: four layers of a key nested in itself are a result shaped to defeat redaction.
const REDACT_PASSES: usize = 4;

/// The refusal of a `redact` match in redacted `texts` that a client joining their items reads
/// ([`reader::left_by_items`]), as `deny_if` and `mark_if` read them joined.
fn split(texts: &reader::Texts<'_>, rules: &[(&str, &ResultRules)], withs: &[&str]) -> Option<Refusal> {
    let (tool, r) =
        rules.iter().find(|(_, r)| r.redact.iter().any(|d| reader::left_by_items(texts, &d.needle, withs)))?;
    Some(redact_refusal(tool, &r.path, "a text to redact spans two content items"))
}

fn redact_refusal(tool: &str, path: &str, reason: &str) -> Refusal {
    Refusal::ResultRefused { tool: tool.to_owned(), rule: format!("{path}.result.redact"), reason: reason.to_owned() }
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
