//! The files kiln writes for a person (exports, reports, decision files,
//! `kiln sites -o`), written whole or not at all: each goes into a
//! temporary file in its target's folder, synced, and is renamed over the
//! target only once the command has written everything. A command that
//! fails leaves an existing file as it was, and a reader never sees a part.

use std::fs::{File, OpenOptions, Permissions};
use std::io::{BufWriter, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use tempfile::NamedTempFile;

/// A file being written; [`commit`](Staged::commit) puts it in place, dropping it
/// leaves the target as it was.
pub struct Staged {
    target: PathBuf,
    into: Writing,
}

enum Writing {
    /// The temporary file beside the target, and the target's permissions, if it exists.
    Temporary(BufWriter<NamedTempFile>, Option<Permissions>),
    /// A target that is no regular file (`/dev/null`, a named pipe) is written
    /// as it is: it cannot be replaced, and must not be.
    Direct(BufWriter<File>),
}

impl Staged {
    /// Starts writing `target`. The temporary file is hidden and ends like
    /// the target, so that a library which picks a format by extension picks it right.
    pub fn create(target: &Path) -> Result<Staged> {
        let cannot = || format!("cannot write {}", target.display());
        let existing = match std::fs::metadata(target) {
            Ok(meta) => Some(meta),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(e).with_context(cannot),
        };
        if let Some(meta) = existing.as_ref().filter(|m| !m.is_file()) {
            if meta.is_dir() {
                anyhow::bail!("cannot write {}: it is a folder", target.display());
            }
            let file = OpenOptions::new()
                .write(true)
                .open(target)
                .with_context(cannot)?;
            return Ok(Staged {
                target: target.to_path_buf(),
                into: Writing::Direct(BufWriter::new(file)),
            });
        }
        // A link to a file is replaced by way of the file it names, not broken.
        let target = match existing {
            Some(_) => std::fs::canonicalize(target).with_context(cannot)?,
            None => target.to_path_buf(),
        };
        let dir = match target.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        let name = target.file_name().with_context(cannot)?.to_string_lossy();
        let suffix = target
            .extension()
            .map_or(String::new(), |e| format!(".{}", e.to_string_lossy()));
        let temp = tempfile::Builder::new()
            .prefix(&format!(".{name}."))
            .suffix(&suffix)
            // As `File::create` makes a file: readable by others unless the umask says otherwise.
            .permissions(Permissions::from_mode(0o666))
            .tempfile_in(dir)
            .with_context(cannot)?;
        Ok(Staged {
            into: Writing::Temporary(BufWriter::new(temp), existing.map(|m| m.permissions())),
            target,
        })
    }

    /// Where to write by path, for a library that opens the file itself: the
    /// temporary file (or the target itself when that is no regular file).
    pub fn path(&self) -> &Path {
        match &self.into {
            Writing::Temporary(temp, _) => temp.get_ref().path(),
            Writing::Direct(_) => &self.target,
        }
    }

    /// Puts the file in place of its target: flushed, synced, renamed.
    pub fn commit(self) -> Result<()> {
        let cannot = || format!("cannot write {}", self.target.display());
        match self.into {
            Writing::Temporary(temp, permissions) => {
                let temp = temp
                    .into_inner()
                    .map_err(|e| e.into_error())
                    .with_context(cannot)?;
                if let Some(permissions) = permissions {
                    temp.as_file()
                        .set_permissions(permissions)
                        .with_context(cannot)?;
                }
                temp.as_file().sync_all().with_context(cannot)?;
                temp.persist(&self.target).with_context(cannot)?;
            }
            Writing::Direct(mut file) => file.flush().with_context(cannot)?,
        }
        Ok(())
    }
}

impl Write for Staged {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match &mut self.into {
            Writing::Temporary(temp, _) => temp.write(buf),
            Writing::Direct(file) => file.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match &mut self.into {
            Writing::Temporary(temp, _) => temp.flush(),
            Writing::Direct(file) => file.flush(),
        }
    }
}

/// Files that make one output (an export's tables, a report): each written
/// into its temporary file, and all put in place once every one is whole.
#[derive(Default)]
pub struct Staging {
    files: Vec<Staged>,
}

impl Staging {
    /// Starts writing `target`; the file is put in place by [`commit`](Staging::commit).
    pub fn create(&mut self, target: &Path) -> Result<&mut Staged> {
        self.files.push(Staged::create(target)?);
        Ok(self.files.last_mut().expect("just pushed"))
    }

    /// Writes `target` whole.
    pub fn write(&mut self, target: &Path, bytes: impl AsRef<[u8]>) -> Result<()> {
        let file = self.create(target)?;
        let written = file.write_all(bytes.as_ref());
        written.with_context(|| format!("cannot write {}", target.display()))
    }

    /// Puts every file in place, in the order they were started.
    pub fn commit(self) -> Result<()> {
        self.files.into_iter().try_for_each(Staged::commit)
    }
}

/// Writes `target` whole: its old contents stay if anything fails.
pub fn write(target: &Path, bytes: impl AsRef<[u8]>) -> Result<()> {
    let mut staging = Staging::default();
    staging.write(target, bytes)?;
    staging.commit()
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::FileTypeExt;

    use super::*;

    #[test]
    fn a_file_is_replaced_only_when_committed() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("keep.csv");
        std::fs::write(&target, "old\n").unwrap();
        std::fs::set_permissions(&target, Permissions::from_mode(0o640)).unwrap();
        {
            let mut file = Staged::create(&target).unwrap();
            file.write_all(b"half").unwrap();
            assert!(file.path().starts_with(dir.path()));
            assert_eq!(file.path().extension().unwrap(), "csv");
            // Dropped: a failed command.
        }
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "old\n");
        let mut file = Staged::create(&target).unwrap();
        file.write_all(b"new\n").unwrap();
        file.commit().unwrap();
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "new\n");
        let mode = std::fs::metadata(&target).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o640, "the old file's permissions are kept");
        let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(left.len(), 1, "no temporary file is left: {left:?}");
        // What is no regular file is written as it is.
        write(Path::new("/dev/null"), "nothing").unwrap();
        assert!(std::fs::metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device());
    }
}
