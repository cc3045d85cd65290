//! The commands: one file per subcommand, each taking its parsed arguments
//! ([`crate::cli`]), doing its work through the stages below it, writing its
//! output to the writer it is given and saying how it went as an
//! [`Outcome`]; [`crate::error`] turns that, or the error, into the exit
//! status.
//!
//! This is the top of the controller: the only place that prints for a
//! person. Nothing below imports from it.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context, Result};

use kiln_protocol::config::{BenchmarkKind, BenchmarkSpec, Limits};
use kiln_protocol::CampaignConfig;

use kiln_protocol::bundle::Bundle;
use kiln_protocol::message::Discovery;
use kiln_protocol::DecisionSet;

use crate::cli::{Cli, Command, StoreCommand};
use crate::dispatch::calibration::Calibrator;
use crate::dispatch::pool::PoolSettings;
use crate::dispatch::pool::{Answer, Work};
use crate::dispatch::transport::worker_binary;
use crate::error::{BadInput, Outcome};
use crate::logging;
use crate::measure::{Measurement, Session};
use crate::store::kept;
use crate::store::{
    manual_experiment, now_ms, Decision, ExperimentInfo, Reference, StepKey, StepKind, StepRecord,
    Store,
};

mod benchmark;
mod check;
mod export;
mod manual;
mod policy;
mod report;
mod rewards;
mod run;
mod serve;
mod show;
mod sites;
mod status;
mod store;
mod workers;

/// Runs the command line's command, writing its output to standard output.
pub fn run(cli: Cli) -> Result<Outcome> {
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    let outcome = match cli.command {
        Command::Check(args) => check::run(&args, &mut out),
        Command::Run(args) => run::run(&args, &mut out),
        Command::Status(args) => status::run(&args, &mut out),
        Command::Show(args) => show::run(&args, &mut out),
        Command::Store {
            command: StoreCommand::Verify(args),
        } => store::verify(&args, &mut out),
        Command::Store {
            command: StoreCommand::Migrate(args),
        } => store::migrate(&args, &mut out),
        Command::Sites(args) => sites::run(&args, &mut out),
        Command::Workers(args) => workers::run(&args, &mut out),
        Command::Benchmark(args) => benchmark::run(&args, &mut out),
        Command::Policy(args) => policy::run(&args, &mut out),
        Command::Export(args) => export::run(&args, &mut out),
        Command::Rewards(args) => rewards::run(&args, &mut out),
        Command::Report(args) => report::run(&args, &mut out),
        Command::Serve(args) => serve::run(&args, &mut out),
        Command::Completions(args) => manual::completions(&args, &mut out),
        Command::Man(args) => manual::man(&args, &mut out),
    }?;
    out.flush()?;
    Ok(outcome)
}

/// Reads a campaign config; a config that does not parse is bad input (its
/// error names file, line and column).
fn read_config(path: &Path) -> Result<CampaignConfig> {
    CampaignConfig::read(path).map_err(|e| BadInput(e.to_string()).into())
}

/// The config's benchmark of that name; a name it lacks is bad input.
fn benchmark_spec<'c>(config: &'c CampaignConfig, name: &str) -> Result<&'c BenchmarkSpec> {
    config.benchmark(name).ok_or_else(|| {
        let known: Vec<_> = config.benchmarks.iter().map(|b| b.name.as_str()).collect();
        BadInput(format!(
            "no benchmark named '{name}'; the config defines: {}",
            known.join(", ")
        ))
        .into()
    })
}

/// The async runtime the commands that talk to workers run on.
fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

/// Pool settings for a one-off command; local workers run in a scratch folder
/// that is removed when the returned guard drops (after the pool).
fn scratch_pool(
    config: &CampaignConfig,
    calibration: Option<Arc<Calibrator>>,
    limits: Limits,
) -> Result<(tempfile::TempDir, PoolSettings)> {
    let scratch = tempfile::Builder::new().prefix("kiln-").tempdir()?;
    let settings = PoolSettings {
        worker_binary: worker_binary()?,
        local_rundir: scratch.path().to_path_buf(),
        timeouts: config.timeouts,
        quarantine_after: 3,
        calibration,
        limits,
    };
    Ok((scratch, settings))
}

/// A decision set measured beside the baseline on one slot (`kiln benchmark`,
/// `kiln policy`), to record as a manual step.
pub(super) struct Manual<'a> {
    pub discovery: &'a Discovery,
    pub decisions: &'a DecisionSet,
    pub worker: &'a str,
    pub baseline: &'a Measurement,
    pub baseline_objective: f64,
    pub candidate: &'a Measurement,
    pub candidate_objective: Option<f64>,
}

