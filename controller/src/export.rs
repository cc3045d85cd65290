//! `kiln export`: a store's steps, runs, decisions, sites and rewards as CSV.
//!
//! Every table is written row by row while the store is iterated, so memory
//! does not grow with the number of steps. The `steps` and `runs` tables have
//! one column group per metric present in the store, found by a first pass
//! over the steps and ordered as [`Metric::ALL`]; a metric a worker could not
//! measure reads `unsupported`, one not measured at all (a failed step) is
//! empty. The schemas are documented in README.md, section "Export schema".

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;

use anyhow::{bail, Context, Result};

use kiln_protocol::message::StepResult;
use kiln_protocol::{CampaignConfig, Metric, MetricValue, SiteId, Summary};

use crate::manual::manual_benchmark;
use crate::rewards::{self, RewardOptions};
use crate::store::{ExperimentInfo, StepKind, StepRecord, Store};

/// The tables `kiln export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Table {
    /// One row per step.
    Steps,
    /// One row per run of a step.
    Runs,
    /// One row per decision of a step (one row per step with `--wide`).
    Decisions,
    /// One row per decision point of an experiment.
    Sites,
    /// One row per decision value with its reward (ridge regression, default options).
    Rewards,
}

/// What to export.
#[derive(Debug, Clone, Copy)]
pub struct ExportOptions<'a> {
    /// The table.
    pub table: Table,
    /// Only this experiment.
    pub experiment: Option<&'a str>,
    /// The decisions table with one column per site.
    pub wide: bool,
}

/// The statistics written for each metric in the `steps` table.
pub const STEP_STATISTICS: &[&str] = &["median", "mean", "stddev", "ci_low", "ci_high"];

/// The fixed leading columns of the `steps` table.
pub const STEP_COLUMNS: &[&str] = &[
    "campaign",
    "experiment",
    "benchmark",
    "chain",
    "step",
    "kind",
    "parent",
    "changed",
    "worker",
    "slot",
    "decision_hash",
    "cached_from",
    "outcome",
    "accepted",
    "compared_with",
    "temperature",
    "objective",
    "baseline",
    "speedup",
    "measured_runs",
    "target_met",
    "build_ns",
    "text_bytes",
    "dispatched_ms",
    "recorded_ms",
    "decided_ms",
];

/// The fixed leading columns of the `runs` table.
pub const RUN_COLUMNS: &[&str] = &[
    "experiment",
    "chain",
    "step",
    "worker",
    "slot",
    "outcome",
    "reused",
    "run",
    "warmup",
    "exit_code",
    "signal",
];

/// The columns of the long `decisions` table.
pub const DECISION_COLUMNS: &[&str] = &["experiment", "chain", "step", "site", "value"];

/// The leading columns of the wide `decisions` table (one column per site follows).
pub const WIDE_DECISION_COLUMNS: &[&str] = &["experiment", "chain", "step"];

/// The columns of the `sites` table.
pub const SITE_COLUMNS: &[&str] = &[
    "experiment",
    "benchmark",
    "index",
    "site",
    "stock",
    "domain",
];

/// The columns of the `rewards` table.
pub const REWARD_COLUMNS: &[&str] = &["experiment", "site", "value", "reward", "count"];

/// Writes a table as CSV to `out`; returns the number of data rows.
pub fn export(store: &Store, options: ExportOptions<'_>, out: impl Write) -> Result<u64> {
    let ctx = Tables::load(store, options.experiment)?;
    let mut csv = csv::Writer::from_writer(out);
    let rows = match options.table {
        Table::Steps => steps(store, &ctx, &mut csv)?,
        Table::Runs => runs(store, &ctx, &mut csv)?,
        Table::Decisions if options.wide => decisions_wide(store, &ctx, &mut csv)?,
        Table::Decisions => decisions_long(store, &ctx, &mut csv)?,
        Table::Sites => sites(&ctx, &mut csv)?,
        Table::Rewards => {
            let (all, _) =
                rewards::assign_all(store, options.experiment, &RewardOptions::default())?;
            rewards::write_table(&all, &mut csv)?
        }
    };
    csv.flush().context("cannot write the CSV")?;
    Ok(rows)
}

/// The campaign config stored with the store's steps, if any.
pub fn stored_config(store: &Store) -> Result<Option<CampaignConfig>> {
    match store.get::<String>("meta/config")? {
        Some(text) => Ok(Some(
            CampaignConfig::parse(&text, "stored config").map_err(|e| {
                anyhow::anyhow!(
                    "the config stored in {} no longer parses: {e}",
                    store.dir().display()
                )
            })?,
        )),
        None => Ok(None),
    }
}

/// The names of the store's experiments, in key order.
pub fn experiment_names(store: &Store) -> Result<Vec<String>> {
    store
        .scan::<serde::de::IgnoredAny>("exp/")
        .map(|item| item.map(|(key, _)| key.trim_start_matches("exp/").to_string()))
        .collect()
}

