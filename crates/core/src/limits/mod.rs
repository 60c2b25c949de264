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
//!
//! - `store`: the shared-data operations and an in-memory store with the host's CAS semantics;
//! - `key`: the shared-data keys (counter keys, grant markers, the lock and the grant count);
//! - `value`: the stored values' byte layouts (fixed-window counters, sliding-window logs);
//! - `limiter`: [`Limiter`], taking and giving back units, and the creation lock.
//!
//! Layer `limits` (crate docs); may use: `terms`, `wire`, `identity`.

pub mod held;
mod key;
mod limit;
mod limiter;
pub mod marks;
mod store;
mod value;

pub use key::{
    counter_base, counter_key, grant_key, mark_base, mark_key, pin_mismatch_key, pin_verified_key, within_policy, Key,
    GRANTS_KEY, LOCK_KEY, PREFIX,
};
pub use limiter::{init_lock, tracked_grants, Limiter, MAX_CAS_RETRIES};
pub use store::{MemoryStore, SharedStore, StoreError};
#[cfg(test)]
use value::decode;

pub use limit::Limit;

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

/// Why [`Limiter::admit`] took no unit for a call. The gate turns it into
/// `crate::outcome::refusal::Refusal::RateLimited` or `LimiterUnavailable`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotAdmitted<'p> {
    /// `limit` has no room left in the current window; whole seconds until it ends, at least 1.
    Limited { limit: &'p Limit, retry_after_seconds: u64 },
    /// The limiter could not count the call; it is refused (fail closed).
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
    Fixed { key: Key, window_start: u64 },
    /// A sliding-log entry at `at_ms`.
    Sliding { key: Key, at_ms: u64 },
}

/// Units taken by an admitted call, to give back if the call is refused after all. The first unit
/// is kept inline: a call with one limit (the common case) allocates nothing for its admission.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Admission {
    first: Option<Taken>,
    more: Vec<Taken>,
}

impl Admission {
    fn push(&mut self, t: Taken) {
        match self.first {
            None => self.first = Some(t),
            Some(_) => self.more.push(t),
        }
    }

    /// The units taken, in order.
    pub fn taken(&self) -> impl Iterator<Item = &Taken> {
        self.first.iter().chain(&self.more)
    }
}

#[cfg(test)]
mod tests;
