//! The campaign store: one sled database per campaign, plus an artifacts
//! folder beside it.
//!
//! Keys are readable, `/`-separated and zero-padded so that sled's byte order
//! is step order. Values are JSON, but for the export rows. A decided step and
//! its chain's new state are written in one atomic batch and flushed before
//! the chain moves on, so a `kill -9` at any moment leaves either the step
//! decided (and the chain past it) or neither.
//!
//! | key | value |
//! |-----|-------|
//! | `meta/schema` | layout version ([`SCHEMA_VERSION`]) |
//! | `meta/config` | normalized config text |
//! | `meta/created-ms` | creation time |
//! | `exp/<experiment>` | [`ExperimentInfo`]: decision points, baseline, references |
//! | `chain/<experiment>/<chain>` | [`ChainState`] |
//! | `step/<experiment>/<chain>/<step>` | [`StepRecord`], decided |
//! | `step/manual:<benchmark>/000000/<n>` | [`StepRecord`] measured by `kiln benchmark --store` (no chain state) |
//! | `row/<experiment>/<chain>/<step>` | [`StepRow`] of the decided step `step/…` (binary, see [`row`]), in its batch; layout 2 on |
//! | `result/<experiment>/<chain>/<step>` | [`StepRecord`] measured, not yet decided |
//! | `fingerprint/<hash>` | [`kiln_protocol::message::Capabilities`] of a worker, by content hash |
//! | `metrics/<experiment>` | the metrics found in the experiment's decided steps (summaries and runs), kept in the batch of the step that adds one; the export's columns (stores written before it was kept have none, and are scanned) |
//!
//! Layout 1 had no export rows. kiln reads a layout-1 store as it is (the
//! export then reads the steps' JSON), and brings it to layout 2 when it
//! first writes a step into it ([`Store::upgrade`]).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use anyhow::{bail, Context, Result};
use rand_chacha::ChaCha8Rng;
use serde::{de::DeserializeOwned, Deserialize, Serialize};

use kiln_protocol::message::{Capabilities, Discovery, StepResult};
use kiln_protocol::{ContentHash, DecisionSet, Metric, StepOutcome};

pub mod row;

pub use row::StepRow;

/// Version of the store's layout, bumped on incompatible changes; this kiln
/// reads every version up to it. 2: an export row beside every decided step.
pub const SCHEMA_VERSION: u32 = 2;

/// The first layout with an export row beside every decided step.
const ROWS_SINCE: u32 = 2;

/// Identifies a step of a chain.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct StepKey {
    /// Experiment name.
    pub experiment: String,
    /// Chain index.
    pub chain: u32,
    /// Step index within the chain.
    pub step: u32,
}

impl StepKey {
    fn suffix(&self) -> String {
        format!("{}/{:06}/{:09}", self.experiment, self.chain, self.step)
    }
}

impl std::fmt::Display for StepKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}/chain {}/step {}",
            self.experiment, self.chain, self.step
        )
    }
}

/// Why a step was measured. Export rows store it by position: add variants
/// at the end only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StepKind {
    /// A search proposal.
    Proposal,
    /// A re-measurement of the incumbent (against the winner's curse).
    Remeasure,
}

/// A measured step, as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    /// Which step.
    pub key: StepKey,
    /// Why it was measured.
    pub kind: StepKind,
    /// The full decision set.
    pub decisions: DecisionSet,
    /// Its hash.
    pub decision_hash: ContentHash,
    /// The step whose state it was proposed from (`None`: the baseline).
    pub parent: Option<u32>,
    /// The decisions that differ from the parent state.
    pub diff: DecisionSet,
    /// Temperature at this step.
    pub temperature: f64,
    /// The worker's result (build log and replay file moved to artifacts).
    pub result: StepResult,
    /// The objective, if the step succeeded.
    pub objective: Option<f64>,
    /// Worker that ran it.
    pub worker: String,
    /// Slot on that worker.
    pub slot: u32,
    /// Hash of the worker's capabilities when it ran the step (`fingerprint/<hash>` holds them).
    #[serde(default)]
    pub worker_fingerprint: Option<ContentHash>,
    /// Artifacts (kind → content hash) in the artifacts folder.
    pub artifacts: BTreeMap<String, ContentHash>,
    /// The earlier step whose measurement this one reuses (same decision set).
    pub cached_from: Option<StepKey>,
    /// When the step was handed to the pool (Unix ms).
    pub dispatched_ms: u64,
    /// When its result was stored (Unix ms).
    pub recorded_ms: u64,
    /// Filled in when the chain decides the step.
    pub decision: Option<Decision>,
}

