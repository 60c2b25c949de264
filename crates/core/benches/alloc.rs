//! Allocations per decision, with a counting `#[global_allocator]`
//! (`benches/support/counting.rs`): first a table of the exact allocations and bytes requested by
//! one decision of each kind (the steady state: the counter already exists), then criterion timings
//! of the same decisions under that allocator. `tests/alloc_count.rs` asserts the two allowed 1 KiB
//! counts. Run: `cargo bench --locked --bench alloc`.
//!
//! A decision here is what the host runs per POST: `RequestHead::from_headers`, `pipeline::on_headers`,
//! `pipeline::on_body`, and the `Outcome` dropped; plus, as its own row, the audit record the host
//! formats for each decision (`Decision::audit_json`, gateway.audit "log" or "access_log").

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

#[path = "support/counting.rs"]
mod counting;
#[path = "support/request.rs"]
mod request;
use request::{head, NOW_MS};

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use mcp_policy_core::config;
use mcp_policy_core::limits::MemoryStore;
use mcp_policy_core::pipeline::{self, Outcome};
use mcp_policy_core::policy::Policy;

#[global_allocator]
static ALLOC: counting::Counting = counting::Counting;

const TS: &str = "2026-01-01T00:00:00.000Z";

const ALLOWED_200: &[u8] = include_bytes!("../../../bench/bodies/allowed-200.json");
const ALLOWED_1K: &[u8] = include_bytes!("../../../bench/bodies/allowed-1k.json");
const ALLOWED_64K: &[u8] = include_bytes!("../../../bench/bodies/allowed-64k.json");
const DENIED_1K: &[u8] = include_bytes!("../../../bench/bodies/denied-1k.json");
const POLICY_LIMITED: &str = include_str!("../../../bench/policy-bench.json");
const POLICY_SEED: &str = include_str!("../../../envoy/policy.json");

fn decide(p: &Policy, body: &[u8], store: &MemoryStore) -> Outcome {
    let h = head(p);
    let _ = pipeline::on_headers(p, &h);
    pipeline::on_body(p, &h, body, store, NOW_MS)
}

fn alloc(c: &mut Criterion) {
    let limited = config::load(POLICY_LIMITED.as_bytes()).unwrap();
    // The seed policy reads its session key from the VM's environment (MCPF_SESSION_KEY).
    let seed = config::load_with_env(POLICY_SEED.as_bytes(), &|_| Some("k".repeat(32))).unwrap();
    let cases: [(&str, &Policy, &[u8]); 5] = [
        ("decision/allowed/200B", &limited, ALLOWED_200),
        ("decision/allowed/1KiB", &limited, ALLOWED_1K),
        ("decision/allowed/64KiB", &limited, ALLOWED_64K),
        ("decision/allowed-no-limit/1KiB", &seed, ALLOWED_1K),
        ("decision/denied/1KiB", &limited, DENIED_1K),
    ];
    println!("{:<34} {:>12} {:>14}", "allocations per decision", "allocations", "bytes");
    for (name, p, body) in cases {
        let store = MemoryStore::new();
        drop(decide(p, body, &store)); // creates the counter
        let (n, bytes, o) = counting::count_in(|| decide(p, body, &store));
        println!("{name:<34} {n:>12} {bytes:>14}");
        let (n, bytes, _) = counting::count_in(|| o.decision.audit_json(TS, Some("0b5d3c1e-request-id")));
        println!("{:<34} {n:>12} {bytes:>14}", format!("  + audit record ({})", o.decision.label()));
    }

    let mut g = c.benchmark_group("alloc");
    for (name, p, body) in cases {
        let store = MemoryStore::new();
        g.bench_function(name, |b| b.iter(|| black_box(decide(p, black_box(body), &store))));
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(1)).sample_size(20);
    targets = alloc
}
criterion_main!(benches);
