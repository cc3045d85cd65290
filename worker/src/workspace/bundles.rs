//! The content-addressed cache of benchmark bundles: `<rundir>/bundles/<hash>/`.
//!
//! A bundle arrives in parts ([`BundlePart`]), stored one by one into
//! `.part-<hash>/` with the count of parts stored beside it, so a transfer
//! cut off (a lost link, a worker restarted) resumes at the first part the
//! worker lacks. Files are not synced one by one: once the last part is in,
//! the whole folder is checked against the bundle's hash, synced once and
//! renamed into place, so a crash never leaves a half bundle under its hash.
//! A cached bundle is checked against its hash again the first time a
//! session asks for it: one that changed on disk is discarded and sent anew.
//!
//! Leftovers of interrupted writes (`.tmp-…`) are removed when the cache
//! opens, unless the process that wrote them still lives (another session on
//! the same rundir, such as one orphaned by a cut link, may be writing right
//! now); parts of a transfer that never finished go after [`STALE_PARTS`].
//! Every path is checked to stay inside its folder, and copies never follow
//! symbolic links.

use std::collections::HashSet;
use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use kiln_protocol::bundle::{is_confined_path, Bundle, BundlePart};
use kiln_protocol::decision::ContentHash;

use crate::files::{clear_leftovers, hash_dir, temp_name};

use crate::launch;

const PARTS_PREFIX: &str = ".part-";

/// How long the parts of a transfer that never finished are kept for it to resume.
const STALE_PARTS: Duration = Duration::from_secs(7 * 24 * 3600);

/// The bundle cache of one rundir.
#[derive(Debug)]
pub struct BundleCache {
    root: PathBuf,
    next_temp: AtomicU64,
    /// Bundles checked against their hash in this session.
    checked: Mutex<HashSet<ContentHash>>,
}

/// What the cache holds of a bundle.
#[derive(Debug, PartialEq, Eq)]
pub struct Holding {
    /// Whether the whole bundle is in place (and checked).
    pub present: bool,
    /// Parts stored by a transfer that has not finished.
    pub parts_stored: u32,
    /// Why a cached copy was discarded, if it was.
    pub discarded: Option<String>,
}

impl BundleCache {
    /// Opens (creating) the cache under `rundir/bundles`, clearing half-written
    /// leftovers of processes that are gone.
    pub fn open(rundir: &Path) -> Result<Self, String> {
        let root = rundir.join("bundles");
        fs::create_dir_all(&root).map_err(|e| format!("cannot create {}: {e}", root.display()))?;
        clear_leftovers(&root)?;
        clear_stale_parts(&root);
        Ok(BundleCache {
            root,
            next_temp: AtomicU64::new(0),
            checked: Mutex::default(),
        })
    }

    /// The folder of a cached bundle, if present.
    pub fn get(&self, hash: &ContentHash) -> Option<PathBuf> {
        let dir = self.root.join(hash.to_string());
        dir.is_dir().then_some(dir)
    }

    /// What the cache holds of a bundle; a cached copy is checked against its
    /// hash once per session, and discarded if it no longer matches.
    pub fn holding(&self, hash: &ContentHash) -> Holding {
        let discarded = match self.get(hash) {
            None => None,
            Some(dir) => match self.check(hash, &dir) {
                Ok(()) => {
                    return Holding {
                        present: true,
                        parts_stored: 0,
                        discarded: None,
                    }
                }
                Err(why) => Some(why),
            },
        };
        Holding {
            present: false,
            parts_stored: self.parts_stored(hash),
            discarded,
        }
    }

    /// Checks the cached bundle in `dir` against its hash (once per session);
    /// one that no longer matches is removed, and `Err` says why.
    fn check(&self, hash: &ContentHash, dir: &Path) -> Result<(), String> {
        let mut checked = self.checked.lock().unwrap_or_else(|p| p.into_inner());
        if checked.contains(hash) {
            return Ok(());
        }
        let why = match hash_dir(dir) {
            Ok(found) if found == *hash => {
                checked.insert(*hash);
                return Ok(());
            }
            Ok(other) => format!("its files hash to {}", other.short()),
            Err(e) => e,
        };
        let aside = self.root.join(temp_name(&hash.short(), self.next()));
        // Renamed first: a step starting meanwhile finds no bundle rather than half of one.
        let _ = fs::rename(dir, &aside).and_then(|()| fs::remove_dir_all(&aside));
        Err(format!(
            "the cached bundle {} ({}) was discarded: {why}",
            hash.short(),
            dir.display()
        ))
    }

