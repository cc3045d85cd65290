//! Every table as a source of typed rows: its columns, then its rows pushed
//! into any [`Writer`].

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{Context, Result};

use kiln_protocol::message::{FunctionCode, RunRecord};
use kiln_protocol::{DecisionSet, Metric, MetricValue, SiteId};

use crate::plan::attribution;
use crate::rewards::{self, Assignment, RewardOptions};
use crate::store::summary::MetricKey;
use crate::store::{ExperimentInfo, StepKind, StepRecord, Store};

use super::caller_code::{self, StartCode, StepCode};
use super::format::{Batched, Column, Sink, SinkExt, Type, Writer};
use super::schema::{
    columns, feature_values, features, run_metric_column, Feature, DATASET_COLUMNS,
    DECISION_COLUMNS, EFFECT_COLUMNS, REWARD_TABLE_COLUMNS, RUN_COLUMNS, SITE_COLUMNS,
    SUPPORT_COLUMNS, WIDE_DECISION_COLUMNS,
};
use super::{steps, ExportOptions, Table, Tables};

/// A table, ready to write: what its columns depend on is found.
pub(super) struct Source<'a> {
    store: &'a Store,
    ctx: &'a Tables,
    kind: Kind,
}

enum Kind {
    Steps(Vec<Metric>),
    Runs(Vec<Metric>),
    Decisions,
    /// One column per site, in discovery order.
    Wide(Vec<SiteId>),
    Sites(Vec<Feature>),
    Support(Vec<Metric>),
    Dataset(Vec<Feature>),
    Effects(Vec<Feature>),
    Rewards(Vec<Assignment>),
}

impl<'a> Source<'a> {
    pub(super) fn new(
        store: &'a Store,
        ctx: &'a Tables,
        options: &ExportOptions<'_>,
    ) -> Result<Source<'a>> {
        let metrics = || -> Result<Vec<Metric>> { Ok(ctx.metrics(store)?.into_iter().collect()) };
        let kind = match options.table {
            Table::Steps => Kind::Steps(metrics()?),
            Table::Runs => Kind::Runs(metrics()?),
            Table::Decisions if options.wide => Kind::Wide(wide_columns(ctx)),
            Table::Decisions => Kind::Decisions,
            Table::Sites => Kind::Sites(features()),
            Table::Support => Kind::Support(metrics()?),
            Table::Dataset => Kind::Dataset(features()),
            Table::Effects => Kind::Effects(features()),
            Table::Rewards => Kind::Rewards(
                rewards::assign_all(store, options.experiment, &RewardOptions::default())?.0,
            ),
        };
        Ok(Source { store, ctx, kind })
    }

    /// The table's columns.
    pub(super) fn columns(&self) -> Vec<Column> {
        let with_features = |fixed, features: &[Feature]| {
            let mut all = columns(fixed);
            all.extend(features.iter().map(|f| f.column.clone()));
            all
        };
        match &self.kind {
            Kind::Steps(metrics) => steps::header(metrics),
            Kind::Runs(metrics) => {
                let mut all = columns(RUN_COLUMNS);
                all.extend(metrics.iter().map(|m| run_metric_column(*m)));
                all
            }
            Kind::Decisions => columns(DECISION_COLUMNS),
            Kind::Wide(sites) => {
                let mut all = columns(WIDE_DECISION_COLUMNS);
                all.extend(
                    sites.iter().map(|s| {
                        Column::new(s.as_str(), Type::Text, "the step's value at this site")
                    }),
                );
                all
            }
            Kind::Sites(features) => with_features(SITE_COLUMNS, features),
            Kind::Support(_) => columns(SUPPORT_COLUMNS),
            Kind::Dataset(features) => with_features(DATASET_COLUMNS, features),
            Kind::Effects(features) => with_features(EFFECT_COLUMNS, features),
            Kind::Rewards(_) => columns(REWARD_TABLE_COLUMNS),
        }
    }

    /// Writes the rows; returns their number.
    pub(super) fn rows<W: Writer>(&self, out: &mut W) -> Result<u64> {
        let (store, ctx) = (self.store, self.ctx);
        match &self.kind {
            Kind::Steps(metrics) => steps::write(store, ctx, metrics, out),
            Kind::Runs(metrics) => runs(store, ctx, metrics, &mut Batched::new(out)),
            Kind::Decisions => decisions_long(store, ctx, &mut Batched::new(out)),
            Kind::Wide(sites) => decisions_wide(store, ctx, sites, &mut Batched::new(out)),
            Kind::Sites(features) => sites(ctx, features, &mut Batched::new(out)),
            Kind::Support(metrics) => support(store, ctx, metrics, &mut Batched::new(out)),
            Kind::Dataset(features) => dataset(store, ctx, features, &mut Batched::new(out)),
            Kind::Effects(features) => effects(store, ctx, features, &mut Batched::new(out)),
            Kind::Rewards(all) => rewards_rows(all, &mut Batched::new(out)),
        }
    }
}

