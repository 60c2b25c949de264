//! Rate-limit arithmetic over proxy-wasm shared data, exact across Envoy worker threads.
//!
//! Shared data (proxy-wasm ABI 0.2.1 `proxy_get_shared_data` / `proxy_set_shared_data`) is one
//! key-value map per `vm_id` and Envoy process, shared by all workers. Its only atomic operation is
//! compare-and-swap: `set(key, value, cas)` fails with `CasMismatch` if the key's current cas differs.
//! Two gaps in that primitive shape this module:
//!
//! - `cas = 0` is an unconditional set, and a key that does not exist yet is inserted whatever cas is
//!   passed (proxy-wasm-cpp-host `SharedData::set`). Two workers creating the same counter at once
//!   could each write "count 1" and lose an update. So keys are created only under a creation lock
//!   (itself a CAS-guarded key), and every increment is a CAS on an existing key.
//! - There is no delete. Each (counter, window length, scope value) uses one key forever, reused
//!   across windows: a new window overwrites the old count. Memory grows with distinct grants, not
//!   with time, and `gateway.max_tracked_grants` caps the grants.
//!
//! A call with several limits takes one unit from each in turn; if any refuses, the units already
//! taken are given back, so a refused call leaves every counter as it was. Between the take and
//! the give-back another call may see the higher count and be refused too: the error is always
//! towards refusing, never towards admitting more than `max`.
//!
//! Windows are fixed and UTC-aligned (PolicyLayer): a `minute` window runs from :00 to :59. A
//! client can therefore make up to 2×max calls within one window length across a boundary (max at
//! :59, max at :00); that is the documented cost of fixed windows.

use std::collections::HashMap;
use std::sync::Mutex;

use sha2::{Digest, Sha256};

use crate::grant::hex;
use crate::policy::{Algorithm, Limit, Scope};

/// A shared-data failure other than a CAS mismatch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreError {
    /// The key's cas changed since it was read.
    CasMismatch,
    /// Any other host status; the limiter fails closed.
    Host(String),
}

/// The proxy-wasm shared-data operations the limiter needs.
pub trait SharedStore {
    /// The value and its cas, or `None` if the key does not exist.
    fn get(&self, key: &str) -> Result<Option<(Vec<u8>, u32)>, StoreError>;
    /// Store `value`. `cas == 0` is unconditional; otherwise fails with `CasMismatch` unless the key
    /// exists with that cas, or does not exist (then it is inserted: the host's behaviour).
    fn set(&self, key: &str, value: &[u8], cas: u32) -> Result<(), StoreError>;
}

/// An in-memory [`SharedStore`] with exactly the host's CAS semantics, for native tests.
#[derive(Debug, Default)]
pub struct MemoryStore {
    inner: Mutex<MemoryInner>,
}

#[derive(Debug, Default)]
struct MemoryInner {
    entries: HashMap<String, (Vec<u8>, u32)>,
    last_cas: u32,
}

