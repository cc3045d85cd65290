//! Worker losses charged to what the lost workers ran: a decision set of a benchmark's
//! sources (or its discovery), whichever step or job carried it. A set that has cost a
//! worker runs alone from then on, so that a further loss is its own; once it has cost
//! `step-losses` workers in a row, every job that brings it again is answered failed without
//! running, and no worker sits out a quarantine for it. A set that runs to its end is
//! acquitted: its count starts again.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use kiln_protocol::ContentHash;

use super::{Job, Work};

/// What a loss is charged to: the benchmark, its sources and the decisions (none for a
/// discovery).
type Charge = (String, ContentHash, Option<ContentHash>);

/// The pool's ledger of losses per decision set, shared by every slot of every worker.
#[derive(Debug, Clone, Default)]
pub(super) struct Ledger(Arc<Mutex<HashMap<Charge, Losses>>>);

/// The workers a set cost, and why the last one was lost.
#[derive(Debug, Clone, Default)]
pub(super) struct Losses {
    pub(super) times: u32,
    pub(super) last: String,
}

impl Ledger {
    /// The workers `job`'s decision set has cost so far.
    pub(super) fn losses<K>(&self, job: &Job<K>) -> Losses {
        let ledger = self.0.lock().expect("not poisoned");
        ledger.get(&charge(job)).cloned().unwrap_or_default()
    }

    /// Forgets what `job`'s decision set cost: it ran to its end, so the losses it was charged
    /// were not its own (a flaky link, a loaded machine), and must not add up, step after step,
    /// to failing a set that only ever ran beside a poison or through an outage.
    pub(super) fn acquit<K>(&self, job: &Job<K>) {
        self.0.lock().expect("not poisoned").remove(&charge(job));
    }

    /// Charges the loss of a worker, for `reason`, to `job`'s decision set: its losses now.
    pub(super) fn charge<K>(&self, job: &Job<K>, reason: String) -> Losses {
        let mut ledger = self.0.lock().expect("not poisoned");
        let losses = ledger.entry(charge(job)).or_default();
        losses.times += 1;
        losses.last = reason;
        losses.clone()
    }
}

fn charge<K>(job: &Job<K>) -> Charge {
    match &job.work {
        Work::Discover(spec) => (spec.name.clone(), job.bundle.hash, None),
        Work::Step(request) => (
            request.benchmark.name.clone(),
            job.bundle.hash,
            Some(request.decisions.hash()),
        ),
    }
}
