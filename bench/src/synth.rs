//! Synthetic campaign stores, written through the Store API as a campaign
//! writes them (experiment info, chain states, decided step records), their
//! copies in the layout older kilns read, and the latency of persisting one
//! step.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Result;

#[path = "../../test-support/splitmix.rs"]
mod splitmix;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use splitmix::Gen;

use kiln_controller::store::{
    layout, ChainState, Decision, ExperimentInfo, Incumbent, ProgressPoint, Reference, StepKey,
    StepKind, StepRecord, StepSummary, Store,
};
use kiln_protocol::message::{Discovery, Measurement, RunRecord, StepResult};
use kiln_protocol::{
    ContentHash, DecisionPoint, DecisionSet, DecisionValue, Metric, MetricValue, SiteId, StepId,
    StepOutcome, Summary,
};

/// Knobs of the synthetic experiment (as the no-op campaign's).
pub const KNOBS: usize = 12;
/// Values per knob.
pub const VALUES: i64 = 20;
/// Chains of the synthetic stores the suite builds.
pub const CHAINS: u32 = 4;

/// The config stored with a synthetic store (what `kiln export` reads the campaign name from):
/// `steps` a chain, the sources in `sources`, the store in `store`.
pub fn config_text(steps: u64, sources: &Path, store: &Path) -> String {
    let knobs: Vec<String> = (0..KNOBS)
        .map(|k| {
            let values: Vec<String> = (0..VALUES).map(|v| v.to_string()).collect();
            format!("(k{k} {})", values.join(" "))
        })
        .collect();
    format!(
        r#"(campaign
  (name bench-synthetic)
  (store {store:?})
  (objective (metric wall-time) (statistic median))
  (runs (warmup 0) (min 1) (max 1))
  (experiments
    ((benchmark noop) (search (random-walk (steps {steps}))) (chains 4) (seed 1)))
  (benchmarks
    ((name noop) (kind knobs) (knobs {knobs})
     (sources {sources:?}) (build ()) (run ("true")) (check-output none) (timeout-s 5)))
  (workers (local (slots 2))))
"#,
        knobs = knobs.join(" "),
        store = store.display().to_string(),
        sources = sources.display().to_string(),
    )
}

/// The synthetic campaign's sources (none: it runs `true`), beside its store.
fn sources_of(store: &Path) -> Result<PathBuf> {
    let sources = store.with_extension("sources");
    std::fs::create_dir_all(&sources)?;
    // kiln refuses sources without a file.
    std::fs::write(
        sources.join("README"),
        "the synthetic campaign runs `true`\n",
    )?;
    Ok(sources.canonicalize()?)
}

/// The steps a chain of an `n`-step synthetic store is given: one more than
/// it holds, so that a resumed campaign decides one step a chain and ends.
fn budget(n: u64, chains: u32) -> u64 {
    n.div_ceil(u64::from(chains.max(1))) + 1
}

/// A config that resumes the `n`-step synthetic campaign whose store is
/// `built`, in the copy `copy` of that store, written into `dir`; returns its path.
pub fn resume_config(n: u64, built: &Path, copy: &Path, dir: &Path) -> Result<PathBuf> {
    let text = config_text(budget(n, CHAINS), &sources_of(built)?, copy);
    let path = dir.join("resume.sexp");
    std::fs::write(&path, text)?;
    Ok(path)
}

fn points() -> Vec<DecisionPoint> {
    (0..KNOBS)
        .map(|k| DecisionPoint {
            id: SiteId(format!("k{k}")),
            domain: (0..VALUES).map(DecisionValue::Int).collect(),
        })
        .collect()
}

fn baseline() -> DecisionSet {
    DecisionSet(
        (0..KNOBS)
            .map(|k| (SiteId(format!("k{k}")), DecisionValue::Int(0)))
            .collect(),
    )
}

/// A result like a no-op step's on a machine without a PMU: one run, every
/// timed metric, hardware counters unsupported.
fn result(g: &mut Gen) -> StepResult {
    let wall = 500_000.0 + g.below(300_000) as f64;
    let measured = [
        (Metric::WallTime, wall),
        (Metric::UserTime, (g.below(800) * 1000) as f64),
        (Metric::SystemTime, 0.0),
        (Metric::MaxRss, 1_298_432.0),
        (Metric::TaskClock, wall * 0.7),
        (Metric::ContextSwitches, g.below(2) as f64),
        (Metric::CpuMigrations, 0.0),
        (Metric::PageFaults, 48.0 + g.below(3) as f64),
        (Metric::BlockIoBytes, 0.0),
    ];
    let unsupported = Metric::PERF.iter().copied().filter(|m| m.needs_pmu());
    let mut metrics = BTreeMap::new();
    let mut summary = BTreeMap::new();
    for (m, v) in measured {
        metrics.insert(m, MetricValue::Measured(v));
        summary.insert(m, Summary::of(&[v]).expect("one sample"));
    }
    for m in unsupported {
        metrics.insert(m, MetricValue::Unsupported);
    }
    StepResult {
        measurement: Measurement {
            runs: vec![RunRecord {
                index: 0,
                warmup: false,
                exit_code: Some(0),
                signal: None,
                metrics,
            }],
            summary,
            target_met: true,
            ..Measurement::empty(StepOutcome::Ok)
        },
        started_ms: 1_700_000_000_000,
        finished_ms: 1_700_000_000_001,
        ..StepResult::new(StepId(g.next() >> 20), StepOutcome::Ok)
    }
}

