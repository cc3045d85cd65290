//! The ridge regression itself: the design matrix of non-stock values, the
//! normal equations with their sandwich standard errors, and the
//! cross-validated R² of the fit.

use std::collections::HashMap;

use anyhow::{bail, Context, Result};
use nalgebra::{Cholesky, DMatrix, DVector, Dyn};

use kiln_protocol::message::Discovery;
use kiln_protocol::{DecisionPoint, DecisionSet, DecisionValue, SiteId, StepOutcome};

use crate::error::BadInput;
use crate::store::{benchmark_of, StepRecord, Store};

use super::*;

/// A usable row: its target and the fitted features it has (0, the intercept, always).
pub(super) struct Row {
    pub(super) target: f64,
    pub(super) features: Vec<usize>,
}

/// The objective of a step that makes a row: measured afresh (a reused
/// measurement repeats another step's row) and successful.
pub(super) fn row_objective(record: &StepRecord) -> Option<f64> {
    if record.cached_from.is_some() || record.result.measurement.outcome != StepOutcome::Ok {
        return None;
    }
    record.objective
}

/// Whether an experiment has a step that makes a row.
pub(super) fn has_rows(store: &Store, experiment: &str) -> Result<bool> {
    for record in store.steps(Some(experiment)) {
        if row_objective(&record?).is_some() {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The normal equations of some rows, the intercept as feature 0.
#[derive(Clone)]
pub(super) struct Normal {
    pub(super) gram: DMatrix<f64>,
    pub(super) xty: DVector<f64>,
    pub(super) yy: f64,
    pub(super) sum_y: f64,
    pub(super) n: u64,
}

impl Normal {
    pub(super) fn zeros(dim: usize) -> Normal {
        Normal {
            gram: DMatrix::zeros(dim, dim),
            xty: DVector::zeros(dim),
            yy: 0.0,
            sum_y: 0.0,
            n: 0,
        }
    }

    pub(super) fn add(&mut self, row: &Row) {
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

    pub(super) fn sum<'a>(dim: usize, parts: impl Iterator<Item = &'a Normal>) -> Normal {
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
    pub(super) fn ridge(&self, lambda: f64) -> Option<Cholesky<f64, Dyn>> {
        let mut a = self.gram.clone();
        for i in 1..a.nrows() {
            a[(i, i)] += lambda;
        }
        a.cholesky()
    }

    /// The squared error of weights `w` over these rows: yᵀy − 2wᵀXᵀy + wᵀGw.
    pub(super) fn squared_error(&self, w: &DVector<f64>) -> f64 {
        (self.yy - 2.0 * w.dot(&self.xty) + w.dot(&(&self.gram * w))).max(0.0)
    }
}

/// Assigns rewards over the steps of one experiment.
pub fn assign(store: &Store, experiment: &str, options: &RewardOptions) -> Result<Assignment> {
    options.check()?;
    let info = store
        .experiment(experiment)?
        .ok_or_else(|| BadInput(store.no_such_experiment(experiment)))?;
    let baseline = info.baseline.objective().with_context(|| {
        format!("experiment {experiment} has no baseline measurement to compare with")
    })?;
    let points = &info.discovery.points;
    let stock = stock_of(&info.discovery);
    // Every (site, value) of the domain, and which of them differ from stock.
    let pairs = domain_pairs(points);
    let design = Design::new(experiment, &stock, &pairs);
    let target_of =
        |objective: f64| Some(options.target.of(objective, baseline)).filter(|t| t.is_finite());

    let seen = Seen::tally(store, &design, &target_of)?;
    let rows = seen.rows;
    if rows == 0 {
        bail!("experiment {experiment} has no successfully measured steps to assign rewards from");
    }
    let mut features = Features::choose(points, &pairs, &stock, &seen.counts, options.min_count);
    let dim = features.count + 1;
    let folds = options.folds as usize;
    let (fold, usable) = fold_normals(store, &design, &target_of, &features.of_pair, dim, folds)?;
    let total = Normal::sum(dim, fold.iter());
    let weights = features.fit(&total, rows, options.lambda, experiment)?;

    let variance = total.yy - total.sum_y * total.sum_y / rows as f64;
    let no_variance = variance <= 1e-12 * total.yy.max(f64::MIN_POSITIVE);
    let cv_r2 = if !no_variance && usable >= folds {
        cross_validated_r2(&fold, dim, options.lambda, variance)
    } else {
        None
    };
    let distrust = distrust(rows, dim, features.count, no_variance, cv_r2, options);

    let rewards = rewards_of(pairs, features.estimates, seen.counts);
    let proposal = propose(&stock, &rewards);
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
        best_step: seen.best_step,
    })
}

/// The stock decisions: the discovered baseline, else each point's first value.
fn stock_of(discovery: &Discovery) -> DecisionSet {
    DecisionSet(
        discovery
            .points
            .iter()
            .map(|p| {
                let value = discovery.baseline.get(&p.id).unwrap_or(&p.domain[0]);
                (p.id.clone(), value.clone())
            })
            .collect(),
    )
}

/// Every (site, value) of the domain, in the points' order.
fn domain_pairs(points: &[DecisionPoint]) -> Vec<(SiteId, DecisionValue)> {
    let mut pairs: Vec<(SiteId, DecisionValue)> = Vec::new();
    for p in points {
        pairs.extend(p.domain.iter().map(|v| (p.id.clone(), v.clone())));
    }
    pairs
}

/// Where a step's decisions fall among the domain's (site, value) pairs.
struct Design<'a> {
    experiment: &'a str,
    stock: &'a DecisionSet,
    pairs: &'a [(SiteId, DecisionValue)],
    index: HashMap<(&'a SiteId, &'a DecisionValue), usize>,
}

impl<'a> Design<'a> {
    fn new(
        experiment: &'a str,
        stock: &'a DecisionSet,
        pairs: &'a [(SiteId, DecisionValue)],
    ) -> Design<'a> {
        let index = pairs
            .iter()
            .enumerate()
            .map(|(i, (s, v))| ((s, v), i))
            .collect();
        Design {
            experiment,
            stock,
            pairs,
            index,
        }
    }

    /// The pairs a row has: the value of every site (stock where a step leaves one out).
    fn pairs_of(&self, record: &StepRecord) -> Result<Vec<usize>> {
        let set = record.decisions.completed_from(self.stock);
        set.0
            .iter()
            .map(|(site, value)| {
                self.index.get(&(site, value)).copied().with_context(|| {
                    format!(
                        "step {} decides '{site}' = {value}, which is outside the decision \
                         points of experiment {}",
                        record.key, self.experiment
                    )
                })
            })
            .collect()
    }
}