/// The chain's verdict on a step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// Whether the chain moved to this step's decisions.
    pub accepted: bool,
    /// The incumbent's objective the step was compared with.
    pub compared_with: f64,
    /// When the chain decided (Unix ms).
    pub decided_ms: u64,
}

/// A state of a chain: decisions and their measured objective.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Incumbent {
    /// The decisions.
    pub decisions: DecisionSet,
    /// Every objective measured for them (re-measurements add samples).
    pub samples: Vec<f64>,
    /// The step it came from (`None`: the baseline).
    pub step: Option<u32>,
}

impl Incumbent {
    /// The objective: the median of the samples.
    pub fn objective(&self) -> f64 {
        kiln_protocol::Summary::of(&self.samples).map_or(f64::NAN, |s| s.median)
    }
}

/// A proposal generated but not yet decided.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Proposal {
    /// Why it is measured.
    pub kind: StepKind,
    /// The decisions.
    pub decisions: DecisionSet,
    /// The state it was proposed from.
    pub parent: Option<u32>,
    /// Decisions that differ from the parent.
    pub diff: DecisionSet,
    /// Temperature at this step.
    pub temperature: f64,
}

/// A chain's whole search state: enough to resume exactly.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChainState {
    /// Next step to decide.
    pub next_decide: u32,
    /// Steps generated so far.
    pub generated: u32,
    /// Where the chain is.
    pub current: Incumbent,
    /// The best state seen.
    pub best: Incumbent,
    /// The RNG after the last decision and generation.
    pub rng: ChaCha8Rng,
    /// Proposals generated and not yet decided, by step.
    pub pending: BTreeMap<u32, Proposal>,
    /// Accepted proposals.
    pub accepted: u32,
    /// Failed steps by outcome name.
    pub failures: BTreeMap<String, u32>,
    /// Temperature at the last decided step.
    pub temperature: f64,
    /// When the chain started (Unix ms).
    pub started_ms: u64,
    /// When it last decided a step (Unix ms).
    pub updated_ms: u64,
}

/// A reference measurement of an experiment (the baseline, inlining nothing).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reference {
    /// The decisions.
    pub decisions: DecisionSet,
    /// Objectives measured (several for the baseline).
    pub samples: Vec<f64>,
    /// The outcome of the last measurement.
    pub outcome: StepOutcome,
    /// The output digest of the first successful measurement.
    pub output_digest: Option<ContentHash>,
    /// .text size of the build, where known.
    pub text_bytes: Option<u64>,
}

impl Reference {
    /// The median objective, if any measurement succeeded.
    pub fn objective(&self) -> Option<f64> {
        kiln_protocol::Summary::of(&self.samples).map(|s| s.median)
    }
}

/// What the store knows of an experiment before its chains run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExperimentInfo {
    /// The benchmark's decision points and stock decisions.
    pub discovery: Discovery,
    /// The bundle the benchmark was discovered from.
    pub bundle: ContentHash,
    /// The starting decisions (stock, or the config's baseline file).
    pub baseline: Reference,
    /// Named extra references (`no-inline` for inlining benchmarks).
    pub references: BTreeMap<String, Reference>,
}

