//! `kiln rewards`: each decision's effect on the objective relative to the
//! stock decision, how sure that is, and whether the model can be trusted.
//!
//! Every successfully measured step of an experiment is a row, its target a
//! benefit (by default the log-speedup −ln(objective / baseline)). A feature
//! is "this site takes this non-stock value", so a reward is the change of
//! benefit from leaving the stock decision (whose reward is 0), and an
//! unpenalised intercept takes what every step shares. Sites the rows never
//! varied, and values (or stock values) seen in fewer than `min_count` rows,
//! get no reward: the data cannot tell their effect from the rest. Ridge
//! regression gives the rewards; the residual variance with the sandwich
//! covariance σ²·A⁻¹GA⁻¹ (G = XᵀX, A = G + λI) gives each a standard error;
//! k-fold cross-validation (rows dealt to the folds in turn) gives the R² on
//! steps each fit did not see.
//!
//! Each fold's normal equations are accumulated while the store is iterated,
//! so memory grows with folds × features², never with the number of steps.
//! Whether the model's proposal beats what the campaign measured is for
//! measurement to say: [`judge`] turns the measured objectives into a
//! [`Verdict`], and only [`Verdict::Best`] writes a best decision file.

use std::collections::HashMap;
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use nalgebra::{Cholesky, DMatrix, DVector, Dyn};

use kiln_protocol::{DecisionFile, DecisionSet, DecisionValue, SiteId, StepOutcome};

use crate::atomic::Staging;
use crate::error::BadInput;
use crate::store::time_ratio;
use crate::store::{benchmark_of, layout, StepKey, StepRecord, Store};
use crate::text::{escape_controls, format_ratio};

/// The columns of the `rewards` table.
pub const REWARD_COLUMNS: &[&str] = &[
    "experiment",
    "site",
    "value",
    "status",
    "reward",
    "std_error",
    "count",
];

/// Fewer usable rows than this and no model is trusted, whatever its fit.
pub const MIN_ROWS: u64 = 10;

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

/// How rewards are assigned and when the model is trusted.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RewardOptions {
    /// The regression target.
    pub target: Target,
    /// The ridge penalty λ (sklearn's `alpha`; its default is 1); the intercept is not penalised.
    pub lambda: f64,
    /// Rows a value, and its site's stock value, must each be seen in to get a reward.
    pub min_count: u64,
    /// Folds of the cross-validation.
    pub folds: u32,
    /// The cross-validated R² below which the model is not trusted.
    pub min_r2: f64,
}

impl Default for RewardOptions {
    fn default() -> Self {
        RewardOptions {
            target: Target::LogSpeedup,
            lambda: 1.0,
            min_count: 3,
            folds: 5,
            min_r2: 0.5,
        }
    }
}

impl RewardOptions {
    /// Refuses options that cannot give a model, naming the flag.
    fn check(&self) -> Result<()> {
        let bad = if !(self.lambda.is_finite() && self.lambda >= 0.0) {
            format!("--lambda must be a finite number ≥ 0, not {}", self.lambda)
        } else if self.folds < 2 {
            format!("--folds must be at least 2, not {}", self.folds)
        } else if self.min_count < 1 {
            "--min-count must be at least 1".to_string()
        } else if !self.min_r2.is_finite() {
            format!("--min-r2 must be a number, not {}", self.min_r2)
        } else {
            return Ok(());
        };
        Err(BadInput(bad).into())
    }
}

/// What the data say of one (site, value).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Estimate {
    /// The stock decision: the reference the others are measured from, reward 0.
    Stock,
    /// A fitted reward and its standard error (`None` with no residual degrees of freedom).
    Fitted { reward: f64, std_error: Option<f64> },
    /// No reward: the site took one value in every row.
    NeverVaried,
    /// No reward: this value, or its site's stock value, was seen in fewer than `min_count` rows.
    TooRare,
}

