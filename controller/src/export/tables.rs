//! The tables written through the `csv` crate: runs, decisions, sites.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;

use anyhow::{Context, Result};

use kiln_protocol::{MetricValue, SiteId};

use crate::store::Store;
use crate::text::UNSUPPORTED;

use super::schema::{DECISION_COLUMNS, RUN_COLUMNS, SITE_COLUMNS, WIDE_DECISION_COLUMNS};
use super::Tables;

type Csv<W> = csv::Writer<W>;

fn num(v: f64) -> String {
    v.to_string()
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(String::new, |v| v.to_string())
}

pub(super) fn runs<W: Write>(store: &Store, ctx: &Tables, csv: &mut Csv<W>) -> Result<u64> {
    let metrics = ctx.metrics(store)?;
    let mut header: Vec<String> = RUN_COLUMNS.iter().map(|c| c.to_string()).collect();
    header.extend(metrics.iter().map(|m| m.name().to_string()));
    csv.write_record(&header)?;
    let mut rows = 0;
    for record in ctx.steps(store) {
        let r = record?;
        for run in &r.result.runs {
            let mut row = vec![
                r.key.experiment.clone(),
                r.key.chain.to_string(),
                r.key.step.to_string(),
                r.worker.clone(),
                r.slot.to_string(),
                r.result.outcome.name().to_string(),
                r.cached_from.is_some().to_string(),
                run.index.to_string(),
                run.warmup.to_string(),
                opt(run.exit_code),
                opt(run.signal),
            ];
            row.extend(metrics.iter().map(|m| match run.metrics.get(m) {
                Some(MetricValue::Measured(v)) => num(*v),
                Some(MetricValue::Unsupported) => UNSUPPORTED.to_string(),
                None => String::new(),
            }));
            csv.write_record(&row)?;
            rows += 1;
        }
    }
    Ok(rows)
}

pub(super) fn decisions_long<W: Write>(
    store: &Store,
    ctx: &Tables,
    csv: &mut Csv<W>,
) -> Result<u64> {
    csv.write_record(DECISION_COLUMNS)?;
    let mut rows = 0;
    for record in ctx.steps(store) {
        let r = record?;
        let (chain, step) = (r.key.chain.to_string(), r.key.step.to_string());
        for (site, value) in &r.decisions.0 {
            csv.write_record([
                r.key.experiment.as_str(),
                &chain,
                &step,
                site.as_str(),
                &value.to_string(),
            ])?;
            rows += 1;
        }
    }
    Ok(rows)
}

pub(super) fn decisions_wide<W: Write>(
    store: &Store,
    ctx: &Tables,
    csv: &mut Csv<W>,
) -> Result<u64> {
    // One column per decision point of the selected experiments, in their
    // discovery order; a site of another experiment stays empty.
    let mut columns: Vec<&SiteId> = Vec::new();
    let mut seen = BTreeSet::new();
    for info in ctx.experiments.values() {
        for p in &info.discovery.points {
            if seen.insert(&p.id) {
                columns.push(&p.id);
            }
        }
    }
    let index: BTreeMap<&SiteId, usize> =
        columns.iter().enumerate().map(|(i, s)| (*s, i)).collect();
    let mut header: Vec<&str> = WIDE_DECISION_COLUMNS.to_vec();
    header.extend(columns.iter().map(|s| s.as_str()));
    csv.write_record(&header)?;
    let mut rows = 0;
    for record in ctx.steps(store) {
        let r = record?;
        let mut row = vec![String::new(); columns.len()];
        for (site, value) in &r.decisions.0 {
            let i = index.get(site).with_context(|| {
                format!(
                    "step {} decides '{site}', which is no decision point of experiment {}",
                    r.key, r.key.experiment
                )
            })?;
            row[*i] = value.to_string();
        }
        let mut full = vec![
            r.key.experiment.clone(),
            r.key.chain.to_string(),
            r.key.step.to_string(),
        ];
        full.extend(row);
        csv.write_record(&full)?;
        rows += 1;
    }
    Ok(rows)
}

pub(super) fn sites<W: Write>(ctx: &Tables, csv: &mut Csv<W>) -> Result<u64> {
    csv.write_record(SITE_COLUMNS)?;
    let mut rows = 0;
    for (name, info) in &ctx.experiments {
        let benchmark = ctx.benchmark(name);
        for (i, p) in info.discovery.points.iter().enumerate() {
            let stock = opt(info.discovery.baseline.get(&p.id));
            let domain: Vec<String> = p.domain.iter().map(ToString::to_string).collect();
            csv.write_record([
                name.as_str(),
                &benchmark,
                &i.to_string(),
                p.id.as_str(),
                &stock,
                &domain.join(" "),
            ])?;
            rows += 1;
        }
    }
    Ok(rows)
}
