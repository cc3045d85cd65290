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
//! A block is written once, complete: until its 16th entry is decided, its entries
//! are kept one a key under their own names, as layouts 1–4 kept steps (a block
//! rewritten as each step came made a real campaign's store a third larger with the
//! garbage sled had not yet cleaned). So a chain holds at most 15 such keys of each
//! kind, and every step is written twice.
//!
//! Everything above this file names an entry by its key of one a step (or set)
//! (`step/<experiment>/<chain>/<step>`, `row/…`, `chainset/<experiment>/<chain>/<n>`,
//! as layouts 1–4 stored steps and rows): a block's entries are read back under those
//! keys, in the same order.
//!
//! A block's value is its entries in step order, each `[step][length][value]`, the two
//! numbers 4 bytes little-endian, compressed (zstd). sled compresses its pages on
//! disk only; a scan keeps up to a page a shard of its cache (256) in memory
//! whatever the cache's capacity, so pages of 16 blocks of 16 steps held as
//! written would hold 16 × 16 × 2.8 KB each, and 256 of them 180 MiB.

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};

use super::{layout, Entry};

/// Steps a block holds: more make fewer pages, but larger ones for a scan to hold and
/// more of a chain's last steps kept one a key.
pub const STEPS_A_BLOCK: u32 = 16;

/// What a block holds: a decided step's record or its row, or a chain's measured set.
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

/// zstd's level for blocks. Higher than sled's for its pages
/// ([`super::COMPRESSION_LEVEL`]), which it compresses each time it writes one: a
/// block is compressed once, when its sixteenth step comes.
const BLOCK_LEVEL: i32 = 9;

/// A block's entries, to store: compressed with its size known, so that zstd
/// sizes its tables to the block (a stream's encoder cleared level 9's whole
/// tables for each block, half the CPU of building the bench's store).
fn pack(block: &[u8]) -> Result<Vec<u8>> {
    Ok(zstd::block::compress(block, BLOCK_LEVEL)?)
}

/// The framing of `entries`, in step order.
fn frame(entries: &BTreeMap<u32, Vec<u8>>) -> Result<Vec<u8>> {
    let mut out = Vec::with_capacity(entries.values().map(|v| v.len() + 8).sum());
    for (step, value) in entries {
        let len = u32::try_from(value.len()).context("a step's value passes 4 GiB")?;
        out.extend_from_slice(&step.to_le_bytes());
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(value);
    }
    Ok(out)
}

/// The value named `key` (`step/…`, `row/…`, `chainset/…`): under that key, or in its block.
pub fn get(db: &sled::Db, kind: Kind, key: &str) -> Result<Option<sled::IVec>> {
    if let Some(value) = db.get(key)? {
        return Ok(Some(value));
    }
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

/// Two scans of entries, each in key order, as one in key order (an error as it comes).
pub fn merged<'a>(
    a: impl Iterator<Item = Result<Entry>> + Send + 'a,
    b: impl Iterator<Item = Result<Entry>> + Send + 'a,
) -> impl Iterator<Item = Result<Entry>> + Send + 'a {
    let (mut a, mut b) = (a.peekable(), b.peekable());
    std::iter::from_fn(move || {
        let from_a = match (a.peek(), b.peek()) {
            (None, None) => return None,
            (Some(Ok((x, _))), Some(Ok((y, _)))) => x <= y,
            (Some(_), None) | (Some(Err(_)), _) => true,
            (None, Some(_)) | (_, Some(Err(_))) => false,
        };
        match from_a {
            true => a.next(),
            false => b.next(),
        }
    })
}

/// A block as a batch changes it: its entries, and the keys the database held them under
/// (its block, or theirs), which the batch removes before it writes them again.
struct Open {
    kind: Kind,
    entries: BTreeMap<u32, Vec<u8>>,
    stored: Vec<sled::IVec>,
}

impl Open {
    /// The entries of the block `block_key` as the database holds them.
    fn read(db: &sled::Db, kind: Kind, block_key: &str) -> Result<Open> {
        let damaged = || format!("store key {block_key} is damaged");
        let mut open = Open {
            kind,
            entries: BTreeMap::new(),
            stored: Vec::new(),
        };
        if let Some(stored) = db.get(block_key)? {
            for entry in entries(&unpack(&stored).with_context(damaged)?) {
                let (step, value) = entry.with_context(damaged)?;
                open.entries.insert(step, value.to_vec());
            }
            open.stored.push(block_key.as_bytes().into());
        }
        let first = number_of(block_key.as_bytes())? * STEPS_A_BLOCK;
        let last = first + STEPS_A_BLOCK - 1;
        let key = |step| entry_key(kind, block_key.as_bytes(), step);
        for item in db.range(key(first)..=key(last)) {
            let (key, value) = item?;
            open.entries.insert(number_of(&key)?, value.to_vec());
            open.stored.push(key);
        }
        Ok(open)
    }