/// What a run was for. Calibration runs are not stored with the steps.
fn run_kind(run: &RunRecord, step: StepKind) -> &'static str {
    if run.warmup {
        "warm-up"
    } else if run.metrics.contains_key(&Metric::Instructions) {
        // Only callgrind counts instructions; its runs measure nothing else.
        "callgrind"
    } else if step == StepKind::Remeasure {
        "re-measure"
    } else {
        "timed"
    }
}

fn runs<W: Writer>(
    store: &Store,
    ctx: &Tables,
    metrics: &[Metric],
    out: &mut Batched<'_, W>,
) -> Result<u64> {
    for record in ctx.steps(store) {
        let r = record?;
        for run in &r.result.measurement.runs {
            let row = out.row();
            row.text(&r.key.experiment);
            row.uint(r.key.chain.into());
            row.uint(r.key.step.into());
            row.text(&r.worker);
            row.uint(r.slot.into());
            row.text(r.result.measurement.outcome.name());
            row.bool(r.cached_from.is_some());
            row.uint(run.index.into());
            row.text(run_kind(run, r.kind));
            row.bool(run.warmup);
            row.opt_int(run.exit_code);
            row.opt_int(run.signal);
            for m in metrics {
                match run.metrics.get(m) {
                    Some(MetricValue::Measured(v)) => row.float(*v),
                    Some(MetricValue::Unsupported) | None => row.null(),
                }
            }
            out.end()?;
        }
    }
    out.done()
}

fn decisions_long<W: Writer>(store: &Store, ctx: &Tables, out: &mut Batched<'_, W>) -> Result<u64> {
    for record in ctx.steps(store) {
        let r = record?;
        for (site, value) in &r.decisions.0 {
            let row = out.row();
            row.text(&r.key.experiment);
            row.uint(r.key.chain.into());
            row.uint(r.key.step.into());
            row.text(site.as_str());
            row.text(&value.to_string());
            out.end()?;
        }
    }
    out.done()
}

/// Every decision point of the selected experiments, in their discovery order.
fn wide_columns(ctx: &Tables) -> Vec<SiteId> {
    let mut columns = Vec::new();
    let mut seen = BTreeSet::new();
    for info in ctx.experiments.values() {
        for p in &info.discovery.points {
            if seen.insert(&p.id) {
                columns.push(p.id.clone());
            }
        }
    }
    columns
}

fn decisions_wide<W: Writer>(
    store: &Store,
    ctx: &Tables,
    columns: &[SiteId],
    out: &mut Batched<'_, W>,
) -> Result<u64> {
    // A site of another experiment stays null.
    let index: BTreeMap<&SiteId, usize> = columns.iter().enumerate().map(|(i, s)| (s, i)).collect();
    for record in ctx.steps(store) {
        let r = record?;
        let mut values = vec![None; columns.len()];
        for (site, value) in &r.decisions.0 {
            let i = index.get(site).with_context(|| {
                format!(
                    "step {} decides '{site}', which is no decision point of experiment {}",
                    r.key, r.key.experiment
                )
            })?;
            values[*i] = Some(value.to_string());
        }
        let row = out.row();
        row.text(&r.key.experiment);
        row.uint(r.key.chain.into());
        row.uint(r.key.step.into());
        for v in &values {
            row.opt_text(v.as_deref());
        }
        out.end()?;
    }
    out.done()
}

