//! One policy against a policy set of 10 policies and 50 attach rules, on the native decision:
//! what the host runs per POST (`RequestHead::from_headers`, `pipeline::attach`,
//! `pipeline::on_headers`, `pipeline::on_body`). Run: `cargo bench --locked --bench sets`.
//!
//! - `plain/direct`: the plain policy as the host ran it before sets (no `attach`);
//! - `plain/attach`: the same policy loaded as a set of one (`attach` returns it at once);
//! - `plain-identity/attach`: the same policy with `gateway.identity`: the payload header read
//!   (base64url, strict JSON) and its `sub` made the grant, no rules;
//! - `set10x50/claims`: the caller's payload header read (base64url, strict JSON), 49 claim rules
//!   that do not match tried before the 50th that does;
//! - `set10x50/grants`: no identity: 49 grant rules that do not match, then a catch-all.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

/// 2026-01-01T00:00:00Z, in ms since the Unix epoch (the clock of the other benchmarks).
const NOW_MS: u64 = 1_767_225_600_000;

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use mcp_policy_core::config::{self, PolicySet};
use mcp_policy_core::limits::MemoryStore;
use mcp_policy_core::pipeline::{self, Outcome, RequestHead};
use mcp_policy_core::policy::Policy;
use mcp_policy_core::wire::b64::{self, Alphabet};

const ALLOWED_1K: &[u8] = include_bytes!("../../../bench/bodies/allowed-1k.json");
const POLICY_LIMITED: &str = include_str!("../../../bench/policy-bench.json");
const CLAIMS: &str = r#"{"iss":"https://as.example","aud":"https://mcp.example/mcp","sub":"bench-agent-0001","client_id":"bench","scope":"openid vms:read","exp":1767229200,"iat":1767225600}"#;

fn headers(payload: &[u8]) -> [(&str, &[u8]); 6] {
    [
        (":method", b"POST"),
        (":path", b"/mcp"),
        ("content-type", b"application/json"),
        ("accept", b"application/json, text/event-stream"),
        ("authorization", b"Bearer bench-agent-token-0001"),
        ("x-jwt-payload", payload),
    ]
}

fn direct(p: &Policy, payload: &[u8], store: &MemoryStore) -> Outcome {
    let h = RequestHead::from_headers(p, headers(payload));
    let _ = pipeline::on_headers(p, &h);
    pipeline::on_body(p, &h, ALLOWED_1K, store, NOW_MS)
}

fn chosen(set: &PolicySet, payload: &[u8], store: &MemoryStore) -> Outcome {
    let h = RequestHead::from_headers(set.base(), headers(payload));
    let a = pipeline::attach(set, &h).unwrap();
    let _ = pipeline::on_headers(&a.policy, &h);
    let mut o = pipeline::on_body(&a.policy, &h, ALLOWED_1K, store, NOW_MS);
    a.stamp(&mut o.decision);
    o
}

/// 10 copies of the bench policy and 50 rules: 49 that miss, then `last`.
fn set_text(miss: impl Fn(usize) -> String, last: &str, identity: bool) -> String {
    let members: Vec<String> = (0..10).map(|i| format!(r#""p{i}": {POLICY_LIMITED}"#)).collect();
    let mut rules: Vec<String> =
        (0..49).map(|i| format!(r#"{{"policy": "p{}", "when": [{}]}}"#, i % 10, miss(i))).collect();
    rules.push(format!(r#"{{"policy": "p9", "when": [{last}]}}"#));
    let gateway =
        if identity { r#""gateway": {"identity": {"payload_header": "x-jwt-payload"}}"# } else { r#""gateway": {}"# };
    format!(r#"{{"version": "1", "policies": {{{}}}, "attach": [{}], {gateway}}}"#, members.join(","), rules.join(","))
}

fn sets(c: &mut Criterion) {
    let plain = config::load(POLICY_LIMITED.as_bytes()).unwrap();
    let plain_set = config::load_set(POLICY_LIMITED.as_bytes()).unwrap();
    let with_identity = POLICY_LIMITED.trim_end().trim_end_matches('}').to_owned()
        + r#","gateway": {"identity": {"payload_header": "x-jwt-payload"}}}"#;
    let plain_identity = config::load_set(with_identity.as_bytes()).unwrap();
    let by_claims = config::load_set(
        set_text(
            |i| format!(r#"{{"claim": "groups", "includes": "team-{i}"}}"#),
            r#"{"claim": "scope", "includes": "vms:read"}"#,
            true,
        )
        .as_bytes(),
    )
    .unwrap();
    let by_grants =
        config::load_set(set_text(|i| format!(r#"{{"grant": "sha256:{i:064x}"}}"#), "", false).as_bytes()).unwrap();
    let mut payload = String::new();
    b64::encode_into(&mut payload, CLAIMS.as_bytes(), Alphabet::UrlNoPad);
    let payload = payload.as_bytes();
    // Every case is allowed and counted, the policy the rules pick is the last one.
    for (name, o) in [
        ("plain", chosen(&plain_set, payload, &MemoryStore::new())),
        ("plain-identity", chosen(&plain_identity, payload, &MemoryStore::new())),
        ("claims", chosen(&by_claims, payload, &MemoryStore::new())),
        ("grants", chosen(&by_grants, payload, &MemoryStore::new())),
    ] {
        assert_eq!(o.decision.label(), "allowed", "{name}");
    }
    assert_eq!(
        chosen(&by_claims, payload, &MemoryStore::new()).decision.provenance.unwrap().policy.as_deref(),
        Some("p9")
    );

    let mut g = c.benchmark_group("sets");
    let store = MemoryStore::new();
    g.bench_function("plain/direct", |b| b.iter(|| black_box(direct(&plain, black_box(payload), &store))));
    g.bench_function("plain/attach", |b| b.iter(|| black_box(chosen(&plain_set, black_box(payload), &store))));
    g.bench_function("plain-identity/attach", |b| {
        b.iter(|| black_box(chosen(&plain_identity, black_box(payload), &store)))
    });
    g.bench_function("set10x50/claims", |b| b.iter(|| black_box(chosen(&by_claims, black_box(payload), &store))));
    g.bench_function("set10x50/grants", |b| b.iter(|| black_box(chosen(&by_grants, black_box(payload), &store))));
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(3)).sample_size(50);
    targets = sets
}
criterion_main!(benches);
