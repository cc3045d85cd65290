//! `kiln store verify`: a store's integrity, as counts and problems.

use std::io::Write;

use anyhow::Result;

use crate::cli::VerifyArgs;
use crate::error::Outcome;
use crate::store;

pub(super) fn verify(args: &VerifyArgs, out: &mut dyn Write) -> Result<Outcome> {
    let v = store::verify(&args.store)?;
    writeln!(
        out,
        "store {} (campaign {})",
        args.store.display(),
        v.campaign
    )?;
    for (k, n) in &v.counts {
        writeln!(out, "  {k:<22} {n}")?;
    }
    for (k, n) in &v.outcomes {
        writeln!(out, "  outcome {k:<14} {n}")?;
    }
    for note in &v.notes {
        writeln!(out, "note: {note}")?;
    }
    if v.problems.is_empty() {
        writeln!(out, "ok: no problems found")?;
        return Ok(Outcome::Success);
    }
    for p in &v.problems {
        writeln!(out, "problem: {p}")?;
    }
    Ok(Outcome::Failure)
}
