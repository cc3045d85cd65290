//! The `steps` table: one row per decided step, from the export rows the
//! store keeps beside the steps, made on every core.

use anyhow::{Context, Result};

use kiln_protocol::Metric;

use crate::store::summary::MetricKey;
use crate::store::ExperimentInfo;
use crate::store::{manual_benchmark, StepKind, StepSummary, Store, StoredSummary};

use super::format::{Column, Sink, SinkExt, Writer};
use super::parallel::parallel_rows;
use super::schema::{columns, step_metric_columns, STEP_COLUMNS, STEP_STATISTICS};
use super::Tables;

/// The columns of the `steps` table with these metrics.
pub(super) fn header(metrics: &[Metric]) -> Vec<Column> {
    let mut header = columns(STEP_COLUMNS);
    header.extend(metrics.iter().flat_map(|m| step_metric_columns(*m)));
    header
}

/// Writes the `steps` table's rows; returns their number.
pub(super) fn write<W: Writer>(
    store: &Store,
    ctx: &Tables,
    metrics: &[Metric],
    out: &mut W,
) -> Result<u64> {
    let keys: Vec<MetricKey> = metrics.iter().map(|m| MetricKey::from(*m)).collect();
    let mut rows = 0;
    for (name, info) in &ctx.experiments {
        let benchmark = ctx.benchmark(name);
        let row = |stored: &StoredSummary, out: &mut W::Rows| -> Result<()> {
            let r = stored
                .row()
                .with_context(|| format!("a stored step of experiment {name} is unreadable"))?;
            step_row(out, ctx.campaign(), &benchmark, info, &r, &keys);
            Ok(())
        };
        rows += parallel_rows(store.step_rows(name), &row, out)?;
    }
    Ok(rows)
}

/// Writes one row of the `steps` table.
fn step_row(
    out: &mut impl Sink,
    campaign: &str,
    benchmark: &str,
    info: &ExperimentInfo,
    r: &StepSummary<'_>,
    metrics: &[MetricKey],
) {
    out.text(campaign);
    out.text(&r.experiment);
    out.text(benchmark);
    out.uint(r.chain.into());
    out.uint(r.step.into());
    out.text(kind_of(r.kind, &r.experiment));
    out.opt_int(r.parent);
    out.uint(r.changed);
    out.text(&r.worker);
    out.uint(r.slot.into());
    out.hex(&r.decision_hash);
    match r.cached_from {
        Some((chain, step)) => out.text(&format!("{chain}/{step}")),
        None => out.null(),
    }
    out.text(&r.outcome);
    out.text(&r.failure);
    out.opt_bool(r.decision.map(|d| d.accepted));
    out.opt_float(r.decision.map(|d| d.compared_with));
    out.float(r.temperature);
    out.opt_float(r.objective);
    out.opt_float(info.baseline.objective());
    out.opt_float(r.objective.and_then(|o| info.time_ratio(o)));
    out.uint(r.measured_runs);
    out.bool(r.target_met);
    out.bool(r.cut_short);
    out.opt_uint(r.build.map(|b| b.wall_ns));
    out.opt_bool(r.build.map(|_| r.build_reused));
    out.opt_uint(r.build.and_then(|b| b.text_bytes));
    out.uint(r.dispatched_ms);
    out.uint(r.recorded_ms);
    out.opt_uint(r.decision.map(|d| d.decided_ms));
    for m in metrics {
        match r.summary.iter().find(|(k, _)| k == m) {
            Some((_, stats)) => out.floats(&stats.0),
            // Unsupported or not measured at all: null (the `support` table says which).
            None => out.nulls(STEP_STATISTICS.len()),
        }
    }
    out.end();
}

/// The step's kind; steps of `kiln benchmark --store` are stored as proposals
/// of a manual experiment and read `manual`.
fn kind_of(kind: StepKind, experiment: &str) -> &'static str {
    match kind {
        StepKind::Remeasure => "remeasure",
        StepKind::Proposal if manual_benchmark(experiment).is_some() => "manual",
        StepKind::Proposal => "proposal",
        StepKind::Screen => "screen",
        StepKind::Restart => "restart",
    }
}
