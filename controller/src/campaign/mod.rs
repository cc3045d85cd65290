//! Campaign: a config run to stored steps, resumable at any point.
//!
//! The campaign loop ([`run`]) is the only owner of chain state and the only
//! writer of the store while it runs. It prepares each experiment (discovery,
//! reference measurements), starts or resumes its chains, hands proposals to
//! the pool, stores each result as it arrives, and decides steps in order.
//! Beside it: the live display ([`progress`]), the status report
//! ([`status`]) it keeps up to date, and the sites an effects table already
//! holds, which screening skips ([`measured_before`]).
//!
//! It drives plan, dispatch and store; it formats nothing for a command's
//! output beyond progress lines, and reads no export or report.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};

use kiln_protocol::bundle::Bundle;
use kiln_protocol::config::{BenchmarkSpec, Experiment, RunPolicy, Search, WorkerSpec};
use kiln_protocol::message::StepResult;
use kiln_protocol::{CampaignConfig, ContentHash, DecisionFile, DecisionSet, StepOutcome};

use crate::dispatch::calibration::Calibrator;
use crate::dispatch::pool::{Answer, Done, Job, Pool, PoolSettings, StatusBoard, Work};
use crate::error::{Interrupted, Signal};
use crate::logging;
use crate::plan::chain::{self, ChainContext};
use crate::plan::step::{self, objective_of, Repeatability};
use crate::store::{
    layout, now_ms, ChainState, ExperimentInfo, Reference, StepKey, StepKind, StepRecord, Store,
};

mod measured_before;
mod prepare;
mod progress;
pub mod status;
use status::Phase;

use prepare::{Doing, Preparation};
use progress::Progress;

/// Options of `kiln run` beyond the config.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The kiln-worker binary for local workers and deployment.
    pub worker_binary: PathBuf,
    /// How often a progress line is printed without a terminal (and the status
    /// snapshot rewritten when no step lands).
    pub progress_every: Duration,
}

/// Most results stored and decided under one flush.
const MAX_BATCH: usize = 256;

/// Times the baseline is measured before the chains start.
const BASELINE_REPEATS: u32 = 3;

/// What a pool job is for.
#[derive(Debug, Clone)]
enum Tag {
    /// The discovery of an experiment's benchmark.
    Discover(String),
    /// A measurement of an experiment's named reference.
    Reference(String, String),
    Step(StepKey),
}

/// A prepared experiment: its decision space and references.
struct Prepared {
    experiment: Experiment,
    benchmark: BenchmarkSpec,
    bundle: Arc<Bundle>,
    info: ExperimentInfo,
    flips: u32,
    /// The drawing weights of `(proposals profile)` or `(proposals helping)` over the movable
    /// points, read once from the discovery ([`crate::plan::draw_weights`]); `None`: uniform.
    draws: Option<Vec<f64>>,
}

/// Runs (or resumes) the campaign in `store` ([`open_store`]) to its end.
pub async fn run(config: CampaignConfig, store: Store, options: RunOptions) -> Result<()> {
    let _log_guard = crate::logging::to_file(&layout::log(store.dir()))?;
    note_resumption(&config, &store);
    let settings = pool_settings(&config, &store, &options)?;
    let mut pool: Pool<Tag> = Pool::start(&config.workers, settings);
    let mut run = Running::new(&config, &store);
    run.prepare(&pool)?;
    run.search(&mut pool, options.progress_every).await?;
    run.finish(&pool)
}

/// A resumed campaign says where it resumes: how many of its steps are decided.
fn note_resumption(config: &CampaignConfig, store: &Store) {
    let (decided, budget) = config
        .experiments
        .iter()
        .fold((0, 0), |(decided, budget), e| {
            let steps = u64::from(e.search.steps()) * u64::from(e.chains);
            (
                decided + store.decided_at_open(&e.name).min(steps),
                budget + steps,
            )
        });
    let dir = store.dir().display();
    if decided >= budget && budget > 0 {
        logging::note(format_args!(
            "the campaign in {dir} has decided all its {budget} steps: its summary follows"
        ));
    } else if decided > 0 {
        logging::note(format_args!(
            "resuming the campaign in {dir}: {decided} of {budget} steps decided"
        ));
    }
}

/// How the campaign's worker pool runs its jobs.
fn pool_settings(
    config: &CampaignConfig,
    store: &Store,
    options: &RunOptions,
) -> Result<PoolSettings> {
    Ok(PoolSettings {
        worker_binary: options.worker_binary.clone(),
        local_rundir: layout::local_workers(store.dir()),
        timeouts: config.timeouts,
        quarantine_after: 3,
        calibration: Calibrator::from_config(config)?,
        limits: config.limits_in_use(),
    })
}