/// sled's page cache. Its default (1 GiB) lets a scan of a big store (an
/// export) grow the controller by the size of the store; a campaign's working
/// set (chain states, the latest steps) is far smaller.
const CACHE_BYTES: u64 = 32 << 20;

/// See [`Store::step_values`].
const TOUCH_EVERY_STEP: usize = 2;

/// An open campaign store.
pub struct Store {
    db: sled::Db,
    dir: PathBuf,
    /// `metrics/<experiment>` of each experiment written to: the set, and
    /// whether the store holds it already.
    metrics: Mutex<HashMap<String, (BTreeSet<Metric>, bool)>>,
    /// The layout version (`meta/schema`); held while [`Store::upgrade`] runs.
    layout: Mutex<u32>,
}

/// Unix time in milliseconds.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Store {
    /// Opens (or creates) the store in `dir`, refusing clearly if another controller holds it.
    pub fn open(dir: &Path) -> Result<Store> {
        fs::create_dir_all(dir)
            .with_context(|| format!("cannot create store folder {}", dir.display()))?;
        let db = sled::Config::new()
            .path(dir.join("db"))
            .cache_capacity(CACHE_BYTES)
            .open()
            .map_err(|e| {
                let holder = fs::read_to_string(dir.join("controller.pid")).unwrap_or_default();
                if e.to_string().contains("lock") || e.to_string().contains("WouldBlock") {
                    anyhow::anyhow!(
                        "store {} is in use by another controller{} ({e})",
                        dir.display(),
                        match holder.trim() {
                            "" => String::new(),
                            h => format!(": {h}"),
                        }
                    )
                } else {
                    anyhow::anyhow!("cannot open store {}: {e}", dir.display())
                }
            })?;
        let store = Store {
            db,
            dir: dir.to_path_buf(),
            metrics: Default::default(),
            layout: Mutex::new(SCHEMA_VERSION),
        };
        match store.get::<u32>("meta/schema")? {
            None => store.put("meta/schema", &SCHEMA_VERSION)?,
            Some(v @ 1..=SCHEMA_VERSION) => *store.layout() = v,
            Some(v) => bail!(
                "store {} has schema version {v}; this kiln reads versions up to {SCHEMA_VERSION} \
                 (a newer kiln wrote it)",
                dir.display()
            ),
        }
        Ok(store)
    }

    fn layout(&self) -> std::sync::MutexGuard<'_, u32> {
        self.layout.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The store's layout version (`meta/schema`).
    pub fn schema(&self) -> u32 {
        *self.layout()
    }

    /// Brings a layout-1 store to the current layout: writes the export row
    /// of every decided step, then the version. Writing a step does it first,
    /// so that every decided step of a layout-2 store has its row. Rows are
    /// written before the version, so an interrupted upgrade leaves a
    /// layout-1 store, upgraded again by the next write.
    pub fn upgrade(&self) -> Result<()> {
        let mut layout = self.layout();
        if *layout >= ROWS_SINCE {
            return Ok(());
        }
        let (from, started) = (*layout, std::time::Instant::now());
        let mut batch = sled::Batch::default();
        let mut rows = 0u64;
        for item in self.scan_bounded("step/".to_string()) {
            let (key, json) = item?;
            let row = StepRow::from_json(&json).with_context(|| {
                format!(
                    "store key {} holds unreadable data",
                    String::from_utf8_lossy(&key)
                )
            })?;
            batch.insert(
                [&b"row/"[..], &key[b"step/".len()..]].concat(),
                row.encode()?,
            );
            rows += 1;
            if rows % 1000 == 0 {
                self.db.apply_batch(std::mem::take(&mut batch))?;
            }
        }
        self.db.apply_batch(batch)?;
        self.db.flush()?;
        self.put("meta/schema", &SCHEMA_VERSION)?;
        *layout = SCHEMA_VERSION;
        tracing::info!(
            "store {} upgraded from layout {from} to {SCHEMA_VERSION}: export rows for {rows} steps in {:.1} s",
            self.dir.display(),
            started.elapsed().as_secs_f64()
        );
        Ok(())
    }

    /// Records this process as the store's holder (for the refusal message of others).
    pub fn claim(&self) -> Result<()> {
        let host = fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        let text = format!("pid {} on {}", std::process::id(), host.trim());
        fs::write(self.dir.join("controller.pid"), text)?;
        Ok(())
    }

    /// The store's folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Reads a JSON value.
    pub fn get<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>> {
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
    pub fn put<T: Serialize>(&self, key: &str, value: &T) -> Result<()> {
        self.db.insert(key, serde_json::to_vec(value)?)?;
        self.db.flush()?;
        Ok(())
    }

    /// Every value under a key prefix, in key order.
    pub fn scan<T: DeserializeOwned>(
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

    /// Number of keys under a prefix.
    pub fn count(&self, prefix: &str) -> usize {
        self.db.scan_prefix(prefix).count()
    }

    /// The stored experiment info.
    pub fn experiment(&self, name: &str) -> Result<Option<ExperimentInfo>> {
        self.get(&format!("exp/{name}"))
    }

    /// Stores experiment info.
    pub fn put_experiment(&self, name: &str, info: &ExperimentInfo) -> Result<()> {
        self.put(&format!("exp/{name}"), info)
    }

    /// The stored chain state.
    pub fn chain(&self, experiment: &str, chain: u32) -> Result<Option<ChainState>> {
        self.get(&chain_key(experiment, chain))
    }

    /// Stores a chain's initial state.
    pub fn put_chain(&self, experiment: &str, chain: u32, state: &ChainState) -> Result<()> {
        self.put(&chain_key(experiment, chain), state)
    }

    /// Stores a measured, undecided step (flushed).
    pub fn put_result(&self, record: &StepRecord) -> Result<()> {
        self.put(&format!("result/{}", record.key.suffix()), record)
    }

    /// [`put_result`](Self::put_result) without the flush (group commit:
    /// durable once a later [`flush`](Self::flush) returns).
    pub fn put_result_unflushed(&self, record: &StepRecord) -> Result<()> {
        self.db.insert(
            format!("result/{}", record.key.suffix()),
            serde_json::to_vec(record)?,
        )?;
        Ok(())
    }

    /// A measured, undecided step, if stored.
    pub fn result(&self, key: &StepKey) -> Result<Option<StepRecord>> {
        self.get(&format!("result/{}", key.suffix()))
    }

    /// A decided step, if stored.
    pub fn step(&self, key: &StepKey) -> Result<Option<StepRecord>> {
        self.get(&format!("step/{}", key.suffix()))
    }

    /// Atomically records a decided step and the chain's new state, then flushes.
    pub fn decide(&self, record: &StepRecord, chain: &ChainState) -> Result<()> {
        self.decide_unflushed(record, chain)?;
        self.flush()
    }

    /// [`decide`](Self::decide) without the flush: the batch is atomic, and
    /// durable once a later [`flush`](Self::flush) returns (group commit, bulk imports).
    pub fn decide_unflushed(&self, record: &StepRecord, chain: &ChainState) -> Result<()> {
        let mut batch = sled::Batch::default();
        self.insert_step(record, &mut batch)?;
        batch.remove(format!("result/{}", record.key.suffix()).as_bytes());
        batch.insert(
            chain_key(&record.key.experiment, record.key.chain).as_bytes(),
            serde_json::to_vec(chain)?,
        );
        self.db.apply_batch(batch)?;
        Ok(())
    }

    /// Adds a decided step to `batch`: its record, its export row, and the
    /// experiment's metrics if it brings a new one.
    fn insert_step(&self, record: &StepRecord, batch: &mut sled::Batch) -> Result<()> {
        self.upgrade()?;
        let suffix = record.key.suffix();
        batch.insert(
            format!("step/{suffix}").as_bytes(),
            serde_json::to_vec(record)?,
        );
        batch.insert(
            format!("row/{suffix}").as_bytes(),
            StepRow::of(record).encode()?,
        );
        self.index_metrics(record, batch)
    }

    /// Writes decided steps in one atomic batch, unflushed and without chain
    /// states: for bulk imports (synthetic stores for benchmarks), where
    /// rewriting a chain state per step would only make garbage for sled.
    pub fn import_steps(&self, records: &[StepRecord]) -> Result<()> {
        let mut batch = sled::Batch::default();
        for record in records {
            self.insert_step(record, &mut batch)?;
        }
        self.db.apply_batch(batch)?;
        Ok(())
    }

    /// Makes every write so far durable (as far as sled's flush goes).
    pub fn flush(&self) -> Result<()> {
        self.db.flush()?;
        Ok(())
    }

    /// Atomically records a step measured outside any chain (`kiln benchmark --store`)
    /// together with its experiment's updated info, then flushes.
    pub fn record_manual(&self, experiment: &ExperimentInfo, record: &StepRecord) -> Result<()> {
        let mut batch = sled::Batch::default();
        self.insert_step(record, &mut batch)?;
        batch.insert(
            format!("exp/{}", record.key.experiment).as_bytes(),
            serde_json::to_vec(experiment)?,
        );
        self.db.apply_batch(batch)?;
        self.db.flush()?;
        Ok(())
    }

    /// Decided steps of an experiment (all experiments with `None`), in key order.
    pub fn steps(&self, experiment: Option<&str>) -> impl Iterator<Item = Result<StepRecord>> + '_ {
        let prefix = match experiment {
            Some(e) => format!("step/{e}/"),
            None => "step/".to_string(),
        };
        self.scan::<StepRecord>(&prefix).map(|r| r.map(|(_, v)| v))
    }

    /// The metrics found in the decided steps of `experiment` (the union of
    /// their summaries' and runs' metrics), if the store keeps them: `None`
    /// for a store written before kiln kept them.
    pub fn step_metrics(&self, experiment: &str) -> Result<Option<BTreeSet<Metric>>> {
        self.get(&format!("metrics/{experiment}"))
    }

    /// Adds `metrics/<experiment>` to the batch that records `record` when the
    /// step brings a metric the experiment's steps did not have.
    fn index_metrics(&self, record: &StepRecord, batch: &mut sled::Batch) -> Result<()> {
        let experiment = &record.key.experiment;
        let mut known = self.metrics.lock().unwrap_or_else(|p| p.into_inner());
        if !known.contains_key(experiment) {
            let entry = match self.step_metrics(experiment)? {
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
                format!("metrics/{experiment}").as_bytes(),
                serde_json::to_vec(&*set)?,
            );
            *stored = true;
        }
        Ok(())
    }

    /// The stored JSON of the decided steps of one experiment, in key order,
    /// for readers that decode only what they need (export); memory stays
    /// bounded however many steps there are.
    pub fn step_values(&self, experiment: &str) -> impl Iterator<Item = Result<sled::IVec>> + '_ {
        self.scan_bounded(format!("step/{experiment}/"))
            .map(|item| Ok(item?.1))
    }

    /// The export rows of the decided steps of one experiment, in key order:
    /// as stored beside them, or (a layout-1 store) in their JSON. Memory
    /// stays bounded however many steps there are.
    pub fn step_rows(&self, experiment: &str) -> impl Iterator<Item = Result<StoredRow>> + '_ {
        let rows = self.schema() >= ROWS_SINCE;
        let prefix = if rows { "row" } else { "step" };
        self.scan_bounded(format!("{prefix}/{experiment}/"))
            .map(move |item| {
                let value = item?.1;
                Ok(if rows {
                    StoredRow::Row(value)
                } else {
                    StoredRow::Json(value)
                })
            })
    }

    /// Every key and value under a prefix, in key order, in bounded memory.
    ///
    /// sled 0.34 admits page accesses to its cache in batches of 64 per
    /// shard (of 256) and only then evicts, whatever the cache capacity: a
    /// scan that reads each page once keeps up to 16 k pages (hundreds of MB
    /// of steps) in memory. Reading every `TOUCH_EVERY`th key a second time
    /// fills those batches sooner, so pages leave the cache soon after the
    /// scan passes them.
    fn scan_bounded(
        &self,
        prefix: String,
    ) -> impl Iterator<Item = Result<(sled::IVec, sled::IVec)>> + '_ {
        const TOUCH_EVERY: usize = TOUCH_EVERY_STEP;
        self.db
            .scan_prefix(prefix)
            .enumerate()
            .map(move |(i, item)| {
                let (key, value) = item?;
                if i % TOUCH_EVERY == 0 {
                    self.db.get(&key)?;
                }
                Ok((key, value))
            })
    }

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
        let mut rows = self.scan_bounded("row/".to_string()).peekable();
        for item in self.scan_bounded("step/".to_string()) {
            let (key, json) = item?;
            let step = suffix(&key, "step/");
            let record: StepRecord = serde_json::from_slice(&json)
                .with_context(|| format!("store key step/{step} holds unreadable data"))?;
            let mut stored = None;
            while let Some(item) =
                rows.next_if(|r| r.as_ref().map_or(true, |(k, _)| suffix(k, "row/") <= step))
            {
                let (k, row) = item?;
                if suffix(&k, "row/") == step {
                    stored = Some(row);
                } else {
                    problems.push(format!(
                        "row/{}: a row without its step",
                        suffix(&k, "row/")
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
                suffix(&k, "row/")
            ));
        }
        Ok(problems)
    }

    /// Stores an artifact (build log, replay file) by content; returns its hash.
    pub fn put_artifact(&self, text: &str) -> Result<ContentHash> {
        let hash = ContentHash::of(text.as_bytes());
        let dir = self.dir.join("artifacts");
        let path = dir.join(format!("{hash}.txt"));
        if !path.exists() {
            fs::create_dir_all(&dir)?;
            let tmp = dir.join(format!(".{hash}.tmp"));
            let mut f = fs::File::create(&tmp)?;
            f.write_all(text.as_bytes())?;
            f.sync_all()?;
            fs::rename(&tmp, &path)?;
        }
        Ok(hash)
    }

    /// Path of an artifact.
    pub fn artifact_path(&self, hash: &ContentHash) -> PathBuf {
        self.dir.join("artifacts").join(format!("{hash}.txt"))
    }

    /// Stores a worker's capabilities (its environment fingerprint) once; returns their hash.
    pub fn put_fingerprint(&self, caps: &Capabilities) -> Result<ContentHash> {
        let hash = ContentHash::of(&serde_json::to_vec(caps)?);
        let key = format!("fingerprint/{hash}");
        if !self.db.contains_key(&key)? {
            self.put(&key, caps)?;
        }
        Ok(hash)
    }
}

/// The metrics of a result: its summaries' and its runs'.
fn metrics_of(result: &StepResult) -> impl Iterator<Item = Metric> + '_ {
    result
        .summary
        .keys()
        .copied()
        .chain(result.runs.iter().flat_map(|r| r.metrics.keys().copied()))
}

/// A decided step's export row as the store holds it; [`StoredRow::row`] reads it.
pub enum StoredRow {
    /// The row stored beside the step (layout 2 on).
    Row(sled::IVec),
    /// The step's JSON, which holds the row (layout 1).
    Json(sled::IVec),
}

impl StoredRow {
    /// The row.
    pub fn row(&self) -> Result<StepRow<'_>> {
        match self {
            StoredRow::Row(bytes) => StepRow::decode(bytes),
            StoredRow::Json(json) => StepRow::from_json(json),
        }
    }
}

fn chain_key(experiment: &str, chain: u32) -> String {
    format!("chain/{experiment}/{chain:06}")
}
