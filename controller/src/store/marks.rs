//! The high-water file: how many steps each chain (and each manual
//! experiment, as its chain 0) had decided. It is kept outside the database
//! so that steps lost from the database (a truncated log, a lost snapshot:
//! sled then recovers the steps before the damage, and the chain states with
//! them) are still known to have been decided, and `kiln store verify`
//! reports them as lost.
//!
//! Lines are appended after sled's flush returns, so a line never claims a
//! step sled had not made durable. They are not synced themselves: a power
//! cut may lose the latest ones, and the marks then lag, never lead.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::Path;

use anyhow::{Context, Result};

/// An experiment's chain.
pub type Chain = (String, u32);

/// The high-water file's counts as read: the latest of each chain, and how
/// many lines said them.
pub struct Read {
    /// Decided steps by chain.
    pub counts: BTreeMap<Chain, u32>,
    /// Lines read (more than there are chains once counts were appended).
    pub lines: usize,
}

/// Reads the high-water file; `None` where there is none (a store written
/// before kiln kept one). A last line without its newline (a write cut
/// short) is left out.
pub fn read(path: &Path) -> Result<Option<Read>> {
    let text = match fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    let whole = text.rfind('\n').map_or("", |end| &text[..end]);
    let mut counts = BTreeMap::new();
    let mut lines = 0;
    for (n, line) in whole.lines().enumerate() {
        let Some((chain, count)) = parse(line) else {
            anyhow::bail!(
                "{} line {}: not EXPERIMENT CHAIN COUNT",
                path.display(),
                n + 1
            );
        };
        counts.insert(chain, count);
        lines += 1;
    }
    Ok(Some(Read { counts, lines }))
}

/// A line's chain and count.
fn parse(line: &str) -> Option<(Chain, u32)> {
    let (rest, count) = line.rsplit_once('\t')?;
    let (experiment, chain) = rest.rsplit_once('\t')?;
    Some((
        (experiment.to_string(), chain.parse().ok()?),
        count.parse().ok()?,
    ))
}

/// The lines that say `counts`.
fn lines<'a>(counts: impl IntoIterator<Item = (&'a Chain, &'a u32)>) -> String {
    counts
        .into_iter()
        .map(|((experiment, chain), count)| format!("{experiment}\t{chain}\t{count}\n"))
        .collect()
}

/// Replaces the file at `path` (through `tmp`, synced) by one line per chain.
pub fn rewrite(path: &Path, tmp: &Path, counts: &BTreeMap<Chain, u32>) -> Result<()> {
    let write = || -> std::io::Result<()> {
        let mut f = fs::File::create(tmp)?;
        f.write_all(lines(counts).as_bytes())?;
        f.sync_all()?;
        fs::rename(tmp, path)
    };
    write().with_context(|| format!("cannot write {}", path.display()))
}

/// The counts a writer keeps: those in the file, and those decided since the
/// last flush.
#[derive(Default)]
pub struct Marks {
    written: BTreeMap<Chain, u32>,
    staged: BTreeMap<Chain, u32>,
}

impl Marks {
    /// Decided steps by chain, as written.
    pub fn written(&self) -> &BTreeMap<Chain, u32> {
        &self.written
    }

    /// A writer's marks, the file at `path` holding `written`.
    pub fn new(written: BTreeMap<Chain, u32>) -> Marks {
        Marks {
            written,
            staged: BTreeMap::new(),
        }
    }

    /// Notes that `chain` of `experiment` has decided `count` steps.
    pub fn stage(&mut self, experiment: &str, chain: u32, count: u32) {
        let key = (experiment.to_string(), chain);
        // A chain with no line has decided none.
        if self.written.get(&key).copied().unwrap_or(0) < count {
            let staged = self.staged.entry(key).or_default();
            *staged = count.max(*staged);
        }
    }

    /// Appends the counts staged since the last call to the file at `path`:
    /// call it once the steps they count are durable.
    pub fn append(&mut self, path: &Path) -> Result<()> {
        if self.staged.is_empty() {
            return Ok(());
        }
        let text = lines(&self.staged);
        fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut f| f.write_all(text.as_bytes()))
            .with_context(|| format!("cannot append to {}", path.display()))?;
        self.written.append(&mut self.staged);
        Ok(())
    }
}
