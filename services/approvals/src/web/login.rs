//! `GET /login`, `POST /login` and `POST /logout`: the approvers' sign-in and the session cookie.

use std::time::Duration;

use std::net::SocketAddr;

use axum::extract::{ConnectInfo, Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Form};
use maud::html;
use serde::Deserialize;

use super::guard::{forbidden, origin_ok, redirect, safe_back, session, COOKIE};
use super::layout::page;
use crate::auth::ct_str_eq;
use crate::App;

#[derive(Deserialize)]
pub struct NextQuery {
    #[serde(default)]
    next: String,
}

/// The sign-in form; `next`: where to go after signing in (only `/` or an approval's page).
fn login_page(next: &str, error: Option<&str>, status: StatusCode) -> Response {
    let body = html! {
        header.top { h1 { "MCP approvals" } }
        @if let Some(e) = error { p.error #login-error { (e) } }
        form method="post" action="/login" class="login" {
            input type="hidden" name="next" value=(safe_back(next));
            label { "Name" br; input type="text" name="name" autocomplete="username" required autofocus; }
            label { "Token" br; input type="password" name="token" autocomplete="current-password" required; }
            button type="submit" { "Sign in" }
        }
    };
    page("Sign in · MCP approvals", body, None, status)
}

/// `GET /login`.
pub async fn login_form(State(app): State<App>, headers: HeaderMap, Query(q): Query<NextQuery>) -> Response {
    if session(&app, &headers, false).await.is_some() {
        return redirect(safe_back(&q.next));
    }
    login_page(&q.next, None, StatusCode::OK)
}

#[derive(Deserialize)]
pub struct LoginForm {
    #[serde(default)]
    name: String,
    #[serde(default)]
    token: String,
    #[serde(default)]
    next: String,
}

fn cookie(app: &App, value: &str, max_age: u64) -> String {
    let secure = if app.config.public_url.starts_with("https://") { "; Secure" } else { "" };
    format!("{COOKIE}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age}{secure}")
}

/// The peer address of a connection, as the server was started with it (`None` in tests that call
/// the router directly).
type Peer = Option<Extension<ConnectInfo<SocketAddr>>>;

/// `POST /login`. A failed login is logged with the peer's address only: never the name or the
/// token typed (an approver who pastes the token into Name would write it to the log), and not
/// whether the name was known (that would tell a guesser which names exist).
pub async fn login(State(app): State<App>, peer: Peer, headers: HeaderMap, Form(f): Form<LoginForm>) -> Response {
    if !origin_ok(&app, &headers) {
        return forbidden("cross-origin request refused");
    }
    let Some(name) = app.config.approvers.login(f.name.trim(), &f.token).map(str::to_string) else {
        let remote = peer.map_or_else(|| "unknown".to_owned(), |Extension(ConnectInfo(a))| a.to_string());
        tracing::warn!(%remote, reason = "name and token do not match a configured approver", "failed login");
        // Slows down guessing.
        tokio::time::sleep(Duration::from_millis(300)).await;
        return login_page(&f.next, Some("Wrong name or token."), StatusCode::UNAUTHORIZED);
    };
    let id = match app.session_create(&name).await {
        Ok(id) => id,
        Err(e) => return e.into_response(),
    };
    tracing::info!(approver = ?name, "login");
    let mut res = redirect(safe_back(&f.next));
    if let Ok(v) = HeaderValue::from_str(&cookie(&app, &id, crate::auth::SESSION_TTL.as_secs())) {
        res.headers_mut().insert(header::SET_COOKIE, v);
    }
    res
}

#[derive(Deserialize)]
pub struct CsrfForm {
    #[serde(default)]
    csrf: String,
}

/// `POST /logout`.
pub async fn logout(State(app): State<App>, headers: HeaderMap, Form(f): Form<CsrfForm>) -> Response {
    let Some((id, s)) = session(&app, &headers, false).await else {
        return redirect("/login");
    };
    if !origin_ok(&app, &headers) || !ct_str_eq(&f.csrf, &s.csrf) {
        return forbidden("bad or missing CSRF token");
    }
    if let Err(e) = app.session_remove(&id).await {
        return e.into_response();
    }
    let mut res = redirect("/login");
    if let Ok(v) = HeaderValue::from_str(&cookie(&app, "", 0)) {
        res.headers_mut().insert(header::SET_COOKIE, v);
    }
    res
}
