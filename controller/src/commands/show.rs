//! `kiln show`: one stored step in full, so a failure explains itself.

use std::fmt::Write as _;
use std::io::Write;

use anyhow::Result;

use kiln_protocol::{Metric, StepOutcome};

use crate::cli::ShowArgs;
use crate::error::{BadInput, Outcome};
use crate::store::{manual_benchmark, ExperimentInfo, StepKey, StepKind, StepRecord, Store};
use crate::text::{
    escape_controls, format_measure, format_ratio, format_summary, format_value, plural, TIME_RATIO,
};

/// Sites listed by name when a step changed that many or fewer.
const LIST_CHANGES: usize = 20;

pub(super) fn run(args: &ShowArgs, out: &mut dyn Write) -> Result<Outcome> {
    let key = parse_key(&args.step)?;
    let store = Store::open_view(&args.store)?;
    // A name the store lacks is bad input, as `kiln export --experiment` says.
    let Some(record) = store.step(&key)? else {
        let why = match store.experiment(&key.experiment)? {
            None => store.no_such_experiment(&key.experiment),
            Some(_) => format!("store {} holds no decided step {key}", args.store.display()),
        };
        return Err(BadInput(why).into());
    };
    if args.json {
        serde_json::to_writer_pretty(&mut *out, &record)?;
        writeln!(out)?;
        return Ok(Outcome::Success);
    }
    // A failure quotes the benchmark's stderr: shown, never obeyed by the terminal.
    write!(out, "{}", escape_controls(&describe(&store, &record)?))?;
    Ok(Outcome::Success)
}

/// The step in full, as text.
fn describe(store: &Store, record: &StepRecord) -> Result<String> {
    let mut out = String::new();
    let manual = manual_benchmark(&record.key.experiment);
    write_origin(&mut out, record, manual)?;
    let info = store.experiment(&record.key.experiment)?;
    if let StepOutcome::WrongOutput { .. } = record.result.measurement.outcome {
        write_checked_outputs(&mut out, record, info.as_ref())?;
    }
    // In the objective's unit, as every command prints it.
    let unit = store
        .config()?
        .map_or("count", |c| c.objective.metric.unit());
    let value = |v: f64| format_measure(v, unit);
    write_objective(&mut out, record, info.as_ref(), &value)?;
    if let Some(d) = record.decision.as_ref().filter(|_| manual.is_none()) {
        let verdict = if d.accepted { "accepted" } else { "rejected" };
        writeln!(
            out,
            "{verdict} against {}; temperature {}",
            value(d.compared_with),
            format_value(record.temperature)
        )?;
    }
    write_changes(&mut out, record)?;
    for warning in &record.result.measurement.warnings {
        writeln!(out, "worker warning: {warning}")?;
    }
    for (kind, hash) in &record.artifacts {
        writeln!(out, "{kind}: {}", store.artifact_path(hash).display())?;
    }
    if let Some(cut) = &record.result.measurement.cut_short {
        writeln!(
            out,
            "cut short after {} of at most {} runs: the median's 95% CI [{}, {}] lies above {}, \
             the incumbent's {} plus the most temperature {} accepts with probability {} or more",
            cut.runs,
            cut.max_runs,
            value(cut.ci_low),
            value(cut.ci_high),
            value(cut.race.bound),
            value(cut.race.incumbent),
            format_value(record.temperature),
            cut.race.p
        )?;
    }
    write_metrics(&mut out, record)?;
    Ok(out)
}

/// What made the step (a search's proposal, or a hand), where it ran and how it ended.
fn write_origin(out: &mut String, record: &StepRecord, manual: Option<&str>) -> std::fmt::Result {
    let key = &record.key;
    match manual {
        // A step measured by hand: no search proposed it, and none decides on it.
        Some(benchmark) => writeln!(
            out,
            "{key}: measured by hand (`kiln benchmark --store`) on benchmark {benchmark}"
        )?,
        None => {
            let kind = match record.kind {
                StepKind::Proposal => "proposal",
                StepKind::Remeasure => "re-measurement of the incumbent",
                StepKind::Screen if record.diff.len() > 1 => "screening, a shared build",
                StepKind::Screen => "screening flip",
                StepKind::Restart => "restart of hill climbing from a local optimum",
            };
            let parent = record
                .parent
                .map_or("the baseline".to_string(), |p| format!("step {p}"));
            writeln!(out, "{key}: {kind}, from {parent}")?;
        }
    }
    // The worker's own time, and the time since the controller queued the step (which
    // counts the wait for a free slot).
    let result = &record.result;
    let seconds = |from: u64, to: u64| to.saturating_sub(from) as f64 / 1000.0;
    writeln!(
        out,
        "worker {} slot {}; measured in {:.1} s on the worker, {:.1} s from its dispatch",
        record.worker,
        record.slot,
        seconds(result.started_ms, result.finished_ms),
        seconds(record.dispatched_ms, record.recorded_ms)
    )?;
    if let Some(source) = &record.cached_from {
        writeln!(out, "measurement reused from {source}")?;
    }
    let outcome = &record.result.measurement.outcome;
    writeln!(out, "outcome: {outcome}")?;
    if let Some(detail) = outcome.detail().filter(|d| !d.is_empty()) {
        for line in detail.lines() {
            writeln!(out, "  | {line}")?;
        }
    }
    Ok(())
}

