//! `kiln store verify`: what is wrong with a store, found by reading all of
//! it. Besides each step's own soundness (its checksum, its hash, its
//! artifacts, its export row), it proves the steps complete: every chain's
//! steps are numbered from 0 without holes up to what its chain state and
//! the high-water file beside the database say it decided. The high-water
//! file outlives the loss of the database's tail (sled then recovers the
//! steps before the damage and the chain states with them, all consistent),
//! so steps lost with it are reported by number.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use anyhow::Result;

use super::blocks::Kind;
use super::marks::{self, Chain};
use super::{checksum, layout, Entry, StepRecord, StepSummary, Store, ROWS_SINCE};

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
    /// What could not be checked, and why.
    pub notes: Vec<String>,
}

/// The steps of one chain found in the store.
#[derive(Default)]
struct Found {
    /// One past the highest step stored.
    end: u32,
    /// Runs of steps missing below `end`, first and last.
    holes: Vec<(u32, u32)>,
}

/// How far a verification has read: steps checked, of about how many.
#[derive(Debug, Clone, Copy)]
pub struct Checked {
    /// Steps read so far.
    pub steps: u64,
    /// The steps the chain states and the high-water file say were decided.
    pub of: u64,
}

/// Steps read between two calls of a verification's progress callback.
const PROGRESS_EVERY: u64 = 10_000;

/// Checks a store's integrity: every chain's steps contiguous up to what was
/// decided, decided, sound, artifacts present, export rows matching their steps.
/// Reads each step once, in bounded memory, calling `progress` every few
/// thousand steps.
pub fn verify(dir: &Path, progress: &mut dyn FnMut(Checked)) -> Result<Verification> {
    let store = Store::open_existing(dir)?;
    let mut v = Verification::default();
    let marks = high_water_marks(dir, &mut v);
    match store.config()? {
        Some(config) => v.campaign = config.name,
        None if marks.is_empty() => {
            anyhow::bail!("{} holds no campaign (no meta/config)", dir.display())
        }
        None => v.problems.push(format!(
            "{}: the database holds no campaign config (meta/config), though the \
             high-water file records decided steps",
            dir.display()
        )),
    }
    let states = store.chain_counts()?;
    // What the chain states say was decided, or the high-water file where it says more.
    let total = |counts: &BTreeMap<Chain, u32>| counts.values().map(|n| u64::from(*n)).sum::<u64>();
    let of = total(&states).max(total(&marks));
    let found = scan_steps(&store, &mut v, &mut |steps| progress(Checked { steps, of }))?;
    let infos: BTreeSet<String> = store.experiment_names()?.into_iter().collect();
    v.counts.insert(
        "experiments",
        infos
            .iter()
            .filter(|e| layout::manual_benchmark(e).is_none())
            .count(),
    );
    let chains: BTreeSet<&Chain> = found
        .keys()
        .chain(states.keys())
        .chain(marks.keys())
        .collect();
    let mut without_info = BTreeSet::new();
    for chain @ (experiment, _) in chains {
        if !infos.contains(experiment) && without_info.insert(experiment) {
            v.problems.push(format!(
                "experiment {experiment}: its info ({}) is missing",
                layout::experiment_key(experiment)
            ));
        }
        let (found, state) = (found.get(chain), states.get(chain).copied());
        check_chain(&mut v, chain, found, state, marks.get(chain).copied());
    }
    *v.counts.entry("undecided results").or_default() += store.undecided();
    Ok(v)
}

/// The decided steps per chain the high-water file records; none, with a note or a problem
/// in `v`, where it is missing or unreadable.
fn high_water_marks(dir: &Path, v: &mut Verification) -> BTreeMap<Chain, u32> {
    match marks::read(&layout::high_water(dir)) {
        Ok(Some(read)) => read.counts,
        Ok(None) => {
            v.notes.push(format!(
                "no high-water file {} (a store written before kiln kept one): \
                 steps are checked against the chain states alone",
                layout::high_water(dir).display()
            ));
            BTreeMap::new()
        }
        Err(e) => {
            v.problems.push(format!("{e:#}"));
            BTreeMap::new()
        }
    }
}

