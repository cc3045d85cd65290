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

mod fit;
mod verdict;
mod write;

use std::fmt;

use anyhow::Result;

use kiln_protocol::{DecisionFile, DecisionSet, DecisionValue, SiteId};

use crate::error::BadInput;
use crate::store::{manual_benchmark, StepKey, Store};
pub use fit::assign;
use fit::has_rows;
pub use verdict::{judge, prejudge, Checked, Verdict, Verification};
pub use write::{largest_effects, write, write_table, Written};

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

impl BestStep {
    /// Whether it measured below the experiment's baseline: only then is it
    /// a best set to use (where no step beat stock, stock is the best).
    pub fn beat_stock(&self, a: &Assignment) -> bool {
        self.objective < a.baseline_objective
    }
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

/// Rewards of the named experiment, or of every searched (not manual)
/// experiment of the store that has a successful step; also returns the
/// experiments skipped for having none.
pub fn assign_all(
    store: &Store,
    experiment: Option<&str>,
    options: &RewardOptions,
) -> Result<(Vec<Assignment>, Vec<String>)> {
    if let Some(name) = experiment {
        return Ok((vec![assign(store, name, options)?], Vec::new()));
    }
    let (mut assignments, mut skipped) = (Vec::new(), Vec::new());
    // Measurements by hand (`kiln benchmark --store`) are no search's steps: their
    // rewards only where named.
    let searched = store
        .experiment_names()?
        .into_iter()
        .filter(|name| manual_benchmark(name).is_none());
    for name in searched {
        if has_rows(store, &name)? {
            assignments.push(assign(store, &name, options)?);
        } else {
            skipped.push(name);
        }
    }
    Ok((assignments, skipped))
}