/// Writes feature cells, typed as their columns.
fn feature_cells(row: &mut impl Sink, features: &[Feature], values: &[serde_json::Value]) {
    use serde_json::Value;
    for (f, v) in features.iter().zip(values) {
        match (f.column.ty, v) {
            (_, Value::Null) => row.null(),
            (Type::Int, Value::Number(n)) => row.opt_int(n.as_i64()),
            (Type::Float, Value::Number(n)) => row.opt_float(n.as_f64()),
            (Type::Bool, Value::Bool(b)) => row.bool(*b),
            (Type::Text, Value::String(s)) => row.text(s),
            (Type::Text, other) => row.text(&other.to_string()),
            // A value its probed type does not hold: a feature of a kind the
            // probe does not know, written as missing rather than mistyped.
            _ => row.null(),
        }
    }
}

fn sites<W: Writer>(ctx: &Tables, features: &[Feature], out: &mut Batched<'_, W>) -> Result<u64> {
    for (name, info) in &ctx.experiments {
        let benchmark = ctx.benchmark(name);
        let d = &info.discovery;
        for (i, p) in d.points.iter().enumerate() {
            let domain: Vec<String> = p.domain.iter().map(ToString::to_string).collect();
            let row = out.row();
            row.text(name);
            row.text(&benchmark);
            row.uint(i as u64);
            row.text(p.id.as_str());
            row.opt_text(d.baseline.get(&p.id).map(ToString::to_string).as_deref());
            row.text(&domain.join(" "));
            feature_cells(
                row,
                features,
                &feature_values(features, d.features.get(&p.id)),
            );
            out.end()?;
        }
    }
    out.done()
}

fn support<W: Writer>(
    store: &Store,
    ctx: &Tables,
    metrics: &[Metric],
    out: &mut Batched<'_, W>,
) -> Result<u64> {
    let keys: Vec<MetricKey> = metrics.iter().map(|m| MetricKey::from(*m)).collect();
    // Per worker, per metric: steps measured, steps unsupported.
    let mut counts: BTreeMap<String, Vec<(u64, u64)>> = BTreeMap::new();
    for name in ctx.experiments.keys() {
        for stored in store.step_rows(name) {
            let stored = stored?;
            let r = stored
                .row()
                .with_context(|| format!("a stored step of experiment {name} is unreadable"))?;
            let worker = counts
                .entry(r.worker.to_string())
                .or_insert_with(|| vec![(0, 0); keys.len()]);
            for (k, (measured, unsupported)) in keys.iter().zip(worker.iter_mut()) {
                *measured += u64::from(r.summary.iter().any(|(s, _)| s == k));
                *unsupported += u64::from(r.unsupported.contains(k));
            }
        }
    }
    for (worker, per_metric) in &counts {
        for (m, (measured, unsupported)) in metrics.iter().zip(per_metric) {
            let row = out.row();
            row.text(worker);
            row.text(m.name());
            row.text(m.unit());
            row.bool(*measured > 0);
            row.uint(*measured);
            row.uint(*unsupported);
            out.end()?;
        }
    }
    out.done()
}

fn dataset<W: Writer>(
    store: &Store,
    ctx: &Tables,
    features: &[Feature],
    out: &mut Batched<'_, W>,
) -> Result<u64> {
    for (name, info) in &ctx.experiments {
        let benchmark = ctx.benchmark(name);
        let d = &info.discovery;
        // Each site's stock decision and features, found once.
        let sites: Vec<(&SiteId, Option<String>, Vec<serde_json::Value>)> = d
            .points
            .iter()
            .map(|p| {
                (
                    &p.id,
                    d.baseline.get(&p.id).map(ToString::to_string),
                    feature_values(features, d.features.get(&p.id)),
                )
            })
            .collect();
        for record in store.steps(Some(name)) {
            let r = record?;
            let ratio = r.objective.and_then(|o| info.time_ratio(o));
            for (site, stock, values) in &sites {
                let value = r.decisions.get(site).map(ToString::to_string);
                let row = out.row();
                row.text(name);
                row.text(&benchmark);
                row.uint(r.key.chain.into());
                row.uint(r.key.step.into());
                row.text(site.as_str());
                row.opt_text(value.as_deref());
                row.opt_text(stock.as_deref());
                row.opt_bool(value.as_ref().zip(stock.as_ref()).map(|(v, s)| v != s));
                row.opt_bool(r.result.build.as_ref().map(|b| b.moot.contains_key(site)));
                row.text(r.result.measurement.outcome.name());
                row.opt_float(r.objective);
                row.opt_float(ratio);
                feature_cells(row, features, values);
                out.end()?;
            }
        }
    }
    out.done()
}