impl MemoryStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of keys stored.
    pub fn len(&self) -> usize {
        self.inner.lock().map(|g| g.entries.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Sum of key and value bytes, to report shared-data memory per grant.
    pub fn bytes(&self) -> usize {
        self.inner.lock().map(|g| g.entries.iter().map(|(k, (v, _))| k.len() + v.len()).sum()).unwrap_or(0)
    }
}

impl SharedStore for MemoryStore {
    fn get(&self, key: &str) -> Result<Option<(Vec<u8>, u32)>, StoreError> {
        let g = self.inner.lock().map_err(|_| StoreError::Host("poisoned".into()))?;
        Ok(g.entries.get(key).cloned())
    }

    fn set(&self, key: &str, value: &[u8], cas: u32) -> Result<(), StoreError> {
        let mut g = self.inner.lock().map_err(|_| StoreError::Host("poisoned".into()))?;
        // Mirrors proxy-wasm-cpp-host SharedData::nextCas: a global counter that skips 0.
        g.last_cas = g.last_cas.wrapping_add(1).max(1);
        let next = g.last_cas;
        match g.entries.get_mut(key) {
            Some(entry) => {
                if cas != 0 && cas != entry.1 {
                    return Err(StoreError::CasMismatch);
                }
                *entry = (value.to_vec(), next);
            }
            None => {
                g.entries.insert(key.to_owned(), (value.to_vec(), next));
            }
        }
        Ok(())
    }
}

/// SHA-256 of the grant's credential; the raw token is never stored or logged.
pub type GrantId = [u8; 32];

/// Key prefix of everything this filter stores; bump on any layout change.
pub const PREFIX: &str = "mcpf1:";
/// The creation lock: value is the lease expiry in ms since the epoch (0: free).
pub const LOCK_KEY: &str = "mcpf1:lock";
/// The number of distinct grants tracked so far (u64 LE).
pub const GRANTS_KEY: &str = "mcpf1:grants";
/// How long a creation lock is held at most before others may take it, in ms.
const LOCK_LEASE_MS: u64 = 1000;
/// Bounded retries of one CAS increment before the call is refused.
pub const MAX_CAS_RETRIES: u32 = 128;
/// Bounded spins waiting for the creation lock.
const LOCK_SPINS: u32 = 50_000;

fn push_field(h: &mut Sha256, bytes: &[u8]) {
    // Length-prefixed, so ("a_b","c") and ("a","b_c") can never hash the same input.
    h.update((bytes.len() as u64).to_be_bytes());
    h.update(bytes);
}

/// The shared-data key of one counter: a hash of the canonical tuple (counter name, scope,
/// scope value, window length in seconds, algorithm). 128 bits of it are kept: 32 hex characters.
pub fn counter_key(limit: &Limit, grant: &GrantId) -> String {
    let mut h = Sha256::new();
    push_field(&mut h, b"counter");
    push_field(&mut h, limit.counter.as_bytes());
    match limit.scope {
        Scope::Grant => {
            push_field(&mut h, b"grant");
            push_field(&mut h, grant);
        }
        Scope::Global => {
            push_field(&mut h, b"global");
            push_field(&mut h, b"");
        }
    }
    push_field(&mut h, &limit.window.seconds().to_be_bytes());
    push_field(&mut h, limit.algorithm.name().as_bytes());
    let digest = h.finalize();
    format!("{PREFIX}c:{}", hex(digest.get(..16).unwrap_or(&[])))
}

/// The marker key that records a grant as tracked.
pub fn grant_key(grant: &GrantId) -> String {
    format!("{PREFIX}g:{}", hex(grant.get(..16).unwrap_or(&[])))
}

/// A counter value: window start (seconds since the epoch, UTC) and count, 16 bytes little-endian.
fn encode(window_start: u64, count: u64) -> [u8; 16] {
    let mut out = [0u8; 16];
    let (a, b) = out.split_at_mut(8);
    a.copy_from_slice(&window_start.to_le_bytes());
    b.copy_from_slice(&count.to_le_bytes());
    out
}

fn decode(v: &[u8]) -> Option<(u64, u64)> {
    let a: [u8; 8] = v.get(..8)?.try_into().ok()?;
    let b: [u8; 8] = v.get(8..16)?.try_into().ok()?;
    (v.len() == 16).then(|| (u64::from_le_bytes(a), u64::from_le_bytes(b)))
}

/// A sliding-window log: count (u64 LE) then that many admission times (ms since the epoch, u64 LE).
fn encode_log(times: &[u64]) -> Vec<u8> {
    let mut out = Vec::with_capacity(8 + 8 * times.len());
    out.extend_from_slice(&(times.len() as u64).to_le_bytes());
    for t in times {
        out.extend_from_slice(&t.to_le_bytes());
    }
    out
}

fn decode_log(v: &[u8]) -> Option<Vec<u64>> {
    let n = usize::try_from(decode_u64(v.get(..8)?)?).ok()?;
    let rest = v.get(8..)?;
    if rest.len() != n.checked_mul(8)? {
        return None;
    }
    rest.chunks_exact(8).map(decode_u64).collect()
}

fn decode_u64(v: &[u8]) -> Option<u64> {
    Some(u64::from_le_bytes(v.try_into().ok()?))
}

/// Why the limiter could not count a call; the call is refused (fail closed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unavailable {
    /// `MAX_CAS_RETRIES` compare-and-swaps in a row lost to other workers.
    CasRetriesExhausted,
    /// The creation lock stayed held by another worker.
    LockBusy,
    /// `gateway.max_tracked_grants` distinct grants are already tracked.
    GrantCapReached,
    /// A stored value was not in this filter's format.
    CorruptValue,
    /// Shared data returned an unexpected status.
    Host(String),
}