/// Checks one chain: its state is there (chain 0 only for a manual experiment), and its steps
/// `found` agree with the state and the high-water `mark`.
fn check_chain(
    v: &mut Verification,
    (experiment, c): &Chain,
    found: Option<&Found>,
    state: Option<u32>,
    mark: Option<u32>,
) {
    if layout::manual_benchmark(experiment).is_some() {
        if *c != 0 {
            v.problems.push(format!(
                "{experiment}/chain {c}: a manual experiment has chain 0 only"
            ));
        }
    } else if state.is_none() {
        v.problems.push(format!(
            "{experiment}/chain {c}: its chain state ({}) is missing",
            layout::chain_key(experiment, *c)
        ));
    } else {
        *v.counts.entry("chains").or_default() += 1;
    }
    v.problems.extend(chain_problems(
        &format!("{experiment}/chain {c}"),
        found.unwrap_or(&Found::default()),
        state,
        mark,
    ));
}

/// Reads every decided step and its export row: checks each, counts them,
/// and returns which steps each chain holds.
fn scan_steps(
    store: &Store,
    v: &mut Verification,
    progress: &mut dyn FnMut(u64),
) -> Result<BTreeMap<Chain, Found>> {
    let mut found: BTreeMap<Chain, Found> = BTreeMap::new();
    let mut rows = Rows::of(store);
    for (read, item) in store.entries(Kind::Step, "").enumerate() {
        if (read as u64).is_multiple_of(PROGRESS_EVERY) && read > 0 {
            progress(read as u64);
        }
        let Some((key, value)) = readable(item, &mut v.problems) else {
            continue;
        };
        let mut row = rows.take(&key[layout::STEPS.len()..], &mut v.problems)?;
        let key = String::from_utf8_lossy(&key);
        let Some((experiment, chain, step)) = layout::step_of_key(&key) else {
            v.problems
                .push(format!("store key {key}: not a step's key"));
            continue;
        };
        // Keys come in step order within a chain.
        let at = found.entry((experiment.to_string(), chain)).or_default();
        if step > at.end {
            at.holes.push((at.end, step - 1));
        }
        at.end = step + 1;
        let Some(record) = sound_step(store, v, &rows, (&key, &value), &mut row)? else {
            continue;
        };
        let k = &record.key;
        if (k.experiment.as_str(), k.chain, k.step) != (experiment, chain, step) {
            v.problems
                .push(format!("store key {key}: holds the step {k}"));
        }
        v.problems.extend(record_problems(store, &record));
        rows.check(&record, row, &mut v.problems)?;
        count_step(v, experiment, &record);
    }
    rows.rest(&mut v.problems)?;
    Ok(found)
}

/// The step stored under `key` as `value`, where it passes its checksum and reads; else
/// `None`, the problem noted (a damaged step that still reads has its export `row` compared).
fn sound_step(
    store: &Store,
    v: &mut Verification,
    rows: &Rows<'_>,
    (key, value): (&str, &[u8]),
    row: &mut Option<sled::IVec>,
) -> Result<Option<StepRecord>> {
    match checksum::matches(value) {
        Some(true) => {}
        Some(false) => {
            v.problems.push(format!(
                "store key {key}: the step fails its checksum (damaged)"
            ));
            // Where it still reads, its row is compared: the damage may be in a field the
            // export shows.
            if let Ok(record) = store.read_step(key, value) {
                rows.check(&record, row.take(), &mut v.problems)?;
            }
            return Ok(None);
        }
        None => *v.counts.entry("steps without checksum").or_default() += 1,
    }
    match store.read_step(key, value) {
        Ok(record) => Ok(Some(record)),
        Err(e) => {
            v.problems.push(format!(
                "store key {key}: the step is unreadable ({})",
                e.root_cause()
            ));
            Ok(None)
        }
    }
}

/// Counts a step of `experiment` (as its key says): manual, or a chain's (accepted, reused,
/// by outcome).
fn count_step(v: &mut Verification, experiment: &str, record: &StepRecord) {
    if layout::manual_benchmark(experiment).is_some() {
        *v.counts.entry("manual steps").or_default() += 1;
        return;
    }
    *v.counts.entry("steps").or_default() += 1;
    if record.decision.as_ref().is_some_and(|d| d.accepted) {
        *v.counts.entry("accepted").or_default() += 1;
    }
    if record.cached_from.is_some() {
        *v.counts.entry("reused measurements").or_default() += 1;
    }
    *v.outcomes
        .entry(record.result.measurement.outcome.name().to_string())
        .or_default() += 1;
}

