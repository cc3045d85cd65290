//! Content-addressed builds: `<rundir>/builds/<key>/` keeps what a successful
//! build added to or changed in its work folder (`files/`), and its record
//! (`record.json`). A later step with the same key (sources, benchmark,
//! decisions and toolchain: see `build::build_key`) gets a fresh copy of the
//! bundle with those files laid over it instead of a build: the same binary,
//! in milliseconds.
//!
//! The record lists every kept file's content hash and every link's target,
//! and a restore checks each file as it copies it: an entry that a disk
//! error, a stray edit or a truncation changed is discarded, never measured
//! ([`Restored::Damaged`]), and the step builds afresh. A file is hashed once
//! a session: restored again with the [`Stamp`] it had when it was hashed, it
//! is copied unread (a 64 MiB binary restored in a step of four 0.3 s runs
//! cost the step 11 % when hashed every time); so is a work folder's output
//! kept again as it was (a build that started in the last one's tree and
//! left the unit alone).
//!
//! Entries are written into a temporary folder and renamed into place, as the
//! bundle cache does; the least recently used go once the cache holds more
//! than [`MAX_ENTRIES`] or [`MAX_BYTES`]. Files are copied, never linked: a run
//! that writes into its work folder cannot change a cached build. Symbolic
//! links a build made are kept as links, never followed.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::io;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use kiln_protocol::decision::ContentHash;
use kiln_protocol::message::BuildRecord;

use crate::files::{clear_leftovers, copy_hashed, copy_unread, temp_name, Stamp};

/// Most builds kept.
pub const MAX_ENTRIES: usize = 256;
/// Most bytes of build outputs kept.
pub const MAX_BYTES: u64 = 4 << 30;

const RECORD: &str = "record.json";
const FILES: &str = "files";

/// The build cache of one rundir.
#[derive(Debug)]
pub struct BuildCache {
    root: PathBuf,
    next_temp: AtomicU64,
    /// The files hashed in this session (kept ones, and outputs in work
    /// folders as they were kept): their stamp then, and hash.
    hashed: Mutex<HashMap<PathBuf, (Stamp, ContentHash)>>,
    /// The bytes of each entry read or kept in this session: an entry's
    /// record holds its replay file (a megabyte on a large program), and
    /// eviction after every keep would otherwise read all of them again.
    sizes: Mutex<HashMap<PathBuf, u64>>,
}

/// A cached build's record, the size of its files, and what each kept file
/// and link must hold (by path relative to `files/`).
#[derive(serde::Serialize, serde::Deserialize)]
struct Entry {
    record: BuildRecord,
    bytes: u64,
    files: BTreeMap<String, ContentHash>,
    links: BTreeMap<String, PathBuf>,
    /// The work folder it was built in (none from an older worker): a build
    /// system's own files name it (CMake's cache), so a next build starts
    /// from this one only there (see `build::warm`).
    #[serde(default)]
    built_in: Option<PathBuf>,
}

/// What the cache gave for a build key.
#[derive(Debug)]
pub enum Restored {
    /// The build's outputs lie over the work folder, each as it was kept.
    Hit(BuildRecord),
    /// The build is not cached.
    Miss,
    /// The build was cached, but its files no longer hold what was kept (the
    /// reason names the entry and the file): the entry is gone, and the work
    /// folder, partly overlaid, must be made afresh.
    Damaged(String),
}

impl BuildCache {
    /// Opens (creating) the cache under `rundir/builds`.
    pub fn open(rundir: &Path) -> Result<Self, String> {
        let root = rundir.join("builds");
        fs::create_dir_all(&root).map_err(|e| format!("cannot create {}: {e}", root.display()))?;
        clear_leftovers(&root)?;
        Ok(BuildCache {
            root,
            next_temp: AtomicU64::new(0),
            hashed: Mutex::default(),
            sizes: Mutex::default(),
        })
    }

    /// Lays the outputs of the build `key` over `work` (a fresh copy of the
    /// bundle), checking each against its recorded hash.
    pub fn restore(&self, key: &ContentHash, work: &Path) -> Restored {
        self.restore_if(key, work, |_| true)
    }

