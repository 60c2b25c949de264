//! The limiter's state in process memory: one store per Envoy process, shared by every worker
//! thread and every configuration (a reload keeps the counts, as proxy-wasm shared data does).
//!
//! The core's limiter (`mcp_policy_core::limits`) needs get and compare-and-swap on byte values
//! ([`SharedStore`]). Here the keys are spread over [`SHARDS`] maps, each behind its own mutex,
//! chosen by a hash of the key: a call takes the lock of its own counter's shard only, so calls of
//! different grants rarely meet, and no lock is global. The cas values come from one atomic
//! counter (never 0, as the host's `nextCas`). A compare-and-swap under the shard's lock is exact
//! across threads: the limiter admits at most `max` calls per window. The number of keys is bounded
//! by the limiter itself (`gateway.max_tracked_grants` grants, a fixed number of keys each).
//!
//! Keys are hashed with foldhash (hashbrown's default hasher), once for the shard and once in its
//! map: std's SipHash cost the allowed call about 850 instructions in its four hashes of a 40-byte
//! key. A key is a counter's base XOR the grant id, itself SHA-256 of a credential the client
//! chooses, so each hasher is seeded from the operating system's randomness (through std's
//! `RandomState`) rather than from foldhash's own (addresses and the time). foldhash does not claim
//! to resist an attacker who times many requests to learn its seed; here the harm such an attacker
//! could do is bounded: at most `gateway.max_tracked_grants` grants are stored, each key is a
//! SHA-256 output they cannot choose freely, and a crowded shard costs time under its own lock, not
//! correctness. The shard is picked by foldhash's `quality` variant, whose low bits are mixed for
//! use outside a hash table.

use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use mcp_policy_core::limits::{SharedStore, StoreError, GRANTS_KEY};

/// Shards of the store: more than the worker threads of any Envoy this runs in.
pub const SHARDS: usize = 64;

type Keyed = foldhash::fast::SeedableRandomState;
type Spread = foldhash::quality::SeedableRandomState;

type Shard = Mutex<HashMap<String, (Vec<u8>, u32), Keyed>>;

/// A seed drawn from the operating system's randomness (std's `RandomState` keys).
fn os_seed() -> u64 {
    std::collections::hash_map::RandomState::new().hash_one(0u64)
}

/// A map's hasher state, seeded from the operating system's randomness.
fn keyed() -> Keyed {
    Keyed::with_seed(os_seed(), foldhash::SharedSeed::global_random())
}

/// A sharded in-memory [`SharedStore`] with the host's CAS semantics.
pub struct ShardedStore {
    shards: Vec<Shard>,
    /// Picks a key's shard; seeded apart from the maps' own hashers.
    spread: Spread,
    last_cas: AtomicU32,
    /// Successful writes of [`GRANTS_KEY`] (one more grant each) not yet added to the
    /// `mcp_policy_tracked_grants` gauge.
    registered: AtomicU64,
}

impl Default for ShardedStore {
    fn default() -> Self {
        ShardedStore {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::with_hasher(keyed()))).collect(),
            spread: Spread::with_seed(os_seed(), foldhash::SharedSeed::global_random()),
            last_cas: AtomicU32::new(0),
            registered: AtomicU64::new(0),
        }
    }
}

impl ShardedStore {
    fn shard(&self, key: &str) -> Result<&Shard, StoreError> {
        let i = usize::try_from(self.spread.hash_one(key) % SHARDS as u64).unwrap_or(0);
        self.shards.get(i).ok_or_else(|| StoreError::Host("no shard".into()))
    }

    fn next_cas(&self) -> u32 {
        loop {
            let cas = self.last_cas.fetch_add(1, Ordering::Relaxed).wrapping_add(1);
            if cas != 0 {
                return cas;
            }
        }
    }

    /// Grants registered since the last call (see `registered`).
    pub fn take_registered_grants(&self) -> u64 {
        self.registered.swap(0, Ordering::Relaxed)
    }

