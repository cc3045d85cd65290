//! `kiln check`: a config checked and printed normalized, every default spelled out.

use std::io::Write;

use anyhow::Result;

use crate::cli::CheckArgs;
use crate::error::Outcome;

pub(super) fn run(args: &CheckArgs, out: &mut dyn Write) -> Result<Outcome> {
    let config = super::read_config(&args.config)?;
    write!(out, "{}", config.to_text())?;
    Ok(Outcome::Success)
}
