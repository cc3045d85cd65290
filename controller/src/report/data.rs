//! What the report needs of a store: per experiment, its steps as plot points.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::Result;

use kiln_protocol::config::Objective;
use kiln_protocol::{CampaignConfig, Metric};

use crate::store::summary::MetricKey;
use crate::store::{
    benchmark_of, ChainState, Coverage, ExperimentInfo, StepKey, StepKind, StepSummary, Store,
};

/// Points a chain's plots keep at most, besides its new bests: past it, one
/// step in every few is drawn, so that a million steps draw in the time of a
/// few thousand. The tables count every step ([`ChainTally`]).
const MAX_POINTS: u32 = 4_000;

/// Points of a chain whose runs the run-time panel draws, at most: a point's runs are in its
/// whole record, the slowest read of a report (a million-step store's 16,000 points took
/// most of its time), and a thousand steps' runs a chain fill the panel.
const MAX_RUN_POINTS: usize = 1_000;

/// What the plots need of one step.
pub(super) struct Point {
    pub(super) step: u32,
    pub(super) kind: StepKind,
    /// `None`: the step failed.
    pub(super) objective: Option<f64>,
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
    /// The steps it stands for: itself and those not drawn since the last point.
    pub(super) weight: u32,
}

impl Point {
    fn of(row: &StepSummary<'_>) -> Point {
        let median = |m: Metric| {
            let key = MetricKey::from(m);
            row.summary
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, stats)| stats.0[0])
        };
        let cpu = match (median(Metric::UserTime), median(Metric::SystemTime)) {
            (None, None) => None,
            (u, s) => Some(u.unwrap_or(0.0) + s.unwrap_or(0.0)),
        };
        Point {
            step: row.step,
            kind: row.kind,
            objective: row.objective,
            accepted: row.decision.is_some_and(|d| d.accepted),
            temperature: row.temperature,
            cached: row.cached_from.is_some(),
            walls: Vec::new(),
            wall: median(Metric::WallTime),
            cpu,
            gpu: median(Metric::GpuTime),
            worker: row.worker.to_string(),
            dispatched_ms: row.dispatched_ms,
            recorded_ms: row.recorded_ms,
            weight: 1,
        }
    }
}

/// A chain's figures over every one of its steps, drawn or not.
#[derive(Default)]
pub(super) struct ChainTally {
    pub(super) steps: usize,
    pub(super) ok: usize,
    pub(super) accepted: usize,
    /// Steps that could move the chain ([`StepKind::can_move`]).
    pub(super) proposals: usize,
    /// The lowest objective measured.
    pub(super) best: Option<f64>,
    /// Failed steps by outcome.
    pub(super) failures: BTreeMap<String, usize>,
}

impl ChainTally {
    fn add(&mut self, row: &StepSummary<'_>) {
        self.steps += 1;
        self.accepted += usize::from(row.decision.is_some_and(|d| d.accepted));
        self.proposals += usize::from(row.decision.is_some() && row.kind.can_move());
        match row.objective {
            Some(o) => {
                self.ok += 1;
                self.best = Some(self.best.map_or(o, |b| b.min(o)));
            }
            None => *self.failures.entry(row.outcome.to_string()).or_default() += 1,
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
        // Times are stored in ns, energy and power in NVML's mJ and mW; ms, J and W read better.
        let (unit, scale) = match o.metric.unit() {
            "ns" => ("ms", 1e-6),
            "mJ" => ("J", 1e-3),
            "mW" => ("W", 1e-3),
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
    /// Per chain, the steps drawn: every one, or past [`MAX_POINTS`] one in
    /// every `stride` and every new best.
    pub(super) chains: BTreeMap<u32, Vec<Point>>,
    /// Per chain, its figures over every step.
    pub(super) tallies: BTreeMap<u32, ChainTally>,
    /// The largest stride of a chain's points (1: every step is drawn).
    pub(super) stride: u32,
    /// Of the points drawn, one in how many has its runs drawn (the largest of a chain's).
    pub(super) run_stride: usize,
    /// Per chain, how much of the decision space it explored.
    pub(super) coverage: BTreeMap<u32, Coverage>,
    /// Whether any step drawn measured gpu-time.
    pub(super) gpu_measured: bool,
}

impl ExperimentData {
    pub(super) fn points(&self) -> impl Iterator<Item = &Point> {
        self.chains.values().flatten()
    }

    /// Failed steps of every chain, by outcome.
    pub(super) fn failures(&self) -> BTreeMap<&str, usize> {
        let mut all = BTreeMap::new();
        for (outcome, n) in self.tallies.values().flat_map(|t| &t.failures) {
            *all.entry(outcome.as_str()).or_default() += n;
        }
        all
    }
}

/// The store's campaign config (if any) and every experiment's data. A
/// chain's steps are read by key, those it draws only, its tallies from its
/// state: the time it takes does not grow with the chain. An experiment
/// without chain states (measured by hand) has each step's row read.
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
            tallies: BTreeMap::new(),
            stride: 1,
            run_stride: 1,
            coverage: BTreeMap::new(),
            gpu_measured: false,
            name,
        };
        let chains = config
            .as_ref()
            .and_then(|c| c.experiment(&data.name))
            .map_or(0, |e| e.chains);
        let mut states = BTreeMap::new();
        for chain in 0..chains {
            if let Some(state) = store.chain_view(&data.name, chain)? {
                data.coverage
                    .insert(chain, state.coverage(&data.info.discovery.points));
                states.insert(chain, state);
            }
        }
        if states.is_empty() {
            every_step(store, &mut data)?;
        } else {
            chains_read(store, &mut data, &states)?;
        }
        let gpu_measured = data.points().any(|p| p.gpu.is_some());
        data.gpu_measured = gpu_measured;
        experiments.push(data);
    }
    Ok((config, experiments))
}

