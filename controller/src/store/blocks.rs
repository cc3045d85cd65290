//! Decided steps, their export rows and the sets each chain measured kept many to
//! a key (layout 5 on).
//!
//! sled keeps a table of every page of a database in memory from the moment it
//! opens it, and splits a leaf page at 16 keys: with a key a step, opening a
//! store of 10 M steps took 756 MiB before any step was read. A block holds
//! [`STEPS_A_BLOCK`] consecutive steps of one chain (`steps/<experiment>/<chain>/<block>`,
//! their rows likewise under `rows/`), so the table is that many times smaller. The
//! sets a chain measured go the same way (`chainsets/…`), each numbered in the order
//! written: a set measured again is written again, its later entry read over the
//! earlier.
//!
//! Everything above this file names an entry by its key of one a step (or set)
//! (`step/<experiment>/<chain>/<step>`, `row/…`, `chainset/<experiment>/<chain>/<n>`,
//! as layouts 1–4 stored steps and rows): a block's entries are read back under those
//! keys, in the same order.
//!
//! A block is its entries in step order, each `[step][length][value]`, the two
//! numbers 4 bytes little-endian, compressed (zstd). sled compresses its pages on
//! disk only; a scan keeps up to a page a shard of its cache (256) in memory
//! whatever the cache's capacity, so pages of 16 blocks of 16 steps held as
//! written would hold 16 × 16 × 2.8 KB each, and 256 of them 180 MiB.

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};

use super::{layout, COMPRESSION_LEVEL};

/// Steps a block holds: a block is rewritten whole as each of its steps is decided, so
/// more steps a block would cost each step more writing, fewer more pages.
pub const STEPS_A_BLOCK: u32 = 16;

/// Which of a decided step's two values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// The step's record.
    Step,
    /// Its export row.
    Row,
    /// A set a chain measured, with its objectives (numbered in the order written).
    Set,
}

impl Kind {
    /// The kind of value a key of one a step names.
    fn of_key(key: &str) -> Option<Kind> {
        [Kind::Step, Kind::Row, Kind::Set]
            .into_iter()
            .find(|kind| key.starts_with(kind.entry_prefix()))
    }

    /// The prefix of its keys of one a step.
    pub fn entry_prefix(self) -> &'static str {
        match self {
            Kind::Step => layout::STEPS,
            Kind::Row => layout::ROWS,
            Kind::Set => layout::CHAIN_SETS,
        }
    }

    /// The prefix of its blocks.
    pub fn block_prefix(self) -> &'static str {
        match self {
            Kind::Step => layout::STEP_BLOCKS,
            Kind::Row => layout::ROW_BLOCKS,
            Kind::Set => layout::CHAIN_SET_BLOCKS,
        }
    }
}

/// The key of the block that holds the value named `key` (`step/<experiment>/<chain>/<step>`
/// or `row/…`), and the step.
fn block_of(kind: Kind, key: &str) -> Option<(String, u32)> {
    let rest = key.strip_prefix(kind.entry_prefix())?;
    let (chain, step) = rest.rsplit_once('/')?;
    let step: u32 = step.parse().ok()?;
    let block = step / STEPS_A_BLOCK;
    Some((format!("{}{chain}/{block:09}", kind.block_prefix()), step))
}

/// The key of one a step of `step`'s value in the block `block_key`.
fn entry_key(kind: Kind, block_key: &[u8], step: u32) -> Vec<u8> {
    let rest = &block_key[kind.block_prefix().len()..];
    let chain = rest.iter().rposition(|&b| b == b'/').map_or(0, |at| at + 1);
    let step = format!("{step:09}");
    [
        kind.entry_prefix().as_bytes(),
        &rest[..chain],
        step.as_bytes(),
    ]
    .concat()
}

/// A block's entries in step order; a block whose framing is damaged yields an error, then
/// nothing more.
pub fn entries(block: &[u8]) -> impl Iterator<Item = Result<(u32, &[u8])>> {
    let mut rest = block;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let entry = split_entry(rest);
        rest = match &entry {
            Ok((_, value)) => &rest[8 + value.len()..],
            Err(_) => &[],
        };
        Some(entry)
    })
}

