//! Envoy stats for decisions (proxy-wasm custom metrics).
//!
//! A proxy-wasm metric `NAME` is `wasmcustom.NAME` in Envoy's `/stats` and `NAME` in
//! `/stats/prometheus`. Per-tool counters are named `mcp_policy_tool_decisions_total.<tool>.<decision>`; the
//! `stats_config.stats_tags` of `envoy/envoy.yaml` turn the two name parts into the tags `mcp_tool` and
//! `mcp_decision`. Only tools named in the policy get their own counters; every other name falls into
//! `other`, so attacker-chosen tool names cannot grow the number of stats. Each tool (and `other`)
//! gets counters only for the decisions its rule can produce (`series::possible`); a decision outside
//! that set defines its counter when it first occurs.

use std::cell::RefCell;

use proxy_wasm::hostcalls;
use proxy_wasm::types::MetricType;

use mcp_policy_core::approval::offer::Event;
use mcp_policy_core::outcome::catalog::{self, Named};
use mcp_policy_core::outcome::decision::Decision;
use mcp_policy_core::outcome::refusal::Refusal;
use mcp_policy_core::outcome::series::{self, Extra};
use mcp_policy_core::policy::Policy;

/// Counter ids by decision label: a handful of entries (at most `series::LABELS.len()`), so a list.
#[derive(Default)]
struct ByLabel(Vec<(&'static str, u32)>);

impl ByLabel {
    fn get(&self, label: &str) -> Option<&u32> {
        self.0.iter().find(|(l, _)| *l == label).map(|(_, id)| id)
    }
}

impl FromIterator<(&'static str, u32)> for ByLabel {
    fn from_iter<I: IntoIterator<Item = (&'static str, u32)>>(iter: I) -> Self {
        ByLabel(iter.into_iter().collect())
    }
}

pub struct Metrics {
    totals: ByLabel,
    per_tool: RefCell<mcp_policy_core::policy::NameMap<ByLabel>>,
    other_tool: RefCell<ByLabel>,
    tracked_grants: Option<u32>,
    tools_list_removed: Option<u32>,
    /// The [`Extra`] counters a decision can bump.
    extras: Vec<(Extra, u32)>,
    offers: Vec<(Event, u32)>,
    /// `mcp_policy_marks_set_total`: marks set on grants by tool results (`flows`).
    marks_set: Option<u32>,
    /// `mcp_policy_results_<label>_total` ([`series::RESULT_LABELS`]) and `mcp_policy_redactions_total`.
    results: ByLabel,
    redactions: Option<u32>,
}

fn counter(name: &str) -> Option<u32> {
    hostcalls::define_metric(MetricType::Counter, name).ok()
}

/// The counters `named` lists, by what they count (a name Envoy refuses is left out).
fn ids<K, B: FromIterator<(K, u32)>>(named: Named<K>) -> B {
    named.into_iter().filter_map(|(k, name)| counter(&name).map(|id| (k, id))).collect()
}

impl Metrics {
    /// No stats (before a policy is loaded).
    pub fn none() -> Self {
        Metrics {
            totals: ByLabel::default(),
            per_tool: RefCell::default(),
            other_tool: RefCell::new(ByLabel::default()),
            tracked_grants: None,
            tools_list_removed: None,
            extras: Vec::new(),
            offers: Vec::new(),
            results: ByLabel::default(),
            redactions: None,
            marks_set: None,
        }
    }

    /// Define every stat of `catalog::catalog(policies)`. Envoy returns the same id for a name
    /// defined again, so a reload keeps the counts.
    pub fn define(policies: &[&Policy]) -> Self {
        let c = catalog::catalog(policies);
        Metrics {
            totals: ids(c.totals),
            per_tool: RefCell::new(c.per_tool.into_iter().map(|(t, named)| (t, ids(named))).collect()),
            other_tool: RefCell::new(ids(c.other_tool)),
            tracked_grants: hostcalls::define_metric(MetricType::Gauge, catalog::TRACKED_GRANTS).ok(),
            tools_list_removed: counter(catalog::TOOLS_LIST_REMOVED),
            extras: ids(c.extras),
            offers: ids(c.offers),
            results: ids(c.results),
            redactions: counter(catalog::REDACTIONS),
            marks_set: counter(catalog::MARKS_SET),
        }
    }

    /// One tool result refused or redacted, or one listed definition that did not match its pin.
    pub fn result(&self, e: &mcp_policy_core::response::result::ResultEvent) {
        Self::bump(self.results.get(e.label()), 1);
        if e.redactions > 0 && !e.dry_run {
            Self::bump(self.redactions.as_ref(), i64::try_from(e.redactions).unwrap_or(i64::MAX));
        }
    }

    fn bump(id: Option<&u32>, by: i64) {
        if let Some(id) = id {
            let _ = hostcalls::increment_metric(*id, by);
        }
    }

    /// One mark set on a grant.
    pub fn mark_set(&self) {
        Self::bump(self.marks_set.as_ref(), 1);
    }

    /// Count one decision: the counters `series::counts` names.
    pub fn record(&self, d: &Decision) {
        let c = series::counts(d);
        let l = c.label;
        Self::bump(self.totals.get(l), 1);
        if let Some(tool) = c.tool {
            let mut named = self.per_tool.borrow_mut();
            let mut other = self.other_tool.borrow_mut();
            let (bucket, name) = match named.get_mut(tool) {
                Some(b) => (b, Some(tool)),
                None => (&mut *other, None),
            };
            if bucket.get(l).is_none() {
                // A decision outside `series::possible`: count it all the same.
                if let Some(id) = counter(&format!("{}.{l}", series::tool_prefix(name))) {
                    bucket.0.push((l, id));
                }
            }
            Self::bump(bucket.get(l), 1);
        }
        if let Some(e) = c.extra {
            Self::bump(self.extras.iter().find(|(x, _)| *x == e).map(|(_, id)| id), 1);
        }
    }

    /// A response that could not be filtered (counted under its refusal's decision kind, `invalid`).
    pub fn record_bad_response(&self, refusal: &Refusal) {
        Self::bump(self.totals.get(refusal.decision_kind().as_str()), 1);
    }

    /// One approval offer event (`mcp_policy_core::approval::offer`).
    pub fn offer(&self, event: Event) {
        Self::bump(self.offers.iter().find(|(e, _)| *e == event).map(|(_, id)| id), 1);
    }

    /// Tools removed from `tools/list` results.
    pub fn tools_removed(&self, n: usize) {
        Self::bump(self.tools_list_removed.as_ref(), i64::try_from(n).unwrap_or(i64::MAX));
    }

    /// `n` more grants tracked (registered by this VM): the gauge is only added to per call.
    pub fn add_tracked_grants(&self, n: u64) {
        if n > 0 {
            Self::bump(self.tracked_grants.as_ref(), i64::try_from(n).unwrap_or(i64::MAX));
        }
    }

    /// The gauge set to the count in shared data (when the policy loads).
    pub fn set_tracked_grants(&self, n: u64) {
        if let Some(id) = self.tracked_grants {
            let _ = hostcalls::record_metric(id, n);
        }
    }
}