#[derive(Default)]
struct Flipped {
    /// Each step's relative change from the start's objective (shared builds: those whose
    /// residual was within [`attribution::SEPARABLE`]).
    effects: Vec<f64>,
    /// Each step's half-width of its objective's 95 % interval, relative to the start's objective.
    half_widths: Vec<f64>,
    /// Shared builds: each one's residual (what no flip claimed), relative to the start's objective.
    residuals: Vec<f64>,
    /// Shared builds whose residual passed [`attribution::SEPARABLE`]: (change, residual),
    /// read only where no build of the flip was separable.
    mixed: Vec<(f64, f64)>,
    /// The caller's code in the first build with the flip, where it was read.
    code: Option<FunctionCode>,
}

impl Flipped {
    /// The effects and residuals the row gives, and whether they are separable: the separable
    /// builds' where there are any (a flip built again in a half of its first build, say).
    fn readings(&self) -> (Vec<f64>, Vec<f64>, bool) {
        if !self.effects.is_empty() || self.mixed.is_empty() {
            return (self.effects.clone(), self.residuals.clone(), true);
        }
        let (effects, residuals) = self.mixed.iter().copied().unzip();
        (effects, residuals, false)
    }
}

/// How an `effects` row's flips were measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Estimate {
    /// One flip a step.
    Alone,
    /// Several flips a build, read from the instructions of each one's functions.
    SharedBuild,
}

impl Estimate {
    fn name(self) -> &'static str {
        match self {
            Estimate::Alone => "alone",
            Estimate::SharedBuild => "shared-build",
        }
    }
}

/// Each (site, value, estimate) flipped away from an experiment's start, with what its steps
/// measured of it.
type Flips = BTreeMap<(SiteId, String, Estimate), Flipped>;

fn effects<W: Writer>(
    store: &Store,
    ctx: &Tables,
    features: &[Feature],
    out: &mut Batched<'_, W>,
) -> Result<u64> {
    let metric = ctx.config.as_ref().map(|c| c.objective.metric);
    let exact = metric.is_some_and(|m| m.needs_callgrind());
    for (name, info) in &ctx.experiments {
        let Some(start) = info.baseline.objective() else {
            continue;
        };
        let footprints = attribution::Footprints::new(
            &info.discovery.points,
            &info.baseline.decisions,
            &info.discovery.forced,
        );
        let measured = Measured {
            info,
            footprints: &footprints,
            metric,
            start,
        };
        let (flips, start_code) = measured.steps(store, name)?;
        let benchmark = ctx.benchmark(name);
        let context = ctx.context(name, info);
        let d = &info.discovery;
        for ((site, value, estimate), f) in &flips {
            let (effects, residuals, separable) = f.readings();
            let n = effects.len();
            let std_error = match n {
                _ if exact => None,
                1 => f.half_widths.first().map(|h| h / 1.96),
                _ => kiln_protocol::Summary::of(&effects).map(|s| s.stddev / (n as f64).sqrt()),
            };
            let row = out.row();
            row.text(name);
            row.text(&benchmark);
            row.text(site.as_str());
            row.opt_text(d.baseline.get(site).map(ToString::to_string).as_deref());
            row.text(value);
            row.opt_float(kiln_protocol::Summary::of(&effects).map(|s| s.median));
            row.bool(exact);
            row.opt_float(std_error);
            row.uint(n as u64);
            row.text(&context);
            row.text(estimate.name());
            row.opt_float(residuals.iter().copied().reduce(f64::max));
            row.bool(separable);
            let codes = [start_code.caller(site), f.code];
            for count in codes.into_iter().flat_map(caller_code::counts) {
                row.opt_uint(count);
            }
            feature_cells(
                row,
                features,
                &feature_values(features, d.features.get(site)),
            );
            out.end()?;
        }
    }
    out.done()
}

/// What an experiment's flips are measured against.
struct Measured<'a> {
    info: &'a ExperimentInfo,
    /// Where each function's code runs under the start's decisions.
    footprints: &'a attribution::Footprints,
    metric: Option<Metric>,
    /// The start's objective.
    start: f64,
}

