//! `kiln export`: a store's steps, runs, decisions, sites and rewards as CSV.
//!
//! Every table is written row by row while the store is iterated, so memory
//! does not grow with the number of steps. The `steps` and `runs` tables have
//! one column group per metric present in the store, found by a first pass
//! over the steps and ordered as [`Metric::ALL`]; a metric a worker could not
//! measure reads `unsupported`, one not measured at all (a failed step) is
//! empty. The schemas are documented in README.md, section "Export schema".

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::io::Write;

use anyhow::{bail, Context, Result};
use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use kiln_protocol::{CampaignConfig, Metric, MetricValue, SiteId};

use crate::manual::manual_benchmark;
use crate::rewards::{self, RewardOptions};
use crate::store::row::MetricKey;
use crate::store::{ExperimentInfo, StepKind, StepRecord, StepRow, Store, StoredRow};

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
pub fn export(store: &Store, options: ExportOptions<'_>, mut out: impl Write) -> Result<u64> {
    let ctx = Tables::load(store, options.experiment)?;
    if options.table == Table::Steps {
        let rows = steps(store, &ctx, &mut out)?;
        out.flush().context("cannot write the CSV")?;
        return Ok(rows);
    }
    let mut csv = csv::Writer::from_writer(out);
    let rows = match options.table {
        Table::Steps => unreachable!("written above"),
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

    /// Every metric measured (or found unsupported) in the selected steps: as
    /// the store keeps them per experiment, or (older stores) read from the
    /// metric names of each stored step.
    fn metrics(&self, store: &Store) -> Result<BTreeSet<Metric>> {
        let mut found = MetricSet::default();
        for name in self.experiments.keys() {
            if let Some(kept) = store.step_metrics(name)? {
                kept.into_iter().for_each(|m| found.insert(m));
                continue;
            }
            for value in store.step_values(name) {
                let value = value?;
                let step: StepMetrics = serde_json::from_slice(&value)
                    .with_context(|| format!("a stored step of experiment {name} is unreadable"))?;
                found.0 |= step.result.summary.0 .0 | step.result.runs.0 .0;
            }
        }
        Ok(found.iter().collect())
    }
}

type Csv<W> = csv::Writer<W>;

fn num(v: f64) -> String {
    v.to_string()
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(String::new, |v| v.to_string())
}

fn steps<W: Write>(store: &Store, ctx: &Tables, out: &mut W) -> Result<u64> {
    let metrics: Vec<Metric> = ctx.metrics(store)?.into_iter().collect();
    let mut header: Vec<String> = STEP_COLUMNS.iter().map(|c| c.to_string()).collect();
    for m in &metrics {
        header.extend(STEP_STATISTICS.iter().map(|s| format!("{}.{s}", m.name())));
    }
    let mut csv = csv::Writer::from_writer(&mut *out);
    csv.write_record(&header)?;
    csv.flush()?;
    drop(csv);
    let keys: Vec<MetricKey> = metrics.iter().map(|m| MetricKey::from(*m)).collect();
    let mut rows = 0;
    for (name, info) in &ctx.experiments {
        let benchmark = ctx.benchmark(name);
        let baseline = info.baseline.objective();
        let row = |stored: &StoredRow, out: &mut Row| -> Result<()> {
            let r = stored
                .row()
                .with_context(|| format!("a stored step of experiment {name} is unreadable"))?;
            step_row(out, ctx.campaign(), &benchmark, baseline, &r, &keys);
            Ok(())
        };
        rows += parallel_rows(store.step_rows(name), &row, out)?;
    }
    Ok(rows)
}

/// Stored steps per chunk of [`parallel_rows`].
const CHUNK: usize = 256;

/// Writes one row per stored value with `row`, in the values' order: chunks
/// of values are turned into CSV on every core while this thread writes
/// them out in order. Chunks in flight are bounded, so memory does not grow
/// with the number of steps.
fn parallel_rows<T, W, F>(
    values: impl Iterator<Item = Result<T>> + Send,
    row: &F,
    out: &mut W,
) -> Result<u64>
where
    T: Send,
    W: Write,
    F: Fn(&T, &mut Row) -> Result<()> + Sync,
{
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::mpsc::{channel, sync_channel};
    use std::sync::Mutex;

    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(8));
    let in_flight = 3 * threads;
    let (chunks_tx, chunks_rx) = sync_channel::<(u64, Result<Vec<T>>)>(in_flight);
    let chunks_rx = Mutex::new(chunks_rx);
    let (done_tx, done_rx) = channel::<(u64, Result<(Vec<u8>, u64)>)>();
    let (tokens_tx, tokens_rx) = sync_channel::<()>(in_flight);
    for _ in 0..in_flight {
        tokens_tx.send(()).expect("room for every token");
    }
    let stop = AtomicBool::new(false);
    std::thread::scope(|scope| {
        let stop_reading = &stop;
        scope.spawn(move || {
            let mut values = values;
            let mut seq = 0;
            loop {
                if tokens_rx.recv().is_err() || stop_reading.load(Ordering::Relaxed) {
                    return;
                }
                let mut chunk = Vec::with_capacity(CHUNK);
                let mut failed = None;
                for value in values.by_ref().take(CHUNK) {
                    match value {
                        Ok(v) => chunk.push(v),
                        Err(e) => {
                            failed = Some(e);
                            break;
                        }
                    }
                }
                let last = chunk.len() < CHUNK || failed.is_some();
                if chunk.is_empty() && failed.is_none() {
                    return;
                }
                let item = match failed {
                    Some(e) => Err(e),
                    None => Ok(chunk),
                };
                if chunks_tx.send((seq, item)).is_err() || last {
                    return;
                }
                seq += 1;
            }
        });
        for _ in 0..threads {
            let done_tx = done_tx.clone();
            let (chunks_rx, stop) = (&chunks_rx, &stop);
            scope.spawn(move || loop {
                let next = chunks_rx.lock().unwrap_or_else(|p| p.into_inner()).recv();
                let Ok((seq, chunk)) = next else { return };
                let made = chunk.and_then(|chunk| {
                    let mut out = Row::new(Vec::with_capacity(chunk.len() * 1024));
                    if !stop.load(Ordering::Relaxed) {
                        for value in &chunk {
                            row(value, &mut out)?;
                            out.end();
                        }
                    }
                    Ok((out.bytes, chunk.len() as u64))
                });
                if done_tx.send((seq, made)).is_err() {
                    return;
                }
            });
        }
        drop(done_tx);
        // Write the chunks in order as they come.
        let mut waiting = BTreeMap::new();
        let (mut next, mut rows) = (0u64, 0u64);
        let mut error = None;
        for (seq, made) in done_rx {
            waiting.insert(seq, made);
            while let Some(made) = waiting.remove(&next) {
                next += 1;
                let _ = tokens_tx.send(());
                if error.is_some() {
                    continue;
                }
                let written = made.and_then(|(bytes, n)| {
                    out.write_all(&bytes)?;
                    Ok(n)
                });
                match written {
                    Ok(n) => rows += n,
                    Err(e) => {
                        stop.store(true, Ordering::Relaxed);
                        error = Some(e);
                    }
                }
            }
        }
        drop(tokens_tx);
        match error {
            Some(e) => Err(e),
            None => Ok(rows),
        }
    })
}