/// The campaign's store, claimed for this controller: a fresh one (the old moved aside with
/// `force_new`), or the stored campaign when the config is compatible with it.
pub fn open_store(config: &CampaignConfig, force_new: bool) -> Result<Store> {
    let dir = &config.store;
    if force_new {
        if let Some(aside) = crate::store::move_aside(dir, now_ms())? {
            logging::note(format_args!(
                "moved the previous store to {}",
                aside.display()
            ));
        }
    }
    let store = Store::open(dir)?;
    if let Some(from) = store.migrated_from() {
        logging::note(format_args!(
            "store {} migrated from layout {from} to {} (`kiln store migrate` does it alone)",
            dir.display(),
            crate::store::SCHEMA_VERSION
        ));
    }
    store.claim()?;
    if let Some(old) = store.config()? {
        let prepared = |experiment: &str| !matches!(store.experiment(experiment), Ok(None));
        let changes = incompatible_changes(&old, config, prepared);
        if !changes.is_empty() {
            bail!(
                "the config changed incompatibly with the campaign stored in {}:\n{}\n\
                 run with --force-new to start a fresh campaign (the old store is moved aside)",
                dir.display(),
                changes.join("\n")
            );
        }
    }
    // Workers, timeouts and the like may change between runs.
    store.put_config(&config.to_text(), now_ms())?;
    Ok(store)
}

/// What must not change under a stored campaign: what is searched and how it
/// is measured; one line per changed field, `field: old -> new`. An experiment
/// that was never `prepared` (its baseline failed, or it was not reached) and a
/// benchmark none of whose experiments was may change: nothing was measured
/// under them (a program mended after its first try).
fn incompatible_changes(
    old: &CampaignConfig,
    new: &CampaignConfig,
    prepared: impl Fn(&str) -> bool,
) -> Vec<String> {
    let mut out = Vec::new();
    changed_fields("objective", &old.objective, &new.objective, &mut out);
    changed_fields("runs", &old.runs, &new.runs, &mut out);
    for e in new.experiments.iter().filter(|e| prepared(&e.name)) {
        if let Some(o) = old.experiment(&e.name) {
            let (o, e) = (as_prepared(o), as_prepared(e));
            changed_fields(&format!("experiment {}", e.name), &o, &e, &mut out);
        }
    }
    let measured = |benchmark: &str| {
        old.experiments
            .iter()
            .any(|e| e.benchmark == benchmark && prepared(&e.name))
    };
    for b in new.benchmarks.iter().filter(|b| measured(&b.name)) {
        if let Some(o) = old.benchmark(&b.name) {
            // Sources may move (a renamed folder): builds and discoveries are keyed by the
            // bundle's content, not the path it was read from.
            let moved = BenchmarkSpec {
                sources: o.sources.clone(),
                ..b.clone()
            };
            changed_fields(&format!("benchmark {}", b.name), o, &moved, &mut out);
        }
    }
    out
}

/// An experiment as its preparation keeps it: the sites of its `(skip-measured FILE)` are
/// stored, so the file may move or change after; and its steps where they are only a
/// budget (`plan::chain::steps_only_budget`), which a week-long campaign may extend.
fn as_prepared(experiment: &Experiment) -> Experiment {
    let mut experiment = experiment.clone();
    if let Search::Screening(screening) = &mut experiment.search {
        screening.skip_measured = None;
    }
    if chain::steps_only_budget(&experiment) {
        *experiment.search.steps_mut() = 0;
    }
    experiment
}

/// Adds a line `  WHAT: FIELD: old -> new` for each field that differs
/// between `old` and `new`, found in their serialized forms and named in the
/// config's words.
fn changed_fields<T: serde::Serialize>(what: &str, old: &T, new: &T, out: &mut Vec<String>) {
    use serde_json::Value;
    fn walk(path: &str, old: &Value, new: &Value, out: &mut Vec<String>) {
        match (old, new) {
            (Value::Object(a), Value::Object(b)) => {
                let keys: std::collections::BTreeSet<&String> = a.keys().chain(b.keys()).collect();
                for key in keys {
                    let field = format!("{path}.{}", crate::text::config_word(key));
                    let side = |m: &serde_json::Map<String, Value>| m.get(key).cloned();
                    let (x, y) = (
                        side(a).unwrap_or(Value::Null),
                        side(b).unwrap_or(Value::Null),
                    );
                    walk(&field, &x, &y, out);
                }
            }
            (a, b) if a != b => out.push(format!("{path}: {a} -> {b}")),
            _ => {}
        }
    }
    if let (Ok(old), Ok(new)) = (serde_json::to_value(old), serde_json::to_value(new)) {
        // The path starts with a dot after the top level: `WHAT: a.b: old -> new`.
        let mut lines = Vec::new();
        walk("", &old, &new, &mut lines);
        out.extend(lines.into_iter().map(|line| match line.strip_prefix('.') {
            Some(field) => format!("  {what}: {field}"),
            None => format!("  {what}{line}"),
        }));
    }
}

