//! Decisions that cannot be answered in time count nothing: against a real `redis-server` behind
//! a proxy that delays its replies (tests/common).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Redis, SlowProxy};
use mcp_ratelimit::counters::Counter;
use mcp_ratelimit::decide::{decide, Decided};
use mcp_ratelimit::metrics::Metrics;
use mcp_ratelimit::store::{Applied, RedisStore, Store};

fn c(key: &str, limit: u64, hits: u64, window_ms: u64) -> Counter {
    Counter::count(key, limit, hits, window_ms)
}

fn counters(list: &[Counter]) -> Arc<[Counter]> {
    list.to_vec().into()
}

/// Waits up to 3 s for `cond`.
async fn eventually(mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + Duration::from_secs(3);
    while !cond() {
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    true
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_count_whose_reply_comes_too_late_is_taken_back() {
    let r = Redis::start();
    let proxy = SlowProxy::start(r.port).await;
    let store = Arc::new(Store::Redis(RedisStore::new(&proxy.url(), Duration::from_secs(5)).unwrap()));
    let metrics = Arc::new(Metrics::default());
    // Loads the script into Redis and learns its clock.
    let warm = decide(&store, &metrics, counters(&[c("t:warm", 5, 1, 3_600_000)]), Duration::from_secs(1)).await;
    assert!(matches!(warm, Decided::Applied(Applied { admitted: true, .. })), "{warm:?}");
    proxy.set_delay(250);
    let t = Instant::now();
    let late = decide(&store, &metrics, counters(&[c("t:late", 5, 2, 3_600_000)]), Duration::from_millis(50)).await;
    assert!(matches!(late, Decided::TimedOut), "{late:?}");
    assert!(t.elapsed() < Duration::from_millis(200), "gave up after {:?}", t.elapsed());
    // Redis ran the script in time (only its reply is slow): the count is there for now…
    assert_eq!(r.cli(&["GET", "t:late"]), "2");
    // …and taken back once the reply arrives.
    assert!(eventually(|| r.cli(&["GET", "t:late"]) == "0").await, "still {}", r.cli(&["GET", "t:late"]));
    assert!(eventually(|| metrics.late_undone.get() == 1).await);
    assert_eq!((metrics.late_expired.get(), metrics.late_undo_failed.get()), (0, 0));
    proxy.set_delay(0);
    // The whole limit is still there.
    let all = decide(&store, &metrics, counters(&[c("t:late", 5, 5, 3_600_000)]), Duration::from_secs(1)).await;
    assert!(matches!(all, Decided::Applied(Applied { admitted: true, .. })), "{all:?}");
    assert_eq!(r.cli(&["GET", "t:late"]), "5");
}

#[tokio::test]
async fn a_script_run_after_its_deadline_commits_nothing() {
    let r = Redis::start();
    let s = RedisStore::new(&r.url(), Duration::from_secs(5)).unwrap();
    // Without a known clock offset there is no deadline to send: the script runs as before.
    let past = Instant::now().checked_sub(Duration::from_millis(100)).unwrap();
    assert!(s.apply_by(&[c("t:first", 5, 1, 60_000)], Some(past)).await.unwrap().is_some());
    // Only a reply within 20 ms teaches the clock: on a loaded host, ask until one is.
    let give_up = Instant::now() + Duration::from_secs(10);
    s.ping().await.unwrap();
    while !s.clock_known() && Instant::now() < give_up {
        tokio::time::sleep(Duration::from_millis(10)).await;
        s.ping().await.unwrap();
    }
    assert!(s.clock_known(), "no reply from redis within 20 ms in 10 s");
    let past = Instant::now().checked_sub(Duration::from_millis(100)).unwrap();
    assert_eq!(s.apply_by(&[c("t:d", 5, 1, 60_000)], Some(past)).await.unwrap(), None);
    assert_eq!(r.cli(&["EXISTS", "t:d"]), "0");
    let soon = Instant::now() + Duration::from_secs(1);
    assert!(s.apply_by(&[c("t:d", 5, 1, 60_000)], Some(soon)).await.unwrap().unwrap().admitted);
    assert_eq!(r.cli(&["GET", "t:d"]), "1");
}

#[tokio::test]
async fn undo_lowers_only_the_same_window_and_never_below_zero() {
    let r = Redis::start();
    let s = RedisStore::new(&r.url(), Duration::from_secs(5)).unwrap();
    let list = [c("t:u", 10, 3, 3_600_000), c("t:v", 10, 2, 3_600_000)];
    let a = s.apply(&list).await.unwrap();
    assert!(a.admitted);
    assert_eq!(s.undo(&list, &a).await.unwrap(), 2);
    assert_eq!((r.cli(&["GET", "t:u"]).as_str(), r.cli(&["GET", "t:v"]).as_str()), ("0", "0"));
    // A second undo finds nothing left to lower.
    assert_eq!(s.undo(&list, &a).await.unwrap(), 0);
    assert_eq!(r.cli(&["GET", "t:u"]), "0");
    // A decision of the previous window is not taken back from this one.
    let b = s.apply(&list).await.unwrap();
    let earlier = Applied { now_ms: b.now_ms - 3_600_000, ..b };
    assert_eq!(s.undo(&list, &earlier).await.unwrap(), 0);
    assert_eq!(r.cli(&["GET", "t:u"]), "3");
}
