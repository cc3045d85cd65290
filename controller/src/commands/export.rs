//! `kiln export`: one table of a store (or every table) as CSV, JSON lines
//! or Parquet, to a file, a folder or standard output; or the schema.

use std::io::{IsTerminal, Write};
use std::path::Path;

use anyhow::{Context, Result};

use crate::atomic::{Staged, Staging};
use crate::cli::ExportArgs;
use crate::error::{BadInput, Outcome};
use crate::export::{self, schema, ExportOptions, Table};
use crate::logging;
use crate::store::Store;

pub(super) fn run(args: &ExportArgs, out: &mut dyn Write) -> Result<Outcome> {
    if args.schema {
        write_schema(args.json, out)?;
        return Ok(Outcome::Success);
    }
    let store = Store::open_view(args.store.as_deref().context("no store given")?)?;
    let options = |table| ExportOptions {
        table,
        experiment: args.experiment.as_deref(),
        wide: args.wide,
        format: args.format,
        drop_constant: args.drop_constant,
    };
    if args.all {
        let dir = args
            .output
            .as_deref()
            .context("--all needs --output FOLDER")?;
        export_all(&store, dir, args.format.extension(), options)?;
        return Ok(Outcome::Success);
    }
    let table = args.table.context("no table given")?;
    match &args.output {
        Some(path) => {
            let mut staged = None;
            let rows = export::export_opening(&store, options(table), || {
                Ok(staged.insert(Staged::create(path)?))
            })
            .with_context(|| format!("cannot export to {}", path.display()))?;
            staged.expect("opened to write the rows").commit()?;
            note_written(rows, path);
        }
        None if args.format.is_binary() && std::io::stdout().is_terminal() => {
            return Err(BadInput(format!(
                "{} is binary and standard output is a terminal: write it to a file with \
                 `-o FILE` or pipe it to a program",
                args.format.extension()
            ))
            .into())
        }
        None => {
            export::export(&store, options(table), out)?;
        }
    }
    Ok(Outcome::Success)
}

/// The tables' columns (`--schema`): as JSON, else as the Markdown of docs/export-schema.md.
fn write_schema(json: bool, out: &mut dyn Write) -> Result<()> {
    let schema = schema::schema();
    if json {
        serde_json::to_writer_pretty(&mut *out, &schema)?;
        writeln!(out)?;
    } else {
        write!(out, "{}", schema.markdown())?;
    }
    Ok(())
}

/// Every table into `dir` (`--all`), one file each named by the table and `extension`: all
/// of them whole, or none replaced.
fn export_all<'a>(
    store: &Store,
    dir: &Path,
    extension: &str,
    options: impl Fn(Table) -> ExportOptions<'a>,
) -> Result<()> {
    let mut staging = Staging::default();
    let mut written = Vec::new();
    for table in Table::ALL {
        let path = dir.join(format!("{}.{extension}", table.name()));
        let slot = &mut staging;
        let rows = export::export_opening(store, options(*table), || {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create the folder {}", dir.display()))?;
            slot.create(&path)
        })
        .with_context(|| format!("cannot export to {}", path.display()))?;
        written.push((rows, path));
    }
    staging.commit()?;
    for (rows, path) in written {
        note_written(rows, &path);
    }
    Ok(())
}

fn note_written(rows: u64, path: &Path) {
    logging::note(format_args!("{rows} rows written to {}", path.display()));
}
