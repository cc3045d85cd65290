//! Where a campaign stands, per experiment and chain: the [`Report`] that
//! `kiln status` shows.
//!
//! A running controller holds the store's lock, so it also writes the same
//! report as `status.json` beside the store; `kiln status` reads the store
//! when it can and that snapshot when the campaign is running.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use kiln_protocol::config::Objective;
use kiln_protocol::{CampaignConfig, Summary};

use crate::dispatch::calibration::SlotCalibration;
use crate::dispatch::pool::{StatusBoard, WorkerStatus};
use crate::dispatch::slurm::SlurmJob;
use crate::store::{
    layout, now_ms, ChainState, Coverage, EffectCount, ExperimentInfo, ProgressPoint, Raced, Store,
};
use crate::text::listed;

/// A campaign's status.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Report {
    /// Campaign name.
    pub campaign: String,
    /// When the report was made (Unix ms).
    pub at_ms: u64,
    /// Whether every chain has ended (used its budget or stopped early).
    pub finished: bool,
    /// What the controller was doing when it wrote the report (a snapshot's; a store
    /// read without its controller says `stopped` unless finished).
    #[serde(default)]
    pub phase: String,
    /// The unit of the objective (`ns`, `count`, ...).
    #[serde(default)]
    pub unit: String,
    /// One row per chain.
    pub chains: Vec<ChainRow>,
    /// Experiments still being prepared when it was written: their chains have no row yet,
    /// and no ETA counts them.
    #[serde(default)]
    pub preparing: usize,
    /// Experiments whose preparation failed (discovery, the baseline), with
    /// why: the campaign goes on without them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub failed: BTreeMap<String, String>,
    /// One row per worker.
    pub workers: Vec<WorkerRow>,
}

/// A chain's figures.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ChainRow {
    /// Experiment name.
    pub experiment: String,
    /// Chain index.
    pub chain: u32,
    /// Steps decided.
    pub done: u32,
    /// Step budget.
    pub total: u32,
    /// Proposals accepted.
    pub accepted: u32,
    /// Steps decided that could move the chain (what `accepted` is a share
    /// of; `None` in a snapshot of a controller that did not count them).
    #[serde(default)]
    pub proposals: Option<u32>,
    /// Best objective: the lowest a step measured, or the baseline's until
    /// one measured below it.
    pub best: f64,
    /// Baseline objective.
    pub baseline: f64,
    /// Temperature at the last decided step.
    pub temperature: f64,
    /// Failed steps by outcome.
    pub failures: BTreeMap<String, u32>,
    /// Why the latest failed step failed.
    #[serde(default)]
    pub last_failure: Option<String>,
    /// Why the chain stopped before its budget, if it did.
    #[serde(default)]
    pub stopped: Option<String>,
    /// Why a screening chain ended before its budget as its config told it to (`total` is then
    /// the steps it took): see [`ChainState::ended`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<String>,
    /// When the chain started (Unix ms).
    pub started_ms: u64,
    /// When it last decided a step (Unix ms).
    pub updated_ms: u64,
    /// How much of the decision space it has explored (zero before the experiment is prepared).
    #[serde(default)]
    pub coverage: Coverage,
    /// Steps racing cut short and the runs it spared.
    #[serde(default)]
    pub raced: Raced,
    /// The chain's course, downsampled (the live page's curves).
    #[serde(default)]
    pub series: Vec<ProgressPoint>,
    /// A screening chain's effects (`None` for other searches, and in a snapshot of a
    /// controller that did not count them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effects: Option<EffectCount>,
    /// Seconds from its last decided step to its end, from [`shared_etas`]
    /// (`None`: not running, or a snapshot of a controller that did not
    /// write it).
    #[serde(default)]
    pub eta_s: Option<f64>,
}

impl Report {
    /// The experiments with chains, in the report's order.
    pub fn experiments(&self) -> Vec<&str> {
        let mut names: Vec<&str> = Vec::new();
        for r in &self.chains {
            if names.last() != Some(&r.experiment.as_str()) {
                names.push(&r.experiment);
            }
        }
        names
    }

