//! Prometheus text exposition (format 0.0.4) of the service's counters, served on /metrics.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

#[derive(Default)]
pub struct Counter(AtomicU64);

impl Counter {
    pub fn inc(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Upper bounds of the decision-time histogram, in seconds.
const BUCKETS: [f64; 8] = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.1];

#[derive(Default)]
pub struct Metrics {
    /// Decisions answered OK.
    pub ok: Counter,
    /// Decisions answered OVER_LIMIT.
    pub over_limit: Counter,
    /// Requests refused as INVALID_ARGUMENT.
    pub invalid: Counter,
    /// Requests answered UNAVAILABLE (store error, or no answer within `--redis-timeout`).
    pub unavailable: Counter,
    /// Requests answered DEADLINE_EXCEEDED (no answer within the caller's `grpc-timeout`).
    pub deadline_exceeded: Counter,
    /// Requests that carried a `grpc-timeout`, and those that did not.
    pub grpc_timeout_sent: Counter,
    pub grpc_timeout_absent: Counter,
    /// Late decisions: the script ran after its deadline and committed nothing; it committed but
    /// its reply came after the service gave up, and the count was taken back; or taking it back failed.
    pub late_expired: Counter,
    pub late_undone: Counter,
    pub late_undo_failed: Counter,
    buckets: [Counter; BUCKETS.len()],
    count: Counter,
    sum_us: Counter,
    /// 1 while the store answers its health probe.
    pub store_up: AtomicU64,
}

impl Metrics {
    /// Record the time one store decision took.
    pub fn observe(&self, d: Duration) {
        let s = d.as_secs_f64();
        for (b, c) in BUCKETS.iter().zip(&self.buckets) {
            if s <= *b {
                c.inc();
            }
        }
        self.count.inc();
        self.sum_us.0.fetch_add(u64::try_from(d.as_micros()).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    pub fn render(&self, store: &str) -> String {
        let mut o = String::with_capacity(2048);
        o.push_str("# HELP mcp_ratelimit_decisions_total RLS requests answered, by result.\n");
        o.push_str("# TYPE mcp_ratelimit_decisions_total counter\n");
        for (code, c) in [
            ("ok", &self.ok),
            ("over_limit", &self.over_limit),
            ("invalid_argument", &self.invalid),
            ("unavailable", &self.unavailable),
            ("deadline_exceeded", &self.deadline_exceeded),
        ] {
            o.push_str(&format!("mcp_ratelimit_decisions_total{{code=\"{code}\"}} {}\n", c.get()));
        }
        o.push_str("# HELP mcp_ratelimit_grpc_timeout_total RLS requests by whether they carried a grpc-timeout.\n");
        o.push_str("# TYPE mcp_ratelimit_grpc_timeout_total counter\n");
        for (sent, c) in [("yes", &self.grpc_timeout_sent), ("no", &self.grpc_timeout_absent)] {
            o.push_str(&format!("mcp_ratelimit_grpc_timeout_total{{sent=\"{sent}\"}} {}\n", c.get()));
        }
        o.push_str("# HELP mcp_ratelimit_late_decisions_total Store replies that came after their deadline, by what was done.\n");
        o.push_str("# TYPE mcp_ratelimit_late_decisions_total counter\n");
        for (result, c) in
            [("expired", &self.late_expired), ("undone", &self.late_undone), ("undo_failed", &self.late_undo_failed)]
        {
            o.push_str(&format!("mcp_ratelimit_late_decisions_total{{result=\"{result}\"}} {}\n", c.get()));
        }
        o.push_str("# HELP mcp_ratelimit_store_seconds Time the store took per decision.\n");
        o.push_str("# TYPE mcp_ratelimit_store_seconds histogram\n");
        for (b, c) in BUCKETS.iter().zip(&self.buckets) {
            o.push_str(&format!("mcp_ratelimit_store_seconds_bucket{{le=\"{b}\"}} {}\n", c.get()));
        }
        o.push_str(&format!("mcp_ratelimit_store_seconds_bucket{{le=\"+Inf\"}} {}\n", self.count.get()));
        o.push_str(&format!("mcp_ratelimit_store_seconds_sum {}\n", self.sum_us.get() as f64 / 1e6));
        o.push_str(&format!("mcp_ratelimit_store_seconds_count {}\n", self.count.get()));
        o.push_str("# HELP mcp_ratelimit_store_up 1 while the store answers its health probe.\n");
        o.push_str("# TYPE mcp_ratelimit_store_up gauge\n");
        o.push_str(&format!("mcp_ratelimit_store_up{{store=\"{store}\"}} {}\n", self.store_up.load(Ordering::Relaxed)));
        o
    }
}
