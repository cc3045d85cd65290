//! `kiln report`: a campaign's plots and their page.

use std::io::Write;

use anyhow::Result;

use crate::cli::ReportArgs;
use crate::error::Outcome;
use crate::report;
use crate::store::{layout, Store};

pub(super) fn run(args: &ReportArgs, out: &mut dyn Write) -> Result<Outcome> {
    let store = Store::open_view(&args.store)?;
    let dir = args
        .output
        .clone()
        .unwrap_or_else(|| layout::report_dir(&args.store));
    let files = report::report(&store, &dir)?;
    writeln!(
        out,
        "{} files written; open {}",
        files.len(),
        dir.join("index.html").display()
    )?;
    Ok(Outcome::Success)
}