/// The baseline's objective: the median of its samples (ns).
const BASELINE_NS: f64 = 600_000.0;

fn chain_state(samples: &[f64]) -> ChainState {
    ChainState::at_start(
        &baseline(),
        samples.to_vec(),
        ChaCha8Rng::seed_from_u64(7),
        0.0,
        0,
    )
}

/// One decided step of a random walk from `state`, and the state after it.
fn next_step(g: &mut Gen, state: &mut ChainState, chain: u32, step: u32) -> StepRecord {
    let mut decisions = state.current.decisions.clone();
    let k = g.below(KNOBS as u64);
    decisions.0.insert(
        SiteId(format!("k{k}")),
        DecisionValue::Int(g.below(VALUES as u64) as i64),
    );
    let result = result(g);
    let objective = result.measurement.summary[&Metric::WallTime].median;
    let t = 1_700_000_000_000 + u64::from(step) * 2;
    let record = StepRecord {
        key: StepKey {
            experiment: "noop".into(),
            chain,
            step,
        },
        kind: StepKind::Proposal,
        decision_hash: decisions.hash(),
        diff: decisions.diff_from(&state.current.decisions),
        decisions: decisions.clone(),
        parent: state.current.step,
        temperature: 0.0,
        result,
        objective: Some(objective),
        worker: "local".into(),
        slot: step % 2,
        worker_fingerprint: None,
        artifacts: BTreeMap::new(),
        cached_from: None,
        dispatched_ms: t,
        recorded_ms: t + 1,
        decision: Some(Decision {
            accepted: true,
            compared_with: state.current.objective(),
            decided_ms: t + 1,
        }),
    };
    state.current = Incumbent {
        decisions,
        samples: vec![objective],
        step: Some(step),
    };
    state.next_decide = step + 1;
    state.generated = step + 1;
    state.accepted += 1;
    *state.proposals.get_or_insert(0) += 1;
    state.updated_ms = t + 1;
    if objective < state.best.objective() {
        state.best = state.current.clone();
    }
    // The chain's course, as a campaign keeps it.
    let point = ProgressPoint {
        steps: state.next_decide,
        at_ms: state.updated_ms,
        best: None,
        accepted: state.accepted,
        proposals: state.proposals.unwrap_or(0),
        failures: BTreeMap::new(),
        temperature: 0.0,
    };
    if let Some(progress) = &mut state.progress {
        progress.note(
            step,
            Some(&record.worker),
            Some(objective),
            BASELINE_NS,
            point,
        );
    }
    record
}

/// The synthetic experiment's info, its sources packed as `bundle`.
fn experiment_info(bundle: ContentHash) -> ExperimentInfo {
    let samples = vec![BASELINE_NS, BASELINE_NS + 10_000.0, BASELINE_NS - 10_000.0];
    ExperimentInfo {
        discovery: Discovery {
            points: points(),
            baseline: baseline(),
            ..Default::default()
        },
        bundle,
        baseline: Reference {
            decisions: baseline(),
            samples,
            outcome: StepOutcome::Ok,
            output_digest: None,
            checked_output: None,
            text_bytes: None,
            function_instructions: Default::default(),
            function_code: Default::default(),
        },
        references: BTreeMap::new(),
        runs: None,
        measured_before: Default::default(),
    }
}

/// What building a store took.
pub struct Built {
    /// Steps written.
    pub steps: u64,
    /// Seconds.
    pub seconds: f64,
    /// Bytes of one step record's JSON (the first).
    pub record_bytes: usize,
    /// Bytes of its export row.
    pub row_bytes: usize,
    /// Bytes of the store's database over its steps.
    pub db_bytes_per_step: f64,
}

