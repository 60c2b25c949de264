//! Where counts live: Redis (shared by any number of instances) or this process's memory.
//!
//! One decision is one atomic step: every counter is checked first; if every one has room for its
//! hits, all are incremented, otherwise none is. So a refused request consumes nothing (unlike
//! envoyproxy/ratelimit's default, which increments over-limit and sibling descriptors), and
//! concurrent requests on any number of instances can never admit more than the limit.
//!
//! Windows are fixed and aligned to the Unix epoch in UTC (a minute window runs :00 to :59), as in
//! envoyproxy/ratelimit. A counter's key expires at the end of its window, so a new window starts
//! from zero; a caller can get up to 2 × limit within one window length across an edge. With Redis,
//! the clock is Redis's own (`TIME` inside the script): every instance agrees on the window.
//!
//! Marks (`crate::counters::Kind`) are checked in the same step: a request with a mark that holds is
//! refused whole, as one over a limit. A mark's value is the time it was set (ms, the store's clock),
//! its key expires no sooner than its `for` after that.
//!
//! With Redis a decision carries a deadline, and what an answer too late for its caller committed
//! is taken back ([`UNDO_SCRIPT`]; the timing is `crate::decide`'s).

use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::counters::{Counter, Kind};

mod memory;
pub use memory::MemoryStore;

/// The result of one decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Applied {
    /// Every counter had room: all were incremented.
    pub admitted: bool,
    /// The store's clock, milliseconds since the Unix epoch.
    pub now_ms: u64,
    /// Each counter's count before this request (in request order).
    pub before: Vec<u64>,
}

impl Applied {
    /// Is counter `i` (with `c`) over its limit with this request's hits?
    /// A mark check: is the mark set less than its `for` ago?
    pub fn over(&self, i: usize, c: &Counter) -> bool {
        match c.kind {
            Kind::Count => self.before.get(i).copied().unwrap_or(u64::MAX).saturating_add(c.hits) > c.limit,
            Kind::MarkCheck => self.mark_left_ms(i, c) > 0,
            Kind::MarkSet => false,
        }
    }

    /// Hits left in counter `i`'s window after this decision (0 for a mark).
    pub fn remaining(&self, i: usize, c: &Counter) -> u64 {
        if c.kind != Kind::Count {
            return 0;
        }
        let before = self.before.get(i).copied().unwrap_or(u64::MAX);
        let used = if self.admitted { before.saturating_add(c.hits) } else { before };
        c.limit.saturating_sub(used)
    }

    /// Milliseconds until counter `c`'s window ends; for a mark check, until the mark lifts (0: it
    /// does not hold); for a marking, its `for`.
    pub fn until_reset_ms(&self, i: usize, c: &Counter) -> u64 {
        match c.kind {
            Kind::Count => c.window_ms - self.now_ms % c.window_ms.max(1),
            Kind::MarkCheck => self.mark_left_ms(i, c),
            Kind::MarkSet => c.window_ms,
        }
    }

    /// Milliseconds the mark of descriptor `i` still holds (0: not set, or lifted).
    fn mark_left_ms(&self, i: usize, c: &Counter) -> u64 {
        match self.before.get(i).copied() {
            Some(0) => 0,
            Some(at) => at.saturating_add(c.window_ms).saturating_sub(self.now_ms),
            None => u64::MAX,
        }
    }
}

/// The store could not decide (Redis unreachable, timed out, or answered something unexpected).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreError(pub String);

/// The check-then-increment-all-or-none script. KEYS: the counters. ARGV[1]: the deadline in Redis's
/// clock (ms since the epoch; 0: none); then per counter its kind (0 count, 1 mark check, 2 mark
/// set), limit, hits and window length (a mark's `for`) in ms. Returns {admitted (0/1), now_ms,
/// before_1, …, before_n} (a mark's before: the time it was set, 0 if never), or {2, now_ms} when
/// Redis runs it after the deadline: then nothing is read or written, since no answer could reach
/// the caller in time. A counter's key expires at the end of its window (PEXPIREAT, Redis's clock);
/// a mark's, no sooner than its `for` after now.
pub const SCRIPT: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local deadline = tonumber(ARGV[1])
if deadline > 0 and now > deadline then
  return {2, now}
end
local n = #KEYS
local out = {1, now}
for i = 1, n do
  local b = 4 * i - 3
  local kind = tonumber(ARGV[b + 1])
  local c = tonumber(redis.call('GET', KEYS[i]) or '0')
  out[i + 2] = c
  if kind == 0 and c + tonumber(ARGV[b + 3]) > tonumber(ARGV[b + 2]) then
    out[1] = 0
  elseif kind == 1 and c > 0 and c + tonumber(ARGV[b + 4]) > now then
    out[1] = 0
  end