impl Measured<'_> {
    /// Every flip experiment `name`'s steps measured, and the start's code as far as known.
    fn steps(&self, store: &Store, name: &str) -> Result<(Flips, StartCode)> {
        let mut flips = Flips::new();
        let mut start_code = StartCode::new(&self.info.baseline.function_code);
        for record in store.steps(Some(name)) {
            self.note(&mut flips, &mut start_code, &record?);
        }
        Ok((flips, start_code))
    }

    /// Adds what a step measured of the flips it made away from the experiment's start: one
    /// flip alone, or several in a shared build of screening. A reused measurement repeats its
    /// source's (counted once); a moot flip decided nothing (no effect of its site's to count).
    fn note(&self, flips: &mut Flips, start_code: &mut StartCode, r: &StepRecord) {
        let diff = r.decisions.diff_from(&self.info.baseline.decisions);
        let (Some(objective), None) = (r.objective, &r.cached_from) else {
            return;
        };
        let code = StepCode::new(&r.result.measurement.function_code);
        start_code.learn(self.footprints, diff.0.keys(), &code);
        let step = Noted {
            flips,
            r,
            diff: &diff,
            code: &code,
        };
        if diff.len() == 1 {
            self.note_alone(step, objective);
        } else if r.kind == StepKind::Screen {
            self.note_shared(step);
        }
    }

    /// A step of one flip: its effect is the step's objective against the start's.
    fn note_alone(&self, mut step: Noted<'_>, objective: f64) {
        let r = step.r;
        let summary = self
            .metric
            .and_then(|m| r.result.measurement.summary.get(&m));
        let site = step.diff.0.keys().next().expect("one flip");
        let Some(flipped) = step.flipped(site, Estimate::Alone) else {
            return;
        };
        flipped.effects.push(objective / self.start - 1.0);
        if let Some(s) = summary {
            let half_width = (s.ci_high - s.ci_low) / 2.0 / self.start;
            flipped.half_widths.push(half_width);
        }
    }

    /// A shared build: each flip's effect from the instructions of its own functions.
    fn note_shared(&self, mut step: Noted<'_>) {
        let Some(a) = attribution::attribute(
            step.diff.0.keys(),
            self.footprints,
            &self.info.baseline.function_instructions,
            &step.r.result.measurement.function_instructions,
        ) else {
            return;
        };
        let residual = a.residual.unsigned_abs() as f64 / self.start;
        let separable = a.separable(self.start);
        for (site, change) in &a.changes {
            let Some(flipped) = step.flipped(site, Estimate::SharedBuild) else {
                continue;
            };
            let change = *change as f64 / self.start;
            match separable {
                true => {
                    flipped.effects.push(change);
                    flipped.residuals.push(residual);
                }
                false => flipped.mixed.push((change, residual)),
            }
        }
    }
}

/// One step's flips being added to an experiment's.
struct Noted<'a> {
    flips: &'a mut Flips,
    r: &'a StepRecord,
    /// Its decisions where they differ from the start's.
    diff: &'a DecisionSet,
    code: &'a StepCode,
}

impl Noted<'_> {
    /// The row of `site`'s flip measured as `estimate`, its caller's code noted; `None` where
    /// the flip was moot in the step's build.
    fn flipped(&mut self, site: &SiteId, estimate: Estimate) -> Option<&mut Flipped> {
        let build = self.r.result.build.as_ref();
        if build.is_some_and(|b| b.moot.contains_key(site)) {
            return None;
        }
        let value = self.diff.0.get(site).map(ToString::to_string);
        let key = (site.clone(), value.unwrap_or_default(), estimate);
        let flipped = self.flips.entry(key).or_default();
        flipped.code = flipped.code.or_else(|| self.code.caller(site));
        Some(flipped)
    }
}

fn rewards_rows<W: Writer>(all: &[Assignment], out: &mut Batched<'_, W>) -> Result<u64> {
    for a in all {
        for r in &a.rewards {
            let row = out.row();
            row.text(&a.experiment);
            row.text(r.site.as_str());
            row.text(&r.value.to_string());
            row.text(r.estimate.name());
            row.opt_float(r.estimate.reward());
            row.opt_float(r.estimate.std_error());
            row.uint(r.count);
            out.end()?;
        }
    }
    out.done()
}