/// The first entry of `bytes`.
fn split_entry(bytes: &[u8]) -> Result<(u32, &[u8])> {
    let number = |at: usize| -> Option<u32> {
        Some(u32::from_le_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
    };
    let (Some(step), Some(len)) = (number(0), number(4)) else {
        bail!("a block's entry is cut short");
    };
    match bytes.get(8..8 + len as usize) {
        Some(value) => Ok((step, value)),
        None => bail!("the entry of step {step} is cut short"),
    }
}

/// A block's entries, as stored.
fn unpack(stored: &[u8]) -> Result<Vec<u8>> {
    zstd::decode_all(stored).context("a block does not decompress")
}

/// A block's entries, to store.
fn pack(block: &[u8]) -> Result<Vec<u8>> {
    Ok(zstd::encode_all(block, COMPRESSION_LEVEL)?)
}

/// `block` with `value` as `step`'s entry (`None`: without it), in step order.
fn with(block: &[u8], step: u32, value: Option<&[u8]>) -> Result<Vec<u8>> {
    let mut all: BTreeMap<u32, &[u8]> = entries(block).collect::<Result<_>>()?;
    match value {
        Some(value) => all.insert(step, value),
        None => all.remove(&step),
    };
    let mut out = Vec::with_capacity(block.len() + value.map_or(0, |v| v.len() + 8));
    for (step, value) in all {
        let len = u32::try_from(value.len()).context("a step's value passes 4 GiB")?;
        out.extend_from_slice(&step.to_le_bytes());
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(value);
    }
    Ok(out)
}

/// The value named `key` (`step/…` or `row/…`), where its block holds it.
pub fn get(db: &sled::Db, kind: Kind, key: &str) -> Result<Option<sled::IVec>> {
    let (block_key, step) = block_of(kind, key).with_context(|| format!("{key} names no step"))?;
    let Some(stored) = db.get(&block_key)? else {
        return Ok(None);
    };
    let block = unpack(&stored).with_context(|| format!("store key {block_key} is damaged"))?;
    for entry in entries(&block) {
        let (at, value) = entry.with_context(|| format!("store key {block_key} is damaged"))?;
        if at == step {
            return Ok(Some(value.into()));
        }
    }
    Ok(None)
}

/// The step (or set number) an entry's key names.
pub fn number_of(key: &[u8]) -> Result<u32> {
    let number = key.rsplit(|&b| b == b'/').next().unwrap_or_default();
    std::str::from_utf8(number)
        .ok()
        .and_then(|n| n.parse().ok())
        .with_context(|| format!("{} names no step", String::from_utf8_lossy(key)))
}

/// The entries of one block, each under its key of one a step.
pub fn expand(
    kind: Kind,
    (block_key, stored): (sled::IVec, sled::IVec),
) -> Vec<Result<(sled::IVec, sled::IVec)>> {
    let damaged = || {
        format!(
            "store key {} is damaged",
            String::from_utf8_lossy(&block_key)
        )
    };
    let block = match unpack(&stored) {
        Ok(block) => block,
        Err(e) => return vec![Err(e.context(damaged()))],
    };
    entries(&block)
        .map(|entry| {
            let (step, value) = entry.with_context(damaged)?;
            Ok((entry_key(kind, &block_key, step).into(), value.into()))
        })
        .collect()
}

/// The blocks a batch changes, each read once from the database and written whole (their
/// entries, unpacked).
#[derive(Default)]
pub struct Pending {
    blocks: BTreeMap<String, Vec<u8>>,
}

impl Pending {
    /// Sets (`None`: removes) the value named `key`; returns whether its block held one.
    pub fn set(&mut self, db: &sled::Db, key: &str, value: Option<&[u8]>) -> Result<bool> {
        let kind = Kind::of_key(key).with_context(|| format!("{key} names no step"))?;
        let (block_key, step) =
            block_of(kind, key).with_context(|| format!("{key} names no step"))?;
        let damaged = || format!("store key {block_key} is damaged");
        let block = match self.blocks.remove(&block_key) {
            Some(block) => block,
            None => match db.get(&block_key)? {
                Some(stored) => unpack(&stored).with_context(damaged)?,
                None => Vec::new(),
            },
        };
        let held = entries(&block).any(|e| e.is_ok_and(|(at, _)| at == step));
        let changed = with(&block, step, value).with_context(damaged)?;
        self.blocks.insert(block_key, changed);
        Ok(held)
    }

    /// Adds the changed blocks to `batch`; a block left empty is removed.
    pub fn into_batch(self, batch: &mut sled::Batch) -> Result<()> {
        for (key, block) in self.blocks {
            match block.is_empty() {
                true => batch.remove(key.as_bytes()),
                false => batch.insert(key.as_bytes(), pack(&block)?),
            }
        }
        Ok(())
    }
}

/// Sets (`None`: removes) the value named `key` (`step/…` or `row/…`) in its block, at
/// once; returns whether the block held one. For tools and tests that damage a store.
pub fn set_entry(db: &sled::Db, key: &str, value: Option<&[u8]>) -> Result<bool> {
    let mut pending = Pending::default();
    let held = pending.set(db, key, value)?;
    let mut batch = sled::Batch::default();
    pending.into_batch(&mut batch)?;
    db.apply_batch(batch)?;
    Ok(held)
}

/// The value named `key` (`step/…` or `row/…`) in its block. For tools and tests.
pub fn entry(db: &sled::Db, key: &str) -> Result<Option<sled::IVec>> {
    let kind = Kind::of_key(key).with_context(|| format!("{key} names no step"))?;
    get(db, kind, key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_kept_in_step_order_replaced_and_removed() {
        let block = with(&[], 5, Some(b"five")).unwrap();
        let block = with(&block, 1, Some(b"one")).unwrap();
        let block = with(&block, 5, Some(b"FIVE")).unwrap();
        let read: Vec<(u32, &[u8])> = entries(&block).map(Result::unwrap).collect();
        assert_eq!(read, [(1, &b"one"[..]), (5, &b"FIVE"[..])]);
        let block = with(&block, 1, None).unwrap();
        assert_eq!(entries(&block).count(), 1);
        assert!(with(&block, 5, None).unwrap().is_empty());
    }

    #[test]
    fn a_damaged_block_says_so_once() {
        let block = with(&with(&[], 1, Some(b"one")).unwrap(), 2, Some(b"two")).unwrap();
        let cut = &block[..block.len() - 1];
        let read: Vec<_> = entries(cut).collect();
        assert_eq!(read.len(), 2);
        assert!(read[0].is_ok());
        assert!(format!("{:#}", read[1].as_ref().unwrap_err()).contains("step 2 is cut short"));
    }

    #[test]
    fn a_step_key_names_its_block_and_back() {
        let (block, step) = block_of(Kind::Row, "row/walk/000003/000000037").unwrap();
        assert_eq!((block.as_str(), step), ("rows/walk/000003/000000002", 37));
        let back = entry_key(Kind::Row, block.as_bytes(), 37);
        assert_eq!(back, b"row/walk/000003/000000037");
        // An experiment's name may hold a slash-free colon (manual experiments).
        let (block, _) = block_of(Kind::Step, "step/manual:b/000000/000000016").unwrap();
        assert_eq!(block, "steps/manual:b/000000/000000001");
    }
}