    /// Seconds until its last running chain ends ([`ChainRow::eta`]).
    pub fn eta(&self) -> Option<f64> {
        self.chains
            .iter()
            .filter_map(ChainRow::eta)
            .reduce(f64::max)
    }
}

/// Intervals of a chain's course its pace is the median of.
const PACE_INTERVALS: usize = 16;

impl ChainRow {
    /// Estimated seconds to finish: [`ChainRow::eta_s`], or in a snapshot of a
    /// controller that did not write it, at the chain's own recent pace.
    pub fn eta(&self) -> Option<f64> {
        self.running()
            .then(|| self.eta_s.unwrap_or_else(|| self.own_pace_s()))
    }

    /// Whether it has decided a step and has more to decide.
    fn running(&self) -> bool {
        self.done > 0 && self.done < self.total && self.stopped.is_none()
    }

    /// Seconds to finish if its recent pace stays what it is.
    fn own_pace_s(&self) -> f64 {
        self.pace_ms() / 1000.0 * f64::from(self.total - self.done)
    }

    /// The median time per decided step over the last [`PACE_INTERVALS`]
    /// intervals of the chain's course (its start, its series, its last
    /// step): a pause, a campaign stopped for hours and resumed, is one slow
    /// interval, not the pace. Over the whole course where it has no points.
    fn pace_ms(&self) -> f64 {
        self.recent_per_step(|_| 1.0)
    }

    /// The median over the last [`PACE_INTERVALS`] intervals of its course of
    /// the time per step, each times `weight` at the interval's middle.
    fn recent_per_step(&self, mut weight: impl FnMut(u64) -> f64) -> f64 {
        let points: Vec<(u32, u64)> = std::iter::once((0, self.started_ms))
            .chain(self.series.iter().map(|p| (p.steps, p.at_ms)))
            .chain(std::iter::once((self.done, self.updated_ms)))
            .collect();
        let intervals: Vec<&[(u32, u64)]> = points.windows(2).filter(|w| w[1].0 > w[0].0).collect();
        let per_step: Vec<f64> = intervals[intervals.len().saturating_sub(PACE_INTERVALS)..]
            .iter()
            .map(|w| {
                let ms = w[1].1.saturating_sub(w[0].1);
                ms as f64 / f64::from(w[1].0 - w[0].0) * weight(w[0].1 + ms / 2)
            })
            .collect();
        Summary::of(&per_step).map_or(f64::NAN, |s| s.median)
    }
}

/// A worker's figures.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct WorkerRow {
    /// Worker name.
    pub name: String,
    /// State (ok, unreachable, quarantined with reason).
    pub state: String,
    /// Steps it finished.
    pub steps: u64,
    /// Times its connection was lost.
    pub losses: u64,
    /// The share of its slots' time spent on jobs since the campaign took it on
    /// (`None`: read from a store, with no controller to know it).
    #[serde(default)]
    pub utilisation: Option<f64>,
    /// Per slot: calibration figures and verdict (empty without calibration).
    #[serde(default)]
    pub calibration: Vec<SlotCalibration>,
    /// A Slurm worker's current job: its id and where it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slurm_job: Option<SlurmJob>,
}

/// Whether an experiment screens: it measures effects and never moves, so its chains say
/// what they measured rather than what they accepted.
pub fn screens(config: &CampaignConfig, experiment: &str) -> bool {
    config
        .experiment(experiment)
        .is_some_and(|e| e.search.screens())
}

