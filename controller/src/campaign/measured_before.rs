//! The sites an effects table already holds for an experiment: screening's
//! `(skip-measured FILE)`, read once when the experiment is prepared, so that a
//! campaign started again in a new store (a dataset grown on another machine)
//! screens what the table lacks instead of its hottest sites again. A row that
//! could not be separated from its shared build measured nothing: its site is
//! screened again.

use std::collections::BTreeSet;
use std::fs::File;
use std::path::Path;

use anyhow::{bail, Context, Result};
use arrow_array::{Array, BooleanArray, LargeStringArray, RecordBatch, StringArray};
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
const COLUMNS: [&str; 5] = ["experiment", "benchmark", "context", "site", "separable"];

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
    let (experiment, benchmark) = (column("experiment")?, column("benchmark")?);
    let (context, site) = (column("context")?, column("site")?);
    let separable = batch.column_by_name("separable").context("column read")?;
    let Some(separable) = separable.as_any().downcast_ref::<BooleanArray>() else {
        bail!(
            "its column 'separable' is {}, not true or false",
            separable.data_type()
        );
    };
    let wanted = |i: usize| {
        experiment[i] == Some(rows.experiment)
            && benchmark[i] == Some(rows.benchmark)
            && context[i] == Some(rows.context)
            && separable.is_valid(i)
            && separable.value(i)
    };
    Ok(site
        .into_iter()
        .enumerate()
        .filter(|&(i, _)| wanted(i))
        .filter_map(|(_, site)| site.map(SiteId::from))
        .collect())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::ArrayRef;
    use parquet::arrow::ArrowWriter;

    use super::*;

    /// A table of three rows of experiment `e` around stock: sites `a` and `b` sound, `c`
    /// from a build it could not be separated from.
    fn table(path: &Path) {
        let text = |v: [&str; 3]| Arc::new(StringArray::from(v.to_vec())) as ArrayRef;
        let batch = RecordBatch::try_from_iter([
            ("experiment", text(["e", "e", "e"])),
            ("benchmark", text(["p", "p", "p"])),
            ("context", text(["stock", "stock", "stock"])),
            ("site", text(["a", "b", "c"])),
            (
                "separable",
                Arc::new(BooleanArray::from(vec![true, true, false])) as ArrayRef,
            ),
        ])
        .unwrap();
        let mut writer =
            ArrowWriter::try_new(File::create(path).unwrap(), batch.schema(), None).unwrap();
        writer.write(&batch).unwrap();
        writer.close().unwrap();
    }

    #[test]
    fn a_site_its_shared_build_could_not_separate_is_screened_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("effects.parquet");
        table(&path);
        let rows = Rows {
            experiment: "e",
            benchmark: "p",
            context: "stock",
        };
        let found = sites(&path, &rows).unwrap();
        assert_eq!(
            found,
            BTreeSet::from([SiteId::from("a"), SiteId::from("b")])
        );
        let other = Rows {
            context: "random",
            ..rows
        };
        assert!(sites(&path, &other).unwrap().is_empty());
    }
}