/// The benchmark an experiment searches: from the config, or the name of a manual experiment.
pub fn benchmark_of(config: Option<&CampaignConfig>, experiment: &str) -> Option<String> {
    if let Some(b) = manual_benchmark(experiment) {
        return Some(b.to_string());
    }
    config
        .and_then(|c| c.experiment(experiment))
        .map(|e| e.benchmark.clone())
}

/// What every table needs besides the steps: the campaign and its experiments.
struct Tables {
    config: Option<CampaignConfig>,
    /// The selected experiments, by name.
    experiments: BTreeMap<String, ExperimentInfo>,
}

impl Tables {
    fn load(store: &Store, only: Option<&str>) -> Result<Tables> {
        let mut experiments = BTreeMap::new();
        for item in store.scan::<ExperimentInfo>("exp/") {
            let (key, info) = item?;
            let name = key.trim_start_matches("exp/");
            if only.map_or(true, |o| o == name) {
                experiments.insert(name.to_string(), info);
            }
        }
        if let Some(name) = only.filter(|_| experiments.is_empty()) {
            bail!(
                "store {} holds no experiment named '{name}'; it holds: {}",
                store.dir().display(),
                experiment_names(store)?.join(", ")
            );
        }
        Ok(Tables {
            config: stored_config(store)?,
            experiments,
        })
    }

    fn campaign(&self) -> &str {
        self.config.as_ref().map_or("", |c| c.name.as_str())
    }

    /// The benchmark an experiment searches (empty where unknown).
    fn benchmark(&self, experiment: &str) -> String {
        benchmark_of(self.config.as_ref(), experiment).unwrap_or_default()
    }

    /// The selected experiments' steps, in key order.
    fn steps<'s>(&'s self, store: &'s Store) -> impl Iterator<Item = Result<StepRecord>> + 's {
        self.experiments
            .keys()
            .flat_map(move |name| store.steps(Some(name)))
    }

    /// Every metric measured (or found unsupported) in the selected steps.
    fn metrics(&self, store: &Store) -> Result<BTreeSet<Metric>> {
        let mut found = BTreeSet::new();
        for record in self.steps(store) {
            let record = record?;
            found.extend(record.result.summary.keys().copied());
            for run in &record.result.runs {
                found.extend(run.metrics.keys().copied());
            }
        }
        Ok(found)
    }
}

type Csv<W> = csv::Writer<W>;

fn num(v: f64) -> String {
    v.to_string()
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(String::new, |v| v.to_string())
}

fn steps<W: Write>(store: &Store, ctx: &Tables, csv: &mut Csv<W>) -> Result<u64> {
    let metrics = ctx.metrics(store)?;
    let mut header: Vec<String> = STEP_COLUMNS.iter().map(|c| c.to_string()).collect();
    for m in &metrics {
        header.extend(STEP_STATISTICS.iter().map(|s| format!("{}.{s}", m.name())));
    }
    csv.write_record(&header)?;
    let mut rows = 0;
    for record in ctx.steps(store) {
        let r = record?;
        let info = &ctx.experiments[&r.key.experiment];
        let baseline = info.baseline.objective();
        let speedup = match (baseline, r.objective) {
            (Some(b), Some(o)) => num(b / o),
            _ => String::new(),
        };
        let result = &r.result;
        let mut row = vec![
            ctx.campaign().to_string(),
            r.key.experiment.clone(),
            ctx.benchmark(&r.key.experiment),
            r.key.chain.to_string(),
            r.key.step.to_string(),
            kind_name(&r).to_string(),
            opt(r.parent),
            r.diff.len().to_string(),
            r.worker.clone(),
            r.slot.to_string(),
            r.decision_hash.to_string(),
            opt(r
                .cached_from
                .as_ref()
                .map(|k| format!("{}/{}", k.chain, k.step))),
            result.outcome.name().to_string(),
            opt(r.decision.as_ref().map(|d| d.accepted)),
            opt(r.decision.as_ref().map(|d| num(d.compared_with))),
            num(r.temperature),
            opt(r.objective.map(num)),
            opt(baseline.map(num)),
            speedup,
            result
                .runs
                .iter()
                .filter(|run| !run.warmup)
                .count()
                .to_string(),
            result.target_met.to_string(),
            opt(result.build.as_ref().map(|b| b.wall_ns)),
            opt(result.build.as_ref().and_then(|b| b.text_bytes)),
            r.dispatched_ms.to_string(),
            r.recorded_ms.to_string(),
            opt(r.decision.as_ref().map(|d| d.decided_ms)),
        ];
        for m in &metrics {
            row.extend(statistics(result, *m));
        }
        csv.write_record(&row)?;
        rows += 1;
    }
    Ok(rows)
}

/// The step's kind; steps of `kiln benchmark --store` are stored as proposals
/// of a manual experiment and read `manual`.
fn kind_name(r: &StepRecord) -> &'static str {
    match r.kind {
        StepKind::Remeasure => "remeasure",
        StepKind::Proposal if manual_benchmark(&r.key.experiment).is_some() => "manual",
        StepKind::Proposal => "proposal",
    }
}