/// Writes one row of the `steps` table.
fn step_row(
    out: &mut Row,
    campaign: &str,
    benchmark: &str,
    baseline: Option<f64>,
    r: &StepRow<'_>,
    metrics: &[MetricKey],
) {
    out.str(campaign);
    out.str(&r.experiment);
    out.str(benchmark);
    out.cell(r.chain);
    out.cell(r.step);
    out.str(kind_of(r.kind, &r.experiment));
    out.opt(r.parent);
    out.cell(r.changed);
    out.str(&r.worker);
    out.cell(r.slot);
    out.hex(&r.decision_hash);
    match r.cached_from {
        Some((chain, step)) => {
            out.cell(chain);
            out.bytes.push(b'/');
            step.write(&mut out.bytes);
        }
        None => out.str(""),
    }
    out.str(&r.outcome);
    out.opt(r.decision.map(|d| d.accepted));
    out.opt(r.decision.map(|d| d.compared_with));
    out.cell(r.temperature);
    out.opt(r.objective);
    out.opt(baseline);
    out.opt(baseline.zip(r.objective).map(|(b, o)| b / o));
    out.cell(r.measured_runs);
    out.cell(r.target_met);
    out.opt(r.build.map(|b| b.wall_ns));
    out.opt(r.build.and_then(|b| b.text_bytes));
    out.cell(r.dispatched_ms);
    out.cell(r.recorded_ms);
    out.opt(r.decision.map(|d| d.decided_ms));
    // A metric without statistics: five cells alike, written at once.
    const UNSUPPORTED: &[u8] = b",unsupported,unsupported,unsupported,unsupported,unsupported";
    const EMPTY: &[u8] = b",,,,,";
    const _: () = assert!(STEP_STATISTICS.len() == 5);
    for m in metrics {
        match r.summary.iter().find(|(k, _)| k == m) {
            Some((_, stats)) => out.floats(&stats.0),
            None if r.unsupported.contains(m) => out.bytes.extend_from_slice(UNSUPPORTED),
            None => out.bytes.extend_from_slice(EMPTY),
        }
    }
}

