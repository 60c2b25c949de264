//! What a handler can fail with, and the answer of each: one JSON shape, `{"error": MESSAGE}`.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::json;

use crate::store::StoreError;

/// A failure of the service itself: answered 500 "internal error", its cause logged.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("{0}")]
    Internal(String),
}

/// The refusals and failures of the HTTP handlers; the message is the JSON body's `error`.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// 400.
    #[error("{0}")]
    BadRequest(String),
    /// 401, with `WWW-Authenticate: Bearer` (the approvers' API).
    #[error("missing or wrong bearer token")]
    Unauthorized,
    /// 404: an unknown approval id, or one that is not an approval id at all.
    #[error("no such approval")]
    NotFound,
    /// 409: the approval is no longer pending.
    #[error("{0}")]
    Conflict(String),
    /// 413: a check's arguments over `--max-arguments-bytes`.
    #[error("{0}")]
    PayloadTooLarge(String),
    /// 415: a check that is not `application/json`.
    #[error("{0}")]
    UnsupportedMediaType(String),
    /// 429: a cap on pending approvals reached.
    #[error("{0}")]
    TooManyRequests(String),
    /// 500, the cause logged, never answered.
    #[error(transparent)]
    Internal(#[from] Error),
}

impl ApiError {
    pub fn status(&self) -> StatusCode {
        match self {
            ApiError::BadRequest(_) => StatusCode::BAD_REQUEST,
            ApiError::Unauthorized => StatusCode::UNAUTHORIZED,
            ApiError::NotFound => StatusCode::NOT_FOUND,
            ApiError::Conflict(_) => StatusCode::CONFLICT,
            ApiError::PayloadTooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
            ApiError::UnsupportedMediaType(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            ApiError::TooManyRequests(_) => StatusCode::TOO_MANY_REQUESTS,
            ApiError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        ApiError::Internal(e.into())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status();
        let message = match &self {
            ApiError::Internal(e) => {
                tracing::error!(error = %e, "internal error");
                "internal error".to_string()
            }
            other => other.to_string(),
        };
        let mut res = (status, Json(json!({ "error": message }))).into_response();
        if let ApiError::Unauthorized = self {
            res.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        res
    }
}

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        ApiError::Internal(self).into_response()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn answer(e: ApiError) -> (StatusCode, Option<String>, String) {
        let res = e.into_response();
        let auth = res.headers().get(header::WWW_AUTHENTICATE).map(|v| v.to_str().unwrap_or("?").to_string());
        let status = res.status();
        let body = axum::body::to_bytes(res.into_body(), 1 << 16).await.unwrap_or_default();
        (status, auth, String::from_utf8_lossy(&body).into_owned())
    }

    #[tokio::test]
    async fn every_error_is_its_status_and_one_json_shape() {
        assert_eq!(
            answer(ApiError::Unauthorized).await,
            (StatusCode::UNAUTHORIZED, Some("Bearer".into()), r#"{"error":"missing or wrong bearer token"}"#.into())
        );
        assert_eq!(
            answer(ApiError::NotFound).await,
            (StatusCode::NOT_FOUND, None, r#"{"error":"no such approval"}"#.into())
        );
        assert_eq!(
            answer(ApiError::Conflict("approval apr_1 is denied, not pending".into())).await,
            (StatusCode::CONFLICT, None, r#"{"error":"approval apr_1 is denied, not pending"}"#.into())
        );
        assert_eq!(
            answer(Error::Internal("disk on fire".into()).into()).await,
            (StatusCode::INTERNAL_SERVER_ERROR, None, r#"{"error":"internal error"}"#.into())
        );
    }
}
