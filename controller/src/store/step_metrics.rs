//! The metrics of a stored step, read from its JSON where the store does not
//! keep them (stores written before `metrics/<experiment>`): only the metric
//! names are decoded, their values skipped unparsed.

use std::fmt;

use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use kiln_protocol::Metric;

/// A set of metrics: bit `m as u32` for metric `m` (the order of [`Metric::ALL`]).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(super) struct MetricSet(u128);

const _: () = assert!(Metric::ALL.len() <= 128);

impl MetricSet {
    fn insert(&mut self, m: Metric) {
        self.0 |= 1u128 << (m as u32);
    }

    fn contains(self, m: Metric) -> bool {
        self.0 & (1u128 << (m as u32)) != 0
    }

    /// Adds the metrics of a stored step's JSON.
    pub(super) fn extend_from_json(&mut self, json: &[u8]) -> serde_json::Result<()> {
        let step: StepMetrics = serde_json::from_slice(json)?;
        self.0 |= step.result.summary.0 .0 | step.result.runs.0 .0;
        Ok(())
    }

    pub(super) fn iter(self) -> impl Iterator<Item = Metric> {
        Metric::ALL
            .iter()
            .copied()
            .filter(move |m| self.contains(*m))
    }
}

/// The metric names of a stored step (summary keys and every run's metric keys).
#[derive(Deserialize)]
struct StepMetrics {
    result: ResultMetrics,
}

#[derive(Deserialize)]
struct ResultMetrics {
    summary: MetricKeys,
    runs: RunsMetricKeys,
}

#[derive(Deserialize)]
struct RunMetricKeys {
    metrics: MetricKeys,
}

/// The keys of a map keyed by metric, its values skipped.
struct MetricKeys(MetricSet);

impl<'de> Deserialize<'de> for MetricKeys {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = MetricKeys;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map keyed by metric")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<MetricKeys, A::Error> {
                let mut set = MetricSet::default();
                while let Some(m) = map.next_key::<Metric>()? {
                    map.next_value::<IgnoredAny>()?;
                    set.insert(m);
                }
                Ok(MetricKeys(set))
            }
        }
        d.deserialize_map(V)
    }
}

/// The union of the metric keys of every run.
struct RunsMetricKeys(MetricSet);

impl<'de> Deserialize<'de> for RunsMetricKeys {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RunsMetricKeys;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of runs")
            }
            fn visit_seq<A: SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> std::result::Result<RunsMetricKeys, A::Error> {
                let mut set = MetricSet::default();
                while let Some(run) = seq.next_element::<RunMetricKeys>()? {
                    set.0 |= run.metrics.0 .0;
                }
                Ok(RunsMetricKeys(set))
            }
        }
        d.deserialize_seq(V)
    }
}
