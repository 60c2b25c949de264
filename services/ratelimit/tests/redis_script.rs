//! The Redis script's semantics, against a real `redis-server` this test starts (Debian's
//! `redis-server`; `make test` installs it when missing and run as root).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod common;

use std::time::{Duration, Instant};

use common::Redis;
use mcp_ratelimit::counters::Counter;
use mcp_ratelimit::store::RedisStore;

fn c(key: &str, limit: u64, hits: u64, window_ms: u64) -> Counter {
    Counter::count(key, limit, hits, window_ms)
}

fn store(r: &Redis) -> RedisStore {
    RedisStore::new(&r.url(), Duration::from_millis(500)).unwrap()
}

#[tokio::test]
async fn checks_all_then_increments_all_or_none() {
    let r = Redis::start();
    let s = store(&r);
    let a = s.apply(&[c("t:a", 10, 9, 60_000)]).await.unwrap();
    assert!(a.admitted);
    assert_eq!(a.before, vec![0]);
    // b has room, a has 1 left but 2 are asked: neither moves.
    let refused = s.apply(&[c("t:b", 5, 2, 60_000), c("t:a", 10, 2, 60_000)]).await.unwrap();
    assert!(!refused.admitted);
    assert_eq!(refused.before, vec![0, 9]);
    assert_eq!(r.cli(&["GET", "t:a"]), "9");
    assert_eq!(r.cli(&["EXISTS", "t:b"]), "0");
    // Exactly up to the limit is admitted.
    let ok = s.apply(&[c("t:b", 5, 2, 60_000), c("t:a", 10, 1, 60_000)]).await.unwrap();
    assert!(ok.admitted);
    assert_eq!((r.cli(&["GET", "t:a"]).as_str(), r.cli(&["GET", "t:b"]).as_str()), ("10", "2"));
    assert!(!s.apply(&[c("t:a", 10, 1, 60_000)]).await.unwrap().admitted);
}

#[tokio::test]
async fn a_batch_above_the_limit_consumes_nothing() {
    let r = Redis::start();
    let s = store(&r);
    assert!(!s.apply(&[c("t:batch", 10, 11, 60_000)]).await.unwrap().admitted);
    assert_eq!(r.cli(&["EXISTS", "t:batch"]), "0");
    assert!(s.apply(&[c("t:batch", 10, 10, 60_000)]).await.unwrap().admitted);
    assert_eq!(r.cli(&["GET", "t:batch"]), "10");
}

#[tokio::test]
async fn counters_expire_at_the_end_of_their_aligned_window() {
    let r = Redis::start();
    let s = store(&r);
    let a = s.apply(&[c("t:w", 3, 1, 3_600_000)]).await.unwrap();
    let pttl: u64 = r.cli(&["PTTL", "t:w"]).parse().unwrap();
    let expected = 3_600_000 - a.now_ms % 3_600_000;
    assert!(pttl <= expected && pttl + 2_000 >= expected, "pttl {pttl}, window ends in {expected}");
    // A one-second window: full now, empty in the next second.
    let s1 = s.apply(&[c("t:s", 1, 1, 1_000)]).await.unwrap();
    if s1.admitted {
        tokio::time::sleep(Duration::from_millis(1_000 - s1.now_ms % 1_000 + 50)).await;
        assert_eq!(r.cli(&["EXISTS", "t:s"]), "0");
        assert!(s.apply(&[c("t:s", 1, 1, 1_000)]).await.unwrap().admitted);
    }
}

#[tokio::test]
async fn zero_hits_checks_without_creating() {
    let r = Redis::start();
    let s = store(&r);
    let a = s.apply(&[c("t:z", 1, 0, 60_000)]).await.unwrap();
    assert!(a.admitted);
    assert_eq!(r.cli(&["EXISTS", "t:z"]), "0");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn exact_under_concurrency_across_instances() {
    let r = Redis::start();
    let stores = [std::sync::Arc::new(store(&r)), std::sync::Arc::new(store(&r))];
    let mut tasks = Vec::new();
    for i in 0..200 {
        let s = stores[i % 2].clone();
        tasks.push(tokio::spawn(async move { s.apply(&[c("t:par", 10, 1, 3_600_000)]).await.unwrap().admitted }));
    }
    let mut admitted = 0;
    for t in tasks {
        admitted += usize::from(t.await.unwrap());
    }
    assert_eq!(admitted, 10);
    assert_eq!(r.cli(&["GET", "t:par"]), "10");
}

#[tokio::test]
async fn redis_down_fails_fast_and_recovers_without_restart() {
    let mut r = Redis::start();
    let port = r.port;
    let s = store(&r);
    assert!(s.apply(&[c("t:r", 5, 1, 3_600_000)]).await.unwrap().admitted);
    r.stop();
    let t = Instant::now();
    assert!(s.apply(&[c("t:r", 5, 1, 3_600_000)]).await.is_err());
    assert!(t.elapsed() < Duration::from_secs(2), "took {:?}", t.elapsed());
    let _back = Redis::start_on(port);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match s.apply(&[c("t:r", 5, 1, 3_600_000)]).await {
            Ok(a) => {
                assert!(a.admitted);
                break;
            }
            Err(_) if Instant::now() < deadline => tokio::time::sleep(Duration::from_millis(100)).await,
            Err(e) => panic!("no reconnect: {e:?}"),
        }
    }
}
