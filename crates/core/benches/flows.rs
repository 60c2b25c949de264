//! What flows cost a decision, natively (criterion): the 1 KiB allowed `list_vms` call under a
//! policy without flows, the same policy with one flow that denies `list_vms` after a mark (the
//! grant not marked: one shared-data read per mark of the flow), and the same call refused because
//! the grant is marked. And a marking result: reading it and recording the mark.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use mcp_policy_core::config;
use mcp_policy_core::limits::{marks, Limiter, MemoryStore};
use mcp_policy_core::outcome::kind::DecisionKind;
use mcp_policy_core::pipeline;
use mcp_policy_core::policy::Policy;

#[path = "support/request.rs"]
mod request;
use request::{head, NOW_MS};

const ALLOWED_1K: &[u8] = include_bytes!("../../../bench/bodies/allowed-1k.json");

const NO_FLOWS: &str = r#"{"version":"1","default":"deny","tools":{"list_vms":{},"read_secret":{}}}"#;
const ONE_FLOW: &str = r#"{"version":"1","default":"deny","tools":{"list_vms":{},"read_secret":{"marks":["secret"]}},
  "flows":[{"name":"f","if_marked":["secret"],"deny":["list_vms"],"for":"10m"}]}"#;

fn policy(text: &str) -> Policy {
    config::load(text.as_bytes()).expect("benchmark policy loads")
}

fn flows(c: &mut Criterion) {
    let plain = policy(NO_FLOWS);
    let flowed = policy(ONE_FLOW);
    let mut g = c.benchmark_group("flows/decision-1KiB");
    for (name, p) in [("no-flows", &plain), ("one-flow-unmarked", &flowed)] {
        let store = MemoryStore::new();
        let o = pipeline::on_body(p, &head(p), ALLOWED_1K, &store, NOW_MS);
        assert_eq!(o.decision.kind, DecisionKind::Allowed);
        g.bench_function(name, |b| {
            b.iter(|| black_box(pipeline::on_body(p, &head(p), black_box(ALLOWED_1K), &store, NOW_MS)))
        });
    }
    let store = MemoryStore::new();
    let grant = pipeline::on_body(&flowed, &head(&flowed), ALLOWED_1K, &store, NOW_MS).grant_id.unwrap();
    let limiter = Limiter { store: &store, now_ms: NOW_MS, max_tracked_grants: 10 };
    marks::set(&limiter, &grant, "secret").unwrap();
    let o = pipeline::on_body(&flowed, &head(&flowed), ALLOWED_1K, &store, NOW_MS + 1);
    assert_eq!(o.reply.as_ref().map(|r| r.body.contains("flow_denied")), Some(true));
    g.bench_function("one-flow-marked-refused", |b| {
        b.iter(|| black_box(pipeline::on_body(&flowed, &head(&flowed), black_box(ALLOWED_1K), &store, NOW_MS + 1)))
    });
    g.finish();

    let mut g = c.benchmark_group("flows/mark");
    let mut now = NOW_MS;
    g.bench_function("set-existing", |b| {
        b.iter(|| {
            now += 1;
            let limiter = Limiter { store: &store, now_ms: now, max_tracked_grants: 10 };
            marks::set(&limiter, &grant, "secret").unwrap();
        })
    });
    g.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .without_plots()
}

criterion_group! {
    name = benches;
    config = config();
    targets = flows
}
criterion_main!(benches);