/// CSV rows written field by field into bytes, as the `csv` crate writes
/// them with its defaults (`,`, `\n` after each record, a field quoted only
/// when it holds `,`, `"`, `\r` or `\n`, quotes doubled), and numbers as
/// `to_string` writes them.
struct Row {
    bytes: Vec<u8>,
    /// Whether the current record has a field yet.
    started: bool,
}

impl Row {
    /// Rows appended to `bytes`.
    fn new(bytes: Vec<u8>) -> Row {
        Row {
            bytes,
            started: false,
        }
    }

    /// Starts a field.
    fn separate(&mut self) {
        if self.started {
            self.bytes.push(b',');
        }
        self.started = true;
    }

    /// Ends the record.
    fn end(&mut self) {
        self.bytes.push(b'\n');
        self.started = false;
    }

    fn str(&mut self, s: &str) {
        self.separate();
        if s.bytes().any(|b| matches!(b, b',' | b'"' | b'\r' | b'\n')) {
            self.bytes.push(b'"');
            for b in s.bytes() {
                if b == b'"' {
                    self.bytes.push(b'"');
                }
                self.bytes.push(b);
            }
            self.bytes.push(b'"');
        } else {
            self.bytes.extend_from_slice(s.as_bytes());
        }
    }

    /// A field that never needs quoting.
    fn cell(&mut self, v: impl Cell) {
        self.separate();
        v.write(&mut self.bytes);
    }

    /// Numbers, each printed once where it repeats the one before (the
    /// statistics of one run are one number five times).
    fn floats(&mut self, values: &[f64]) {
        let mut before: Option<(u64, std::ops::Range<usize>)> = None;
        for v in values {
            self.separate();
            let start = self.bytes.len();
            match before {
                Some((bits, ref text)) if bits == v.to_bits() => {
                    self.bytes.extend_from_within(text.clone())
                }
                _ => v.write(&mut self.bytes),
            }
            before = Some((v.to_bits(), start..self.bytes.len()));
        }
    }

    /// Empty for `None`.
    fn opt(&mut self, v: Option<impl Cell>) {
        match v {
            Some(v) => self.cell(v),
            None => self.separate(),
        }
    }

    /// Lower-case hex digits, as [`kiln_protocol::ContentHash`] prints.
    fn hex(&mut self, bytes: &[u8]) {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        self.separate();
        for b in bytes {
            self.bytes.push(DIGITS[usize::from(b >> 4)]);
            self.bytes.push(DIGITS[usize::from(b & 15)]);
        }
    }
}

/// A value whose text needs no CSV quoting, written as `to_string` writes it.
trait Cell: Copy {
    fn write(self, out: &mut Vec<u8>);
}

macro_rules! integer_cells {
    ($($t:ty),*) => {$(
        impl Cell for $t {
            fn write(self, out: &mut Vec<u8>) {
                out.extend_from_slice(itoa::Buffer::new().format(self).as_bytes());
            }
        }
    )*};
}

integer_cells!(u32, u64, i64);

impl Cell for bool {
    fn write(self, out: &mut Vec<u8>) {
        out.extend_from_slice(if self { b"true" } else { b"false" });
    }
}

