//! `kiln rewards`: reward assignment as in the original thesis.
//!
//! Every successfully measured step of an experiment is a row; every
//! (site, value) pair is an indicator feature; ridge regression without an
//! intercept of a benefit (by default the log-speedup −ln(objective /
//! baseline)) on those features gives each decision a reward. The best value
//! per site forms a decision file that `kiln benchmark` accepts.
//!
//! The normal equations are accumulated while the store is iterated, so memory
//! grows with the number of features squared, never with the number of steps;
//! a second pass scores the held-out rows (every fifth usable step, in key
//! order, so the split is deterministic).

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use nalgebra::{DMatrix, DVector};

use kiln_protocol::{DecisionFile, DecisionSet, DecisionValue, SiteId, StepOutcome};

use crate::error::BadInput;
use crate::store::{benchmark_of, layout, StepRecord, Store};

/// The columns of the `rewards` table.
pub const REWARD_COLUMNS: &[&str] = &["experiment", "site", "value", "reward", "count"];

/// Every how many usable rows one is held out to score the fit.
pub const HOLD_OUT_EVERY: u64 = 5;

/// The log-speedup at which the `tanh` target reaches tanh(1) ≈ 0.76.
pub const TANH_SCALE: f64 = 0.1;

/// The benefit a step's decisions are credited with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Target {
    /// −ln(objective / baseline): additive for multiplicative effects.
    #[default]
    LogSpeedup,
    /// baseline / objective.
    Speedup,
    /// tanh(log-speedup / 0.1): large gains and losses saturate, so a few
    /// extreme steps do not dominate the fit.
    Tanh,
}

impl Target {
    /// The target's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Target::LogSpeedup => "log-speedup",
            Target::Speedup => "speedup",
            Target::Tanh => "tanh",
        }
    }

    /// The benefit of `objective` against `baseline` (both lower-is-better).
    pub fn of(self, objective: f64, baseline: f64) -> f64 {
        let log_speedup = -(objective / baseline).ln();
        match self {
            Target::LogSpeedup => log_speedup,
            Target::Speedup => baseline / objective,
            Target::Tanh => (log_speedup / TANH_SCALE).tanh(),
        }
    }
}

/// How rewards are assigned.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RewardOptions {
    /// The regression target.
    pub target: Target,
    /// The ridge penalty λ (sklearn's `alpha`; its default is 1).
    pub lambda: f64,
}

impl Default for RewardOptions {
    fn default() -> Self {
        RewardOptions {
            target: Target::LogSpeedup,
            lambda: 1.0,
        }
    }
}

/// The reward of one decision.
#[derive(Debug, Clone, PartialEq)]
pub struct Reward {
    /// The decision point.
    pub site: SiteId,
    /// The value it took.
    pub value: DecisionValue,
    /// Its coefficient in the fit.
    pub reward: f64,
    /// Rows (fitted and held out) in which the site took this value.
    pub count: u64,
}

/// The rewards of one experiment and what follows from them.
#[derive(Debug, Clone)]
pub struct Assignment {
    /// The experiment.
    pub experiment: String,
    /// Its benchmark, where the store knows it.
    pub benchmark: Option<String>,
    /// The options used.
    pub options: RewardOptions,
    /// One reward per (site, value) of the domain, in discovery and domain order.
    pub rewards: Vec<Reward>,
    /// Rows the regression was fitted on.
    pub train_rows: u64,
    /// Rows held out to score it.
    pub test_rows: u64,
    /// R² of the fit on the held-out rows (`None` with fewer than two, or no variance).
    pub r2: Option<f64>,
    /// Per site the observed value with the highest reward (the stock value
    /// where no row decided the site).
    pub best: DecisionSet,
    /// The experiment's baseline decisions.
    pub baseline: DecisionSet,
}

impl Assignment {
    /// The best decision set as a decision file.
    pub fn decision_file(&self) -> DecisionFile {
        DecisionFile {
            benchmark: self.benchmark.clone(),
            set: self.best.clone(),
        }
    }

    /// The reward of one decision.
    pub fn reward(&self, site: &SiteId, value: &DecisionValue) -> Option<f64> {
        self.rewards
            .iter()
            .find(|r| &r.site == site && &r.value == value)
            .map(|r| r.reward)
    }
}

/// A usable row: its target and the indices of its active features.
struct Row {
    target: f64,
    features: Vec<usize>,
}

/// The objective of a step that makes a row: measured afresh (a reused
/// measurement repeats another step's row) and successful.
fn row_objective(record: &StepRecord) -> Option<f64> {
    if record.cached_from.is_some() || record.result.outcome != StepOutcome::Ok {
        return None;
    }
    record.objective
}