/// Pass 1 over the steps: how often each pair was seen, in how many rows, and the best step.
struct Seen {
    counts: Vec<u64>,
    rows: u64,
    best_step: Option<BestStep>,
}

impl Seen {
    fn tally(
        store: &Store,
        design: &Design,
        target_of: &impl Fn(f64) -> Option<f64>,
    ) -> Result<Seen> {
        let mut seen = Seen {
            counts: vec![0u64; design.pairs.len()],
            rows: 0,
            best_step: None,
        };
        for record in store.steps(Some(design.experiment)) {
            let record = record?;
            let Some(objective) = row_objective(&record) else {
                continue;
            };
            if target_of(objective).is_none() {
                continue;
            }
            for i in design.pairs_of(&record)? {
                seen.counts[i] += 1;
            }
            seen.rows += 1;
            if seen
                .best_step
                .as_ref()
                .is_none_or(|b| objective < b.objective)
            {
                seen.best_step = Some(BestStep {
                    key: record.key.clone(),
                    objective,
                    decisions: record.decisions.completed_from(design.stock),
                    worker: record.worker.clone(),
                });
            }
        }
        Ok(seen)
    }
}

/// Which pairs get a reward, and what the data say of each.
struct Features {
    /// Per pair: filled in for the fitted ones once the fit is solved.
    estimates: Vec<Estimate>,
    /// Per pair: its feature number, from 1 (0 is the intercept).
    of_pair: Vec<Option<usize>>,
    /// How many features there are, the intercept not counted.
    count: usize,
}

