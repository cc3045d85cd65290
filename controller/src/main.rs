//! `kiln`: the campaign controller's command line.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};

use kiln_controller::{campaign, commands, logging, status};
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
