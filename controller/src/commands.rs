//! The smaller commands: the end-of-run summary, `store verify`, `sites`, `workers`.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};

use kiln_protocol::config::BenchmarkKind;
use kiln_protocol::message::Capabilities;
use kiln_protocol::{CampaignConfig, DecisionFile};

use crate::calibration::{self, Calibrator};
use crate::pool::{Answer, Job, Pool, PoolSettings, Work, WorkerState, WorkerStatus};
use crate::status::format_value;
use crate::store::{ExperimentInfo, StepRecord, Store};

/// The kiln-worker binary: `$KILN_WORKER`, or the one beside this executable.
pub fn worker_binary() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os("KILN_WORKER") {
        return Ok(PathBuf::from(path));
    }
    let exe = std::env::current_exe().context("cannot locate the kiln executable")?;
    let dir = exe.parent().context("kiln executable has no folder")?;
    // Integration tests run from target/*/deps; the binary sits one level up.
    for candidate in [dir.join("kiln-worker"), dir.join("../kiln-worker")] {
        if candidate.exists() {
            return Ok(candidate);
        }
    }
    bail!(
        "cannot find kiln-worker beside {}; build it (cargo build --release) or set KILN_WORKER",
        exe.display()
    )
}

/// What `kiln run` prints at the end: best against the references, and where everything is.
pub fn final_summary(config: &CampaignConfig, store_dir: &Path) -> Result<String> {
    let store = Store::open(store_dir)?;
    let mut out = String::new();
    let metric = config.objective.metric;
    let _ = writeln!(
        out,
        "\ncampaign {} finished; objective: {} of {} ({})",
        config.name,
        config.objective.statistic.name(),
        metric,
        metric.unit()
    );
    for e in &config.experiments {
        let Some(info) = store.experiment(&e.name)? else {
            continue;
        };
        let baseline = info.baseline.objective().unwrap_or(f64::NAN);
        let _ = writeln!(out, "\nexperiment {} (benchmark {}):", e.name, e.benchmark);
        let _ = writeln!(
            out,
            "  {:<28} {:>16}",
            "stock decisions (baseline)",
            format_value(baseline)
        );
        for (name, r) in &info.references {
            let v = r.objective().unwrap_or(f64::NAN);
            let _ = writeln!(
                out,
                "  {:<28} {:>16}  {:.3}x baseline",
                format!("{name} (reference)"),
                format_value(v),
                v / baseline
            );
        }
        for c in 0..e.chains {
            let Some(state) = store.chain(&e.name, c)? else {
                continue;
            };
            let best = state.best.objective();
            let mut line = format!(
                "  {:<28} {:>16}  {:.3}x baseline",
                format!("best of chain {c}"),
                format_value(best),
                best / baseline
            );
            if let Some(none) = info.references.get("no-inline").and_then(|r| r.objective()) {
                let _ = write!(line, ", {:.3}x inlining nothing", best / none);
            }
            let _ = writeln!(out, "{line}");
            let _ = writeln!(
                out,
                "  {:<28} {}",
                "",
                crate::campaign::best_file(store_dir, &e.name, c).display()
            );
        }
    }
    let csv = store_dir.join("steps.csv");
    let _ = writeln!(out, "\nstore:       {}", store_dir.display());
    if csv.exists() {
        let _ = writeln!(out, "steps CSV:   {}", csv.display());
    }
    let _ = writeln!(out, "status:      kiln status {}", store_dir.display());
    Ok(out)
}

/// The findings of `kiln store verify`.
pub struct Verification {
    /// The report.
    pub text: String,
    /// Problems found.
    pub problems: usize,
}

/// What is wrong with one stored step itself: its hash, its artifacts.
pub fn record_problems(store: &Store, record: &StepRecord) -> Vec<String> {
    let mut problems = Vec::new();
    if record.decisions.hash() != record.decision_hash {
        problems.push(format!(
            "{}: decision hash does not match its decisions",
            record.key
        ));
    }
    for (kind, hash) in &record.artifacts {
        if !store.artifact_path(hash).exists() {
            problems.push(format!(
                "{}: {kind} artifact {} missing",
                record.key,
                hash.short()
            ));
        }
    }
    problems
}