    fn next(&self) -> u64 {
        self.next_temp.fetch_add(1, Ordering::Relaxed)
    }

    fn parts_dir(&self, hash: &ContentHash) -> PathBuf {
        self.root.join(format!("{PARTS_PREFIX}{hash}"))
    }

    fn parts_count_file(&self, hash: &ContentHash) -> PathBuf {
        self.root.join(format!("{PARTS_PREFIX}{hash}.stored"))
    }

    fn parts_stored(&self, hash: &ContentHash) -> u32 {
        fs::read_to_string(self.parts_count_file(hash))
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(0)
    }

    /// Stores a whole bundle at once (in-process callers: a worker's own tests
    /// and tools; a session gets it in parts).
    pub fn store(&self, bundle: &Bundle) -> Result<PathBuf, String> {
        let mut stored = None;
        for part in bundle.parts() {
            stored = self.store_part(&part)?;
        }
        stored.ok_or_else(|| format!("bundle {} holds no files", bundle.hash.short()))
    }

    /// Stores one part of a bundle; once its last part is in, checks the whole
    /// bundle against its hash and puts it in place: `Some(folder)` then.
    /// A part stored before is taken again as a no-op (a resumed transfer).
    pub fn store_part(&self, part: &BundlePart) -> Result<Option<PathBuf>, String> {
        let hash = part.hash;
        if part.index >= part.count {
            return Err(format!(
                "bundle {} part {} of {}: no such part",
                hash.short(),
                part.index,
                part.count
            ));
        }
        if let Some(dir) = self.get(&hash) {
            return Ok(Some(dir));
        }
        // The cache's folder again where it was removed since it opened (a cleaner, a reboot's
        // tmpfs): the controller sends what it lacks.
        fs::create_dir_all(&self.root)
            .map_err(|e| format!("cannot create {}: {e}", self.root.display()))?;
        let count_file = self.parts_count_file(&hash);
        let _lock = lock_file(&count_file)?;
        let stored = self.parts_stored(&hash);
        if part.index > stored {
            return Err(format!(
                "bundle {} part {} arrived while only {stored} are stored; send part {stored} first",
                hash.short(),
                part.index
            ));
        }
        let parts = self.parts_dir(&hash);
        if part.index == stored {
            write_files(&parts, part)?;
            fs::write(&count_file, (stored + 1).to_string())
                .map_err(|e| format!("cannot write {}: {e}", count_file.display()))?;
        }
        if part.index + 1 < part.count {
            return Ok(None);
        }
        let dest = self.put_in_place(part, &parts)?;
        let _ = fs::remove_file(&count_file);
        self.checked
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(hash);
        Ok(Some(dest))
    }

    /// Checks a bundle whose every part is in `parts` against its hash and moves it into the
    /// cache; its folder there. A bundle that does not match is removed, parts and count.
    fn put_in_place(&self, part: &BundlePart, parts: &Path) -> Result<PathBuf, String> {
        let hash = part.hash;
        let found = hash_dir(parts)?;
        if found != hash {
            let _ = fs::remove_dir_all(parts);
            let _ = fs::remove_file(self.parts_count_file(&hash));
            return Err(format!(
                "bundle hash mismatch: announced {}, the {} parts hash to {}",
                hash.short(),
                part.count,
                found.short()
            ));
        }
        sync_filesystem(parts)?;
        let dest = self.root.join(hash.to_string());
        match fs::rename(parts, &dest) {
            Ok(()) => Ok(dest),
            // Stored meanwhile by another session: the same contents.
            Err(_) if dest.is_dir() => {
                let _ = fs::remove_dir_all(parts);
                Ok(dest)
            }
            Err(e) => Err(format!(
                "cannot move {} to {}: {e}",
                parts.display(),
                dest.display()
            )),
        }
    }
}

