//! One decision within the caller's time: a count is committed only if its answer can still reach
//! the caller, and taken back if it cannot.
//!
//! The caller (Envoy's gRPC client) sends its callout timeout as `grpc-timeout`, and gives up when
//! it runs out; the filter then refuses the call. A count committed for a call the filter refused
//! would use up quota for nothing, so:
//! - the decision waits at most its [`budget`]: `--redis-timeout`, and never past the caller's
//!   `grpc-timeout` less `--deadline-margin` (room for the answer's way back), so the service
//!   answers (`UNAVAILABLE` or `DEADLINE_EXCEEDED`) before the caller gives up;
//! - the Redis script gets that deadline in Redis's clock and commits nothing when it runs after it;
//! - a script that committed but whose reply arrives after the service gave up is taken back
//!   ([`crate::store::UNDO_SCRIPT`]): the script runs in a task of its own, which outlives the
//!   request and reads the late reply (for up to the store's reply wait).
//!
//! What remains: an `OK` sent in time that still reaches the caller too late (the network between
//! them slower than the margin) is counted for a refused call; a reply lost with its connection
//! after the script committed cannot be taken back. Both err on the side of fewer calls admitted.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::counters::Counter;
use crate::metrics::Metrics;
use crate::store::{Applied, RedisStore, Store, StoreError};

/// Most digits of a `grpc-timeout` value (gRPC over HTTP/2: `TimeoutValue` is 1 to 8 digits).
const MAX_TIMEOUT_DIGITS: usize = 8;

/// A `grpc-timeout` header value (gRPC over HTTP/2, PROTOCOL-HTTP2.md: 1 to 8 ASCII digits and a
/// unit `H`, `M`, `S`, `m`, `u` or `n`), or `None` if it is not one.
pub fn parse_grpc_timeout(v: &str) -> Option<Duration> {
    let digits = v.get(..v.len().checked_sub(1)?)?;
    if digits.is_empty() || digits.len() > MAX_TIMEOUT_DIGITS || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some(match v.get(v.len() - 1..)? {
        "H" => Duration::from_secs(n * 3600),
        "M" => Duration::from_secs(n * 60),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

/// How long one decision may wait for the store.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    pub wait: Duration,
    /// The caller's deadline, not `--redis-timeout`, set `wait`: running out is `DEADLINE_EXCEEDED`.
    pub by_caller: bool,
}

/// The budget of a decision: `redis_timeout`, cut to `caller - margin` when the caller sent a
/// `grpc-timeout`; `None` when that leaves no time at all (answered at once, nothing counted).
pub fn budget(redis_timeout: Duration, caller: Option<Duration>, margin: Duration) -> Option<Budget> {
    let Some(caller) = caller else { return Some(Budget { wait: redis_timeout, by_caller: false }) };
    let left = caller.checked_sub(margin).filter(|d| !d.is_zero())?;
    Some(if left < redis_timeout {
        Budget { wait: left, by_caller: true }
    } else {
        Budget { wait: redis_timeout, by_caller: false }
    })
}

/// How a decision ended.
#[derive(Debug)]
pub enum Decided {
    Applied(Applied),
    Failed(StoreError),
    /// No answer within the budget (nothing counted, or taken back when the reply comes).
    TimedOut,
}

/// Decide `counters` within `wait`.
pub async fn decide(store: &Arc<Store>, metrics: &Arc<Metrics>, counters: Arc<[Counter]>, wait: Duration) -> Decided {
    let redis = match store.as_ref() {
        Store::Memory(m) => {
            return match m.apply_at(&counters, crate::store::now_ms()) {
                Ok(a) => Decided::Applied(a),
                Err(e) => Decided::Failed(e),
            }
        }
        Store::Redis(_) => store.clone(),
    };
    let deadline = Instant::now() + wait;
    let (tx, mut rx) = oneshot::channel();
    let (task_metrics, task_counters) = (metrics.clone(), counters.clone());
    tokio::spawn(async move {
        let counters = task_counters;
        let Store::Redis(r) = redis.as_ref() else { return };
        let result = r.apply_by(&counters, Some(deadline)).await;
        // Sending fails once the decision gave up (or its request went away): the reply is late.
        if let Err(Ok(late)) = tx.send(result) {
            settle_late(r, &counters, late, &task_metrics).await;
        }
    });
    let result = tokio::time::timeout(wait, &mut rx).await;
    match result {
        Ok(Ok(Ok(Some(applied)))) => Decided::Applied(applied),
        Ok(Ok(Ok(None))) => {
            metrics.late_expired.inc();
            Decided::TimedOut
        }
        Ok(Ok(Err(e))) => Decided::Failed(e),
        Ok(Err(_)) => Decided::Failed(StoreError("the decision task ended without an answer".into())),
        Err(_) => {
            // A reply sent between the timer firing and this close is handled here; later ones by
            // the task, whose send now fails.
            rx.close();
            if let Ok(Ok(late)) = rx.try_recv() {
                let (store, metrics) = (store.clone(), metrics.clone());
                tokio::spawn(async move {
                    if let Store::Redis(r) = store.as_ref() {
                        settle_late(r, &counters, late, &metrics).await;
                    }
                });
            }
            Decided::TimedOut
        }
    }
}

/// A reply that came after its decision gave up: take back what it committed.
async fn settle_late(r: &RedisStore, counters: &[Counter], late: Option<Applied>, metrics: &Metrics) {
    match late {
        None => metrics.late_expired.inc(),
        Some(a) if a.admitted => match r.undo(counters, &a).await {
            Ok(_) => metrics.late_undone.inc(),
            Err(e) => {
                metrics.late_undo_failed.inc();
                tracing::warn!("a late decision's count could not be taken back: {}", e.0);
            }
        },
        Some(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grpc_timeout_values() {
        let ms = Duration::from_millis;
        assert_eq!(parse_grpc_timeout("100m"), Some(ms(100)));
        assert_eq!(parse_grpc_timeout("2S"), Some(ms(2000)));
        assert_eq!(parse_grpc_timeout("1M"), Some(ms(60_000)));
        assert_eq!(parse_grpc_timeout("1H"), Some(ms(3_600_000)));
        assert_eq!(parse_grpc_timeout("99999999u"), Some(Duration::from_micros(99_999_999)));
        assert_eq!(parse_grpc_timeout("5n"), Some(Duration::from_nanos(5)));
        for bad in ["", "m", "100", "100x", "123456789m", "-1m", "1.5S", "1 m", "é"] {
            assert_eq!(parse_grpc_timeout(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn budget_is_the_redis_timeout_cut_to_the_callers_deadline_less_the_margin() {
        let ms = Duration::from_millis;
        let b = |caller: Option<u64>| budget(ms(50), caller.map(ms), ms(20));
        assert_eq!(b(None), Some(Budget { wait: ms(50), by_caller: false }));
        assert_eq!(b(Some(100)), Some(Budget { wait: ms(50), by_caller: false }));
        assert_eq!(b(Some(60)), Some(Budget { wait: ms(40), by_caller: true }));
        assert_eq!(b(Some(21)), Some(Budget { wait: ms(1), by_caller: true }));
        assert_eq!(b(Some(20)), None);
        assert_eq!(b(Some(5)), None);
    }
}