impl Estimate {
    /// The name in the rewards table and in JSON.
    pub fn name(self) -> &'static str {
        match self {
            Estimate::Stock => "stock",
            Estimate::Fitted { .. } => "fitted",
            Estimate::NeverVaried => "never-varied",
            Estimate::TooRare => "too-rare",
        }
    }

    /// The reward, where there is one (0 for the stock value).
    pub fn reward(self) -> Option<f64> {
        match self {
            Estimate::Stock => Some(0.0),
            Estimate::Fitted { reward, .. } => Some(reward),
            Estimate::NeverVaried | Estimate::TooRare => None,
        }
    }

    /// The reward's standard error, where there is one (0 for the stock value).
    pub fn std_error(self) -> Option<f64> {
        match self {
            Estimate::Stock => Some(0.0),
            Estimate::Fitted { std_error, .. } => std_error,
            Estimate::NeverVaried | Estimate::TooRare => None,
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
    /// What the fit says of it.
    pub estimate: Estimate,
    /// Rows in which the site took this value.
    pub count: u64,
}

/// Why a model is not to be trusted.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Distrust {
    /// No value of any site was seen often enough to fit.
    NothingToFit,
    /// Fewer rows than [`MIN_ROWS`], or than the parameters plus one.
    TooFewRows { rows: u64, needed: u64 },
    /// Every row has the same target: nothing to explain.
    NoVariance,
    /// Cross-validated R² below the minimum (−∞ where it could not be computed: fewer rows
    /// than folds, or a fold's fit singular).
    LowR2 { r2: f64, min: f64 },
}

impl fmt::Display for Distrust {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Distrust::NothingToFit => {
                f.write_str("no site was varied often enough to estimate its effect")
            }
            Distrust::TooFewRows { rows, needed } => write!(
                f,
                "too few measured steps: {rows}, and the model needs at least {needed} \
                 (10, and more than its parameters)"
            ),
            Distrust::NoVariance => {
                f.write_str("every step measured the same benefit: the decisions explain nothing")
            }
            Distrust::LowR2 { r2, min } if r2.is_infinite() => write!(
                f,
                "the cross-validated R² could not be computed (fewer steps than folds, or a \
                 fold's fit is singular), and the model must reach {min}"
            ),
            Distrust::LowR2 { r2, min } => write!(
                f,
                "the cross-validated R² is {r2:.3}, below {min}: the model does not predict \
                 steps it was not fitted on"
            ),
        }
    }
}

/// The best step the campaign measured.
#[derive(Debug, Clone, PartialEq)]
pub struct BestStep {
    /// The step.
    pub key: StepKey,
    /// Its objective.
    pub objective: f64,
    /// Its decisions.
    pub decisions: DecisionSet,
    /// The worker that measured it.
    pub worker: String,
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
    pub rows: u64,
    /// The intercept: the benefit predicted for the stock decisions.
    pub intercept: f64,
    /// R² of the k-fold cross-validation (`None` with fewer rows than folds, or no variance).
    pub cv_r2: Option<f64>,
    /// Why the model is not to be trusted, if it is not.
    pub distrust: Option<Distrust>,
    /// Per site the value with the highest reward of those that exceed their standard error;
    /// the stock value where none does.
    pub proposal: DecisionSet,
    /// The stock decisions, which rewards are relative to.
    pub stock: DecisionSet,
    /// The experiment's baseline objective, which targets are relative to.
    pub baseline_objective: f64,
    /// The step with the lowest objective.
    pub best_step: Option<BestStep>,
}

impl Assignment {
    /// A decision set of this experiment as a decision file.
    pub fn decision_file(&self, set: &DecisionSet) -> DecisionFile {
        DecisionFile {
            benchmark: self.benchmark.clone(),
            set: set.clone(),
        }
    }

    /// The reward of one decision, where it has one.
    pub fn reward(&self, site: &SiteId, value: &DecisionValue) -> Option<f64> {
        self.rewards
            .iter()
            .find(|r| &r.site == site && &r.value == value)
            .and_then(|r| r.estimate.reward())
    }