/// The statistics columns of one metric of one step.
fn statistics(result: &StepResult, metric: Metric) -> Vec<String> {
    let cells = |s: &Summary| {
        vec![
            num(s.median),
            num(s.mean),
            num(s.stddev),
            num(s.ci_low),
            num(s.ci_high),
        ]
    };
    match result.summary.get(&metric) {
        Some(s) => cells(s),
        None => {
            let unsupported = result
                .runs
                .iter()
                .any(|r| r.metrics.get(&metric) == Some(&MetricValue::Unsupported));
            let text = if unsupported { "unsupported" } else { "" };
            vec![text.to_string(); STEP_STATISTICS.len()]
        }
    }
}

fn runs<W: Write>(store: &Store, ctx: &Tables, csv: &mut Csv<W>) -> Result<u64> {
    let metrics = ctx.metrics(store)?;
    let mut header: Vec<String> = RUN_COLUMNS.iter().map(|c| c.to_string()).collect();
    header.extend(metrics.iter().map(|m| m.name().to_string()));
    csv.write_record(&header)?;
    let mut rows = 0;
    for record in ctx.steps(store) {
        let r = record?;
        for run in &r.result.runs {
            let mut row = vec![
                r.key.experiment.clone(),
                r.key.chain.to_string(),
                r.key.step.to_string(),
                r.worker.clone(),
                r.slot.to_string(),
                r.result.outcome.name().to_string(),
                r.cached_from.is_some().to_string(),
                run.index.to_string(),
                run.warmup.to_string(),
                opt(run.exit_code),
                opt(run.signal),
            ];
            row.extend(metrics.iter().map(|m| match run.metrics.get(m) {
                Some(MetricValue::Measured(v)) => num(*v),
                Some(MetricValue::Unsupported) => "unsupported".to_string(),
                None => String::new(),
            }));
            csv.write_record(&row)?;
            rows += 1;
        }
    }
    Ok(rows)
}

fn decisions_long<W: Write>(store: &Store, ctx: &Tables, csv: &mut Csv<W>) -> Result<u64> {
    csv.write_record(DECISION_COLUMNS)?;
    let mut rows = 0;
    for record in ctx.steps(store) {
        let r = record?;
        let (chain, step) = (r.key.chain.to_string(), r.key.step.to_string());
        for (site, value) in &r.decisions.0 {
            csv.write_record([
                r.key.experiment.as_str(),
                &chain,
                &step,
                site.as_str(),
                &value.to_string(),
            ])?;
            rows += 1;
        }
    }
    Ok(rows)
}

fn decisions_wide<W: Write>(store: &Store, ctx: &Tables, csv: &mut Csv<W>) -> Result<u64> {
    // One column per decision point of the selected experiments, in their
    // discovery order; a site of another experiment stays empty.
    let mut columns: Vec<&SiteId> = Vec::new();
    let mut seen = BTreeSet::new();
    for info in ctx.experiments.values() {
        for p in &info.discovery.points {
            if seen.insert(&p.id) {
                columns.push(&p.id);
            }
        }
    }
    let index: BTreeMap<&SiteId, usize> =
        columns.iter().enumerate().map(|(i, s)| (*s, i)).collect();
    let mut header: Vec<&str> = WIDE_DECISION_COLUMNS.to_vec();
    header.extend(columns.iter().map(|s| s.as_str()));
    csv.write_record(&header)?;
    let mut rows = 0;
    for record in ctx.steps(store) {
        let r = record?;
        let mut row = vec![String::new(); columns.len()];
        for (site, value) in &r.decisions.0 {
            let i = index.get(site).with_context(|| {
                format!(
                    "step {} decides '{site}', which is no decision point of experiment {}",
                    r.key, r.key.experiment
                )
            })?;
            row[*i] = value.to_string();
        }
        let mut full = vec![
            r.key.experiment.clone(),
            r.key.chain.to_string(),
            r.key.step.to_string(),
        ];
        full.extend(row);
        csv.write_record(&full)?;
        rows += 1;
    }
    Ok(rows)
}

fn sites<W: Write>(ctx: &Tables, csv: &mut Csv<W>) -> Result<u64> {
    csv.write_record(SITE_COLUMNS)?;
    let mut rows = 0;
    for (name, info) in &ctx.experiments {
        let benchmark = ctx.benchmark(name);
        for (i, p) in info.discovery.points.iter().enumerate() {
            let stock = opt(info.discovery.baseline.get(&p.id));
            let domain: Vec<String> = p.domain.iter().map(ToString::to_string).collect();
            csv.write_record([
                name.as_str(),
                &benchmark,
                &i.to_string(),
                p.id.as_str(),
                &stock,
                &domain.join(" "),
            ])?;
            rows += 1;
        }
    }
    Ok(rows)
}