    /// [`Self::restore`], only where the build `key` was made in `work`
    /// itself (else [`Restored::Miss`]): a warm build's start.
    pub fn restore_built_here(&self, key: &ContentHash, work: &Path) -> Restored {
        self.restore_if(key, work, |entry| entry.built_in.as_deref() == Some(work))
    }

    fn restore_if(
        &self,
        key: &ContentHash,
        work: &Path,
        wanted: impl Fn(&Entry) -> bool,
    ) -> Restored {
        let dir = self.root.join(key.to_string());
        let Ok(bytes) = fs::read(dir.join(RECORD)) else {
            return Restored::Miss;
        };
        let Ok(entry) = serde_json::from_slice::<Entry>(&bytes) else {
            // Kept by an older worker, without hashes: it cannot be checked.
            let _ = fs::remove_dir_all(&dir);
            return Restored::Miss;
        };
        if !wanted(&entry) {
            return Restored::Miss;
        }
        match copy_outputs(&dir.join(FILES), work, &entry, &self.hashed) {
            Ok(()) => {
                // Recently used: the last to be evicted.
                let _ =
                    fs::File::open(&dir).and_then(|f| f.set_modified(std::time::SystemTime::now()));
                Restored::Hit(entry.record)
            }
            Err(why) => {
                let _ = fs::remove_dir_all(&dir);
                Restored::Damaged(format!(
                    "the cached build {} ({}) was discarded: {why}",
                    key.short(),
                    dir.display()
                ))
            }
        }
    }

    /// Whether the build `key` is kept (unchecked: [`Self::restore`] checks it).
    pub fn holds(&self, key: &ContentHash) -> bool {
        self.root.join(key.to_string()).join(RECORD).is_file()
    }

    /// Keeps what the build in `work` made or changed, compared with the
    /// bundle in `bundle_dir` (kiln's own folders `skip` left out).
    pub fn keep(
        &self,
        key: &ContentHash,
        bundle_dir: &Path,
        work: &Path,
        skip: &[&str],
        record: &BuildRecord,
    ) -> Result<(), String> {
        let dest = self.root.join(key.to_string());
        if dest.is_dir() {
            return Ok(());
        }
        let n = self.next_temp.fetch_add(1, Ordering::Relaxed);
        let temp = self.root.join(temp_name(&key.short(), n));
        let written = (|| {
            let mut entry = Entry {
                record: record.clone(),
                bytes: 0,
                files: BTreeMap::new(),
                links: BTreeMap::new(),
                built_in: Some(work.to_path_buf()),
            };
            collect_outputs(
                bundle_dir,
                work,
                &temp.join(FILES),
                skip,
                &mut entry,
                &self.hashed,
            )?;
            let json = serde_json::to_vec(&entry).map_err(|e| e.to_string())?;
            fs::write(temp.join(RECORD), json).map_err(|e| e.to_string())?;
            match fs::rename(&temp, &dest) {
                Ok(()) => {
                    lock(&self.sizes).insert(dest.clone(), entry.bytes);
                    Ok(())
                }
                // Kept meanwhile by another slot: the same build.
                Err(_) if dest.is_dir() => Ok(()),
                Err(e) => Err(format!("cannot move {} into place: {e}", temp.display())),
            }
        })();
        if temp.exists() {
            let _ = fs::remove_dir_all(&temp);
        }
        written?;
        self.evict();
        Ok(())
    }

    /// Removes the least recently used builds beyond the cache's limits.
    fn evict(&self) {
        let Ok(dir) = fs::read_dir(&self.root) else {
            return;
        };
        let mut sizes = lock(&self.sizes);
        let mut entries: Vec<(std::time::SystemTime, u64, PathBuf)> = dir
            .flatten()
            .filter_map(|e| {
                let path = e.path();
                let used = e.metadata().ok()?.modified().ok()?;
                let bytes = match sizes.get(&path) {
                    Some(&bytes) => bytes,
                    None => {
                        let entry: Entry =
                            serde_json::from_slice(&fs::read(path.join(RECORD)).ok()?).ok()?;
                        sizes.insert(path.clone(), entry.bytes);
                        entry.bytes
                    }
                };
                Some((used, bytes, path))
            })
            .collect();
        entries.sort_by_key(|e| std::cmp::Reverse(e.0));
        let mut total = 0u64;
        for (i, (_, bytes, path)) in entries.iter().enumerate() {
            total += bytes;
            if i >= MAX_ENTRIES || total > MAX_BYTES {
                let _ = fs::remove_dir_all(path);
                sizes.remove(path);
            }
        }
    }
}