/// Whether an experiment has a step that makes a row.
fn has_rows(store: &Store, experiment: &str) -> Result<bool> {
    for record in store.steps(Some(experiment)) {
        if row_objective(&record?).is_some() {
            return Ok(true);
        }
    }
    Ok(false)
}

/// Rewards of the named experiment, or of every experiment of the store that
/// has a successful step; also returns the experiments skipped for having none.
pub fn assign_all(
    store: &Store,
    experiment: Option<&str>,
    options: &RewardOptions,
) -> Result<(Vec<Assignment>, Vec<String>)> {
    if let Some(name) = experiment {
        return Ok((vec![assign(store, name, options)?], Vec::new()));
    }
    let (mut assignments, mut skipped) = (Vec::new(), Vec::new());
    for name in store.experiment_names()? {
        if has_rows(store, &name)? {
            assignments.push(assign(store, &name, options)?);
        } else {
            skipped.push(name);
        }
    }
    Ok((assignments, skipped))
}

/// Assigns rewards over the steps of one experiment.
pub fn assign(store: &Store, experiment: &str, options: &RewardOptions) -> Result<Assignment> {
    if !(options.lambda.is_finite() && options.lambda >= 0.0) {
        return Err(BadInput(format!(
            "--lambda must be a finite number ≥ 0, not {}",
            options.lambda
        ))
        .into());
    }
    let info = store.experiment(experiment)?.with_context(|| {
        format!(
            "store {} holds no experiment named '{experiment}'",
            store.dir().display()
        )
    })?;
    let baseline = info.baseline.objective().with_context(|| {
        format!("experiment {experiment} has no baseline measurement to compare with")
    })?;
    let mut features: Vec<(SiteId, DecisionValue)> = Vec::new();
    for p in &info.discovery.points {
        features.extend(p.domain.iter().map(|v| (p.id.clone(), v.clone())));
    }
    let index: HashMap<(&SiteId, &DecisionValue), usize> = features
        .iter()
        .enumerate()
        .map(|(i, (s, v))| ((s, v), i))
        .collect();
    let n = features.len();
    let row_of = |record: &StepRecord| -> Result<Option<Row>> {
        let Some(objective) = row_objective(record) else {
            return Ok(None);
        };
        let target = options.target.of(objective, baseline);
        if !target.is_finite() {
            return Ok(None);
        }
        let mut active = Vec::with_capacity(record.decisions.len());
        for (site, value) in &record.decisions.0 {
            let i = index.get(&(site, value)).with_context(|| {
                format!(
                    "step {} decides '{site}' = {value}, which is outside the decision points \
                     of experiment {experiment}",
                    record.key
                )
            })?;
            active.push(*i);
        }
        Ok(Some(Row {
            target,
            features: active,
        }))
    };

    // Pass 1: the normal equations of the fitted rows, and every feature's count.
    let mut gram = DMatrix::<f64>::zeros(n, n);
    let mut xty = DVector::<f64>::zeros(n);
    let mut counts = vec![0u64; n];
    let (mut usable, mut train_rows) = (0u64, 0u64);
    for record in store.steps(Some(experiment)) {
        let Some(row) = row_of(&record?)? else {
            continue;
        };
        for &i in &row.features {
            counts[i] += 1;
        }
        let held_out = usable % HOLD_OUT_EVERY == HOLD_OUT_EVERY - 1;
        usable += 1;
        if held_out {
            continue;
        }
        train_rows += 1;
        for &i in &row.features {
            xty[i] += row.target;
            for &j in &row.features {
                gram[(i, j)] += 1.0;
            }
        }
    }
    if train_rows == 0 {
        bail!("experiment {experiment} has no successfully measured steps to assign rewards from");
    }
    for i in 0..n {
        gram[(i, i)] += options.lambda;
    }
    let weights = gram
        .cholesky()
        .with_context(|| {
            format!(
                "the regression of experiment {experiment} is singular with lambda {}; \
                 use a positive --lambda",
                options.lambda
            )
        })?
        .solve(&xty);

    // Pass 2: score the held-out rows.
    let (mut seen, mut test_rows) = (0u64, 0u64);
    let (mut sum, mut sum_sq, mut residual) = (0.0f64, 0.0f64, 0.0f64);
    for record in store.steps(Some(experiment)) {
        let Some(row) = row_of(&record?)? else {
            continue;
        };
        let held_out = seen % HOLD_OUT_EVERY == HOLD_OUT_EVERY - 1;
        seen += 1;
        if !held_out {
            continue;
        }
        let predicted: f64 = row.features.iter().map(|&i| weights[i]).sum();
        test_rows += 1;
        sum += row.target;
        sum_sq += row.target * row.target;
        residual += (row.target - predicted).powi(2);
    }
    let total = sum_sq - sum * sum / test_rows.max(1) as f64;
    let r2 = (test_rows >= 2 && total > 0.0).then(|| 1.0 - residual / total);

    let rewards: Vec<Reward> = features
        .into_iter()
        .enumerate()
        .map(|(i, (site, value))| Reward {
            site,
            value,
            reward: weights[i],
            count: counts[i],
        })
        .collect();
    let mut best = DecisionSet::default();
    for p in &info.discovery.points {
        // An unobserved value's reward is the penalty's zero, not evidence.
        let chosen = rewards
            .iter()
            .filter(|r| r.site == p.id && r.count > 0)
            .max_by(|a, b| a.reward.total_cmp(&b.reward))
            .map(|r| r.value.clone())
            .or_else(|| info.discovery.baseline.get(&p.id).cloned())
            .unwrap_or_else(|| p.domain[0].clone());
        best.0.insert(p.id.clone(), chosen);
    }
    let config = store.config()?;
    Ok(Assignment {
        experiment: experiment.to_string(),
        benchmark: benchmark_of(config.as_ref(), experiment),
        options: *options,
        rewards,
        train_rows,
        test_rows,
        r2,
        best,
        baseline: info.discovery.baseline,
    })
}

