//! The command line: every subcommand and flag, and nothing that acts on them
//! (that is [`crate::commands`]).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::export::{Format, Table};
use crate::logging::Verbosity;
use crate::rewards::Target;

/// kiln: distributed simulated-annealing campaigns over compiler and operator decisions.
#[derive(Parser)]
#[command(name = "kiln", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    /// What to do.
    pub command: Command,
    /// Print errors only: no notes, no progress.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
    /// Say more on stderr: -v what kiln does, -vv its debug log (dependencies' logs stay at
    /// warnings unless RUST_LOG asks for them).
    #[arg(short, long, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,
}

impl Cli {
    /// How much to say on stderr, from `-q` and `-v`.
    pub fn verbosity(&self) -> Verbosity {
        match (self.quiet, self.verbose) {
            (true, _) => Verbosity::Quiet,
            (false, 0) => Verbosity::Normal,
            (false, 1) => Verbosity::Verbose,
            (false, _) => Verbosity::Debug,
        }
    }
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
    /// Benchmark a policy across the config's benchmarks: its decisions against stock,
    /// inlining nothing and the campaign's best step, each benchmark on its own.
    Policy(PolicyArgs),
    /// Export a store's table as CSV, JSON lines or Parquet (schema: `kiln export --schema`).
    Export(ExportArgs),
    /// Assign each decision a reward relative to stock (ridge regression), measure the proposal
    /// against stock and the best step, and write it as best only if it is no worse.
    Rewards(RewardsArgs),
    /// Plot a campaign (PNG and SVG) with an index.html.
    Report(ReportArgs),
    /// Serve a live view of a campaign on localhost, updated every second while it runs.
    Serve(ServeArgs),
    /// Print a shell completion script (e.g. `kiln completions bash > /etc/bash_completion.d/kiln`).
    Completions(CompletionsArgs),
    /// Print kiln's man page (roff; e.g. `kiln man | man -l -`), or write it and one page per
    /// subcommand (the `kiln-run(1)` and others it refers to) into a folder.
    Man(ManArgs),
}

#[derive(Subcommand)]
pub enum StoreCommand {
    /// Check a store's integrity and print counts.
    Verify(VerifyArgs),
    /// Bring a store written by an older kiln to the current layout now (compressed, about a
    /// fifth of the room); `kiln run` and `kiln benchmark --store` do it when they open one.
    Migrate(VerifyArgs),
}

/// The arguments of `kiln check`.
#[derive(Args)]
pub struct CheckArgs {
    /// The campaign config (.sexp).
    pub config: PathBuf,
    /// Print the checked config as JSON instead.
    #[arg(long)]
    pub json: bool,
}

/// The arguments of `kiln run`.
#[derive(Args)]
pub struct RunArgs {
    /// The campaign config (.sexp).
    pub config: PathBuf,
    /// Start a fresh campaign even if the store holds one (the old store is moved aside).
    #[arg(long)]
    pub force_new: bool,
    /// Seconds between progress lines on stderr when it is not a terminal (a log, a
    /// scheduler's output file); kiln.log gets them too.
    #[arg(long, value_name = "SECS", default_value_t = 10.0, value_parser = positive_seconds)]
    pub progress_every: f64,
}

/// A positive number of seconds.
fn positive_seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if s > 0.0 && s.is_finite() => Ok(s),
        _ => Err(format!("'{text}' is not a positive number of seconds")),
    }
}

/// The arguments of `kiln status`.
#[derive(Args)]
pub struct StatusArgs {
    /// The campaign's store folder.
    pub store: PathBuf,
    /// Print the report as JSON (the same fields as status.json).
    #[arg(long)]
    pub json: bool,
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
    /// Print the decision points as JSON.
    #[arg(long)]
    pub json: bool,
    /// Discover again even where a discovery is kept, and keep the new one in its place
    /// (features a newer kiln records; experiments already in the store keep theirs).
    #[arg(long)]
    pub rediscover: bool,
}

/// The arguments of `kiln workers`.
#[derive(Args)]
pub struct WorkersArgs {
    /// The campaign config (.sexp).
    pub config: PathBuf,
    /// Print the workers as JSON.
    #[arg(long)]
    pub json: bool,
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
    /// Print the comparison as JSON, with both results in full.
    #[arg(long)]
    pub json: bool,
}

