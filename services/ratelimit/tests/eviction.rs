//! Redis that may evict counters: while its `maxmemory-policy` evicts with a `maxmemory` set, every
//! decision fails (UNAVAILABLE), unless the operator accepted it; against a real `redis-server`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

mod common;

use std::time::Duration;

use common::Redis;
use mcp_ratelimit::counters::Counter;
use mcp_ratelimit::store::{RedisStore, Store};

fn one() -> [Counter; 1] {
    [Counter::count("mcprl:evict-test", 10, 1, 60_000)]
}

#[tokio::test]
async fn a_redis_that_may_evict_counters_decides_nothing() {
    let r = Redis::start();
    let store = Store::Redis(RedisStore::new(&r.url(), Duration::from_secs(1)).unwrap());
    assert!(store.healthy().await);
    assert!(store.apply(&one()).await.unwrap().admitted);
    // A policy that evicts, but no maxmemory: Redis never evicts.
    assert_eq!(r.cli(&["CONFIG", "SET", "maxmemory-policy", "volatile-lru"]), "OK");
    assert!(store.healthy().await);
    // With a maxmemory it may: every decision fails until it may not.
    assert_eq!(r.cli(&["CONFIG", "SET", "maxmemory", "64mb"]), "OK");
    assert!(!store.healthy().await);
    let e = store.apply(&one()).await.unwrap_err();
    assert_eq!(e.0, "redis: its maxmemory-policy may evict counters (set it to noeviction)");
    assert_eq!(r.cli(&["GET", "mcprl:evict-test"]).lines().next(), Some("1"), "the refused decision counted nothing");
    assert_eq!(r.cli(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]), "OK");
    assert!(store.healthy().await);
    assert_eq!(store.apply(&one()).await.unwrap().before, [1]);
}

#[tokio::test]
async fn an_operator_may_accept_eviction() {
    let r = Redis::start();
    assert_eq!(r.cli(&["CONFIG", "SET", "maxmemory", "64mb"]), "OK");
    assert_eq!(r.cli(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]), "OK");
    let store = Store::Redis(RedisStore::new(&r.url(), Duration::from_secs(1)).unwrap().allowing_eviction());
    assert!(store.healthy().await);
    assert!(store.apply(&one()).await.unwrap().admitted);
}
