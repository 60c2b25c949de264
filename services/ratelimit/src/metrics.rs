//! The service's counters and their Prometheus exposition on /metrics (format 0.0.4).

use std::time::Duration;

use mcp_service_kit::prom::{Counter, Gauge, Histogram, Labelled, Registry};

/// Upper bounds of the decision-time histogram, in seconds.
const BUCKETS: [f64; 8] = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.1];

#[derive(Debug)]
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
    store_seconds: Histogram,
    /// 1 while the store answers its health probe.
    pub store_up: Gauge,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            ok: Counter::default(),
            over_limit: Counter::default(),
            invalid: Counter::default(),
            unavailable: Counter::default(),
            deadline_exceeded: Counter::default(),
            grpc_timeout_sent: Counter::default(),
            grpc_timeout_absent: Counter::default(),
            late_expired: Counter::default(),
            late_undone: Counter::default(),
            late_undo_failed: Counter::default(),
            store_seconds: Histogram::new(BUCKETS),
            store_up: Gauge::default(),
        }
    }
}

impl Metrics {
    /// Record the time one store decision took.
    pub fn observe(&self, d: Duration) {
        self.store_seconds.observe(d.as_secs_f64());
    }

    /// The `/metrics` page of these metrics, `store` naming the store (`store_up`'s label).
    pub fn registry(&self, store: &'static str) -> Registry {
        let mut r = Registry::new();
        r.register(
            "mcp_ratelimit_decisions_total",
            "RLS requests answered, by result.",
            Labelled::new(
                "code",
                [
                    ("ok", self.ok.clone()),
                    ("over_limit", self.over_limit.clone()),
                    ("invalid_argument", self.invalid.clone()),
                    ("unavailable", self.unavailable.clone()),
                    ("deadline_exceeded", self.deadline_exceeded.clone()),
                ],
            ),
        );
        r.register(
            "mcp_ratelimit_grpc_timeout_total",
            "RLS requests by whether they carried a grpc-timeout.",
            Labelled::new("sent", [("yes", self.grpc_timeout_sent.clone()), ("no", self.grpc_timeout_absent.clone())]),
        );
        r.register(
            "mcp_ratelimit_late_decisions_total",
            "Store replies that came after their deadline, by what was done.",
            Labelled::new(
                "result",
                [
                    ("expired", self.late_expired.clone()),
                    ("undone", self.late_undone.clone()),
                    ("undo_failed", self.late_undo_failed.clone()),
                ],
            ),
        );
        r.register("mcp_ratelimit_store_seconds", "Time the store took per decision.", self.store_seconds.clone());
        r.register(
            "mcp_ratelimit_store_up",
            "1 while the store answers its health probe.",
            Labelled::new("store", [(store, self.store_up.clone())]),
        );
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_names_every_metric_as_dashboards_know_it() {
        let m = Metrics::default();
        m.ok.inc();
        m.over_limit.inc();
        m.grpc_timeout_sent.inc();
        m.observe(Duration::from_micros(300));
        m.store_up.set(1);
        let text = m.registry("memory").render();
        for line in [
            "# HELP mcp_ratelimit_decisions_total RLS requests answered, by result.\n\
             # TYPE mcp_ratelimit_decisions_total counter\n\
             mcp_ratelimit_decisions_total{code=\"ok\"} 1\n\
             mcp_ratelimit_decisions_total{code=\"over_limit\"} 1\n\
             mcp_ratelimit_decisions_total{code=\"invalid_argument\"} 0\n\
             mcp_ratelimit_decisions_total{code=\"unavailable\"} 0\n\
             mcp_ratelimit_decisions_total{code=\"deadline_exceeded\"} 0\n",
            "# HELP mcp_ratelimit_grpc_timeout_total RLS requests by whether they carried a grpc-timeout.\n\
             # TYPE mcp_ratelimit_grpc_timeout_total counter\n\
             mcp_ratelimit_grpc_timeout_total{sent=\"yes\"} 1\n\
             mcp_ratelimit_grpc_timeout_total{sent=\"no\"} 0\n",
            "# TYPE mcp_ratelimit_late_decisions_total counter\nmcp_ratelimit_late_decisions_total{result=\"expired\"} 0\n",
            "# HELP mcp_ratelimit_store_seconds Time the store took per decision.\n# TYPE mcp_ratelimit_store_seconds histogram\n",
            "mcp_ratelimit_store_seconds_bucket{le=\"0.0001\"} 0\n",
            "mcp_ratelimit_store_seconds_bucket{le=\"0.0005\"} 1\n",
            "mcp_ratelimit_store_seconds_bucket{le=\"0.1\"} 1\n",
            "mcp_ratelimit_store_seconds_bucket{le=\"+Inf\"} 1\n",
            "mcp_ratelimit_store_seconds_count 1\n",
            "# HELP mcp_ratelimit_store_up 1 while the store answers its health probe.\n\
             # TYPE mcp_ratelimit_store_up gauge\nmcp_ratelimit_store_up{store=\"memory\"} 1\n",
        ] {
            assert!(text.contains(line), "{line}\nnot in\n{text}");
        }
    }
}