fn chain_rows(
    config: &CampaignConfig,
    infos: &BTreeMap<String, ExperimentInfo>,
    chains: &BTreeMap<(String, u32), ChainState>,
) -> Vec<ChainRow> {
    let mut rows: Vec<ChainRow> = chains
        .iter()
        .map(|((experiment, chain), s)| {
            let baseline = infos
                .get(experiment)
                .and_then(|i| i.baseline.objective())
                .unwrap_or(f64::NAN);
            let screens = screens(config, experiment);
            ChainRow {
                experiment: experiment.clone(),
                chain: *chain,
                done: s.next_decide,
                // A screening that ended as its config told it to is complete where it ended.
                total: match s.ended {
                    Some(_) => s.next_decide,
                    None => config
                        .experiment(experiment)
                        .map_or(0, |e| e.search.steps()),
                },
                accepted: s.accepted,
                proposals: Some(s.proposals.unwrap_or(0)),
                best: best_of(s, baseline),
                baseline,
                temperature: s.temperature,
                failures: s.failures.clone(),
                last_failure: s.last_failure.clone(),
                stopped: s.stopped.clone(),
                ended: s.ended.clone(),
                started_ms: s.started_ms,
                updated_ms: s.updated_ms,
                coverage: infos
                    .get(experiment)
                    .map(|i| s.coverage(&i.discovery.points))
                    .unwrap_or_default(),
                raced: s.raced,
                series: s
                    .progress
                    .as_ref()
                    .map(|p| p.series.clone())
                    .unwrap_or_default(),
                effects: screens.then(|| s.effect_count()),
                eta_s: None,
            }
        })
        .collect();
    shared_etas(&mut rows, config);
    rows
}

/// Each chain's ETA ([`ChainRow::eta`]), in the order of `chains`, from
/// their states alone: what `kiln run`'s progress says.
pub fn etas(
    config: &CampaignConfig,
    chains: &BTreeMap<(String, u32), ChainState>,
) -> Vec<Option<f64>> {
    let rows = chain_rows(config, &BTreeMap::new(), chains);
    rows.iter().map(ChainRow::eta).collect()
}

/// Fills in each running chain's [`ChainRow::eta_s`] as if the campaign's
/// slots were shared evenly among its running chains, each taking at most its
/// experiment's `parallel` (water-filling). A chain's step costs the time it
/// took times the share of the slots it had then, and it speeds up as other
/// chains end: with a guided experiment of 150 steps beside a uniform one of
/// 600, three chains each on two slots, the uniform chains go twice as fast
/// once the guided ones are done, which their pace so far cannot know. Chains
/// not started yet are not counted.
fn shared_etas(rows: &mut [ChainRow], config: &CampaignConfig) {
    let slots = f64::from(config.workers.iter().map(|w| w.slots()).sum::<u32>());
    let caps: Vec<f64> = rows
        .iter()
        .map(|r| {
            let parallel = config.experiment(&r.experiment).map_or(1, |e| e.parallel);
            f64::from(parallel.max(1))
        })
        .collect();
    // When each chain ran: from its start to its last step, or on if it has not ended.
    let spans: Vec<(u64, u64)> = rows
        .iter()
        .map(|r| {
            let ended = r.done >= r.total || r.stopped.is_some();
            (r.started_ms, if ended { r.updated_ms } else { u64::MAX })
        })
        .collect();
    // The chains that ran change only where one started or ended: one level
    // for each stretch between those times, worked out when first asked.
    let mut bounds: Vec<u64> = spans
        .iter()
        .flat_map(|&(start, end)| [start, end])
        .collect();
    bounds.sort_unstable();
    bounds.dedup();
    let mut levels: HashMap<usize, f64> = HashMap::new();
    let mut share = |i: usize, at: u64| {
        let stretch = bounds.partition_point(|&b| b <= at);
        let level = *levels.entry(stretch).or_insert_with(|| {
            let on: Vec<usize> = (0..spans.len())
                .filter(|&j| spans[j].0 <= at && at < spans[j].1)
                .collect();
            water_level(&caps, &on, slots)
        });
        caps[i].min(level)
    };
    let running: Vec<usize> = (0..rows.len()).filter(|&i| rows[i].running()).collect();
    // Each one's work left, in slot-seconds.
    let chains: Vec<(f64, f64)> = running
        .iter()
        .map(|&i| {
            let per_step = rows[i].recent_per_step(|at| share(i, at)) / 1000.0;
            (per_step * f64::from(rows[i].total - rows[i].done), caps[i])
        })
        .collect();
    let ends = finish_times(&chains, slots);
    for (i, end) in running.into_iter().zip(ends) {
        rows[i].eta_s = end;
    }
}

