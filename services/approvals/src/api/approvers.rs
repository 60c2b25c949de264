//! The approvers' JSON API (bearer token): list, read, approve and deny approvals; and the
//! decision itself, shared with the web form.

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;

use super::MAX_NOTE;
use crate::auth::is_approval_id;
use crate::store::{Approval, Decided, State as St};
use crate::{ApiError, App, Error};

/// The APPROVAL object of API.md (`arguments` verbatim).
#[derive(Serialize)]
pub struct ApprovalJson<'a> {
    id: &'a str,
    key: &'a str,
    state: &'static str,
    grant: &'a str,
    tool: &'a str,
    /// The MCP server the call goes to; `null` for an approval stored before upstreams were bound.
    upstream: Option<UpstreamJson<'a>>,
    arguments: Box<RawValue>,
    request_id: &'a str,
    reason: &'a str,
    created_at: i64,
    expires_at: i64,
    decided_at: Option<i64>,
    approver: Option<&'a str>,
    note: &'a str,
    consumed_at: Option<i64>,
    approval_url: String,
    /// A continuation leg (MCP 2026-07-28 `input_required`): `true`, with its answers and state.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    continuation: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    input_responses: Option<Box<RawValue>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    request_state: Option<&'a str>,
    /// Who called, from the verified token, and the attached policy: `null` (and `act` `[]`)
    /// without identity or a policy set.
    policy: Option<&'a str>,
    subject: Option<&'a str>,
    client_id: Option<&'a str>,
    act: &'a [String],
}

/// An approval's `upstream`: `{"cluster", "authority", "path"}`.
#[derive(Serialize)]
pub struct UpstreamJson<'a> {
    cluster: &'a str,
    authority: &'a str,
    path: &'a str,
}

pub fn approval_json<'a>(app: &App, a: &'a Approval) -> ApprovalJson<'a> {
    // Stored from a validated RawValue; `null` should it ever not parse.
    let arguments = RawValue::from_string(a.arguments.clone()).unwrap_or_default();
    ApprovalJson {
        id: &a.id,
        key: &a.key,
        state: a.state.as_str(),
        grant: &a.grant,
        tool: &a.tool,
        upstream: a.has_upstream().then_some(UpstreamJson {
            cluster: &a.upstream.cluster,
            authority: &a.upstream.authority,
            path: &a.upstream.path,
        }),
        arguments,
        request_id: &a.request_id,
        reason: &a.reason,
        created_at: a.created_at,
        expires_at: a.expires_at,
        decided_at: a.decided_at,
        approver: a.approver.as_deref(),
        note: &a.note,
        consumed_at: a.consumed_at,
        approval_url: app.approval_url(&a.id),
        continuation: a.is_continuation(),
        input_responses: (!a.input_responses.is_empty())
            .then(|| RawValue::from_string(a.input_responses.clone()).unwrap_or_default()),
        request_state: a.request_state.as_deref(),
        policy: a.caller.as_ref().and_then(|c| c.policy.as_deref()),
        subject: a.caller.as_ref().and_then(|c| c.subject.as_deref()),
        client_id: a.caller.as_ref().and_then(|c| c.client_id.as_deref()),
        act: a.caller.as_ref().map_or(&[][..], |c| c.act.as_slice()),
    }
}

#[derive(Serialize)]
struct ApprovalList<'a> {
    approvals: Vec<ApprovalJson<'a>>,
}

/// The approver of a bearer token, or the 401 answer.
fn bearer(app: &App, headers: &HeaderMap) -> Result<String, ApiError> {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split_once(' '))
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, t)| t.trim());
    token.and_then(|t| app.config.approvers.by_token(t)).map(str::to_string).ok_or(ApiError::Unauthorized)
}

#[derive(Deserialize)]
pub struct ListQuery {
    state: Option<String>,
}