/// What is wrong with the steps `found` of the chain `name`, whose state
/// says `state` steps were decided (`None`: a manual experiment's, or lost)
/// and the high-water file `mark`.
fn chain_problems(name: &str, found: &Found, state: Option<u32>, mark: Option<u32>) -> Vec<String> {
    let range = |first: u32, last: u32| match first == last {
        true => format!("step {first}"),
        false => format!("steps {first}-{last}"),
    };
    let mut problems: Vec<String> = found
        .holes
        .iter()
        .map(|&(first, last)| {
            format!(
                "{name}: {} missing below stored step {}",
                range(first, last),
                last + 1
            )
        })
        .collect();
    let (decided, by) = match (state, mark) {
        (Some(s), Some(m)) if s > m => (s, "its chain state"),
        (_, Some(m)) => (m, "the high-water file"),
        (Some(s), None) => (s, "its chain state"),
        (None, None) => (0, ""),
    };
    if decided > found.end {
        problems.push(format!(
            "{name}: {} missing ({decided} decided, as {by} records)",
            range(found.end, decided - 1)
        ));
    }
    if let Some(state) = state.filter(|&s| found.end > s) {
        problems.push(format!(
            "{name}: {} steps stored but the chain state says {state} decided",
            found.end
        ));
    }
    problems
}

/// What is wrong with one stored step itself: its decision, its hash, its artifacts.
fn record_problems(store: &Store, record: &StepRecord) -> Vec<String> {
    let mut problems = Vec::new();
    if record.decision.is_none() {
        problems.push(format!(
            "{}: stored as decided without a decision",
            record.key
        ));
    }
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

/// The export rows (layout 2 on), walked beside the steps: both scans are in
/// the same suffix order, so a row is taken with its step, and a row left
/// between two steps has none.
struct Rows<'a> {
    rows: Option<std::iter::Peekable<Scan<'a>>>,
}

/// A scan of keys and values.
type Scan<'a> = Box<dyn Iterator<Item = Result<Entry>> + Send + 'a>;

/// The entry a scan read, or `None` with the problem noted (a damaged block: what it held
/// past the damage is not read).
fn readable(item: Result<Entry>, problems: &mut Vec<String>) -> Option<Entry> {
    item.map_err(|e| problems.push(format!("{e:#}"))).ok()
}

impl<'a> Rows<'a> {
    fn of(store: &'a Store) -> Rows<'a> {
        let rows = (store.schema() >= ROWS_SINCE).then(|| store.entries(Kind::Row, "").peekable());
        Rows { rows }
    }

    /// Notes what is wrong with `record`'s export row, `row` as taken.
    fn check(
        &self,
        record: &StepRecord,
        row: Option<sled::IVec>,
        problems: &mut Vec<String>,
    ) -> Result<()> {
        if self.rows.is_none() {
            return Ok(());
        }
        match row {
            None => problems.push(format!("{}: no export row", record.key)),
            Some(row) if *row != *StepSummary::of(record).encode()? => {
                problems.push(format!("{}: its export row differs from it", record.key))
            }
            Some(_) => {}
        }
        Ok(())
    }

    /// The row of the step whose key's suffix (after `step/`) is `step`,
    /// noting each row passed on the way as one without its step.
    fn take(&mut self, step: &[u8], problems: &mut Vec<String>) -> Result<Option<sled::IVec>> {
        let Some(rows) = &mut self.rows else {
            return Ok(None);
        };
        let mut stored = None;
        while let Some(item) = rows.next_if(|r| {
            r.as_ref()
                .map_or(true, |(k, _)| &k[layout::ROWS.len()..] <= step)
        }) {
            let Some((k, row)) = readable(item, problems) else {
                continue;
            };
            if &k[layout::ROWS.len()..] == step {
                stored = Some(row);
            } else {
                problems.push(without_step(&k));
            }
        }
        Ok(stored)
    }

    /// Notes the rows after the last step, each one without its step.
    fn rest(self, problems: &mut Vec<String>) -> Result<()> {
        for item in self.rows.into_iter().flatten() {
            if let Some((key, _)) = readable(item, problems) {
                problems.push(without_step(&key));
            }
        }
        Ok(())
    }
}

fn without_step(row_key: &[u8]) -> String {
    format!(
        "{}: a row without its step",
        String::from_utf8_lossy(row_key)
    )
}
