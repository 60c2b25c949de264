//! Envoy stats for decisions, with the names of the wasm build (crates/filter-wasm/src/metrics.rs).
//!
//! A dynamic module's stat `NAME` is `dynamicmodulescustom.NAME` in Envoy's `/stats` and `NAME` in
//! `/stats/prometheus`, as the wasm build's `wasmcustom.NAME`. Per-tool counters are named
//! `mcp_policy_tool_decisions_total.<tool>.<decision>`; the `stats_tags` of
//! `envoy/envoy-dynamic.yaml` turn the two name parts into the tags `mcp_tool` and `mcp_decision`.
//! Every counter is defined when the configuration loads (Envoy defines stats on the main thread
//! only); a decision outside `series::possible` for its tool is counted on a counter with the same
//! two labels, which Prometheus prints in the same family.

use std::collections::HashMap;

use mcp_policy_core::approval::offer::Event;
use mcp_policy_core::outcome::catalog::{self, Named};
use mcp_policy_core::outcome::decision::Decision;
use mcp_policy_core::outcome::refusal::Refusal;
use mcp_policy_core::outcome::series::{self, Extra};
use mcp_policy_core::policy::Policy;

use crate::ffi::{ConfigHandle, Stream};

type ByLabel = Vec<(&'static str, usize)>;

fn find(by: &ByLabel, label: &str) -> Option<usize> {
    by.iter().find(|(l, _)| *l == label).map(|(_, id)| *id)
}

/// The stats of one configuration: ids Envoy gave when they were defined.
#[derive(Default)]
pub struct Metrics {
    totals: ByLabel,
    per_tool: HashMap<String, ByLabel>,
    other_tool: ByLabel,
    /// `mcp_policy_tool_decisions_total` with labels `mcp_tool`, `mcp_decision`.
    tool_labelled: Option<usize>,
    tracked_grants: Option<usize>,
    tools_list_removed: Option<usize>,
    /// The [`Extra`] counters a decision can bump.
    extras: Vec<(Extra, usize)>,
    offers: Vec<(Event, usize)>,
    /// `mcp_policy_results_<label>_total` ([`series::RESULT_LABELS`]) and `mcp_policy_redactions_total`.
    results: ByLabel,
    redactions: Option<usize>,
    /// `mcp_policy_marks_set_total`: marks set on grants by tool results (`flows`).
    marks_set: Option<usize>,
}

/// The counters `named` lists, by what they count (a name Envoy refuses is left out).
fn ids<K>(config: &ConfigHandle, named: Named<K>) -> Vec<(K, usize)> {
    named.into_iter().filter_map(|(k, name)| config.counter(&name, &[]).map(|id| (k, id))).collect()
}

impl Metrics {
    /// Define every stat of `catalog::catalog(policies)`, as the wasm build does, and the
    /// labelled per-tool counter that counts a decision outside them.
    pub fn define(config: &ConfigHandle, policies: &[&Policy]) -> Self {
        let c = catalog::catalog(policies);
        let counter = |name: &str| config.counter(name, &[]);
        Metrics {
            totals: ids(config, c.totals),
            per_tool: c.per_tool.into_iter().map(|(t, named)| (t, ids(config, named))).collect(),
            other_tool: ids(config, c.other_tool),
            tool_labelled: config.counter(series::TOOL_DECISIONS, &["mcp_tool", "mcp_decision"]),
            tracked_grants: config.gauge(catalog::TRACKED_GRANTS),
            tools_list_removed: counter(catalog::TOOLS_LIST_REMOVED),
            extras: ids(config, c.extras),
            offers: ids(config, c.offers),
            results: ids(config, c.results),
            redactions: counter(catalog::REDACTIONS),
            marks_set: counter(catalog::MARKS_SET),
        }
    }

    /// One mark set on a grant (`flows`).
    pub fn mark_set(&self, s: &Stream) {
        Self::bump(s, self.marks_set, 1);
    }

    /// One tool result refused or redacted, or one listed definition that did not match its pin.
    pub fn result(&self, s: &Stream, e: &mcp_policy_core::response::result::ResultEvent) {
        Self::bump(s, find(&self.results, e.label()), 1);
        if e.redactions > 0 && !e.dry_run {
            Self::bump(s, self.redactions, u64::try_from(e.redactions).unwrap_or(u64::MAX));
        }
    }

    fn bump(s: &Stream, id: Option<usize>, by: u64) {
        if let Some(id) = id {
            s.count(id, &[], by);
        }
    }

    /// Count one decision: the counters `series::counts` names.
    pub fn record(&self, s: &Stream, d: &Decision) {
        let c = series::counts(d);
        Self::bump(s, find(&self.totals, c.label), 1);
        if let Some(tool) = c.tool {
            let (bucket, named) = match self.per_tool.get(tool) {
                Some(b) => (b, true),
                None => (&self.other_tool, false),
            };
            match (find(bucket, c.label), self.tool_labelled) {
                (Some(id), _) => s.count(id, &[], 1),
                (None, Some(id)) => {
                    let name = if named { series::stat_safe(tool) } else { "other".to_owned() };
                    s.count(id, &[&name, c.label], 1);
                }
                (None, None) => {}
            }
        }
        if let Some(e) = c.extra {
            Self::bump(s, self.extras.iter().find(|(x, _)| *x == e).map(|(_, id)| *id), 1);
        }
    }

    /// A response that could not be filtered (counted under its refusal's decision kind, `invalid`).
    pub fn record_bad_response(&self, s: &Stream, refusal: &Refusal) {
        Self::bump(s, find(&self.totals, refusal.decision_kind().as_str()), 1);
    }

    /// One approval offer event.
    pub fn offer(&self, s: &Stream, event: Event) {
        Self::bump(s, self.offers.iter().find(|(e, _)| *e == event).map(|(_, id)| *id), 1);
    }

    /// Tools removed from `tools/list` results.
    pub fn tools_removed(&self, s: &Stream, n: usize) {
        Self::bump(s, self.tools_list_removed, u64::try_from(n).unwrap_or(u64::MAX));
    }

    /// `n` more grants tracked in this process.
    pub fn add_tracked_grants(&self, s: &Stream, n: u64) {
        if let (true, Some(id)) = (n > 0, self.tracked_grants) {
            s.gauge_add(id, n);
        }
    }
}
