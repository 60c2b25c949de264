//! Result rules on the native target (criterion): what judging one `tools/call` result costs, from
//! the response headers to the last body byte, as the host drives the response filter. BENCHMARKS.md
//! and the book's "Result rules and pins" report the numbers.
//!
//! - `result/none_1k`: a policy without result rules (the response is not read at all);
//! - `result/two_rules_1k`: a clean 1 KiB result under one `deny_if` and one `redact`;
//! - `result/two_rules_64k`: a clean 64 KiB result under the same rules;
//! - `result/redact_1k`: a 1 KiB result in which one access key is redacted.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use mcp_policy_core::config;
use mcp_policy_core::outcome::decision::Decision;
use mcp_policy_core::policy::Policy;
use mcp_policy_core::response::{Plan, ResponseFilter, Step};

const RULES: &str = r#"{"version":"1","default":"allow","tools":{"read_file":{"result":{
    "max_bytes": 1048576,
    "deny_if": [{"regex": "-----BEGIN [A-Z ]*PRIVATE KEY-----", "reason": "a private key"}],
    "redact":  [{"regex": "AKIA[0-9A-Z]{16}", "with": "[redacted]"}]}}}}"#;
const NO_RULES: &str = r#"{"version":"1","default":"allow","tools":{"read_file":{}}}"#;

/// A result of about `size` bytes: lines of log-like text in one content item, and a short
/// structuredContent; `key` puts one access key in it.
fn result(size: usize, key: bool) -> Vec<u8> {
    let mut text = String::new();
    while text.len() + 160 < size {
        text.push_str("2026-12-02T07:00:00Z INFO request served in 12 ms from node pve1 (vm 101)\\n");
    }
    if key {
        text.push_str("aws_access_key_id = AKIAIOSFODNN7EXAMPLE\\n");
    }
    format!(
        r#"{{"jsonrpc":"2.0","id":7,"result":{{"content":[{{"type":"text","text":"{text}"}}],"structuredContent":{{"lines":3,"node":"pve1"}},"isError":false}}}}"#
    )
    .into_bytes()
}

/// Headers, then the whole body in one chunk: what the client gets (its length).
fn judge(p: &Policy, d: &Decision, body: &[u8]) -> usize {
    let mut f = ResponseFilter::forwarded(p, &[]).judging(p, d);
    match f.on_headers(false, |n| (n == "content-type").then(|| b"application/json".to_vec())) {
        Plan::PassThrough => return body.len(),
        Plan::FilterJson => {}
        other => panic!("{other:?}"),
    }
    match f.on_body(body.len(), true) {
        Step::Read => match f.on_chunk_judged(body, true, &|_| false, p) {
            Step::Pass => body.len(),
            Step::Write { bytes, .. } => bytes.len(),
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    }
}

fn bench(c: &mut Criterion) {
    let rules = config::load(RULES.as_bytes()).unwrap();
    let none = config::load(NO_RULES.as_bytes()).unwrap();
    let d = Decision::allowed_call("read_file", "7");
    let (r1k, r64k, k1k) = (result(900, false), result(65536, false), result(900, true));
    assert!(r1k.len() < 1024 && r64k.len() <= 65536, "{} {}", r1k.len(), r64k.len());
    assert_eq!(judge(&rules, &d, &r1k), r1k.len());
    assert!(judge(&rules, &d, &k1k) < k1k.len());
    let mut g = c.benchmark_group("result");
    g.measurement_time(Duration::from_secs(3));
    g.throughput(Throughput::Bytes(r1k.len() as u64));
    g.bench_function("none_1k", |b| b.iter(|| judge(&none, &d, black_box(&r1k))));
    g.bench_function("two_rules_1k", |b| b.iter(|| judge(&rules, &d, black_box(&r1k))));
    g.bench_function("redact_1k", |b| b.iter(|| judge(&rules, &d, black_box(&k1k))));
    g.throughput(Throughput::Bytes(r64k.len() as u64));
    g.bench_function("two_rules_64k", |b| b.iter(|| judge(&rules, &d, black_box(&r64k))));
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_secs(1));
    targets = bench
}
criterion_main!(benches);
