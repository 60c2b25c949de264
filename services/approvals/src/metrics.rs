//! The service's counters and their `/metrics` page (Prometheus text, format 0.0.4).

use mcp_service_kit::prom::{Counter, Gauge, Labelled, Registry};

/// Counters since the process started (`/metrics`).
#[derive(Default)]
pub struct Metrics {
    pub opened: Counter,
    pub approved: Counter,
    pub denied: Counter,
    pub consumed: Counter,
    pub expired: Counter,
    pub checks_approved: Counter,
    pub checks_denied: Counter,
    pub checks_pending: Counter,
    /// `/v1/check` answered 429 (the per-grant or the global cap on pending approvals).
    pub checks_refused: Counter,
    pub bad_requests: Counter,
    /// Pending approvals, counted in the database when the page is asked for.
    pub pending: Gauge,
    /// Seconds since the oldest pending approval was opened (0 when none), read with `pending`.
    pub oldest_pending_age: Gauge,
}

impl Metrics {
    /// The `/metrics` page of these metrics (the webhooks' are added after them).
    pub fn registry(&self) -> Registry {
        let mut r = Registry::new();
        for (name, help, c) in [
            ("opened", "Approvals opened (new pending approvals).", &self.opened),
            ("approved", "Approvals approved by an approver.", &self.approved),
            ("denied", "Approvals denied by an approver.", &self.denied),
            ("consumed", "Approved approvals used by a call (single use).", &self.consumed),
            ("expired", "Pending or approved approvals that expired unused.", &self.expired),
        ] {
            r.register(&format!("mcp_approvals_{name}_total"), help, c.clone());
        }
        r.register("mcp_approvals_pending", "Pending approvals now.", self.pending.clone());
        r.register(
            "mcp_approvals_oldest_pending_age_seconds",
            "Seconds since the oldest pending approval was opened (0 when none).",
            self.oldest_pending_age.clone(),
        );
        r.register(
            "mcp_approvals_checks_total",
            "Answers to /v1/check by status.",
            Labelled::new(
                "status",
                [
                    ("approved", self.checks_approved.clone()),
                    ("denied", self.checks_denied.clone()),
                    ("pending", self.checks_pending.clone()),
                    ("too_many_pending", self.checks_refused.clone()),
                ],
            ),
        );
        r.register(
            "mcp_approvals_bad_requests_total",
            "Refused /v1/check requests (400, 413, 415).",
            self.bad_requests.clone(),
        );
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_is_the_one_dashboards_know() {
        let m = Metrics::default();
        m.opened.inc();
        m.checks_pending.inc_by(2);
        m.pending.set(1);
        m.oldest_pending_age.set(42);
        assert_eq!(
            m.registry().render(),
            "# HELP mcp_approvals_opened_total Approvals opened (new pending approvals).\n\
             # TYPE mcp_approvals_opened_total counter\nmcp_approvals_opened_total 1\n\
             # HELP mcp_approvals_approved_total Approvals approved by an approver.\n\
             # TYPE mcp_approvals_approved_total counter\nmcp_approvals_approved_total 0\n\
             # HELP mcp_approvals_denied_total Approvals denied by an approver.\n\
             # TYPE mcp_approvals_denied_total counter\nmcp_approvals_denied_total 0\n\
             # HELP mcp_approvals_consumed_total Approved approvals used by a call (single use).\n\
             # TYPE mcp_approvals_consumed_total counter\nmcp_approvals_consumed_total 0\n\
             # HELP mcp_approvals_expired_total Pending or approved approvals that expired unused.\n\
             # TYPE mcp_approvals_expired_total counter\nmcp_approvals_expired_total 0\n\
             # HELP mcp_approvals_pending Pending approvals now.\n\
             # TYPE mcp_approvals_pending gauge\nmcp_approvals_pending 1\n\
             # HELP mcp_approvals_oldest_pending_age_seconds Seconds since the oldest pending approval was opened (0 when none).\n\
             # TYPE mcp_approvals_oldest_pending_age_seconds gauge\nmcp_approvals_oldest_pending_age_seconds 42\n\
             # HELP mcp_approvals_checks_total Answers to /v1/check by status.\n\
             # TYPE mcp_approvals_checks_total counter\n\
             mcp_approvals_checks_total{status=\"approved\"} 0\n\
             mcp_approvals_checks_total{status=\"denied\"} 0\n\
             mcp_approvals_checks_total{status=\"pending\"} 2\n\
             mcp_approvals_checks_total{status=\"too_many_pending\"} 0\n\
             # HELP mcp_approvals_bad_requests_total Refused /v1/check requests (400, 413, 415).\n\
             # TYPE mcp_approvals_bad_requests_total counter\nmcp_approvals_bad_requests_total 0\n"
        );
    }
}