/// Writes the `rewards` table (header and rows); returns the number of rows.
pub fn write_table<W: Write>(assignments: &[Assignment], csv: &mut csv::Writer<W>) -> Result<u64> {
    csv.write_record(REWARD_COLUMNS)?;
    let mut rows = 0;
    for a in assignments {
        for r in &a.rewards {
            csv.write_record([
                a.experiment.as_str(),
                r.site.as_str(),
                &r.value.to_string(),
                &r.reward.to_string(),
                &r.count.to_string(),
            ])?;
            rows += 1;
        }
    }
    Ok(rows)
}

/// What `run` wrote: each experiment's rewards and best decision file, the
/// experiments skipped for want of measured steps, and the rewards table.
#[derive(Debug)]
pub struct Written {
    /// Per experiment: its rewards, and the file of its best decisions.
    pub assignments: Vec<(Assignment, PathBuf)>,
    /// Experiments with no successfully measured step.
    pub skipped: Vec<String>,
    /// The rewards table (CSV).
    pub table: PathBuf,
}

/// Assigns rewards for every experiment (or one) of `store` and writes the rewards table and
/// each experiment's best decision file into `dir`.
pub fn run(
    store: &Store,
    experiment: Option<&str>,
    options: &RewardOptions,
    dir: &Path,
) -> Result<Written> {
    let (assignments, skipped) = assign_all(store, experiment, options)?;
    if assignments.is_empty() {
        bail!(
            "store {} holds no successfully measured steps to assign rewards from",
            store.dir().display()
        );
    }
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let table = layout::rewards_table(dir);
    let file = std::fs::File::create(&table)
        .with_context(|| format!("cannot write {}", table.display()))?;
    let mut csv = csv::Writer::from_writer(file);
    write_table(&assignments, &mut csv)?;
    csv.flush()
        .with_context(|| format!("cannot write {}", table.display()))?;
    let mut written = Vec::new();
    for a in assignments {
        let path = layout::rewards_best_file(dir, &a.experiment);
        std::fs::write(&path, a.decision_file().to_text())
            .with_context(|| format!("cannot write {}", path.display()))?;
        written.push((a, path));
    }
    Ok(Written {
        assignments: written,
        skipped,
        table,
    })
}

/// Sites by the spread between their best and worst observed value's reward, largest first.
pub fn largest_effects(a: &Assignment) -> Vec<(SiteId, f64)> {
    let mut range: BTreeMap<&SiteId, (f64, f64)> = BTreeMap::new();
    for r in a.rewards.iter().filter(|r| r.count > 0) {
        let e = range.entry(&r.site).or_insert((r.reward, r.reward));
        e.0 = e.0.min(r.reward);
        e.1 = e.1.max(r.reward);
    }
    let mut out: Vec<(SiteId, f64)> = range
        .into_iter()
        .map(|(site, (lo, hi))| (site.clone(), hi - lo))
        .collect();
    out.sort_by(|x, y| y.1.total_cmp(&x.1));
    out
}