/// When each chain ends, given (its work left in slot-seconds, the most slots
/// it can take) and the slots all share: an event simulation, one event per
/// chain ending. `None` each where no slots are known or some work is not a
/// number.
fn finish_times(chains: &[(f64, f64)], slots: f64) -> Vec<Option<f64>> {
    if slots <= 0.0 || chains.iter().any(|(work, _)| !work.is_finite()) {
        return vec![None; chains.len()];
    }
    let caps: Vec<f64> = chains.iter().map(|(_, cap)| *cap).collect();
    let mut work: Vec<f64> = chains.iter().map(|(work, _)| *work).collect();
    let mut ends = vec![None; chains.len()];
    let (mut left, mut now): (Vec<usize>, f64) = ((0..chains.len()).collect(), 0.0);
    while !left.is_empty() {
        let level = water_level(&caps, &left, slots);
        let shares: Vec<f64> = left.iter().map(|&i| caps[i].min(level)).collect();
        let next = left
            .iter()
            .zip(&shares)
            .map(|(&i, share)| work[i] / share)
            .fold(f64::INFINITY, f64::min);
        now += next;
        let mut still = Vec::with_capacity(left.len());
        for (&i, share) in left.iter().zip(&shares) {
            // The relative slack keeps rounding from leaving a chain a hair of work.
            if work[i] / share <= next * (1.0 + 1e-9) {
                ends[i] = Some(now);
            } else {
                work[i] -= share * next;
                still.push(i);
            }
        }
        left = still;
    }
    ends
}

/// The most slots any one of the chains `of` gets when they share `slots`
/// evenly, none taking more than its cap and what a capped chain leaves going
/// to the others: chain `j` gets `caps[j].min(level)`. Infinite when the caps
/// leave slots free.
fn water_level(caps: &[f64], of: &[usize], slots: f64) -> f64 {
    let mut capped: Vec<f64> = of.iter().map(|&j| caps[j]).collect();
    capped.sort_by(f64::total_cmp);
    let mut free = slots;
    for (taken, cap) in capped.iter().enumerate() {
        let even = free / (capped.len() - taken) as f64;
        if *cap >= even {
            return even;
        }
        free -= cap;
    }
    f64::INFINITY
}

/// A chain's best, as every command means it: the lowest objective a step
/// measured, or the baseline's until one measured below it (the start's
/// where neither is known: a number, as `status.json` must hold one).
pub fn best_of(state: &ChainState, baseline: f64) -> f64 {
    state
        .progress
        .as_ref()
        .and_then(|p| p.best(baseline))
        .unwrap_or_else(|| state.best.objective())
}

/// What a running campaign is doing: experiments being prepared, and whether
/// chains search.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Phase {
    /// Benchmarks being discovered, or waiting for a slot to be.
    pub discovering: BTreeSet<String>,
    /// Experiments measuring their baselines (their references).
    pub measuring: BTreeSet<String>,
    /// Whether some chain has started.
    pub searching: bool,
}

/// Names a phase lists before "and N more": a campaign of a hundred programs prepares them
/// all at once.
const PHASE_NAMES: usize = 4;

impl std::fmt::Display for Phase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        if self.searching {
            parts.push("searching".to_string());
        }
        let doing = |what: &str, names: &BTreeSet<String>, noun: &str| match names.len() {
            0 => None,
            1 => Some(format!("{what} {}", listed(names.iter(), 1))),
            n => Some(format!(
                "{what} {n} {noun} ({})",
                listed(names.iter(), PHASE_NAMES)
            )),
        };
        let preparing: Vec<String> = [
            doing("measuring the baselines of", &self.measuring, "experiments"),
            doing("discovering", &self.discovering, "programs"),
        ]
        .into_iter()
        .flatten()
        .collect();
        if !preparing.is_empty() {
            parts.push(format!("preparing: {}", preparing.join(", ")));
        }
        if parts.is_empty() {
            parts.push("starting".into());
        }
        f.write_str(&parts.join("; "))
    }
}