    /// The sites the steps never varied, in discovery order.
    pub fn never_varied(&self) -> Vec<&SiteId> {
        let mut sites: Vec<&SiteId> = Vec::new();
        for r in &self.rewards {
            if r.estimate == Estimate::NeverVaried && sites.last() != Some(&&r.site) {
                sites.push(&r.site);
            }
        }
        sites
    }

    /// The values left out for being seen too rarely.
    pub fn too_rare(&self) -> impl Iterator<Item = &Reward> {
        self.rewards
            .iter()
            .filter(|r| r.estimate == Estimate::TooRare)
    }

    /// The number of fitted rewards.
    pub fn fitted(&self) -> usize {
        self.rewards
            .iter()
            .filter(|r| matches!(r.estimate, Estimate::Fitted { .. }))
            .count()
    }
}

/// A usable row: its target and the fitted features it has (0, the intercept, always).
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

/// The normal equations of some rows, the intercept as feature 0.
#[derive(Clone)]
struct Normal {
    gram: DMatrix<f64>,
    xty: DVector<f64>,
    yy: f64,
    sum_y: f64,
    n: u64,
}

impl Normal {
    fn zeros(dim: usize) -> Normal {
        Normal {
            gram: DMatrix::zeros(dim, dim),
            xty: DVector::zeros(dim),
            yy: 0.0,
            sum_y: 0.0,
            n: 0,
        }
    }

    fn add(&mut self, row: &Row) {
        for &i in &row.features {
            self.xty[i] += row.target;
            for &j in &row.features {
                self.gram[(i, j)] += 1.0;
            }
        }
        self.yy += row.target * row.target;
        self.sum_y += row.target;
        self.n += 1;
    }

    fn sum<'a>(dim: usize, parts: impl Iterator<Item = &'a Normal>) -> Normal {
        let mut total = Normal::zeros(dim);
        for p in parts {
            total.gram += &p.gram;
            total.xty += &p.xty;
            total.yy += p.yy;
            total.sum_y += p.sum_y;
            total.n += p.n;
        }
        total
    }

    /// The factor of G + λI, the intercept unpenalised; `None` where it is singular.
    fn ridge(&self, lambda: f64) -> Option<Cholesky<f64, Dyn>> {
        let mut a = self.gram.clone();
        for i in 1..a.nrows() {
            a[(i, i)] += lambda;
        }
        a.cholesky()
    }

    /// The squared error of weights `w` over these rows: yᵀy − 2wᵀXᵀy + wᵀGw.
    fn squared_error(&self, w: &DVector<f64>) -> f64 {
        (self.yy - 2.0 * w.dot(&self.xty) + w.dot(&(&self.gram * w))).max(0.0)
    }
}

