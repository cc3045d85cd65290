//! `kiln run`: a campaign run (or resumed) to its end, its steps table
//! written beside the store, and a summary of what it found.

use std::fmt::Write as _;
use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};

use kiln_protocol::config::{Experiment, Start};
use kiln_protocol::CampaignConfig;

use crate::atomic::Staged;
use crate::campaign::status::{self, best_of};
use crate::campaign::{self, RunOptions};
use crate::cli::RunArgs;
use crate::dispatch::transport::worker_binary;
use crate::error::Outcome;
use crate::export::{self, ExportOptions, Table};
use crate::logging;
use crate::store::time_ratio;
use crate::store::{layout, ChainState, ExperimentInfo, Store};
use crate::text::{escape_controls, format_measure, format_ratio, TIME_RATIO};

pub(super) fn run(args: &RunArgs, out: &mut dyn Write) -> Result<Outcome> {
    let config = super::check::checked(&args.config)?;
    let options = RunOptions {
        worker_binary: worker_binary()?,
        progress_every: std::time::Duration::from_secs_f64(args.progress_every),
    };
    let store = campaign::open_store(&config, args.force_new)?;
    let dir = store.dir().to_path_buf();
    let ran = super::runtime()?.block_on(campaign::run(config.clone(), store, options));
    let ended = summarise(&config, &dir, ran.as_ref().err());
    // The campaign's own error first (an interrupt exits 130), then the summary's.
    ran?;
    let (summary, outcome) = ended?;
    // A stopped chain's reason quotes the benchmark's stderr: shown, never obeyed.
    write!(out, "{}", escape_controls(&summary))?;
    Ok(outcome)
}

/// The summary of a campaign that finished, or stopped on `error`, also written to its log;
/// a finished one's steps table beside its store.
fn summarise(
    config: &CampaignConfig,
    dir: &Path,
    error: Option<&anyhow::Error>,
) -> Result<(String, Outcome)> {
    let store = Store::open_existing(dir)?;
    let ending = match error {
        None => {
            write_steps_csv(&store)?;
            "finished".to_string()
        }
        Some(e) => format!("stopped: {e:#}"),
    };
    let (summary, outcome) = final_summary(config, &store, &ending)?;
    log_summary(&store, &summary)?;
    // Still holding the store: no writer can open it between the campaign's end and this.
    status::seal(&store)?;
    Ok((summary, outcome))
}

/// Ends the campaign's kiln.log with its summary and the `kiln status` table of where it
/// stopped, so that one who reads the log (`tail -f` over SSH) knows it ended, and how.
fn log_summary(store: &Store, summary: &str) -> Result<()> {
    let report = status::from_store(store)?;
    let _log = logging::to_file(&layout::log(store.dir()))?;
    let block = format!("{summary}\n{}", super::status::render(&report, false));
    for line in block.lines().filter(|l| !l.trim().is_empty()) {
        logging::record(line);
    }
    Ok(())
}

/// Exports the steps table beside the store, so a finished campaign has its dataset at hand.
fn write_steps_csv(store: &Store) -> Result<()> {
    let path = layout::steps_csv(store.dir());
    let mut file = Staged::create(&path)?;
    export::export(store, ExportOptions::new(Table::Steps), &mut file)
        .with_context(|| format!("cannot write {}", path.display()))?;
    file.commit()
}

/// What `kiln run` prints at the end: best against the references, and where
/// everything is; and how the campaign ends: a chain stopped on failures or an
/// experiment that could not be prepared is a failure, as a script should
/// learn, and bad input when its sources were at fault.
fn final_summary(
    config: &CampaignConfig,
    store: &Store,
    ending: &str,
) -> Result<(String, Outcome)> {
    let mut out = String::new();
    let mut any_stopped = false;
    let mut bad_input = false;
    let metric = config.objective.metric;
    let unit = metric.unit();
    let _ = writeln!(
        out,
        "\ncampaign {} {ending}; objective: {} of {}; {TIME_RATIO} = objective / baseline (below 1 is faster)",
        config.name,
        config.objective.statistic.name(),
        metric,
    );
    let failed = store.failed_experiments()?;
    for e in &config.experiments {
        if let Some(failed) = failed.get(&e.name) {
            any_stopped = true;
            bad_input |= failed.bad_input;
            let _ = writeln!(
                out,
                "\nexperiment {} (benchmark {}): not prepared: {}",
                e.name, e.benchmark, failed.why
            );
        }
        let Some(info) = store.experiment(&e.name)? else {
            continue;
        };
        write_starts(&mut out, e, &info, unit);
        any_stopped |= write_chains(&mut out, store, e, &info, unit)?;
    }
    write_places(&mut out, store.dir());
    let outcome = match (bad_input, any_stopped) {
        (true, _) => Outcome::BadInput,
        (false, true) => Outcome::Failure,
        (false, false) => Outcome::Success,
    };
    Ok((out, outcome))
}

