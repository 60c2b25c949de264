//! The per-grant cap on held approval callouts (hold mode, `gateway.approval.max_held_per_grant`).
//!
//! In hold mode every waiting call holds one callout to the approval service. Without a cap, one
//! grant that opens thousands of waiting calls (or opens and resets HTTP/2 streams fast) fills the
//! approvals cluster's circuit breaker and the service's waiters for every other grant. The count
//! of one grant's held callouts lives in proxy-wasm shared data (one key per grant, per Envoy
//! process and `vm_id`, shared by all workers), changed by compare-and-swap:
//!
//! - [`reserve`] before a hold-mode callout: under the cap the count goes up and the callout may
//!   hold; at the cap the call is asked without waiting (the service answers at once, so the call
//!   gets `approval_required` or its decision, never a held slot);
//! - [`release`] when the callout answers, or when the stream ends first (a reset cancels the
//!   callout): the count goes down.
//!
//! A value also records when it last changed. Every held callout ends within the callout timeout,
//! so a count untouched for longer than `lease_ms` is stale (a VM that crashed or was reloaded while
//! holding) and counts as 0. Creating a key cannot be a compare-and-swap on this host, so a grant's
//! key is first created with a count of 0 under the limiter's creation lock
//! ([`Limiter::create`]); every increment is then a compare-and-swap, and two workers' first
//! reservations of one grant cannot lose an increment (the cap is exact across workers).

use crate::identity::grant::hex;
use crate::identity::grant::GrantId;
use crate::limits::{grant_key, Limiter, SharedStore, StoreError, PREFIX};

/// `gateway.approval.max_held_per_grant` default.
pub const DEFAULT_MAX_HELD_PER_GRANT: u32 = 8;
/// Largest `gateway.approval.max_held_per_grant`.
pub const MAX_MAX_HELD_PER_GRANT: u32 = 10_000;
/// Compare-and-swap attempts before giving up (then: not held).
const TRIES: usize = 64;

/// The shared-data key of a grant's held callouts (with the filter's prefix, like every key it
/// touches: plugins without a `vm_id` share one namespace).
pub fn key(grant: &GrantId) -> String {
    format!("{PREFIX}h:{}", hex(grant.get(..16).unwrap_or(&[])))
}

fn encode(count: u64, updated_ms: u64) -> [u8; 16] {
    let mut v = [0u8; 16];
    v[..8].copy_from_slice(&count.to_le_bytes());
    v[8..].copy_from_slice(&updated_ms.to_le_bytes());
    v
}

fn decode(v: &[u8], now_ms: u64, lease_ms: u64) -> u64 {
    let (Some(c), Some(t)) = (v.get(..8), v.get(8..16)) else { return 0 };
    let (Ok(c), Ok(t)) = (<[u8; 8]>::try_from(c), <[u8; 8]>::try_from(t)) else { return 0 };
    let (count, updated) = (u64::from_le_bytes(c), u64::from_le_bytes(t));
    if now_ms.saturating_sub(updated) > lease_ms {
        0
    } else {
        count
    }
}

/// What [`reserve`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reserve {
    /// Counted: the callout may hold; [`release`] it when it ends.
    Held,
    /// The grant already holds `cap` callouts: ask without waiting.
    OverCap,
    /// Shared data failed or stayed contended: ask without waiting (fail closed: no hold).
    Unavailable,
}

/// Counts one more held callout for `grant` if it holds fewer than `cap`. A grant's first held
/// callout registers it against `max_tracked_grants` (`gateway.max_tracked_grants`), as a rate
/// counter does: the key stays in shared data, so without the cap any number of tokens could add
/// keys. Past the cap the call is asked without waiting ([`Reserve::Unavailable`]).
pub fn reserve(
    store: &dyn SharedStore,
    grant: &GrantId,
    cap: u32,
    now_ms: u64,
    lease_ms: u64,
    max_tracked_grants: u64,
) -> Reserve {
    let key = key(grant);
    for _ in 0..TRIES {
        let (count, cas) = match store.get(&key) {
            Ok(Some((v, cas))) => (decode(&v, now_ms, lease_ms), cas),
            Ok(None) => {
                // The count heals by lease, but the key stays: one per grant that ever held a
                // callout, so the grant is tracked (and capped) like one with a rate counter.
                let creator = Limiter { store, now_ms, max_tracked_grants };
                if creator.create(&key, &encode(0, now_ms), Some(&grant_key(grant))).is_err() {
                    return Reserve::Unavailable;
                }
                continue;
            }
            Err(_) => return Reserve::Unavailable,
        };
        if count >= u64::from(cap) {
            return Reserve::OverCap;
        }
        match store.set(&key, &encode(count + 1, now_ms), cas) {
            Ok(()) => return Reserve::Held,
            Err(StoreError::CasMismatch) => continue,
            Err(StoreError::Host(_)) => return Reserve::Unavailable,
        }
    }
    Reserve::Unavailable
}

