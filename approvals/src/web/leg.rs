//! The approval page's section for a continuation leg of an MCP 2026-07-28 multi-round-trip
//! request: the server answered an earlier leg with `input_required`, and this call carries the
//! answers (`inputResponses`) and the server's opaque `requestState`. The answers decide what the
//! call does, so they are shown like arguments: pretty-printed from the strict parse, printable
//! ASCII only with the same warnings, never clipped. The list page shows only a notice and no
//! Approve button: a continuation is approved from its own page, after reading the answers.

use super::arguments::{render_json, visible, ESCAPED_BADGE, NUMBERS_BADGE, WHITESPACE_BADGE};
use super::layout::esc;
use crate::store::Approval;

/// The badge of every continuation card.
pub const CONTINUATION_BADGE: &str =
    "continuation leg: the server asked for input (input_required); the answers below decide what this call does";

/// The HTML section of a continuation leg; `full`: the approval's own page (answers shown),
/// otherwise the list page (notice only).
pub fn section(a: &Approval, full: bool) -> String {
    let mut h = format!(
        "<section class=\"leg\" data-continuation=\"true\"><p class=\"warning\" data-warning=\"continuation\">\
         <strong class=\"badge\">{}</strong></p>",
        esc(CONTINUATION_BADGE)
    );
    if !full {
        h.push_str(&format!(
            "<p class=\"truncated\"><a href=\"/approvals/{}\">open the approval to review the answers</a></p></section>",
            esc(&a.id)
        ));
        return h;
    }
    if a.input_responses.is_empty() {
        h.push_str("<p class=\"meta answers-size\">answers: none sent</p>");
    } else {
        let r = render_json(&a.input_responses, "inputResponses");
        let badge = |kind: &str, text: &str| {
            format!("<p class=\"warning\" data-warning=\"{kind}\"><strong class=\"badge\">{}</strong></p>", esc(text))
        };
        if r.escaped {
            h.push_str(&badge("answers-escaped", ESCAPED_BADGE));
        }
        if r.numbers {
            h.push_str(&badge("answers-numbers", NUMBERS_BADGE));
        }
        if r.whitespace {
            h.push_str(&badge("answers-whitespace", WHITESPACE_BADGE));
        }
        for w in &r.lookalikes {
            h.push_str(&badge("answers-lookalike", w));
        }
        h.push_str(&format!(
            "<p class=\"meta answers-size\">answers (inputResponses): {} bytes as sent</p>\
             <pre class=\"arguments input-responses\">{}</pre>",
            a.input_responses.len(),
            esc(&r.text)
        ));
    }
    if let Some(state) = &a.request_state {
        let (text, escaped) = visible(state);
        if escaped {
            h.push_str(&format!(
                "<p class=\"warning\" data-warning=\"state-escaped\"><strong class=\"badge\">{}</strong></p>",
                esc(ESCAPED_BADGE)
            ));
        }
        h.push_str(&format!(
            "<p class=\"meta\">server's request state (opaque, {} bytes):</p><pre class=\"request-state\">{}</pre>",
            state.len(),
            esc(&text)
        ));
    }
    h.push_str("</section>");
    h
}
