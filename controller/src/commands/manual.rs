//! `kiln completions SHELL` and `kiln man`: generated from the clap definitions
//! in [`crate::cli`], so they list every subcommand and flag as they are.

use std::io::Write;

use anyhow::Result;
use clap::CommandFactory;

use crate::cli::{Cli, CompletionsArgs};
use crate::error::Outcome;

pub(super) fn completions(args: &CompletionsArgs, out: &mut dyn Write) -> Result<Outcome> {
    clap_complete::generate(args.shell, &mut Cli::command(), "kiln", out);
    Ok(Outcome::Success)
}

/// The man page, whose SUBCOMMANDS section lists every subcommand with its summary.
pub(super) fn man(out: &mut dyn Write) -> Result<Outcome> {
    clap_mangen::Man::new(Cli::command()).render(out)?;
    Ok(Outcome::Success)
}