/// Assigns rewards over the steps of one experiment.
pub fn assign(store: &Store, experiment: &str, options: &RewardOptions) -> Result<Assignment> {
    options.check()?;
    let info = store.experiment(experiment)?.with_context(|| {
        format!(
            "store {} holds no experiment named '{experiment}'",
            store.dir().display()
        )
    })?;
    let baseline = info.baseline.objective().with_context(|| {
        format!("experiment {experiment} has no baseline measurement to compare with")
    })?;
    let points = &info.discovery.points;
    let stock: DecisionSet = DecisionSet(
        points
            .iter()
            .map(|p| {
                let value = info.discovery.baseline.get(&p.id).unwrap_or(&p.domain[0]);
                (p.id.clone(), value.clone())
            })
            .collect(),
    );
    // Every (site, value) of the domain, and which of them differ from stock.
    let mut pairs: Vec<(SiteId, DecisionValue)> = Vec::new();
    for p in points {
        pairs.extend(p.domain.iter().map(|v| (p.id.clone(), v.clone())));
    }
    let index: HashMap<(&SiteId, &DecisionValue), usize> = pairs
        .iter()
        .enumerate()
        .map(|(i, (s, v))| ((s, v), i))
        .collect();
    // The pairs a row has: the value of every site (stock where a step leaves one out).
    let pairs_of = |record: &StepRecord| -> Result<Vec<usize>> {
        let set = record.decisions.completed_from(&stock);
        set.0
            .iter()
            .map(|(site, value)| {
                index.get(&(site, value)).copied().with_context(|| {
                    format!(
                        "step {} decides '{site}' = {value}, which is outside the decision \
                         points of experiment {experiment}",
                        record.key
                    )
                })
            })
            .collect()
    };
    let target_of =
        |objective: f64| Some(options.target.of(objective, baseline)).filter(|t| t.is_finite());

    // Pass 1: how often each pair was seen, and the best step.
    let mut counts = vec![0u64; pairs.len()];
    let mut rows = 0u64;
    let mut best_step: Option<BestStep> = None;
    for record in store.steps(Some(experiment)) {
        let record = record?;
        let Some(objective) = row_objective(&record) else {
            continue;
        };
        if target_of(objective).is_none() {
            continue;
        }
        for i in pairs_of(&record)? {
            counts[i] += 1;
        }
        rows += 1;
        if best_step.as_ref().is_none_or(|b| objective < b.objective) {
            best_step = Some(BestStep {
                key: record.key.clone(),
                objective,
                decisions: record.decisions.completed_from(&stock),
                worker: record.worker.clone(),
            });
        }
    }
    if rows == 0 {
        bail!("experiment {experiment} has no successfully measured steps to assign rewards from");
    }

    // Which pairs get a reward: feature numbers from 1 (0 is the intercept).
    let mut estimates = vec![Estimate::TooRare; pairs.len()];
    let mut feature_of: Vec<Option<usize>> = vec![None; pairs.len()];
    let mut features = 0usize;
    let mut start = 0;
    for p in points {
        let span = start..start + p.domain.len();
        start = span.end;
        let seen = counts[span.clone()].iter().filter(|c| **c > 0).count();
        let stock_count = span
            .clone()
            .find(|&i| Some(&pairs[i].1) == stock.get(&p.id))
            .map_or(0, |i| counts[i]);
        for i in span {
            estimates[i] = if seen <= 1 {
                Estimate::NeverVaried
            } else if Some(&pairs[i].1) == stock.get(&p.id) {
                Estimate::Stock
            } else if counts[i] >= options.min_count && stock_count >= options.min_count {
                features += 1;
                feature_of[i] = Some(features);
                // Filled in once the fit is solved.
                Estimate::Fitted {
                    reward: 0.0,
                    std_error: None,
                }
            } else {
                Estimate::TooRare
            };
        }
    }

    // Pass 2: each fold's normal equations.
    let dim = features + 1;
    let folds = options.folds as usize;
    let mut fold = vec![Normal::zeros(dim); folds];
    let mut usable = 0usize;
    for record in store.steps(Some(experiment)) {
        let record = record?;
        let Some(target) = row_objective(&record).and_then(target_of) else {
            continue;
        };
        let mut row = Row {
            target,
            features: vec![0],
        };
        row.features
            .extend(pairs_of(&record)?.into_iter().filter_map(|i| feature_of[i]));
        fold[usable % folds].add(&row);
        usable += 1;
    }
    let total = Normal::sum(dim, fold.iter());
    let factor = total.ridge(options.lambda).with_context(|| {
        format!(
            "the regression of experiment {experiment} is singular with lambda {}; \
             use a positive --lambda",
            options.lambda
        )
    })?;
    let weights = factor.solve(&total.xty);

    // Standard errors: σ² from the residuals over n − tr(A⁻¹G) degrees of freedom.
    let a_inv = factor.inverse();
    let hat = &a_inv * &total.gram;
    let residual_df = rows as f64 - hat.trace();
    let covariance = (residual_df > 0.0).then(|| {
        let sigma2 = total.squared_error(&weights) / residual_df;
        &hat * &a_inv * sigma2
    });
    for (i, estimate) in estimates.iter_mut().enumerate() {
        if let Some(f) = feature_of[i] {
            *estimate = Estimate::Fitted {
                reward: weights[f],
                std_error: covariance.as_ref().map(|c| c[(f, f)].max(0.0).sqrt()),
            };
        }
    }

    // Cross-validation: each fold predicted from the others.
    let variance = total.yy - total.sum_y * total.sum_y / rows as f64;
    let no_variance = variance <= 1e-12 * total.yy.max(f64::MIN_POSITIVE);
    let mut cv_r2 = None;
    if !no_variance && usable >= folds {
        let mut press = 0.0;
        let mut complete = true;
        for (f, held_out) in fold.iter().enumerate() {
            let train = Normal::sum(
                dim,
                fold.iter()
                    .enumerate()
                    .filter(|(g, _)| *g != f)
                    .map(|(_, n)| n),
            );
            match train.ridge(options.lambda) {
                Some(factor) => press += held_out.squared_error(&factor.solve(&train.xty)),
                None => complete = false,
            }
        }
        cv_r2 = complete.then(|| 1.0 - press / variance);
    }

    let needed = MIN_ROWS.max(dim as u64 + 1);
    let distrust = if rows < needed {
        Some(Distrust::TooFewRows { rows, needed })
    } else if features == 0 {
        Some(Distrust::NothingToFit)
    } else if no_variance {
        Some(Distrust::NoVariance)
    } else {
        let r2 = cv_r2.unwrap_or(f64::NEG_INFINITY);
        (r2 < options.min_r2).then_some(Distrust::LowR2 {
            r2,
            min: options.min_r2,
        })
    };

    let rewards: Vec<Reward> = pairs
        .into_iter()
        .zip(estimates)
        .zip(counts)
        .map(|(((site, value), estimate), count)| Reward {
            site,
            value,
            estimate,
            count,
        })
        .collect();
    // Per site the value with the highest reward among those that exceed their standard
    // error (a gain within its own noise is no reason to leave stock); else stock.
    let mut proposal = stock.clone();
    let mut chosen: HashMap<&SiteId, f64> = HashMap::new();
    for r in &rewards {
        if let Estimate::Fitted {
            reward,
            std_error: Some(se),
        } = r.estimate
        {
            if reward <= se {
                continue;
            }
            let best = chosen.entry(&r.site).or_insert(0.0);
            if reward > *best {
                *best = reward;
                proposal.0.insert(r.site.clone(), r.value.clone());
            }
        }
    }
    let config = store.config()?;
    Ok(Assignment {
        experiment: experiment.to_string(),
        benchmark: benchmark_of(config.as_ref(), experiment),
        options: *options,
        rewards,
        rows,
        intercept: weights[0],
        cv_r2,
        distrust,
        proposal,
        stock,
        baseline_objective: baseline,
        best_step,
    })
}

