//! Counters in this process's memory: the single-instance store.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use super::{Applied, StoreError};
use crate::counters::{Counter, Kind};

/// Counters in this process: the single-instance default (lost on restart, not shared).
/// At most [`MemoryStore::DEFAULT_CAPACITY`] counters are held (about 130 bytes each): an admitted
/// decision that would add one past it, once the expired ones are swept, fails (UNAVAILABLE)
/// rather than grow the process without bound or drop a counter that still counts. A decision
/// over a limit is answered as such, full or not.
pub struct MemoryStore {
    /// key → (window end in ms since the epoch, count).
    counts: Mutex<HashMap<String, (u64, u64)>>,
    decisions: AtomicU64,
    capacity: usize,
    /// When a full store was last swept (ms): at most once a second, so that a full store does
    /// not scan every counter on each decision.
    full_sweep_ms: AtomicU64,
}

/// Does an admitted decision write `c`: a count with hits, or a mark set (a mark checked is only read).
fn writes(c: &Counter) -> bool {
    match c.kind {
        Kind::Count => c.hits > 0,
        Kind::MarkSet => true,
        Kind::MarkCheck => false,
    }
}

/// Expired counters are swept every this many decisions.
const SWEEP_EVERY: u64 = 4096;

impl Default for MemoryStore {
    fn default() -> Self {
        Self::with_capacity(Self::DEFAULT_CAPACITY)
    }
}

impl MemoryStore {
    /// Counters held at most by default: about 130 MB.
    pub const DEFAULT_CAPACITY: usize = 1_000_000;

    pub fn new() -> Self {
        Self::default()
    }

    /// A store that holds at most `capacity` counters.
    pub fn with_capacity(capacity: usize) -> Self {
        MemoryStore {
            counts: Mutex::default(),
            decisions: AtomicU64::new(0),
            capacity,
            full_sweep_ms: AtomicU64::new(0),
        }
    }

    pub fn apply_at(&self, counters: &[Counter], now_ms: u64) -> Result<Applied, StoreError> {
        let mut map = self.counts.lock().map_err(|_| StoreError("memory store poisoned".into()))?;
        if self.decisions.fetch_add(1, Ordering::Relaxed) % SWEEP_EVERY == SWEEP_EVERY - 1 {
            map.retain(|_, (end, _)| *end > now_ms);
        }
        let before: Vec<u64> = counters
            .iter()
            .map(|c| match map.get(&c.key) {
                Some((end, n)) if *end > now_ms => *n,
                _ => 0,
            })
            .collect();
        let mut applied = Applied { admitted: true, now_ms, before };
        applied.admitted = counters.iter().enumerate().all(|(i, c)| !applied.over(i, c));
        if applied.admitted {
            let new = counters.iter().filter(|c| writes(c) && !map.contains_key(&c.key)).count();
            if new > 0 && map.len() + new > self.capacity {
                if now_ms.saturating_sub(self.full_sweep_ms.swap(now_ms, Ordering::Relaxed)) >= 1000 {
                    map.retain(|_, (end, _)| *end > now_ms);
                }
                if map.len() + new > self.capacity {
                    return Err(StoreError(format!("memory store full: {} counters held", map.len())));
                }
            }
            for (c, b) in counters.iter().zip(&applied.before).filter(|(c, _)| writes(c)) {
                if c.kind == Kind::MarkSet {
                    let entry = map.entry(c.key.clone()).or_insert((0, 0));
                    entry.0 = entry.0.max(now_ms + c.window_ms);
                    entry.1 = entry.1.max(now_ms);
                } else {
                    let end = now_ms - now_ms % c.window_ms.max(1) + c.window_ms;
                    map.insert(c.key.clone(), (end, b + c.hits));
                }
            }
        }
        Ok(applied)
    }

    /// Counters held (expired ones until the next sweep included).
    pub fn len(&self) -> usize {
        self.counts.lock().map(|m| m.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::MemoryStore;
    use crate::counters::{Counter, Kind};

    fn count(key: &str) -> Counter {
        Counter { key: key.to_owned(), kind: Kind::Count, limit: 2, hits: 1, window_ms: 60_000 }
    }

    #[test]
    fn a_full_store_refuses_new_counters_until_old_ones_expire() {
        let m = MemoryStore::with_capacity(2);
        assert!(m.apply_at(&[count("a"), count("b")], 1_000).unwrap().admitted);
        // A counter it holds still counts; a new one does not fit.
        assert_eq!(m.apply_at(&[count("a")], 2_000).unwrap().before, [1]);
        assert_eq!(m.apply_at(&[count("c")], 2_000).unwrap_err().0, "memory store full: 2 counters held");
        assert_eq!(m.len(), 2);
        // A decision over its limit is answered as one, full or not (a is at 2 of 2).
        assert!(!m.apply_at(&[count("a"), count("d")], 2_500).unwrap().admitted);
        // Once their window ended, they are swept to make room.
        assert!(m.apply_at(&[count("c")], 60_000).unwrap().admitted);
        assert_eq!(m.len(), 1);
    }
}
