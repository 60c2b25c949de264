//! Shared-data keys. Istio sets no `vm_id`, so every wasm plugin on a proxy shares one
//! shared-data namespace: every key this filter reads or writes must carry its prefix `mcpf1:`,
//! and another plugin's keys must neither disturb it nor be disturbed by it. This drives the
//! request pipeline (`pipeline::on_body`, as the host does) through every shared-data path: fixed and
//! sliding windows, grant and global scope, batches, give-backs after a refusal, the tracked-grant
//! cap, and the load-time lock; the real-Envoy counterpart is
//! tests/envoy/test_deploy_istio.py (a second wasm plugin next to the filter).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use std::cell::RefCell;
use std::collections::BTreeSet;

use mcp_policy_core::config;
use mcp_policy_core::limits::{self, MemoryStore, SharedStore, StoreError};
use mcp_policy_core::outcome::kind::DecisionKind;
use mcp_policy_core::pipeline::{self, RequestHead};
use mcp_policy_core::policy::Policy;

const PREFIX: &str = "mcpf1:";
const T0: u64 = 1_700_000_040_000; // a UTC minute boundary

/// A [`MemoryStore`] that records every key read or written.
struct Recording {
    inner: MemoryStore,
    read: RefCell<BTreeSet<String>>,
    written: RefCell<BTreeSet<String>>,
}

impl Recording {
    fn new() -> Self {
        Recording { inner: MemoryStore::new(), read: RefCell::default(), written: RefCell::default() }
    }
}

impl SharedStore for Recording {
    fn get(&self, key: &str) -> Result<Option<(Vec<u8>, u32)>, StoreError> {
        self.read.borrow_mut().insert(key.to_owned());
        self.inner.get(key)
    }
    fn set(&self, key: &str, value: &[u8], cas: u32) -> Result<(), StoreError> {
        self.written.borrow_mut().insert(key.to_owned());
        self.inner.set(key, value, cas)
    }
}

fn policy() -> Policy {
    config::load(
        br#"{"version":"1","default":"deny",
        "all_tools":{"limits":[{"counter":"everything","window":"minute","max":6,"scope":"global"}]},
        "tools":{"list_vms":{},
          "vm_agent_exec":{"limits":[{"counter":"exec","window":"minute","max":2}]},
          "start_vm":{"limits":[{"counter":"start","window":"hour","max":1,"algorithm":"sliding"}]}},
        "gateway":{"max_tracked_grants":2}}"#,
    )
    .unwrap()
}

fn post(p: &Policy, token: &str) -> RequestHead {
    let auth = format!("Bearer {token}");
    RequestHead::from_headers(
        p,
        [(":method", &b"POST"[..]), ("content-type", b"application/json"), ("authorization", auth.as_bytes())],
    )
}

fn call(id: u64, tool: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{{}}}}}}"#)
}

/// Decisions of a sequence of (grant, body) through one store.
fn run(p: &Policy, store: &dyn SharedStore, calls: &[(&str, String)]) -> Vec<DecisionKind> {
    limits::init_lock(store).unwrap();
    calls
        .iter()
        .enumerate()
        .map(|(i, (g, body))| pipeline::on_body(p, &post(p, g), body.as_bytes(), store, T0 + i as u64).decision.kind)
        .collect()
}

fn workload() -> Vec<(&'static str, String)> {
    let batch = format!("[{},{}]", call(90, "vm_agent_exec"), call(91, "start_vm"));
    vec![
        ("alpha", call(1, "vm_agent_exec")),
        ("alpha", call(2, "vm_agent_exec")),
        ("alpha", call(3, "vm_agent_exec")), // exec limit: refused, the global unit given back
        ("alpha", call(4, "start_vm")),
        ("alpha", call(5, "start_vm")), // sliding limit: refused
        ("beta", batch),
        ("gamma", call(6, "vm_agent_exec")), // third grant: the tracked-grant cap
        ("beta", call(7, "list_vms")),
        ("beta", call(8, "list_vms")),
        ("beta", call(9, "list_vms")), // global limit reached
    ]
}

#[test]
fn every_key_the_filter_touches_carries_its_prefix() {
    let p = policy();
    let store = Recording::new();
    let got = run(&p, &store, &workload());
    // The workload reaches every path: admitted, rate limited, the grant cap (limiter unavailable).
    assert!(got.contains(&DecisionKind::Allowed) && got.contains(&DecisionKind::RateLimited), "{got:?}");
    assert!(got.contains(&DecisionKind::LimiterUnavailable), "{got:?}");
    let _ = limits::tracked_grants(&store);
    let (read, written) = (store.read.borrow(), store.written.borrow());
    assert!(!written.is_empty());
    for key in read.iter().chain(written.iter()) {
        assert!(key.starts_with(PREFIX), "shared-data key without the {PREFIX} prefix: {key}");
    }
    // Every kind of key was written: the lock, the grant count, grant markers, counters.
    let kinds: BTreeSet<&str> = written
        .iter()
        .map(|k| match &k[PREFIX.len()..] {
            "lock" => "lock",
            "grants" => "grants",
            rest if rest.starts_with("g:") => "grant",
            rest if rest.starts_with("c:") => "counter",
            other => panic!("unexpected key kind {other}"),
        })
        .collect();
    assert_eq!(kinds, BTreeSet::from(["counter", "grant", "grants", "lock"]));
}

#[test]
fn a_neighbours_keys_neither_disturb_nor_are_disturbed() {
    let p = policy();
    let clean = MemoryStore::new();
    let alone = run(&p, &clean, &workload());

    // Another plugin in the same namespace, using the filter's key names without the prefix and
    // other common names, with values the filter could not parse.
    let shared = MemoryStore::new();
    let theirs: Vec<(String, Vec<u8>)> = ["lock", "grants", "count", "c:0", "g:0", "mcpf1", "mcpf2:lock"]
        .iter()
        .map(|k| (k.to_string(), format!("junk of {k}").into_bytes()))
        .collect();
    for (k, v) in &theirs {
        shared.set(k, v, 0).unwrap();
    }
    let together = run(&p, &shared, &workload());
    assert_eq!(together, alone, "the neighbour's keys changed the filter's decisions");
    for (k, v) in &theirs {
        assert_eq!(shared.get(k).unwrap().unwrap().0, *v, "the filter changed the neighbour's key {k}");
    }
    assert_eq!(shared.len(), clean.len() + theirs.len());
}
