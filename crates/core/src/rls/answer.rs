//! The rate limit service's answer, read: a decision, an outage or an unusable answer
//! (`pipeline::rls` turns it into forward or refuse).
//!
//! Three kinds of outcome, kept apart because only one of them may ever forward an uncounted call:
//! - a decision (`OK` or `OVER_LIMIT`);
//! - an outage ([`Answer::Unavailable`]): the service could not be reached or did not answer in
//!   time. `failure_mode` decides: `deny` refuses `limiter_unavailable`, `allow` forwards;
//! - an unusable answer ([`Answer::Unusable`]): the service was reached but did not take the
//!   request (it rejected it, or answered something that is no decision), or the request could not
//!   be built. Refused `limiter_unavailable` whatever `failure_mode` says: what a client can
//!   provoke by the shape of its request must never become a way around the quota.

use super::proto;

/// The gRPC statuses that mean an outage, the only ones `failure_mode` decides on:
/// - 14 UNAVAILABLE: Envoy's own callout timeout, a cluster with no healthy endpoint, a connection
///   refused or reset before an answer (Envoy answers these itself, HTTP 503/504, which gRPC reads
///   as 14), and mcp-ratelimit when its store is down or slower than `--redis-timeout`;
/// - 4 DEADLINE_EXCEEDED: a service that gave up within the caller's `grpc-timeout` (mcp-ratelimit
///   does, so that its answer arrives before the filter's timeout).
///
/// Every other status means the service took the request and would not or could not decide it:
/// 3 INVALID_ARGUMENT (a request it rejects: a client could shape one at will), 8
/// RESOURCE_EXHAUSTED and 11 OUT_OF_RANGE (a request too large), 12 UNIMPLEMENTED (no rate limit
/// service behind the cluster), 13 INTERNAL (a message it could not decode, or a stream reset after
/// its answer began), 7 PERMISSION_DENIED and 16 UNAUTHENTICATED (a service that will not serve
/// this caller), 1 CANCELLED, 2 UNKNOWN and the rest. None of them is a passing outage, and
/// forwarding on them would forward, uncounted, whatever provokes them.
pub const OUTAGE_STATUSES: [u32; 2] = [4, 14];

/// The service's answer, as far as it could be had.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    Decoded(proto::Response),
    /// An outage: why (`failure_mode` decides).
    Unavailable(String),
    /// The service did not take the request, or its answer is no decision: why (always refused).
    Unusable(String),
}

/// Read a gRPC callout's result: `grpc_status` (0 OK; Envoy reports its timeout and a cluster with
/// no healthy endpoint as 14 UNAVAILABLE) and the response message.
pub fn read_answer(grpc_status: u32, body: Option<&[u8]>) -> Answer {
    if grpc_status != 0 {
        let outage = OUTAGE_STATUSES.contains(&grpc_status);
        let what = if outage { "unavailable (or too slow)" } else { "did not take the request" };
        let why = format!("rate limit service {what}: gRPC status {grpc_status}");
        return if outage { Answer::Unavailable(why) } else { Answer::Unusable(why) };
    }
    match proto::Response::decode(body.unwrap_or_default()) {
        Ok(r) => Answer::Decoded(r),
        Err(e) => Answer::Unusable(format!("rate limit service answer unreadable: {}", e.0)),
    }
}
