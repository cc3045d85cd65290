//! `kiln store verify`: what is wrong with a store, found by reading all of it.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};

use super::{layout, StepRecord, StepRow, Store, ROWS_SINCE};

/// What `kiln store verify` found.
#[derive(Debug, Clone, Default)]
pub struct Verification {
    /// The campaign's name.
    pub campaign: String,
    /// What the store holds, by kind (experiments, chains, steps, …).
    pub counts: BTreeMap<&'static str, usize>,
    /// Decided steps by outcome.
    pub outcomes: BTreeMap<String, usize>,
    /// Every problem found, each naming where.
    pub problems: Vec<String>,
}

/// Checks a store's integrity: every chain's steps contiguous, decided, hashed
/// right, artifacts present, export rows matching their steps.
pub fn verify(dir: &Path) -> Result<Verification> {
    let store = Store::open_existing(dir)?;
    let config = store
        .config()?
        .with_context(|| format!("{} holds no campaign (no meta/config)", dir.display()))?;
    let mut v = Verification {
        campaign: config.name.clone(),
        ..Verification::default()
    };
    for e in &config.experiments {
        if store.experiment(&e.name)?.is_none() {
            continue;
        }
        *v.counts.entry("experiments").or_default() += 1;
        for c in 0..e.chains {
            let Some(state) = store.chain(&e.name, c)? else {
                continue;
            };
            *v.counts.entry("chains").or_default() += 1;
            let mut expected = 0u32;
            for record in store.steps(Some(&e.name)) {
                let record = record?;
                if record.key.chain != c {
                    continue;
                }
                if record.key.step != expected {
                    v.problems
                        .push(format!("{}: expected step {expected}", record.key));
                }
                expected = record.key.step + 1;
                if record.decision.is_none() {
                    v.problems.push(format!(
                        "{}: stored as decided without a decision",
                        record.key
                    ));
                }
                v.problems.extend(record_problems(&store, &record));
                *v.counts.entry("steps").or_default() += 1;
                if record.decision.as_ref().is_some_and(|d| d.accepted) {
                    *v.counts.entry("accepted").or_default() += 1;
                }
                if record.cached_from.is_some() {
                    *v.counts.entry("reused measurements").or_default() += 1;
                }
                *v.outcomes
                    .entry(record.result.outcome.name().to_string())
                    .or_default() += 1;
            }
            if expected != state.next_decide {
                v.problems.push(format!(
                    "{}/chain {c}: {expected} steps stored but the chain state says {} decided",
                    e.name, state.next_decide
                ));
            }
        }
    }
    let manual = manual_steps(&store, &mut v.problems)?;
    v.problems.extend(store.row_problems()?);
    if manual > 0 {
        v.counts.insert("manual steps", manual);
    }
    *v.counts.entry("undecided results").or_default() += store.undecided();
    Ok(v)
}

/// What is wrong with one stored step itself: its hash, its artifacts.
fn record_problems(store: &Store, record: &StepRecord) -> Vec<String> {
    let mut problems = Vec::new();
    if record.decisions.hash() != record.decision_hash {
        problems.push(format!(
            "{}: decision hash does not match its decisions",
            record.key
        ));
    }
    for (kind, hash) in &record.artifacts {
        if !store.artifact_path(hash).exists() {
            problems.push(format!(
                "{}: {kind} artifact {} missing",
                record.key,
                hash.short()
            ));
        }
    }
    problems
}

/// Checks the steps of every manual experiment: numbered from 0 without
/// gaps, decided, hashed right, artifacts present. Returns how many there
/// are; problems are appended to `problems`.
fn manual_steps(store: &Store, problems: &mut Vec<String>) -> Result<usize> {
    let mut count = 0;
    for name in store.experiment_names()? {
        if layout::manual_benchmark(&name).is_none() {
            continue;
        }
        let mut expected = 0u32;
        for record in store.steps(Some(&name)) {
            let record = record?;
            if record.key.chain != 0 || record.key.step != expected {
                problems.push(format!(
                    "{}: expected chain 0 step {expected} of a manual experiment",
                    record.key
                ));
            }
            expected = record.key.step + 1;
            if record.decision.is_none() {
                problems.push(format!("{}: stored without a decision", record.key));
            }
            problems.extend(record_problems(store, &record));
            count += 1;
        }
    }
    Ok(count)
}

impl Store {
    /// What is wrong with the export rows (layout 2 on): a decided step
    /// without its row or with a row that differs from it, a row without its
    /// step.
    pub fn row_problems(&self) -> Result<Vec<String>> {
        let mut problems = Vec::new();
        if self.schema() < ROWS_SINCE {
            return Ok(problems);
        }
        // Both scans are in suffix order: walk them side by side.
        let suffix =
            |key: &[u8], prefix: &str| String::from_utf8_lossy(&key[prefix.len()..]).into_owned();
        let mut rows = self.scan_bounded(layout::ROWS.to_string()).peekable();
        for item in self.scan_bounded(layout::STEPS.to_string()) {
            let (key, json) = item?;
            let step = suffix(&key, layout::STEPS);
            let record: StepRecord = serde_json::from_slice(&json)
                .with_context(|| format!("store key step/{step} holds unreadable data"))?;
            let mut stored = None;
            while let Some(item) = rows.next_if(|r| {
                r.as_ref()
                    .map_or(true, |(k, _)| suffix(k, layout::ROWS) <= step)
            }) {
                let (k, row) = item?;
                if suffix(&k, layout::ROWS) == step {
                    stored = Some(row);
                } else {
                    problems.push(format!(
                        "row/{}: a row without its step",
                        suffix(&k, layout::ROWS)
                    ));
                }
            }
            match stored {
                None => problems.push(format!("{}: no export row", record.key)),
                Some(row) if *row != *StepRow::of(&record).encode()? => {
                    problems.push(format!("{}: its export row differs from it", record.key))
                }
                Some(_) => {}
            }
        }
        for item in rows {
            let k = item?.0;
            problems.push(format!(
                "row/{}: a row without its step",
                suffix(&k, layout::ROWS)
            ));
        }
        Ok(problems)
    }
}