/// The arguments of `kiln policy`. Flags may stand anywhere before `--`; only what follows
/// `--` is the policy command and its arguments.
#[derive(Args)]
#[command(override_usage = POLICY_USAGE)]
pub struct PolicyArgs {
    /// The campaign config (.sexp): its llvm-inline benchmarks, workers, objective and runs.
    pub config: PathBuf,
    /// A built-in policy: `stock` (the stock compiler's decisions) or `nothing` (inline no site).
    #[arg(value_name = "stock|nothing", value_parser = builtin_policy,
          required_unless_present = "command", conflicts_with = "command")]
    pub builtin: Option<BuiltinPolicy>,
    /// After `--`: a command that reads a benchmark's sites as JSON lines (the `sites` table's
    /// columns) on stdin and writes a decision file to stdout; every word after `--`, flags too, is its own.
    #[arg(last = true, value_name = "COMMAND ARGS")]
    pub command: Vec<String>,
    /// Only these benchmarks (repeatable; default: every llvm-inline benchmark).
    #[arg(long = "benchmark")]
    pub benchmarks: Vec<String>,
    /// The store that holds the campaign's discoveries and best steps, and gets the
    /// measurements (as experiments manual:BENCHMARK; default: the config's store).
    #[arg(long)]
    pub store: Option<PathBuf>,
    /// The config's worker to measure on (default: its first local worker).
    #[arg(long)]
    pub worker: Option<String>,
    /// Seconds the policy command may take per benchmark.
    #[arg(long, default_value_t = 300.0)]
    pub timeout_s: f64,
    /// Also write the table as CSV to FILE.
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Print the rows as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `kiln policy`'s usage: the three ways to name a policy, flags anywhere before `--`.
const POLICY_USAGE: &str = "kiln policy [OPTIONS] <CONFIG> stock|nothing|-- <COMMAND> [ARGS]...";

/// A policy kiln has built in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuiltinPolicy {
    /// The stock compiler's decisions.
    Stock,
    /// Inline no site.
    Nothing,
}

/// Reads a built-in policy's name; any other word is bad usage naming the three forms (a
/// command must follow `--`, so a mistyped name never runs as a program).
fn builtin_policy(word: &str) -> Result<BuiltinPolicy, String> {
    match word {
        "stock" => Ok(BuiltinPolicy::Stock),
        "nothing" => Ok(BuiltinPolicy::Nothing),
        _ => Err(
            "a policy is `stock`, `nothing` or `-- COMMAND ARGS...` (a command after `--`)".into(),
        ),
    }
}

/// The arguments of `kiln export`.
#[derive(Args)]
pub struct ExportArgs {
    /// The campaign's store folder.
    #[arg(required_unless_present = "schema")]
    pub store: Option<PathBuf>,
    /// The table.
    #[arg(long, value_enum, required_unless_present_any = ["all", "schema"])]
    pub table: Option<Table>,
    /// Every table, each to FOLDER/TABLE.EXT in the folder `--output` names.
    #[arg(long, conflicts_with_all = ["table", "wide"], requires = "output")]
    pub all: bool,
    /// Only this experiment.
    #[arg(long)]
    pub experiment: Option<String>,
    /// The decisions table with one column per site.
    #[arg(long)]
    pub wide: bool,
    /// The format: csv, jsonl (one JSON object per line) or parquet (binary: to a file, or a pipe).
    #[arg(long, value_enum, default_value = "csv")]
    pub format: Format,
    /// Leave out the columns whose every cell is the same.
    #[arg(long)]
    pub drop_constant: bool,
    /// Print every table's columns (type and meaning) and the schema version, not a table.
    #[arg(long, conflicts_with_all = ["store", "table", "all"])]
    pub schema: bool,
    /// With `--schema`: as JSON.
    #[arg(long, requires = "schema")]
    pub json: bool,
    /// Write to this file (with `--all`: this folder) instead of standard output.
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
    /// The ridge penalty (the intercept is not penalised).
    #[arg(long, default_value_t = 1.0)]
    pub lambda: f64,
    /// Steps a value, and its site's stock value, must each be seen in to get a reward.
    #[arg(long, value_name = "N", default_value_t = 3)]
    pub min_count: u64,
    /// Folds of the cross-validation.
    #[arg(long, value_name = "K", default_value_t = 5)]
    pub folds: u32,
    /// The cross-validated R² below which the model is not trusted (and not verified).
    #[arg(
        long,
        value_name = "R2",
        default_value_t = 0.5,
        allow_negative_numbers = true
    )]
    pub min_r2: f64,
    /// Do not measure the proposal: it is written as unverified, never as the best decisions.
    #[arg(long)]
    pub no_verify: bool,
    /// The campaign config to measure with (default: the one the store keeps).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// The config's worker to measure on (default: the one that measured the best step).
    #[arg(long)]
    pub worker: Option<String>,
    /// Output folder (default: STORE/rewards).
    #[arg(short, long)]
    pub output: Option<PathBuf>,
    /// Print the rewards and the verdict as JSON.
    #[arg(long)]
    pub json: bool,
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

/// The arguments of `kiln serve`.
#[derive(Args)]
pub struct ServeArgs {
    /// The campaign's store folder (never locked: a campaign may start or run beside it).
    pub store: PathBuf,
    /// The port (0: any free port, printed on start).
    #[arg(long, default_value_t = 8470)]
    pub port: u16,
    /// The address to listen on (another than localhost exposes the campaign to the network).
    #[arg(long, default_value = "127.0.0.1")]
    pub bind: std::net::IpAddr,
}

/// The arguments of `kiln store verify` and `kiln store migrate`.
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

/// The arguments of `kiln man`.
#[derive(Args)]
pub struct ManArgs {
    /// Write kiln.1 and a page per subcommand (kiln-run.1, kiln-store-verify.1, …) into DIR
    /// instead of printing kiln.1 (e.g. `kiln man --dir /usr/local/share/man/man1`).
    #[arg(long, value_name = "DIR")]
    pub dir: Option<std::path::PathBuf>,
}

/// The arguments of `kiln completions`.
#[derive(Args)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}
