//! The upstream of the rate limit callout: `gateway.rate_limit_service.cluster` alone, or, with an
//! `authority`, both in a serialized `envoy.config.core.v3.GrpcService`. Envoy's wasm host takes
//! either as `dispatch_grpc_call`'s upstream (`Context::grpcCall` parses a `GrpcService` first,
//! else looks the text up as a cluster name). The authority matters where the cluster name is no
//! valid `:authority` (Istio's `outbound|PORT||HOST`): Envoy's gRPC client sends the cluster name by
//! default, and HTTP/2 servers reset a stream whose `:authority` holds `|`.

use super::proto;
use crate::policy::RateLimitService;

/// Longest cluster name plus authority, in bytes: the serialized `GrpcService` then has only
/// one-byte lengths, so it is ASCII, as the SDK's `dispatch_grpc_call` (a `&str`) needs.
pub const MAX_CLUSTER_AND_AUTHORITY: usize = 123;

/// Whether `s` can be an HTTP `:authority` (RFC 3986 `host [":" port]`: reg-name, IP literal or
/// IPv4 address characters), 1 to 256 bytes.
pub fn is_authority(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 256
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~!$&'()*+,;=:%[]".contains(&b))
}

/// `authority` for `cluster`, or why not (the message of `gateway.rate_limit_service.authority`).
pub fn check_authority(cluster: &str, authority: &str) -> Result<(), String> {
    if !is_authority(authority) {
        return Err("must be a host or host:port of 1 to 256 characters (letters, digits, -._~!$&'()*+,;=:%[])".into());
    }
    let len = cluster.len() + authority.len();
    if len > MAX_CLUSTER_AND_AUTHORITY {
        return Err(format!(
            "cluster and authority together must be at most {MAX_CLUSTER_AND_AUTHORITY} bytes (they are {len}): \
             proxy-wasm hands them to Envoy as one text, a serialized GrpcService"
        ));
    }
    Ok(())
}

impl RateLimitService {
    /// What the filter passes to `dispatch_grpc_call` as the upstream: the cluster name, or, with
    /// an `authority`, the serialized `GrpcService{envoy_grpc{cluster_name, authority}}`.
    pub fn upstream(&self) -> Vec<u8> {
        match &self.authority {
            Some(a) => proto::grpc_service(&self.cluster, a),
            None => self.cluster.clone().into_bytes(),
        }
    }
}