/// A reference from its measurements: every objective, the last outcome, and the output
/// and size of the first successful one.
fn reference_of(config: &CampaignConfig, set: &DecisionSet, results: &[StepResult]) -> Reference {
    let first_ok = results
        .iter()
        .find(|r| r.measurement.outcome == StepOutcome::Ok);
    Reference {
        decisions: set.clone(),
        samples: results
            .iter()
            .filter_map(|r| objective_of(config, r))
            .collect(),
        outcome: results
            .last()
            .map_or(StepOutcome::Ok, |r| r.measurement.outcome.clone()),
        output_digest: first_ok.and_then(|r| r.measurement.output_digest),
        checked_output: first_ok.and_then(|r| r.measurement.checked_output.clone()),
        text_bytes: first_ok.and_then(|r| r.build.as_ref()?.text_bytes),
        function_instructions: first_ok
            .map(|r| r.measurement.function_instructions.clone())
            .unwrap_or_default(),
        function_code: first_ok
            .map(|r| r.measurement.function_code.clone())
            .unwrap_or_default(),
    }
}

/// How far apart the baseline's counts of an objective that should count
/// exactly (callgrind's instructions) came out.
pub(super) enum Spread {
    /// Equal, or apart by less than [`NEGLIGIBLE_SPREAD`] of the count (the
    /// loader's few instructions): one run a step, as for equal counts, with a
    /// note of the spread.
    Negligible(Option<String>),
    /// Further apart: the program itself does not run the same way each time
    /// (a hash seeded from the time or from addresses), and differences
    /// between steps below that spread are noise; what to say.
    Uneven(String),
}

/// The relative spread of a baseline's counts below which a step is measured
/// once (0.01 %): above what a program's start alone varies by (24
/// instructions of 118 M on a CPU benchmark suite, 6,623 of 85 M on an
/// interpreter), and ten times below the 0.1 % a single decision is worth
/// measuring a step again for.
pub(super) const NEGLIGIBLE_SPREAD: f64 = 1e-4;

pub(super) fn spread(config: &CampaignConfig, samples: &[f64]) -> Spread {
    let metric = config.objective.metric;
    let (lo, hi) = samples
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
            (lo.min(x), hi.max(x))
        });
    if !metric.needs_callgrind() || hi <= lo {
        return Spread::Negligible(None);
    }
    let relative = (hi - lo) / lo;
    let apart = format!(
        "the baseline's {metric} differ by up to {} ({:.5} %) between its {} measurements",
        hi - lo,
        100.0 * relative,
        samples.len()
    );
    if relative < NEGLIGIBLE_SPREAD {
        return Spread::Negligible(Some(format!(
            "{apart}: below {} % of the count, far below any effect a step acts on, so each \
             step is measured once",
            100.0 * NEGLIGIBLE_SPREAD
        )));
    }
    Spread::Uneven(format!(
        "{apart}: the program does not run the same way each time, so each step is measured \
         at least {UNEVEN_MIN_RUNS} times and until its interval is within the configured \
         target, and differences below that spread are noise"
    ))
}

/// The fewest runs a step of a program with uneven counts gets: its median
/// then stands for the program, not one of its runs.
const UNEVEN_MIN_RUNS: u32 = 3;

/// `runs` with at least [`UNEVEN_MIN_RUNS`] runs per step, and room above them
/// for the interval target.
fn repeated(runs: RunPolicy) -> RunPolicy {
    let min = runs.min.max(UNEVEN_MIN_RUNS);
    RunPolicy {
        min,
        max: runs.max.max(3 * min),
        ..runs
    }
}

/// Stops the campaign when no worker can ever run its steps (none can apply its run limits),
/// rather than wait for one.
fn stop_if_all_unfit<K>(pool: &Pool<K>) -> Result<()> {
    match pool.all_unfit() {
        Some(reasons) => bail!(
            "no worker can run this campaign's steps:\n{reasons}\n\
             the store is unchanged; fix the workers or the benchmark's (limits ...) and run again"
        ),
        None => Ok(()),
    }
}

