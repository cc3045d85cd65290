//! `kiln completions SHELL` and `kiln man`: generated from the clap definitions
//! in [`crate::cli`], so they list every subcommand and flag as they are.

use std::io::Write;

use anyhow::{Context, Result};
use clap::CommandFactory;
use clap_mangen::roff::{bold, roman, Roff};

use crate::cli::{Cli, CompletionsArgs, ManArgs};
use crate::error::{Outcome, EXIT_STATUSES};

pub(super) fn completions(args: &CompletionsArgs, out: &mut dyn Write) -> Result<Outcome> {
    // Generated whole, then written: clap_complete panics on a write that fails (a reader
    // that went away, `kiln completions bash | head`), where kiln ends quietly.
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut Cli::command(), "kiln", &mut script);
    out.write_all(&script)?;
    Ok(Outcome::Success)
}

/// The man page, whose SUBCOMMANDS section lists every subcommand with its
/// summary as `kiln-NAME(1)`; with `--dir`, that page and every subcommand's
/// (nested ones too: `kiln-store-verify.1`), so the references resolve.
pub(super) fn man(args: &ManArgs, out: &mut dyn Write) -> Result<Outcome> {
    match &args.dir {
        None => {
            clap_mangen::Man::new(Cli::command()).render(out)?;
            exit_status_section().to_writer(out)?;
        }
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            clap_mangen::generate_to(Cli::command(), dir)
                .with_context(|| format!("cannot write the man pages into {}", dir.display()))?;
            let main = dir.join("kiln.1");
            let mut page = std::fs::OpenOptions::new()
                .append(true)
                .open(&main)
                .with_context(|| format!("cannot open {}", main.display()))?;
            exit_status_section().to_writer(&mut page)?;
            writeln!(out, "man pages written to {}", dir.display())?;
        }
    }
    Ok(Outcome::Success)
}

/// The EXIT STATUS section clap's page lacks, from kiln's one table of statuses.
fn exit_status_section() -> Roff {
    let mut roff = Roff::new();
    roff.control("SH", ["EXIT STATUS"]);
    for (status, meaning) in EXIT_STATUSES {
        roff.control("TP", []);
        roff.text([bold(status)]);
        roff.text([roman(meaning)]);
    }
    roff
}
