//! `kiln-bench store-size`: the room a real campaign's decided step takes in
//! a store of the current layout. Its steps are written again `copies` times,
//! each time after the last in its chain (so that each chain grows long, as in a
//! week's campaign, and its steps fill blocks), one step a batch and flushed as a
//! campaign decides them, into a fresh store; a second fresh store gets the same
//! experiments without steps; the difference in bytes over the steps written
//! is a step's share (its record, export row, index entry and the pages and
//! garbage they make), free of what the store keeps once (experiments,
//! discoveries). A third gets the same steps a thousand a batch: their room
//! without the garbage of writing each twice.

use std::collections::HashMap;
use std::path::Path;

use anyhow::Result;
use kiln_controller::store::{bytes_under, layout, Store};

/// What `store-size` measured.
pub struct Size {
    /// Steps written (the store's steps that matched, times the copies).
    pub steps: u64,
    /// Bytes a step, written one a batch as a campaign writes them.
    pub bytes_per_step: f64,
    /// Bytes a step, the same steps written a thousand a batch (as a
    /// migration writes them): what they take without the garbage of their
    /// first writes.
    pub packed_bytes_per_step: f64,
}

/// Steps a batch in the packed store.
const PACKED_BATCH: usize = 1000;

/// Measures the steps of the store in `from` whose experiment's name holds
/// `only`, each written `copies` times, in fresh stores under `work`.
pub fn measure(from: &Path, only: &str, copies: u32, work: &Path) -> Result<Size> {
    let from = Store::open_existing(from)?;
    let dirs = ["without-steps", "with-steps", "packed"].map(|name| work.join(name));
    let stores = dirs
        .iter()
        .map(|dir| fresh_store(&from, dir))
        .collect::<Result<Vec<_>>>()?;
    let records = from
        .steps(None)
        .filter(|r| r.as_ref().map_or(true, |r| r.key.experiment.contains(only)))
        .collect::<Result<Vec<_>>>()?;
    // Each chain's length, the steps a copy puts after those before it.
    let mut stride: HashMap<(&str, u32), u32> = HashMap::new();
    for r in &records {
        let length = stride.entry((&r.key.experiment, r.key.chain)).or_default();
        *length = (*length).max(r.key.step + 1);
    }
    let (mut steps, mut pending) = (0u64, Vec::new());
    for copy in 0..copies {
        for record in &records {
            let mut written = record.clone();
            written.key.step += copy * stride[&(&*record.key.experiment, record.key.chain)];
            stores[1].import_steps(std::slice::from_ref(&written))?;
            stores[1].flush()?;
            steps += 1;
            pending.push(written);
            if pending.len() == PACKED_BATCH {
                stores[2].import_steps(&std::mem::take(&mut pending))?;
            }
        }
    }
    stores[2].import_steps(&pending)?;
    stores[2].flush()?;
    drop(stores);
    let bytes = dirs.map(|dir| bytes_under(&layout::db(&dir)) as f64);
    let per_step = |with: f64| (with - bytes[0]) / steps.max(1) as f64;
    Ok(Size {
        steps,
        bytes_per_step: per_step(bytes[1]),
        packed_bytes_per_step: per_step(bytes[2]),
    })
}

/// A fresh store in `dir` holding `from`'s experiments.
fn fresh_store(from: &Store, dir: &Path) -> Result<Store> {
    anyhow::ensure!(!dir.exists(), "{} exists already", dir.display());
    let store = Store::open(dir)?;
    for item in from.experiments() {
        let (name, info) = item?;
        store.put_experiment(&name, &info)?;
    }
    Ok(store)
}
