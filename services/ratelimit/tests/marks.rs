//! Marks (the filter's `rls::marks`) against a real `redis-server`: the descriptors the filter
//! sends, decoded as the service decodes them, decided by the Redis script, answered as the
//! service answers. Exact values: the time stored, the key's TTL, `duration_until_reset`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod common;

use std::time::Duration;

use common::Redis;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use mcp_policy_core::identity::grant::{hex, Grant};
use mcp_policy_core::policy::Policy;
use mcp_policy_core::rls::{marks, proto};
use mcp_ratelimit::counters::{self, Counter, Kind};
use mcp_ratelimit::service::response;
use mcp_ratelimit::store::{MemoryStore, RedisStore};
use prost::Message;

const PREFIX: &str = "t:";

fn policy() -> Policy {
    let text = r#"{"version":"1","default":"deny",
      "tools": {"read_secret": {"marks": ["secret"]}, "http_post": {"limits":[{"counter":"post","window":"minute","max":5}]}},
      "flows": [{"name": "long", "if_marked": ["secret"], "deny": ["http_post"], "for": "10m"},
                {"name": "short", "if_marked": ["secret"], "deny": ["http_post"], "for": "2s"}],
      "gateway": {"rate_limit_service": {"cluster": "mcp_ratelimit"}}}"#;
    mcp_policy_core::config::load(text.as_bytes()).unwrap()
}

fn grant(token: &str) -> String {
    hex(&Grant::from_credential(token.as_bytes()).id)
}

/// The filter's request, as the service receives it.
fn decoded(descriptors: Vec<proto::Descriptor>) -> Vec<Counter> {
    let ours = proto::Request { domain: "mcp".into(), descriptors, hits_addend: 0 };
    counters::counters(PREFIX, &RateLimitRequest::decode(ours.encode().as_slice()).unwrap()).unwrap()
}

fn set(p: &Policy, token: &str) -> Vec<Counter> {
    let req = marks::set_request(p, &["secret".to_owned()], &grant(token), "mcp");
    decoded(req.descriptors)
}

fn check(p: &Policy, token: &str, for_ms: u64) -> proto::Descriptor {
    marks::descriptor(p, "secret", &grant(token), for_ms, false)
}

fn until_ms(r: &envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse, i: usize) -> u64 {
    let d = r.statuses[i].duration_until_reset.unwrap();
    u64::try_from(d.seconds).unwrap() * 1000 + u64::try_from(d.nanos).unwrap() / 1_000_000
}

#[test]
fn mark_descriptors_decode_to_one_key_whatever_their_for() {
    let p = policy();
    let s = set(&p, "a");
    assert_eq!((s.len(), s[0].kind, s[0].hits, s[0].window_ms, s[0].limit), (1, Kind::MarkSet, 1, 600_000, 0));
    let c = decoded(vec![check(&p, "a", 600_000), check(&p, "a", 2_000), check(&p, "b", 600_000)]);
    assert_eq!(
        c.iter().map(|c| (c.kind, c.window_ms)).collect::<Vec<_>>(),
        [(Kind::MarkCheck, 600_000), (Kind::MarkCheck, 2_000), (Kind::MarkCheck, 600_000)]
    );
    assert_eq!((c[0].key == s[0].key, c[1].key == s[0].key, c[2].key == s[0].key), (true, true, false));
    // Never the key of a counter with the same entries.
    assert!(c.iter().all(|c| c.key.starts_with(PREFIX) && c.key.len() == PREFIX.len() + 32));
}

#[test]
fn malformed_marks_are_invalid_arguments() {
    let p = policy();
    let bad = |f: &dyn Fn(&mut proto::Descriptor)| {
        let mut d = check(&p, "a", 1_000);
        f(&mut d);
        let ours = proto::Request { domain: "mcp".into(), descriptors: vec![d], hits_addend: 0 };
        counters::counters(PREFIX, &RateLimitRequest::decode(ours.encode().as_slice()).unwrap()).unwrap_err()
    };
    let order =
        "descriptors[0]: a mark has the entries mcp_mark, mcp_grant and mcp_mark_for_ms, in that order, none empty";
    assert_eq!(bad(&|d| d.entries.truncate(2)), order);
    assert_eq!(bad(&|d| d.entries.swap(1, 2)), order);
    assert_eq!(bad(&|d| d.entries[1].1.clear()), order);
    let range = "descriptors[0]: mcp_mark_for_ms must be 1 to 2592000000 milliseconds";
    assert_eq!(bad(&|d| d.entries[2].1 = "0".into()), range);
    assert_eq!(bad(&|d| d.entries[2].1 = "2592000001".into()), range);
    assert_eq!(bad(&|d| d.entries[2].1 = "10m".into()), range);
    assert_eq!(bad(&|d| d.hits_addend = Some(2)), "descriptors[0]: a mark's hits_addend is 0 (check) or 1 (set)");
}

