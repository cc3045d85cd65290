//! The content-addressed cache of benchmark bundles: `<rundir>/bundles/<hash>/`.
//!
//! A bundle is written into a temporary folder and renamed into place, so a
//! crash never leaves a half bundle under its hash; leftovers of interrupted
//! writes are removed when the cache opens, unless the process that wrote them
//! still lives (another session on the same rundir, such as one orphaned by a
//! cut link, may be writing a bundle right now). Every path is checked to stay
//! inside its folder, and copies never follow symbolic links.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use kiln_protocol::decision::ContentHash;
use kiln_protocol::message::{is_confined_path, Bundle};

const TEMP_PREFIX: &str = ".tmp-";

/// The bundle cache of one rundir.
#[derive(Debug)]
pub struct BundleCache {
    root: PathBuf,
    next_temp: AtomicU64,
}

impl BundleCache {
    /// Opens (creating) the cache under `rundir/bundles`, clearing half-written
    /// leftovers of processes that are gone.
    pub fn open(rundir: &Path) -> Result<Self, String> {
        let root = rundir.join("bundles");
        fs::create_dir_all(&root).map_err(|e| format!("cannot create {}: {e}", root.display()))?;
        clear_leftovers(&root)?;
        Ok(BundleCache {
            root,
            next_temp: AtomicU64::new(0),
        })
    }

    /// The folder of a cached bundle, if present.
    pub fn get(&self, hash: &ContentHash) -> Option<PathBuf> {
        let dir = self.root.join(hash.to_string());
        dir.is_dir().then_some(dir)
    }

    /// Validates a bundle and stores it (a no-op if already cached).
    pub fn store(&self, bundle: &Bundle) -> Result<PathBuf, String> {
        bundle.validate()?;
        if let Some(dir) = self.get(&bundle.hash) {
            return Ok(dir);
        }
        let n = self.next_temp.fetch_add(1, Ordering::Relaxed);
        let temp = self.root.join(temp_name(&bundle.hash.short(), n));
        let result = write_files(&temp, bundle).and_then(|()| {
            let dest = self.root.join(bundle.hash.to_string());
            match fs::rename(&temp, &dest) {
                Ok(()) => Ok(dest),
                // Stored meanwhile by another request: the same contents.
                Err(_) if dest.is_dir() => Ok(dest),
                Err(e) => Err(format!(
                    "cannot move {} to {}: {e}",
                    temp.display(),
                    dest.display()
                )),
            }
        });
        if temp.exists() {
            let _ = fs::remove_dir_all(&temp);
        }
        result
    }
}

/// The name of this process's `n`th temporary folder for `label`:
/// `.tmp-<label>-<pid>-<n>`, renamed into place once written.
pub(crate) fn temp_name(label: &str, n: u64) -> String {
    format!("{TEMP_PREFIX}{label}-{}-{n}", std::process::id())
}

/// Removes the temporary folders under `root` whose writers are gone
/// (another session on the same rundir may be writing one right now).
pub(crate) fn clear_leftovers(root: &Path) -> Result<(), String> {
    let entries = fs::read_dir(root).map_err(|e| format!("cannot list {}: {e}", root.display()))?;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let writer_lives =
            temp_writer(&name).is_some_and(|pid| Path::new(&format!("/proc/{pid}")).exists());
        if name.starts_with(TEMP_PREFIX) && !writer_lives {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
    Ok(())
}

/// The pid of the process writing a temporary folder `.tmp-<hash>-<pid>-<n>`.
fn temp_writer(name: &str) -> Option<u32> {
    let mut parts = name.strip_prefix(TEMP_PREFIX)?.rsplit('-');
    parts.next()?;
    parts.next()?.parse().ok()
}

fn write_files(dir: &Path, bundle: &Bundle) -> Result<(), String> {
    fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    for file in &bundle.files {
        // Bundle::validate checked this; checked again since the write depends on it.
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
        let mut f = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&path)
            .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
        f.write_all(&file.contents)
            .and_then(|()| f.sync_all())
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}

/// Copies a folder tree (regular files and folders only, modes kept) into `dest`.
pub fn copy_tree(src: &Path, dest: &Path) -> Result<(), String> {
    fs::create_dir_all(dest).map_err(|e| format!("cannot create {}: {e}", dest.display()))?;
    let entries = fs::read_dir(src).map_err(|e| format!("cannot list {}: {e}", src.display()))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("cannot list {}: {e}", src.display()))?;
        let from = entry.path();
        let to = dest.join(entry.file_name());
        let meta = fs::symlink_metadata(&from)
            .map_err(|e| format!("cannot stat {}: {e}", from.display()))?;
        if meta.is_dir() {
            copy_tree(&from, &to)?;
        } else if meta.is_file() {
            fs::copy(&from, &to)
                .and_then(|_| {
                    fs::set_permissions(&to, fs::Permissions::from_mode(meta.permissions().mode()))
                })
                .map_err(|e| format!("cannot copy {} to {}: {e}", from.display(), to.display()))?;
        } else {
            return Err(format!(
                "{} is neither a file nor a folder; bundles hold only those",
                from.display()
            ));
        }
    }
    Ok(())
}

/// Removes and recreates a folder, refusing one outside `root`.
pub fn fresh_dir(root: &Path, dir: &Path) -> Result<(), String> {
    let climbs = dir
        .components()
        .any(|c| c == std::path::Component::ParentDir);
    if climbs || !dir.starts_with(root) || dir == root {
        return Err(format!(
            "refusing to clear {}: it is not inside {}",
            dir.display(),
            root.display()
        ));
    }
    match fs::remove_dir_all(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(format!("cannot clear {}: {e}", dir.display())),
    }
    fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_protocol::message::BundleFile;

    #[test]
    fn stores_atomically_and_copies() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = BundleCache::open(tmp.path()).unwrap();
        let bundle = Bundle::new(vec![
            BundleFile {
                path: "src/a.c".into(),
                executable: false,
                contents: b"int a;".to_vec(),
            },
            BundleFile {
                path: "run.sh".into(),
                executable: true,
                contents: b"#!/bin/sh\n".to_vec(),
            },
        ]);
        assert!(cache.get(&bundle.hash).is_none());
        let dir = cache.store(&bundle).unwrap();
        assert_eq!(cache.store(&bundle).unwrap(), dir);
        assert_eq!(fs::read(dir.join("src/a.c")).unwrap(), b"int a;");
        let leftovers: Vec<_> = fs::read_dir(tmp.path().join("bundles")).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temporary folder is left");

        let work = tmp.path().join("work");
        copy_tree(&dir, &work).unwrap();
        let mode = fs::metadata(work.join("run.sh"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o111, 0o111);
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
        let mut bundle = Bundle::new(vec![BundleFile {
            path: "a".into(),
            executable: false,
            contents: b"x".to_vec(),
        }]);
        bundle.files[0].path = "../a".into();
        assert!(cache.store(&bundle).unwrap_err().contains("escapes"));
        assert!(fresh_dir(tmp.path(), Path::new("/etc")).is_err());
    }
}
