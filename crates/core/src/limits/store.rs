//! The proxy-wasm shared-data operations the limiter needs, and an in-memory store for native tests.

use std::collections::HashMap;
use std::sync::Mutex;

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
