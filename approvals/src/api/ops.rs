//! `/healthz` and `/metrics`.

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::App;

/// `GET /healthz`.
pub async fn healthz(State(app): State<App>) -> Response {
    match app.db(|s, _| Ok((s.ping()?, crate::store::Changes::default()))).await {
        Ok(()) => (StatusCode::OK, "ok").into_response(),
        Err(e) => {
            tracing::error!(error = %e, "health check");
            (StatusCode::SERVICE_UNAVAILABLE, "database unavailable").into_response()
        }
    }
}

/// `GET /metrics`.
pub async fn metrics(State(app): State<App>) -> Response {
    match app.metrics_text().await {
        Ok(text) => ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], text).into_response(),
        Err(e) => e.into_response(),
    }
}