/// `GET /v1/approvals?state=...` (default pending), newest first.
pub async fn list(
    State(app): State<App>,
    headers: HeaderMap,
    Query(q): Query<ListQuery>,
) -> Result<Response, ApiError> {
    bearer(&app, &headers)?;
    let state = match q.state.as_deref().unwrap_or("pending") {
        "all" => None,
        s => Some(St::parse(s).ok_or_else(|| {
            ApiError::BadRequest("state: one of pending, approved, denied, consumed, expired, all".into())
        })?),
    };
    let list = app.db(move |s, now| s.list(state, 1000, now)).await?;
    let approvals = list.iter().map(|a| approval_json(&app, a)).collect();
    Ok(Json(ApprovalList { approvals }).into_response())
}

/// `GET /v1/approvals/{id}`.
pub async fn get_one(State(app): State<App>, headers: HeaderMap, Path(id): Path<String>) -> Result<Response, ApiError> {
    bearer(&app, &headers)?;
    if !is_approval_id(&id) {
        return Err(ApiError::NotFound);
    }
    let a = app.db(move |s, now| s.get(&id, now)).await?.ok_or(ApiError::NotFound)?;
    Ok(Json(approval_json(&app, &a)).into_response())
}

/// Approves or denies for an approver; shared by the API and the web form.
pub async fn decide(app: &App, id: String, approve: bool, approver: String, note: String) -> Result<Decided, Error> {
    let who = approver.clone();
    let decided = app.db(move |s, now| s.decide(&id, approve, &who, &note, now)).await?;
    if let Decided::Ok(a) = &decided {
        // Debug-formatted (quoted, escaped): the tool is request-derived. The note is what the
        // approver typed: kept in the database and the API, never in the log (only whether one
        // was given).
        tracing::info!(
            approval = %a.id, tool = ?a.tool, grant = ?a.grant, cluster = ?a.upstream.cluster,
            state = a.state.as_str(), approver = ?approver, note_given = !a.note.is_empty(), "approval decided"
        );
    }
    Ok(decided)
}

fn parse_note(body: &[u8]) -> Result<String, String> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(String::new());
    }
    let v: Value = serde_json::from_slice(body).map_err(|e| format!("body is not JSON: {e}"))?;
    let Value::Object(obj) = v else {
        return Err("body must be a JSON object".into());
    };
    match obj.get("note") {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(s)) if s.contains('\0') => Err("note: must not contain U+0000".into()),
        Some(Value::String(s)) if s.len() <= MAX_NOTE => Ok(s.clone()),
        Some(Value::String(_)) => Err(format!("note: longer than {MAX_NOTE} bytes")),
        Some(_) => Err("note: must be a string".into()),
    }
}

async fn decide_api(
    app: App,
    headers: HeaderMap,
    id: String,
    body: Bytes,
    approve: bool,
) -> Result<Response, ApiError> {
    let approver = bearer(&app, &headers)?;
    let note = parse_note(&body).map_err(ApiError::BadRequest)?;
    if !is_approval_id(&id) {
        return Err(ApiError::NotFound);
    }
    match decide(&app, id, approve, approver, note).await? {
        Decided::Ok(a) => Ok(Json(approval_json(&app, &a)).into_response()),
        Decided::NotFound => Err(ApiError::NotFound),
        Decided::NotPending(a) => {
            Err(ApiError::Conflict(format!("approval {} is {}, not pending", a.id, a.state.as_str())))
        }
    }
}

/// `POST /v1/approvals/{id}/approve`.
pub async fn approve(
    State(app): State<App>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    decide_api(app, headers, id, body, true).await
}

/// `POST /v1/approvals/{id}/deny`.
pub async fn deny(
    State(app): State<App>,
    headers: HeaderMap,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<Response, ApiError> {
    decide_api(app, headers, id, body, false).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes() {
        assert_eq!(parse_note(b"").unwrap(), "");
        assert_eq!(parse_note(b"{}").unwrap(), "");
        assert_eq!(parse_note(br#"{"note":"ok"}"#).unwrap(), "ok");
        assert_eq!(parse_note(br#"{"note":1}"#).unwrap_err(), "note: must be a string");
    }
}
