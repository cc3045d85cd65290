//! `kiln status`: where a campaign stands, as a table.

use std::fmt::Write as _;
use std::io::Write;

use anyhow::Result;

use crate::campaign::status::{self, Report};
use crate::cli::StatusArgs;
use crate::dispatch::calibration::cells;
use crate::dispatch::slurm::job_cell;
use crate::error::Outcome;
use crate::text::{
    best_cells, escape_controls, format_acceptance, format_secs, format_value, table, TIME_RATIO,
};

pub(super) fn run(args: &StatusArgs, out: &mut dyn Write) -> Result<Outcome> {
    let (report, note) = status::load(&args.store)?;
    if args.json {
        serde_json::to_writer_pretty(&mut *out, &report)?;
        writeln!(out)?;
        return Ok(Outcome::Success);
    }
    // A snapshot comes from the controller holding the store: it runs,
    // unless the snapshot says the campaign finished.
    let live = note.is_some() && !report.finished;
    if let Some(note) = note {
        writeln!(out, "({note})")?;
    }
    // Failures quote benchmarks' stderr: shown, never obeyed by the terminal.
    write!(out, "{}", escape_controls(&render(&report, live)))?;
    Ok(Outcome::Success)
}

/// One line per experiment: its chains' steps, best and failures together.
fn experiment_totals(report: &Report) -> String {
    let rows = report.experiments().into_iter().map(|name| {
        let chains: Vec<_> = report
            .chains
            .iter()
            .filter(|r| r.experiment == name)
            .collect();
        let done: u32 = chains.iter().map(|r| r.done).sum();
        let total: u32 = chains.iter().map(|r| r.total).sum();
        let best = chains.iter().map(|r| r.best).fold(f64::INFINITY, f64::min);
        let baseline = chains.first().map_or(f64::NAN, |r| r.baseline);
        let failed: u32 = chains.iter().flat_map(|r| r.failures.values()).sum();
        let [best, ratio] = best_cells(best, baseline, done, &report.unit);
        vec![
            name.to_string(),
            chains.len().to_string(),
            format!("{done}/{total}"),
            best,
            ratio,
            failed.to_string(),
        ]
    });
    table(
        &[
            "experiment",
            "chains",
            "steps",
            "best",
            TIME_RATIO,
            "failed steps",
        ],
        &[1, 2, 3, 4, 5],
        rows,
    )
}

/// The report as tables; ETAs only for a campaign that runs.
pub(super) fn render(report: &Report, live: bool) -> String {
    let mut out = String::new();
    let state = if live {
        match (report.eta(), report.preparing) {
            (Some(left), 0) => format!(
                "running: {}; about {} left",
                report.phase,
                format_secs(left)
            ),
            // Experiments still preparing have no chain the estimate could count.
            (Some(left), _) => format!(
                "running: {}; about {} left for the chains started",
                report.phase,
                format_secs(left)
            ),
            (None, _) => format!("running: {}", report.phase),
        }
    } else {
        report.phase.clone()
    };
    let _ = writeln!(out, "campaign {} ({state})", report.campaign);
    match report.chains.is_empty() {
        true => out.push_str("no chain has started yet\n"),
        false => out.push_str(&chain_table(report, live)),
    }
    if report.chains.len() > report.experiments().len() {
        out.push('\n');
        out.push_str(&experiment_totals(report));
    }
    out.push_str(&notes(report));
    if !report.workers.is_empty() {
        out.push('\n');
        out.push_str(&worker_table(report));
    }
    out
}

/// One row per chain: steps, acceptance, best, temperature, coverage, time, failures.
fn chain_table(report: &Report, live: bool) -> String {
    let rows = report.chains.iter().map(|r| {
        let elapsed = (r.updated_ms.saturating_sub(r.started_ms)) as f64 / 1000.0;
        let failures = if r.failures.is_empty() {
            "-".to_string()
        } else {
            r.failures
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let eta = r.eta().filter(|_| live).map_or("-".into(), format_secs);
        let [best, ratio] = best_cells(r.best, r.baseline, r.done, &report.unit);
        vec![
            r.experiment.clone(),
            r.chain.to_string(),
            format!("{}/{}", r.done, r.total),
            // A screening chain accepts nothing and has no temperature: what it measured.
            match (r.effects, r.proposals) {
                (Some(effects), _) => effects.to_string(),
                (None, Some(p)) => format_acceptance(r.accepted, p),
                (None, None) => r.accepted.to_string(),
            },
            best,
            ratio,
            match r.effects {
                Some(_) => "-".to_string(),
                None => format!("{:.3e}", r.temperature),
            },
            format!(
                "{}/{} {:.0}%",
                r.coverage.varied,
                r.coverage.movable,
                100.0 * r.coverage.share()
            ),
            r.coverage.sets.to_string(),
            format_secs(elapsed),
            eta,
            failures,
        ]
    });
    table(
        &[
            "experiment",
            "chain",
            "steps",
            "accepted",
            "best",
            TIME_RATIO,
            "temp",
            "varied",
            "sets",
            "elapsed",
            "eta",
            "failures",
        ],
        &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
        rows,
    )
}

/// What failed or stopped, and what racing saved: a line each.
fn notes(report: &Report) -> String {
    let mut out = String::new();
    for (experiment, why) in &report.failed {
        let _ = writeln!(out, "experiment {experiment} not prepared: {why}");
    }
    for r in report.chains.iter().filter(|r| r.last_failure.is_some()) {
        let _ = writeln!(
            out,
            "last failure of {}/chain {}: {}",
            r.experiment,
            r.chain,
            r.last_failure.as_deref().unwrap_or_default()
        );
    }
    // Chains that ended before their budget: stopped (on failures) or ended (as told).
    for r in &report.chains {
        for (verb, why) in [("stopped", &r.stopped), ("ended", &r.ended)] {
            if let Some(why) = why {
                let _ = writeln!(
                    out,
                    "{}/chain {} {verb} at step {}: {why}",
                    r.experiment, r.chain, r.done
                );
            }
        }
    }
    for r in report.chains.iter().filter(|r| r.raced.cut_short > 0) {
        let _ = writeln!(
            out,
            "{}/chain {}: {} steps cut short by racing, at most {} runs saved",
            r.experiment, r.chain, r.raced.cut_short, r.raced.runs_saved
        );
    }
    out
}

/// One row per worker: steps, steps per hour, busy share, losses, calibration, state.
fn worker_table(report: &Report) -> String {
    // Throughput over the campaign's span so far (first chain start to last decision).
    let start = report
        .chains
        .iter()
        .map(|r| r.started_ms)
        .min()
        .unwrap_or(0);
    let end = report
        .chains
        .iter()
        .map(|r| r.updated_ms)
        .max()
        .unwrap_or(start);
    // Steps an hour, as the report's throughput plot says it: a week's
    // campaign reads in hours.
    let hours = end.saturating_sub(start) as f64 / 3_600_000.0;
    let rows = report.workers.iter().map(|w| {
        let rate = if hours > 0.0 {
            format_value(w.steps as f64 / hours)
        } else {
            "-".into()
        };
        vec![
            w.name.clone(),
            w.steps.to_string(),
            rate,
            w.utilisation
                .map_or("-".into(), |u| format!("{:.0}%", 100.0 * u)),
            w.losses.to_string(),
            cells(&w.calibration),
            job_cell(w.slurm_job.as_ref()),
            w.state.clone(),
        ]
    });
    table(
        &[
            "worker",
            "steps",
            "steps/h",
            "busy",
            "losses",
            "calibration ms",
            "slurm job",
            "state",
        ],
        &[1, 2, 3, 4],
        rows,
    )
}
