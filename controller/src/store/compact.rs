//! Layout 3 keeps a decided step's decisions as they differ from a base set
//! instead of in full: an inlining benchmark's set names every call site
//! (thousands), and a step changes a few of them. The base is a decision
//! set stored once under its content hash (`set/<hash>`), the experiment's
//! start when the step was written, named in the step's value:
//! `{"checksum":"…","base":"<hash>",…,"decisions":{<the points that differ>},…}`.
//! A base never changes once stored, so a step reads back the same whatever
//! later runs make of its experiment. A step whose set lacks a point of the
//! base (none do today) is written in full, without one.
//!
//! A step whose summaries are its runs' own (what the worker computes from
//! them, as for every step measured in full) is stored without them, marked
//! `"summary_of_runs":true` (after its base): a one-run step's summaries
//! repeat each metric's value eleven times, and they were half its record.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};

use kiln_protocol::message::summarise;
use kiln_protocol::{ContentHash, DecisionSet};

use super::{checksum, layout, StepRecord, Store};

const BASE_OPEN: &[u8] = b"\"base\":\"";
const BASE_CLOSE: &[u8] = b"\",";
const HASH_DIGITS: usize = 64;
const SUMMARY_OF_RUNS: &[u8] = b"\"summary_of_runs\":true,";

/// A base: its hash and its set.
pub(super) type Base = (ContentHash, Arc<DecisionSet>);

/// The bases a store has read or written, and which base each experiment's
/// steps are written against now.
#[derive(Default)]
pub(super) struct Bases {
    /// Each experiment's start, `None` where the store holds no info of it.
    of_experiment: HashMap<String, Option<Base>>,
    /// Sets by hash, as read from `set/<hash>`.
    by_hash: HashMap<ContentHash, Arc<DecisionSet>>,
}

/// The stored value of a decided step: its JSON, its decisions as they
/// differ from `base` where one is given and holds no point the step lacks,
/// its summaries left out where its runs give them, sealed with its checksum.
pub(super) fn seal(record: &StepRecord, base: Option<&Base>) -> Result<Vec<u8>> {
    let base = base.filter(|(_, set)| covers(&record.decisions, set));
    let m = &record.result.measurement;
    let of_runs = !m.summary.is_empty() && summarise(&m.runs) == m.summary;
    let mut written = record.clone();
    let mut body = b"{".to_vec();
    if let Some((hash, set)) = base {
        written.decisions = difference(&record.decisions, set);
        body.extend_from_slice(BASE_OPEN);
        body.extend_from_slice(hash.to_string().as_bytes());
        body.extend_from_slice(BASE_CLOSE);
    }
    if of_runs {
        written.result.measurement.summary.clear();
        body.extend_from_slice(SUMMARY_OF_RUNS);
    }
    body.extend_from_slice(&serde_json::to_vec(&written)?[1..]);
    Ok(checksum::seal(&body))
}

/// The base a stored step's decisions are written against, if any.
pub(super) fn base_of(value: &[u8]) -> Result<Option<ContentHash>> {
    Ok(header(value)?.0)
}

/// A stored step's base, if any, and its fields after it.
fn header(value: &[u8]) -> Result<(Option<ContentHash>, &[u8])> {
    let fields = checksum::fields(value);
    let Some(rest) = fields.strip_prefix(BASE_OPEN) else {
        return Ok((None, fields));
    };
    let (digits, after) = rest
        .split_at_checked(HASH_DIGITS)
        .and_then(|(digits, after)| Some((digits, after.strip_prefix(BASE_CLOSE)?)))
        .context("a stored step names its base set badly")?;
    let hash = ContentHash::try_from(String::from_utf8_lossy(digits).into_owned())
        .map_err(|e| anyhow::anyhow!("a stored step names its base set badly: {e}"))?;
    Ok((Some(hash), after))
}

