//! The command line: every subcommand and flag, and nothing that acts on them
//! (that is [`crate::commands`]).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::export::Table;
use crate::rewards::Target;

/// kiln: distributed simulated-annealing campaigns over compiler and operator decisions.
#[derive(Parser)]
#[command(name = "kiln", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    /// What to do.
    pub command: Command,
}

#[derive(Subcommand)]
pub enum Command {
    /// Check a campaign config and print it normalized, every default spelled out.
    Check(CheckArgs),
    /// Run a campaign, or resume it where it stopped (the same command after a crash).
    Run(RunArgs),
    /// Show a campaign's progress: steps, acceptance, best against the baseline, failures, workers.
    Status(StatusArgs),
    /// Show one stored step in full: decisions changed, outcome with its whole stderr or build log, metrics.
    Show(ShowArgs),
    /// Inspect a store.
    Store {
        #[command(subcommand)]
        command: StoreCommand,
    },
    /// List a benchmark's decision points with the stock decision of each.
    Sites(SitesArgs),
    /// Connect to every worker, deploy kiln-worker where needed, and print a table.
    Workers(WorkersArgs),
    /// Measure one decision file against the benchmark's baseline on one worker.
    Benchmark(BenchmarkArgs),
    /// Export a store's table as CSV (schemas: README.md, "Export schema").
    Export(ExportArgs),
    /// Assign each decision a reward (ridge regression) and write the best decision set.
    Rewards(RewardsArgs),
    /// Plot a campaign (PNG and SVG) with an index.html.
    Report(ReportArgs),
}

#[derive(Subcommand)]
pub enum StoreCommand {
    /// Check a store's integrity and print counts.
    Verify(VerifyArgs),
}

/// The arguments of `kiln check`.
#[derive(Args)]
pub struct CheckArgs {
    /// The campaign config (.sexp).
    pub config: PathBuf,
}

/// The arguments of `kiln run`.
#[derive(Args)]
pub struct RunArgs {
    /// The campaign config (.sexp).
    pub config: PathBuf,
    /// Start a fresh campaign even if the store holds one (the old store is moved aside).
    #[arg(long)]
    pub force_new: bool,
}

/// The arguments of `kiln status`.
#[derive(Args)]
pub struct StatusArgs {
    /// The campaign's store folder.
    pub store: PathBuf,
}

/// The arguments of `kiln sites`.
#[derive(Args)]
pub struct SitesArgs {
    /// The campaign config (.sexp).
    pub config: PathBuf,
    /// The benchmark's name.
    pub benchmark: String,
    /// Also write the stock decisions as a decision file.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
}

/// The arguments of `kiln workers`.
#[derive(Args)]
pub struct WorkersArgs {
    /// The campaign config (.sexp).
    pub config: PathBuf,
}

/// The arguments of `kiln benchmark`.
#[derive(Args)]
pub struct BenchmarkArgs {
    /// The campaign config (.sexp).
    pub config: PathBuf,
    /// The benchmark's name.
    pub benchmark: String,
    /// The decision file (.sexp); sites it leaves out keep their baseline value.
    pub decisions: PathBuf,
    /// The config's worker to measure on (default: a local worker).
    #[arg(long)]
    pub worker: Option<String>,
    /// Measured runs of baseline and candidate (default: the config's policy).
    #[arg(long)]
    pub runs: Option<u32>,
    /// Record the candidate in this store, as experiment manual:BENCHMARK.
    #[arg(long)]
    pub store: Option<PathBuf>,
}

/// The arguments of `kiln export`.
#[derive(Args)]
pub struct ExportArgs {
    /// The campaign's store folder.
    pub store: PathBuf,
    /// The table.
    #[arg(long, value_enum)]
    pub table: Table,
    /// Only this experiment.
    #[arg(long)]
    pub experiment: Option<String>,
    /// The decisions table with one column per site.
    #[arg(long)]
    pub wide: bool,
    /// Write to this file instead of standard output.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
}

/// The arguments of `kiln rewards`.
#[derive(Args)]
pub struct RewardsArgs {
    /// The campaign's store folder.
    pub store: PathBuf,
    /// Only this experiment.
    #[arg(long)]
    pub experiment: Option<String>,
    /// The benefit regressed on the decisions.
    #[arg(long, value_enum, default_value = "log-speedup")]
    pub target: Target,
    /// The ridge penalty.
    #[arg(long, default_value_t = 1.0)]
    pub lambda: f64,
    /// Output folder (default: STORE/rewards).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
}

/// The arguments of `kiln report`.
#[derive(Args)]
pub struct ReportArgs {
    /// The campaign's store folder.
    pub store: PathBuf,
    /// Output folder (default: STORE/report).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
}

/// The arguments of `kiln store verify`.
#[derive(Args)]
pub struct VerifyArgs {
    /// The campaign's store folder.
    pub store: PathBuf,
}

/// The arguments of `kiln show`.
#[derive(Args)]
pub struct ShowArgs {
    /// The campaign's store folder.
    pub store: PathBuf,
    /// The step: EXPERIMENT/CHAIN/STEP, as `kiln export` names it (e.g. `sample-dsp/0/17`).
    pub step: String,
    /// Print the stored record as JSON instead.
    #[arg(long)]
    pub json: bool,
}
