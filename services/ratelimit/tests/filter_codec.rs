//! The filter's hand-written RLS codec (mcp_policy_core::rls::proto) against envoy-types' prost
//! messages: what the filter encodes, prost decodes identically; what prost encodes, the filter
//! reads identically.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::{Entry, RateLimitOverride};
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{DescriptorStatus, RateLimit};
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::google::protobuf::{Duration, UInt64Value};
use mcp_policy_core::rls::proto;
use prost::Message;

fn requests() -> Vec<proto::Request> {
    let mut out = vec![proto::Request { domain: String::new(), descriptors: vec![], hits_addend: 0 }];
    for (i, max) in [0u32, 1, 10, 127, 128, 300, 65_536, u32::MAX].into_iter().enumerate() {
        let descriptors = (0..=i % 4)
            .map(|j| proto::Descriptor {
                entries: vec![
                    ("mcp_counter".into(), format!("c{i}{j}é\u{1F600}")),
                    ("mcp_grant".into(), "ab".repeat(32)),
                    ("k".into(), String::new()),
                ]
                .into_iter()
                .take(1 + (i + j) % 3)
                .collect(),
                limit: (j % 2 == 0).then_some((max, (j % 5) as i32)),
                hits_addend: match j % 3 {
                    0 => Some(u64::from(max) + 1),
                    1 => Some(0),
                    _ => None,
                },
            })
            .collect();
        out.push(proto::Request { domain: "x".repeat(i * 40), descriptors, hits_addend: max });
    }
    out
}

#[test]
fn requests_encoded_by_the_filter_decode_identically_with_prost() {
    for ours in requests() {
        let theirs = RateLimitRequest::decode(ours.encode().as_slice()).unwrap();
        assert_eq!(theirs.domain, ours.domain);
        assert_eq!(theirs.hits_addend, ours.hits_addend);
        assert_eq!(theirs.descriptors.len(), ours.descriptors.len());
        for (t, o) in theirs.descriptors.iter().zip(&ours.descriptors) {
            let entries: Vec<(String, String)> = t.entries.iter().map(|e| (e.key.clone(), e.value.clone())).collect();
            assert_eq!(entries, o.entries);
            assert_eq!(t.limit.map(|l| (l.requests_per_unit, l.unit)), o.limit);
            assert_eq!(t.hits_addend.as_ref().map(|h| h.value), o.hits_addend);
            assert!(!t.is_negative_hits);
        }
        // And prost's own encoding of the same message is byte-identical (canonical field order).
        let again = RateLimitRequest {
            domain: ours.domain.clone(),
            hits_addend: ours.hits_addend,
            descriptors: ours
                .descriptors
                .iter()
                .map(|d| RateLimitDescriptor {
                    entries: d.entries.iter().map(|(k, v)| Entry { key: k.clone(), value: v.clone() }).collect(),
                    limit: d.limit.map(|(r, u)| RateLimitOverride { requests_per_unit: r, unit: u }),
                    hits_addend: d.hits_addend.map(|value| UInt64Value { value }),
                    is_negative_hits: false,
                })
                .collect(),
        };
        assert_eq!(again.encode_to_vec(), ours.encode());
    }
}

#[test]
fn responses_encoded_by_prost_decode_identically_in_the_filter() {
    for n in 0..6u32 {
        let statuses: Vec<DescriptorStatus> = (0..n)
            .map(|i| DescriptorStatus {
                code: (i % 3) as i32,
                current_limit: (i % 2 == 0).then(|| RateLimit {
                    name: "n".into(),
                    requests_per_unit: i * 1000,
                    unit: 2,
                }),
                limit_remaining: i * 77_777,
                duration_until_reset: (i != 1)
                    .then(|| Duration { seconds: i64::from(i) * 3600, nanos: (i * 1_000_001) as i32 }),
                quota: None,
            })
            .collect();
        let theirs = RateLimitResponse {
            overall_code: (n % 3) as i32,
            statuses: statuses.clone(),
            raw_body: vec![1, 2, 3],
            ..Default::default()
        };
        let ours = proto::Response::decode(&theirs.encode_to_vec()).unwrap();
        assert_eq!(ours.overall_code, theirs.overall_code);
        let expect: Vec<proto::Status> = statuses
            .iter()
            .map(|s| proto::Status {
                code: s.code,
                limit_remaining: s.limit_remaining,
                until_reset_ms: s
                    .duration_until_reset
                    .map(|d| d.seconds as u64 * 1000 + (d.nanos as u64).div_ceil(1_000_000)),
            })
            .collect();
        assert_eq!(ours.statuses, expect);
    }
}

#[test]
fn the_services_own_answers_read_back() {
    use mcp_ratelimit::counters::Counter;
    use mcp_ratelimit::store::Applied;
    let counters = vec![Counter::count("a", 10, 11, 60_000), Counter::count("b", 5, 1, 3_600_000)];
    let applied = Applied { admitted: false, now_ms: 1_700_000_040_500, before: vec![0, 2] };
    let r = mcp_ratelimit::service::response(&counters, &applied);
    let ours = proto::Response::decode(&r.encode_to_vec()).unwrap();
    assert_eq!(ours.overall_code, proto::CODE_OVER_LIMIT);
    assert_eq!(
        ours.statuses,
        vec![
            proto::Status { code: proto::CODE_OVER_LIMIT, limit_remaining: 10, until_reset_ms: Some(59_500) },
            proto::Status { code: proto::CODE_OK, limit_remaining: 3, until_reset_ms: Some(2_759_500) },
        ]
    );
}

/// The upstream the filter hands `dispatch_grpc_call` when `gateway.rate_limit_service.authority`
/// is set: prost reads it as the `GrpcService` Envoy's wasm host parses (Context::grpcCall).
#[test]
fn grpc_service_upstream_decodes_as_envoy_reads_it() {
    use envoy_types::pb::envoy::config::core::v3::grpc_service::{EnvoyGrpc, TargetSpecifier};
    use envoy_types::pb::envoy::config::core::v3::GrpcService;
    for (cluster, authority) in [
        ("outbound|8081||mcp-ratelimit.mcp-system.svc.cluster.local", "mcp-ratelimit.mcp-system.svc.cluster.local"),
        (&*"c".repeat(256), &*"a".repeat(256)),
    ] {
        let g = GrpcService::decode(proto::grpc_service(cluster, authority).as_slice()).unwrap();
        let Some(TargetSpecifier::EnvoyGrpc(EnvoyGrpc { cluster_name, authority: got, .. })) = g.target_specifier
        else {
            panic!("not envoy_grpc: {g:?}")
        };
        assert_eq!((cluster_name.as_str(), got.as_str()), (cluster, authority));
        assert_eq!(g.timeout, None);
        assert!(g.initial_metadata.is_empty());
    }
}