/// Whether `set` holds every point of `base`.
fn covers(set: &DecisionSet, base: &DecisionSet) -> bool {
    base.0.keys().all(|point| set.0.contains_key(point))
}

/// The points of `set` whose value differs from `base`'s (or that `base` lacks).
fn difference(set: &DecisionSet, base: &DecisionSet) -> DecisionSet {
    DecisionSet(
        set.0
            .iter()
            .filter(|(point, value)| base.0.get(*point) != Some(value))
            .map(|(point, value)| (point.clone(), value.clone()))
            .collect(),
    )
}

/// `base` with the points of `delta` set as it says.
fn apply(base: &DecisionSet, delta: DecisionSet) -> DecisionSet {
    let mut set = base.clone();
    set.0.extend(delta.0);
    set
}

impl Store {
    fn bases(&self) -> std::sync::MutexGuard<'_, Bases> {
        self.bases.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The base `experiment`'s steps are written against now: its start
    /// set, added to `batch` where the store does not hold it yet.
    pub(super) fn base_for(
        &self,
        experiment: &str,
        batch: &mut sled::Batch,
    ) -> Result<Option<Base>> {
        if let Some(known) = self.bases().of_experiment.get(experiment) {
            return Ok(known.clone());
        }
        let base = match self.experiment(experiment)? {
            Some(info) => {
                let set = info.baseline.decisions;
                let hash = set.hash();
                let key = layout::set_key(&hash);
                if !self.db.contains_key(&key)? {
                    batch.insert(key.as_bytes(), serde_json::to_vec(&set)?);
                }
                Some((hash, Arc::new(set)))
            }
            None => None,
        };
        self.bases()
            .of_experiment
            .insert(experiment.to_string(), base.clone());
        Ok(base)
    }

    /// A decided step read from its stored value (under `key`).
    pub fn read_step(&self, key: &str, value: &[u8]) -> Result<StepRecord> {
        let unreadable = || format!("store key {key} holds unreadable data");
        let mut record: StepRecord = serde_json::from_slice(value).with_context(unreadable)?;
        let (base, fields) = header(value).with_context(unreadable)?;
        if let Some(hash) = base {
            let base = self.base(&hash).with_context(unreadable)?;
            record.decisions = apply(&base, std::mem::take(&mut record.decisions));
        }
        if fields.starts_with(SUMMARY_OF_RUNS) {
            let m = &mut record.result.measurement;
            m.summary = summarise(&m.runs);
        }
        Ok(record)
    }

    /// The base set stored under `hash`.
    fn base(&self, hash: &ContentHash) -> Result<Arc<DecisionSet>> {
        if let Some(set) = self.bases().by_hash.get(hash) {
            return Ok(set.clone());
        }
        let set: DecisionSet = self
            .get(&layout::set_key(hash))?
            .with_context(|| format!("its base set {} is missing", layout::set_key(hash)))?;
        let set = Arc::new(set);
        self.bases().by_hash.insert(*hash, set.clone());
        Ok(set)
    }
}

/// A store's base cache, empty.
pub(super) fn no_bases() -> Mutex<Bases> {
    Mutex::new(Bases::default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_protocol::{DecisionValue, SiteId};

    fn set(points: &[(&str, i64)]) -> DecisionSet {
        DecisionSet(
            points
                .iter()
                .map(|(p, v)| (SiteId(p.to_string()), DecisionValue::Int(*v)))
                .collect(),
        )
    }

    #[test]
    fn a_set_is_its_base_with_its_difference_applied() {
        let base = set(&[("a", 1), ("b", 0), ("c", 1)]);
        let step = set(&[("a", 1), ("b", 1), ("c", 1), ("d", 0)]);
        assert!(covers(&step, &base));
        let delta = difference(&step, &base);
        assert_eq!(delta, set(&[("b", 1), ("d", 0)]));
        assert_eq!(apply(&base, delta), step);
        // A set without a point of the base cannot be written against it.
        assert!(!covers(&set(&[("a", 1)]), &base));
    }
}