    /// Adds it to `batch`: packed where complete, else each entry under its own key.
    fn write(self, block_key: &str, batch: &mut sled::Batch) -> Result<()> {
        for key in self.stored {
            batch.remove(key);
        }
        if self.entries.len() == STEPS_A_BLOCK as usize {
            batch.insert(block_key.as_bytes(), pack(&frame(&self.entries)?)?);
            return Ok(());
        }
        for (step, value) in self.entries {
            batch.insert(entry_key(self.kind, block_key.as_bytes(), step), value);
        }
        Ok(())
    }
}

/// The blocks a batch changes, each read once from the database and written whole.
#[derive(Default)]
pub struct Pending {
    blocks: BTreeMap<String, Open>,
}

impl Pending {
    /// Sets (`None`: removes) the value named `key`; returns whether its block held one.
    pub fn set(&mut self, db: &sled::Db, key: &str, value: Option<&[u8]>) -> Result<bool> {
        let kind = Kind::of_key(key).with_context(|| format!("{key} names no step"))?;
        let (block_key, step) =
            block_of(kind, key).with_context(|| format!("{key} names no step"))?;
        let open = match self.blocks.entry(block_key) {
            std::collections::btree_map::Entry::Occupied(open) => open.into_mut(),
            std::collections::btree_map::Entry::Vacant(slot) => {
                let open = Open::read(db, kind, slot.key())?;
                slot.insert(open)
            }
        };
        Ok(match value {
            Some(value) => open.entries.insert(step, value.to_vec()).is_some(),
            None => open.entries.remove(&step).is_some(),
        })
    }

    /// Adds the changed blocks to `batch`.
    pub fn into_batch(self, batch: &mut sled::Batch) -> Result<()> {
        for (block_key, open) in self.blocks {
            open.write(&block_key, batch)?;
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

    fn framed(entries: &[(u32, &[u8])]) -> Vec<u8> {
        frame(&entries.iter().map(|(s, v)| (*s, v.to_vec())).collect()).unwrap()
    }

    #[test]
    fn entries_read_back_in_step_order() {
        let block = framed(&[(5, b"five"), (1, b"one")]);
        let read: Vec<(u32, &[u8])> = entries(&block).map(Result::unwrap).collect();
        assert_eq!(read, [(1, &b"one"[..]), (5, &b"five"[..])]);
        assert_eq!(entries(&unpack(&pack(&block).unwrap()).unwrap()).count(), 2);
    }

    #[test]
    fn a_damaged_block_says_so_once() {
        let block = framed(&[(1, b"one"), (2, b"two")]);
        let cut = &block[..block.len() - 1];
        let read: Vec<_> = entries(cut).collect();
        assert_eq!(read.len(), 2);
        assert!(read[0].is_ok());
        assert!(format!("{:#}", read[1].as_ref().unwrap_err()).contains("step 2 is cut short"));
    }

    #[test]
    fn a_block_is_packed_once_complete_and_read_alike_before() {
        let dir = tempfile::tempdir().unwrap();
        let db = sled::open(dir.path()).unwrap();
        let key = |step: u32| format!("step/e/000000/{step:09}");
        for step in 0..STEPS_A_BLOCK + 1 {
            set_entry(&db, &key(step), Some(step.to_string().as_bytes())).unwrap();
            let loose = db.scan_prefix("step/").count() as u32;
            let packed = db.scan_prefix("steps/").count() as u32;
            assert_eq!(
                (packed, loose),
                ((step + 1) / STEPS_A_BLOCK, (step + 1) % STEPS_A_BLOCK)
            );
        }
        for step in [0, 15, 16] {
            assert_eq!(
                entry(&db, &key(step)).unwrap().unwrap(),
                step.to_string().as_bytes()
            );
        }
        // Taking an entry out of a complete block leaves its others one a key.
        assert!(set_entry(&db, &key(3), None).unwrap());
        assert_eq!(db.scan_prefix("steps/").count(), 0);
        assert_eq!(db.scan_prefix("step/").count(), 16);
        assert_eq!(entry(&db, &key(3)).unwrap(), None);
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
