//! The campaign store: one sled database per campaign, plus an artifacts
//! folder beside it. Everything kiln keeps goes through [`Store`]; the names
//! it keeps them under are in [`layout`], the records in [`records`].
//!
//! Values are JSON, but for the export rows; sled compresses the pages that
//! hold them, and a decided step keeps only the decisions that differ from
//! its experiment's start ([`compact`]). A decided step and its chain's
//! new state are written in one atomic batch and flushed before the chain
//! moves on, so a `kill -9` at any moment leaves either the step decided (and
//! the chain past it) or neither.
//!
//! Every flush is followed by the chains' step counts appended to the
//! high-water file beside the database ([`marks`]), which `kiln store verify`
//! checks the stored steps against.
//!
//! Layout 1 had no export rows, layout 2 no compression, layouts up to 4 a key
//! a step ([`blocks`] keeps them many to a key). kiln reads an older
//! store as it is (the export of a layout-1 store reads the steps' JSON),
//! and a command that writes into one migrates it first ([`migrate`]).
//!
//! This is the lowest layer of the controller: it imports from no other
//! module of it, and knows nothing of workers, searches or presentation.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{Context, Result};
use serde::{de::DeserializeOwned, Deserialize, Serialize};

use kiln_protocol::message::{Capabilities, StepResult};
use kiln_protocol::{CampaignConfig, ContentHash, Metric};

mod aside;
mod base_set;
pub mod blocks;
mod checksum;
mod compact;
pub mod kept;
pub mod layout;
mod open;
pub use aside::move_aside;
pub use open::{open_sled as open_database, pages_compressed};
mod marks;
mod migrate;
mod profile;
mod progress;
mod records;
mod step_metrics;
pub(crate) mod summary;
mod verify;

use blocks::Kind;
pub use layout::{manual_benchmark, manual_experiment};
pub use open::OpenError;
pub use progress::{ChainProgress, ProgressPoint};
pub use records::{
    context_name, time_ratio, ChainState, Coverage, Decision, Effect, EffectCount, ExperimentInfo,
    Flip, Incumbent, Proposal, Raced, Reference, StepKey, StepKind, StepRecord,
};
pub use summary::StepSummary;
pub use verify::{verify, Checked, Verification};

/// Version of the store's layout, bumped on incompatible changes; this kiln
/// reads every version up to it. 2: an export row beside every decided step.
/// 3: compressed pages, steps' decisions against a base set. 4: a step's summaries
/// left out where its runs give them (a layout-3 store is one as it is). 5: decided
/// steps and their rows kept many to a key ([`blocks`]). 6: a step's points by
/// number in its start, its functions against its experiment's reference profile
/// ([`profile`]; a layout-5 store reads as it is). 7: a chain's state written
/// against its experiment's start as its steps are (a layout-6 store is one as it is:
/// its states are rewritten as its chains go on).
pub const SCHEMA_VERSION: u32 = 7;

/// The oldest layout whose stores are of the current one as they are: a writer
/// only records the new version. (A layout-5 store reads as one of layout 6,
/// but is migrated so that its steps take layout 6's room.)
const SAME_AS_CURRENT_FROM: u32 = 6;

/// The first layout with an export row beside every decided step.
const ROWS_SINCE: u32 = 2;

/// sled's page cache. Its default (1 GiB) lets a scan of a big store (an
/// export) grow the controller by the size of the store; a campaign's working
/// set (chain states, the latest steps) is far smaller.
const CACHE_BYTES: u64 = 32 << 20;

/// sled's page cache for a database with compressed pages: sled counts a
/// page by its size on disk, about a sixth of its size in memory here, so
/// the same bound in memory is a sixth of [`CACHE_BYTES`].
const COMPRESSED_CACHE_BYTES: u64 = CACHE_BYTES / 6;

/// zstd's level for the database's pages. Level 9 took about a third of the
/// controller's CPU a step (perf, a hundred SSH workers); level 3 took 27 %
/// less controller CPU a step (1.46 ms against 2.0, a 4,000-step no-op
/// campaign), built the bench's synthetic store twice as fast, in as much
/// room (912 against 944 bytes a step at 50,000 steps), and a real
/// campaign's store 13 % larger.
const COMPRESSION_LEVEL: i32 = 3;