/// Writes a store of `steps` decided steps over `chains` chains into `dir`
/// (atomic batches of 1000 steps, flushed every 50 000).
pub fn build(dir: &Path, steps: u64, chains: u32) -> Result<Built> {
    let t0 = Instant::now();
    let store = Store::open(dir)?;
    let sources = sources_of(dir)?;
    let config = config_text(budget(steps, chains), &sources, Path::new("store"));
    store.put_config(&config, 1_700_000_000_000)?;
    // The bundle's hash as kiln packs the sources, so that a resumed campaign goes on.
    let info = experiment_info(kiln_controller::dispatch::bundle::pack(&sources)?.hash);
    store.put_experiment("noop", &info)?;
    let mut g = Gen(42);
    let per_chain = steps.div_ceil(u64::from(chains.max(1)));
    let mut written = 0u64;
    let (mut record_bytes, mut row_bytes) = (0, 0);
    for chain in 0..chains {
        let mut state = chain_state(&info.baseline.samples);
        let mut batch = Vec::with_capacity(1000);
        for step in 0..per_chain {
            if written == steps {
                break;
            }
            let record = next_step(&mut g, &mut state, chain, step as u32);
            if written == 0 {
                record_bytes = serde_json::to_vec(&record)?.len();
                row_bytes = StepSummary::of(&record).encode()?.len();
            }
            batch.push(record);
            written += 1;
            if batch.len() == 1000 {
                store.import_steps(&batch)?;
                batch.clear();
            }
            if written.is_multiple_of(50_000) {
                store.flush()?;
            }
        }
        store.import_steps(&batch)?;
        // The chain's state once, as a campaign leaves it (rewriting it per
        // step, as a campaign does, only adds garbage for sled to clean).
        store.put_chain("noop", chain, &mut state)?;
    }
    store.flush()?;
    // As a controller that ends seals it, for `kiln status` to read.
    kiln_controller::campaign::status::seal(&store)?;
    drop(store);
    Ok(Built {
        steps: written,
        seconds: t0.elapsed().as_secs_f64(),
        record_bytes,
        row_bytes,
        db_bytes_per_step: kiln_controller::store::bytes_under(&kiln_controller::store::layout::db(
            dir,
        )) as f64
            / written.max(1) as f64,
    })
}

/// Copies the store in `from` (closed) into `to` as kiln wrote stores
/// before it kept export rows, the only layout older kilns read: every key
/// but the rows and base sets (`set/…`), steps one a key (`step/…`) with their
/// decisions in full, pages uncompressed, `meta/schema` 1. Returns the keys copied.
pub fn copy_as_layout_1(from: &Path, to: &Path) -> Result<u64> {
    anyhow::ensure!(!to.exists(), "{} exists already", to.display());
    let from = Store::open_existing(from)?;
    // sled's default cache (1 GiB) would only grow this process.
    let to = sled::Config::new()
        .path(to.join("db"))
        .cache_capacity(32 << 20)
        .open()?;
    let mut batch = sled::Batch::default();
    let mut copied = 0u64;
    let steps = from
        .steps(None)
        .map(|record| -> Result<(sled::IVec, sled::IVec)> {
            let record = record?;
            let key = layout::step_key(&record.key);
            Ok((key.as_bytes().into(), serde_json::to_vec(&record)?.into()))
        });
    let others = from.database().iter().map(|item| Ok(item?));
    for item in steps.chain(others) {
        let (key, value) = item?;
        let prefixes = [layout::STEP_BLOCKS, layout::ROW_BLOCKS, "set/"];
        if prefixes.iter().any(|p| key.starts_with(p.as_bytes())) {
            continue;
        }
        batch.insert(key, value);
        copied += 1;
        if copied.is_multiple_of(1000) {
            to.apply_batch(std::mem::take(&mut batch))?;
        }
    }
    batch.insert("meta/schema", serde_json::to_vec(&1u32)?);
    to.apply_batch(batch)?;
    to.flush()?;
    Ok(copied)
}

/// Latencies (seconds) of persisting steps one at a time as the campaign
/// loop does: `put_result` (insert + flush) then `decide` (atomic batch +
/// flush), in a store holding `prefill` steps already.
pub struct Latencies {
    /// `put_result`: the measured, undecided step, flushed.
    pub put_result: Vec<f64>,
    /// `decide`: the decided step and chain state in one batch, flushed.
    pub decide: Vec<f64>,
}

/// Persists `n` steps one by one into a fresh store in `dir`.
pub fn latency(dir: &Path, n: u32) -> Result<Latencies> {
    let store = Store::open(dir)?;
    let config = config_text(u64::from(n), Path::new("noop"), Path::new("store"));
    store.put_config(&config, 1_700_000_000_000)?;
    let info = experiment_info(ContentHash::of(b"noop"));
    store.put_experiment("noop", &info)?;
    let mut g = Gen(7);
    let mut state = chain_state(&info.baseline.samples);
    store.put_chain("noop", 0, &mut state)?;
    let mut out = Latencies {
        put_result: Vec::new(),
        decide: Vec::new(),
    };
    for step in 0..n {
        let mut record = next_step(&mut g, &mut state, 0, step);
        let decision = record.decision.take();
        let t = Instant::now();
        store.put_result(&record)?;
        out.put_result.push(t.elapsed().as_secs_f64());
        record.decision = decision;
        let t = Instant::now();
        store.decide(&record, &mut state)?;
        out.decide.push(t.elapsed().as_secs_f64());
    }
    Ok(out)
}