impl Cell for f64 {
    /// As `{}` writes it (plain decimal, the shortest digits that read back
    /// as the same `f64`, `NaN`, `inf`), without its cost where it is common:
    /// integers through itoa, other numbers with fewer than 16 significant
    /// digits laid out from ryu's (the same digits: see [`plain_decimal`]).
    fn write(self, out: &mut Vec<u8>) {
        // Below 2^53 every integer is an f64, and its digits are its shortest.
        const EXACT_INTEGERS: f64 = 9_007_199_254_740_992.0;
        let integer = self as i64;
        if self.abs() < EXACT_INTEGERS && integer as f64 == self {
            if integer == 0 && self.is_sign_negative() {
                out.extend_from_slice(b"-0");
            } else {
                integer.write(out);
            }
            return;
        }
        if self.is_finite() && plain_decimal(ryu::Buffer::new().format_finite(self), out) {
            return;
        }
        let _ = write!(out, "{self}");
    }
}

/// The step's kind; steps of `kiln benchmark --store` are stored as proposals
/// of a manual experiment and read `manual`.
fn kind_of(kind: StepKind, experiment: &str) -> &'static str {
    match kind {
        StepKind::Remeasure => "remeasure",
        StepKind::Proposal if manual_benchmark(experiment).is_some() => "manual",
        StepKind::Proposal => "proposal",
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

// The metrics of stored steps, read from their JSON where the store does not
// keep them: only the metric names are decoded, their values skipped unparsed.

/// A set of metrics: bit `m as u32` for metric `m` (the order of [`Metric::ALL`]).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct MetricSet(u128);

const _: () = assert!(Metric::ALL.len() <= 128);

impl MetricSet {
    fn insert(&mut self, m: Metric) {
        self.0 |= 1u128 << (m as u32);
    }

    fn contains(self, m: Metric) -> bool {
        self.0 & (1u128 << (m as u32)) != 0
    }

    fn iter(self) -> impl Iterator<Item = Metric> {
        Metric::ALL
            .iter()
            .copied()
            .filter(move |m| self.contains(*m))
    }
}

/// The metric names of a stored step (summary keys and every run's metric keys).
#[derive(Deserialize)]
struct StepMetrics {
    result: ResultMetrics,
}

#[derive(Deserialize)]
struct ResultMetrics {
    summary: MetricKeys,
    runs: RunsMetricKeys,
}

#[derive(Deserialize)]
struct RunMetricKeys {
    metrics: MetricKeys,
}

/// The keys of a map keyed by metric, its values skipped.
struct MetricKeys(MetricSet);

impl<'de> Deserialize<'de> for MetricKeys {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = MetricKeys;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map keyed by metric")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<MetricKeys, A::Error> {
                let mut set = MetricSet::default();
                while let Some(m) = map.next_key::<Metric>()? {
                    map.next_value::<IgnoredAny>()?;
                    set.insert(m);
                }
                Ok(MetricKeys(set))
            }
        }
        d.deserialize_map(V)
    }
}

/// The union of the metric keys of every run.
struct RunsMetricKeys(MetricSet);

impl<'de> Deserialize<'de> for RunsMetricKeys {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RunsMetricKeys;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of runs")
            }
            fn visit_seq<A: SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> std::result::Result<RunsMetricKeys, A::Error> {
                let mut set = MetricSet::default();
                while let Some(run) = seq.next_element::<RunMetricKeys>()? {
                    set.0 |= run.metrics.0 .0;
                }
                Ok(RunsMetricKeys(set))
            }
        }
        d.deserialize_seq(V)
    }
}