struct Running<'a> {
    config: &'a CampaignConfig,
    store: &'a Store,
    /// Prepared experiments.
    experiments: BTreeMap<String, Arc<Prepared>>,
    /// Experiments still preparing.
    preparing: BTreeMap<String, Preparation>,
    /// Discoveries in flight, each run once for every experiment of its benchmark.
    discovering: HashSet<prepare::Discovering>,
    chains: BTreeMap<(String, u32), ChainState>,
    /// Results stored but not yet decided.
    arrived: HashMap<StepKey, StepRecord>,
    /// Measured decision sets per experiment whose objective is exact, for
    /// reuse (an experiment's stored ones read from its export rows as its
    /// chains start; none for a timed objective, which measures a set again).
    measured: HashMap<(String, ContentHash), StepKey>,
    /// Decision sets being measured, with the steps waiting to reuse their result.
    in_flight: HashMap<(String, ContentHash), Vec<StepKey>>,
    dispatched_ms: HashMap<StepKey, u64>,
    progress: Progress,
    /// Jobs to submit once what led to them is flushed.
    outbox: Vec<Job<Tag>>,
    /// Jobs of experiments' preparations (discoveries, references) not submitted yet
    /// ([`Running::preparation_at_once`]), in the order asked.
    held: VecDeque<Job<Tag>>,
    /// Preparation jobs submitted and not answered.
    preparation_out: usize,
    /// Whether the store holds writes not flushed yet.
    staged: bool,
    /// Per worker: the capabilities last fingerprinted and their stored hash.
    fingerprints: HashMap<String, (kiln_protocol::message::Capabilities, ContentHash)>,
}

/// What a chain of the prepared experiment `p` needs besides its state.
fn context<'p>(config: &CampaignConfig, p: &'p Prepared) -> ChainContext<'p> {
    let repeatability = step::repeatability(config, p.info.runs);
    ChainContext {
        experiment: &p.experiment,
        points: &p.info.discovery.points,
        forced: &p.info.discovery.forced,
        features: &p.info.discovery.features,
        baseline_objective: p.info.baseline.objective().expect("baseline checked"),
        start_functions: &p.info.baseline.function_instructions,
        measured_before: &p.info.measured_before,
        flips: p.flips,
        draws: p.draws.as_deref(),
        repeatability,
        metric: config.objective.metric,
        race: step::race_probability(config, &p.experiment, repeatability),
    }
}

/// The run loop's stages, in the order [`run`] takes them.
impl<'a> Running<'a> {
    /// A campaign about to start: nothing prepared, no chain.
    fn new(config: &'a CampaignConfig, store: &'a Store) -> Self {
        Running {
            config,
            store,
            experiments: BTreeMap::new(),
            preparing: BTreeMap::new(),
            discovering: HashSet::new(),
            chains: BTreeMap::new(),
            arrived: HashMap::new(),
            measured: HashMap::new(),
            in_flight: HashMap::new(),
            dispatched_ms: HashMap::new(),
            progress: Progress::new(config),
            outbox: Vec::new(),
            held: VecDeque::new(),
            preparation_out: 0,
            staged: false,
            fingerprints: HashMap::new(),
        }
    }

    /// Starts preparing every experiment at once (each one's chains start when it is
    /// ready), and submits the jobs they ask for.
    fn prepare(&mut self, pool: &Pool<Tag>) -> Result<()> {
        let config = self.config;
        for experiment in &config.experiments {
            let progress = Preparation::start(
                config,
                experiment,
                self.store,
                &mut self.discovering,
                &mut self.outbox,
            )?;
            self.on_preparation(&experiment.name, progress)?;
        }
        self.commit(pool)?;
        self.progress.refresh(&self.chains);
        // From the first second, `kiln status` shows what the campaign does (the store is locked).
        self.write_snapshot(&pool.board)
    }

    /// Stores and decides results as they arrive until every chain is finished, showing
    /// progress every `every`; an interrupt ends it with [`Interrupted`].
    async fn search(&mut self, pool: &mut Pool<Tag>, every: Duration) -> Result<()> {
        let mut snapshot_at = std::time::Instant::now();
        // An interval, not a sleep per wait: steps landing often must not starve the progress lines.
        let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let interruption = crate::error::interruption();
        tokio::pin!(interruption);
        while !self.all_finished() {
            let done = tokio::select! {
                done = pool.done.recv() => done.context("worker pool stopped")?,
                signal = &mut interruption => return Err(self.interrupted(signal)),
                _ = ticker.tick() => {
                    self.progress.tick(&self.chains, &pool.board);
                    // With no step landing (every worker down), the snapshot must still show them.
                    self.write_snapshot(&pool.board)?;
                    snapshot_at = std::time::Instant::now();
                    stop_if_all_unfit(pool)?;
                    continue;
                }
            };
            self.on_batch(done, pool)?;
            if snapshot_at.elapsed() > Duration::from_secs(1) {
                self.write_snapshot(&pool.board)?;
                snapshot_at = std::time::Instant::now();
            }
        }
        Ok(())
    }

