//! One approval's card, on the list page and on the approval's own page.

use maud::{html, Markup};

use super::arguments::{
    raw_prefix_visible, render_arguments, visible, Rendered, ESCAPED_BADGE, NUMBERS_BADGE, WHITESPACE_BADGE,
};

use super::layout::{badge, rfc3339, span};
use crate::api::MAX_NOTE;
use crate::auth::Session;
use crate::store::{Approval, State as St};

/// Most bytes of rendered arguments shown on the list page; longer ones are shown in full only on
/// the approval's own page, where alone they can be approved.
pub const LIST_ARGUMENTS_MAX: usize = 4096;

/// Most characters of a request id shown.
pub const REQUEST_ID_SHOWN: usize = 128;

/// A request id for the page: at most [`REQUEST_ID_SHOWN`] characters, in printable ASCII, in a
/// monospace span.
fn request_id_html(r: &str) -> Markup {
    let mut cut: String = r.chars().take(REQUEST_ID_SHOWN).collect();
    let truncated = cut.len() < r.len();
    cut = visible(&cut).0;
    if truncated {
        cut.push_str("...");
    }
    html! { span class="mono request-id" { (cut) } }
}

/// The MCP server the call goes to, which the approval is bound to: its Envoy cluster, then its
/// `:authority` and `:path` (printable ASCII, in full: the query may tell one server from another).
/// The second value: a character was escaped.
fn upstream_html(a: &Approval) -> (Markup, bool) {
    if !a.has_upstream() {
        return (
            html! { p.upstream.muted { "server: not recorded (an approval stored before servers were bound)" } },
            false,
        );
    }
    let (cluster, e1) = visible(&a.upstream.cluster);
    let (authority, e2) = visible(&a.upstream.authority);
    let (path, e3) = visible(&a.upstream.path);
    let markup = html! {
        p.upstream {
            "server: cluster " b.mono.cluster { (cluster) } " · "
            span.mono.target { span.authority { (authority) } span.path { (path) } }
        }
    };
    (markup, e1 || e2 || e3)
}

/// Who called, as the filter read it from the verified token, and the policy the call was judged
/// by: `caller: subject S · client C · actors, current first: A, B · policy P` (each part only when
/// present; nothing for a call without identity or policy set). Every value in printable ASCII (as
/// the tool and the server). The second value: a character was escaped.
fn caller_html(a: &Approval) -> (Markup, bool) {
    let Some(c) = &a.caller else { return (html! {}, false) };
    let mut escaped = false;
    let mut shown = |s: &str| {
        let (text, e) = visible(s);
        escaped |= e;
        text
    };
    let subject = c.subject.as_deref().map(&mut shown);
    let client = c.client_id.as_deref().map(&mut shown);
    let actors: Vec<String> = c.act.iter().map(|s| shown(s)).collect();
    let policy = c.policy.as_deref().map(&mut shown);
    let mut parts: Vec<Markup> = Vec::new();
    if let Some(s) = subject {
        parts.push(html! { "subject " b.mono.subject { (s) } });
    }
    if let Some(s) = client {
        parts.push(html! { "client " span.mono.client-id { (s) } });
    }
    if !actors.is_empty() {
        parts.push(html! {
            "actors, current first: "
            @for (i, s) in actors.iter().enumerate() {
                @if i > 0 { ", " }
                span.mono.actor { (s) }
            }
        });
    }
    if let Some(s) = policy {
        parts.push(html! { "policy " span.mono.policy { (s) } });
    }
    if parts.is_empty() {
        return (html! {}, false);
    }
    let markup = html! {
        p.caller {
            "caller: "
            @for (i, part) in parts.iter().enumerate() {
                @if i > 0 { " · " }
                (part)
            }
        }
    };
    (markup, escaped)
}

/// Where a card is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    /// `/`: long arguments cut, and then no Approve.
    List,
    /// `/approvals/{id}`: everything.
    Detail,
}