/// `path` opened (made where missing, never truncated) and locked: one session at a time
/// stores parts of a bundle (an orphaned one may still be at it). Unlocked when dropped.
fn lock_file(path: &Path) -> Result<fs::File, String> {
    let file = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(path)
        .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
    file.lock()
        .map_err(|e| format!("cannot lock {}: {e}", path.display()))?;
    Ok(file)
}

/// Removes the parts of transfers untouched for [`STALE_PARTS`].
fn clear_stale_parts(root: &Path) {
    let Ok(entries) = fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let stale = entry
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|t| t.elapsed().is_ok_and(|age| age > STALE_PARTS));
        if stale
            && entry
                .file_name()
                .to_string_lossy()
                .starts_with(PARTS_PREFIX)
        {
            let path = entry.path();
            let _ = fs::remove_dir_all(&path).or_else(|_| fs::remove_file(&path));
        }
    }
}

/// Writes a part's files under `dir`, replacing any left by a part cut off
/// while being written.
fn write_files(dir: &Path, part: &BundlePart) -> Result<(), String> {
    fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    for file in &part.files {
        // Checked again since the write depends on it: a part is not checked as a whole.
        if !is_confined_path(&file.path) {
            return Err(format!(
                "bundle path '{}' escapes the bundle folder",
                file.path
            ));
        }
        let path = dir.join(&file.path);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent)
                .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        }
        let mode = if file.executable { 0o755 } else { 0o644 };
        launch::writing(|| {
            let _ = fs::remove_file(&path);
            let mut f = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(mode)
                .open(&path)?;
            f.write_all(&file.contents)?;
            match file.modified_ns {
                Some(ns) => f.set_modified(time_of(ns)),
                None => Ok(()),
            }
        })
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}

/// The time `ns` nanoseconds from the epoch (before it where negative).
fn time_of(ns: i64) -> std::time::SystemTime {
    let since = std::time::Duration::from_nanos(ns.unsigned_abs());
    match ns >= 0 {
        true => std::time::UNIX_EPOCH + since,
        false => std::time::UNIX_EPOCH - since,
    }
}

