//! Property tests of the rate-limit arithmetic with an injected clock, against the in-memory,
//! CAS-faithful store: each algorithm's documented guarantee, atomicity across counters, and no
//! lost update when two workers interleave.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use std::cell::RefCell;

use mcp_policy_core::limits::Limit;
use mcp_policy_core::limits::{Limiter, MemoryStore, NotAdmitted, SharedStore, StoreError};
use mcp_policy_core::terms::Algorithm;
use mcp_policy_core::terms::Scope;
use mcp_policy_core::terms::Window;
use proptest::prelude::*;

fn limit(counter: &str, window: Window, max: u64, algorithm: Algorithm) -> Limit {
    Limit::new(counter.into(), window, max, Scope::Grant, algorithm, "p".into())
}

const G: [u8; 32] = [42; 32];
const BASE: u64 = 1_700_000_000_000;

/// Sorted call times (ms) from random gaps.
fn times() -> impl Strategy<Value = Vec<u64>> {
    prop::collection::vec(0u64..1500, 1..120).prop_map(|gaps| {
        let mut t = BASE;
        gaps.into_iter()
            .map(|g| {
                t += g;
                t
            })
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    /// Fixed windows: a call is admitted exactly when fewer than max calls were admitted in its
    /// UTC-aligned window; so no aligned window ever holds more than max, and any rolling window of
    /// the same length at most 2×max.
    #[test]
    fn fixed_window_matches_its_model(ts in times(), max in 1u64..6) {
        let s = MemoryStore::new();
        let l = limit("c", Window::Second, max, Algorithm::Fixed);
        let mut admitted: Vec<u64> = Vec::new();
        for &t in &ts {
            let got = Limiter { store: &s, now_ms: t, max_tracked_grants: 10 }.admit(&[&l], &G);
            let in_window = admitted.iter().filter(|&&a| a / 1000 == t / 1000).count() as u64;
            prop_assert_eq!(got.is_ok(), in_window < max);
            if let Err(NotAdmitted::Limited { retry_after_seconds, .. }) = got {
                prop_assert_eq!(retry_after_seconds, 1);
            }
            if got.is_ok() {
                admitted.push(t);
            }
        }
        for &t in &admitted {
            let rolling = admitted.iter().filter(|&&a| a > t.saturating_sub(1000) && a <= t).count() as u64;
            prop_assert!(rolling <= 2 * max);
        }
    }

    /// Sliding windows: admitted exactly when fewer than max admissions lie in (t − len, t]; so no
    /// rolling window ever holds more than max.
    #[test]
    fn sliding_window_matches_its_model(ts in times(), max in 1u64..6) {
        let s = MemoryStore::new();
        let l = limit("c", Window::Second, max, Algorithm::Sliding);
        let mut admitted: Vec<u64> = Vec::new();
        for &t in &ts {
            let got = Limiter { store: &s, now_ms: t, max_tracked_grants: 10 }.admit(&[&l], &G);
            let live: Vec<u64> = admitted.iter().copied().filter(|&a| a > t - 1000).collect();
            prop_assert_eq!(got.is_ok(), (live.len() as u64) < max);
            if let Err(NotAdmitted::Limited { retry_after_seconds, .. }) = got {
                let oldest = *live.iter().min().unwrap();
                prop_assert_eq!(retry_after_seconds, (oldest + 1000 - t).div_ceil(1000).max(1));
            }
            if got.is_ok() {
                admitted.push(t);
            }
        }
        for &t in &admitted {
            let rolling = admitted.iter().filter(|&&a| a + 1000 > t && a <= t).count() as u64;
            prop_assert!(rolling <= max);
        }
    }

    /// A call refused by any of its limits leaves every counter as it was.
    #[test]
    fn refused_calls_consume_nothing(ts in times(), maxes in prop::collection::vec(1u64..4, 1..4)) {
        let s = MemoryStore::new();
        let limits: Vec<Limit> = maxes
            .iter()
            .enumerate()
            .map(|(i, &m)| limit(&format!("c{i}"), Window::Minute, m, if i % 2 == 0 { Algorithm::Fixed } else { Algorithm::Sliding }))
            .collect();
        let refs: Vec<&Limit> = limits.iter().collect();
        let min = *maxes.iter().min().unwrap();
        let mut admitted = 0u64;
        for &t in ts.iter().filter(|&&t| t < BASE + 20_000) {
            // Stay inside one minute window (BASE is 20 s into a minute).
            let snapshot: Vec<_> = refs.iter().map(|l| s.get(&mcp_policy_core::limits::counter_key(l, &G)).unwrap().map(|v| v.0)).collect();
            match (Limiter { store: &s, now_ms: t, max_tracked_grants: 10 }).admit(&refs, &G) {
                Ok(_) => admitted += 1,
                Err(_) => {
                    let after: Vec<_> = refs.iter().map(|l| s.get(&mcp_policy_core::limits::counter_key(l, &G)).unwrap().map(|v| v.0)).collect();
                    prop_assert_eq!(snapshot, after);
                }
            }
        }
        prop_assert!(admitted <= min);
    }
}

#[test]
fn base_is_twenty_seconds_into_a_minute() {
    assert_eq!((BASE / 1000) % 60, 20);
}

/// The documented cost of fixed windows: max calls at the end of one window and max at the start
/// of the next are all admitted, 2×max within one window length.
#[test]
fn fixed_window_allows_two_max_across_an_edge() {
    let s = MemoryStore::new();
    let l = limit("c", Window::Minute, 10, Algorithm::Fixed);
    let edge = 1_700_000_040_000; // a minute boundary
    let admitted = (0..10)
        .map(|i| edge - 1000 + i)
        .chain((0..10).map(|i| edge + i))
        .filter(|&t| Limiter { store: &s, now_ms: t, max_tracked_grants: 10 }.admit(&[&l], &G).is_ok())
        .count();
    assert_eq!(admitted, 20);
    let s = MemoryStore::new();
    let l = limit("c", Window::Minute, 10, Algorithm::Sliding);
    let admitted = (0..10)
        .map(|i| edge - 1000 + i)
        .chain((0..10).map(|i| edge + i))
        .filter(|&t| Limiter { store: &s, now_ms: t, max_tracked_grants: 10 }.admit(&[&l], &G).is_ok())
        .count();
    assert_eq!(admitted, 10, "sliding windows have no edge burst");
}

/// A store that, once armed, runs another worker's whole admission between this worker's read
/// and its write: the interleaving in which plain get/set loses an update.
struct Interleaving<'a> {
    inner: &'a MemoryStore,
    other: RefCell<Option<Box<dyn FnOnce() + 'a>>>,
}

impl SharedStore for Interleaving<'_> {
    fn get(&self, key: &str) -> Result<Option<(Vec<u8>, u32)>, StoreError> {
        self.inner.get(key)
    }
    fn set(&self, key: &str, value: &[u8], cas: u32) -> Result<(), StoreError> {
        if let Some(run_other) = self.other.borrow_mut().take() {
            run_other();
        }
        self.inner.set(key, value, cas)
    }
}

