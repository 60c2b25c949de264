//! Micro benchmarks of the pure core on the native target (criterion): what one decision costs
//! without Envoy or the wasm VM. `make bench` runs these first; BENCHMARKS.md explains the numbers.
//!
//! The bodies are the same files the load benchmark sends (`bench/bodies/`, written by
//! `bench/make_bodies.py`), and the policy is the load benchmark's: the seed policy with a limit on
//! `list_vms` high enough never to refuse, so an allowed call pays for its rate-limit check too.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use mcp_policy_core::config;
use mcp_policy_core::limits::{Limiter, MemoryStore};
use mcp_policy_core::outcome::kind::DecisionKind;
use mcp_policy_core::pipeline::{self, HeadOutcome};
use mcp_policy_core::policy::Policy;
use mcp_policy_core::response::toolslist;
use mcp_policy_core::response::{Plan, ResponseFilter, Step};
use mcp_policy_core::wire::{json, mcp};

#[path = "support/request.rs"]
mod request;
use request::{head, NOW_MS};

const ALLOWED_200: &[u8] = include_bytes!("../../../bench/bodies/allowed-200.json");
const ALLOWED_1K: &[u8] = include_bytes!("../../../bench/bodies/allowed-1k.json");
const ALLOWED_64K: &[u8] = include_bytes!("../../../bench/bodies/allowed-64k.json");
const DENIED_1K: &[u8] = include_bytes!("../../../bench/bodies/denied-1k.json");
const EXEC_1K: &[u8] = include_bytes!("../../../bench/bodies/exec-1k.json");
const TOOLS_LIST_JSON: &[u8] = include_bytes!("../../../bench/bodies/tools-list-286.json");
const TOOLS_LIST_SSE: &[u8] = include_bytes!("../../../bench/bodies/tools-list-286.sse");

/// The load benchmark's policy (bench/load.py writes the same JSON into the Envoy config).
const POLICY_LIMITED: &str = include_str!("../../../bench/policy-bench.json");
/// The seed policy (envoy/policy.json): `list_vms` allowed with no limit.
const POLICY_SEED: &str = include_str!("../../../envoy/policy.json");
/// `vm_agent_exec` under 5 argument conditions, one of them a regex; 4 tools hidden.
const POLICY_CONDITIONS: &str = include_str!("../../../bench/policy-conditions-bench.json");
/// The same tool with no conditions, to isolate their cost.
const POLICY_NO_CONDITIONS: &str = r#"{"version":"1","default":"deny","tools":{"vm_agent_exec":{}}}"#;

/// A benchmark policy; one that reads its session key from the VM's environment (the seed policy's
/// MCPF_SESSION_KEY) gets a fixed test key.
fn policy(text: &str) -> Policy {
    config::load_with_env(text.as_bytes(), &|_| Some("k".repeat(32))).expect("benchmark policy loads")
}

fn sanity(p: &Policy) {
    let s = MemoryStore::new();
    let h = head(p);
    for body in [ALLOWED_200, ALLOWED_1K, ALLOWED_64K] {
        let o = pipeline::on_body(p, &h, body, &s, NOW_MS);
        assert_eq!((o.decision.kind, o.reply.is_none()), (DecisionKind::Allowed, true), "{:?}", o.decision);
    }
    let o = pipeline::on_body(p, &h, DENIED_1K, &s, NOW_MS);
    assert_eq!(o.decision.kind, DecisionKind::Denied);
}

fn decision(c: &mut Criterion) {
    let limited = policy(POLICY_LIMITED);
    let seed = policy(POLICY_SEED);
    sanity(&limited);
    sanity(&seed);

    // The whole POST path as the host runs it: headers, then the body (parse, judge, rate limit).
    let mut g = c.benchmark_group("decision/allowed");
    for (name, body) in [("200B", ALLOWED_200), ("1KiB", ALLOWED_1K), ("64KiB", ALLOWED_64K)] {
        g.throughput(Throughput::Bytes(body.len() as u64));
        let store = MemoryStore::new();
        g.bench_function(name, |b| {
            b.iter(|| {
                let h = head(&limited);
                assert_eq!(pipeline::on_headers(&limited, &h), HeadOutcome::NeedBody);
                let o = pipeline::on_body(&limited, &h, black_box(body), &store, NOW_MS);
                black_box(o)
            })
        });
    }
    g.finish();

    // Same call, no limit on the tool (the seed policy): the difference is the rate-limit check.
    let mut g = c.benchmark_group("decision/allowed-no-limit");
    g.throughput(Throughput::Bytes(ALLOWED_1K.len() as u64));
    let store = MemoryStore::new();
    g.bench_function("1KiB", |b| {
        b.iter(|| {
            let h = head(&seed);
            black_box(pipeline::on_body(&seed, &h, black_box(ALLOWED_1K), &store, NOW_MS))
        })
    });
    g.finish();

    // A denied call: parse, judge, and the JSON-RPC error reply.
    let mut g = c.benchmark_group("decision/denied");
    g.throughput(Throughput::Bytes(DENIED_1K.len() as u64));
    let store = MemoryStore::new();
    g.bench_function("1KiB", |b| {
        b.iter(|| {
            let h = head(&limited);
            black_box(pipeline::on_body(&limited, &h, black_box(DENIED_1K), &store, NOW_MS))
        })
    });
    g.finish();
}