end
if out[1] == 1 then
  for i = 1, n do
    local b = 4 * i - 3
    local kind = tonumber(ARGV[b + 1])
    local hits = tonumber(ARGV[b + 3])
    local w = tonumber(ARGV[b + 4])
    if kind == 0 and hits > 0 then
      redis.call('INCRBY', KEYS[i], hits)
      redis.call('PEXPIREAT', KEYS[i], now - (now % w) + w)
    elseif kind == 2 then
      if out[i + 2] < now then
        redis.call('SET', KEYS[i], now, 'KEEPTTL')
      end
      if redis.call('PTTL', KEYS[i]) < w then
        redis.call('PEXPIRE', KEYS[i], w)
      end
    end
  end
end
return out
"#;

/// Takes back what one admitted decision added, when its answer could not reach the caller in
/// time. KEYS: the decision's counters. ARGV[1]: the decision's now_ms (Redis's clock); then per
/// counter its hits and window length in ms. A counter whose window has ended since is left alone
/// (its count expired with its key); none goes below 0. Returns how many counters it lowered.
pub const UNDO_SCRIPT: &str = r#"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local at = tonumber(ARGV[1])
local lowered = 0
for i = 1, #KEYS do
  local hits = tonumber(ARGV[2 * i])
  local w = tonumber(ARGV[2 * i + 1])
  if hits > 0 and math.floor(now / w) == math.floor(at / w) then
    local c = tonumber(redis.call('GET', KEYS[i]) or '0')
    local d = math.min(c, hits)
    if d > 0 then
      redis.call('DECRBY', KEYS[i], d)
      lowered = lowered + 1
    end
  end
end
return lowered
"#;

/// What Redis's clock reads against this process's monotonic clock: `redis_ms - local_ms` as seen
/// by the last reply that came back quickly. Measured at the reply's arrival, so it is low by that
/// reply's way back: a deadline converted with it leaves room for the answer's own way back, and
/// neither the hosts' wall clocks nor their agreement matter.
struct RedisClock {
    start: Instant,
    offset_ms: AtomicI64,
    known: AtomicBool,
}

impl RedisClock {
    fn local_ms(&self) -> i64 {
        i64::try_from(self.start.elapsed().as_millis()).unwrap_or(i64::MAX)
    }

    /// A reply carrying Redis's `now_ms` arrived `round_trip` after its command was sent. Slow round
    /// trips say little about the offset and are ignored.
    fn observe(&self, redis_now_ms: u64, round_trip: Duration) {
        if round_trip > CLOCK_ROUND_TRIP {
            return;
        }
        let redis = i64::try_from(redis_now_ms).unwrap_or(i64::MAX);
        self.offset_ms.store(redis.saturating_sub(self.local_ms()), Ordering::Relaxed);
        self.known.store(true, Ordering::Relaxed);
    }

    /// `local` (an [`Instant`]) in Redis's clock, or 0 (no deadline) before any reply was observed.
    /// An instant before this clock's start counts back from it, not as the start itself: a deadline
    /// already past stays past.
    fn redis_ms(&self, local: Instant) -> u64 {
        if !self.known.load(Ordering::Relaxed) {
            return 0;
        }
        let ms = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
        let local_ms = match local.checked_duration_since(self.start) {
            Some(after) => ms(after),
            None => -ms(self.start.duration_since(local)),
        };
        u64::try_from(local_ms.saturating_add(self.offset_ms.load(Ordering::Relaxed))).unwrap_or(0).max(1)
    }
}

/// Why decisions fail while Redis may evict counters.
const EVICTING: &str = "redis: its maxmemory-policy may evict counters (set it to noeviction)";

/// Replies slower than this do not update the clock offset.
const CLOCK_ROUND_TRIP: Duration = Duration::from_millis(20);

/// Counters in Redis or Valkey, through one script call per decision.
pub struct RedisStore {
    conn: redis::aio::ConnectionManager,
    script: redis::Script,
    undo: redis::Script,
    clock: RedisClock,
    /// Redis may evict counters ([`crate::eviction`]), found by the last [`RedisStore::ping`]:
    /// decisions fail until it may not.
    evicting: AtomicBool,
    /// The operator accepted eviction (`--allow-evicting-redis`).
    allow_evicting: bool,
    /// `CONFIG GET` got no answer since it last did, and the log said so.
    config_refused: AtomicBool,
}