/// An experiment's heading, its baseline and its references against the baseline.
fn write_starts(out: &mut String, e: &Experiment, info: &ExperimentInfo, unit: &str) {
    let baseline = info.baseline.objective().unwrap_or(f64::NAN);
    let _ = writeln!(out, "\nexperiment {} (benchmark {}):", e.name, e.benchmark);
    let _ = writeln!(
        out,
        "  {:<28} {:>12}",
        match e.baseline {
            None => "stock decisions (baseline)",
            Some(Start::File(_)) => "decision file (baseline)",
            Some(Start::Random { .. }) => "random start (baseline)",
        },
        format_measure(baseline, unit)
    );
    for (name, r) in &info.references {
        let v = r.objective().unwrap_or(f64::NAN);
        let _ = writeln!(
            out,
            "  {:<28} {:>12}  {TIME_RATIO} {}",
            format!("{name} (reference)"),
            format_measure(v, unit),
            format_ratio(time_ratio(v, baseline))
        );
    }
}

/// Each stored chain of an experiment: its best, why it stopped, and its best file;
/// whether any chain stopped.
fn write_chains(
    out: &mut String,
    store: &Store,
    e: &Experiment,
    info: &ExperimentInfo,
    unit: &str,
) -> Result<bool> {
    let baseline = info.baseline.objective().unwrap_or(f64::NAN);
    // A screening chain never moves: what it leaves is its effects, not a best.
    let screening = e.search.screens();
    let mut any_stopped = false;
    for c in 0..e.chains {
        let Some(state) = store.chain_view(&e.name, c)? else {
            continue;
        };
        let line = match screening {
            true => effects_line(&state, c, store.dir()),
            false => best_line(&state, c, info, baseline, unit),
        };
        let _ = writeln!(out, "{line}");
        if let Some(why) = &state.ended {
            let _ = writeln!(
                out,
                "  {:<28} ended at step {}: {why}",
                "", state.next_decide
            );
        }
        if let Some(why) = &state.stopped {
            any_stopped = true;
            let _ = writeln!(
                out,
                "  {:<28} stopped at step {}: {why}",
                "", state.next_decide
            );
        }
        if !screening {
            let best = layout::best_file(store.dir(), &e.name, c);
            let _ = writeln!(out, "  {:<28} {}", "", best.display());
        }
    }
    Ok(any_stopped)
}

/// Screening chain `c`'s effects, and the command that lists them.
fn effects_line(state: &ChainState, c: u32, store_dir: &Path) -> String {
    format!(
        "  {:<28} {}; `kiln export {} --table effects` lists them",
        format!("effects of chain {c}"),
        state.effect_count(),
        store_dir.display()
    )
}

/// Chain `c`'s best against the baseline, and against inlining nothing where that
/// reference was measured.
fn best_line(
    state: &ChainState,
    c: u32,
    info: &ExperimentInfo,
    baseline: f64,
    unit: &str,
) -> String {
    // The best as every command means it: a step below the baseline, or none.
    let best = best_of(state, baseline);
    let label = format!("best of chain {c}");
    let mut line = if best < baseline {
        format!(
            "  {label:<28} {:>12}  {TIME_RATIO} {}",
            format_measure(best, unit),
            format_ratio(time_ratio(best, baseline))
        )
    } else {
        format!("  {label:<28} no step beat stock: its best file holds the stock decisions")
    };
    if let Some(none) = info.references.get("no-inline").and_then(|r| r.objective()) {
        if best < baseline {
            let _ = write!(
                line,
                ", {} against inlining nothing",
                format_ratio(time_ratio(best, none))
            );
        }
    }
    line
}

/// Where the campaign's store, steps table and status are.
fn write_places(out: &mut String, store_dir: &Path) {
    let csv = layout::steps_csv(store_dir);
    let _ = writeln!(out, "\nstore:       {}", store_dir.display());
    if csv.exists() {
        let _ = writeln!(out, "steps CSV:   {}", csv.display());
    }
    let _ = writeln!(out, "status:      kiln status {}", store_dir.display());
}
