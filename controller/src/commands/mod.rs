//! The commands: one file per subcommand, each taking its parsed arguments
//! ([`crate::cli`]), doing its work through the stages below it, writing its
//! output to the writer it is given and saying how it went as an
//! [`Outcome`]; [`crate::error`] turns that, or the error, into the exit
//! status.
//!
//! This is the top of the controller: the only place that prints for a
//! person. Nothing below imports from it.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result};

use kiln_protocol::config::{BenchmarkSpec, Limits};
use kiln_protocol::CampaignConfig;

use crate::cli::{Cli, Command, StoreCommand};
use crate::dispatch::calibration::Calibrator;
use crate::dispatch::pool::PoolSettings;
use crate::dispatch::transport::worker_binary;
use crate::error::{BadInput, Outcome};

mod benchmark;
mod check;
mod export;
mod manual;
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
        Command::Sites(args) => sites::run(&args, &mut out),
        Command::Workers(args) => workers::run(&args, &mut out),
        Command::Benchmark(args) => benchmark::run(&args, &mut out),
        Command::Export(args) => export::run(&args, &mut out),
        Command::Rewards(args) => rewards::run(&args, &mut out),
        Command::Report(args) => report::run(&args, &mut out),
        Command::Serve(args) => serve::run(&args, &mut out),
        Command::Completions(args) => manual::completions(&args, &mut out),
        Command::Man => manual::man(&mut out),
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