/// Checks a store's integrity: every chain's steps contiguous, decided, hashed right, artifacts
/// present, export rows matching their steps.
pub fn verify_store(dir: &Path) -> Result<Verification> {
    let store = Store::open(dir)?;
    let mut problems = Vec::new();
    let config_text: String = store
        .get("meta/config")?
        .with_context(|| format!("{} holds no campaign (no meta/config)", dir.display()))?;
    let config = CampaignConfig::parse(&config_text, "stored config")
        .map_err(|e| anyhow::anyhow!("stored config does not parse: {e}"))?;
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    let mut outcomes: BTreeMap<String, usize> = BTreeMap::new();
    for e in &config.experiments {
        let info: Option<ExperimentInfo> = store.experiment(&e.name)?;
        if info.is_none() {
            continue;
        }
        *counts.entry("experiments").or_default() += 1;
        for c in 0..e.chains {
            let Some(state) = store.chain(&e.name, c)? else {
                continue;
            };
            *counts.entry("chains").or_default() += 1;
            let mut expected = 0u32;
            for record in store.steps(Some(&e.name)) {
                let record = record?;
                if record.key.chain != c {
                    continue;
                }
                if record.key.step != expected {
                    problems.push(format!("{}: expected step {expected}", record.key));
                }
                expected = record.key.step + 1;
                if record.decision.is_none() {
                    problems.push(format!(
                        "{}: stored as decided without a decision",
                        record.key
                    ));
                }
                problems.extend(record_problems(&store, &record));
                *counts.entry("steps").or_default() += 1;
                if record.decision.as_ref().is_some_and(|d| d.accepted) {
                    *counts.entry("accepted").or_default() += 1;
                }
                if record.cached_from.is_some() {
                    *counts.entry("reused measurements").or_default() += 1;
                }
                *outcomes
                    .entry(record.result.outcome.name().to_string())
                    .or_default() += 1;
            }
            if expected != state.next_decide {
                problems.push(format!(
                    "{}/chain {c}: {expected} steps stored but the chain state says {} decided",
                    e.name, state.next_decide
                ));
            }
        }
    }
    let manual = crate::manual::verify(&store, &mut problems)?;
    problems.extend(store.row_problems()?);
    if manual > 0 {
        counts.insert("manual steps", manual);
    }
    *counts.entry("undecided results").or_default() += store.count("result/");
    let mut text = String::new();
    let _ = writeln!(text, "store {} (campaign {})", dir.display(), config.name);
    for (k, v) in &counts {
        let _ = writeln!(text, "  {k:<22} {v}");
    }
    for (k, v) in &outcomes {
        let _ = writeln!(text, "  outcome {k:<14} {v}");
    }
    if problems.is_empty() {
        let _ = writeln!(text, "ok: no problems found");
    } else {
        for p in &problems {
            let _ = writeln!(text, "problem: {p}");
        }
    }
    Ok(Verification {
        text,
        problems: problems.len(),
    })
}

/// Pool settings for a one-off command; local workers run in a scratch folder
/// that is removed when the returned guard drops (after the pool).
fn scratch_settings(
    config: &CampaignConfig,
    calibration: Option<Arc<Calibrator>>,
) -> Result<(tempfile::TempDir, PoolSettings)> {
    let scratch = tempfile::Builder::new().prefix("kiln-").tempdir()?;
    let settings = PoolSettings {
        worker_binary: worker_binary()?,
        local_rundir: scratch.path().to_path_buf(),
        timeouts: config.timeouts,
        quarantine_after: 3,
        calibration,
        limits: config.limits_in_use(),
    };
    Ok((scratch, settings))
}

/// `kiln sites`: discovers a benchmark's decision points on the first worker that answers.
pub async fn sites(
    config: &CampaignConfig,
    benchmark: &str,
    output: Option<&Path>,
) -> Result<String> {
    let spec = config.benchmark(benchmark).with_context(|| {
        let known: Vec<_> = config.benchmarks.iter().map(|b| b.name.as_str()).collect();
        format!(
            "no benchmark named '{benchmark}'; the config defines: {}",
            known.join(", ")
        )
    })?;
    let discovery = match &spec.kind {
        BenchmarkKind::Knobs { points } => kiln_protocol::message::Discovery::of_knobs(points),
        BenchmarkKind::LlvmInline { .. } => {
            let bundle = std::sync::Arc::new(crate::bundle::pack(&spec.sources)?);
            let (_scratch, settings) = scratch_settings(config, None)?;
            let mut pool: Pool<()> = Pool::start(&config.workers, settings);
            pool.submit(Job {
                tag: (),
                bundle,
                work: Work::Discover(Box::new(spec.clone())),
            });
            let done = pool.done.recv().await.context("worker pool stopped")?;
            match done.answer {
                Answer::Discovered(Ok(d)) => d,
                Answer::Discovered(Err(e)) => {
                    bail!("discovery failed on worker {}: {e}", done.worker)
                }
                Answer::Step(_) => bail!("unexpected step result"),
            }
        }
    };
    let mut out = String::new();
    let _ = writeln!(out, "{:<60} {:>10}  domain", "decision point", "stock");
    for p in &discovery.points {
        let stock = discovery
            .baseline
            .get(&p.id)
            .map(ToString::to_string)
            .unwrap_or_default();
        let domain: Vec<_> = p.domain.iter().map(ToString::to_string).collect();
        let _ = writeln!(out, "{:<60} {:>10}  {}", p.id, stock, domain.join(" "));
    }
    let _ = writeln!(out, "{} decision points", discovery.points.len());
    if let Some(path) = output {
        let file = DecisionFile {
            benchmark: Some(spec.name.clone()),
            set: discovery.baseline.clone(),
        };
        std::fs::write(path, file.to_text())
            .with_context(|| format!("cannot write {}", path.display()))?;
        let _ = writeln!(out, "stock decisions written to {}", path.display());
    }
    Ok(out)
}

