//! `kiln export`: a store's steps, runs, decisions, sites, metric support,
//! training dataset and rewards as CSV, JSON lines or Parquet.
//!
//! Every table is a list of typed columns ([`schema`], printed by
//! `kiln export --schema` and reproduced in docs/export-schema.md)
//! whose rows are pushed cell by cell into a [`format`] writer, so the
//! three formats write the same cells. Rows are written while the store is
//! iterated, so memory does not grow with the number of steps. The `steps`
//! and `runs` tables have one column group per metric present in the store,
//! found by a first pass over the steps and ordered as [`Metric::ALL`]; a
//! metric a worker could not measure is null, and the `support` table says
//! which metrics each worker measures.
//!
//! Export reads the store through its API (never its keys or JSON layout)
//! and the rewards it assigns; it knows nothing of campaigns or workers.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;

use anyhow::Result;

use kiln_protocol::{CampaignConfig, Metric};

use crate::error::BadInput;
use crate::store::{benchmark_of, ExperimentInfo, StepRecord, Store};

mod caller_code;
mod cell;
pub mod format;
mod parallel;
mod parquet_file;
pub mod schema;
mod steps;
mod tables;

pub use format::{Column, Format, Type};
pub use schema::*;

use format::{ConstantsWriter, CsvWriter, JsonlWriter, MaskedWriter, Writer};
use parquet_file::ParquetWriter;

/// The tables `kiln export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Table {
    /// One row per step.
    Steps,
    /// One row per run of a step.
    Runs,
    /// One row per decision of a step (one row per step with `--wide`).
    Decisions,
    /// One row per decision point of an experiment, with its features.
    Sites,
    /// One row per worker and metric: whether the worker measures it.
    Support,
    /// One row per step and decision point, ready for training.
    Dataset,
    /// One row per site (and value) measured one flip away from the stock decisions: its effect.
    Effects,
    /// One row per decision value with its reward (ridge regression, default options).
    Rewards,
}

impl Table {
    /// Every table, in the schema's order.
    pub const ALL: &'static [Table] = &[
        Table::Steps,
        Table::Runs,
        Table::Decisions,
        Table::Sites,
        Table::Support,
        Table::Dataset,
        Table::Effects,
        Table::Rewards,
    ];

    /// The table's name on the command line and in file names.
    pub fn name(self) -> &'static str {
        match self {
            Table::Steps => "steps",
            Table::Runs => "runs",
            Table::Decisions => "decisions",
            Table::Sites => "sites",
            Table::Support => "support",
            Table::Dataset => "dataset",
            Table::Effects => "effects",
            Table::Rewards => "rewards",
        }
    }
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
    /// The format written.
    pub format: Format,
    /// Leave out the columns whose every cell is the same (nulls included).
    pub drop_constant: bool,
}

impl<'a> ExportOptions<'a> {
    /// A table of every experiment, as CSV, every column.
    pub fn new(table: Table) -> ExportOptions<'a> {
        ExportOptions {
            table,
            experiment: None,
            wide: false,
            format: Format::Csv,
            drop_constant: false,
        }
    }
}

/// Writes a table to `out`; returns the number of data rows.
pub fn export(store: &Store, options: ExportOptions<'_>, out: impl Write) -> Result<u64> {
    export_opening(store, options, || Ok(out))
}

/// Writes a table to the writer `open` gives, opened only once the options
/// are found good and the table is ready to write (a bad option creates
/// nothing); returns the number of data rows.
pub fn export_opening<W: Write>(
    store: &Store,
    options: ExportOptions<'_>,
    open: impl FnOnce() -> Result<W>,
) -> Result<u64> {
    let ctx = Tables::load(store, options.experiment)?;
    let source = tables::Source::new(store, &ctx, &options)?;
    let columns = source.columns();
    let keep = if options.drop_constant {
        let mut finder = ConstantsWriter::new(columns.len());
        source.rows(&mut finder)?;
        Some(finder.varying())
    } else {
        None
    };
    let kept: Vec<Column> = match &keep {
        Some(keep) => columns
            .iter()
            .zip(keep)
            .filter(|(_, k)| **k)
            .map(|(c, _)| c.clone())
            .collect(),
        None => columns,
    };
    let out = open()?;
    match options.format {
        Format::Csv => write(&source, CsvWriter::new(&kept, out)?, keep),
        Format::Jsonl => write(&source, JsonlWriter::new(&kept, out), keep),
        Format::Parquet => write(&source, ParquetWriter::new(&kept, out)?, keep),
    }
}

/// Writes the source's rows with `writer`, only the kept columns if `keep` says.
fn write<W: Writer>(source: &tables::Source<'_>, writer: W, keep: Option<Vec<bool>>) -> Result<u64>
where
    W::Rows: 'static,
{
    fn all<W: Writer>(source: &tables::Source<'_>, mut w: W) -> Result<u64> {
        let rows = source.rows(&mut w)?;
        w.finish()?;
        Ok(rows)
    }
    match keep {
        Some(keep) => all(source, MaskedWriter::new(writer, keep)),
        None => all(source, writer),
    }
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
            if only.is_none_or(|o| o == name) {
                experiments.insert(name, info);
            }
        }
        if let Some(name) = only.filter(|_| experiments.is_empty()) {
            return Err(BadInput(store.no_such_experiment(name)).into());
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

    /// The decisions an experiment's flips were made from ([`ExperimentInfo::context`]).
    fn context(&self, experiment: &str, info: &ExperimentInfo) -> String {
        info.context(self.config.as_ref().and_then(|c| c.experiment(experiment)))
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
