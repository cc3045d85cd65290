//! `kiln`: the campaign controller's command line.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

use kiln_controller::store::Store;
use kiln_controller::{campaign, commands, export, logging, manual, report, rewards, status};
use kiln_protocol::CampaignConfig;

/// kiln: distributed simulated-annealing campaigns over compiler and operator decisions.
#[derive(Parser)]
#[command(name = "kiln", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Check a campaign config and print it normalized, every default spelled out.
    Check {
        /// The campaign config (.sexp).
        config: PathBuf,
    },
    /// Run a campaign, or resume it where it stopped (the same command after a crash).
    Run {
        /// The campaign config (.sexp).
        config: PathBuf,
        /// Start a fresh campaign even if the store holds one (the old store is moved aside).
        #[arg(long)]
        force_new: bool,
    },
    /// Show a campaign's progress: steps, acceptance, best against the baseline, failures, workers.
    Status {
        /// The campaign's store folder.
        store: PathBuf,
    },
    /// Inspect a store.
    Store {
        #[command(subcommand)]
        command: StoreCommand,
    },
    /// List a benchmark's decision points with the stock decision of each.
    Sites {
        /// The campaign config (.sexp).
        config: PathBuf,
        /// The benchmark's name.
        benchmark: String,
        /// Also write the stock decisions as a decision file.
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Connect to every worker, deploy kiln-worker where needed, and print a table.
    Workers {
        /// The campaign config (.sexp).
        config: PathBuf,
    },
    /// Measure one decision file against the benchmark's baseline on one worker.
    Benchmark {
        /// The campaign config (.sexp).
        config: PathBuf,
        /// The benchmark's name.
        benchmark: String,
        /// The decision file (.sexp); sites it leaves out keep their baseline value.
        decisions: PathBuf,
        /// The config's worker to measure on (default: a local worker).
        #[arg(long)]
        worker: Option<String>,
        /// Measured runs of baseline and candidate (default: the config's policy).
        #[arg(long)]
        runs: Option<u32>,
        /// Record the candidate in this store, as experiment manual:BENCHMARK.
        #[arg(long)]
        store: Option<PathBuf>,
    },
    /// Export a store's table as CSV (schemas: README.md, "Export schema").
    Export {
        /// The campaign's store folder.
        store: PathBuf,
        /// The table.
        #[arg(long, value_enum)]
        table: export::Table,
        /// Only this experiment.
        #[arg(long)]
        experiment: Option<String>,
        /// The decisions table with one column per site.
        #[arg(long)]
        wide: bool,
        /// Write to this file instead of standard output.
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Assign each decision a reward (ridge regression) and write the best decision set.
    Rewards {
        /// The campaign's store folder.
        store: PathBuf,
        /// Only this experiment.
        #[arg(long)]
        experiment: Option<String>,
        /// The benefit regressed on the decisions.
        #[arg(long, value_enum, default_value = "log-speedup")]
        target: rewards::Target,
        /// The ridge penalty.
        #[arg(long, default_value_t = 1.0)]
        lambda: f64,
        /// Output folder (default: STORE/rewards).
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
    /// Plot a campaign (PNG and SVG) with an index.html.
    Report {
        /// The campaign's store folder.
        store: PathBuf,
        /// Output folder (default: STORE/report).
        #[arg(short, long)]
        output: Option<PathBuf>,
    },
}

#[derive(Subcommand)]
enum StoreCommand {
    /// Check a store's integrity and print counts.
    Verify {
        /// The campaign's store folder.
        store: PathBuf,
    },
}

fn main() -> ExitCode {
    logging::init();
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("kiln: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn read_config(path: &Path) -> Result<CampaignConfig> {
    // The parse error already names file, line and column.
    CampaignConfig::read(path).map_err(anyhow::Error::msg)
}

/// Opens a store that must already exist (reading commands never create one).
fn open_existing(dir: &Path) -> Result<Store> {
    if !dir.join("db").exists() {
        anyhow::bail!("{} is not a kiln store (no db folder)", dir.display());
    }
    Store::open(dir)
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

fn run(cli: Cli) -> Result<ExitCode> {
    match cli.command {
        Command::Check { config } => {
            let c = read_config(&config)?;
            print!("{}", c.to_text());
            Ok(ExitCode::SUCCESS)
        }
        Command::Run { config, force_new } => {
            let c = read_config(&config)?;
            let options = campaign::RunOptions {
                worker_binary: commands::worker_binary()?,
                force_new,
            };
            let dir = runtime()?.block_on(campaign::run(c.clone(), options))?;
            print!("{}", commands::final_summary(&c, &dir)?);
            Ok(ExitCode::SUCCESS)
        }
        Command::Status { store } => {
            let (report, note) = status::load(&store)?;
            if let Some(note) = note {
                println!("({note})");
            }
            print!("{}", status::render(&report));
            Ok(ExitCode::SUCCESS)
        }
        Command::Store {
            command: StoreCommand::Verify { store },
        } => {
            let report = commands::verify_store(&store)?;
            print!("{}", report.text);
            Ok(if report.problems == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        Command::Sites {
            config,
            benchmark,
            output,
        } => {
            let c = read_config(&config)?;
            let text = runtime()?.block_on(commands::sites(&c, &benchmark, output.as_deref()))?;
            print!("{text}");
            Ok(ExitCode::SUCCESS)
        }
        Command::Benchmark {
            config,
            benchmark,
            decisions,
            worker,
            runs,
            store,
        } => {
            let c = read_config(&config)?;
            let options = manual::BenchmarkOptions {
                worker,
                runs,
                store,
            };
            let report =
                runtime()?.block_on(manual::benchmark(&c, &benchmark, &decisions, &options))?;
            print!("{}", report.text);
            Ok(if report.ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        Command::Export {
            store,
            table,
            experiment,
            wide,
            output,
        } => {
            let store = open_existing(&store)?;
            let options = export::ExportOptions {
                table,
                experiment: experiment.as_deref(),
                wide,
            };
            match output {
                Some(path) => {
                    let file = std::fs::File::create(&path)
                        .with_context(|| format!("cannot write {}", path.display()))?;
                    let rows = export::export(&store, options, std::io::BufWriter::new(file))
                        .with_context(|| format!("cannot export to {}", path.display()))?;
                    eprintln!("kiln: {rows} rows written to {}", path.display());
                }
                None => {
                    export::export(&store, options, std::io::stdout().lock())?;
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Rewards {
            store: dir,
            experiment,
            target,
            lambda,
            output,
        } => {
            let store = open_existing(&dir)?;
            let output = output.unwrap_or_else(|| dir.join("rewards"));
            let options = rewards::RewardOptions { target, lambda };
            print!(
                "{}",
                rewards::run(&store, experiment.as_deref(), &options, &output)?
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Report { store: dir, output } => {
            let store = open_existing(&dir)?;
            let output = output.unwrap_or_else(|| dir.join("report"));
            let files = report::report(&store, &output)?;
            println!(
                "{} files written; open {}",
                files.len(),
                output.join("index.html").display()
            );
            Ok(ExitCode::SUCCESS)
        }
        Command::Workers { config } => {
            let c = read_config(&config)?;
            let (text, all_ok) = runtime()?.block_on(commands::workers(&c))?;
            print!("{text}");
            Ok(if all_ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
    }
}