/// Whether every chain of the campaign has started (its experiment is
/// prepared) and ended: used its budget or stopped early (on failures); an
/// experiment that could not be prepared has no chain to wait for.
fn all_done(config: &CampaignConfig, rows: &[ChainRow], failed: &BTreeMap<String, String>) -> bool {
    let expected_chains: u32 = config
        .experiments
        .iter()
        .filter(|e| !failed.contains_key(&e.name))
        .map(|e| e.chains)
        .sum();
    rows.len() as u32 == expected_chains
        && rows
            .iter()
            .all(|r| r.done >= r.total || r.stopped.is_some())
}

/// The phase of a campaign whose chains have all ended: `finished`, how many
/// chains stopped before their budget and how many experiments could not be
/// prepared, so that no one reads those as complete.
fn finished_phase(rows: &[ChainRow], failed: &BTreeMap<String, String>) -> String {
    let mut phase = "finished".to_string();
    match rows.iter().filter(|r| r.stopped.is_some()).count() {
        0 => {}
        n => phase += &format!(", {n} of {} chains stopped early", rows.len()),
    }
    match failed.len() {
        0 => {}
        1 => phase += ", 1 experiment failed to prepare",
        n => phase += &format!(", {n} experiments failed to prepare"),
    }
    phase
}

/// The experiments of `config` whose preparation failed, with why.
fn failed_of(store: &Store, config: &CampaignConfig) -> Result<BTreeMap<String, String>> {
    let failed = store.failed_experiments()?;
    Ok(failed
        .into_iter()
        .filter(|(name, _)| config.experiment(name).is_some())
        .map(|(name, failed)| (name, failed.why))
        .collect())
}

/// The share of a worker's slots' time spent on jobs, from when the pool took it on to `now`.
fn utilisation(s: &WorkerStatus, now: u64) -> Option<f64> {
    // One calibration entry per slot.
    let slot_ms = s.calibration.len() as f64 * now.saturating_sub(s.since_ms) as f64;
    (slot_ms > 0.0).then(|| (s.busy_ms as f64 / slot_ms).min(1.0))
}

/// Writes the running campaign's report as `status.json` (atomically).
pub fn write_snapshot(
    store: &Store,
    config: &CampaignConfig,
    chains: &BTreeMap<(String, u32), ChainState>,
    board: &StatusBoard,
    phase: &Phase,
) -> Result<()> {
    let mut infos = BTreeMap::new();
    for e in &config.experiments {
        if let Some(info) = store.experiment(&e.name)? {
            infos.insert(e.name.clone(), info);
        }
    }
    let rows = chain_rows(config, &infos, chains);
    let failed = failed_of(store, config)?;
    let now = now_ms();
    let workers = board
        .lock()
        .expect("not poisoned")
        .iter()
        .map(|(name, s)| WorkerRow {
            name: name.clone(),
            state: s.state.to_string(),
            steps: s.jobs_done,
            losses: s.losses,
            utilisation: utilisation(s, now),
            calibration: s.calibration.clone(),
            slurm_job: s.slurm.as_ref().map(|w| w.job()),
        })
        .collect();
    let finished = all_done(config, &rows, &failed);
    let preparing = (config.experiments.iter())
        .filter(|e| !infos.contains_key(&e.name) && !failed.contains_key(&e.name))
        .count();
    let report = Report {
        campaign: config.name.clone(),
        at_ms: now,
        finished,
        unit: config.objective.metric.unit().into(),
        phase: if finished {
            finished_phase(&rows, &failed)
        } else {
            phase.to_string()
        },
        chains: rows,
        preparing,
        failed,
        workers,
    };
    let path = layout::status_snapshot(store.dir());
    let tmp = layout::status_snapshot_tmp(store.dir());
    // Compact: with every chain's series, it is written again every second.
    std::fs::write(&tmp, serde_json::to_vec(&report)?)
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, &path).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}

