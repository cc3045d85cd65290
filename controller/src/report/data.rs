//! What the report needs of a store: per experiment, its steps as plot points.

use std::collections::BTreeMap;

use anyhow::Result;

use kiln_protocol::config::Objective;
use kiln_protocol::{CampaignConfig, Metric, MetricValue};

use crate::store::{benchmark_of, Coverage, ExperimentInfo, StepKind, StepRecord, Store};

/// What the plots need of one step.
pub(super) struct Point {
    pub(super) step: u32,
    pub(super) remeasure: bool,
    /// `None`: the step failed.
    pub(super) objective: Option<f64>,
    pub(super) outcome: &'static str,
    pub(super) accepted: bool,
    pub(super) temperature: f64,
    /// Whether the measurement was reused from an earlier step.
    pub(super) cached: bool,
    /// Wall time of every measured run (ns).
    pub(super) walls: Vec<f64>,
    /// Medians over measured runs (ns): wall, user + system CPU, GPU busy.
    pub(super) wall: Option<f64>,
    pub(super) cpu: Option<f64>,
    pub(super) gpu: Option<f64>,
    pub(super) worker: String,
    pub(super) dispatched_ms: u64,
    pub(super) recorded_ms: u64,
}

impl Point {
    pub(super) fn of(r: &StepRecord) -> Point {
        let result = &r.result;
        let median = |m: Metric| result.summary.get(&m).map(|s| s.median);
        let cpu = match (median(Metric::UserTime), median(Metric::SystemTime)) {
            (None, None) => None,
            (u, s) => Some(u.unwrap_or(0.0) + s.unwrap_or(0.0)),
        };
        Point {
            step: r.key.step,
            remeasure: r.kind == StepKind::Remeasure,
            objective: r.objective,
            outcome: result.outcome.name(),
            accepted: r.decision.as_ref().is_some_and(|d| d.accepted),
            temperature: r.temperature,
            cached: r.cached_from.is_some(),
            walls: result
                .runs
                .iter()
                .filter(|run| !run.warmup)
                .filter_map(|run| {
                    run.metrics
                        .get(&Metric::WallTime)
                        .and_then(|v| v.measured())
                })
                .collect(),
            wall: median(Metric::WallTime),
            cpu,
            gpu: median(Metric::GpuTime),
            worker: r.worker.clone(),
            dispatched_ms: r.dispatched_ms,
            recorded_ms: r.recorded_ms,
        }
    }
}

/// How the objective is shown: its title and the factor from stored values.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ObjectiveAxis {
    /// The statistic, metric and unit, e.g. `median wall-time (ms)`.
    pub label: String,
    /// Shown value = stored value × scale.
    pub scale: f64,
    /// The unit values are stored in, for [`crate::text::format_measure`].
    pub unit: &'static str,
}

impl ObjectiveAxis {
    /// The axis of a campaign's objective (`None`: a store without a config).
    pub fn of(objective: Option<&Objective>) -> ObjectiveAxis {
        let Some(o) = objective else {
            return ObjectiveAxis {
                label: "objective".into(),
                scale: 1.0,
                unit: "count",
            };
        };
        // Times are stored in ns; ms reads better for programs that run for a while.
        let (unit, scale) = match o.metric.unit() {
            "ns" => ("ms", 1e-6),
            unit => (unit, 1.0),
        };
        ObjectiveAxis {
            label: format!("{} {} ({unit})", o.statistic.name(), o.metric.name()),
            scale,
            unit: o.metric.unit(),
        }
    }
}

/// One experiment's steps, per chain in step order.
pub(super) struct ExperimentData {
    pub(super) name: String,
    pub(super) benchmark: Option<String>,
    pub(super) info: ExperimentInfo,
    pub(super) objective: ObjectiveAxis,
    pub(super) chains: BTreeMap<u32, Vec<Point>>,
    /// Per chain, how much of the decision space it explored.
    pub(super) coverage: BTreeMap<u32, Coverage>,
    /// Whether any run reported gpu-time as measured.
    pub(super) gpu_measured: bool,
}

impl ExperimentData {
    pub(super) fn points(&self) -> impl Iterator<Item = &Point> {
        self.chains.values().flatten()
    }
}

/// The store's campaign config (if any) and every experiment's data.
pub(super) fn load(store: &Store) -> Result<(Option<CampaignConfig>, Vec<ExperimentData>)> {
    let config = store.config()?;
    let mut experiments = Vec::new();
    for item in store.experiments() {
        let (name, info) = item?;
        let mut data = ExperimentData {
            benchmark: benchmark_of(config.as_ref(), &name),
            info,
            objective: ObjectiveAxis::of(config.as_ref().map(|c| &c.objective)),
            chains: BTreeMap::new(),
            coverage: BTreeMap::new(),
            gpu_measured: false,
            name,
        };
        for record in store.steps(Some(&data.name)) {
            let record = record?;
            data.gpu_measured |= record.result.runs.iter().any(|run| {
                matches!(
                    run.metrics.get(&Metric::GpuTime),
                    Some(MetricValue::Measured(_))
                )
            });
            data.chains
                .entry(record.key.chain)
                .or_default()
                .push(Point::of(&record));
        }
        for &chain in data.chains.keys() {
            if let Some(state) = store.chain(&data.name, chain)? {
                data.coverage
                    .insert(chain, state.coverage(&data.info.discovery.points));
            }
        }
        experiments.push(data);
    }
    Ok((config, experiments))
}