impl Unavailable {
    pub fn reason(&self) -> &'static str {
        match self {
            Unavailable::CasRetriesExhausted => "rate limiter contention: retries exhausted",
            Unavailable::LockBusy => "rate limiter busy",
            Unavailable::GrantCapReached => "too many distinct grants are tracked; new grants are refused",
            Unavailable::CorruptValue => "rate limiter state is unreadable",
            Unavailable::Host(_) => "rate limiter storage error",
        }
    }
}

/// A refused call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal<'p> {
    /// `limit` has no room left in the current window; whole seconds until it ends, at least 1.
    Limited {
        limit: &'p Limit,
        retry_after_seconds: u64,
    },
    Unavailable(Unavailable),
}

impl From<StoreError> for Unavailable {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::CasMismatch => Unavailable::CasRetriesExhausted,
            StoreError::Host(s) => Unavailable::Host(s),
        }
    }
}

/// One unit taken from one counter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Taken {
    /// From a fixed window starting at `window_start` (seconds since the epoch).
    Fixed { key: String, window_start: u64 },
    /// A sliding-log entry at `at_ms`.
    Sliding { key: String, at_ms: u64 },
}

/// Units taken by an admitted call, to give back if the call is refused after all.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Admission {
    pub taken: Vec<Taken>,
}

/// The limiter: a store, the clock reading for this call, and the grant cap.
pub struct Limiter<'s> {
    pub store: &'s dyn SharedStore,
    /// Milliseconds since the Unix epoch (UTC).
    pub now_ms: u64,
    pub max_tracked_grants: u64,
}