    /// Number of keys stored.
    pub fn len(&self) -> usize {
        self.shards.iter().map(|s| s.lock().map(|m| m.len()).unwrap_or(0)).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl SharedStore for ShardedStore {
    fn get(&self, key: &str) -> Result<Option<(Vec<u8>, u32)>, StoreError> {
        let shard = self.shard(key)?.lock().map_err(|_| StoreError::Host("poisoned shard".into()))?;
        Ok(shard.get(key).cloned())
    }

    fn set(&self, key: &str, value: &[u8], cas: u32) -> Result<(), StoreError> {
        let mut shard = self.shard(key)?.lock().map_err(|_| StoreError::Host("poisoned shard".into()))?;
        match shard.get_mut(key) {
            Some(entry) => {
                if cas != 0 && cas != entry.1 {
                    return Err(StoreError::CasMismatch);
                }
                entry.0.clear();
                entry.0.extend_from_slice(value);
                entry.1 = self.next_cas();
            }
            None => {
                let next = self.next_cas();
                shard.insert(key.to_owned(), (value.to_vec(), next));
            }
        }
        drop(shard);
        if key == GRANTS_KEY {
            self.registered.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }
}

/// The store of this process.
pub fn process_store() -> &'static ShardedStore {
    static STORE: OnceLock<ShardedStore> = OnceLock::new();
    STORE.get_or_init(ShardedStore::default)
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcp_policy_core::limits::StoreError;

    #[test]
    fn cas_semantics_match_the_host() {
        let s = ShardedStore::default();
        assert_eq!(s.get("k").unwrap(), None);
        s.set("k", b"1", 0).unwrap();
        let (v, cas) = s.get("k").unwrap().unwrap();
        assert_eq!(v, b"1");
        assert_ne!(cas, 0);
        assert_eq!(s.set("k", b"2", cas.wrapping_add(1)), Err(StoreError::CasMismatch));
        s.set("k", b"2", cas).unwrap();
        assert_eq!(s.set("k", b"3", cas), Err(StoreError::CasMismatch));
        assert_eq!(s.get("k").unwrap().unwrap().0, b"2");
        // A key that does not exist is inserted whatever cas is passed (the host's behaviour).
        s.set("new", b"x", 12345).unwrap();
        assert_eq!(s.len(), 2);
    }

    #[test]
    fn concurrent_increments_are_exact() {
        let s = ShardedStore::default();
        s.set("c", &0u64.to_le_bytes(), 0).unwrap();
        std::thread::scope(|scope| {
            for _ in 0..8 {
                scope.spawn(|| {
                    for _ in 0..1000 {
                        loop {
                            let (v, cas) = s.get("c").unwrap().unwrap();
                            let n = u64::from_le_bytes(v.try_into().unwrap()) + 1;
                            if s.set("c", &n.to_le_bytes(), cas).is_ok() {
                                break;
                            }
                        }
                    }
                });
            }
        });
        let (v, _) = s.get("c").unwrap().unwrap();
        assert_eq!(u64::from_le_bytes(v.try_into().unwrap()), 8000);
    }

    /// Counter-shaped keys spread over the shards (1,000 keys leave one of 64 empty with a
    /// probability near 1e-5; at least 60 of 64 are asked for).
    #[test]
    fn keys_spread_over_the_shards() {
        let s = ShardedStore::default();
        let used: std::collections::HashSet<*const Shard> =
            (0..1000).map(|i| std::ptr::from_ref(s.shard(&format!("mcpf1:c:{i:032x}")).unwrap())).collect();
        assert!(used.len() >= 60, "{} shards of {SHARDS}", used.len());
    }

    #[test]
    fn grant_registrations_are_counted_once() {
        let s = ShardedStore::default();
        s.set(GRANTS_KEY, b"1", 0).unwrap();
        s.set(GRANTS_KEY, b"2", 0).unwrap();
        assert_eq!(s.take_registered_grants(), 2);
        assert_eq!(s.take_registered_grants(), 0);
    }
}
