//! Opening a store: for writing (creating it, under sled's lock), for
//! reading (never creating one, a read-only store through a copy), or as a
//! copy beside a running controller; and why a store cannot be opened.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use super::*;

/// Why `dir` is no store, in the words every command uses.
fn not_a_store(dir: &Path) -> String {
    if dir.is_file() {
        format!("{} is a file, not a kiln store (a folder)", dir.display())
    } else {
        let db = layout::db_file(dir);
        format!(
            "{} is not a kiln store (no database {})",
            dir.display(),
            db.display()
        )
    }
}

/// How long a reader may hold a store's lock (to read the chains' states, a
/// step, or draw the report: seconds on a million steps) before a controller
/// that wants it calls the store taken.
const READER_HOLDS: Duration = Duration::from_secs(10);

/// Why a store cannot be opened. Every message names the store's folder.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// A reading command pointed at a folder that holds no store, or any command at a path
    /// that is no folder.
    #[error("{}", not_a_store(.0))]
    NotAStore(PathBuf),
    /// Another process holds the database.
    #[error("store {} is in use by another controller{holder} ({cause})", .dir.display())]
    InUse {
        /// The store.
        dir: PathBuf,
        /// `: pid N on HOST` where the holder said so.
        holder: String,
        /// sled's words.
        cause: String,
    },
    /// A newer kiln wrote it.
    #[error(
        "store {} has schema version {found}; this kiln reads versions up to \
         {SCHEMA_VERSION} (a newer kiln wrote it)",
        .dir.display()
    )]
    Newer {
        /// The store.
        dir: PathBuf,
        /// Its layout version.
        found: u32,
    },
}

impl Store {
    /// Opens the store in `dir`, creating it if there is none (commands that
    /// write steps), refusing clearly if another controller holds it.
    pub fn open(dir: &Path) -> Result<Store> {
        // A file where the store's folder would be is the user's to move: bad input.
        if fs::metadata(dir).is_ok_and(|m| !m.is_dir()) {
            return Err(OpenError::NotAStore(dir.to_path_buf()).into());
        }
        fs::create_dir_all(dir)
            .with_context(|| format!("cannot create store folder {}", dir.display()))?;
        migrate::finish_interrupted(dir)?;
        let mut store = Store::open_db(dir, true, false)?;
        unseal(dir)?;
        store.marks = Some(Mutex::new(marks::Marks::new(store.load_marks()?)));
        Ok(store)
    }

    /// Opens the store in `dir` to write, never creating one: `kiln store
    /// migrate`, which migrates it (see [`Store::migrated_from`]).
    pub fn open_to_migrate(dir: &Path) -> Result<Store> {
        is_a_store(dir)?;
        Store::open(dir)
    }

    /// The layout this process migrated the store from when it opened it, if it did.
    pub fn migrated_from(&self) -> Option<u32> {
        self.migrated_from
    }

    /// Opens the store in `dir` for a command that reads it: never creates
    /// one, and writes nothing into it. A read-only store (an archived
    /// campaign, a read-only mount) is read from a temporary copy of its
    /// database, as sled opens its files for writing.
    pub fn open_existing(dir: &Path) -> Result<Store> {
        is_a_store(dir)?;
        Store::open_db(dir, false, false)
    }

    /// As [`Store::open_existing`], for a view (`kiln export`, `show`,
    /// `report`): a store a running campaign holds is read from a copy of its
    /// database taken now, as the store would read after a crash at that
    /// moment, so a week-long run can be looked at while it runs.
    pub fn open_view(dir: &Path) -> Result<Store> {
        is_a_store(dir)?;
        Store::open_db(dir, false, true)
    }

