//! `kiln export`: a store's steps, runs, decisions, sites and rewards as CSV.
//!
//! Every table is written row by row while the store is iterated, so memory
//! does not grow with the number of steps. The `steps` and `runs` tables have
//! one column group per metric present in the store, found by a first pass
//! over the steps and ordered as [`Metric::ALL`]; a metric a worker could not
//! measure reads `unsupported`, one not measured at all (a failed step) is
//! empty. The schemas are in [`schema`] and documented in README.md, section
//! "Export schema".
//!
//! Export reads the store through its API (never its keys or JSON layout)
//! and the rewards it assigns; it knows nothing of campaigns or workers.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;

use anyhow::{bail, Context, Result};

use kiln_protocol::{CampaignConfig, Metric};

use crate::rewards::{self, RewardOptions};
use crate::store::{benchmark_of, ExperimentInfo, StepRecord, Store};

mod cell;
mod parallel;
pub mod schema;
mod steps;
mod tables;

/// The tables `kiln export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Table {
    /// One row per step.
    Steps,
    /// One row per run of a step.
    Runs,
    /// One row per decision of a step (one row per step with `--wide`).
    Decisions,
    /// One row per decision point of an experiment.
    Sites,
    /// One row per decision value with its reward (ridge regression, default options).
    Rewards,
}

/// What to export.
#[derive(Debug, Clone, Copy)]
pub struct ExportOptions<'a> {
    /// The table.
    pub table: Table,
    /// Only this experiment.
    pub experiment: Option<&'a str>,
    /// The decisions table with one column per site.
    pub wide: bool,
}

pub use schema::*;

/// Writes a table as CSV to `out`; returns the number of data rows.
pub fn export(store: &Store, options: ExportOptions<'_>, mut out: impl Write) -> Result<u64> {
    let ctx = Tables::load(store, options.experiment)?;
    if options.table == Table::Steps {
        let rows = steps::write(store, &ctx, &mut out)?;
        out.flush().context("cannot write the CSV")?;
        return Ok(rows);
    }
    let mut csv = csv::Writer::from_writer(out);
    let rows = match options.table {
        Table::Steps => unreachable!("written above"),
        Table::Runs => tables::runs(store, &ctx, &mut csv)?,
        Table::Decisions if options.wide => tables::decisions_wide(store, &ctx, &mut csv)?,
        Table::Decisions => tables::decisions_long(store, &ctx, &mut csv)?,
        Table::Sites => tables::sites(&ctx, &mut csv)?,
        Table::Rewards => {
            let (all, _) =
                rewards::assign_all(store, options.experiment, &RewardOptions::default())?;
            rewards::write_table(&all, &mut csv)?
        }
    };
    csv.flush().context("cannot write the CSV")?;
    Ok(rows)
}

/// What every table needs besides the steps: the campaign and its experiments.
struct Tables {
    config: Option<CampaignConfig>,
    /// The selected experiments, by name.
    experiments: BTreeMap<String, ExperimentInfo>,
}

impl Tables {
    fn load(store: &Store, only: Option<&str>) -> Result<Tables> {
        let mut experiments = BTreeMap::new();
        for item in store.experiments() {
            let (name, info) = item?;
            if only.map_or(true, |o| o == name) {
                experiments.insert(name, info);
            }
        }
        if let Some(name) = only.filter(|_| experiments.is_empty()) {
            bail!(
                "store {} holds no experiment named '{name}'; it holds: {}",
                store.dir().display(),
                store.experiment_names()?.join(", ")
            );
        }
        Ok(Tables {
            config: store.config()?,
            experiments,
        })
    }

    fn campaign(&self) -> &str {
        self.config.as_ref().map_or("", |c| c.name.as_str())
    }

    /// The benchmark an experiment searches (empty where unknown).
    fn benchmark(&self, experiment: &str) -> String {
        benchmark_of(self.config.as_ref(), experiment).unwrap_or_default()
    }

    /// The selected experiments' steps, in key order.
    fn steps<'s>(&'s self, store: &'s Store) -> impl Iterator<Item = Result<StepRecord>> + 's {
        self.experiments
            .keys()
            .flat_map(move |name| store.steps(Some(name)))
    }

    /// Every metric measured (or found unsupported) in the selected steps.
    fn metrics(&self, store: &Store) -> Result<BTreeSet<Metric>> {
        let mut found = BTreeSet::new();
        for name in self.experiments.keys() {
            found.extend(store.step_metrics(name)?);
        }
        Ok(found)
    }
}