/// The memo behind `m`, also after a panic elsewhere held it (each entry
/// is written whole).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A path relative to a build's folder as the record keys it.
fn key_of(rel: &Path) -> Result<String, String> {
    rel.to_str()
        .map(str::to_string)
        .ok_or_else(|| format!("{} is not a UTF-8 name", rel.display()))
}

/// Copies into `dest` every file and link of `work` that `bundle_dir` lacks
/// or holds with other contents, recording each in `entry`. A file kept
/// before with the stamp it has now (a build that started in the last one's
/// tree left it alone) is copied unread, its hash known from `hashed`.
fn collect_outputs(
    bundle_dir: &Path,
    work: &Path,
    dest: &Path,
    skip: &[&str],
    entry: &mut Entry,
    hashed: &Mutex<HashMap<PathBuf, (Stamp, ContentHash)>>,
) -> Result<(), String> {
    let mut stack = vec![PathBuf::new()];
    fs::create_dir_all(dest).map_err(|e| format!("cannot create {}: {e}", dest.display()))?;
    while let Some(rel) = stack.pop() {
        let dir = work.join(&rel);
        let entries =
            fs::read_dir(&dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
        for item in entries.flatten() {
            let name = item.file_name();
            if rel.as_os_str().is_empty() && skip.iter().any(|s| name == *s) {
                continue;
            }
            let rel = rel.join(&name);
            let from = work.join(&rel);
            let to = dest.join(&rel);
            let meta = fs::symlink_metadata(&from)
                .map_err(|e| format!("cannot stat {}: {e}", from.display()))?;
            let made = |e: io::Error| format!("cannot keep {}: {e}", from.display());
            if meta.is_dir() {
                stack.push(rel);
            } else if meta.is_symlink() {
                let target = fs::read_link(&from).map_err(made)?;
                if fs::read_link(bundle_dir.join(&rel)).ok().as_ref() != Some(&target) {
                    fs::create_dir_all(to.parent().unwrap_or(dest)).map_err(made)?;
                    symlink(&target, &to).map_err(made)?;
                    entry.links.insert(key_of(&rel)?, target);
                }
            } else if meta.is_file() && !same_contents(&bundle_dir.join(&rel), &from, &meta) {
                fs::create_dir_all(to.parent().unwrap_or(dest)).map_err(made)?;
                let mode = meta.permissions().mode();
                let hash =
                    copy_memoised(&from, &to, mode, Stamp::of(&meta), hashed).map_err(made)?;
                entry.bytes += meta.len();
                entry.files.insert(key_of(&rel)?, hash);
            }
        }
    }
    Ok(())
}

/// Whether `original` (in the bundle) holds what `file` (in the work folder) holds.
fn same_contents(original: &Path, file: &Path, meta: &fs::Metadata) -> bool {
    match fs::metadata(original) {
        Ok(m) if m.is_file() && m.len() == meta.len() && m.permissions() == meta.permissions() => {
            matches!((fs::read(original), fs::read(file)), (Ok(a), Ok(b)) if a == b)
        }
        _ => false,
    }
}

/// Copies `from` (of stamp `stamp`) to `to`, returning its content hash:
/// unread where `hashed` holds its hash at that stamp, else hashed as it is
/// copied and remembered.
fn copy_memoised(
    from: &Path,
    to: &Path,
    mode: u32,
    stamp: Stamp,
    hashed: &Mutex<HashMap<PathBuf, (Stamp, ContentHash)>>,
) -> io::Result<ContentHash> {
    let known = lock(hashed).get(from).copied();
    match known {
        Some((then, hash)) if then == stamp => {
            copy_unread(from, to, mode)?;
            Ok(hash)
        }
        _ => {
            // The stamp from before the read: a change while it is read
            // gives the file another, and the next copy hashes it again.
            let hash = copy_hashed(from, to, mode)?;
            lock(hashed).insert(from.to_path_buf(), (stamp, hash));
            Ok(hash)
        }
    }
}

/// Lays the kept files of `src` over `work`, replacing what is there, each
/// checked against what `entry` recorded; `Err` names the first that differs.
fn copy_outputs(
    src: &Path,
    work: &Path,
    entry: &Entry,
    hashed: &Mutex<HashMap<PathBuf, (Stamp, ContentHash)>>,
) -> Result<(), String> {
    let mut stack = vec![PathBuf::new()];
    let (mut files, mut links) = (0, 0);
    while let Some(rel) = stack.pop() {
        let dir = src.join(&rel);
        let entries =
            fs::read_dir(&dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
        for item in entries.flatten() {
            let rel = rel.join(item.file_name());
            let (from, to) = (src.join(&rel), work.join(&rel));
            let failed = |e: io::Error| format!("cannot restore {}: {e}", to.display());
            let meta = fs::symlink_metadata(&from).map_err(failed)?;
            if meta.is_dir() {
                fs::create_dir_all(&to).map_err(failed)?;
                stack.push(rel);
                continue;
            }
            match fs::symlink_metadata(&to) {
                Ok(m) if m.is_dir() => fs::remove_dir_all(&to).map_err(failed)?,
                Ok(_) => fs::remove_file(&to).map_err(failed)?,
                Err(_) => {}
            }
            let key = key_of(&rel)?;
            if meta.is_symlink() {
                let target = fs::read_link(&from).map_err(failed)?;
                if entry.links.get(&key) != Some(&target) {
                    return Err(format!("the link {key} is not the one kept"));
                }
                symlink(target, &to).map_err(failed)?;
                links += 1;
            } else {
                let Some(kept) = entry.files.get(&key) else {
                    return Err(format!("{key} was not kept with the build"));
                };
                let mode = meta.permissions().mode();
                let found =
                    copy_memoised(&from, &to, mode, Stamp::of(&meta), hashed).map_err(failed)?;
                if found != *kept {
                    return Err(format!(
                        "{key} holds other bytes than were kept ({} bytes now, content hash {} \
                         where {} was kept)",
                        meta.len(),
                        found.short(),
                        kept.short()
                    ));
                }
                files += 1;
            }
        }
    }
    if files != entry.files.len() || links != entry.links.len() {
        let missing = entry.files.len() + entry.links.len() - files - links;
        return Err(format!("{missing} kept file(s) missing"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(wall_ns: u64) -> BuildRecord {
        BuildRecord {
            wall_ns,
            text_bytes: None,
            binary_hash: None,
            log_tail: String::new(),
            replay_file: None,
            reused: false,
            moot: BTreeMap::new(),
        }
    }

    #[test]
    fn keeps_what_a_build_made_or_changed_and_lays_it_over_the_sources() {
        let tmp = tempfile::tempdir().unwrap();
        let (bundle, work) = (tmp.path().join("bundle"), tmp.path().join("work"));
        for dir in [&bundle, &work] {
            fs::create_dir_all(dir.join("src")).unwrap();
            fs::write(dir.join("src/a.c"), "int a;").unwrap();
            fs::write(dir.join("Makefile"), "all:").unwrap();
        }
        fs::write(work.join("Makefile"), "changed by the build").unwrap();
        fs::write(work.join("src/a.o"), "object").unwrap();
        fs::create_dir_all(work.join(".kiln-wrap")).unwrap();
        fs::write(work.join(".kiln-wrap/clang"), "wrapper").unwrap();
        symlink("a.o", work.join("src/liba.so")).unwrap();

        let cache = BuildCache::open(tmp.path()).unwrap();
        let key = ContentHash::of(b"build");
        assert!(matches!(cache.restore(&key, &work), Restored::Miss));
        cache
            .keep(&key, &bundle, &work, &[".kiln-wrap"], &record(7))
            .unwrap();
        let kept = tmp.path().join("builds").join(key.to_string()).join(FILES);
        assert!(
            !kept.join("src/a.c").exists(),
            "unchanged sources are not kept"
        );
        assert!(!kept.join(".kiln-wrap").exists());

        let fresh = tmp.path().join("fresh");
        fs::create_dir_all(fresh.join("src")).unwrap();
        fs::write(fresh.join("src/a.c"), "int a;").unwrap();
        fs::write(fresh.join("Makefile"), "all:").unwrap();
        assert_eq!(hit(cache.restore(&key, &fresh)).wall_ns, 7);
        assert_eq!(fs::read_to_string(fresh.join("src/a.o")).unwrap(), "object");
        assert_eq!(
            fs::read_to_string(fresh.join("Makefile")).unwrap(),
            "changed by the build"
        );
        assert_eq!(
            fs::read_link(fresh.join("src/liba.so")).unwrap(),
            Path::new("a.o")
        );
        assert_eq!(fs::read_to_string(fresh.join("src/a.c")).unwrap(), "int a;");
    }

    #[test]
    fn the_least_recently_used_go_first() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = BuildCache::open(tmp.path()).unwrap();
        let (bundle, work) = (tmp.path().join("bundle"), tmp.path().join("work"));
        fs::create_dir_all(&bundle).unwrap();
        fs::create_dir_all(&work).unwrap();
        for i in 0..MAX_ENTRIES + 2 {
            fs::write(work.join("bench"), i.to_string()).unwrap();
            let key = ContentHash::of(i.to_string().as_bytes());
            cache
                .keep(&key, &bundle, &work, &[], &record(i as u64))
                .unwrap();
            // Each entry used after the one before it.
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let count = fs::read_dir(tmp.path().join("builds")).unwrap().count();
        assert_eq!(count, MAX_ENTRIES);
        let gone =
            |key: &[u8]| matches!(cache.restore(&ContentHash::of(key), &work), Restored::Miss);
        assert!(gone(b"1") && gone(b"0"));
        let last = (MAX_ENTRIES + 1).to_string();
        hit(cache.restore(&ContentHash::of(last.as_bytes()), &work));
    }

    fn hit(restored: Restored) -> BuildRecord {
        match restored {
            Restored::Hit(record) => record,
            other => panic!("expected a cached build, got {other:?}"),
        }
    }

    /// A kept binary replaced by a script, truncated, rewritten, or joined by a
    /// file the build never made: each is found on restore and the entry
    /// discarded, also after the session restored (and hashed) it once.
    #[test]
    fn a_changed_entry_is_discarded_not_restored() {
        type Tamper = fn(&Path);
        let tampers: [(&str, Tamper); 5] = [
            ("replaced", |f| {
                fs::write(f.join("bench"), "#!/bin/sh\nsleep 0.05\n").unwrap()
            }),
            ("truncated", |f| {
                let len = fs::metadata(f.join("bench")).unwrap().len();
                fs::OpenOptions::new()
                    .write(true)
                    .open(f.join("bench"))
                    .unwrap()
                    .set_len(len / 2)
                    .unwrap()
            }),
            ("removed", |f| fs::remove_file(f.join("bench")).unwrap()),
            ("added", |f| fs::write(f.join("extra"), "x").unwrap()),
            ("rewritten in place, its modification time set back", |f| {
                let bench = f.join("bench");
                let modified = fs::metadata(&bench).unwrap().modified().unwrap();
                let mut file = fs::OpenOptions::new().write(true).open(&bench).unwrap();
                io::Write::write_all(&mut file, &[0x7e; 4096]).unwrap();
                file.set_modified(modified).unwrap();
            }),
        ];
        for (what, tamper) in tampers {
            let tmp = tempfile::tempdir().unwrap();
            let (bundle, work) = (tmp.path().join("bundle"), tmp.path().join("work"));
            fs::create_dir_all(&bundle).unwrap();
            fs::create_dir_all(&work).unwrap();
            fs::write(work.join("bench"), vec![0x7f; 4096]).unwrap();
            let cache = BuildCache::open(tmp.path()).unwrap();
            let key = ContentHash::of(what.as_bytes());
            cache.keep(&key, &bundle, &work, &[], &record(1)).unwrap();
            let entry = tmp.path().join("builds").join(key.to_string());
            let fresh = tmp.path().join("fresh");
            fs::create_dir_all(&fresh).unwrap();
            hit(cache.restore(&key, &fresh));
            tamper(&entry.join(FILES));
            match cache.restore(&key, &fresh) {
                Restored::Damaged(why) => assert!(why.contains(&key.short()), "{what}: {why}"),
                other => panic!("{what}: expected a damaged entry, got {other:?}"),
            }
            assert!(!entry.exists(), "{what}: the entry is discarded");
            assert!(
                matches!(cache.restore(&key, &fresh), Restored::Miss),
                "{what}"
            );
        }
    }
}