/// Writes the shortest digits of an `f64` (as ryu or serde_json write them,
/// `1.5e-7`, `100.0`) as Rust prints the `f64` (`{}`: plain decimal, no
/// exponent, no trailing zeros, `-0` for negative zero), if its significant
/// digits are fewer than 16; `false` (nothing written) otherwise or if it is
/// no plain number. Below 16 digits a decimal names at most one double, so
/// every shortest algorithm finds the same digits; from 16 on, two shortest
/// candidates can tie and two algorithms may round differently.
fn plain_decimal(text: &str, out: &mut Vec<u8>) -> bool {
    let b = text.as_bytes();
    let negative = b.first() == Some(&b'-');
    let mut i = usize::from(negative);
    // Significant digits (leading zeros dropped), and where the point is.
    let mut digits = [0u8; 24];
    let (mut n, mut int_len, mut dot) = (0usize, 0i64, false);
    let (mut zeros_after_dot, mut any_digit) = (0i64, false);
    while i < b.len() {
        any_digit |= b[i].is_ascii_digit();
        match b[i] {
            b'0' if n == 0 => {
                if dot {
                    zeros_after_dot += 1;
                }
            }
            c @ b'0'..=b'9' => {
                if n == digits.len() {
                    return false;
                }
                digits[n] = c;
                n += 1;
                if !dot {
                    int_len += 1;
                }
            }
            b'.' if !dot => dot = true,
            b'e' | b'E' => break,
            _ => return false,
        }
        i += 1;
    }
    if !any_digit {
        return false;
    }
    let mut exp = 0i64;
    if i < b.len() {
        i += 1;
        let minus = b.get(i) == Some(&b'-');
        if matches!(b.get(i), Some(b'-' | b'+')) {
            i += 1;
        }
        if i == b.len() {
            return false;
        }
        for &c in &b[i..] {
            if !c.is_ascii_digit() || exp > 100_000 {
                return false;
            }
            exp = exp * 10 + i64::from(c - b'0');
        }
        if minus {
            exp = -exp;
        }
    }
    // Trailing zeros change nothing.
    while n > 0 && digits[n - 1] == b'0' {
        n -= 1;
    }
    if n >= 16 {
        return false;
    }
    if negative {
        out.push(b'-');
    }
    if n == 0 {
        out.push(b'0');
        return true;
    }
    // The value is 0.D × 10^point.
    let point = int_len + exp - zeros_after_dot;
    let d = &digits[..n];
    let len = n as i64;
    if point <= 0 {
        out.extend_from_slice(b"0.");
        out.extend((0..-point).map(|_| b'0'));
        out.extend_from_slice(d);
    } else if point >= len {
        out.extend_from_slice(d);
        out.extend((0..point - len).map(|_| b'0'));
    } else {
        out.extend_from_slice(&d[..point as usize]);
        out.push(b'.');
        out.extend_from_slice(&d[point as usize..]);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::{plain_decimal, Cell};

    fn written(v: f64) -> String {
        let mut out = Vec::new();
        v.write(&mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn floats_print_as_rust_prints_them() {
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut values = vec![
            0.0,
            -0.0,
            1.0,
            -1.0,
            0.1,
            0.5,
            1e21,
            1e22,
            1e-7,
            5e-324,
            1e15,
            1e16,
            1e17,
            123456.0,
            936535.0,
            0.3,
            2.0 / 3.0,
            f64::MAX,
            f64::MIN_POSITIVE,
            f64::from_bits(0x4307_3C41_4C03_F1E2), // 817521951276604.25: a tie at 16 digits
            411950.69999999995,
            9_007_199_254_740_991.0,
            9_007_199_254_740_992.0,
            9_007_199_254_740_994.0,
            -9_007_199_254_740_992.0,
            1e300,
            -1e-300,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ];
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            values.push(f64::from_bits(x));
            values.push((x >> 11) as f64);
            values.push((x % 10_000_000) as f64 / 1000.0);
            values.push((x % 1_000_000_000) as f64 * 1e-9);
        }
        for v in values {
            assert_eq!(written(v), format!("{v}"), "{v:?}");
        }
    }

    #[test]
    fn rows_are_quoted_as_the_csv_crate_quotes_them() {
        let fields = [
            "plain",
            "",
            "a,b",
            "say \"hi\"",
            "line\nbreak",
            "cr\r",
            "@ main:1:2",
            "é",
        ];
        let mut row = super::Row::new(Vec::new());
        for f in fields {
            row.str(f);
        }
        row.end();
        let mut w = csv::Writer::from_writer(Vec::new());
        w.write_record(fields).unwrap();
        assert_eq!(row.bytes, w.into_inner().unwrap());
    }

    #[test]
    fn odd_texts_are_left_to_the_parser() {
        let mut out = Vec::new();
        for text in ["null", "1e", "1.2.3", "-", "1x"] {
            assert!(!plain_decimal(text, &mut out), "{text}");
        }
        for (text, shown) in [
            ("100.0", "100"),
            ("-0.0", "-0"),
            ("1.5e-3", "0.0015"),
            ("0.00012", "0.00012"),
            ("1e21", "1000000000000000000000"),
            ("12.5E+2", "1250"),
        ] {
            out.clear();
            assert!(plain_decimal(text, &mut out), "{text}");
            assert_eq!(out, shown.as_bytes(), "{text}");
        }
    }
}
