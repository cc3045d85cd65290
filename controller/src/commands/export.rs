//! `kiln export`: one table of a store as CSV, to a file or standard output.

use std::io::Write;

use anyhow::{Context, Result};

use crate::cli::ExportArgs;
use crate::error::Outcome;
use crate::export::{self, ExportOptions};
use crate::logging;
use crate::store::Store;

pub(super) fn run(args: &ExportArgs, out: &mut dyn Write) -> Result<Outcome> {
    let store = Store::open_existing(&args.store)?;
    let options = ExportOptions {
        table: args.table,
        experiment: args.experiment.as_deref(),
        wide: args.wide,
    };
    match &args.output {
        Some(path) => {
            let file = std::fs::File::create(path)
                .with_context(|| format!("cannot write {}", path.display()))?;
            let rows = export::export(&store, options, std::io::BufWriter::new(file))
                .with_context(|| format!("cannot export to {}", path.display()))?;
            logging::note(format_args!("{rows} rows written to {}", path.display()));
        }
        None => {
            export::export(&store, options, out)?;
        }
    }
    Ok(Outcome::Success)
}
