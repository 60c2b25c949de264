//! The time source of the service (Unix seconds); tests inject a [`ManualClock`].

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// The time source (Unix seconds); tests inject a [`ManualClock`].
pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> i64;
}

/// The system clock.
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> i64 {
        SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
    }
}

/// A clock that moves only when told (tests).
pub struct ManualClock(AtomicI64);

impl ManualClock {
    pub fn new(now: i64) -> Arc<ManualClock> {
        Arc::new(ManualClock(AtomicI64::new(now)))
    }

    pub fn advance(&self, secs: i64) {
        self.0.fetch_add(secs, Ordering::SeqCst);
    }

    pub fn set(&self, now: i64) {
        self.0.store(now, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> i64 {
        self.0.load(Ordering::SeqCst)
    }
}