fn interleaved_count(prime: bool) -> (u64, bool, bool) {
    let inner = MemoryStore::new();
    let l = limit("c", Window::Hour, 100, Algorithm::Fixed);
    if prime {
        Limiter { store: &inner, now_ms: BASE, max_tracked_grants: 10 }.admit(&[&l], &G).unwrap();
    }
    let b_ok = RefCell::new(false);
    let store = Interleaving {
        inner: &inner,
        other: RefCell::new(Some(Box::new(|| {
            *b_ok.borrow_mut() =
                Limiter { store: &inner, now_ms: BASE, max_tracked_grants: 10 }.admit(&[&l], &G).is_ok();
        }))),
    };
    let a_ok = Limiter { store: &store, now_ms: BASE, max_tracked_grants: 10 }.admit(&[&l], &G).is_ok();
    let key = mcp_policy_core::limits::counter_key(&l, &G);
    let (v, _) = inner.get(&key).unwrap().unwrap();
    let count = u64::from_le_bytes(v[8..16].try_into().unwrap());
    let b = *b_ok.borrow();
    (count, a_ok, b)
}

#[test]
fn two_interleaved_workers_lose_no_update() {
    // Key exists: worker B increments between A's read and A's CAS; A's CAS fails and retries.
    assert_eq!(interleaved_count(true), (3, true, true));
    // First write: B runs while A holds the creation lock or between A's read and write; the key is
    // still created once and both increments land.
    assert_eq!(interleaved_count(false), (2, true, true));
}
