//! The worker's file handling, shared by its caches and steps: copies and
//! hashes of file trees, confined to their folders, never following symbolic
//! links; files that may be executed are written under [`launch::writing`];
//! temporary folders named by their writer, renamed into place once written,
//! and cleared once their writer is gone.

use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use kiln_protocol::bundle::BundleHasher;
use kiln_protocol::decision::ContentHash;

use crate::launch;

/// The bundle hash of the files under `dir`, as [`Bundle::new`] hashes them:
/// every regular file by its `/`-separated path, in path order, executable
/// where any execute bit is set.
///
/// [`Bundle::new`]: kiln_protocol::bundle::Bundle::new
pub(crate) fn hash_dir(dir: &Path) -> Result<ContentHash, String> {
    let mut files = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let here = dir.join(&rel);
        let entries =
            fs::read_dir(&here).map_err(|e| format!("cannot list {}: {e}", here.display()))?;
        for entry in entries {
            let entry = entry.map_err(|e| format!("cannot list {}: {e}", here.display()))?;
            let rel = rel.join(entry.file_name());
            let meta = entry
                .metadata()
                .map_err(|e| format!("cannot stat {}: {e}", dir.join(&rel).display()))?;
            if meta.is_dir() {
                stack.push(rel);
            } else if !meta.is_file() {
                return Err(format!("{} is neither a file nor a folder", rel.display()));
            } else {
                let name = rel
                    .to_str()
                    .ok_or_else(|| format!("{} is not a UTF-8 name", rel.display()))?
                    .to_string();
                files.push((name, meta.permissions().mode() & 0o111 != 0));
            }
        }
    }
    files.sort();
    let mut hasher = BundleHasher::default();
    let mut contents = Vec::new();
    for (name, executable) in files {
        let path = dir.join(&name);
        contents.clear();
        fs::File::open(&path)
            .and_then(|mut f| f.read_to_end(&mut contents))
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        hasher.add(&name, executable, &contents);
    }
    Ok(hasher.finish())
}

/// What a file's metadata says of its contents. Writing, truncating or
/// replacing a file changes its stamp (its change time cannot be set back by
/// any process), so a file whose stamp is the one it had when its contents
/// were checked still holds those contents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp {
    device: u64,
    inode: u64,
    len: u64,
    modified_ns: i128,
    changed_ns: i128,
}

impl Stamp {
    pub(crate) fn of(meta: &fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt;
        let ns = |secs: i64, nanos: i64| i128::from(secs) * 1_000_000_000 + i128::from(nanos);
        Stamp {
            device: meta.dev(),
            inode: meta.ino(),
            len: meta.len(),
            modified_ns: ns(meta.mtime(), meta.mtime_nsec()),
            changed_ns: ns(meta.ctime(), meta.ctime_nsec()),
        }
    }
}

/// Copies `from` to `to` (replacing it, with `mode`) in the kernel, unread;
/// written under [`launch::writing`], as the copy may be executed.
pub(crate) fn copy_unread(from: &Path, to: &Path, mode: u32) -> io::Result<()> {
    launch::writing(|| {
        let _ = fs::remove_file(to);
        fs::copy(from, to)?;
        fs::set_permissions(to, fs::Permissions::from_mode(mode))
    })
}

/// Copies `from` to `to` (replacing it, with `mode`), returning the content
/// hash of the bytes copied; written under [`launch::writing`], as the copy
/// may be executed.
pub(crate) fn copy_hashed(from: &Path, to: &Path, mode: u32) -> io::Result<ContentHash> {
    let mut source = fs::File::open(from)?;
    let mut hasher = blake3::Hasher::new();
    launch::writing(|| {
        let _ = fs::remove_file(to);
        let mut dest = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(to)?;
        let mut buffer = vec![0u8; 256 << 10];
        loop {
            let n = source.read(&mut buffer)?;
            if n == 0 {
                break;
            }
            hasher.update(&buffer[..n]);
            dest.write_all(&buffer[..n])?;
        }
        // The mode asked for, whatever the umask took away.
        dest.set_permissions(fs::Permissions::from_mode(mode))
    })?;
    Ok(ContentHash(*hasher.finalize().as_bytes()))
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
            // The copy keeps the file's time: make compares them (a package's
            // shipped generated files must stay newer than their sources).
            launch::writing(|| {
                fs::copy(&from, &to)?;
                fs::set_permissions(&to, fs::Permissions::from_mode(meta.permissions().mode()))?;
                fs::File::options()
                    .write(true)
                    .open(&to)?
                    .set_modified(meta.modified()?)
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

/// Gives the time `now` to every file under `dir` that `file` takes,
/// entering only the folders `enter` takes (the build's warm starts make
/// make and cargo see those files as changed).
pub(crate) fn set_times(
    dir: &Path,
    now: std::time::SystemTime,
    enter: &dyn Fn(&Path) -> bool,
    file: &dyn Fn(&Path) -> bool,
) -> Result<(), String> {
    let entries = fs::read_dir(dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
    for entry in entries {
        let entry = entry.map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
        let path = entry.path();
        let kind = entry
            .file_type()
            .map_err(|e| format!("cannot stat {}: {e}", path.display()))?;
        if kind.is_dir() && enter(&path) {
            set_times(&path, now, enter, file)?;
        } else if kind.is_file() && file(&path) {
            fs::File::open(&path)
                .and_then(|f| f.set_modified(now))
                .map_err(|e| format!("cannot set the time of {}: {e}", path.display()))?;
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

pub(crate) const TEMP_PREFIX: &str = ".tmp-";

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
pub(crate) fn temp_writer(name: &str) -> Option<u32> {
    let mut parts = name.strip_prefix(TEMP_PREFIX)?.rsplit('-');
    parts.next()?;
    parts.next()?.parse().ok()
}