impl RedisStore {
    /// A store for `url` (`redis://HOST:PORT/DB`). Connects lazily and reconnects by itself: while
    /// Redis is away every decision fails with [`StoreError`]. `reply_wait` bounds each command's
    /// wait for its reply; it is longer than any decision waits ([`crate::decide`]), so that a
    /// reply arriving after its caller gave up is still read, and what it committed taken back.
    /// Errors never show the URL's password.
    pub fn new(url: &str, reply_wait: Duration) -> Result<Self, String> {
        let shown = crate::redact::url(url);
        let client = redis::Client::open(url).map_err(|e| format!("--redis {shown}: {e}"))?;
        let config = redis::aio::ConnectionManagerConfig::new()
            .set_connection_timeout(Some(reply_wait))
            .set_response_timeout(Some(reply_wait))
            .set_number_of_retries(1)
            .set_min_delay(Duration::from_millis(10))
            .set_max_delay(Duration::from_millis(100));
        let conn = redis::aio::ConnectionManager::new_lazy_with_config(client, config)
            .map_err(|e| format!("--redis {shown}: {e}"))?;
        let clock = RedisClock { start: Instant::now(), offset_ms: AtomicI64::new(0), known: AtomicBool::new(false) };
        Ok(RedisStore {
            conn,
            script: redis::Script::new(SCRIPT),
            undo: redis::Script::new(UNDO_SCRIPT),
            clock,
            evicting: AtomicBool::new(false),
            allow_evicting: false,
            config_refused: AtomicBool::new(false),
        })
    }

    /// Decide even while Redis may evict counters (`--allow-evicting-redis`).
    pub fn allowing_eviction(mut self) -> Self {
        self.allow_evicting = true;
        self
    }

    /// Decide with no deadline.
    pub async fn apply(&self, counters: &[Counter]) -> Result<Applied, StoreError> {
        self.apply_by(counters, None).await?.ok_or_else(|| StoreError("redis: expired without a deadline".into()))
    }

    /// Decide, committing nothing if Redis runs the script after `deadline` (then `Ok(None)`).
    pub async fn apply_by(
        &self,
        counters: &[Counter],
        deadline: Option<Instant>,
    ) -> Result<Option<Applied>, StoreError> {
        if self.evicting.load(Ordering::Relaxed) {
            return Err(StoreError(EVICTING.into()));
        }
        let mut inv = self.script.prepare_invoke();
        inv.arg(deadline.map_or(0, |d| self.clock.redis_ms(d)));
        for c in counters {
            let kind = match c.kind {
                Kind::Count => 0,
                Kind::MarkCheck => 1,
                Kind::MarkSet => 2,
            };
            inv.key(&c.key).arg(kind).arg(c.limit).arg(c.hits).arg(c.window_ms);
        }
        let mut conn = self.conn.clone();
        let sent = Instant::now();
        let out: Vec<i64> = inv.invoke_async(&mut conn).await.map_err(|e| StoreError(format!("redis: {e}")))?;
        let num = |v: Option<&i64>| v.and_then(|x| u64::try_from(*x).ok());
        let (Some(flag), Some(now_ms)) = (num(out.first()), num(out.get(1))) else {
            return Err(StoreError("redis: unexpected script result".into()));
        };
        self.clock.observe(now_ms, sent.elapsed());
        if flag == 2 {
            return Ok(None);
        }
        let before: Option<Vec<u64>> = out.iter().skip(2).map(|v| num(Some(v))).collect();
        match before {
            Some(before) if before.len() == counters.len() => Ok(Some(Applied { admitted: flag == 1, now_ms, before })),
            _ => Err(StoreError("redis: unexpected script result".into())),
        }
    }

    /// Take back what `applied` (admitted) added to `counters`, in its window; how many counters
    /// were lowered.
    pub async fn undo(&self, counters: &[Counter], applied: &Applied) -> Result<u64, StoreError> {
        let mut inv = self.undo.prepare_invoke();
        inv.arg(applied.now_ms);
        for c in counters {
            // A marking is never taken back: a mark set for a result that never arrived only refuses more.
            let hits = if c.kind == Kind::Count { c.hits } else { 0 };
            inv.key(&c.key).arg(hits).arg(c.window_ms);
        }
        let mut conn = self.conn.clone();
        inv.invoke_async(&mut conn).await.map_err(|e| StoreError(format!("redis: {e}")))
    }

    /// Whether Redis's clock is known against this process's: only then does a decision send its
    /// deadline. A reply slower than `CLOCK_ROUND_TRIP` (20 ms) does not teach it, so on a loaded
    /// host the first replies may leave it unknown.
    pub fn clock_known(&self) -> bool {
        self.clock.known.load(Ordering::Relaxed)
    }