/// The objectives of stock, the best step and the proposal, measured side by
/// side on one worker with the campaign's objective.
#[derive(Debug, Clone, PartialEq)]
pub struct Verification {
    /// The worker they were measured on.
    pub worker: String,
    /// Rounds measured, each set once per round.
    pub rounds: u32,
    /// The stock decisions' objective.
    pub stock: f64,
    /// The best step's decisions' objective, measured again.
    pub best_step: f64,
    /// The proposal's objective, or why it failed.
    pub proposal: std::result::Result<f64, String>,
}

/// What became of a proposal.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Measured no worse than the stock decisions and the best step: the best decisions.
    Best,
    /// Measured worse than the stock decisions.
    WorseThanStock,
    /// Measured worse than the best step.
    WorseThanBestStep,
    /// Failed when measured, for this reason.
    Failed(String),
    /// The model is not trusted, so its proposal was not measured.
    Untrusted(Distrust),
    /// Not measured, as asked (`--no-verify`).
    Unverified,
}

impl Verdict {
    /// The name in JSON.
    pub fn name(&self) -> &'static str {
        match self {
            Verdict::Best => "best",
            Verdict::WorseThanStock => "worse-than-stock",
            Verdict::WorseThanBestStep => "worse-than-best-step",
            Verdict::Failed(_) => "failed",
            Verdict::Untrusted(_) => "untrusted",
            Verdict::Unverified => "unverified",
        }
    }

    /// What it means, in a sentence.
    pub fn says(&self) -> String {
        match self {
            Verdict::Best => {
                "measured no worse than the stock decisions and the best step: the best decisions"
                    .into()
            }
            Verdict::WorseThanStock => {
                "measured worse than the stock decisions: not the best decisions".into()
            }
            Verdict::WorseThanBestStep => {
                "measured worse than the campaign's best step: not the best decisions".into()
            }
            Verdict::Failed(reason) => format!("failed when measured ({reason})"),
            Verdict::Untrusted(why) => format!("the model is not trustworthy: {why}"),
            Verdict::Unverified => "unverified (--no-verify): never measured".into(),
        }
    }
}