    /// Group commit: every result that has arrived is stored and decided,
    /// then one flush makes them durable before the proposals they lead to
    /// go out.
    fn on_batch(&mut self, first: Done<Tag>, pool: &mut Pool<Tag>) -> Result<()> {
        self.on_done(first, &pool.board)?;
        for _ in 0..MAX_BATCH {
            let Ok(done) = pool.done.try_recv() else {
                break;
            };
            self.on_done(done, &pool.board)?;
        }
        self.commit(pool)?;
        self.progress.refresh(&self.chains);
        Ok(())
    }

    /// Ends the run on `signal`: says which steps were abandoned, and returns the error
    /// kiln ends with.
    fn interrupted(&mut self, signal: Signal) -> anyhow::Error {
        crate::error::exit_on_second_signal();
        self.progress.finish();
        // Nothing of them is stored: a resumed campaign runs them again.
        let mut in_flight: Vec<String> =
            self.dispatched_ms.keys().map(ToString::to_string).collect();
        in_flight.sort();
        if !in_flight.is_empty() {
            crate::logging::note(format_args!(
                "steps abandoned in flight: {}",
                in_flight.join(", ")
            ));
        }
        let why = format!(
            "{}{}; the campaign is stored in {} and `kiln run` resumes it",
            signal.said(),
            if self.preparing.is_empty() {
                ""
            } else {
                " while preparing"
            },
            self.store.dir().display()
        );
        // The person reads it once, as kiln's error; the log keeps it.
        tracing::info!("{why}");
        Interrupted(why, signal).into()
    }

    /// The end of a finished campaign: its last snapshot and its best files.
    fn finish(&mut self, pool: &Pool<Tag>) -> Result<()> {
        self.progress.finish();
        self.write_snapshot(&pool.board)?;
        self.write_best_files()
    }

    /// Writes the status snapshot behind `kiln status`, as the campaign stands now.
    fn write_snapshot(&self, board: &StatusBoard) -> Result<()> {
        status::write_snapshot(self.store, self.config, &self.chains, board, &self.phase())
    }
}