    /// `TIME`, for the health status (and the clock offset), then whether Redis may evict
    /// counters: an error while it may, unless that was accepted.
    pub async fn ping(&self) -> Result<(), StoreError> {
        let mut conn = self.conn.clone();
        let sent = Instant::now();
        let (secs, micros) = redis::cmd("TIME")
            .query_async::<(u64, u64)>(&mut conn)
            .await
            .map_err(|e| StoreError(format!("redis: {e}")))?;
        self.clock.observe(secs.saturating_mul(1000).saturating_add(micros / 1000), sent.elapsed());
        match crate::eviction::read(&mut conn).await {
            Ok(policy) => {
                self.config_refused.store(false, Ordering::Relaxed);
                let evicting = policy.is_some() && !self.allow_evicting;
                if self.evicting.swap(evicting, Ordering::Relaxed) != evicting {
                    match &policy {
                        Some(p) if evicting => tracing::error!(
                            maxmemory_policy = %p,
                            "redis may evict counters, which would restart limits from zero: answering \
                             UNAVAILABLE until its maxmemory-policy is noeviction (or start with --allow-evicting-redis)"
                        ),
                        _ => tracing::info!("redis evicts no counters: deciding again"),
                    }
                }
            }
            // Not known this time (CONFIG renamed or forbidden, or a reply that did not come):
            // what the last answer said stands, and the log says so once until CONFIG answers.
            Err(e) => {
                if !self.config_refused.swap(true, Ordering::Relaxed) {
                    tracing::warn!(error = %e, "redis did not answer CONFIG GET: cannot tell whether it may evict \
                        counters (it must not: set maxmemory-policy noeviction)");
                }
            }
        }
        if self.evicting.load(Ordering::Relaxed) {
            return Err(StoreError(EVICTING.into()));
        }
        Ok(())
    }
}

/// The configured store.
pub enum Store {
    Memory(MemoryStore),
    Redis(RedisStore),
}

impl Store {
    /// Decide one request: check every counter, then increment all or none.
    pub async fn apply(&self, counters: &[Counter]) -> Result<Applied, StoreError> {
        match self {
            Store::Memory(m) => m.apply_at(counters, now_ms()),
            Store::Redis(r) => r.apply(counters).await,
        }
    }

    /// Can the store decide right now?
    pub async fn healthy(&self) -> bool {
        match self {
            Store::Memory(_) => true,
            Store::Redis(r) => r.ping().await.is_ok(),
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Store::Memory(_) => "memory",
            Store::Redis(_) => "redis",
        }
    }
}

/// This host's wall clock, milliseconds since the Unix epoch (the memory store's windows).
pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX)).unwrap_or(0)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn c(key: &str, limit: u64, hits: u64) -> Counter {
        Counter::count(key, limit, hits, 60_000)
    }

    const T0: u64 = 1_700_000_040_000;

    #[test]
    fn redis_clock_converts_instants_on_both_sides_of_its_start() {
        let start = Instant::now();
        let clock = RedisClock { start, offset_ms: AtomicI64::new(0), known: AtomicBool::new(false) };
        assert_eq!(clock.redis_ms(start + Duration::from_millis(5)), 0, "no deadline before a reply");
        clock.offset_ms.store(i64::try_from(T0).unwrap(), Ordering::Relaxed);
        clock.known.store(true, Ordering::Relaxed);
        assert_eq!(clock.redis_ms(start + Duration::from_millis(250)), T0 + 250);
        // A deadline already past when the store was made stays that far in the past.
        let Some(before) = start.checked_sub(Duration::from_millis(100)) else { return };
        assert_eq!(clock.redis_ms(before), T0 - 100);
    }

    #[test]
    fn memory_all_or_none_and_windows() {
        let m = MemoryStore::new();
        let a = m.apply_at(&[c("a", 10, 10)], T0).unwrap();
        assert!(a.admitted);
        assert_eq!(a.remaining(0, &c("a", 10, 10)), 0);
        // b has room, a does not: neither is incremented.
        let r = m.apply_at(&[c("b", 5, 1), c("a", 10, 1)], T0 + 1).unwrap();
        assert!(!r.admitted);
        assert_eq!(r.before, vec![0, 10]);
        assert!(!r.over(0, &c("b", 5, 1)) && r.over(1, &c("a", 10, 1)));
        assert_eq!(m.apply_at(&[c("b", 5, 5)], T0 + 2).unwrap().before, vec![0]);
        assert_eq!(r.until_reset_ms(1, &c("a", 10, 1)), 59_999);
        // The next window starts from zero.
        assert_eq!(m.apply_at(&[c("a", 10, 1)], T0 + 60_000).unwrap().before, vec![0]);
        // A batch above the limit is refused whole.
        assert!(!m.apply_at(&[c("z", 10, 11)], T0).unwrap().admitted);
        assert_eq!(m.apply_at(&[c("z", 10, 10)], T0).unwrap().before, vec![0]);
    }
}