/// The verdict that needs no measurement: an untrusted model's, or an
/// unverified one's; `None` where the proposal is to be measured.
pub fn prejudge(a: &Assignment, verify: bool) -> Option<Verdict> {
    if !verify {
        return Some(Verdict::Unverified);
    }
    a.distrust.map(Verdict::Untrusted)
}

/// The verdict of a measured proposal: best only where it measured no worse
/// than either the stock decisions or the best step.
pub fn judge(v: &Verification) -> Verdict {
    match &v.proposal {
        Err(reason) => Verdict::Failed(reason.clone()),
        Ok(p) if *p > v.stock => Verdict::WorseThanStock,
        Ok(p) if *p > v.best_step => Verdict::WorseThanBestStep,
        Ok(_) => Verdict::Best,
    }
}

/// One experiment's rewards, the check of its proposal, and the files written.
#[derive(Debug)]
pub struct Checked {
    /// The rewards.
    pub assignment: Assignment,
    /// The measurements, where the proposal was measured.
    pub verification: Option<Verification>,
    /// What became of the proposal.
    pub verdict: Verdict,
    /// The proposal's decision file, labelled with its verdict.
    pub proposal_file: PathBuf,
    /// The best decision file: only with [`Verdict::Best`].
    pub best_file: Option<PathBuf>,
    /// The best measured step's decision file, to use where the proposal is not the best.
    pub best_step_file: Option<PathBuf>,
}

/// What `kiln rewards` wrote.
#[derive(Debug)]
pub struct Written {
    /// Per experiment: its rewards, verdict and files.
    pub experiments: Vec<Checked>,
    /// Experiments with no successfully measured step.
    pub skipped: Vec<String>,
    /// The rewards table (CSV).
    pub table: PathBuf,
}

/// Writes the `rewards` table (header and rows); returns the number of rows.
pub fn write_table<'a, W: Write>(
    assignments: impl IntoIterator<Item = &'a Assignment>,
    csv: &mut csv::Writer<W>,
) -> Result<u64> {
    csv.write_record(REWARD_COLUMNS)?;
    let mut rows = 0;
    let number = |x: Option<f64>| x.map(|x| x.to_string()).unwrap_or_default();
    for a in assignments {
        for r in &a.rewards {
            // Shown with control characters escaped, as every CSV kiln writes.
            csv.write_record([
                &*escape_controls(&a.experiment),
                &escape_controls(r.site.as_str()),
                &r.value.to_string(),
                r.estimate.name(),
                &number(r.estimate.reward()),
                &number(r.estimate.std_error()),
                &r.count.to_string(),
            ])?;
            rows += 1;
        }
    }
    Ok(rows)
}