/// What the plots draw of one chain.
struct ChainRead {
    tally: ChainTally,
    stride: u32,
    points: Vec<Point>,
    run_stride: usize,
}

/// Every chain of `states`, each read on a thread of its own: a point is a random read of
/// the store (a page found and decompressed), which a second core halves.
fn chains_read(
    store: &Store,
    data: &mut ExperimentData,
    states: &BTreeMap<u32, ChainState>,
) -> Result<()> {
    let name = data.name.as_str();
    let read: Vec<(u32, Result<ChainRead>)> = std::thread::scope(|scope| {
        let handles: Vec<_> = states
            .iter()
            .map(|(&chain, state)| {
                (
                    chain,
                    scope.spawn(move || chain_read(store, name, chain, state)),
                )
            })
            .collect();
        handles
            .into_iter()
            .map(|(chain, h)| (chain, h.join().expect("a report's reader panicked")))
            .collect()
    });
    for (chain, read) in read {
        let read = read?;
        data.stride = data.stride.max(read.stride);
        data.run_stride = data.run_stride.max(read.run_stride);
        data.tallies.insert(chain, read.tally);
        data.chains.insert(chain, read.points);
    }
    Ok(())
}

/// A chain's tally from its state, and the steps it draws: one in every few
/// past [`MAX_POINTS`], and every one that lowered its best.
fn chain_read(store: &Store, name: &str, chain: u32, state: &ChainState) -> Result<ChainRead> {
    let decided = state.next_decide;
    let stride = decided.div_ceil(MAX_POINTS).max(1);
    let progress = state.progress.as_ref();
    let failures: BTreeMap<String, usize> = state
        .failures
        .iter()
        .map(|(outcome, n)| (outcome.clone(), *n as usize))
        .collect();
    let failed: usize = failures.values().sum();
    let tally = ChainTally {
        steps: decided as usize,
        ok: (decided as usize).saturating_sub(failed),
        accepted: state.accepted as usize,
        proposals: state.proposals.unwrap_or(0) as usize,
        best: progress.and_then(|p| p.lowest).map(|l| l.objective),
        failures,
    };
    let mut drawn: BTreeSet<u32> = (0..decided).step_by(stride as usize).collect();
    drawn.extend(
        progress
            .into_iter()
            .flat_map(|p| &p.improvements)
            .filter(|s| **s < decided),
    );
    let mut points = Vec::with_capacity(drawn.len());
    let mut next = 0;
    for step in drawn {
        let key = StepKey {
            experiment: name.to_string(),
            chain,
            step,
        };
        let Some(stored) = store.step_row(&key)? else {
            continue;
        };
        let mut point = Point::of(&stored.row()?);
        point.weight = step + 1 - next;
        next = step + 1;
        points.push(point);
    }
    let run_stride = runs(store, name, chain, &mut points)?;
    Ok(ChainRead {
        tally,
        stride,
        points,
        run_stride,
    })
}

/// Every step of an experiment without chain states, from its rows.
fn every_step(store: &Store, data: &mut ExperimentData) -> Result<()> {
    for stored in store.step_rows(&data.name) {
        let stored = stored?;
        let row = stored.row()?;
        data.tallies.entry(row.chain).or_default().add(&row);
        data.chains
            .entry(row.chain)
            .or_default()
            .push(Point::of(&row));
    }
    for (&chain, points) in &mut data.chains {
        let run_stride = runs(store, &data.name, chain, points)?;
        data.run_stride = data.run_stride.max(run_stride);
    }
    Ok(())
}

/// The runs of the measured points, from their records: of at most [`MAX_RUN_POINTS`],
/// one in every few. Returns how many points each one read stands for.
fn runs(store: &Store, experiment: &str, chain: u32, points: &mut [Point]) -> Result<usize> {
    let measured = points.iter().filter(|p| !p.cached).count();
    let stride = measured.div_ceil(MAX_RUN_POINTS).max(1);
    for p in points.iter_mut().filter(|p| !p.cached).step_by(stride) {
        let key = StepKey {
            experiment: experiment.to_string(),
            chain,
            step: p.step,
        };
        if let Some(record) = store.step(&key)? {
            p.walls = record
                .result
                .measurement
                .runs
                .iter()
                .filter(|run| !run.warmup)
                .filter_map(|run| {
                    run.metrics
                        .get(&Metric::WallTime)
                        .and_then(|v| v.measured())
                })
                .collect();
        }
    }
    Ok(stride)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_protocol::Statistic;

    #[test]
    fn the_objective_axis_reads_times_in_ms_and_nvml_figures_in_j_and_w() {
        let axis = |metric| {
            let a = ObjectiveAxis::of(Some(&Objective {
                metric,
                statistic: Statistic::Median,
            }));
            (a.label, a.scale)
        };
        assert_eq!(
            axis(Metric::WallTime),
            ("median wall-time (ms)".into(), 1e-6)
        );
        assert_eq!(axis(Metric::Energy), ("median energy (J)".into(), 1e-3));
        assert_eq!(
            axis(Metric::PowerAvg),
            ("median power-avg (W)".into(), 1e-3)
        );
        assert_eq!(
            axis(Metric::Instructions),
            ("median instructions (count)".into(), 1.0)
        );
    }
}
