//! The rate limit call as an HTTP/2 request (the native build's transport, `rls::grpc`): the request
//! Envoy's gRPC client would send, and every answer read as Envoy's gRPC client reads it, so both
//! builds reach the same `Answer` (then the same reply, tested in `super`).

use mcp_policy_core::policy::RateLimitService;
use mcp_policy_core::rls::grpc::{self, Received, MAX_ANSWER_BYTES};
use mcp_policy_core::rls::{proto, Answer};
use mcp_policy_core::terms::FailureMode;

fn svc(authority: Option<&str>) -> RateLimitService {
    RateLimitService {
        cluster: "mcp_ratelimit".into(),
        authority: authority.map(str::to_owned),
        domain: "mcp".into(),
        timeout_ms: 250,
        failure_mode: FailureMode::Deny,
    }
}

/// `RateLimitResponse{overall_code: OK}`.
const OK_MESSAGE: [u8; 2] = [0x08, 0x01];

fn read(status: &str, grpc_status: Option<&str>, body: &[u8]) -> Answer {
    grpc::read_http_answer(Received::Answer {
        status: Some(status.as_bytes()),
        grpc_status: grpc_status.map(str::as_bytes),
        body,
    })
}

fn is_outage(a: &Answer) -> bool {
    matches!(a, Answer::Unavailable(_))
}

fn is_unusable(a: &Answer, why: &str) -> bool {
    matches!(a, Answer::Unusable(w) if w.contains(why))
}

#[test]
fn the_request_is_what_envoys_grpc_client_sends() {
    let headers = grpc::request_headers(&svc(None));
    let want = [
        (":method", "POST"),
        (":path", "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"),
        (":authority", "mcp_ratelimit"),
        ("te", "trailers"),
        ("grpc-timeout", "250m"),
        ("content-type", "application/grpc"),
    ];
    let got: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    assert_eq!(got, want);
    // With an authority it is the `:authority` (the cluster name may be none, e.g. Istio's).
    let headers = grpc::request_headers(&svc(Some("mcp-ratelimit.mcp-system.svc.cluster.local")));
    assert_eq!(headers[2], (":authority", "mcp-ratelimit.mcp-system.svc.cluster.local".to_owned()));
    assert_eq!(grpc::grpc_timeout(60_000), "60000m");
    assert_eq!(grpc::grpc_timeout(100_000_000), "100000S");
    // The 5-byte frame: uncompressed, big-endian length.
    assert_eq!(grpc::frame(&[7; 3]), [0, 0, 0, 0, 3, 7, 7, 7]);
    assert_eq!(grpc::frame(&[]), [0, 0, 0, 0, 0]);
    assert_eq!(grpc::frame(&[1; 300])[..5], [0, 0, 0, 1, 44]);
}

#[test]
fn one_complete_message_is_the_answer() {
    let ok = Answer::Decoded(proto::Response { overall_code: proto::CODE_OK, statuses: vec![] });
    assert_eq!(read("200", None, &grpc::frame(&OK_MESSAGE)), ok);
    // A `grpc-status: 0` header with the message (not trailers-only) changes nothing.
    assert_eq!(read("200", Some("0"), &grpc::frame(&OK_MESSAGE)), ok);
    // An empty message is a valid RateLimitResponse (overall_code UNKNOWN): the pipeline refuses it.
    assert_eq!(read("200", None, &grpc::frame(&[])), Answer::Decoded(proto::Response::default()));
}

#[test]
fn outages_are_what_envoy_reports_as_unavailable_or_deadline_exceeded() {
    // Envoy's local replies to a gRPC request: trailers-only, grpc-status 14 (its callout timeout,
    // no healthy endpoint, connection refused), or plain 503/504/502/429.
    assert!(is_outage(&read("200", Some("14"), b"")));
    assert!(is_outage(&read("200", Some("4"), b"")));
    for http in ["502", "503", "504", "429"] {
        assert!(is_outage(&read(http, None, b"upstream connect error")), "{http}");
    }
    // A non-200 with a trailers-only grpc-status: that status.
    assert!(is_outage(&read("503", Some("14"), b"")));
    assert!(is_unusable(&read("503", Some("3"), b""), "gRPC status 3"));
}

#[test]
fn every_other_answer_is_unusable_whatever_the_failure_mode() {
    // Statuses the service sends when it will not decide (INVALID_ARGUMENT, UNIMPLEMENTED, …).
    for (g, n) in [("3", "3"), ("12", "12"), ("13", "13"), ("7", "7"), ("16", "16"), ("2", "2")] {
        assert!(is_unusable(&read("200", Some(g), b""), &format!("gRPC status {n}")), "{g}");
    }
    // A grpc-status that is no number reads as UNKNOWN.
    assert!(is_unusable(&read("200", Some("x"), b""), "gRPC status 2"));
    // Non-200 statuses, mapped as gRPC does.
    for (http, g) in [("400", 13), ("401", 16), ("403", 7), ("404", 12), ("500", 2), ("302", 2)] {
        assert!(is_unusable(&read(http, None, b""), &format!("gRPC status {g}")), "{http}");
    }
    // OK with no message (trailers-only), and no message with the status in trailers.
    assert!(is_unusable(&read("200", Some("0"), b""), "gRPC status 13"));
    assert!(is_unusable(&read("200", None, b""), "no message"));
    // Frames that are not exactly one uncompressed message.
    let framed = grpc::frame(&OK_MESSAGE);
    assert!(is_unusable(&read("200", None, &framed[..3]), "truncated gRPC frame header"));
    assert!(is_unusable(&read("200", None, &framed[..6]), "truncated gRPC message"));
    let mut compressed = framed.clone();
    compressed[0] = 1;
    assert!(is_unusable(&read("200", None, &compressed), "compressed"));
    let mut extra = framed.clone();
    extra.push(0);
    assert!(is_unusable(&read("200", None, &extra), "bytes after the gRPC message"));
    let two = [framed.clone(), framed].concat();
    assert!(is_unusable(&read("200", None, &two), "bytes after the gRPC message"));
    let mut huge = vec![0u8, 0, 0, 0, 0];
    huge[1..5].copy_from_slice(&u32::try_from(MAX_ANSWER_BYTES + 1).unwrap().to_be_bytes());
    assert!(is_unusable(&read("200", None, &huge), "too large"));
    // Bytes that are no RateLimitResponse.
    assert!(is_unusable(&read("200", None, &grpc::frame(&[0xff])), "unreadable"));
    // No status, a reset stream (Envoy's gRPC client: 13 INTERNAL), an answer over the limit.
    let no_status = grpc::read_http_answer(Received::Answer { status: None, grpc_status: None, body: b"" });
    assert!(is_unusable(&no_status, "no HTTP status"));
    assert!(is_unusable(&grpc::read_http_answer(Received::Reset), "gRPC status 13"));
    assert!(is_unusable(&grpc::read_http_answer(Received::TooLarge), "exceeds"));
}