/// Reads of each key a scan adds, so that sled's cache evicts the pages it passed
/// ([`Store::scan_bounded`]): a leaf holds up to 16 keys, and at 64 accesses a shard
/// evicts, so four reads of each block fill a shard's batch within the page.
const TOUCHES_A_BLOCK: usize = 4;
/// As [`TOUCHES_A_BLOCK`] for a store of a key a step (layouts up to 4).
const TOUCHES_A_STEP: usize = 1;

/// Why an experiment could not be prepared; the campaign went on without it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotPrepared {
    /// What went wrong, as the user reads it.
    pub why: String,
    /// Whether the user's input is at fault (its sources), not a build or a
    /// worker: `kiln run` then exits as for bad input.
    pub bad_input: bool,
}

/// An open campaign store.
pub struct Store {
    db: sled::Db,
    /// The copy of a read-only store's database that `db` is (removed on drop).
    _copy: Option<tempfile::TempDir>,
    dir: PathBuf,
    /// The chains' step counts for the high-water file; `None` for a reading command.
    marks: Option<Mutex<marks::Marks>>,
    /// `metrics/<experiment>` of each experiment written to: the set, and
    /// whether the store holds it already.
    metrics: Mutex<HashMap<String, (BTreeSet<Metric>, bool)>>,
    /// The layout version (`meta/schema`).
    layout: Mutex<u32>,
    /// The decision sets steps are written against ([`compact`]).
    bases: Mutex<compact::Bases>,
    /// The layout this process migrated the store from, if it did.
    migrated_from: Option<u32>,
    /// Held from reading the blocks a write changes until it is applied.
    writing: Mutex<()>,
    /// The number the next set each chain writes takes ([`blocks`]), once read.
    set_numbers: Mutex<HashMap<(String, u32), u32>>,
}

