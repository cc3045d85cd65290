//! Bringing an older store to the current layout, in place, when a command
//! that writes opens it: the database is copied into a new one beside it
//! (`db.migrating`, compressed pages, each decided step read as its layout
//! says and written again against its experiment's start and reference profile,
//! layout 1's steps given their export rows, steps, rows and chains' sets in
//! blocks), which then takes the old one's place. A crash at any moment leaves the old database
//! whole, or the new one complete (`db.migrated`) and the next open finishes
//! the swap. Nothing is lost: a step that fails its checksum or does not
//! read is copied as it was, for `kiln store verify` to report.

use std::collections::HashMap;
use std::fs;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::blocks;
use super::compact::{self, Bases, Starts};
use super::open::{open_sled_again, open_sled_as, pages_compressed, sync_dir};
use super::{checksum, layout, ExperimentInfo, OpenError, StepSummary};
use super::{ROWS_SINCE, SAME_AS_CURRENT_FROM, SCHEMA_VERSION};

/// Keys written per batch: bounded memory, however big the store.
const BATCH_KEYS: usize = 1000;

/// The database `db` of the store in `dir`, which this process opened to
/// write into, in the current layout: as it is, or migrated (with the
/// layout it had). A store of a newer layout is refused.
pub(super) fn if_older(dir: &Path, db: sled::Db) -> Result<(sled::Db, Option<u32>)> {
    let stored: Option<u32> = match db.get(layout::SCHEMA)? {
        Some(v) => {
            Some(serde_json::from_slice(&v).context("the store's layout version is unreadable")?)
        }
        None => None,
    };
    let compressed = pages_compressed(&layout::db(dir));
    match stored {
        Some(found) if found > SCHEMA_VERSION => Err(OpenError::Newer {
            dir: dir.to_path_buf(),
            found,
        }
        .into()),
        Some(SCHEMA_VERSION) if compressed => Ok((db, None)),
        Some(found @ SAME_AS_CURRENT_FROM..) if compressed => {
            db.insert(layout::SCHEMA, serde_json::to_vec(&SCHEMA_VERSION)?)?;
            db.flush()?;
            Ok((db, Some(found)))
        }
        // A database just created.
        None if compressed && db.is_empty() => Ok((db, None)),
        // Without a version, a store is read as the oldest layout.
        _ => {
            let from = stored.unwrap_or(1);
            Ok((to_current(dir, db, from)?, Some(from)))
        }
    }
}

/// Migrates the store in `dir`, whose database `old` (layout `from`) this
/// process has open; returns the migrated database, open.
fn to_current(dir: &Path, old: sled::Db, from: u32) -> Result<sled::Db> {
    let started = Instant::now();
    let building = layout::db_migrating(dir);
    if building.exists() {
        fs::remove_dir_all(&building)
            .with_context(|| format!("cannot remove {}", building.display()))?;
    }
    let new = open_sled_as(&building, true)
        .with_context(|| format!("cannot create {}", building.display()))?;
    crate::logging::note(format!(
        "store {} is of layout {from}: migrating it to layout {SCHEMA_VERSION} (about a minute a \
         million steps; interrupted, the store is left as it was)",
        dir.display()
    ));
    let copied = copy(&old, &new, from)?;
    new.flush()?;
    drop((new, old));
    fs::rename(&building, layout::db_migrated(dir))?;
    finish_interrupted(dir)?;
    tracing::info!(
        "store {} migrated from layout {from} to {SCHEMA_VERSION} (compressed, steps against their start): {copied} keys in {:.1} s",
        dir.display(),
        started.elapsed().as_secs_f64()
    );
    open_sled_again(&layout::db(dir), true)
        .with_context(|| format!("cannot open store {}", dir.display()))
}

/// Finishes a migration a crash interrupted: a complete new database takes
/// the old one's place; a partial one, or an old one already replaced, is removed.
pub(super) fn finish_interrupted(dir: &Path) -> Result<()> {
    let (db, migrated, replaced) = (
        layout::db(dir),
        layout::db_migrated(dir),
        layout::db_replaced(dir),
    );
    if migrated.exists() {
        if db.exists() {
            fs::rename(&db, &replaced)?;
        }
        fs::rename(&migrated, &db)?;
        sync_dir(dir)?;
    }
    for leftover in [replaced, layout::db_migrating(dir)] {
        if leftover.exists() {
            fs::remove_dir_all(&leftover)
                .with_context(|| format!("cannot remove {}", leftover.display()))?;
        }
    }
    Ok(())
}