/// The info of the manual experiment `experiment`: the stored one, where the benchmark has not
/// changed since, else a new one whose baseline is `m`'s (its samples are added after).
fn manual_info(
    store: &Store,
    spec: &BenchmarkSpec,
    bundle: &Bundle,
    m: &Manual<'_>,
    experiment: &str,
) -> Result<ExperimentInfo> {
    let base = &m.baseline.result;
    let Some(info) = store.experiment(experiment)? else {
        return Ok(ExperimentInfo {
            discovery: m.discovery.clone(),
            bundle: bundle.hash,
            baseline: Reference {
                decisions: m.discovery.baseline.clone(),
                samples: Vec::new(),
                outcome: base.measurement.outcome.clone(),
                output_digest: base.measurement.output_digest,
                checked_output: base.measurement.checked_output.clone(),
                text_bytes: base.build.as_ref().and_then(|b| b.text_bytes),
                function_instructions: BTreeMap::new(),
                function_code: BTreeMap::new(),
            },
            references: BTreeMap::new(),
            runs: None,
            measured_before: BTreeSet::new(),
        });
    };
    if info.bundle != bundle.hash || info.discovery != *m.discovery {
        bail!(
            "benchmark {} ({}) changed since its manual steps in {} were recorded; \
             record into another store",
            spec.name,
            spec.sources.display(),
            store.dir().display()
        );
    }
    Ok(info)
}

/// Records a manual measurement in `store` as the next step of experiment
/// `manual:BENCHMARK`'s chain 0; the baseline's objective joins that
/// experiment's baseline samples.
pub(super) fn record_manual(
    store: &Store,
    spec: &BenchmarkSpec,
    bundle: &Bundle,
    m: &Manual<'_>,
) -> Result<StepKey> {
    let experiment = manual_experiment(&spec.name);
    let base = &m.baseline.result;
    let mut info = manual_info(store, spec, bundle, m, &experiment)?;
    info.baseline.samples.push(m.baseline_objective);
    info.baseline.outcome = base.measurement.outcome.clone();

    let step = store.chain_steps(&experiment, 0);
    let key = StepKey {
        experiment,
        chain: 0,
        step: u32::try_from(step).context("too many manual steps")?,
    };
    let mut result = m.candidate.result.clone();
    let artifacts = store.stash_artifacts(&mut result);
    let record = StepRecord {
        key: key.clone(),
        kind: StepKind::Proposal,
        decision_hash: m.decisions.hash(),
        decisions: m.decisions.clone(),
        parent: None,
        diff: m.decisions.diff_from(&m.discovery.baseline),
        temperature: 0.0,
        result,
        objective: m.candidate_objective,
        worker: m.worker.to_string(),
        slot: 0,
        worker_fingerprint: None,
        artifacts,
        cached_from: None,
        dispatched_ms: m.candidate.dispatched_ms,
        recorded_ms: m.candidate.recorded_ms,
        decision: Some(Decision {
            accepted: false,
            compared_with: m.baseline_objective,
            decided_ms: now_ms(),
        }),
    };
    store.record_manual(&info, &record)?;
    Ok(key)
}

/// A benchmark's decision points: those of its knobs, the discovery kept
/// beside the store in `store_dir` (by `kiln run`, `kiln sites`, an earlier
/// command) or else beside the config's own store `config_store` (where
/// `kiln sites` keeps it), or found now on the session's worker (and kept in
/// `store_dir`). Kept files are read without the store's lock: they are
/// written whole and renamed into place.
async fn discovery(
    store_dir: &Path,
    config_store: &Path,
    spec: &BenchmarkSpec,
    bundle: &Arc<Bundle>,
    session: &mut Session<'_>,
) -> Result<Discovery> {
    if let BenchmarkKind::Knobs { points } = &spec.kind {
        return Ok(Discovery::of_knobs(points));
    }
    let kept = kept::load_discovery(store_dir, &bundle.hash, spec)
        .or_else(|| kept::load_discovery(config_store, &bundle.hash, spec));
    if let Some((found, path)) = kept {
        logging::note(format_args!(
            "decision points of {} from {} (an earlier discovery; delete it to discover again)",
            spec.name,
            path.display()
        ));
        return Ok(found);
    }
    match session
        .run(bundle, Work::Discover(Box::new(spec.clone())))
        .await?
    {
        Answer::Discovered(Ok(found)) => {
            kept::save_discovery(store_dir, &bundle.hash, spec, &found)?;
            Ok(found)
        }
        Answer::Discovered(Err(e)) => bail!(
            "cannot find the decision points of benchmark {} on worker {}: {e}",
            spec.name,
            session.worker
        ),
        Answer::Step(_) => bail!("unexpected step result during discovery"),
    }
}
