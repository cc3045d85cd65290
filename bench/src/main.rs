//! `kiln-bench`: the benchmark harness behind `scripts/bench`.
//!
//! `kiln-bench suite` runs every comparison side by side and writes
//! `REPORT.md` and `raw.csv`; the other subcommands are its helpers and can
//! be run by hand.

use std::path::PathBuf;
use std::process::{Command, ExitCode};

use anyhow::Result;
use clap::{Parser, Subcommand};

mod kspans;
mod procs;
mod report;
mod size;
mod suite;
mod synth;

#[derive(Parser)]
#[command(name = "kiln-bench", about = "kiln's benchmark harness")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run every comparison and write REPORT.md and raw.csv.
    Suite(suite::Options),
    /// Run a command and print, as JSON, its wall time, its own CPU time, the
    /// CPU time of its whole process tree and its peak RSS.
    Account {
        /// Kill the command after this many seconds.
        #[arg(long, default_value_t = 900.0)]
        timeout: f64,
        /// Standard output of the command goes here (default: inherited).
        #[arg(long)]
        stdout: Option<PathBuf>,
        /// Standard error of the command goes here (default: inherited).
        #[arg(long)]
        stderr: Option<PathBuf>,
        /// The command.
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// Build a synthetic store of decided steps through the Store API.
    StoreBuild {
        /// The store folder.
        dir: PathBuf,
        /// Steps in all.
        #[arg(long)]
        steps: u64,
        /// Chains they are spread over.
        #[arg(long, default_value_t = 4)]
        chains: u32,
    },
    /// Copy a store as kiln wrote stores before export rows (layout 1, which older kilns read).
    StoreLayout1 {
        /// The store folder (not in use).
        from: PathBuf,
        /// The copy's folder (must not exist).
        to: PathBuf,
    },
    /// Print the bytes a decided step of a real store takes in the current layout: its steps
    /// written again, one a batch as a campaign decides them, into fresh stores in WORK.
    StoreSize {
        /// The store whose steps are measured (not in use).
        store: PathBuf,
        /// Only the experiments whose name holds this.
        #[arg(long, default_value = "")]
        only: String,
        /// Times each step is written (each time after the last in its chain), for long chains.
        #[arg(long, default_value_t = 20)]
        copies: u32,
        /// Where the fresh stores go (must not hold them yet).
        #[arg(long)]
        work: PathBuf,
    },
    /// Persist steps one by one into a fresh store and print latency percentiles.
    StoreLatency {
        /// The store folder (must not exist).
        dir: PathBuf,
        /// Steps.
        #[arg(long, default_value_t = 2000)]
        steps: u32,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Cmd::Suite(options) => suite::run(options),
        Cmd::Account {
            timeout,
            stdout,
            stderr,
            command,
        } => account(timeout, stdout, stderr, command),
        Cmd::StoreBuild { dir, steps, chains } => synth::build(&dir, steps, chains).map(|b| {
            println!(
                "{} steps in {:.1} s ({:.0} steps/s); one step record is {} bytes of JSON, its export row {} bytes; the database takes {:.0} bytes a step",
                b.steps,
                b.seconds,
                b.steps as f64 / b.seconds,
                b.record_bytes,
                b.row_bytes,
                b.db_bytes_per_step
            );
        }),
        Cmd::StoreLayout1 { from, to } => synth::copy_as_layout_1(&from, &to).map(|keys| {
            println!("{keys} keys copied into {} (layout 1)", to.display());
        }),
        Cmd::StoreSize {
            store,
            only,
            copies,
            work,
        } => size::measure(&store, &only, copies, &work).map(|s| {
            println!(
                "{} steps written: {:.0} bytes a step in the store ({:.0} written a thousand a batch)",
                s.steps, s.bytes_per_step, s.packed_bytes_per_step
            );
        }),
        Cmd::StoreLatency { dir, steps } => synth::latency(&dir, steps).map(|l| {
            for (name, v) in [("put_result", &l.put_result), ("decide", &l.decide)] {
                println!(
                    "{name}: p50 {:.3} ms, p99 {:.3} ms",
                    report::percentile(v, 50.0) * 1e3,
                    report::percentile(v, 99.0) * 1e3
                );
            }
        }),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kiln-bench: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn account(
    timeout: f64,
    stdout: Option<PathBuf>,
    stderr: Option<PathBuf>,
    command: Vec<String>,
) -> Result<()> {
    let mut cmd = Command::new(&command[0]);
    cmd.args(&command[1..]);
    if let Some(p) = stdout {
        cmd.stdout(std::fs::File::create(p)?);
    }
    if let Some(p) = stderr {
        cmd.stderr(std::fs::File::create(p)?);
    }
    let a = procs::account(cmd, timeout)?;
    println!("{}", serde_json::to_string(&a)?);
    Ok(())
}