/// `kiln workers`: connects to every worker (and calibrates every slot when the config asks
/// for calibration) and tabulates them; whether every worker is ok.
pub async fn workers(config: &CampaignConfig) -> Result<(String, bool)> {
    let calibrator = Calibrator::from_config(config)?;
    let calibrating = calibrator.is_some();
    let (_scratch, settings) = scratch_settings(config, calibrator)?;
    let pool: Pool<()> = Pool::start(&config.workers, settings);
    let board = settled_board(&pool, config, calibrating).await;
    Ok(workers_table(config, &board))
}

/// The pool's board once every worker has connected (and calibrated) or failed to, or at the
/// deadline: connecting, plus running the calibration benchmark when there is one.
async fn settled_board(
    pool: &Pool<()>,
    config: &CampaignConfig,
    calibrating: bool,
) -> BTreeMap<String, WorkerStatus> {
    let mut limit = config.timeouts.connect_s + 5.0;
    if let Some(b) = config
        .calibration
        .as_ref()
        .and_then(|c| config.benchmark(&c.benchmark))
    {
        limit += b.build_timeout_s + b.timeout_s * f64::from(config.runs.warmup + config.runs.max);
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs_f64(limit);
    loop {
        let board = pool.board.lock().expect("not poisoned").clone();
        let settled = board.values().all(|s| match s.state {
            WorkerState::Connecting => false,
            WorkerState::Ok => !calibrating || s.calibration.iter().all(|c| c.count > 0),
            WorkerState::Unreachable(_) | WorkerState::Quarantined(_) | WorkerState::Unfit(_) => {
                true
            }
        });
        if settled || tokio::time::Instant::now() > deadline {
            return board;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What a worker's hello said: CPU, counters that open, GPUs (`-` before any hello).
fn capability_cells(c: Option<&Capabilities>) -> (String, String, String) {
    let Some(c) = c else {
        return ("-".into(), "-".into(), "-".into());
    };
    let on: Vec<_> = c
        .counters
        .iter()
        .filter(|(_, ok)| **ok)
        .map(|(m, _)| m.name())
        .collect();
    let gpus = if c.gpus.is_empty() {
        "none".to_string()
    } else {
        c.gpus
            .iter()
            .map(|g| g.name.clone())
            .collect::<Vec<_>>()
            .join(",")
    };
    (
        format!("{} ({} cores)", c.cpu_model, c.cores),
        on.join(","),
        gpus,
    )
}

/// The `kiln workers` table, and whether every worker is ok (connected, no slot flagged).
fn workers_table(
    config: &CampaignConfig,
    board: &BTreeMap<String, WorkerStatus>,
) -> (String, bool) {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<16} {:<24} {:>5} {:<32} {:<28} {:<10} {:<16}  status",
        "worker", "host", "slots", "cpu", "counters", "gpus", "calibration ms"
    );
    let mut all_ok = true;
    for spec in &config.workers {
        let s = &board[spec.name()];
        all_ok &= s.state == WorkerState::Ok && s.calibration.iter().all(|c| !c.flagged);
        let (cpu, counters, gpus) = capability_cells(s.capabilities.as_ref());
        let _ = writeln!(
            out,
            "{:<16} {:<24} {:>5} {:<32.32} {:<28.28} {:<10} {:<16}  {}",
            spec.name(),
            s.address,
            spec.slots(),
            cpu,
            counters,
            gpus,
            calibration::cells(&s.calibration),
            s.state
        );
    }
    (out, all_ok)
}
