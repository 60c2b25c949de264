//! The HTTP routes (API.md) and what every answer carries.

use axum::extract::DefaultBodyLimit;
use axum::http::{header, HeaderValue};
use axum::routing::{get, post};
use axum::Router;

use crate::{api, web, App};

/// Largest request body accepted (`/v1/check`, forms, API).
pub const MAX_BODY: usize = 1 << 20;

/// Security headers on every response.
async fn security_headers(mut res: axum::response::Response) -> axum::response::Response {
    let h = res.headers_mut();
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    // Not no-referrer: with it browsers send `Origin: null` on same-origin form posts, which the
    // Origin check refuses.
    h.insert(header::REFERRER_POLICY, HeaderValue::from_static("same-origin"));
    h.entry(header::CACHE_CONTROL).or_insert(HeaderValue::from_static("no-store"));
    res
}

/// All HTTP routes (API.md) on one listener: the pages, the approvers' API, `/metrics`,
/// `/healthz` and `/v1/check` (no `--check-listen`).
pub fn router(app: App) -> Router {
    finish(page_routes().route("/v1/check", post(api::check)), app)
}

/// The routes of `--listen` when `/v1/check` has a listener of its own: everything but `/v1/check`.
pub fn page_router(app: App) -> Router {
    finish(page_routes(), app)
}

/// The routes of `--check-listen`: `/v1/check` and `/healthz` (for Envoy's health checks).
pub fn check_router(app: App) -> Router {
    finish(Router::new().route("/v1/check", post(api::check)).route("/healthz", get(api::healthz)), app)
}

fn finish(routes: Router<App>, app: App) -> Router {
    routes
        .layer(axum::middleware::map_response(security_headers))
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(app)
}

fn page_routes() -> Router<App> {
    Router::new()
        .route("/v1/approvals", get(api::list))
        .route("/v1/approvals/{id}", get(api::get_one))
        .route("/v1/approvals/{id}/approve", post(api::approve))
        .route("/v1/approvals/{id}/deny", post(api::deny))
        .route("/healthz", get(api::healthz))
        .route("/metrics", get(api::metrics))
        .route("/", get(web::index))
        .route("/login", get(web::login_form).post(web::login))
        .route("/logout", post(web::logout))
        .route("/approvals/{id}", get(web::one))
        .route("/approvals/{id}/decision", post(web::decision))
        .route("/ui/version", get(web::version))
        .route("/favicon.ico", get(|| async { axum::http::StatusCode::NO_CONTENT }))
}
