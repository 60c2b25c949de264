//! `POST /approvals/{id}/decision`: the Approve and Deny buttons.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Form;
use serde::Deserialize;

use super::arguments::visible;
use super::guard::{forbidden, origin_ok, redirect, safe_back, session};
use crate::api::{self, MAX_NOTE};
use crate::auth::{ct_str_eq, is_approval_id};
use crate::store::Decided;
use crate::App;

#[derive(Deserialize)]
pub struct DecisionForm {
    #[serde(default)]
    decision: String,
    #[serde(default)]
    note: String,
    #[serde(default)]
    csrf: String,
    #[serde(default)]
    back: String,
}

/// `POST /approvals/{id}/decision`.
pub async fn decision(
    State(app): State<App>,
    headers: HeaderMap,
    Path(id): Path<String>,
    Form(f): Form<DecisionForm>,
) -> Response {
    let Some((sid, s)) = session(&app, &headers, false).await else {
        return redirect("/login");
    };
    if !origin_ok(&app, &headers) {
        return forbidden("cross-origin request refused");
    }
    if !ct_str_eq(&f.csrf, &s.csrf) {
        return forbidden("bad or missing CSRF token");
    }
    let approve = match f.decision.as_str() {
        "approve" => true,
        "deny" => false,
        _ => return (StatusCode::BAD_REQUEST, "decision must be approve or deny").into_response(),
    };
    let note = f.note.trim().to_string();
    if note.len() > MAX_NOTE {
        return (StatusCode::BAD_REQUEST, "note too long").into_response();
    }
    if note.contains('\0') {
        return (StatusCode::BAD_REQUEST, "note must not contain U+0000").into_response();
    }
    let back = safe_back(&f.back).to_string();
    if !is_approval_id(&id) {
        return (StatusCode::NOT_FOUND, "no such approval").into_response();
    }
    let msg = match api::decide(&app, id.clone(), approve, s.approver.clone(), note).await {
        Ok(Decided::Ok(a)) => {
            format!(
                "{} {} ({}, grant {}).",
                if approve { "Approved" } else { "Denied" },
                visible(&a.tool).0,
                a.id,
                a.grant
            )
        }
        Ok(Decided::NotPending(a)) => format!(
            "Could not {} {}: it is already {}{}.",
            if approve { "approve" } else { "deny" },
            a.id,
            a.state.as_str(),
            a.approver.as_deref().map(|w| format!(" (by {w})")).unwrap_or_default()
        ),
        Ok(Decided::NotFound) => return (StatusCode::NOT_FOUND, "no such approval").into_response(),
        Err(e) => return e.into_response(),
    };
    app.session_set_flash(&sid, msg).await;
    redirect(&back)
}