/// The report of a store that no controller holds.
pub fn from_store(store: &Store) -> Result<Report> {
    let config = store
        .config()?
        .with_context(|| format!("{} holds no campaign", store.dir().display()))?;
    let mut infos = BTreeMap::new();
    let mut chains = BTreeMap::new();
    for e in &config.experiments {
        if let Some(info) = store.experiment(&e.name)? {
            infos.insert(e.name.clone(), info);
        }
        for c in 0..e.chains {
            if let Some(state) = store.chain_view(&e.name, c)? {
                chains.insert((e.name.clone(), c), state);
            }
        }
    }
    // Kept in each chain's state: no step is read, however many there are.
    let mut per_worker: BTreeMap<String, u64> = BTreeMap::new();
    for progress in chains.values().filter_map(|s| s.progress.as_ref()) {
        for (worker, steps) in &progress.workers {
            *per_worker.entry(worker.clone()).or_default() += steps;
        }
    }
    let rows = chain_rows(&config, &infos, &chains);
    let failed = failed_of(store, &config)?;
    let finished = all_done(&config, &rows, &failed);
    // No controller holds the store: whatever it was doing, it is not doing it now.
    let phase = match last_phase(store.dir()) {
        _ if finished => finished_phase(&rows, &failed),
        Some(phase) => format!("stopped while {phase}"),
        None => "stopped".to_string(),
    };
    Ok(Report {
        campaign: config.name.clone(),
        at_ms: now_ms(),
        finished,
        unit: config.objective.metric.unit().into(),
        phase,
        chains: rows,
        preparing: 0,
        failed,
        workers: per_worker
            .into_iter()
            .map(|(name, steps)| WorkerRow {
                name,
                state: "-".into(),
                steps,
                losses: 0,
                utilisation: None,
                calibration: Vec::new(),
                slurm_job: None,
            })
            .collect(),
    })
}

/// What the last controller's snapshot said it was doing, if it left one.
fn last_phase(store_dir: &Path) -> Option<String> {
    let bytes = std::fs::read(layout::status_snapshot(store_dir)).ok()?;
    let report: Report = serde_json::from_slice(&bytes).ok()?;
    Some(report.phase).filter(|p| !p.is_empty() && !p.starts_with("finished"))
}

/// The report a controller left as it ended: `kiln status` and the live page read it
/// instead of opening the store, which takes seconds and hundreds of MB at ten million
/// steps (sled reads a table of all its pages). A writer that opens the store removes it
/// ([`Store::open`]); the high-water file, which every stored step rewrites, guards against
/// a writer that does not know of it (an older kiln).
#[derive(Serialize, Deserialize)]
pub struct Sealed {
    high_water: Option<FileStamp>,
    /// The store's report.
    pub report: Report,
    /// Its campaign's objective (for the live page's axes).
    pub objective: Option<Objective>,
}

/// A file's length and modification time (ns since the epoch).
type FileStamp = (u64, u128);

fn stamp(path: &Path) -> Option<FileStamp> {
    let meta = std::fs::metadata(path).ok()?;
    let modified = meta
        .modified()
        .ok()?
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?;
    Some((meta.len(), modified.as_nanos()))
}

/// Seals the report of `store`, which this process holds, as it stands: for a
/// controller that ends, its last write.
pub fn seal(store: &Store) -> Result<()> {
    let dir = store.dir();
    let sealed = Sealed {
        high_water: stamp(&layout::high_water(dir)),
        report: from_store(store)?,
        objective: store.config()?.map(|c| c.objective),
    };
    let (path, tmp) = (layout::sealed_status(dir), layout::sealed_status_tmp(dir));
    std::fs::write(&tmp, serde_json::to_vec(&sealed)?)
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, &path).with_context(|| format!("cannot write {}", path.display()))
}

/// The report sealed in `store_dir`, while it stands, as of now.
pub fn sealed(store_dir: &Path) -> Option<Sealed> {
    let bytes = std::fs::read(layout::sealed_status(store_dir)).ok()?;
    let mut sealed: Sealed = serde_json::from_slice(&bytes).ok()?;
    sealed.report.at_ms = now_ms();
    (sealed.high_water == stamp(&layout::high_water(store_dir))).then_some(sealed)
}

