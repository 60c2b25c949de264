//! Allocations on the decision path: the exact number of heap allocations (`alloc`,
//! `alloc_zeroed`, `realloc`) one allowed 1 KiB `tools/call` makes in the core, as the host runs it:
//! `RequestHead::from_headers`, `pipeline::on_headers`, `pipeline::on_body` (strict parse, JSON-RPC/MCP
//! checks, grant, policy, rate limit against `MemoryStore`), the `Outcome` dropped. The counter key
//! already exists (the steady state: the grant's first call, which creates it, is made before).
//!
//! The bodies and policies are the benchmarks' (`benches/alloc.rs` prints the same counts); a change
//! in either count is a change in the cost of every request, so the numbers are exact on purpose.
//! `MemoryStore` allocates where the host's shared data would copy (a `Vec` per `get`, a key
//! `String` per `set`); those are counted too and named below.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

#[path = "../benches/support/counting.rs"]
mod counting;
#[path = "../benches/support/request.rs"]
mod request;
use request::{head, NOW_MS};

use mcp_policy_core::config;
use mcp_policy_core::limits::MemoryStore;
use mcp_policy_core::outcome::kind::DecisionKind;
use mcp_policy_core::pipeline::{self, HeadOutcome};

#[global_allocator]
static ALLOC: counting::Counting = counting::Counting;

const ALLOWED_1K: &[u8] = include_bytes!("../../../bench/bodies/allowed-1k.json");
/// `list_vms` with a per-grant minute limit (the load benchmark's policy).
const POLICY_LIMITED: &str = include_str!("../../../bench/policy-bench.json");
/// `list_vms` without a limit (the seed policy).
const POLICY_SEED: &str = include_str!("../../../envoy/policy.json");

/// Allocations of one allowed decision, after a first call that created the counter.
fn decision_allocations(policy_text: &str) -> u64 {
    // The seed policy reads its session key from the VM's environment.
    let p = config::load_with_env(policy_text.as_bytes(), &|_| Some("k".repeat(32))).unwrap();
    let store = MemoryStore::new();
    let first = pipeline::on_body(&p, &head(&p), ALLOWED_1K, &store, NOW_MS);
    assert_eq!((first.decision.kind, first.reply.is_none()), (DecisionKind::Allowed, true));
    let (n, _, ()) = counting::count_in(|| {
        let h = head(&p);
        assert_eq!(pipeline::on_headers(&p, &h), HeadOutcome::NeedBody);
        let o = pipeline::on_body(&p, &h, ALLOWED_1K, &store, NOW_MS);
        assert_eq!(o.decision.kind, DecisionKind::Allowed);
        drop(o);
    });
    n
}

#[test]
fn allowed_1kib_call_with_a_per_grant_limit() {
    assert_eq!(decision_allocations(POLICY_LIMITED), 20);
}

#[test]
fn allowed_1kib_call_without_a_limit() {
    // The seed policy has `gateway.approval`: the head keeps its `:path` (and `:authority`, which
    // this request lacks), the upstream an approval would be bound to, one allocation each.
    assert_eq!(decision_allocations(POLICY_SEED), 18);
}