/// Copies every key of `old` (layout `from`) into `new` as the current layout
/// keeps it; returns how many keys it read.
fn copy(old: &sled::Db, new: &sled::Db, from: u32) -> Result<u64> {
    let steps = Steps {
        old,
        new,
        from,
        starts: starts(old, new)?,
        bases: compact::no_bases(),
    };
    let (mut batch, mut blocks) = (sled::Batch::default(), blocks::Pending::default());
    let mut set_numbers: HashMap<String, u32> = HashMap::new();
    let (mut copied, mut steps_copied) = (0u64, 0u64);
    let mut said = Every::new();
    for item in old.iter() {
        let (key, value) = item?;
        copied += 1;
        let name = std::str::from_utf8(&key).unwrap_or_default();
        match layout::step_of_key(name) {
            Some(_) => {
                steps.copy(&mut blocks, name, &value)?;
                steps_copied += 1;
            }
            None if name.starts_with(layout::STEP_BLOCKS) => {
                let entries = blocks::expand(blocks::Kind::Step, (key.clone(), value.clone()));
                match entries.into_iter().collect::<Result<Vec<_>>>() {
                    Ok(entries) => {
                        steps_copied += entries.len() as u64;
                        for (name, value) in entries {
                            steps.copy(&mut blocks, std::str::from_utf8(&name)?, &value)?;
                        }
                    }
                    // Damaged: as it is, for `kiln store verify` to report.
                    Err(_) => batch.insert(key, value),
                }
            }
            None if name.starts_with(layout::ROWS) => drop(blocks.set(new, name, Some(&value))?),
            None if name.starts_with(layout::CHAIN_SETS) => {
                // `chainset/<experiment>/<chain>/<hash>`: numbered in the chain's order.
                let chain = &name[..name.rfind('/').map_or(0, |at| at + 1)];
                let n = set_numbers.entry(chain.to_string()).or_default();
                blocks.set(new, &format!("{chain}{n:09}"), Some(&value))?;
                *n += 1;
            }
            None if &*key == layout::SCHEMA.as_bytes() => {}
            None => batch.insert(key, value),
        }
        if copied.is_multiple_of(BATCH_KEYS as u64) {
            std::mem::take(&mut blocks).into_batch(&mut batch)?;
            new.apply_batch(std::mem::take(&mut batch))?;
            said.every(PROGRESS_EVERY, || {
                format!("migrating: {steps_copied} steps copied")
            });
        }
    }
    blocks.into_batch(&mut batch)?;
    batch.insert(layout::SCHEMA, serde_json::to_vec(&SCHEMA_VERSION)?);
    new.apply_batch(batch)?;
    Ok(copied)
}

/// How often a long migration says how far it is.
const PROGRESS_EVERY: Duration = Duration::from_secs(15);

/// A note at most once a period.
struct Every {
    last: Instant,
}

impl Every {
    fn new() -> Every {
        Every {
            last: Instant::now(),
        }
    }

    fn every(&mut self, period: Duration, message: impl FnOnce() -> String) {
        if self.last.elapsed() >= period {
            crate::logging::note(message());
            self.last = Instant::now();
        }
    }
}

/// Each experiment's starts, their set and profile written into `new`.
fn starts(old: &sled::Db, new: &sled::Db) -> Result<HashMap<String, Starts>> {
    let mut starts = HashMap::new();
    for item in old.scan_prefix(layout::EXPERIMENTS) {
        let (key, value) = item?;
        let key = String::from_utf8_lossy(&key).into_owned();
        let base = match serde_json::from_slice::<ExperimentInfo>(&value) {
            Ok(info) => {
                let (base, keys) = Starts::of(&info)?;
                for (key, value) in keys {
                    new.insert(key, value)?;
                }
                base
            }
            // Left as it is; its steps are written in full.
            Err(_) => Starts::default(),
        };
        starts.insert(layout::experiment_of_key(&key).to_string(), base);
    }
    Ok(starts)
}

/// What copying decided steps needs: both databases, the layout copied from,
/// each experiment's starts in the new one, the old one's bases as read.
struct Steps<'a> {
    old: &'a sled::Db,
    new: &'a sled::Db,
    from: u32,
    starts: HashMap<String, Starts>,
    bases: Mutex<Bases>,
}

impl Steps<'_> {
    /// Adds the decided step `name` to `blocks` in the current layout, and
    /// its export row where the old layout had none.
    fn copy(&self, blocks: &mut blocks::Pending, name: &str, value: &[u8]) -> Result<()> {
        blocks.set(self.new, name, Some(&self.step(name, value)))?;
        if self.from < ROWS_SINCE {
            let row = StepSummary::from_json(value)
                .with_context(|| format!("store key {name} holds unreadable data"))?;
            let row_key = format!("{}{}", layout::ROWS, &name[layout::STEPS.len()..]);
            blocks.set(self.new, &row_key, Some(&row.encode()?))?;
        }
        Ok(())
    }

    /// A decided step's value in the current layout: read as its layout says
    /// and sealed again against its experiment's starts, or as it was where
    /// it fails its checksum or does not read.
    fn step(&self, name: &str, value: &[u8]) -> Vec<u8> {
        let starts = layout::step_of_key(name).and_then(|(e, _, _)| self.starts.get(e));
        if checksum::matches(value) == Some(false) {
            return value.to_vec();
        }
        match compact::read(self.old, &self.bases, name, value) {
            Ok(record) => compact::seal(&record, starts.unwrap_or(&Starts::default()))
                .unwrap_or_else(|_| value.to_vec()),
            Err(_) => value.to_vec(),
        }
    }
}
