//! One approval's card, on the list page and on the approval's own page.

use super::arguments::{
    raw_prefix_visible, render_arguments, visible, Rendered, ESCAPED_BADGE, NUMBERS_BADGE, WHITESPACE_BADGE,
};
use super::layout::{esc, rfc3339, span};
use crate::api::MAX_NOTE;
use crate::auth::Session;
use crate::store::{Approval, State as St};

/// Most bytes of rendered arguments shown on the list page; longer ones are shown in full only on
/// the approval's own page, where alone they can be approved.
pub const LIST_ARGUMENTS_MAX: usize = 4096;

/// Most characters of a request id shown.
pub const REQUEST_ID_SHOWN: usize = 128;

/// A request id for the page: at most [`REQUEST_ID_SHOWN`] characters, in printable ASCII,
/// HTML-escaped, in a monospace span.
fn request_id_html(r: &str) -> String {
    let mut cut: String = r.chars().take(REQUEST_ID_SHOWN).collect();
    let truncated = cut.len() < r.len();
    cut = visible(&cut).0;
    if truncated {
        cut.push_str("...");
    }
    format!("<span class=\"mono request-id\">{}</span>", esc(&cut))
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
pub(crate) fn card(a: &Approval, arguments_bytes: usize, s: &Session, now: i64, back: &str, view: View) -> String {
    let id = esc(&a.id);
    let (tool, tool_escaped) = visible(&a.tool);
    // Only the start of long arguments is read for the list page: shown as sent (escaped), with
    // no warnings about the rest and no Approve button.
    let complete = a.arguments.len() == arguments_bytes;
    let rendered = if complete {
        render_arguments(&a.arguments)
    } else {
        let (text, escaped) = raw_prefix_visible(&a.arguments, LIST_ARGUMENTS_MAX);
        Rendered { text, escaped, lookalikes: vec![], numbers: false, whitespace: false }
    };
    let mut h = format!(
        "<article class=\"approval\" data-approval-id=\"{id}\" data-state=\"{state}\" id=\"{id}\">\
         <h3><span class=\"tool\">{tool}</span><span class=\"grant\">grant <span class=\"mono\">{grant}</span></span>\
         <span class=\"state state-{state}\">{state}</span></h3>",
        state = a.state.as_str(),
        tool = esc(&tool),
        grant = esc(&a.grant),
    );
    if rendered.escaped || tool_escaped {
        h.push_str(&format!(
            "<p class=\"warning\" data-warning=\"escaped\"><strong class=\"badge\">{ESCAPED_BADGE}</strong></p>"
        ));
    }
    if rendered.numbers {
        h.push_str(&format!(
            "<p class=\"warning\" data-warning=\"numbers\"><strong class=\"badge\">{}</strong></p>",
            esc(NUMBERS_BADGE)
        ));
    }
    if rendered.whitespace {
        h.push_str(&format!(
            "<p class=\"warning\" data-warning=\"whitespace\"><strong class=\"badge\">{}</strong></p>",
            esc(WHITESPACE_BADGE)
        ));
    }
    for w in &rendered.lookalikes {
        h.push_str(&format!(
            "<p class=\"warning\" data-warning=\"lookalike\"><strong class=\"badge\">{}</strong></p>",
            esc(w)
        ));
    }
    if !a.reason.is_empty() {
        h.push_str(&format!("<p class=\"reason\">{}</p>", esc(&a.reason)));
    }
    h.push_str(&format!("<p class=\"meta size\">arguments: {arguments_bytes} bytes as sent</p>"));
    let cut = !complete || (view == View::List && rendered.text.len() > LIST_ARGUMENTS_MAX);
    if cut {
        // The rendered text is ASCII: any byte index is a character boundary. Cut arguments: the
        // size as sent; whole ones rendered too long: the size rendered.
        let head = rendered.text.get(..LIST_ARGUMENTS_MAX).unwrap_or(&rendered.text);
        let all = if complete { rendered.text.len() } else { arguments_bytes };
        h.push_str(&format!(
            "<pre class=\"arguments truncated\">{}</pre><p class=\"truncated\">… {all} bytes in all: \
             <a href=\"/approvals/{id}\">open the approval to review them</a></p>",
            esc(head),
        ));
    } else {
        h.push_str(&format!("<pre class=\"arguments\">{}</pre>", esc(&rendered.text)));
    }
    // A continuation leg: its answers in full on the approval's page; on the list only a notice.
    let leg_unseen = a.is_continuation() && view == View::List;
    if a.is_continuation() {
        h.push_str(&super::leg::section(a, view == View::Detail));
    }
    let mut meta = format!(
        "opened <time datetime=\"{c}\" title=\"{c}\">{} ago</time>",
        span(now - a.created_at),
        c = rfc3339(a.created_at)
    );
    match a.state {
        St::Pending | St::Approved => meta.push_str(&format!(
            " · expires in <time datetime=\"{e}\" title=\"{e}\">{}</time>",
            span(a.expires_at - now),
            e = rfc3339(a.expires_at)
        )),
        _ => {}
    }
    if let (Some(t), Some(who)) = (a.decided_at, &a.approver) {
        meta.push_str(&format!(
            " · decided by <b class=\"approver\">{}</b> at <time datetime=\"{t}\">{t}</time>",
            esc(who),
            t = rfc3339(t)
        ));
    }
    if let Some(t) = a.consumed_at {
        meta.push_str(&format!(" · used at <time datetime=\"{t}\">{t}</time>", t = rfc3339(t)));
        if let Some(r) = a.consumed_request_id.as_deref().filter(|r| !r.is_empty()) {
            meta.push_str(&format!(" by request id {}", request_id_html(r)));
        }
    }
    if !a.request_id.is_empty() {
        meta.push_str(&format!(" · request id {}", request_id_html(&a.request_id)));
    }
    h.push_str(&format!("<p class=\"meta\">{meta} · <a href=\"/approvals/{id}\" class=\"mono\">{id}</a></p>"));
    if !a.note.is_empty() {
        h.push_str(&format!("<p class=\"note\">note: {}</p>", esc(&a.note)));
    }
    if a.state == St::Pending {
        let approve = if leg_unseen {
            format!("<a href=\"/approvals/{id}\" class=\"review\">Review the answers to approve</a>")
        } else if cut {
            format!("<a href=\"/approvals/{id}\" class=\"review\">Review all arguments to approve</a>")
        } else {
            "<button type=\"submit\" name=\"decision\" value=\"approve\" class=\"approve\">Approve</button>".to_string()
        };
        h.push_str(&format!(
            "<form method=\"post\" action=\"/approvals/{id}/decision\" class=\"decide\">\
             <button type=\"submit\" class=\"no-enter\" disabled hidden aria-hidden=\"true\" tabindex=\"-1\"></button>\
             <input type=\"hidden\" name=\"csrf\" value=\"{csrf}\"><input type=\"hidden\" name=\"back\" value=\"{back}\">\
             <input type=\"text\" name=\"note\" placeholder=\"note (optional)\" maxlength=\"{MAX_NOTE}\" autocomplete=\"off\">\
             {approve}<button type=\"submit\" name=\"decision\" value=\"deny\" class=\"deny\">Deny</button></form>",
            csrf = esc(&s.csrf),
            back = esc(back),
        ));
    }
    h.push_str("</article>");
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_ids_are_cut_and_escaped() {
        assert_eq!(request_id_html("req-1"), "<span class=\"mono request-id\">req-1</span>");
        assert_eq!(request_id_html("a\nb<"), "<span class=\"mono request-id\">a\\u000ab&lt;</span>");
        let long = "x".repeat(200);
        assert_eq!(request_id_html(&long), format!("<span class=\"mono request-id\">{}...</span>", "x".repeat(128)));
        assert_eq!(
            request_id_html(&"x".repeat(128)),
            format!("<span class=\"mono request-id\">{}</span>", "x".repeat(128))
        );
    }
}