/// Gives one held callout of `grant` back. Returns false if shared data failed (the lease then
/// heals the count).
pub fn release(store: &dyn SharedStore, grant: &GrantId, now_ms: u64, lease_ms: u64) -> bool {
    let key = key(grant);
    for _ in 0..TRIES {
        let (count, cas) = match store.get(&key) {
            Ok(Some((v, cas))) => (decode(&v, now_ms, lease_ms), cas),
            Ok(None) => return true,
            Err(_) => return false,
        };
        match store.set(&key, &encode(count.saturating_sub(1), now_ms), cas) {
            Ok(()) => return true,
            Err(StoreError::CasMismatch) => continue,
            Err(StoreError::Host(_)) => return false,
        }
    }
    false
}

/// The count a grant holds now (tests, metrics).
pub fn held(store: &dyn SharedStore, grant: &GrantId, now_ms: u64, lease_ms: u64) -> u64 {
    match store.get(&key(grant)) {
        Ok(Some((v, _))) => decode(&v, now_ms, lease_ms),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::indexing_slicing)]
    use super::*;
    use crate::limits::MemoryStore;

    const LEASE: u64 = 31_000;

    #[test]
    fn reserve_up_to_the_cap_then_release() {
        let store = MemoryStore::new();
        let (a, b) = ([1u8; 32], [2u8; 32]);
        for _ in 0..3 {
            assert_eq!(reserve(&store, &a, 3, 1_000, LEASE, u64::MAX), Reserve::Held);
        }
        assert_eq!(reserve(&store, &a, 3, 1_000, LEASE, u64::MAX), Reserve::OverCap);
        // Another grant is not affected.
        assert_eq!(reserve(&store, &b, 3, 1_000, LEASE, u64::MAX), Reserve::Held);
        assert_eq!(held(&store, &a, 1_000, LEASE), 3);
        assert!(release(&store, &a, 2_000, LEASE));
        assert_eq!(held(&store, &a, 2_000, LEASE), 2);
        assert_eq!(reserve(&store, &a, 3, 2_000, LEASE, u64::MAX), Reserve::Held);
        for _ in 0..5 {
            assert!(release(&store, &a, 3_000, LEASE));
        }
        // Never below 0.
        assert_eq!(held(&store, &a, 3_000, LEASE), 0);
        assert_eq!(held(&store, &b, 3_000, LEASE), 1);
    }

    #[test]
    fn a_stale_count_heals_after_the_lease() {
        let store = MemoryStore::new();
        let a = [7u8; 32];
        assert_eq!(reserve(&store, &a, 1, 1_000, LEASE, u64::MAX), Reserve::Held);
        assert_eq!(reserve(&store, &a, 1, 1_000 + LEASE, LEASE, u64::MAX), Reserve::OverCap);
        assert_eq!(reserve(&store, &a, 1, 1_001 + LEASE, LEASE, u64::MAX), Reserve::Held);
    }

    /// Another worker's reservation, run by a racing store.
    type Other<'a> = Box<dyn FnOnce(&MemoryStore) -> Reserve + 'a>;

    /// A store that runs `other` (another worker's reservation) once, at the first `get` of a held
    /// key that finds it missing (`on_write` false: the other worker read "missing" at the same
    /// moment), or just before the first write of a held key (`on_write` true).
    struct Racing<'a> {
        inner: &'a MemoryStore,
        on_write: bool,
        other: std::cell::Cell<Option<Other<'a>>>,
        other_got: std::cell::Cell<Option<Reserve>>,
    }

    impl Racing<'_> {
        fn run_other(&self) {
            if let Some(other) = self.other.take() {
                self.other_got.set(Some(other(self.inner)));
            }
        }
    }

    impl SharedStore for Racing<'_> {
        fn get(&self, key: &str) -> Result<Option<(Vec<u8>, u32)>, StoreError> {
            let got = self.inner.get(key)?;
            if !self.on_write && got.is_none() && key.starts_with("mcpf1:h:") {
                self.run_other();
            }
            Ok(got)
        }
        fn set(&self, key: &str, value: &[u8], cas: u32) -> Result<(), StoreError> {
            if self.on_write && key.starts_with("mcpf1:h:") {
                self.run_other();
            }
            self.inner.set(key, value, cas)
        }
    }

    /// Worker A reserves at `a_ms` through a racing store; worker B reserves at `b_ms` at the
    /// moment `on_write` says. Returns (A's result, B's result, the count afterwards).
    fn race(on_write: bool, a_ms: u64, b_ms: u64) -> (Reserve, Reserve, u64) {
        let inner = MemoryStore::new();
        crate::limits::init_lock(&inner).unwrap();
        let g = [9u8; 32];
        let racing = Racing {
            inner: &inner,
            on_write,
            other: std::cell::Cell::new(Some(Box::new(move |s: &MemoryStore| {
                reserve(s, &g, 8, b_ms, LEASE, u64::MAX)
            }))),
            other_got: std::cell::Cell::new(None),
        };
        let mine = reserve(&racing, &g, 8, a_ms, LEASE, u64::MAX);
        let theirs = racing.other_got.take().unwrap();
        (mine, theirs, held(&inner, &g, a_ms.max(b_ms), LEASE))
    }

    /// The invariant: the count is exactly the number of callouts told they may hold.
    fn counted(r: (Reserve, Reserve, u64)) -> bool {
        u64::try_from([r.0, r.1].iter().filter(|x| **x == Reserve::Held).count()).unwrap() == r.2
    }

    #[test]
    fn two_workers_that_both_read_missing_are_both_counted() {
        // Before the creation lock, both wrote a count of 1 with cas 0: (Held, Held, 1).
        let r = race(false, 1_000, 1_000);
        assert_eq!(r, (Reserve::Held, Reserve::Held, 2));
        assert!(counted(r));
    }

    #[test]
    fn a_reservation_while_the_first_write_holds_the_lock_is_not_held() {
        // B finds the lock taken and, in this single-threaded replay, can never see it released,
        // so it spins out and asks without waiting (fail closed: not held). On a real host it waits
        // for the lock and is then counted.
        let r = race(true, 1_000, 1_000);
        assert_eq!(r, (Reserve::Held, Reserve::Unavailable, 1));
        assert!(counted(r));
    }

    #[test]
    fn a_lock_holder_stalled_past_the_lease_does_not_overwrite_the_key() {
        // A took the lock at 1.0 s and stalls before its first write; B, at 2.1 s, finds the lease
        // run out, takes the lock, creates the key and counts 1. A's first write must not reset it.
        let r = race(true, 1_000, 2_100);
        assert_eq!(r, (Reserve::Held, Reserve::Held, 2));
        assert!(counted(r));
    }

    #[test]
    fn once_the_key_exists_the_cap_is_exact() {
        let store = MemoryStore::new();
        let g = [4u8; 32];
        for _ in 0..8 {
            assert_eq!(reserve(&store, &g, 8, 1_000, LEASE, u64::MAX), Reserve::Held);
        }
        assert_eq!(reserve(&store, &g, 8, 1_000, LEASE, u64::MAX), Reserve::OverCap);
        assert_eq!(held(&store, &g, 1_000, LEASE), 8);
    }

    #[test]
    fn a_grant_that_holds_is_tracked_and_capped_like_a_counted_one() {
        let store = MemoryStore::new();
        let (a, b) = ([1u8; 32], [2u8; 32]);
        assert_eq!(reserve(&store, &a, 8, 1_000, LEASE, 1), Reserve::Held);
        assert_eq!(crate::limits::tracked_grants(&store), 1);
        // A new grant past `max_tracked_grants` adds no key: asked without waiting.
        assert_eq!(reserve(&store, &b, 8, 1_000, LEASE, 1), Reserve::Unavailable);
        assert_eq!(store.len(), 4); // the lock, the grant count, a's marker, a's held count
                                    // The tracked grant keeps holding.
        assert_eq!(reserve(&store, &a, 8, 1_000, LEASE, 1), Reserve::Held);
        assert_eq!(held(&store, &a, 1_000, LEASE), 2);
        assert_eq!(crate::limits::tracked_grants(&store), 1);
    }

    #[test]
    fn keys_and_encoding() {
        assert_eq!(key(&[0xab; 32]), format!("mcpf1:h:{}", "ab".repeat(16)));
        assert_eq!(decode(&encode(5, 100), 100, 10), 5);
        assert_eq!(decode(b"short", 0, 10), 0);
    }
}
