//! `GET /`: the pending approvals and the recent decisions; `GET /ui/version`, which the page polls.

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};

use super::arguments::visible;
use super::card::{card, View, LIST_ARGUMENTS_MAX};
use super::guard::{redirect, session};
use super::layout::{esc, flash, page, rfc3339, top};
use crate::auth::Session;
use crate::store::{Approval, Listed, PendingPage};
use crate::{App, Error};

fn recent_table(list: &[Approval]) -> String {
    if list.is_empty() {
        return "<p class=\"muted\">No decisions yet.</p>".to_string();
    }
    let mut h = String::from(
        "<table id=\"recent\"><thead><tr><th>when</th><th>state</th><th>tool</th><th>grant</th><th>approver</th>\
         <th>note</th><th>approval</th></tr></thead><tbody>",
    );
    for a in list {
        let when = a.consumed_at.or(a.decided_at).unwrap_or(a.expires_at);
        h.push_str(&format!(
            "<tr class=\"decision\" data-approval-id=\"{id}\"><td><time datetime=\"{w}\">{w}</time></td>\
             <td class=\"state state-{st}\">{st}</td><td class=\"tool\">{tool}</td><td class=\"mono\">{grant}</td>\
             <td class=\"approver\">{who}</td><td class=\"note\">{note}</td><td><a class=\"mono\" href=\"/approvals/{id}\">{id}</a></td></tr>",
            id = esc(&a.id),
            w = rfc3339(when),
            st = a.state.as_str(),
            tool = esc(&visible(&a.tool).0),
            grant = esc(&a.grant),
            who = esc(a.approver.as_deref().unwrap_or("—")),
            note = esc(&a.note),
        ));
    }
    h.push_str("</tbody></table>");
    h
}

/// Most pending cards on `/` (the oldest).
pub const PENDING_SHOWN: u32 = 200;

/// Most grants named with their count of pending approvals on `/`.
pub const GRANTS_SHOWN: u32 = 10;

/// `GET /`: the oldest 200 pending approvals (oldest first: new ones join at the bottom, so cards
/// never move under the pointer) and the last 50 decisions. The store gives at most the first
/// [`LIST_ARGUMENTS_MAX`] bytes of each card's arguments; the page is rendered after the store is
/// released, on a blocking thread.
pub async fn index(State(app): State<App>, headers: HeaderMap) -> Response {
    let Some((_, s)) = session(&app, &headers, true).await else {
        return redirect("/login");
    };
    let version = app.version();
    let lists = app
        .db(|st, now| {
            let (pending, changes) = st.pending(now, PENDING_SHOWN, LIST_ARGUMENTS_MAX, GRANTS_SHOWN)?;
            let recent = st.recent(50)?;
            Ok(((pending, recent, now), changes))
        })
        .await;
    let (pending, recent, now) = match lists {
        Ok(x) => x,
        Err(e) => return e.into_response(),
    };
    // An expiry just applied bumps the version: the page carries the new one.
    let version = version.max(app.version());
    let total = pending.total;
    let body = match tokio::task::spawn_blocking(move || index_body(&s, &pending, &recent, now)).await {
        Ok(body) => body,
        Err(e) => return Error::Internal(format!("render task: {e}")).into_response(),
    };
    let title = if total == 0 { "MCP approvals".to_string() } else { format!("({total}) MCP approvals") };
    page(&title, &body, Some(version), StatusCode::OK)
}

/// A grant label for the page: at most 64 characters, in printable ASCII, HTML-escaped.
fn grant_html(g: &str) -> String {
    let mut cut: String = g.chars().take(64).collect();
    let truncated = cut.len() < g.len();
    cut = visible(&cut).0;
    if truncated {
        cut.push_str("...");
    }
    esc(&cut)
}

/// The body of `GET /`.
fn index_body(s: &Session, pending: &PendingPage, recent: &[Approval], now: i64) -> String {
    let total = pending.total;
    let mut body = top(s);
    body.push_str(&flash(s));
    body.push_str(&format!("<h2>Pending <span class=\"muted\" id=\"pending-count\">({total})</span></h2>"));
    if pending.grants_total > 1 {
        // A flood by one or a few grants is visible at once.
        let counts: Vec<String> = pending
            .grants
            .iter()
            .map(|g| {
                format!(
                    "<span class=\"grant-count\" data-grant-id=\"{}\"><span class=\"mono\">{}</span>: {}</span>",
                    esc(&g.grant_id),
                    grant_html(&g.grant),
                    g.pending
                )
            })
            .collect();
        let more = pending.grants_total - i64::try_from(pending.grants.len()).unwrap_or(0);
        let more = if more > 0 { format!(" · {more} more grants") } else { String::new() };
        body.push_str(&format!(
            "<p class=\"muted\" id=\"pending-by-grant\">by grant ({} grants): {}{more}</p>",
            pending.grants_total,
            counts.join(" · ")
        ));
    }
    if usize::try_from(total).unwrap_or(usize::MAX) > pending.list.len() {
        body.push_str(&format!(
            "<p class=\"muted\" id=\"pending-shown\">showing the oldest {} of {total}</p>",
            pending.list.len()
        ));
    }
    body.push_str("<section id=\"pending\">");
    if pending.list.is_empty() {
        body.push_str("<p class=\"empty muted\">No pending approvals.</p>");
    }
    for Listed { approval, arguments_bytes } in &pending.list {
        body.push_str(&card(approval, *arguments_bytes, s, now, "/", View::List));
    }
    body.push_str("</section><h2>Recent decisions</h2><section id=\"decisions\">");
    body.push_str(&recent_table(recent));
    body.push_str("</section>");
    body
}

/// `GET /ui/version`: changes whenever an approval is opened, decided, consumed or expired.
pub async fn version(State(app): State<App>, headers: HeaderMap) -> Response {
    if session(&app, &headers, false).await.is_none() {
        return (StatusCode::UNAUTHORIZED, "login required").into_response();
    }
    // Lazy expiry here too, so pages notice approvals running out.
    if let Err(e) = app.db(|st, now| Ok(((), st.expire(now)?))).await {
        return e.into_response();
    }
    ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], app.version().to_string()).into_response()
}
