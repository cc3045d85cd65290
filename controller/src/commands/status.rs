//! `kiln status`: where a campaign stands, as a table.

use std::fmt::Write as _;
use std::io::Write;

use anyhow::Result;

use crate::campaign::status::{self, Report};
use crate::cli::StatusArgs;
use crate::dispatch::calibration::cells;
use crate::error::Outcome;
use crate::text::{format_secs, format_value};

pub(super) fn run(args: &StatusArgs, out: &mut dyn Write) -> Result<Outcome> {
    let (report, note) = status::load(&args.store)?;
    if let Some(note) = note {
        writeln!(out, "({note})")?;
    }
    write!(out, "{}", render(&report))?;
    Ok(Outcome::Success)
}

/// The report as a table.
fn render(report: &Report) -> String {
    let mut out = String::new();
    let state = if report.finished {
        "finished"
    } else {
        "running or stopped"
    };
    let _ = writeln!(out, "campaign {} ({state})", report.campaign);
    let _ = writeln!(
        out,
        "{:<20} {:>5} {:>11} {:>9} {:>14} {:>9} {:>10} {:>13} {:>6} {:>9} {:>9}  failures",
        "experiment",
        "chain",
        "steps",
        "accepted",
        "best",
        "vs base",
        "temp",
        "varied",
        "sets",
        "elapsed",
        "eta"
    );
    for r in &report.chains {
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
        let accept_rate = if r.done > 0 {
            format!(
                "{} ({:.0}%)",
                r.accepted,
                100.0 * f64::from(r.accepted) / f64::from(r.done)
            )
        } else {
            "0".into()
        };
        let _ = writeln!(
            out,
            "{:<20} {:>5} {:>11} {:>9} {:>14} {:>9} {:>10.5} {:>13} {:>6} {:>9} {:>9}  {}",
            r.experiment,
            r.chain,
            format!("{}/{}", r.done, r.total),
            accept_rate,
            format_value(r.best),
            format!("{:.4}", r.best / r.baseline),
            r.temperature,
            format!(
                "{}/{} {:.0}%",
                r.coverage.varied,
                r.coverage.movable,
                100.0 * r.coverage.share()
            ),
            r.coverage.sets,
            format_secs(elapsed),
            r.eta_s().map_or("-".into(), format_secs),
            failures
        );
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
    for r in report.chains.iter().filter(|r| r.stopped.is_some()) {
        let _ = writeln!(
            out,
            "{}/chain {} stopped at step {}: {}",
            r.experiment,
            r.chain,
            r.done,
            r.stopped.as_deref().unwrap_or_default()
        );
    }
    if !report.workers.is_empty() {
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
        let minutes = end.saturating_sub(start) as f64 / 60_000.0;
        let _ = writeln!(
            out,
            "\n{:<20} {:>8} {:>10} {:>7} {:<16}  state",
            "worker", "steps", "steps/min", "losses", "calibration ms"
        );
        for w in &report.workers {
            let rate = if minutes > 0.0 {
                format!("{:.1}", w.steps as f64 / minutes)
            } else {
                "-".into()
            };
            let _ = writeln!(
                out,
                "{:<20} {:>8} {:>10} {:>7} {:<16}  {}",
                w.name,
                w.steps,
                rate,
                w.losses,
                cells(&w.calibration),
                w.state
            );
        }
    }
    out
}
