//! The `steps` table: one row per decided step, from the export rows the
//! store keeps beside the steps, turned into CSV on every core.

use std::io::Write;

use anyhow::{Context, Result};

use kiln_protocol::Metric;

use crate::store::row::MetricKey;
use crate::store::{manual_benchmark, StepKind, StepRow, Store, StoredRow};
use crate::text::time_ratio;

use super::cell::{Cell, Row};
use super::parallel::parallel_rows;
use super::schema::{STEP_COLUMNS, STEP_STATISTICS};
use super::Tables;

/// Writes the `steps` table; returns the number of rows.
pub(super) fn write<W: Write>(store: &Store, ctx: &Tables, out: &mut W) -> Result<u64> {
    let metrics: Vec<Metric> = ctx.metrics(store)?.into_iter().collect();
    let mut header: Vec<String> = STEP_COLUMNS.iter().map(|c| c.to_string()).collect();
    for m in &metrics {
        header.extend(STEP_STATISTICS.iter().map(|s| format!("{}.{s}", m.name())));
    }
    let mut csv = csv::Writer::from_writer(&mut *out);
    csv.write_record(&header)?;
    csv.flush()?;
    drop(csv);
    let keys: Vec<MetricKey> = metrics.iter().map(|m| MetricKey::from(*m)).collect();
    let mut rows = 0;
    for (name, info) in &ctx.experiments {
        let benchmark = ctx.benchmark(name);
        let baseline = info.baseline.objective();
        let row = |stored: &StoredRow, out: &mut Row| -> Result<()> {
            let r = stored
                .row()
                .with_context(|| format!("a stored step of experiment {name} is unreadable"))?;
            step_row(out, ctx.campaign(), &benchmark, baseline, &r, &keys);
            Ok(())
        };
        rows += parallel_rows(store.step_rows(name), &row, out)?;
    }
    Ok(rows)
}

/// Writes one row of the `steps` table.
fn step_row(
    out: &mut Row,
    campaign: &str,
    benchmark: &str,
    baseline: Option<f64>,
    r: &StepRow<'_>,
    metrics: &[MetricKey],
) {
    out.str(campaign);
    out.str(&r.experiment);
    out.str(benchmark);
    out.cell(r.chain);
    out.cell(r.step);
    out.str(kind_of(r.kind, &r.experiment));
    out.opt(r.parent);
    out.cell(r.changed);
    out.str(&r.worker);
    out.cell(r.slot);
    out.hex(&r.decision_hash);
    match r.cached_from {
        Some((chain, step)) => {
            out.cell(chain);
            out.bytes.push(b'/');
            step.write(&mut out.bytes);
        }
        None => out.str(""),
    }
    out.str(&r.outcome);
    out.str(&r.failure);
    out.opt(r.decision.map(|d| d.accepted));
    out.opt(r.decision.map(|d| d.compared_with));
    out.cell(r.temperature);
    out.opt(r.objective);
    out.opt(baseline);
    out.opt(baseline.zip(r.objective).map(|(b, o)| time_ratio(o, b)));
    out.cell(r.measured_runs);
    out.cell(r.target_met);
    out.opt(r.build.map(|b| b.wall_ns));
    out.opt(r.build.map(|_| r.build_reused));
    out.opt(r.build.and_then(|b| b.text_bytes));
    out.cell(r.dispatched_ms);
    out.cell(r.recorded_ms);
    out.opt(r.decision.map(|d| d.decided_ms));
    // A metric without statistics: five cells alike, written at once.
    const UNSUPPORTED: &[u8] = b",unsupported,unsupported,unsupported,unsupported,unsupported";
    const EMPTY: &[u8] = b",,,,,";
    const _: () = assert!(STEP_STATISTICS.len() == 5);
    for m in metrics {
        match r.summary.iter().find(|(k, _)| k == m) {
            Some((_, stats)) => out.floats(&stats.0),
            None if r.unsupported.contains(m) => out.bytes.extend_from_slice(UNSUPPORTED),
            None => out.bytes.extend_from_slice(EMPTY),
        }
    }
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