impl Features {
    fn choose(
        points: &[DecisionPoint],
        pairs: &[(SiteId, DecisionValue)],
        stock: &DecisionSet,
        counts: &[u64],
        min_count: u64,
    ) -> Features {
        let mut features = Features {
            estimates: vec![Estimate::TooRare; pairs.len()],
            of_pair: vec![None; pairs.len()],
            count: 0,
        };
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
                features.estimates[i] = if seen <= 1 {
                    Estimate::NeverVaried
                } else if Some(&pairs[i].1) == stock.get(&p.id) {
                    Estimate::Stock
                } else if counts[i] >= min_count && stock_count >= min_count {
                    features.count += 1;
                    features.of_pair[i] = Some(features.count);
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
        features
    }

    /// Solves the ridge regression of `total`, fills in the fitted estimates, and returns
    /// the weights (the intercept first).
    fn fit(
        &mut self,
        total: &Normal,
        rows: u64,
        lambda: f64,
        experiment: &str,
    ) -> Result<DVector<f64>> {
        let factor = total.ridge(lambda).with_context(|| {
            format!(
                "the regression of experiment {experiment} is singular with lambda {lambda}; \
                 use a positive --lambda"
            )
        })?;
        let weights = factor.solve(&total.xty);
        let covariance = covariance(&factor, total, &weights, rows);
        for (i, estimate) in self.estimates.iter_mut().enumerate() {
            if let Some(f) = self.of_pair[i] {
                *estimate = Estimate::Fitted {
                    reward: weights[f],
                    std_error: covariance.as_ref().map(|c| c[(f, f)].max(0.0).sqrt()),
                };
            }
        }
        Ok(weights)
    }
}

/// Pass 2 over the steps: each fold's normal equations (rows dealt to the folds in turn),
/// and how many rows were dealt.
fn fold_normals(
    store: &Store,
    design: &Design,
    target_of: &impl Fn(f64) -> Option<f64>,
    feature_of: &[Option<usize>],
    dim: usize,
    folds: usize,
) -> Result<(Vec<Normal>, usize)> {
    let mut fold = vec![Normal::zeros(dim); folds];
    let mut usable = 0usize;
    for record in store.steps(Some(design.experiment)) {
        let record = record?;
        let Some(target) = row_objective(&record).and_then(target_of) else {
            continue;
        };
        let mut row = Row {
            target,
            features: vec![0],
        };
        row.features.extend(
            design
                .pairs_of(&record)?
                .into_iter()
                .filter_map(|i| feature_of[i]),
        );
        fold[usable % folds].add(&row);
        usable += 1;
    }
    Ok((fold, usable))
}

/// The weights' covariance: σ² from the residuals over n − tr(A⁻¹G) degrees of freedom,
/// `None` where there are none.
fn covariance(
    factor: &Cholesky<f64, Dyn>,
    total: &Normal,
    weights: &DVector<f64>,
    rows: u64,
) -> Option<DMatrix<f64>> {
    let a_inv = factor.inverse();
    let hat = &a_inv * &total.gram;
    let residual_df = rows as f64 - hat.trace();
    (residual_df > 0.0).then(|| {
        let sigma2 = total.squared_error(weights) / residual_df;
        &hat * &a_inv * sigma2
    })
}

/// Cross-validation: each fold predicted from the others; `None` where a fold's fit is
/// singular.
fn cross_validated_r2(fold: &[Normal], dim: usize, lambda: f64, variance: f64) -> Option<f64> {
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
        match train.ridge(lambda) {
            Some(factor) => press += held_out.squared_error(&factor.solve(&train.xty)),
            None => complete = false,
        }
    }
    complete.then(|| 1.0 - press / variance)
}

/// Why the model is not to be trusted, if it is not.
fn distrust(
    rows: u64,
    dim: usize,
    features: usize,
    no_variance: bool,
    cv_r2: Option<f64>,
    options: &RewardOptions,
) -> Option<Distrust> {
    let needed = MIN_ROWS.max(dim as u64 + 1);
    if rows < needed {
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
    }
}

/// Each pair's reward: its estimate and how often it was seen.
fn rewards_of(
    pairs: Vec<(SiteId, DecisionValue)>,
    estimates: Vec<Estimate>,
    counts: Vec<u64>,
) -> Vec<Reward> {
    pairs
        .into_iter()
        .zip(estimates)
        .zip(counts)
        .map(|(((site, value), estimate), count)| Reward {
            site,
            value,
            estimate,
            count,
        })
        .collect()
}

/// Per site the value with the highest reward among those that exceed their standard
/// error (a gain within its own noise is no reason to leave stock); else stock.
fn propose(stock: &DecisionSet, rewards: &[Reward]) -> DecisionSet {
    let mut proposal = stock.clone();
    let mut chosen: HashMap<&SiteId, f64> = HashMap::new();
    for r in rewards {
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
    proposal
}
