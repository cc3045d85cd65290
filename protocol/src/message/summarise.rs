//! A measurement's summaries from its runs: what the worker computes, and what the
//! store computes again for a step stored without them (they are its runs' own).

use std::collections::BTreeMap;

use super::RunRecord;
use crate::metric::{Metric, MetricValue};
use crate::stats::Summary;

/// Statistics per metric over the non-warm-up runs that carry it; a metric
/// unsupported in any of them has no summary.
pub fn summarise(runs: &[RunRecord]) -> BTreeMap<Metric, Summary> {
    let mut values: BTreeMap<Metric, Option<Vec<f64>>> = BTreeMap::new();
    for run in runs.iter().filter(|r| !r.warmup) {
        for (metric, value) in &run.metrics {
            let entry = values.entry(*metric).or_insert_with(|| Some(Vec::new()));
            match (entry.as_mut(), value) {
                (Some(v), MetricValue::Measured(x)) => v.push(*x),
                _ => *entry = None,
            }
        }
    }
    values
        .into_iter()
        .filter_map(|(m, v)| Some((m, Summary::of(&v?)?)))
        .collect()
}
