//! `GET /`: the pending approvals and the recent decisions; `GET /ui/version`, which the page polls.

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use maud::{html, Markup};

use super::arguments::visible;
use super::card::{card, View, LIST_ARGUMENTS_MAX};
use super::guard::{redirect, session};
use super::layout::{flash, page, rfc3339, top};
use crate::auth::Session;
use crate::store::{Approval, Listed, PendingPage};
use crate::{App, Error};

/// The last decisions: when, state, tool, grant, approver, note and a link.
fn recent_table(list: &[Approval]) -> Markup {
    if list.is_empty() {
        return html! { p.muted { "No decisions yet." } };
    }
    html! {
        table #recent {
            thead { tr { th { "when" } th { "state" } th { "tool" } th { "cluster" } th { "grant" } th { "approver" } th { "note" } th { "approval" } } }
            tbody {
                @for a in list {
                    @let when = rfc3339(a.consumed_at.or(a.decided_at).unwrap_or(a.expires_at));
                    @let state = a.state.as_str();
                    tr.decision data-approval-id=(a.id) {
                        td { time datetime=(when) { (when) } }
                        td class={ "state state-" (state) } { (state) }
                        td.tool { (visible(&a.tool).0) }
                        td.mono.cluster { (if a.has_upstream() { visible(&a.upstream.cluster).0 } else { "—".to_owned() }) }
                        td.mono { (a.grant) }
                        td.approver { (a.approver.as_deref().unwrap_or("—")) }
                        td.note { (a.note) }
                        td { a.mono href={ "/approvals/" (a.id) } { (a.id) } }
                    }
                }
            }
        }
    }
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
    page(&title, body, Some(version), StatusCode::OK)
}

/// A grant label for the page: at most 64 characters, in printable ASCII.
fn grant_shown(g: &str) -> String {
    let mut cut: String = g.chars().take(64).collect();
    let truncated = cut.len() < g.len();
    cut = visible(&cut).0;
    if truncated {
        cut.push_str("...");
    }
    cut
}

/// The body of `GET /`.
fn index_body(s: &Session, pending: &PendingPage, recent: &[Approval], now: i64) -> Markup {
    let total = pending.total;
    let more = pending.grants_total - i64::try_from(pending.grants.len()).unwrap_or(0);
    html! {
        (top(s))
        (flash(s))
        h2 { "Pending " span.muted #pending-count { "(" (total) ")" } }
        @if pending.grants_total > 1 {
            // A flood by one or a few grants is visible at once.
            p.muted #pending-by-grant {
                "by grant (" (pending.grants_total) " grants): "
                @for (i, g) in pending.grants.iter().enumerate() {
                    @if i > 0 { " · " }
                    span.grant-count data-grant-id=(g.grant_id) { span.mono { (grant_shown(&g.grant)) } ": " (g.pending) }
                }
                @if more > 0 { " · " (more) " more grants" }
            }
        }
        @if usize::try_from(total).unwrap_or(usize::MAX) > pending.list.len() {
            p.muted #pending-shown { "showing the oldest " (pending.list.len()) " of " (total) }
        }
        section #pending {
            @if pending.list.is_empty() { p.empty.muted { "No pending approvals." } }
            @for Listed { approval, arguments_bytes } in &pending.list {
                (card(approval, *arguments_bytes, s, now, "/", View::List))
            }
        }
        h2 { "Recent decisions" }
        section #decisions { (recent_table(recent)) }
    }
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
