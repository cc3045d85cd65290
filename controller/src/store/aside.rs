//! `kiln run --force-new`: an old store moved aside, under its lock.

use std::fs::{self, TryLockError};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use super::{layout, OpenError};

/// Moves the store in `dir` to [`layout::aside`]: the whole folder, or, where
/// the folder holds other things too (a config's own folder as its store), the
/// store's own files and folders, the database last. Its discoveries stay for
/// the next campaign (they depend on sources and spec only).
///
/// The store's lock (the one a running controller holds) is held across the
/// move, so the move is refused while a controller runs and no controller can
/// take the store meanwhile. `None` where `dir` holds no store.
pub fn move_aside(dir: &Path, now_ms: u64) -> Result<Option<PathBuf>> {
    if !dir.is_dir() {
        return Ok(None);
    }
    // `.` (a config's own folder) is moved aside beside it, by its own name.
    let dir = &dir
        .canonicalize()
        .with_context(|| format!("cannot resolve {}", dir.display()))?;
    let own = layout::own_entries(dir);
    let present: Vec<&PathBuf> = own
        .iter()
        .filter(|p| p.symlink_metadata().is_ok())
        .collect();
    if present.is_empty() {
        return Ok(None);
    }
    let _lock = lock_unused(dir)?;
    let aside = layout::aside(dir, now_ms);
    let discoveries = layout::kept_folder(dir, layout::Kept::Discovery);
    let everything_own = holds_only(dir, &own)?;
    if everything_own {
        fs::rename(dir, &aside)
            .with_context(|| format!("cannot move old store {} aside", dir.display()))?;
        let kept = layout::kept_folder(&aside, layout::Kept::Discovery);
        if kept.is_dir() {
            fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
            fs::rename(&kept, &discoveries)
                .with_context(|| format!("cannot keep the discoveries of {}", aside.display()))?;
        }
    } else {
        fs::create_dir_all(&aside).with_context(|| format!("cannot create {}", aside.display()))?;
        for entry in present.into_iter().filter(|p| **p != discoveries) {
            let name = entry.file_name().expect("a store's entries have names");
            fs::rename(entry, aside.join(name))
                .with_context(|| format!("cannot move {} aside", entry.display()))?;
        }
    }
    Ok(Some(aside))
}

/// The store's database file opened and locked, so that no controller takes the store while
/// it moves; `None` where there is none; an error where a running controller holds it.
fn lock_unused(dir: &Path) -> Result<Option<fs::File>> {
    let db_file = layout::db_file(dir);
    let file = match fs::File::open(&db_file) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("cannot open {}", db_file.display())),
    };
    match file.try_lock() {
        Ok(()) => Ok(Some(file)),
        Err(TryLockError::WouldBlock) => {
            let holder = fs::read_to_string(layout::holder(dir)).unwrap_or_default();
            Err(OpenError::InUse {
                dir: dir.to_path_buf(),
                holder: match holder.trim() {
                    "" => String::new(),
                    h => format!(": {h}"),
                },
                cause: "--force-new moves no store a running campaign holds".into(),
            }
            .into())
        }
        Err(TryLockError::Error(e)) => {
            Err(e).with_context(|| format!("cannot lock {}", db_file.display()))
        }
    }
}

/// Whether every entry of `dir` is one of `own` (the store's own files and folders).
fn holds_only(dir: &Path, own: &[PathBuf]) -> Result<bool> {
    let listed = fs::read_dir(dir)
        .with_context(|| format!("cannot list {}", dir.display()))?
        .map(|entry| entry.map(|e| own.contains(&e.path())))
        .collect::<std::io::Result<Vec<bool>>>()
        .with_context(|| format!("cannot list {}", dir.display()))?;
    Ok(listed.into_iter().all(|own| own))
}
