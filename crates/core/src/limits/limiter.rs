//! [`Limiter`]: taking one unit from each limit of a call, giving units back, and the creation lock.

use super::key::{counter_key, grant_key, GRANTS_KEY, LOCK_KEY};
use super::store::{SharedStore, StoreError};
use super::value::{decode, decode_log, decode_u64, encode, encode_log};
use super::Limit;
use super::{Admission, NotAdmitted, Taken, Unavailable};
use crate::identity::grant::GrantId;
use crate::terms::{Algorithm, Scope};

/// How long a creation lock is held at most before others may take it, in ms.
const LOCK_LEASE_MS: u64 = 1000;
/// Bounded retries of one CAS increment before the call is refused.
pub const MAX_CAS_RETRIES: u32 = 128;
/// Bounded spins waiting for the creation lock.
const LOCK_SPINS: u32 = 50_000;
/// The cas of a key's first write: inserts a missing key, never overwrites one another worker
/// created (see `create_locked`).
const CREATE_CAS: u32 = u32::MAX;

/// The limiter: a store, the clock reading for this call, and the grant cap.
pub struct Limiter<'s> {
    pub store: &'s dyn SharedStore,
    /// Milliseconds since the Unix epoch (UTC).
    pub now_ms: u64,
    pub max_tracked_grants: u64,
}

impl<'s> Limiter<'s> {
    /// Take one unit from every limit, or none. Errors: [`NotAdmitted`].
    pub fn admit<'p>(&self, limits: &[&'p Limit], grant: &GrantId) -> Result<Admission, NotAdmitted<'p>> {
        let mut adm = Admission::default();
        for &limit in limits {
            match self.take(limit, grant) {
                Ok(t) => adm.push(t),
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
        for taken in adm.taken() {
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

    fn take<'p>(&self, limit: &'p Limit, grant: &GrantId) -> Result<Taken, NotAdmitted<'p>> {
        let key = counter_key(limit, grant);
        let len = limit.window.seconds();
        let unavailable = |u: Unavailable| NotAdmitted::Unavailable(u);
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
            // The new value, on the stack for a fixed window (16 bytes), in `log` for a sliding one.
            let fixed: [u8; 16];
            let log: Vec<u8>;
            let (next, taken): (&[u8], Taken) = match limit.algorithm {
                Algorithm::Fixed => {
                    let now_s = self.now_ms / 1000;
                    let current = now_s - now_s % len;
                    let (stored_ws, stored_count) = decode(&value).ok_or(unavailable(Unavailable::CorruptValue))?;
                    // Another worker may have read the clock a moment later and opened the next window.
                    let ws = stored_ws.max(current);
                    let count = if ws == stored_ws { stored_count } else { 0 };
                    if count >= limit.max {
                        let retry = ((ws + len) * 1000).saturating_sub(self.now_ms).div_ceil(1000).max(1);
                        return Err(NotAdmitted::Limited { limit, retry_after_seconds: retry });
                    }
                    fixed = encode(ws, count + 1);
                    (&fixed, Taken::Fixed { key, window_start: ws })
                }
                Algorithm::Sliding => {
                    let times = decode_log(&value).ok_or(unavailable(Unavailable::CorruptValue))?;
                    let horizon = self.now_ms.saturating_sub(len * 1000);
                    // Expired entries are dropped on every write: the log never holds more than max.
                    let mut live: Vec<u64> = times.into_iter().filter(|&t| t > horizon).collect();
                    if live.len() as u64 >= limit.max {
                        let oldest = live.iter().copied().min().unwrap_or(self.now_ms);
                        let retry = (oldest + len * 1000).saturating_sub(self.now_ms).div_ceil(1000).max(1);
                        return Err(NotAdmitted::Limited { limit, retry_after_seconds: retry });
                    }
                    live.push(self.now_ms);
                    log = encode_log(&live);
                    (&log, Taken::Sliding { key, at_ms: self.now_ms })
                }
            };
            match self.store.set(&key, next, cas) {
                Ok(()) => return Ok(taken),
                Err(StoreError::CasMismatch) => continue,
                Err(StoreError::Host(e)) => return Err(unavailable(Unavailable::Host(e))),
            }
        }
        Err(unavailable(Unavailable::CasRetriesExhausted))
    }

    /// Create `key` with `initial` unless it exists, under the creation lock, registering the grant
    /// behind `grant_marker` against the cap if it is new. The host cannot create a key by
    /// compare-and-swap (a set on a missing key always inserts, and a set with cas 0 always
    /// overwrites), so every first write of a counted key goes through this lock: two workers that
    /// both read "missing" cannot both write a first value and lose an increment. The first write
    /// itself never overwrites an existing key either, so a holder that stalled past the lock's
    /// lease (1 s) leaves alone the key another worker created meanwhile.
    /// Errors: [`Unavailable`] (shared data failed, the lock stayed busy, or the grant cap).
    pub fn create(&self, key: &str, initial: &[u8], grant_marker: Option<&str>) -> Result<(), Unavailable> {
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
        // Never an overwrite: with the lock's lease run out (this worker stalled for over a second),
        // another worker may have created the key and counted on it meanwhile. A set with a cas
        // inserts a missing key, and fails on an existing one unless its cas is that value; the
        // host's cas values count up from 1 across all keys, so an existing key holds exactly
        // `CREATE_CAS` only for one set in 2^32.
        match self.store.set(key, initial, CREATE_CAS) {
            Ok(()) | Err(StoreError::CasMismatch) => Ok(()),
            Err(e) => Err(e.into()),
        }
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
