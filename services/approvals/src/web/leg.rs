//! The approval page's section for a continuation leg of an MCP 2026-07-28 multi-round-trip
//! request: the server answered an earlier leg with `input_required`, and this call carries the
//! answers (`inputResponses`) and the server's opaque `requestState`. The answers decide what the
//! call does, so they are shown like arguments: pretty-printed from the strict parse, printable
//! ASCII only with the same warnings, never clipped. The list page shows only a notice and no
//! Approve button: a continuation is approved from its own page, after reading the answers.

use maud::{html, Markup};

use super::arguments::{render_json, visible, ESCAPED_BADGE, NUMBERS_BADGE, WHITESPACE_BADGE};
use super::layout::badge;
use crate::store::Approval;

/// The badge of every continuation card.
pub const CONTINUATION_BADGE: &str =
    "continuation leg: the server asked for input (input_required); the answers below decide what this call does";

/// The HTML section of a continuation leg; `full`: the approval's own page (answers shown),
/// otherwise the list page (notice only).
pub fn section(a: &Approval, full: bool) -> Markup {
    html! {
        section.leg data-continuation="true" {
            (badge("continuation", CONTINUATION_BADGE))
            @if !full {
                p.truncated { a href={ "/approvals/" (a.id) } { "open the approval to review the answers" } }
            } @else {
                (answers(&a.input_responses))
                @if let Some(state) = &a.request_state { (request_state(state)) }
            }
        }
    }
}

/// The answers (`inputResponses`), pretty-printed with their warnings, never clipped.
fn answers(raw: &str) -> Markup {
    if raw.is_empty() {
        return html! { p class="meta answers-size" { "answers: none sent" } };
    }
    let r = render_json(raw, "inputResponses");
    html! {
        @if r.escaped { (badge("answers-escaped", ESCAPED_BADGE)) }
        @if r.numbers { (badge("answers-numbers", NUMBERS_BADGE)) }
        @if r.whitespace { (badge("answers-whitespace", WHITESPACE_BADGE)) }
        @for w in &r.lookalikes { (badge("answers-lookalike", w)) }
        p class="meta answers-size" { "answers (inputResponses): " (raw.len()) " bytes as sent" }
        pre class="arguments input-responses" { (r.text) }
    }
}

/// The server's opaque `requestState`, in printable ASCII.
fn request_state(state: &str) -> Markup {
    let (text, escaped) = visible(state);
    html! {
        @if escaped { (badge("state-escaped", ESCAPED_BADGE)) }
        p.meta { "server's request state (opaque, " (state.len()) " bytes):" }
        pre.request-state { (text) }
    }
}