/// The report for `kiln status STORE`: sealed, from the store, or from the running
/// controller's snapshot.
pub fn load(store_dir: &Path) -> Result<(Report, Option<String>)> {
    if let Some(sealed) = sealed(store_dir) {
        return Ok((sealed.report, None));
    }
    match Store::open_existing(store_dir) {
        Ok(store) => Ok((from_store(&store)?, None)),
        Err(open_error) => {
            let path = layout::status_snapshot(store_dir);
            let bytes = std::fs::read(&path).map_err(|_| open_error)?;
            let report: Report = serde_json::from_slice(&bytes)
                .with_context(|| format!("{} is unreadable", path.display()))?;
            let holder = std::fs::read_to_string(layout::holder(store_dir)).unwrap_or_default();
            let age = now_ms().saturating_sub(report.at_ms) as f64 / 1000.0;
            // A finished campaign's store may be held by another command
            // (`kiln policy`, `kiln benchmark --store`): its snapshot is final.
            let note = match report.finished {
                true => format!(
                    "the snapshot its controller left when the campaign finished, {age:.0} s ago; \
                     the store is in use by {}",
                    holder.trim()
                ),
                false => format!(
                    "live snapshot from the running controller ({}), {age:.0} s old",
                    holder.trim()
                ),
            };
            Ok((report, Some(note)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_phase_counts_what_it_prepares_and_names_a_few() {
        let names = |n: usize, stem: &str| -> BTreeSet<String> {
            (0..n).map(|k| format!("{stem}{k}")).collect()
        };
        let phase = Phase {
            discovering: names(2, "p"),
            measuring: names(68, "e"),
            searching: true,
        };
        assert_eq!(
            phase.to_string(),
            "searching; preparing: measuring the baselines of 68 experiments (e0, e1, e10, \
             e11, and 64 more), discovering 2 programs (p0, p1)"
        );
        let one = Phase {
            discovering: names(1, "zstd"),
            ..Phase::default()
        };
        assert_eq!(one.to_string(), "preparing: discovering zstd0");
        assert_eq!(Phase::default().to_string(), "starting");
    }

    /// A chain of 300 steps at 100 decided, its course a point every 10 steps.
    fn row(series: Vec<ProgressPoint>, updated_ms: u64) -> ChainRow {
        ChainRow {
            experiment: "e".into(),
            chain: 0,
            done: 100,
            total: 300,
            accepted: 10,
            proposals: Some(40),
            best: 1.0,
            baseline: 1.0,
            temperature: 0.01,
            failures: BTreeMap::new(),
            last_failure: None,
            stopped: None,
            ended: None,
            started_ms: 0,
            updated_ms,
            coverage: Coverage::default(),
            raced: Raced::default(),
            series,
            effects: None,
            eta_s: None,
        }
    }

    fn point(steps: u32, at_ms: u64) -> ProgressPoint {
        ProgressPoint {
            steps,
            at_ms,
            best: None,
            accepted: 0,
            proposals: 0,
            failures: BTreeMap::new(),
            temperature: 0.01,
        }
    }

    #[test]
    fn the_eta_goes_at_the_recent_pace_and_a_pause_is_not_the_pace() {
        // A step a second, with a pause of ten hours between steps 50 and 60.
        let pause = 36_000_000;
        let series = (1..=10)
            .map(|i| {
                let steps = 10 * i;
                point(
                    steps,
                    u64::from(steps) * 1000 + if steps >= 60 { pause } else { 0 },
                )
            })
            .collect();
        let paused = row(series, 100_000 + pause);
        assert_eq!(paused.eta(), Some(200.0));
        // Without a course it can only go at the pace of the whole run, pause and all.
        let bare = row(Vec::new(), 100_000 + pause);
        assert_eq!(
            bare.eta(),
            Some((100_000.0 + 36_000_000.0) / 1000.0 / 100.0 * 200.0)
        );
    }

    /// Whether each end is the expected one, to rounding.
    fn ends_at(chains: &[(f64, f64)], slots: f64, expected: &[f64]) {
        let ends = finish_times(chains, slots);
        let close = ends.len() == expected.len()
            && ends
                .iter()
                .zip(expected)
                .all(|(a, b)| a.is_some_and(|a| (a - b).abs() < 1e-9));
        assert!(close, "{ends:?}, expected {expected:?}");
    }

    #[test]
    fn a_chain_speeds_up_when_others_end_and_never_past_its_cap() {
        // Six chains on two slots, a third of a slot each: the three of 50
        // slot-seconds end at 150 s, and the others, with 150 of their 200
        // left, go twice as fast (two-thirds of a slot each) for the rest.
        let six: Vec<_> = [(50.0, 1.0); 3]
            .into_iter()
            .chain([(200.0, 1.0); 3])
            .collect();
        ends_at(&six, 2.0, &[150.0, 150.0, 150.0, 375.0, 375.0, 375.0]);
        // Slots to spare already: no chain goes faster when another ends.
        ends_at(&[(100.0, 1.0), (400.0, 1.0)], 4.0, &[100.0, 400.0]);
        // Two chains of up to two proposals in flight on three slots: one
        // and a half each, then two for the one left, not three.
        ends_at(&[(150.0, 2.0), (450.0, 2.0)], 3.0, &[100.0, 250.0]);
        // No slots known: no end (the chain's own pace is the ETA then).
        assert_eq!(finish_times(&[(5.0, 1.0)], 0.0), [None]);
    }

    /// The three chains of `experiment` as rows: `done` steps each, the last at
    /// `updated_ms`, one series point per (steps, at_ms) of `course`.
    fn chains_of(
        experiment: &str,
        done: u32,
        updated_ms: u64,
        course: &[(u32, u64)],
    ) -> Vec<ChainRow> {
        (0..3)
            .map(|chain| ChainRow {
                experiment: experiment.into(),
                chain,
                done,
                total: if experiment == "short" { 40 } else { 160 },
                ..row(
                    course.iter().map(|&(steps, at)| point(steps, at)).collect(),
                    updated_ms,
                )
            })
            .collect()
    }

    #[test]
    fn a_chain_is_due_when_the_chains_that_end_first_leave_it_their_slots() {
        let config = CampaignConfig::parse(
            r#"(campaign (name c) (store "s")
                 (experiments
                   ((name short) (benchmark b) (search (simulated-annealing (steps 40))) (chains 3))
                   ((name long) (benchmark b) (search (simulated-annealing (steps 160))) (chains 3)))
                 (benchmarks ((name b) (kind knobs) (sources "b") (knobs (k 1 2)) (run ("true"))))
                 (workers (local (slots 2))))"#,
            "test",
        )
        .unwrap();
        // Six chains on two slots, 1.5 s a step each (half a slot-second), until
        // the short ones ended at 60 s; the long ones then went at 0.75 s a step.
        let shared: Vec<(u32, u64)> = (1..=8).map(|i| (5 * i, 7_500 * u64::from(i))).collect();
        let course: Vec<(u32, u64)> = shared
            .iter()
            .copied()
            .chain((1..=4).map(|i| (40 + 5 * i, 60_000 + 3_750 * u64::from(i))))
            .collect();
        let mut rows = chains_of("long", 60, 75_000, &course);
        rows.extend(chains_of("short", 40, 60_000, &shared));
        shared_etas(&mut rows, &config);
        // 100 steps of half a slot-second each, on two-thirds of a slot: 75 s.
        // At the last 16 intervals' median pace alone it would be 150 s.
        for r in &rows[..3] {
            let eta = r.eta().unwrap();
            assert!((eta - 75.0).abs() < 1e-6, "{eta}");
            assert_eq!(r.own_pace_s(), 150.0);
        }
        assert!(
            rows[3..].iter().all(|r| r.eta().is_none()),
            "the short ones ended"
        );
    }

    #[test]
    fn the_eta_is_the_shared_one_and_none_for_a_stopped_chain() {
        let mut shared = row(Vec::new(), 100_000);
        shared.eta_s = Some(42.0);
        assert_eq!(shared.eta(), Some(42.0));
        shared.stopped = Some("too many failures".into());
        assert_eq!(shared.eta(), None);
    }
}