impl<'s> Limiter<'s> {
    /// Take one unit from every limit, or none. Errors: [`Refusal`].
    pub fn admit<'p>(&self, limits: &[&'p Limit], grant: &GrantId) -> Result<Admission, Refusal<'p>> {
        let mut adm = Admission::default();
        for &limit in limits {
            match self.take(limit, grant) {
                Ok(t) => adm.taken.push(t),
                Err(r) => {
                    self.give_back(&adm);
                    return Err(r);
                }
            }
        }
        Ok(adm)
    }

    /// Return the units of an admission (a batch refused after some elements were admitted).
    /// Units whose window has already ended are not returned: that count was reset anyway.
    pub fn give_back(&self, adm: &Admission) {
        for taken in &adm.taken {
            let key = match taken {
                Taken::Fixed { key, .. } | Taken::Sliding { key, .. } => key,
            };
            for _ in 0..MAX_CAS_RETRIES {
                let Ok(Some((v, cas))) = self.store.get(key) else { break };
                let next = match taken {
                    Taken::Fixed { window_start, .. } => match decode(&v) {
                        Some((ws, count)) if ws == *window_start && count > 0 => encode(ws, count - 1).to_vec(),
                        _ => break,
                    },
                    Taken::Sliding { at_ms, .. } => {
                        let Some(mut times) = decode_log(&v) else { break };
                        let Some(i) = times.iter().position(|t| t == at_ms) else { break };
                        times.swap_remove(i);
                        encode_log(&times)
                    }
                };
                match self.store.set(key, &next, cas) {
                    Err(StoreError::CasMismatch) => continue,
                    _ => break,
                }
            }
        }
    }

    fn take<'p>(&self, limit: &'p Limit, grant: &GrantId) -> Result<Taken, Refusal<'p>> {
        let key = counter_key(limit, grant);
        let len = limit.window.seconds();
        let unavailable = |u: Unavailable| Refusal::Unavailable(u);
        for _ in 0..MAX_CAS_RETRIES {
            let (value, cas) = match self.store.get(&key).map_err(|e| unavailable(e.into()))? {
                Some(found) => found,
                None => {
                    let marker = (limit.scope == Scope::Grant).then(|| grant_key(grant));
                    let initial = match limit.algorithm {
                        Algorithm::Fixed => encode(0, 0).to_vec(),
                        Algorithm::Sliding => encode_log(&[]),
                    };
                    self.create(&key, &initial, marker.as_deref()).map_err(unavailable)?;
                    continue;
                }
            };
            let (next, taken) = match limit.algorithm {
                Algorithm::Fixed => {
                    let now_s = self.now_ms / 1000;
                    let current = now_s - now_s % len;
                    let (stored_ws, stored_count) = decode(&value).ok_or(unavailable(Unavailable::CorruptValue))?;
                    // Another worker may have read the clock a moment later and opened the next window.
                    let ws = stored_ws.max(current);
                    let count = if ws == stored_ws { stored_count } else { 0 };
                    if count >= limit.max {
                        let retry = ((ws + len) * 1000).saturating_sub(self.now_ms).div_ceil(1000).max(1);
                        return Err(Refusal::Limited { limit, retry_after_seconds: retry });
                    }
                    (encode(ws, count + 1).to_vec(), Taken::Fixed { key: key.clone(), window_start: ws })
                }
                Algorithm::Sliding => {
                    let times = decode_log(&value).ok_or(unavailable(Unavailable::CorruptValue))?;
                    let horizon = self.now_ms.saturating_sub(len * 1000);
                    // Expired entries are dropped on every write: the log never holds more than max.
                    let mut live: Vec<u64> = times.into_iter().filter(|&t| t > horizon).collect();
                    if live.len() as u64 >= limit.max {
                        let oldest = live.iter().copied().min().unwrap_or(self.now_ms);
                        let retry = (oldest + len * 1000).saturating_sub(self.now_ms).div_ceil(1000).max(1);
                        return Err(Refusal::Limited { limit, retry_after_seconds: retry });
                    }
                    live.push(self.now_ms);
                    (encode_log(&live), Taken::Sliding { key: key.clone(), at_ms: self.now_ms })
                }
            };
            match self.store.set(&key, &next, cas) {
                Ok(()) => return Ok(taken),
                Err(StoreError::CasMismatch) => continue,
                Err(StoreError::Host(e)) => return Err(unavailable(Unavailable::Host(e))),
            }
        }
        Err(unavailable(Unavailable::CasRetriesExhausted))
    }

    /// Create `key` with `initial` unless it exists, under the creation lock, registering the grant
    /// behind `grant_marker` against the cap if it is new.
    fn create(&self, key: &str, initial: &[u8], grant_marker: Option<&str>) -> Result<(), Unavailable> {
        for _ in 0..LOCK_SPINS {
            if self.store.get(key)?.is_some() {
                return Ok(());
            }
            let (lock, lock_cas) = match self.store.get(LOCK_KEY)? {
                Some(found) => found,
                None => {
                    init_lock(self.store)?;
                    continue;
                }
            };
            if decode_u64(&lock).unwrap_or(u64::MAX) > self.now_ms {
                continue; // held by another worker
            }
            match self.store.set(LOCK_KEY, &(self.now_ms + LOCK_LEASE_MS).to_le_bytes(), lock_cas) {
                Ok(()) => {}
                Err(StoreError::CasMismatch) => continue,
                Err(e) => return Err(e.into()),
            }
            let result = self.create_locked(key, initial, grant_marker);
            self.release_lock();
            return result;
        }
        Err(Unavailable::LockBusy)
    }

    fn create_locked(&self, key: &str, initial: &[u8], grant_marker: Option<&str>) -> Result<(), Unavailable> {
        if self.store.get(key)?.is_some() {
            return Ok(());
        }
        if let Some(marker) = grant_marker {
            if self.store.get(marker)?.is_none() {
                let (tracked, cas) = match self.store.get(GRANTS_KEY)? {
                    Some((v, cas)) => (decode_u64(&v).ok_or(Unavailable::CorruptValue)?, cas),
                    None => (0, 0),
                };
                if tracked >= self.max_tracked_grants {
                    return Err(Unavailable::GrantCapReached);
                }
                self.store.set(GRANTS_KEY, &(tracked + 1).to_le_bytes(), cas)?;
                self.store.set(marker, b"1", 0)?;
            }
        }
        self.store.set(key, initial, 0)?;
        Ok(())
    }

    fn release_lock(&self) {
        for _ in 0..MAX_CAS_RETRIES {
            match self.store.get(LOCK_KEY) {
                Ok(Some((_, cas))) => {
                    if !matches!(self.store.set(LOCK_KEY, &0u64.to_le_bytes(), cas), Err(StoreError::CasMismatch)) {
                        return;
                    }
                }
                _ => return,
            }
        }
    }
}

