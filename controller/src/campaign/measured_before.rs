//! The sites an effects table already holds for an experiment: screening's
//! `(skip-measured FILE)`, read once when the experiment is prepared, so that a
//! campaign started again in a new store (a dataset grown on another machine)
//! screens what the table lacks instead of its hottest sites again.

use std::collections::BTreeSet;
use std::fs::File;
use std::path::Path;

use anyhow::{bail, Context, Result};
use arrow_array::{Array, LargeStringArray, RecordBatch, StringArray};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ProjectionMask;

use kiln_protocol::SiteId;

/// Which rows of the table are the experiment's: the same name, benchmark and
/// context (so a renamed experiment, or one from another start, measures its
/// sites itself).
pub struct Rows<'a> {
    pub experiment: &'a str,
    pub benchmark: &'a str,
    pub context: &'a str,
}

/// The columns read, in this order.
const COLUMNS: [&str; 4] = ["experiment", "benchmark", "context", "site"];

/// The sites of `path`'s rows that are `rows`'.
pub fn sites(path: &Path, rows: &Rows<'_>) -> Result<BTreeSet<SiteId>> {
    let read = || -> Result<BTreeSet<SiteId>> {
        let builder = ParquetRecordBatchReaderBuilder::try_new(File::open(path)?)?;
        let schema = builder.parquet_schema();
        let mut leaves = Vec::new();
        for name in COLUMNS {
            let Some(leaf) = (0..schema.num_columns()).find(|&i| schema.column(i).name() == name)
            else {
                bail!("it has no column '{name}' (an effects table has {COLUMNS:?})");
            };
            leaves.push(leaf);
        }
        let mask = ProjectionMask::leaves(schema, leaves);
        let mut found = BTreeSet::new();
        for batch in builder.with_projection(mask).build()? {
            found.extend(sites_of(&batch?, rows)?);
        }
        Ok(found)
    };
    read().with_context(|| format!("(skip-measured {:?})", path.display().to_string()))
}

/// The sites of one batch's rows that are `rows`'.
fn sites_of(batch: &RecordBatch, rows: &Rows<'_>) -> Result<Vec<SiteId>> {
    let column = |name: &str| -> Result<Vec<Option<&str>>> {
        let array = batch.column_by_name(name).context("column read")?;
        if let Some(text) = array.as_any().downcast_ref::<StringArray>() {
            return Ok(text.iter().collect());
        }
        if let Some(text) = array.as_any().downcast_ref::<LargeStringArray>() {
            return Ok(text.iter().collect());
        }
        bail!("its column '{name}' is {}, not text", array.data_type())
    };
    let [experiment, benchmark, context, site] = COLUMNS.map(column);
    let (experiment, benchmark, context) = (experiment?, benchmark?, context?);
    let wanted = |i: usize| {
        experiment[i] == Some(rows.experiment)
            && benchmark[i] == Some(rows.benchmark)
            && context[i] == Some(rows.context)
    };
    Ok(site?
        .into_iter()
        .enumerate()
        .filter(|&(i, _)| wanted(i))
        .filter_map(|(_, site)| site.map(SiteId::from))
        .collect())
}
