//! gRPC over a plain HTTP/2 stream: the `ShouldRateLimit` call made as an HTTP request, for a host
//! that has HTTP streams but no gRPC client (the native build: Envoy 1.40's dynamic-module ABI).
//! The request is the one Envoy's own gRPC client sends (`Grpc::Common::prepareHeaders`: `POST`,
//! `:path /SERVICE/METHOD`, `:authority`, `te: trailers`, `grpc-timeout`, `content-type:
//! application/grpc`, the message behind the 5-byte length prefix), and the answer is read event by
//! event the way Envoy's gRPC client reads it ([`AnswerReader`]: headers, messages, trailers,
//! reset), then handed to [`super::read_answer`], so both hosts reach the same [`super::Answer`] for the
//! same service behaviour. Envoy's own timeout and connection failures are local replies (HTTP
//! 504, 503) that read as 14 UNAVAILABLE, the outage status, as in the wasm build.

mod read;

pub use read::AnswerReader;

use super::{METHOD, SERVICE};
use crate::policy::RateLimitService;

/// Largest answer read, in bytes (the length-prefixed message); a longer one is unusable, with
/// [`ANSWER_TOO_LARGE`].
pub const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// Why an answer over [`MAX_ANSWER_BYTES`] is unusable: a literal, not formatted at run time, which
/// costs the wasm module bytes (`tests` keeps the two in step).
pub const ANSWER_TOO_LARGE: &str = "rate limit service answer exceeds 65536 bytes";

/// `:path` of the call.
pub fn path() -> String {
    format!("/{SERVICE}/{METHOD}")
}

/// `grpc-timeout` for `timeout_ms` as Envoy's gRPC client writes it (`Common::toGrpcTimeout`): at
/// most 8 digits, in milliseconds while they fit (every `timeout` the policy allows does).
pub fn grpc_timeout(timeout_ms: u64) -> String {
    if timeout_ms <= 99_999_999 {
        format!("{timeout_ms}m")
    } else {
        format!("{}S", (timeout_ms / 1000).min(99_999_999))
    }
}

/// The request headers, in the order Envoy's gRPC client writes them. `:authority` is the
/// configured `authority`, else the cluster name (as Envoy's gRPC client sends by default).
pub fn request_headers(svc: &RateLimitService) -> Vec<(&'static str, String)> {
    vec![
        (":method", "POST".to_owned()),
        (":path", path()),
        (":authority", svc.authority.clone().unwrap_or_else(|| svc.cluster.clone())),
        ("te", "trailers".to_owned()),
        ("grpc-timeout", grpc_timeout(svc.timeout_ms)),
        ("content-type", "application/grpc".to_owned()),
    ]
}

/// `message` behind the gRPC frame header: flag 0 (uncompressed), then its length, 4 bytes big-endian.
pub fn frame(message: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(message.len() + 5);
    out.push(0);
    out.extend_from_slice(&u32::try_from(message.len()).unwrap_or(u32::MAX).to_be_bytes());
    out.extend_from_slice(message);
    out
}

/// The gRPC status of a non-200 HTTP answer without `grpc-status` (gRPC's
/// http-grpc-status-mapping.md, as Envoy's `Grpc::Utility::httpToGrpcStatus`).
pub fn http_to_grpc_status(http: u16) -> u32 {
    match http {
        400 => 13,
        401 => 16,
        403 => 7,
        404 => 12,
        429 | 502 | 503 | 504 => 14,
        _ => 2,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn answer_too_large_names_the_limit() {
        assert_eq!(
            super::ANSWER_TOO_LARGE,
            format!("rate limit service answer exceeds {} bytes", super::MAX_ANSWER_BYTES)
        );
    }
}