/// One sync for a whole folder's files (their file system's), instead of one per file.
fn sync_filesystem(dir: &Path) -> Result<(), String> {
    let folder = fs::File::open(dir).map_err(|e| format!("cannot open {}: {e}", dir.display()))?;
    // SAFETY: syncfs takes a descriptor we own for the call's duration.
    if unsafe { libc::syncfs(std::os::fd::AsRawFd::as_raw_fd(&folder)) } != 0 {
        let e = io::Error::last_os_error();
        return Err(format!("cannot sync {}: {e}", dir.display()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::files::{copy_tree, fresh_dir, temp_writer, TEMP_PREFIX};
    use kiln_protocol::bundle::BundleFile;
    use std::os::unix::fs::PermissionsExt;

    fn file(path: &str, executable: bool, contents: &[u8]) -> BundleFile {
        BundleFile {
            path: path.into(),
            executable,
            contents: contents.to_vec(),
            modified_ns: None,
        }
    }

    #[test]
    fn stores_atomically_and_copies() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = BundleCache::open(tmp.path()).unwrap();
        let bundle = Bundle::new(vec![
            file("src/a.c", false, b"int a;"),
            file("run.sh", true, b"#!/bin/sh\n"),
        ]);
        assert!(!cache.holding(&bundle.hash).present);
        let dir = cache.store(&bundle).unwrap();
        assert_eq!(cache.store(&bundle).unwrap(), dir);
        assert_eq!(fs::read(dir.join("src/a.c")).unwrap(), b"int a;");
        let leftovers: Vec<_> = fs::read_dir(tmp.path().join("bundles")).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temporary folder is left");
        assert_eq!(hash_dir(&dir).unwrap(), bundle.hash);

        let work = tmp.path().join("work");
        copy_tree(&dir, &work).unwrap();
        let mode = fs::metadata(work.join("run.sh"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o111, 0o111);
    }

    /// A transfer cut off after some parts resumes where it stopped, in a new
    /// session: the parts stored are not asked for again.
    #[test]
    fn a_transfer_cut_off_resumes_at_the_first_missing_part() {
        let tmp = tempfile::tempdir().unwrap();
        let files = (0..3 * kiln_protocol::bundle::PART_FILES)
            .map(|i| {
                file(
                    &format!("d{}/f{i}.c", i % 7),
                    i % 5 == 0,
                    i.to_string().as_bytes(),
                )
            })
            .collect();
        let bundle = Bundle::new(files);
        let parts = bundle.parts();
        assert_eq!(parts.len(), 3);
        {
            let cache = BundleCache::open(tmp.path()).unwrap();
            assert_eq!(cache.store_part(&parts[0]).unwrap(), None);
            let early = cache.store_part(&parts[2]).unwrap_err();
            assert!(early.contains("send part 1 first"), "{early}");
        }
        let cache = BundleCache::open(tmp.path()).unwrap();
        let holding = cache.holding(&bundle.hash);
        assert_eq!((holding.present, holding.parts_stored), (false, 1));
        // Part 0 again (an answer lost with the link) changes nothing.
        assert_eq!(cache.store_part(&parts[0]).unwrap(), None);
        assert_eq!(cache.store_part(&parts[1]).unwrap(), None);
        let dir = cache.store_part(&parts[2]).unwrap().unwrap();
        assert_eq!(hash_dir(&dir).unwrap(), bundle.hash);
        assert!(cache.holding(&bundle.hash).present);
    }

    /// A cached bundle whose files changed on disk is discarded the first time
    /// a session asks for it, and reported.
    #[test]
    fn a_changed_bundle_is_discarded_when_a_session_asks_for_it() {
        let tmp = tempfile::tempdir().unwrap();
        let bundle = Bundle::new(vec![file("main.c", false, b"int main(){}")]);
        let dir = BundleCache::open(tmp.path())
            .unwrap()
            .store(&bundle)
            .unwrap();
        fs::write(dir.join("main.c"), "int main(){return 1;}").unwrap();
        let cache = BundleCache::open(tmp.path()).unwrap();
        let holding = cache.holding(&bundle.hash);
        assert!(!holding.present);
        assert!(holding.discarded.unwrap().contains(&bundle.hash.short()));
        assert!(cache.get(&bundle.hash).is_none());
        cache.store(&bundle).unwrap();
        assert_eq!(cache.holding(&bundle.hash).discarded, None);
    }

    #[test]
    fn only_leftovers_of_gone_writers_are_cleared() {
        let tmp = tempfile::tempdir().unwrap();
        let bundles = tmp.path().join("bundles");
        // Our own pid lives; pid 0 never names a process in /proc.
        let live = bundles.join(format!("{TEMP_PREFIX}abcd-{}-0", std::process::id()));
        let dead = bundles.join(format!("{TEMP_PREFIX}abcd-0-3"));
        let odd = bundles.join(format!("{TEMP_PREFIX}junk"));
        for d in [&live, &dead, &odd] {
            fs::create_dir_all(d).unwrap();
        }
        BundleCache::open(tmp.path()).unwrap();
        assert!(live.exists(), "another session may be writing it");
        assert!(!dead.exists() && !odd.exists());
        assert_eq!(temp_writer(".tmp-abcd-42-7"), Some(42));
        assert_eq!(temp_writer("abcd-42-7"), None);
    }

    #[test]
    fn rejects_tampered_and_escaping_bundles() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = BundleCache::open(tmp.path()).unwrap();
        let mut bundle = Bundle::new(vec![file("a", false, b"x")]);
        bundle.files[0].path = "../a".into();
        assert!(cache.store(&bundle).unwrap_err().contains("escapes"));
        let mut bundle = Bundle::new(vec![file("a", false, b"x")]);
        bundle.files[0].contents = b"y".to_vec();
        assert!(cache.store(&bundle).unwrap_err().contains("mismatch"));
        assert!(cache.get(&bundle.hash).is_none());
        assert!(fresh_dir(tmp.path(), Path::new("/etc")).is_err());
    }
}
