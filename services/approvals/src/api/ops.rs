//! `/healthz` and `/metrics`.

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::App;

/// `GET /healthz`: 503 once the service is stopping (SIGTERM), so Envoy takes it out of the pool
/// while calls in flight finish.
pub async fn healthz(State(app): State<App>) -> Response {
    if app.shutdown().is_stopping() {
        return (StatusCode::SERVICE_UNAVAILABLE, "shutting down").into_response();
    }
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
        Ok(text) => ([(header::CONTENT_TYPE, mcp_service_kit::prom::CONTENT_TYPE)], text).into_response(),
        Err(e) => e.into_response(),
    }
}