    /// Opens the database; a reader falls back to a copy where the store may
    /// not be written, or, with `copy_if_held`, where a controller holds it.
    fn open_db(dir: &Path, writable: bool, copy_if_held: bool) -> Result<Store> {
        let asked = Instant::now();
        let mut opened = open_sled(&layout::db(dir));
        // A reader (`kiln serve`, `kiln status`) holds the lock for a moment: a
        // controller waits that long before it calls the store taken. A controller
        // that holds it (its holder file names a live process) is not waited for.
        while writable
            && asked.elapsed() < READER_HOLDS
            && matches!(&opened, Err(sled::Error::Io(e)) if is_held(e))
            && !held_by_a_controller(dir)
        {
            std::thread::sleep(Duration::from_millis(50));
            opened = open_sled(&layout::db(dir));
        }
        let (db, copy) = match opened {
            Ok(db) => (db, None),
            Err(sled::Error::Io(e))
                if !writable && (is_read_only(&e) || copy_if_held && is_held(&e)) =>
            {
                let copy = copy_db(dir)?;
                let db = open_sled(copy.path()).map_err(|e| open_error(dir, e))?;
                let why = match is_held(&e) {
                    true => "in use by a running controller".to_string(),
                    false => format!("read-only ({e})"),
                };
                tracing::info!(
                    "store {} is {why}: reading a copy of its database taken now, in {}",
                    dir.display(),
                    copy.path().display()
                );
                (db, Some(copy))
            }
            Err(e) => return Err(open_error(dir, e)),
        };
        let (db, migrated_from) = match writable {
            true => migrate::if_older(dir, db)?,
            false => (db, None),
        };
        let mut store = Store::from_db(db, copy, dir, writable)?;
        store.migrated_from = migrated_from;
        Ok(store)
    }

    fn from_db(
        db: sled::Db,
        copy: Option<tempfile::TempDir>,
        dir: &Path,
        writable: bool,
    ) -> Result<Store> {
        let store = Store {
            db,
            _copy: copy,
            dir: dir.to_path_buf(),
            marks: None,
            metrics: Default::default(),
            layout: Mutex::new(SCHEMA_VERSION),
            bases: compact::no_bases(),
            migrated_from: None,
            writing: Mutex::new(()),
            set_numbers: Default::default(),
        };
        match store.get::<u32>(layout::SCHEMA)? {
            None if writable => store.put(layout::SCHEMA, &SCHEMA_VERSION)?,
            None => {}
            Some(v @ 1..=SCHEMA_VERSION) => *store.layout() = v,
            Some(found) => {
                return Err(OpenError::Newer {
                    dir: dir.to_path_buf(),
                    found,
                }
                .into())
            }
        }
        Ok(store)
    }
}

/// Removes the report the last controller sealed: a writer holds the store now, and
/// whatever it writes would leave it behind.
fn unseal(dir: &Path) -> Result<()> {
    let sealed = layout::sealed_status(dir);
    match fs::remove_file(&sealed) {
        Ok(()) => sync_dir(dir),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e).with_context(|| format!("cannot remove {}", sealed.display())),
    }
}

/// Whether the holder file of the store in `dir` names a controller that still
/// runs: a live process on this host, or any on another (which cannot be checked).
fn held_by_a_controller(dir: &Path) -> bool {
    let Ok(holder) = fs::read_to_string(layout::holder(dir)) else {
        return false;
    };
    let Some((pid, host)) = holder
        .trim()
        .strip_prefix("pid ")
        .and_then(|rest| rest.split_once(" on "))
    else {
        return false;
    };
    host != this_host() || Path::new("/proc").join(pid).exists()
}

/// Opens the sled database in `path`, its pages compressed where sled
/// created it so (a new one: compressed). For tests and benchmarks that
/// write a store's keys as other layouts or damage did.
pub fn open_sled(path: &Path) -> sled::Result<sled::Db> {
    open_sled_as(path, pages_compressed(path))
}

/// Opens the sled database in `path`, created with compressed pages or not:
/// sled refuses to open a database otherwise than it was created.
pub(super) fn open_sled_as(path: &Path, compressed: bool) -> sled::Result<sled::Db> {
    sled::Config::new()
        .path(path)
        .cache_capacity(match compressed {
            true => COMPRESSED_CACHE_BYTES,
            false => CACHE_BYTES,
        })
        .use_compression(compressed)
        .compression_factor(COMPRESSION_LEVEL)
        .open()
}

