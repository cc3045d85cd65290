//! `kiln-bench store-size`: the room a real campaign's decided step takes in
//! a store of the current layout. Its steps are written again, each `copies`
//! times under other chains, one step a batch and flushed as a campaign
//! decides them, into a fresh store; a second fresh store gets the same
//! experiments without steps; the difference in bytes over the steps written
//! is a step's share (its record, export row, index entry and the pages and
//! garbage they make), free of what the store keeps once (experiments,
//! discoveries).

use std::path::Path;

use anyhow::Result;
use kiln_controller::store::{bytes_under, layout, Store};

/// What `store-size` measured.
pub struct Size {
    /// Steps written (the store's steps that matched, times the copies).
    pub steps: u64,
    /// Bytes a step.
    pub bytes_per_step: f64,
}

/// Measures the steps of the store in `from` whose experiment's name holds
/// `only`, each written `copies` times, in fresh stores under `work`.
pub fn measure(from: &Path, only: &str, copies: u32, work: &Path) -> Result<Size> {
    let from = Store::open_existing(from)?;
    let (bare, full) = (work.join("without-steps"), work.join("with-steps"));
    for dir in [&bare, &full] {
        anyhow::ensure!(!dir.exists(), "{} exists already", dir.display());
        let store = Store::open(dir)?;
        for item in from.experiments() {
            let (name, info) = item?;
            store.put_experiment(&name, &info)?;
        }
    }
    let store = Store::open(&full)?;
    let mut steps = 0u64;
    for record in from.steps(None) {
        let record = record?;
        if !record.key.experiment.contains(only) {
            continue;
        }
        for copy in 0..copies {
            let mut written = record.clone();
            written.key.chain = copy;
            store.import_steps(&[written])?;
            store.flush()?;
            steps += 1;
        }
    }
    drop(store);
    let extra = bytes_under(&layout::db(&full)) as f64 - bytes_under(&layout::db(&bare)) as f64;
    Ok(Size {
        steps,
        bytes_per_step: extra / steps.max(1) as f64,
    })
}