/// One approval's card; with the decision form when pending. `arguments_bytes` is the size of the
/// arguments in all: on the list page `a.arguments` may hold only their first bytes.
pub(crate) fn card(a: &Approval, arguments_bytes: usize, s: &Session, now: i64, back: &str, view: View) -> Markup {
    let (tool, tool_escaped) = visible(&a.tool);
    let (upstream, upstream_escaped) = upstream_html(a);
    let (caller, caller_escaped) = caller_html(a);
    // Only the start of long arguments is read for the list page: shown as sent (escaped), with
    // no warnings about the rest and no Approve button.
    let complete = a.arguments.len() == arguments_bytes;
    let rendered = if complete {
        render_arguments(&a.arguments)
    } else {
        let (text, escaped) = raw_prefix_visible(&a.arguments, LIST_ARGUMENTS_MAX);
        Rendered { text, escaped, lookalikes: vec![], numbers: false, whitespace: false }
    };
    let cut = !complete || (view == View::List && rendered.text.len() > LIST_ARGUMENTS_MAX);
    // A continuation leg: its answers in full on the approval's page; on the list only a notice.
    let leg_unseen = a.is_continuation() && view == View::List;
    let state = a.state.as_str();
    let link = format!("/approvals/{}", a.id);
    html! {
        article class="approval" data-approval-id=(a.id) data-state=(state) id=(a.id) {
            h3 {
                span.tool { (tool) }
                span.grant { "grant " span.mono { (a.grant) } }
                span class={ "state state-" (state) } { (state) }
            }
            (upstream)
            (caller)
            @if rendered.escaped || tool_escaped || upstream_escaped || caller_escaped {
                (badge("escaped", ESCAPED_BADGE))
            }
            @if rendered.numbers { (badge("numbers", NUMBERS_BADGE)) }
            @if rendered.whitespace { (badge("whitespace", WHITESPACE_BADGE)) }
            @for w in &rendered.lookalikes { (badge("lookalike", w)) }
            @if !a.reason.is_empty() { p.reason { (a.reason) } }
            p.meta.size { "arguments: " (arguments_bytes) " bytes as sent" }
            @if cut {
                // The rendered text is ASCII: any byte index is a character boundary. Cut
                // arguments: the size as sent; whole ones rendered too long: the size rendered.
                pre.arguments.truncated { (rendered.text.get(..LIST_ARGUMENTS_MAX).unwrap_or(&rendered.text)) }
                p.truncated {
                    "… " (if complete { rendered.text.len() } else { arguments_bytes }) " bytes in all: "
                    a href=(link) { "open the approval to review them" }
                }
            } @else {
                pre.arguments { (rendered.text) }
            }
            @if a.is_continuation() { (super::leg::section(a, view == View::Detail)) }
            p.meta { (meta(a, now)) " · " a href=(link) class="mono" { (a.id) } }
            @if !a.note.is_empty() { p.note { "note: " (a.note) } }
            @if a.state == St::Pending {
                form method="post" action={ (link) "/decision" } class="decide" {
                    button type="submit" class="no-enter" disabled hidden aria-hidden="true" tabindex="-1" {}
                    input type="hidden" name="csrf" value=(s.csrf);
                    input type="hidden" name="back" value=(back);
                    input type="text" name="note" placeholder="note (optional)" maxlength=(MAX_NOTE) autocomplete="off";
                    @if leg_unseen {
                        a href=(link) class="review" { "Review the answers to approve" }
                    } @else if cut {
                        a href=(link) class="review" { "Review all arguments to approve" }
                    } @else {
                        button type="submit" name="decision" value="approve" class="approve" { "Approve" }
                    }
                    button type="submit" name="decision" value="deny" class="deny" { "Deny" }
                }
            }
        }
    }
}

/// The card's line of times: opened, expires, decided (by whom), used (by which request).
fn meta(a: &Approval, now: i64) -> Markup {
    let (created, expires) = (rfc3339(a.created_at), rfc3339(a.expires_at));
    html! {
        "opened " time datetime=(created) title=(created) { (span(now - a.created_at)) " ago" }
        @if matches!(a.state, St::Pending | St::Approved) {
            " · expires in " time datetime=(expires) title=(expires) { (span(a.expires_at - now)) }
        }
        @if let (Some(t), Some(who)) = (a.decided_at, &a.approver) {
            @let t = rfc3339(t);
            " · decided by " b.approver { (who) } " at " time datetime=(t) { (t) }
        }
        @if let Some(t) = a.consumed_at {
            @let t = rfc3339(t);
            " · used at " time datetime=(t) { (t) }
            @if let Some(r) = a.consumed_request_id.as_deref().filter(|r| !r.is_empty()) {
                " by request id " (request_id_html(r))
            }
        }
        @if !a.request_id.is_empty() { " · request id " (request_id_html(&a.request_id)) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_ids_are_cut_and_escaped() {
        assert_eq!(request_id_html("req-1").into_string(), "<span class=\"mono request-id\">req-1</span>");
        assert_eq!(request_id_html("a\nb<").into_string(), "<span class=\"mono request-id\">a\\u000ab&lt;</span>");
        let long = "x".repeat(200);
        assert_eq!(
            request_id_html(&long).into_string(),
            format!("<span class=\"mono request-id\">{}...</span>", "x".repeat(128))
        );
        assert_eq!(
            request_id_html(&"x".repeat(128)).into_string(),
            format!("<span class=\"mono request-id\">{}</span>", "x".repeat(128))
        );
    }
}