/// Unix time in milliseconds.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Store {
    /// The counts of the high-water file, which a writer appends to: one
    /// line per chain again where counts were appended, and for a store
    /// written before kiln kept the file, the counts of its chain states and
    /// manual experiments (the best it has).
    fn load_marks(&self) -> Result<BTreeMap<marks::Chain, u32>> {
        let path = layout::high_water(&self.dir);
        let counts = match marks::read(&path)? {
            Some(read) if read.lines == read.counts.len() => return Ok(read.counts),
            Some(read) => read.counts,
            None => self.decided_counts()?,
        };
        marks::rewrite(&path, &layout::high_water_tmp(&self.dir), &counts)?;
        Ok(counts)
    }

    /// How many steps each chain's state says it decided, and how many steps
    /// each manual experiment holds.
    fn decided_counts(&self) -> Result<BTreeMap<marks::Chain, u32>> {
        let mut counts = self.chain_counts()?;
        for name in self.experiment_names()? {
            if layout::manual_benchmark(&name).is_some() {
                let steps = self.chain_steps(&name, 0) as u32;
                counts.insert((name, 0), steps);
            }
        }
        Ok(counts)
    }

    /// How many steps each chain's state says it decided.
    fn chain_counts(&self) -> Result<BTreeMap<marks::Chain, u32>> {
        let mut counts = BTreeMap::new();
        for item in self.db.scan_prefix(layout::CHAINS) {
            let (key, value) = item?;
            let key = String::from_utf8_lossy(&key);
            let state = compact::read_chain(&self.db, &self.bases, &key, &value)?;
            let (experiment, chain) = layout::chain_of_key(&key)
                .with_context(|| format!("store key {key} names no chain"))?;
            counts.insert((experiment.to_string(), chain), state.next_decide);
        }
        Ok(counts)
    }

    /// Notes a chain's step count for the high-water file (a writer's).
    fn mark(&self, experiment: &str, chain: u32, count: u32) {
        if let Some(marks) = &self.marks {
            let mut marks = marks.lock().unwrap_or_else(|p| p.into_inner());
            marks.stage(experiment, chain, count);
        }
    }

    fn layout(&self) -> std::sync::MutexGuard<'_, u32> {
        self.layout.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The store's layout version (`meta/schema`).
    pub fn schema(&self) -> u32 {
        *self.layout()
    }

    /// Records this process as the store's holder (for the refusal message of others).
    pub fn claim(&self) -> Result<()> {
        let text = format!("pid {} on {}", std::process::id(), this_host());
        let holder = layout::holder(&self.dir);
        fs::write(&holder, text).with_context(|| format!("cannot write {}", holder.display()))?;
        Ok(())
    }

    /// The database itself: for benchmarks that copy a store as an older
    /// kiln wrote it.
    pub fn database(&self) -> &sled::Db {
        &self.db
    }

    /// The store's folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The campaign config stored with the steps, if any.
    pub fn config(&self) -> Result<Option<CampaignConfig>> {
        let Some(text) = self.get::<String>(layout::CONFIG)? else {
            return Ok(None);
        };
        CampaignConfig::parse(&text, "stored config")
            .map(Some)
            .map_err(|e| {
                anyhow::anyhow!(
                    "the config stored in {} no longer parses: {e}",
                    self.dir.display()
                )
            })
    }

    /// Records the campaign's config (its normalized text), and the store's
    /// creation time when the store has none yet.
    pub fn put_config(&self, text: &str, now_ms: u64) -> Result<()> {
        if self.get::<u64>(layout::CREATED_MS)?.is_none() {
            self.put(layout::CREATED_MS, &now_ms)?;
        }
        self.put(layout::CONFIG, &text)
    }

    /// The names of the store's experiments, in key order.
    pub fn experiment_names(&self) -> Result<Vec<String>> {
        self.scan::<serde::de::IgnoredAny>(layout::EXPERIMENTS)
            .map(|item| item.map(|(key, _)| layout::experiment_of_key(&key).to_string()))
            .collect()
    }

    /// Steps decided in `experiment`'s chains when the store was opened for
    /// writing (from its high-water marks); 0 for a reader.
    pub fn decided_at_open(&self, experiment: &str) -> u64 {
        let Some(marks) = &self.marks else { return 0 };
        let marks = marks.lock().unwrap_or_else(|p| p.into_inner());
        marks
            .written()
            .iter()
            .filter(|((name, _), _)| name == experiment)
            .map(|(_, &count)| u64::from(count))
            .sum()
    }

    /// Why `name` names no experiment of the store, with the names it holds.
    pub fn no_such_experiment(&self, name: &str) -> String {
        let held = self.experiment_names().unwrap_or_default();
        format!(
            "store {} holds no experiment named '{name}'; it holds: {}",
            self.dir.display(),
            match held.is_empty() {
                true => "none".to_string(),
                false => held.join(", "),
            }
        )
    }

    /// Every experiment of the store with its info, in name order.
    pub fn experiments(&self) -> impl Iterator<Item = Result<(String, ExperimentInfo)>> + '_ {
        self.scan::<ExperimentInfo>(layout::EXPERIMENTS)
            .map(|item| item.map(|(key, info)| (layout::experiment_of_key(&key).to_string(), info)))
    }

    /// Reads a JSON value.
    fn get<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>> {
        match self.db.get(key)? {
            None => Ok(None),
            Some(bytes) => {
                Ok(Some(serde_json::from_slice(&bytes).with_context(|| {
                    format!("store key {key} holds unreadable data")
                })?))
            }
        }
    }

    /// Writes a JSON value and flushes.
    fn put<T: Serialize>(&self, key: &str, value: &T) -> Result<()> {
        self.db.insert(key, serde_json::to_vec(value)?)?;
        self.flush()
    }

    /// Every value under a key prefix, in key order.
    fn scan<T: DeserializeOwned>(
        &self,
        prefix: &str,
    ) -> impl Iterator<Item = Result<(String, T)>> + '_ {
        self.db.scan_prefix(prefix).map(|item| {
            let (k, v) = item?;
            let key = String::from_utf8_lossy(&k).into_owned();
            let value = serde_json::from_slice(&v)
                .with_context(|| format!("store key {key} holds unreadable data"))?;
            Ok((key, value))
        })
    }

    /// Number of decided steps of one chain (of a manual experiment: its steps).
    pub fn chain_steps(&self, experiment: &str, chain: u32) -> usize {
        let suffix = layout::chain_suffix(experiment, chain);
        self.entries(Kind::Step, &suffix).count()
    }

    /// Number of measured steps not decided yet.
    pub fn undecided(&self) -> usize {
        self.db.scan_prefix(layout::RESULTS).count()
    }

    /// The stored experiment info.
    pub fn experiment(&self, name: &str) -> Result<Option<ExperimentInfo>> {
        self.get(&layout::experiment_key(name))
    }

    /// Stores experiment info.
    pub fn put_experiment(&self, name: &str, info: &ExperimentInfo) -> Result<()> {
        self.db.remove(layout::failed_key(name))?;
        self.put(&layout::experiment_key(name), info)
    }

    /// Records why an experiment could not be prepared (durably: the
    /// campaign goes on without it).
    pub fn put_failed(&self, name: &str, failed: &NotPrepared) -> Result<()> {
        self.put(&layout::failed_key(name), failed)?;
        self.flush()
    }

    /// Experiments whose preparation failed, with why.
    pub fn failed_experiments(&self) -> Result<BTreeMap<String, NotPrepared>> {
        self.scan::<NotPrepared>(layout::FAILED)
            .map(|item| item.map(|(key, why)| (key[layout::FAILED.len()..].to_string(), why)))
            .collect()
    }

    /// The stored chain state, with its course and proposals counted from
    /// its steps' rows where it was stored before kiln kept them.
    pub fn chain(&self, experiment: &str, chain: u32) -> Result<Option<ChainState>> {
        self.chain_as(experiment, chain, true)
    }

    /// As [`Store::chain`] for a view: the sets it measured are counted, not read, where
    /// its state counts them.
    pub fn chain_view(&self, experiment: &str, chain: u32) -> Result<Option<ChainState>> {
        self.chain_as(experiment, chain, false)
    }

    fn chain_as(&self, experiment: &str, chain: u32, sets: bool) -> Result<Option<ChainState>> {
        let Some(mut state) = self.read_chain(&layout::chain_key(experiment, chain))? else {
            return Ok(None);
        };
        if state.sets.is_empty() && (sets || state.set_count == 0) {
            state.sets = self.chain_sets(experiment, chain)?;
        } else if !state.sets.is_empty() && self.marks.is_some() {
            // An older kiln kept them inside the state: a controller moves them out (a view
            // writes nothing), so that the state it writes at each step leaves them out.
            self.put_chain(experiment, chain, &mut state)?;
        }
        if state.progress.is_none() || state.proposals.is_none() {
            let start = self
                .experiment(experiment)?
                .and_then(|info| info.baseline.objective())
                .unwrap_or(f64::INFINITY);
            let mut replay = progress::Replay::new(start);
            for stored in self.summaries(&layout::chain_suffix(experiment, chain)) {
                replay.push(&stored?.row()?);
            }
            let (progress, proposals) = replay.finish();
            state.progress = Some(progress);
            state.proposals = Some(proposals);
        }
        Ok(Some(state))
    }

    /// The sets chain `chain` measured, with their objectives, as stored apart from its state
    /// (a set written again, its later entry).
    fn chain_sets(&self, experiment: &str, chain: u32) -> Result<BTreeMap<ContentHash, Vec<f64>>> {
        self.entries(Kind::Set, &layout::chain_suffix(experiment, chain))
            .map(|item| Ok(serde_json::from_slice(&item?.1)?))
            .collect()
    }

    /// How many sets chain `chain` wrote: one past the number of its last, in its last block
    /// or after it, one a key.
    fn sets_written(&self, experiment: &str, chain: u32) -> Result<u32> {
        let suffix = layout::chain_suffix(experiment, chain);
        let after = |number: Result<u32>| number.map(|n| n + 1);
        let loose = format!("{}{suffix}", Kind::Set.entry_prefix());
        if let Some(last) = self.db.scan_prefix(loose).next_back() {
            return after(blocks::number_of(&last?.0));
        }
        let packed = format!("{}{suffix}", Kind::Set.block_prefix());
        match self.db.scan_prefix(packed).next_back() {
            Some(last) => match blocks::expand(Kind::Set, last?).pop() {
                Some(entry) => after(blocks::number_of(&entry?.0)),
                None => Ok(0),
            },
            None => Ok(0),
        }
    }

    /// The number of the next set chain `chain` writes: one past the last it wrote.
    fn next_set_number(&self, experiment: &str, chain: u32) -> Result<u32> {
        let mut numbers = self.set_numbers.lock().unwrap_or_else(|p| p.into_inner());
        let id = (experiment.to_string(), chain);
        let next = match numbers.get(&id) {
            Some(next) => *next,
            None => self.sets_written(experiment, chain)?,
        };
        numbers.insert(id, next + 1);
        Ok(next)
    }

    /// A decided step's export row, if stored (a layout-1 store: its JSON).
    pub fn step_row(&self, key: &StepKey) -> Result<Option<StoredSummary>> {
        Ok(match self.schema() >= ROWS_SINCE {
            true => self
                .value(Kind::Row, &layout::row_key(key))?
                .map(StoredSummary::Row),
            false => self
                .value(Kind::Step, &layout::step_key(key))?
                .map(StoredSummary::Json),
        })
    }

    /// A decided step's value of `kind`, named by its key of one a step (`step/…`, `row/…`):
    /// under that key (layouts up to 4, a block not yet complete), or in its block.
    fn value(&self, kind: Kind, key: &str) -> Result<Option<sled::IVec>> {
        blocks::get(&self.db, kind, key)
    }

    /// The decided step with the lowest objective a chain measured, if it
    /// measured below `baseline`: its best, as every command means it.
    pub fn best_step(
        &self,
        experiment: &str,
        chain: u32,
        state: &ChainState,
        baseline: f64,
    ) -> Result<Option<StepRecord>> {
        let Some(lowest) = state.progress.as_ref().and_then(|p| p.lowest) else {
            return Ok(None);
        };
        if lowest.objective >= baseline {
            return Ok(None);
        }
        let key = StepKey {
            experiment: experiment.to_string(),
            chain,
            step: lowest.step,
        };
        self.step(&key)
    }

    /// Stores a chain's state with every set it measured (its initial state, or one an older
    /// kiln stored with its sets inside, as a campaign resumes it), flushed.
    pub fn put_chain(&self, experiment: &str, chain: u32, state: &mut ChainState) -> Result<()> {
        self.apply_with_blocks(sled::Batch::default(), |batch, blocks| {
            let measured: Vec<ContentHash> = state.sets.keys().copied().collect();
            self.insert_chain(batch, blocks, (experiment, chain), state, measured.iter())
        })?;
        self.mark(experiment, chain, state.next_decide);
        self.flush()
    }

    /// Stores a measured, undecided step (flushed).
    pub fn put_result(&self, record: &StepRecord) -> Result<()> {
        self.put_result_unflushed(record)?;
        self.flush()
    }

    /// [`put_result`](Self::put_result) without the flush (group commit:
    /// durable once a later [`flush`](Self::flush) returns). Sealed as a decided
    /// step is, against its experiment's start: a program's whole set in full
    /// was hundreds of kilobytes a step, written and soon removed.
    pub fn put_result_unflushed(&self, record: &StepRecord) -> Result<()> {
        let mut batch = sled::Batch::default();
        let starts = self.starts_for(&record.key.experiment, &mut batch)?;
        let sealed = compact::seal(record, &starts)?;
        batch.insert(layout::result_key(&record.key).as_bytes(), sealed);
        self.db.apply_batch(batch)?;
        Ok(())
    }

    /// A measured, undecided step, if stored (as it was sealed, or in full as
    /// kilns before layout 6 stored it).
    pub fn result(&self, key: &StepKey) -> Result<Option<StepRecord>> {
        let key = layout::result_key(key);
        match self.db.get(&key)? {
            None => Ok(None),
            Some(value) => self.read_step(&key, &value).map(Some),
        }
    }

    /// A decided step, if stored.
    pub fn step(&self, key: &StepKey) -> Result<Option<StepRecord>> {
        let key = layout::step_key(key);
        match self.value(Kind::Step, &key)? {
            None => Ok(None),
            Some(value) => self.read_step(&key, &value).map(Some),
        }
    }

    /// Atomically records a decided step and the chain's new state, then flushes. (The state
    /// is borrowed mutably to be written in place: [`compact::seal_chain`].)
    pub fn decide(&self, record: &StepRecord, chain: &mut ChainState) -> Result<()> {
        self.decide_unflushed(record, chain)?;
        self.flush()
    }

    /// [`decide`](Self::decide) without the flush: the batch is atomic, and
    /// durable once a later [`flush`](Self::flush) returns (group commit, bulk imports).
    pub fn decide_unflushed(&self, record: &StepRecord, chain: &mut ChainState) -> Result<()> {
        let mut batch = sled::Batch::default();
        batch.remove(layout::result_key(&record.key).as_bytes());
        let id = (record.key.experiment.as_str(), record.key.chain);
        self.apply_with_blocks(batch, |batch, blocks| {
            self.insert_step(record, batch, blocks)?;
            let measured = std::iter::once(&record.decision_hash);
            self.insert_chain(batch, blocks, id, chain, measured)
        })?;
        self.mark(&record.key.experiment, record.key.chain, chain.next_decide);
        Ok(())
    }

    /// Applies `batch` with what `fill` adds to it and to the blocks it changes, atomically:
    /// the blocks are read and written whole with no other write between.
    fn apply_with_blocks(
        &self,
        mut batch: sled::Batch,
        fill: impl FnOnce(&mut sled::Batch, &mut blocks::Pending) -> Result<()>,
    ) -> Result<()> {
        let _writing = self.writing.lock().unwrap_or_else(|p| p.into_inner());
        let mut blocks = blocks::Pending::default();
        fill(&mut batch, &mut blocks)?;
        blocks.into_batch(&mut batch)?;
        self.db.apply_batch(batch)?;
        Ok(())
    }

    /// Adds to `batch` chain `chain`'s state and to `blocks` the sets of `sets` it measured,
    /// each under the chain's next number.
    fn insert_chain<'a>(
        &self,
        batch: &mut sled::Batch,
        blocks: &mut blocks::Pending,
        (experiment, chain): (&str, u32),
        state: &mut ChainState,
        sets: impl Iterator<Item = &'a ContentHash>,
    ) -> Result<()> {
        let starts = self.starts_for(experiment, batch)?;
        batch.insert(
            layout::chain_key(experiment, chain).as_bytes(),
            compact::seal_chain(state, &starts)?,
        );
        for hash in sets {
            if let Some(samples) = state.sets.get(hash) {
                let n = self.next_set_number(experiment, chain)?;
                let entry = serde_json::to_vec(&(hash, samples))?;
                blocks.set(
                    &self.db,
                    &layout::chain_set_entry(experiment, chain, n),
                    Some(&entry),
                )?;
            }
        }
        Ok(())
    }

    /// Adds a decided step to `blocks` (its record and its export row) and to `batch`
    /// the experiment's metrics if it brings a new one.
    fn insert_step(
        &self,
        record: &StepRecord,
        batch: &mut sled::Batch,
        blocks: &mut blocks::Pending,
    ) -> Result<()> {
        let starts = self.starts_for(&record.key.experiment, batch)?;
        let sealed = compact::seal(record, &starts)?;
        blocks.set(&self.db, &layout::step_key(&record.key), Some(&sealed))?;
        let row = StepSummary::of(record).encode()?;
        blocks.set(&self.db, &layout::row_key(&record.key), Some(&row))?;
        self.index_metrics(record, batch)
    }

    /// Writes decided steps in one atomic batch, unflushed and without chain
    /// states: for bulk imports (synthetic stores for benchmarks), where
    /// rewriting a chain state per step would only make garbage for sled.
    pub fn import_steps(&self, records: &[StepRecord]) -> Result<()> {
        self.apply_with_blocks(sled::Batch::default(), |batch, blocks| {
            records
                .iter()
                .try_for_each(|record| self.insert_step(record, batch, blocks))
        })
    }

    /// Makes every write so far durable (as far as sled's flush goes), then
    /// records the chains' new step counts in the high-water file.
    pub fn flush(&self) -> Result<()> {
        self.db.flush()?;
        if let Some(marks) = &self.marks {
            let mut marks = marks.lock().unwrap_or_else(|p| p.into_inner());
            marks.append(&layout::high_water(&self.dir))?;
        }
        Ok(())
    }

    /// Atomically records a step measured outside any chain (`kiln benchmark --store`)
    /// together with its experiment's updated info, then flushes.
    pub fn record_manual(&self, experiment: &ExperimentInfo, record: &StepRecord) -> Result<()> {
        let mut batch = sled::Batch::default();
        batch.insert(
            layout::experiment_key(&record.key.experiment).as_bytes(),
            serde_json::to_vec(experiment)?,
        );
        self.apply_with_blocks(batch, |batch, blocks| {
            self.insert_step(record, batch, blocks)
        })?;
        self.mark(&record.key.experiment, 0, record.key.step + 1);
        self.flush()
    }

    /// Decided steps of an experiment (all experiments with `None`), in key order.
    pub fn steps(&self, experiment: Option<&str>) -> impl Iterator<Item = Result<StepRecord>> + '_ {
        let suffix = experiment.map(|e| format!("{e}/")).unwrap_or_default();
        self.entries(Kind::Step, &suffix).map(|item| {
            let (key, value) = item?;
            self.read_step(&String::from_utf8_lossy(&key), &value)
        })
    }

    /// The metrics found in the decided steps of `experiment` (the union of
    /// their summaries' and runs' metrics), if the store keeps them: `None`
    /// for a store written before kiln kept them.
    pub fn kept_metrics(&self, experiment: &str) -> Result<Option<BTreeSet<Metric>>> {
        self.get(&layout::metrics_key(experiment))
    }

    /// Every metric measured (or found unsupported) in the decided steps of
    /// `experiment`: as the store keeps them, or (older stores) read from the
    /// metric names of each stored step, their values skipped unparsed.
    pub fn step_metrics(&self, experiment: &str) -> Result<BTreeSet<Metric>> {
        if let Some(kept) = self.kept_metrics(experiment)? {
            return Ok(kept);
        }
        let mut found = step_metrics::MetricSet::default();
        for item in self.entries(Kind::Step, &format!("{experiment}/")) {
            let json = item?.1;
            found.extend_from_json(&json).with_context(|| {
                format!("a stored step of experiment {experiment} is unreadable")
            })?;
        }
        Ok(found.iter().collect())
    }

    /// Adds `metrics/<experiment>` to the batch that records `record` when the
    /// step brings a metric the experiment's steps did not have.
    fn index_metrics(&self, record: &StepRecord, batch: &mut sled::Batch) -> Result<()> {
        let experiment = &record.key.experiment;
        let mut known = self.metrics.lock().unwrap_or_else(|p| p.into_inner());
        if !known.contains_key(experiment) {
            let entry = match self.kept_metrics(experiment)? {
                Some(set) => (set, true),
                // Not kept yet: from the steps already stored (none in a fresh experiment).
                None => {
                    let mut set = BTreeSet::new();
                    for step in self.steps(Some(experiment)) {
                        set.extend(metrics_of(&step?.result));
                    }
                    (set, false)
                }
            };
            known.insert(experiment.clone(), entry);
        }
        let (set, stored) = known.get_mut(experiment).expect("just inserted");
        let before = set.len();
        set.extend(metrics_of(&record.result));
        if set.len() != before || !*stored {
            batch.insert(
                layout::metrics_key(experiment).as_bytes(),
                serde_json::to_vec(&*set)?,
            );
            *stored = true;
        }
        Ok(())
    }

    /// The export rows of the decided steps of one experiment, in key order:
    /// as stored beside them, or (a layout-1 store) in their JSON. Memory
    /// stays bounded however many steps there are.
    pub fn step_rows(&self, experiment: &str) -> impl Iterator<Item = Result<StoredSummary>> + '_ {
        self.summaries(&format!("{experiment}/"))
    }

    /// The export rows of the decided steps whose keys' suffix after `row/`
    /// (or `step/`) starts with `suffix`, in key order, in bounded memory.
    fn summaries(&self, suffix: &str) -> impl Iterator<Item = Result<StoredSummary>> + '_ {
        let rows = self.schema() >= ROWS_SINCE;
        let kind = if rows { Kind::Row } else { Kind::Step };
        self.entries(kind, suffix).map(move |item| {
            let value = item?.1;
            Ok(if rows {
                StoredSummary::Row(value)
            } else {
                StoredSummary::Json(value)
            })
        })
    }

    /// The decided steps' values of `kind` whose keys of one a step have `suffix` after
    /// their prefix (`step/`, `row/`), each under that key, in key order, in bounded memory:
    /// from their blocks and from the keys of one a step (a block not yet complete, layouts
    /// up to 4).
    fn entries(
        &self,
        kind: Kind,
        suffix: &str,
    ) -> Box<dyn Iterator<Item = Result<Entry>> + Send + '_> {
        let loose = self.scan_bounded(format!("{}{suffix}", kind.entry_prefix()), TOUCHES_A_STEP);
        let prefix = format!("{}{suffix}", kind.block_prefix());
        let packed = self
            .scan_bounded(prefix, TOUCHES_A_BLOCK)
            .flat_map(move |item| match item {
                Ok(block) => blocks::expand(kind, block),
                Err(e) => vec![Err(e)],
            });
        Box::new(blocks::merged(packed, loose))
    }

    /// Every key and value under a prefix, in key order, in bounded memory.
    ///
    /// sled 0.34 admits page accesses to its cache in batches of 64 per
    /// shard (of 256) and only then evicts, whatever the cache capacity: a
    /// scan that reads each page once keeps up to 16 k pages (hundreds of MB
    /// of steps) in memory. Reading each key `touches` times more fills those
    /// batches sooner, so pages leave the cache soon after the scan passes them.
    fn scan_bounded(
        &self,
        prefix: String,
        touches: usize,
    ) -> impl Iterator<Item = Result<Entry>> + '_ {
        self.db.scan_prefix(prefix).map(move |item| {
            let (key, value) = item?;
            for _ in 0..touches {
                self.db.get(&key)?;
            }
            Ok((key, value))
        })
    }

    /// Stores an artifact (build log, replay file) by content; returns its hash.
    pub fn put_artifact(&self, text: &str) -> Result<ContentHash> {
        let hash = ContentHash::of(text.as_bytes());
        let path = layout::artifact(&self.dir, &hash);
        if !path.exists() {
            let tmp = layout::artifact_tmp(&self.dir, &hash);
            (|| -> std::io::Result<()> {
                fs::create_dir_all(layout::artifacts(&self.dir))?;
                let mut f = fs::File::create(&tmp)?;
                f.write_all(text.as_bytes())?;
                f.sync_all()?;
                fs::rename(&tmp, &path)
            })()
            .with_context(|| format!("cannot write {}", path.display()))?;
        }
        Ok(hash)
    }

    /// Path of an artifact.
    pub fn artifact_path(&self, hash: &ContentHash) -> PathBuf {
        layout::artifact(&self.dir, hash)
    }

    /// Moves a result's bulky texts (build log, replay file) out of it into
    /// the artifacts folder, so the database holds only their hashes; returns
    /// them by kind. A text that cannot be stored is dropped with a warning:
    /// losing a build log must not lose the step.
    pub fn stash_artifacts(&self, result: &mut StepResult) -> BTreeMap<String, ContentHash> {
        let mut artifacts = BTreeMap::new();
        let Some(build) = result.build.as_mut() else {
            return artifacts;
        };
        for (kind, text) in [
            (layout::BUILD_LOG, std::mem::take(&mut build.log_tail)),
            (
                layout::REPLAY_FILE,
                build.replay_file.take().unwrap_or_default(),
            ),
        ] {
            if text.is_empty() {
                continue;
            }
            match self.put_artifact(&text) {
                Ok(hash) => {
                    artifacts.insert(kind.to_string(), hash);
                }
                Err(e) => tracing::warn!(
                    "cannot store the {kind} of a step in {}: {e:#}",
                    layout::artifacts(&self.dir).display()
                ),
            }
        }
        artifacts
    }

    /// Stores a worker's capabilities (its environment fingerprint) once; returns their hash.
    pub fn put_fingerprint(&self, caps: &Capabilities) -> Result<ContentHash> {
        let hash = ContentHash::of(&serde_json::to_vec(caps)?);
        let key = layout::fingerprint_key(&hash);
        if !self.db.contains_key(&key)? {
            self.put(&key, caps)?;
        }
        Ok(hash)
    }
}

