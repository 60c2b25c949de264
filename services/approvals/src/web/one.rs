//! `GET /approvals/{id}`: one approval's page, the `approval_url` the agent is given.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use maud::html;

use super::arguments::visible;
use super::card::{card, View};
use super::guard::{redirect, session};
use super::layout::{flash, page, top};
use crate::auth::is_approval_id;
use crate::App;

/// `GET /approvals/{id}`: one approval (the `approval_url`).
pub async fn one(State(app): State<App>, headers: HeaderMap, Path(id): Path<String>) -> Response {
    let Some((_, s)) = session(&app, &headers, true).await else {
        let next = if is_approval_id(&id) { format!("/login?next=/approvals/{id}") } else { "/login".into() };
        return redirect(&next);
    };
    let version = app.version();
    let found = if is_approval_id(&id) {
        match app.db(move |st, now| st.get(&id, now).map(|(a, c)| ((a, now), c))).await {
            Ok(x) => x,
            Err(e) => return e.into_response(),
        }
    } else {
        (None, 0)
    };
    match found {
        (Some(a), now) => {
            let back = format!("/approvals/{}", a.id);
            let body = html! {
                (top(&s))
                (flash(&s))
                (card(&a, a.arguments.len(), &s, now, &back, View::Detail))
                p { a href="/" { "All pending approvals" } }
            };
            page(
                &format!("{} · MCP approvals", visible(&a.tool).0),
                body,
                Some(version.max(app.version())),
                StatusCode::OK,
            )
        }
        (None, _) => {
            let body = html! {
                (top(&s))
                (flash(&s))
                p.error { "No such approval." }
                p { a href="/" { "All pending approvals" } }
            };
            page("Not found · MCP approvals", body, None, StatusCode::NOT_FOUND)
        }
    }
}