impl Running<'_> {
    fn all_finished(&self) -> bool {
        self.preparing.is_empty()
            && self
                .chains
                .iter()
                .all(|((e, _), s)| chain::finished(&context(self.config, &self.experiments[e]), s))
    }

    /// What the campaign is doing now.
    fn phase(&self) -> Phase {
        let mut phase = Phase {
            searching: !self.chains.is_empty(),
            ..Phase::default()
        };
        for preparation in self.preparing.values() {
            match preparation.doing() {
                Doing::Discovering(benchmark) => phase.discovering.insert(benchmark.to_string()),
                Doing::Measuring(experiment) => phase.measuring.insert(experiment.to_string()),
            };
        }
        phase
    }

    /// Starts the chains of an experiment that is ready, or waits for it.
    fn on_preparation(&mut self, experiment: &str, progress: prepare::Progress) -> Result<()> {
        match progress {
            prepare::Progress::Waiting(preparation) => {
                self.preparing.insert(experiment.to_string(), *preparation);
            }
            prepare::Progress::Failed(failed) => {
                logging::note(format_args!(
                    "experiment {experiment} stopped: {}",
                    crate::text::escape_controls(&failed.why)
                ));
                self.store.put_failed(experiment, &failed)?;
            }
            prepare::Progress::Ready(prepared) => {
                let prepared: Arc<Prepared> = Arc::from(prepared);
                if let Some(baseline) = prepared.info.baseline.objective() {
                    self.progress.baseline(experiment, baseline);
                }
                self.experiments
                    .insert(experiment.to_string(), prepared.clone());
                self.load_measured(&prepared)?;
                for chain in 0..prepared.experiment.chains {
                    self.start_chain(&prepared, chain)?;
                }
            }
        }
        Ok(())
    }

    /// Hands a discovery (or why it failed) to every other experiment that waited for it.
    fn on_discovered(
        &mut self,
        discovery: &prepare::Discovering,
        failed: Option<&str>,
    ) -> Result<()> {
        self.discovering.remove(discovery);
        let waiting: Vec<String> = (self.preparing.iter())
            .filter(|(_, p)| p.waits_for(discovery))
            .map(|(name, _)| name.clone())
            .collect();
        for experiment in waiting {
            let preparation = self.preparing.remove(&experiment).expect("listed");
            let progress =
                preparation.on_discovered(self.config, self.store, failed, &mut self.outbox)?;
            self.on_preparation(&experiment, progress)?;
        }
        Ok(())
    }

    /// Whether `experiment`'s objective is exact, so that a decision set
    /// measured once is never measured again.
    fn reuses(&self, experiment: &str) -> bool {
        let runs = self.experiments[experiment].info.runs;
        step::repeatability(self.config, runs) == Repeatability::Exact
    }

    /// Remembers the stored measurements of an experiment whose objective is
    /// exact, so repeated proposals reuse them: from its steps' export rows,
    /// which read at hundreds of thousands a second where the steps' JSON did not.
    fn load_measured(&mut self, p: &Prepared) -> Result<()> {
        if !self.reuses(&p.experiment.name) {
            return Ok(());
        }
        let name = &p.experiment.name;
        for stored in self.store.step_rows(name) {
            let stored = stored?;
            let row = stored.row()?;
            if row.kind != StepKind::Remeasure && row.cached_from.is_none() {
                let key = StepKey {
                    experiment: name.clone(),
                    chain: row.chain,
                    step: row.step,
                };
                let set = (name.clone(), ContentHash(row.decision_hash));
                self.measured.entry(set).or_insert(key);
            }
        }
        Ok(())
    }

    fn start_chain(&mut self, p: &Prepared, chain: u32) -> Result<()> {
        let name = &p.experiment.name;
        let ctx = context(self.config, p);
        let state = match self.store.chain(name, chain)? {
            Some(state) => chain::resume(&ctx, state),
            None => {
                let mut state = chain::start(
                    &ctx,
                    chain,
                    &p.info.baseline.decisions,
                    p.info.baseline.samples.clone(),
                );
                self.store.put_chain(name, chain, &mut state)?;
                state
            }
        };
        let pending: Vec<u32> = state.pending.keys().copied().collect();
        self.chains.insert((name.clone(), chain), state);
        for step in pending {
            let key = StepKey {
                experiment: name.clone(),
                chain,
                step,
            };
            match self.store.result(&key)? {
                Some(record) => {
                    let own = record.kind != StepKind::Remeasure && record.cached_from.is_none();
                    if own && self.reuses(name) {
                        let set = (key.experiment.clone(), record.decision_hash);
                        self.measured.entry(set).or_insert(key.clone());
                    }
                    self.arrived.insert(key, record);
                }
                None => self.dispatch(key)?,
            }
        }
        self.decide_ready(name, chain)
    }

    /// Makes what was stored durable, then submits the jobs it led to.
    fn commit(&mut self, pool: &Pool<Tag>) -> Result<()> {
        if self.staged {
            self.store.flush()?;
            self.staged = false;
        }
        for job in self.outbox.drain(..) {
            match job.tag {
                Tag::Step(_) => pool.submit(job),
                _ => self.held.push_back(job),
            }
        }
        let at_once = self.preparation_at_once();
        while self.preparation_out < at_once {
            // What an experiment already began (its references) before a new discovery.
            let begun = self
                .held
                .iter()
                .position(|j| matches!(j.tag, Tag::Reference(..)));
            let Some(job) = self.held.remove(begun.unwrap_or(0)) else {
                break;
            };
            pool.submit(job);
            self.preparation_out += 1;
        }
        Ok(())
    }

    /// How many preparation jobs (discoveries, reference measurements) may run at once:
    /// every slot's worth until an experiment is ready, then half of them (one at least), so
    /// that a campaign of many programs steps those prepared while it prepares the rest: its
    /// first steps come after one program's preparation, not after every program's.
    fn preparation_at_once(&self) -> usize {
        let slots: u32 = self.config.workers.iter().map(WorkerSpec::slots).sum();
        match self.experiments.is_empty() {
            true => slots.max(1) as usize,
            false => (slots / 2).max(1) as usize,
        }
    }

    /// Sends a pending proposal to be measured (at the next commit), or, with
    /// an exact objective, reuses the measurement of an earlier step with the
    /// same decisions (waiting for it if it is still being measured).
    fn dispatch(&mut self, key: StepKey) -> Result<()> {
        let p = self.experiments[&key.experiment].clone();
        let state = &self.chains[&(key.experiment.clone(), key.chain)];
        let proposal = &state.pending[&key.step];
        let set = (key.experiment.clone(), proposal.decisions.hash());
        if proposal.kind != StepKind::Remeasure && self.reuses(&key.experiment) {
            if let Some(earlier) = self.measured_record(&set)? {
                return self.reuse(key, &earlier);
            }
            if let Some(waiting) = self.in_flight.get_mut(&set) {
                waiting.push(key);
                return Ok(());
            }
            self.in_flight.insert(set, Vec::new());
        }
        let mut request = step::request(
            self.config,
            &p.benchmark,
            &p.bundle,
            &proposal.decisions,
            p.info.runs.unwrap_or(self.config.runs),
            proposal.race,
            p.info.baseline.output_digest,
        );
        request.function_costs = step::shares_builds(&p.experiment);
        self.dispatched_ms.insert(key.clone(), now_ms());
        self.outbox.push(Job {
            tag: Tag::Step(key),
            bundle: p.bundle.clone(),
            work: Work::Step(Box::new(request)),
        });
        Ok(())
    }

    /// The measured step of a decision set, decided or not yet.
    fn measured_record(&self, set: &(String, ContentHash)) -> Result<Option<StepRecord>> {
        let Some(source) = self.measured.get(set) else {
            return Ok(None);
        };
        if let Some(record) = self.arrived.get(source) {
            return Ok(Some(record.clone()));
        }
        Ok(match self.store.step(source)? {
            Some(record) => Some(record),
            None => self.store.result(source)?,
        })
    }

    /// Takes the measurement of the earlier step `earlier` for the pending step `key`.
    fn reuse(&mut self, key: StepKey, earlier: &StepRecord) -> Result<()> {
        let pending = self
            .chains
            .get(&(key.experiment.clone(), key.chain))
            .is_some_and(|s| s.pending.contains_key(&key.step));
        if !pending {
            // Its chain stopped while the step waited.
            return Ok(());
        }
        let record = self.record_from(
            &key,
            earlier.result.clone(),
            &earlier.worker,
            earlier.slot,
            Some(earlier.key.clone()),
        );
        self.store.put_result_unflushed(&record)?;
        self.staged = true;
        self.arrived.insert(key, record);
        Ok(())
    }

    /// The stored form of a result for the pending proposal at `key`.
    fn record_from(
        &self,
        key: &StepKey,
        mut result: StepResult,
        worker: &str,
        slot: u32,
        cached_from: Option<StepKey>,
    ) -> StepRecord {
        let state = &self.chains[&(key.experiment.clone(), key.chain)];
        let proposal = &state.pending[&key.step];
        let artifacts = self.store.stash_artifacts(&mut result);
        StepRecord {
            key: key.clone(),
            kind: proposal.kind,
            decision_hash: proposal.decisions.hash(),
            decisions: proposal.decisions.clone(),
            parent: proposal.parent,
            diff: proposal.diff.clone(),
            temperature: proposal.temperature,
            objective: objective_of(self.config, &result),
            result,
            worker: worker.to_string(),
            slot,
            worker_fingerprint: None,
            artifacts,
            cached_from,
            dispatched_ms: self.dispatched_ms.get(key).copied().unwrap_or_else(now_ms),
            recorded_ms: now_ms(),
            decision: None,
        }
    }

    /// A chain of `experiment` stopped because its first steps all failed
    /// alike: every chain of it that has not succeeded yet stops too, since
    /// it would spend its budget on the same failure.
    fn stop_experiment(&mut self, experiment: &str, stopped: u32, why: &str) -> Result<()> {
        let message = format!("experiment {experiment} stopped: chain {stopped}: {why}");
        logging::note(&message);
        for ((e, chain), state) in self.chains.iter_mut() {
            if e == experiment && state.stopped.is_none() && chain::nothing_succeeded(state) {
                chain::stop(state, format!("chain {stopped} {why}"));
                self.store.put_chain(e, *chain, state)?;
            }
        }
        Ok(())
    }

    /// Stores a result and decides what it makes decidable (unflushed: see [`commit`](Self::commit)).
    fn on_done(&mut self, done: Done<Tag>, board: &StatusBoard) -> Result<()> {
        match (done.tag, done.answer) {
            (Tag::Step(key), Answer::Step(result)) => {
                self.on_step_done(key, *result, (&done.worker, done.slot), board)
            }
            (Tag::Step(_), _) => bail!("unexpected answer during the campaign"),
            (tag, answer) => self.on_preparation_answer(tag, answer),
        }
    }

    /// An answer to a job of an experiment's preparation (its discovery or a reference).
    fn on_preparation_answer(&mut self, tag: Tag, answer: Answer) -> Result<()> {
        self.preparation_out = self.preparation_out.saturating_sub(1);
        let (Tag::Discover(experiment) | Tag::Reference(experiment, _)) = &tag else {
            bail!("unexpected answer during the campaign");
        };
        let experiment = experiment.clone();
        let Some(preparation) = self.preparing.remove(&experiment) else {
            bail!("an answer for experiment {experiment}, which is not preparing");
        };
        let discovered = matches!(tag, Tag::Discover(_)).then(|| preparation.discovering());
        let progress =
            preparation.on_answer(self.config, self.store, tag, answer, &mut self.outbox)?;
        let failed = match &progress {
            prepare::Progress::Failed(failed) => Some(failed.why.clone()),
            _ => None,
        };
        self.on_preparation(&experiment, progress)?;
        if let Some(discovery) = discovered {
            self.on_discovered(&discovery, failed.as_deref())?;
        }
        Ok(())
    }

    /// A step's result from `(worker, slot)`: stored, and every step it makes decidable decided.
    fn on_step_done(
        &mut self,
        key: StepKey,
        result: StepResult,
        (worker, slot): (&str, u32),
        board: &StatusBoard,
    ) -> Result<()> {
        let state_key = (key.experiment.clone(), key.chain);
        let still_pending = self
            .chains
            .get(&state_key)
            .is_some_and(|s| s.pending.contains_key(&key.step));
        if !still_pending || self.arrived.contains_key(&key) {
            // A duplicate answer (the step was re-dispatched after a loss that
            // turned out not to be one): the first answer stands.
            tracing::info!("ignoring a result for {key}: a second one, or its chain stopped");
            return Ok(());
        }
        for warning in &result.measurement.warnings {
            tracing::warn!("{key} on worker {worker}: {warning}");
        }
        let mut record = self.record_from(&key, result, worker, slot, None);
        record.worker_fingerprint = self.fingerprint(worker, board)?;
        // A result decided on arrival is stored by its decision's batch;
        // one that waits for earlier steps is stored as it is.
        let decides_now = self
            .chains
            .get(&state_key)
            .is_some_and(|s| s.next_decide == key.step);
        if !decides_now {
            self.store.put_result_unflushed(&record)?;
            self.staged = true;
        }
        self.dispatched_ms.remove(&key);
        let set = (key.experiment.clone(), record.decision_hash);
        let waiting = if record.kind == StepKind::Remeasure {
            Vec::new()
        } else {
            if self.reuses(&key.experiment) {
                self.measured.entry(set.clone()).or_insert(key.clone());
            }
            self.in_flight.remove(&set).unwrap_or_default()
        };
        let earlier = (!waiting.is_empty()).then(|| record.clone());
        self.arrived.insert(key.clone(), record);
        for other in waiting {
            self.reuse(
                other.clone(),
                earlier.as_ref().expect("kept for the waiting"),
            )?;
            self.decide_ready(&other.experiment, other.chain)?;
        }
        self.decide_ready(&key.experiment, key.chain)
    }

    /// The stored fingerprint of the worker's environment as it said at its
    /// last hello (hashed and stored once per worker and environment).
    fn fingerprint(&mut self, worker: &str, board: &StatusBoard) -> Result<Option<ContentHash>> {
        let caps = {
            let board = board.lock().expect("not poisoned");
            let Some(caps) = board.get(worker).and_then(|s| s.capabilities.as_ref()) else {
                return Ok(None);
            };
            if let Some((seen, hash)) = self.fingerprints.get(worker) {
                if seen == caps {
                    return Ok(Some(*hash));
                }
            }
            caps.clone()
        };
        let hash = self.store.put_fingerprint(&caps)?;
        self.fingerprints.insert(worker.to_string(), (caps, hash));
        Ok(Some(hash))
    }

    /// Decides every step of the chain whose turn has come and whose result is in.
    fn decide_ready(&mut self, experiment: &str, chain: u32) -> Result<()> {
        let p = self.experiments[experiment].clone();
        let ctx = context(self.config, &p);
        let state_key = (experiment.to_string(), chain);
        loop {
            let state = self.chains.get_mut(&state_key).expect("chain started");
            let key = StepKey {
                experiment: experiment.to_string(),
                chain,
                step: state.next_decide,
            };
            let Some(mut record) = self.arrived.remove(&key) else {
                return Ok(());
            };
            let before: Vec<u32> = state.pending.keys().copied().collect();
            chain::decide(&ctx, state, &mut record);
            if let Some(reason) = record.result.measurement.outcome.reason() {
                tracing::info!("{}: {reason}", record.key);
            }
            self.store.decide_unflushed(&record, state)?;
            self.staged = true;
            if let Some(why) = state.stopped.clone() {
                return self.stop_experiment(experiment, chain, &why);
            }
            let fresh: Vec<u32> = state
                .pending
                .keys()
                .copied()
                .filter(|s| !before.contains(s))
                .collect();
            for step in fresh {
                self.dispatch(StepKey {
                    experiment: experiment.to_string(),
                    chain,
                    step,
                })?;
            }
        }
    }

    /// Writes each chain's best decision set as a decision file beside the store.
    fn write_best_files(&self) -> Result<()> {
        for ((experiment, chain), state) in &self.chains {
            // The chain's best step where one beat stock; else the stock decisions.
            let baseline = &self.experiments[experiment].info.baseline;
            let best = self.store.best_step(
                experiment,
                *chain,
                state,
                baseline.objective().unwrap_or(f64::NAN),
            )?;
            let file = DecisionFile {
                benchmark: Some(self.experiments[experiment].benchmark.name.clone()),
                set: best.map_or_else(|| baseline.decisions.clone(), |step| step.decisions),
            };
            let path = layout::best_file(self.store.dir(), experiment, *chain);
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("cannot create {}", dir.display()))?;
            }
            crate::atomic::write(&path, file.to_text())?;
        }
        Ok(())
    }
}
