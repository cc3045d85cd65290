//! `kiln store verify`: a store's integrity, as counts and problems;
//! `kiln store migrate`: an older store brought to the current layout.

use std::io::Write;
use std::time::{Duration, Instant};

use anyhow::Result;
use kiln_protocol::quantity;

use crate::cli::VerifyArgs;
use crate::error::Outcome;
use crate::store::{self, layout, Checked, Store};

/// A verification that has taken this long says how far it has read, and again as often.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

pub(super) fn verify(args: &VerifyArgs, out: &mut dyn Write) -> Result<Outcome> {
    // A week's store takes minutes to read: say how far it is, on stderr.
    let mut said = Instant::now();
    let mut progress = |c: Checked| {
        if said.elapsed() >= PROGRESS_EVERY {
            said = Instant::now();
            let share = match c.of {
                0 => String::new(),
                of => format!(
                    " of {} ({:.0} %)",
                    quantity::count(of as f64),
                    100.0 * c.steps as f64 / of as f64
                ),
            };
            eprintln!(
                "kiln: {} steps read{share}",
                quantity::count(c.steps as f64)
            );
        }
    };
    let v = store::verify(&args.store, &mut progress)?;
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

pub(super) fn migrate(args: &VerifyArgs, out: &mut dyn Write) -> Result<Outcome> {
    let db = layout::db(&args.store);
    let before = store::bytes_under(&db);
    let started = Instant::now();
    let store = Store::open_to_migrate(&args.store)?;
    let Some(from) = store.migrated_from() else {
        writeln!(
            out,
            "store {} is of the current layout ({}): nothing to do",
            args.store.display(),
            store.schema()
        )?;
        return Ok(Outcome::Success);
    };
    drop(store);
    writeln!(
        out,
        "store {}: layout {from} → {} in {:.1} s; database {} → {}",
        args.store.display(),
        store::SCHEMA_VERSION,
        started.elapsed().as_secs_f64(),
        quantity::measure(before as f64, "bytes"),
        quantity::measure(store::bytes_under(&db) as f64, "bytes"),
    )?;
    Ok(Outcome::Success)
}