/// A wrong output's start beside the baseline's.
fn write_checked_outputs(
    out: &mut String,
    record: &StepRecord,
    info: Option<&ExperimentInfo>,
) -> std::fmt::Result {
    let checked = [
        (
            "this step's",
            record.result.measurement.checked_output.as_deref(),
        ),
        (
            "the baseline's",
            info.and_then(|i| i.baseline.checked_output.as_deref()),
        ),
    ];
    for (whose, text) in checked {
        writeln!(out, "{whose} checked output (its start):")?;
        for line in text.unwrap_or("(not kept)").lines() {
            writeln!(out, "  > {line}")?;
        }
    }
    Ok(())
}

/// The objective, against the baseline where there is one.
fn write_objective(
    out: &mut String,
    record: &StepRecord,
    info: Option<&ExperimentInfo>,
    value: &dyn Fn(f64) -> String,
) -> std::fmt::Result {
    let baseline = info.and_then(|info| info.baseline.objective());
    match (record.objective, baseline) {
        (Some(o), Some(b)) => writeln!(
            out,
            "objective: {} (baseline {}, {TIME_RATIO} {})",
            value(o),
            value(b),
            format_ratio(info.and_then(|i| i.time_ratio(o)).unwrap_or(f64::NAN))
        ),
        (Some(o), None) => writeln!(out, "objective: {}", value(o)),
        (None, _) => writeln!(out, "objective: none (the step failed)"),
    }
}

/// The decisions it changed, and its build (with the decisions that were moot in it).
fn write_changes(out: &mut String, record: &StepRecord) -> std::fmt::Result {
    let changed = &record.diff.0;
    write!(out, "{} changed", plural(changed.len(), "decision"))?;
    if !changed.is_empty() && changed.len() <= LIST_CHANGES {
        writeln!(out, ":")?;
        for (site, value) in changed {
            writeln!(out, "  {site} = {value}")?;
        }
    } else {
        writeln!(out)?;
    }
    let Some(b) = &record.result.build else {
        return Ok(());
    };
    writeln!(
        out,
        "build: {:.2} s{}{}",
        b.wall_ns as f64 / 1e9,
        b.text_bytes
            .map_or(String::new(), |t| format!(", .text {t} bytes")),
        if b.reused { ", reused" } else { "" }
    )?;
    if !b.moot.is_empty() {
        writeln!(
            out,
            "{}: the site's call is not in this build, so its value decided nothing:",
            plural(b.moot.len(), "moot decision")
        )?;
        for (site, why) in b.moot.iter().take(LIST_CHANGES) {
            writeln!(out, "  {site}: {why}")?;
        }
        if b.moot.len() > LIST_CHANGES {
            writeln!(
                out,
                "  … and {} more (kiln show --json lists all)",
                b.moot.len() - LIST_CHANGES
            )?;
        }
    }
    Ok(())
}

/// Every metric measured; one run has no interval: its value alone, not a CI drawn from one
/// sample.
fn write_metrics(out: &mut String, record: &StepRecord) -> std::fmt::Result {
    let m = &record.result.measurement;
    if m.summary.is_empty() {
        return Ok(());
    }
    let measured = m.runs.iter().filter(|r| !r.warmup).count();
    match measured {
        1 => writeln!(out, "metrics (one run):")?,
        n => writeln!(out, "metrics (median [95% CI] over {n} runs):")?,
    }
    for metric in Metric::ALL {
        if let Some(s) = m.summary.get(metric) {
            let shown = match measured {
                1 => format_measure(s.median, metric.unit()),
                _ => format_summary(s, metric.unit()),
            };
            writeln!(out, "  {:<20} {shown}", metric.name())?;
        }
    }
    Ok(())
}

/// `EXPERIMENT/CHAIN/STEP`; the experiment may itself hold `/`.
fn parse_key(text: &str) -> Result<StepKey> {
    let bad = || {
        BadInput(format!(
            "'{text}' names no step: write EXPERIMENT/CHAIN/STEP, e.g. sample-dsp/0/17"
        ))
    };
    let mut parts = text.rsplitn(3, '/');
    let (Some(step), Some(chain), Some(experiment)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(bad().into());
    };
    Ok(StepKey {
        experiment: experiment.to_string(),
        chain: chain.parse().map_err(|_| bad())?,
        step: step.parse().map_err(|_| bad())?,
    })
}
