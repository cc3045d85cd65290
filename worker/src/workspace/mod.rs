//! The worker's folders under its rundir: the bundle cache (`bundles/`), the
//! build cache (`builds/`, see [`crate::build::cache`]), the object cache
//! (`objects/`), the slots (`slots/<slot>/`: a step's work folder `work/`,
//! the runs' `HOME`, its callgrind profile and GPU traces, and `.lock`, see
//! [`slot_lock`]) and discoveries' scratch folders (`discover/<id>/`).
//! Every path taken from a request is confined. It may import [`crate::build`]
//! (whose cache it opens), [`crate::files`] and the launcher.

pub(crate) mod bundles;
pub(crate) mod slot_lock;

use std::path::{Path, PathBuf};

use crate::build::cache::BuildCache;
pub(crate) use bundles::BundleCache;

/// Where a worker keeps its files: the rundir, its bundle cache and its
/// build cache.
#[derive(Debug)]
pub struct Workspace {
    /// The rundir.
    pub rundir: PathBuf,
    /// The bundle cache inside it.
    pub cache: BundleCache,
    /// Successful builds by what identifies them (see `build_key`).
    pub(crate) builds: BuildCache,
}

impl Workspace {
    /// Opens a rundir, creating it and its bundle cache.
    pub fn open(rundir: &Path) -> Result<Self, String> {
        std::fs::create_dir_all(rundir)
            .map_err(|e| format!("cannot create rundir {}: {e}", rundir.display()))?;
        let rundir = rundir
            .canonicalize()
            .map_err(|e| format!("cannot resolve rundir {}: {e}", rundir.display()))?;
        let cache = BundleCache::open(&rundir)?;
        let builds = BuildCache::open(&rundir)?;
        Ok(Workspace {
            rundir,
            cache,
            builds,
        })
    }

    pub(crate) fn slot_dir(&self, slot: u32) -> PathBuf {
        self.rundir.join("slots").join(slot.to_string())
    }
}

/// The identities (device and inode) of a worker's folders as a step starts: a folder removed
/// or replaced under the step (a cleaner, a reimage) shows as another identity, or none.
#[derive(Debug)]
pub(crate) struct FolderIds(Vec<(PathBuf, Option<(u64, u64)>)>);

impl FolderIds {
    pub(crate) fn of(folders: Vec<PathBuf>) -> Self {
        let ids = folders.into_iter().map(|folder| {
            let id = identity(&folder);
            (folder, id)
        });
        FolderIds(ids.collect())
    }

    /// The first folder that is no longer the one it was.
    pub(crate) fn changed(&self) -> Option<&Path> {
        (self.0.iter())
            .find(|(folder, id)| identity(folder) != *id)
            .map(|(folder, _)| folder.as_path())
    }
}

fn identity(folder: &Path) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(folder).ok().map(|m| (m.dev(), m.ino()))
}
