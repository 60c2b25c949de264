//! gRPC over a plain HTTP/2 callout: the `ShouldRateLimit` call made as an HTTP request, for a host
//! that has HTTP callouts but no gRPC client (the native build: Envoy 1.40's dynamic-module ABI).
//! The request is the one Envoy's own gRPC client sends (`Grpc::Common::prepareHeaders`: `POST`,
//! `:path /SERVICE/METHOD`, `:authority`, `te: trailers`, `grpc-timeout`, `content-type:
//! application/grpc`, the message behind the 5-byte length prefix), and the answer is read the way
//! Envoy's gRPC client reads it (`Grpc::AsyncStreamImpl`), then handed to [`super::read_answer`],
//! so both hosts reach the same [`Answer`] for the same service behaviour:
//! - an HTTP status other than 200: its `grpc-status` header if the answer carries one, else the
//!   HTTP status mapped as gRPC does (503/504/502/429 → 14 UNAVAILABLE, 404 → 12, 401 → 16, 403 → 7,
//!   400 → 13, anything else → 2 UNKNOWN). Envoy's own timeout and connection failures are local
//!   replies of this kind, so they read as 14, the outage status, as in the wasm build;
//! - a `grpc-status` header (a trailers-only answer, which is how services and Envoy's local
//!   replies to a gRPC request report an error): that status; `0` with no message is no answer;
//! - otherwise the body must be exactly one uncompressed length-prefixed message.
//!
//! The one difference, and it only ever refuses: the ABI's callout answer carries the response
//! headers and body but not its trailers. A status sent in trailers after headers (not
//! trailers-only) cannot be read, so an answer with no message is unusable (refused whatever
//! `failure_mode` says) rather than an outage, and a message followed by a non-OK trailer status
//! (which no rate limit service sends for a unary call) is read as the message. Anything that is
//! not exactly one message (none, a truncated frame, a compressed frame, bytes after the frame) is
//! unusable.

use super::{read_answer, Answer, METHOD, SERVICE};
use crate::policy::RateLimitService;

/// Largest answer read, in bytes (the length-prefixed message); a longer one is unusable.
pub const MAX_ANSWER_BYTES: usize = 64 * 1024;

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

/// What the HTTP callout gave back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Received<'a> {
    /// An answer: its `:status`, its `grpc-status` header if any, and its body.
    Answer { status: Option<&'a [u8]>, grpc_status: Option<&'a [u8]>, body: &'a [u8] },
    /// The stream was reset before the answer ended (Envoy's gRPC client: 13 INTERNAL).
    Reset,
    /// The answer was larger than the callout takes.
    TooLarge,
}

/// The service's answer, read from what the HTTP callout gave back.
pub fn read_http_answer(received: Received<'_>) -> Answer {
    let (status, grpc_status, body) = match received {
        Received::Answer { status, grpc_status, body } => (status, grpc_status, body),
        Received::Reset => return read_answer(13, None),
        Received::TooLarge => {
            return Answer::Unusable(format!("rate limit service answer exceeds {MAX_ANSWER_BYTES} bytes"));
        }
    };
    let Some(status) = status.and_then(|s| std::str::from_utf8(s).ok()?.parse::<u16>().ok()) else {
        return Answer::Unusable("rate limit service answer has no HTTP status".into());
    };
    // A `grpc-status` that is no number is UNKNOWN, as Envoy's `Common::getGrpcStatus` reads it.
    let grpc = grpc_status.map(|g| std::str::from_utf8(g).ok().and_then(|g| g.parse::<u32>().ok()).unwrap_or(2));
    if status != 200 {
        return read_answer(grpc.filter(|_| body.is_empty()).unwrap_or_else(|| http_to_grpc_status(status)), None);
    }
    match grpc {
        Some(g) if g != 0 => return read_answer(g, None),
        Some(_) if body.is_empty() => return read_answer(13, None),
        _ => {}
    }
    match unframe(body) {
        Ok(message) => read_answer(0, Some(message)),
        Err(why) => Answer::Unusable(format!("rate limit service answer unreadable: {why}")),
    }
}

/// The one message of a gRPC response body, or why there is not exactly one.
pub fn unframe(body: &[u8]) -> Result<&[u8], &'static str> {
    if body.is_empty() {
        return Err("no message (a status sent in trailers cannot be read here)");
    }
    let Some((head, rest)) = body.split_first_chunk::<5>() else {
        return Err("truncated gRPC frame header");
    };
    if head[0] != 0 {
        return Err("compressed or unknown gRPC frame flag");
    }
    let len = u32::from_be_bytes([head[1], head[2], head[3], head[4]]);
    let len = usize::try_from(len).unwrap_or(usize::MAX);
    if len > MAX_ANSWER_BYTES {
        return Err("gRPC message too large");
    }
    match rest.len().cmp(&len) {
        std::cmp::Ordering::Less => Err("truncated gRPC message"),
        std::cmp::Ordering::Greater => Err("bytes after the gRPC message"),
        std::cmp::Ordering::Equal => Ok(rest),
    }
}