fn conditions(c: &mut Criterion) {
    let with = policy(POLICY_CONDITIONS);
    let without = policy(POLICY_NO_CONDITIONS);
    let store = MemoryStore::new();
    for p in [&with, &without] {
        let o = pipeline::on_body(p, &head(p), EXEC_1K, &store, NOW_MS);
        assert_eq!((o.decision.kind, o.reply.is_none()), (DecisionKind::Allowed, true), "{:?}", o.decision);
    }
    // The whole decision for a 1 KiB vm_agent_exec call: with 5 conditions (in, eq, lte, exists,
    // regex) against none; the difference is what the conditions cost.
    let mut g = c.benchmark_group("decision/exec");
    g.throughput(Throughput::Bytes(EXEC_1K.len() as u64));
    for (name, p) in [("5-conditions-1KiB", &with), ("no-conditions-1KiB", &without)] {
        g.bench_function(name, |b| {
            b.iter(|| black_box(pipeline::on_body(p, &head(p), black_box(EXEC_1K), &store, NOW_MS)))
        });
    }
    g.finish();
}

/// A body of about 1 MB built to make folding and NFKC expensive: U+FDFA (3 bytes) reads as 33.
/// Each is refused, at a cost bounded by the body's size (docs/src/security/reading-requests.md).
fn hostile(c: &mut Criterion) {
    let p = policy(POLICY_CONDITIONS);
    let store = MemoryStore::new();
    let long = "\u{fdfa}".repeat(330_000);
    let call = |name: &str, args: &str| {
        format!(r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"{name}","arguments":{args}}}}}"#)
    };
    let cases = [
        (
            "nfkc-argument-1MB",
            call(
                "vm_agent_exec",
                &format!(r#"{{"vmid":100,"node":"pve","timeout_s":1,"user":"u","command":"{long}"}}"#),
            ),
            "deny_if condition cannot be evaluated: args.command regex",
        ),
        (
            "folded-member-name-1MB",
            call("list_vms", &format!(r#"{{"a":1,"{long}":2}}"#)),
            "object keys too long to compare after case folding at byte 86",
        ),
        ("folded-tool-name-1MB", call(&long, "{}"), "not allowed by policy (default: deny)"),
    ];
    let mut g = c.benchmark_group("decision/hostile");
    g.sample_size(10);
    for (name, body, reason) in &cases {
        let o = pipeline::on_body(&p, &head(&p), body.as_bytes(), &store, NOW_MS);
        assert_eq!(o.decision.reason.as_deref(), Some(*reason), "{name}");
        g.throughput(Throughput::Bytes(body.len() as u64));
        g.bench_function(*name, |b| {
            b.iter(|| black_box(pipeline::on_body(&p, &head(&p), black_box(body.as_bytes()), &store, NOW_MS)))
        });
    }
    g.finish();
}

fn tools_list(c: &mut Criterion) {
    let p = policy(POLICY_CONDITIONS);
    let ids = [json::parse(b"2").expect("id")];
    let hidden = |name: &str| p.is_unlisted(name);
    let (_, removed) = toolslist::filter_json(TOOLS_LIST_JSON, &ids, &hidden).expect("filtered");
    assert_eq!(removed, 3);
    let (_, removed) = toolslist::filter_sse(TOOLS_LIST_SSE, &ids, &hidden).expect("filtered");
    assert_eq!(removed, 3);
    // Removing hidden tools from a 286-tool tools/list result (132 KiB): parse, filter, re-serialise.
    let mut g = c.benchmark_group("tools-list-286");
    g.throughput(Throughput::Bytes(TOOLS_LIST_JSON.len() as u64));
    g.bench_function("json", |b| {
        b.iter(|| black_box(toolslist::filter_json(black_box(TOOLS_LIST_JSON), &ids, &hidden).expect("filtered")))
    });
    g.throughput(Throughput::Bytes(TOOLS_LIST_SSE.len() as u64));
    g.bench_function("sse", |b| {
        b.iter(|| black_box(toolslist::filter_sse(black_box(TOOLS_LIST_SSE), &ids, &hidden).expect("filtered")))
    });
    // The response side as the host drives it: the plan from the headers, then the chunk filter
    // (JSON whole; SSE in the 16 KiB chunks Envoy hands over).
    let list_ids = [mcp::Id::of(&ids[0])];
    let json_type = |name: &str| (name == "content-type").then(|| b"application/json".to_vec());
    let sse_type = |name: &str| (name == "content-type").then(|| b"text/event-stream".to_vec());
    let response_json = || {
        let mut f = ResponseFilter::forwarded(&p, &list_ids);
        assert_eq!(f.on_headers(false, json_type), Plan::FilterJson);
        assert_eq!(f.on_body(TOOLS_LIST_JSON.len(), true), Step::Read);
        f.on_chunk(black_box(TOOLS_LIST_JSON), true, &hidden)
    };
    let response_sse = || {
        let mut f = ResponseFilter::forwarded(&p, &list_ids);
        assert_eq!(f.on_headers(false, sse_type), Plan::FilterSse);
        let mut removed = 0;
        let mut chunks = TOOLS_LIST_SSE.chunks(16 * 1024).peekable();
        while let Some(chunk) = chunks.next() {
            let end = chunks.peek().is_none();
            assert_eq!(f.on_body(chunk.len(), end), Step::Read);
            if let Step::Write { removed: n, .. } = f.on_chunk(black_box(chunk), end, &hidden) {
                removed += n;
            }
        }
        removed
    };
    assert!(matches!(response_json(), Step::Write { removed: 3, .. }));
    assert_eq!(response_sse(), 3);
    g.throughput(Throughput::Bytes(TOOLS_LIST_JSON.len() as u64));
    g.bench_function("response-json", |b| b.iter(|| black_box(response_json())));
    g.throughput(Throughput::Bytes(TOOLS_LIST_SSE.len() as u64));
    g.bench_function("response-sse-16KiB-chunks", |b| b.iter(|| black_box(response_sse())));
    g.finish();
}

fn ratelimit(c: &mut Criterion) {
    let p = policy(POLICY_LIMITED);
    let limit = p.limits.iter().find(|l| l.counter == "list_vms_rate").expect("list_vms_rate limit");
    let grant = [7u8; 32];
    let mut g = c.benchmark_group("ratelimit");
    // Check and consume one unit of an existing counter (the steady state): get + CAS set.
    let store = MemoryStore::new();
    g.bench_function("admit-existing-counter", |b| {
        let lim = Limiter { store: &store, now_ms: NOW_MS, max_tracked_grants: u64::MAX };
        b.iter(|| black_box(lim.admit(&[limit], black_box(&grant)).expect("admitted")))
    });
    // A grant's first call: the counter is created under the creation lock and the grant is registered.
    g.bench_function("admit-new-grant", |b| {
        b.iter_batched(
            MemoryStore::new,
            |store| {
                let lim = Limiter { store: &store, now_ms: NOW_MS, max_tracked_grants: u64::MAX };
                black_box(lim.admit(&[limit], &grant).expect("admitted"));
                store
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

fn parsing(c: &mut Criterion) {
    let mut g = c.benchmark_group("parse");
    g.throughput(Throughput::Bytes(ALLOWED_1K.len() as u64));
    // The strict JSON parser alone (UTF-8 check, duplicate keys, depth, full tree).
    g.bench_function("json-1KiB", |b| b.iter(|| black_box(json::parse(black_box(ALLOWED_1K)).expect("valid"))));
    // JSON plus the JSON-RPC/MCP message model (what on_body parses).
    g.bench_function("mcp-body-1KiB", |b| b.iter(|| black_box(mcp::read_body(black_box(ALLOWED_1K)).expect("valid"))));
    // For scale: serde_json into a Value (no duplicate-key check).
    g.bench_function("serde_json-value-1KiB", |b| {
        b.iter(|| black_box(serde_json::from_slice::<serde_json::Value>(black_box(ALLOWED_1K)).expect("valid")))
    });
    g.finish();
}

fn headers(c: &mut Criterion) {
    let p = policy(POLICY_LIMITED);
    c.bench_function("headers/from_headers+on_headers", |b| {
        b.iter(|| {
            let h = head(&p);
            black_box(pipeline::on_headers(&p, black_box(&h)))
        })
    });
}

fn config() -> Criterion {
    // Keep `cargo bench` short (about 30 s after the build): `make bench` must fit in 10 minutes on a
    // shared 2-core machine. Noise is larger than criterion's intervals suggest there; see BENCHMARKS.md.
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .without_plots()
}

criterion_group! {
    name = benches;
    config = config();
    targets = decision, conditions, hostile, tools_list, ratelimit, parsing, headers
}
criterion_main!(benches);