/// Create the creation lock if it does not exist. Called when a plugin configuration loads, before
/// traffic, so that the lock's own first write cannot race with a lock holder.
pub fn init_lock(store: &dyn SharedStore) -> Result<(), Unavailable> {
    if store.get(LOCK_KEY)?.is_none() {
        store.set(LOCK_KEY, &0u64.to_le_bytes(), 0)?;
    }
    Ok(())
}

/// Distinct grants tracked so far (for the metric).
pub fn tracked_grants(store: &dyn SharedStore) -> u64 {
    match store.get(GRANTS_KEY) {
        Ok(Some((v, _))) => decode_u64(&v).unwrap_or(0),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Window;

    fn limit(counter: &str, window: Window, max: u64, scope: Scope) -> Limit {
        Limit {
            counter: counter.into(),
            window,
            max,
            scope,
            algorithm: Algorithm::Fixed,
            path: format!("tools.t.limits[{counter}]"),
        }
    }

    const T0: u64 = 1_700_000_040_000; // a minute boundary: 1700000040 % 60 == 0

    fn lim(store: &MemoryStore, now_ms: u64) -> Limiter<'_> {
        Limiter { store, now_ms, max_tracked_grants: 100 }
    }

    #[test]
    fn t0_is_a_minute_boundary() {
        assert_eq!((T0 / 1000) % 60, 0);
    }

    #[test]
    fn admits_max_then_refuses_with_retry_after() {
        let s = MemoryStore::new();
        let l = limit("c", Window::Minute, 3, Scope::Grant);
        let g = [1u8; 32];
        for i in 0..3 {
            assert!(lim(&s, T0 + 10_000 + i).admit(&[&l], &g).is_ok());
        }
        assert_eq!(lim(&s, T0 + 10_500).admit(&[&l], &g), Err(Refusal::Limited { limit: &l, retry_after_seconds: 50 }));
        // 59.001 s into the window: 0.999 s left rounds up to 1.
        assert_eq!(lim(&s, T0 + 59_001).admit(&[&l], &g), Err(Refusal::Limited { limit: &l, retry_after_seconds: 1 }));
        // The next window admits again, reusing the same key.
        let keys = s.len();
        assert!(lim(&s, T0 + 60_000).admit(&[&l], &g).is_ok());
        assert_eq!(s.len(), keys);
    }

    #[test]
    fn grants_and_counters_are_separate_and_global_is_shared() {
        let s = MemoryStore::new();
        let per = limit("c", Window::Minute, 1, Scope::Grant);
        let glob = limit("c", Window::Minute, 2, Scope::Global);
        let (a, b, c) = ([1u8; 32], [2u8; 32], [3u8; 32]);
        assert!(lim(&s, T0).admit(&[&per], &a).is_ok());
        assert!(lim(&s, T0).admit(&[&per], &b).is_ok());
        assert!(matches!(lim(&s, T0).admit(&[&per], &a), Err(Refusal::Limited { .. })));
        assert!(lim(&s, T0).admit(&[&glob], &a).is_ok());
        assert!(lim(&s, T0).admit(&[&glob], &b).is_ok());
        assert!(matches!(lim(&s, T0).admit(&[&glob], &c), Err(Refusal::Limited { .. })));
    }

    #[test]
    fn keys_cannot_collide_across_field_boundaries() {
        let g1 = [b'a'; 32];
        let a = counter_key(&limit("b_c", Window::Minute, 1, Scope::Grant), &g1);
        let b = counter_key(&limit("b", Window::Minute, 1, Scope::Grant), &g1);
        let c = counter_key(&limit("b_c", Window::Hour, 1, Scope::Grant), &g1);
        let d = counter_key(&limit("b_c", Window::Minute, 1, Scope::Global), &g1);
        let e = counter_key(&limit("b_c", Window::Minute, 1, Scope::Global), &[b'z'; 32]);
        assert_eq!(d, e, "global counters ignore the grant");
        let all = [&a, &b, &c, &d];
        for (i, x) in all.iter().enumerate() {
            for y in all.iter().skip(i + 1) {
                assert_ne!(x, y);
            }
        }
        assert_eq!(a.len(), "mcpf1:c:".len() + 32);
    }

    #[test]
    fn a_refusal_by_a_later_limit_gives_back_earlier_units() {
        let s = MemoryStore::new();
        let first = limit("first", Window::Minute, 5, Scope::Grant);
        let second = limit("second", Window::Minute, 1, Scope::Grant);
        let g = [7u8; 32];
        assert!(lim(&s, T0).admit(&[&first, &second], &g).is_ok());
        for _ in 0..3 {
            assert!(
                matches!(lim(&s, T0).admit(&[&first, &second], &g), Err(Refusal::Limited { limit, .. }) if limit.counter == "second")
            );
        }
        let (v, _) = s.get(&counter_key(&first, &g)).unwrap().unwrap();
        assert_eq!(decode(&v), Some((T0 / 1000, 1)));
    }

    #[test]
    fn grant_cap_refuses_new_grants_and_keeps_existing_ones() {
        let s = MemoryStore::new();
        let l = limit("c", Window::Minute, 100, Scope::Grant);
        let cap = |now| Limiter { store: &s, now_ms: now, max_tracked_grants: 2 };
        assert!(cap(T0).admit(&[&l], &[1; 32]).is_ok());
        assert!(cap(T0).admit(&[&l], &[2; 32]).is_ok());
        assert_eq!(cap(T0).admit(&[&l], &[3; 32]), Err(Refusal::Unavailable(Unavailable::GrantCapReached)));
        assert!(cap(T0).admit(&[&l], &[1; 32]).is_ok());
        assert_eq!(tracked_grants(&s), 2);
        // A second counter for a tracked grant does not count as a new grant.
        let other = limit("d", Window::Hour, 1, Scope::Grant);
        assert!(cap(T0).admit(&[&other], &[2; 32]).is_ok());
        assert_eq!(tracked_grants(&s), 2);
    }

    #[test]
    fn stale_clock_reads_do_not_reset_a_newer_window() {
        let s = MemoryStore::new();
        let l = limit("c", Window::Second, 1, Scope::Grant);
        let g = [9u8; 32];
        assert!(lim(&s, T0 + 1000).admit(&[&l], &g).is_ok());
        // A worker whose clock reading is from the previous second must not open a fresh window.
        assert!(matches!(lim(&s, T0 + 999).admit(&[&l], &g), Err(Refusal::Limited { .. })));
    }

    #[test]
    fn corrupt_values_fail_closed() {
        let s = MemoryStore::new();
        let l = limit("c", Window::Second, 1, Scope::Grant);
        let g = [9u8; 32];
        s.set(&counter_key(&l, &g), b"junk", 0).unwrap();
        assert_eq!(lim(&s, T0).admit(&[&l], &g), Err(Refusal::Unavailable(Unavailable::CorruptValue)));
    }

    #[test]
    fn memory_store_is_cas_faithful() {
        let s = MemoryStore::new();
        s.set("k", b"a", 0).unwrap();
        let (_, cas) = s.get("k").unwrap().unwrap();
        s.set("k", b"b", cas).unwrap();
        assert_eq!(s.set("k", b"c", cas), Err(StoreError::CasMismatch));
        assert_eq!(s.get("k").unwrap().unwrap().0, b"b");
        // Absent keys are inserted whatever cas says (the host's behaviour).
        s.set("new", b"x", 12345).unwrap();
        assert_eq!(s.get("new").unwrap().unwrap().0, b"x");
    }

    #[test]
    fn parallel_workers_admit_exactly_max() {
        use std::sync::atomic::{AtomicU64, Ordering};
        let s = MemoryStore::new();
        let l = limit("c", Window::Hour, 10, Scope::Grant);
        let admitted = AtomicU64::new(0);
        std::thread::scope(|sc| {
            for _ in 0..8 {
                sc.spawn(|| {
                    for _ in 0..25 {
                        if lim(&s, T0).admit(&[&l], &[5u8; 32]).is_ok() {
                            admitted.fetch_add(1, Ordering::SeqCst);
                        }
                    }
                });
            }
        });
        assert_eq!(admitted.load(Ordering::SeqCst), 10);
        let (v, _) = s.get(&counter_key(&l, &[5u8; 32])).unwrap().unwrap();
        assert_eq!(decode(&v), Some((T0 / 1000 - (T0 / 1000) % 3600, 10)));
    }
}