#[tokio::test]
async fn a_mark_holds_for_its_for_from_the_marking_in_redis() {
    let r = Redis::start();
    let s = RedisStore::new(&r.url(), Duration::from_millis(500)).unwrap();
    let p = policy();
    // Not marked: a check is OK, with nothing left to wait, and creates nothing.
    let checks = decoded(vec![check(&p, "a", 600_000)]);
    let a = s.apply(&checks).await.unwrap();
    assert!(a.admitted);
    let answer = response(&checks, &a);
    assert_eq!(
        (answer.overall_code, answer.statuses[0].code, until_ms(&answer, 0)),
        (Code::Ok as i32, Code::Ok as i32, 0)
    );
    assert_eq!(r.cli(&["EXISTS", &checks[0].key]), "0");
    // The marking: Redis's time is stored, the key kept for the longest `for` (10 minutes).
    let marking = set(&p, "a");
    let m = s.apply(&marking).await.unwrap();
    assert!(m.admitted);
    let answer = response(&marking, &m);
    assert_eq!((answer.overall_code, until_ms(&answer, 0)), (Code::Ok as i32, 600_000));
    assert_eq!(r.cli(&["GET", &marking[0].key]), m.now_ms.to_string());
    let pttl: u64 = r.cli(&["PTTL", &marking[0].key]).parse().unwrap();
    assert!((598_000..=600_000).contains(&pttl), "pttl {pttl}");
    // Checked with each flow's `for`: OVER_LIMIT, lifting exactly `for` after the marking.
    let checks = decoded(vec![check(&p, "a", 600_000), check(&p, "a", 2_000), check(&p, "b", 600_000)]);
    let c = s.apply(&checks).await.unwrap();
    assert!(!c.admitted);
    assert_eq!(c.before, vec![m.now_ms, m.now_ms, 0]);
    let answer = response(&checks, &c);
    assert_eq!(answer.overall_code, Code::OverLimit as i32);
    assert_eq!(answer.statuses.iter().map(|s| s.code).collect::<Vec<_>>(), [2, 2, 1]);
    assert_eq!(until_ms(&answer, 0), m.now_ms + 600_000 - c.now_ms);
    assert_eq!(until_ms(&answer, 1), (m.now_ms + 2_000).saturating_sub(c.now_ms));
    assert_eq!(until_ms(&answer, 2), 0);
    // A call refused by a mark counts against none of its limits (all or none).
    let mut with_limit = decoded(vec![check(&p, "a", 600_000)]);
    with_limit.push(Counter::count("t:post", 5, 1, 60_000));
    assert!(!s.apply(&with_limit).await.unwrap().admitted);
    assert_eq!(r.cli(&["EXISTS", "t:post"]), "0");
    // After the short flow's 2 s, it lifts; the long one still holds.
    tokio::time::sleep(Duration::from_millis((m.now_ms + 2_001).saturating_sub(c.now_ms).max(1))).await;
    let checks = decoded(vec![check(&p, "a", 600_000), check(&p, "a", 2_000)]);
    let later = s.apply(&checks).await.unwrap();
    assert_eq!(response(&checks, &later).statuses.iter().map(|s| s.code).collect::<Vec<_>>(), [2, 1]);
    // Marking again moves the time forward; a shorter `for` never shortens the key's life.
    let again = s.apply(&marking).await.unwrap();
    assert_eq!(r.cli(&["GET", &marking[0].key]), again.now_ms.to_string());
    let short = decoded(vec![{
        let mut d = check(&p, "a", 1_000);
        d.hits_addend = Some(1);
        d
    }]);
    s.apply(&short).await.unwrap();
    let pttl: u64 = r.cli(&["PTTL", &marking[0].key]).parse().unwrap();
    assert!(pttl > 590_000, "pttl {pttl}");
}

#[test]
fn the_memory_store_keeps_marks_alike() {
    let m = MemoryStore::new();
    let p = policy();
    const T0: u64 = 1_700_000_040_000;
    let marking = set(&p, "a");
    assert!(m.apply_at(&marking, T0).unwrap().admitted);
    let checks = decoded(vec![check(&p, "a", 600_000), check(&p, "a", 2_000)]);
    let c = m.apply_at(&checks, T0 + 1_500).unwrap();
    assert!(!c.admitted);
    let answer = response(&checks, &c);
    assert_eq!((until_ms(&answer, 0), until_ms(&answer, 1)), (598_500, 500));
    let c = m.apply_at(&checks, T0 + 2_000).unwrap();
    assert_eq!(response(&checks, &c).statuses.iter().map(|s| s.code).collect::<Vec<_>>(), [2, 1]);
    assert!(m.apply_at(&checks, T0 + 600_000).unwrap().admitted);
}
