//! Prometheus text exposition (format 0.0.4) of a service's `/metrics`, on `prometheus-client`.
//!
//! In the 0.0.4 format a counter's family is named like its sample, `..._total`; OpenMetrics names
//! the family without it, and `prometheus-client`'s own counter writes `# TYPE x counter` above
//! `x_total`. [`Counter`] is exposed under the full name it is registered with, so the `# HELP` and
//! `# TYPE` lines name what Prometheus stores. [`Labelled`] keeps its series in the order given
//! (a `Family` writes them in hash order).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use prometheus_client::encoding::{EncodeMetric, MetricEncoder};
use prometheus_client::metrics::{MetricType, TypedMetric};
use prometheus_client::registry::Metric;

pub use prometheus_client::metrics::gauge::Gauge;
pub use prometheus_client::metrics::histogram::Histogram;

/// The `Content-Type` of the exposition.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The metrics of one `/metrics` page, written in the order registered.
#[derive(Debug, Default)]
pub struct Registry(prometheus_client::registry::Registry);

impl Registry {
    pub fn new() -> Registry {
        Registry::default()
    }

    /// Registers `metric` as `name`, its `# HELP` line being `help` as given.
    pub fn register(&mut self, name: &str, help: &str, metric: impl Metric) {
        // prometheus-client ends every help text with a full stop of its own.
        self.0.register(name, help.strip_suffix('.').unwrap_or(help), metric);
    }

    /// The text of `/metrics`.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(2048);
        if let Err(e) = prometheus_client::encoding::text::encode_registry(&mut out, &self.0) {
            tracing::error!(error = %e, "metrics encoding");
        }
        out
    }
}

/// A monotonic counter (cheap to clone: clones count together).
#[derive(Clone, Debug, Default)]
pub struct Counter(Arc<AtomicU64>);

impl Counter {
    pub fn inc(&self) {
        self.inc_by(1);
    }

    pub fn inc_by(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }

    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

impl TypedMetric for Counter {
    const TYPE: MetricType = MetricType::Counter;
}

impl EncodeMetric for Counter {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        // A plain sample under the registered name (`..._total`), see the module comment.
        encoder.encode_gauge(&self.get())
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Counter
    }
}

/// Series of one metric told apart by one label, written in the order given.
#[derive(Clone, Debug)]
pub struct Labelled<M> {
    label: &'static str,
    series: Arc<[(&'static str, M)]>,
}

impl<M> Labelled<M> {
    /// `series`: each label value with its metric (clones of the metrics the service updates).
    pub fn new(label: &'static str, series: impl IntoIterator<Item = (&'static str, M)>) -> Labelled<M> {
        Labelled { label, series: series.into_iter().collect() }
    }
}

impl<M: TypedMetric> TypedMetric for Labelled<M> {
    const TYPE: MetricType = M::TYPE;
}

impl<M: EncodeMetric + TypedMetric> EncodeMetric for Labelled<M> {
    fn encode(&self, mut encoder: MetricEncoder) -> Result<(), std::fmt::Error> {
        for (value, metric) in self.series.iter() {
            metric.encode(encoder.encode_family(&[(self.label, *value)])?)?;
        }
        Ok(())
    }

    fn metric_type(&self) -> MetricType {
        M::TYPE
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_keep_their_total_name_and_labels_their_order() {
        let (a, b, plain) = (Counter::default(), Counter::default(), Counter::default());
        let up: Gauge = Gauge::default();
        let mut r = Registry::new();
        r.register("x_total", "Things by kind.", Labelled::new("kind", [("b", b.clone()), ("a", a.clone())]));
        r.register("y_total", "Plain.", plain.clone());
        r.register("up", "1 while up.", Labelled::new("store", [("memory", up.clone())]));
        b.inc_by(2);
        plain.inc();
        up.set(1);
        assert_eq!(
            r.render(),
            "# HELP x_total Things by kind.\n# TYPE x_total counter\nx_total{kind=\"b\"} 2\nx_total{kind=\"a\"} 0\n\
             # HELP y_total Plain.\n# TYPE y_total counter\ny_total 1\n\
             # HELP up 1 while up.\n# TYPE up gauge\nup{store=\"memory\"} 1\n"
        );
    }
}