/// Opens the database in `path` that this process has just closed: sled's
/// threads let go of its lock a moment after its last handle is dropped.
pub(super) fn open_sled_again(path: &Path, compressed: bool) -> sled::Result<sled::Db> {
    let asked = Instant::now();
    loop {
        match open_sled_as(path, compressed) {
            Err(sled::Error::Io(e)) if is_held(&e) && asked.elapsed() < READER_HOLDS => {
                std::thread::sleep(Duration::from_millis(20))
            }
            opened => return opened,
        }
    }
}

/// Whether sled keeps the database in `path` with compressed pages (layout 3
/// on), as its `conf` file says; a database not created yet will be.
pub fn pages_compressed(path: &Path) -> bool {
    // The file ends in a binary checksum: read as bytes.
    match fs::read(path.join("conf")) {
        Ok(conf) => !conf
            .split(|&b| b == b'\n')
            .any(|line| line == b"use_compression: false"),
        Err(_) => true,
    }
}

/// Makes the renames in `dir` durable.
pub(super) fn sync_dir(dir: &Path) -> Result<()> {
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("cannot sync {}", dir.display()))
}

/// Why the database of the store in `dir` did not open, in words that name it.
/// `Ok` where `dir` holds a store's database; [`OpenError::NotAStore`] where it holds none,
/// and the system's reason (a permission, say) where it cannot be looked at.
fn is_a_store(dir: &Path) -> Result<()> {
    let db = layout::db_file(dir);
    match fs::metadata(&db) {
        Ok(m) if m.is_file() => Ok(()),
        Ok(_) => Err(OpenError::NotAStore(dir.to_path_buf()).into()),
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory
            ) =>
        {
            Err(OpenError::NotAStore(dir.to_path_buf()).into())
        }
        Err(e) => {
            Err(e).with_context(|| format!("cannot read store {}: {}", dir.display(), db.display()))
        }
    }
}

fn open_error(dir: &Path, e: sled::Error) -> anyhow::Error {
    if e.to_string().contains("lock") || e.to_string().contains("WouldBlock") {
        let holder = fs::read_to_string(layout::holder(dir)).unwrap_or_default();
        OpenError::InUse {
            dir: dir.to_path_buf(),
            holder: match holder.trim() {
                "" => String::new(),
                h => format!(": {h}"),
            },
            cause: e.to_string(),
        }
        .into()
    } else {
        anyhow::anyhow!("cannot open store {}: {e}", dir.display())
    }
}

/// Whether opening failed on the lock a running controller holds (sled
/// says so in words, its kind `Other`).
fn is_held(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::WouldBlock || e.to_string().contains("could not acquire lock")
}

/// Whether opening a file for writing failed because it may not be written:
/// its permissions, an immutable file, a read-only file system.
fn is_read_only(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::PermissionDenied || e.raw_os_error() == Some(libc::EROFS)
}

/// A temporary copy of the database of the store in `dir`, its files
/// writable (sled opens them for writing).
fn copy_db(dir: &Path) -> Result<tempfile::TempDir> {
    fn copy(from: &Path, to: &Path) -> std::io::Result<()> {
        use std::os::unix::fs::PermissionsExt;
        for entry in fs::read_dir(from)? {
            let entry = entry?;
            let target = to.join(entry.file_name());
            if entry.file_type()?.is_dir() {
                fs::create_dir(&target)?;
                copy(&entry.path(), &target)?;
            } else {
                fs::copy(entry.path(), &target)?;
                fs::set_permissions(&target, fs::Permissions::from_mode(0o600))?;
            }
        }
        Ok(())
    }
    let from = layout::db(dir);
    // A controller may add or remove a file of the database while it is copied:
    // a failed copy is taken again.
    let mut tries = 0;
    loop {
        let copy_dir = tempfile::Builder::new()
            .prefix("kiln-store-")
            .tempdir()
            .context("cannot create a temporary folder for a copy of a store's database")?;
        match copy(&from, copy_dir.path()) {
            Ok(()) => return Ok(copy_dir),
            Err(_) if tries < 3 => tries += 1,
            Err(e) => {
                return Err(e).with_context(|| {
                    format!(
                        "the database of store {} cannot be copied to {}",
                        dir.display(),
                        copy_dir.path().display()
                    )
                })
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