/// The metrics of a result: its summaries' and its runs'.
fn metrics_of(result: &StepResult) -> impl Iterator<Item = Metric> + '_ {
    let m = &result.measurement;
    m.summary
        .keys()
        .copied()
        .chain(m.runs.iter().flat_map(|r| r.metrics.keys().copied()))
}

/// A key and its value.
type Entry = (sled::IVec, sled::IVec);

/// A decided step's export row as the store holds it; [`StoredSummary::row`] reads it.
pub enum StoredSummary {
    /// The row stored beside the step (layout 2 on).
    Row(sled::IVec),
    /// The step's JSON, which holds the row (layout 1).
    Json(sled::IVec),
}

impl StoredSummary {
    /// The row.
    pub fn row(&self) -> Result<StepSummary<'_>> {
        match self {
            StoredSummary::Row(bytes) => StepSummary::decode(bytes),
            StoredSummary::Json(json) => StepSummary::from_json(json),
        }
    }
}

/// The benchmark an experiment searches: from the config, or the name of a manual experiment.
pub fn benchmark_of(config: Option<&CampaignConfig>, experiment: &str) -> Option<String> {
    if let Some(b) = manual_benchmark(experiment) {
        return Some(b.to_string());
    }
    config
        .and_then(|c| c.experiment(experiment))
        .map(|e| e.benchmark.clone())
}

/// The bytes of the files under `path`.
pub fn bytes_under(path: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(path) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.file_type().is_ok_and(|t| t.is_dir()) {
            true => bytes_under(&e.path()),
            false => e.metadata().map_or(0, |m| m.len()),
        })
        .sum()
}

/// This machine's host name, as a holder file names it.
fn this_host() -> String {
    fs::read_to_string("/proc/sys/kernel/hostname")
        .unwrap_or_default()
        .trim()
        .to_string()
}