/// Writes the rewards table and each experiment's files into `dir`: the
/// proposal (labelled with its verdict), the best decision file only where
/// the verdict is [`Verdict::Best`] (an older one is removed otherwise), and
/// where it is not, the best measured step's file unless the store has it.
/// Every file is put in place once all are written (see [`crate::atomic`]).
pub fn write(
    store: &Store,
    dir: &Path,
    judged: Vec<(Assignment, Option<Verification>, Verdict)>,
    skipped: Vec<String>,
) -> Result<Written> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut staging = Staging::default();
    let table = layout::rewards_table(dir);
    let mut csv = csv::Writer::from_writer(staging.create(&table)?);
    write_table(judged.iter().map(|(a, _, _)| a), &mut csv)?;
    csv.flush()
        .with_context(|| format!("cannot write {}", table.display()))?;
    drop(csv);
    let mut experiments = Vec::new();
    let mut stale = Vec::new();
    for (a, verification, verdict) in judged {
        let proposal_file = layout::rewards_proposal_file(dir, &a.experiment);
        let label = format!(
            "the model's proposal for {}: {}",
            a.experiment,
            verdict.says()
        );
        write_labelled(
            &mut staging,
            &proposal_file,
            &label,
            &a.decision_file(&a.proposal),
        )?;
        let best = layout::rewards_best_file(dir, &a.experiment);
        let (best_file, best_step_file) = if verdict == Verdict::Best {
            let label = format!(
                "the best decisions for {}, {}",
                a.experiment,
                verdict.says()
            );
            write_labelled(&mut staging, &best, &label, &a.decision_file(&a.proposal))?;
            (Some(best), None)
        } else {
            // An earlier run's best file must not outlive this verdict.
            stale.push(best);
            (None, best_step_file(store, &mut staging, dir, &a)?)
        };
        experiments.push(Checked {
            assignment: a,
            verification,
            verdict,
            proposal_file,
            best_file,
            best_step_file,
        });
    }
    staging.commit()?;
    for best in stale {
        match std::fs::remove_file(&best) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(e).with_context(|| format!("cannot remove {}", best.display()))
            }
            _ => {}
        }
    }
    Ok(Written {
        experiments,
        skipped,
        table,
    })
}

/// The decision file of the best measured step: the store's best file of its
/// chain where that holds the step's decisions, else one written into `dir`.
fn best_step_file(
    store: &Store,
    staging: &mut Staging,
    dir: &Path,
    a: &Assignment,
) -> Result<Option<PathBuf>> {
    let Some(step) = &a.best_step else {
        return Ok(None);
    };
    let kept = layout::best_file(store.dir(), &a.experiment, step.key.chain);
    let same = std::fs::read_to_string(&kept)
        .ok()
        .and_then(|text| DecisionFile::parse(&text, &kept.display().to_string()).ok())
        .is_some_and(|f| f.set.completed_from(&a.stock) == step.decisions);
    if same {
        return Ok(Some(kept));
    }
    let path = layout::rewards_best_step_file(dir, &a.experiment);
    let label = format!(
        "the best step kiln measured in {}: {}, {} {}",
        a.experiment,
        step.key,
        crate::text::TIME_RATIO,
        format_ratio(time_ratio(step.objective, a.baseline_objective))
    );
    write_labelled(staging, &path, &label, &a.decision_file(&step.decisions))?;
    Ok(Some(path))
}

/// Writes a decision file under a comment that says what it is.
fn write_labelled(
    staging: &mut Staging,
    path: &Path,
    label: &str,
    file: &DecisionFile,
) -> Result<()> {
    staging.write(path, format!("; {label}\n{}", file.to_text()))
}

/// Fitted sites by their reward's distance from stock, largest first.
pub fn largest_effects(a: &Assignment) -> Vec<&Reward> {
    let mut out: Vec<&Reward> = a
        .rewards
        .iter()
        .filter(|r| matches!(r.estimate, Estimate::Fitted { .. }))
        .collect();
    out.sort_by(|x, y| {
        let size = |r: &Reward| r.estimate.reward().unwrap_or(0.0).abs();
        size(y).total_cmp(&size(x))
    });
    out
}
