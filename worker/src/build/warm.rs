//! A slot's next build of the same sources under the clang wrapper (make,
//! CMake) starts from its last build's tree, not from the bare sources:
//! the build system's own work (CMake's configure and compiler checks, a
//! library's archive steps) is not redone from nothing every step.
//!
//! The tree is the last build's outputs as the build cache kept them
//! before any run wrote into the folder ([`super::cache`]), laid over the
//! fresh copy of the sources, and only where that build was made in this
//! same folder (a build system's files name it). Then every source file
//! in the folder (by its extension: a unit the wrapper compiles) gets one
//! and the same new time: make compiles each unit again through the
//! wrapper, which reuses the object of each unit whose decisions did not
//! change, and no generated file looks older than a source it was made
//! from. A unit make would not compile again anyway shows: its decisions
//! would have no remarks, the build fails verification, and the step
//! builds again from a fresh copy (`step`).
//!
//! `KILN_WARM_TREE=off` in the worker's environment starts every build
//! from the bare sources (for comparisons).

use std::path::Path;
use std::time::SystemTime;

use super::env::switched_on;
use super::objects::is_source;
use crate::files::set_times;

/// The worker's variable that, set to `off`, starts no build from the last one's tree.
pub const WARM_ENV: &str = "KILN_WARM_TREE";

/// Whether builds start from the last build's tree.
pub(crate) fn enabled() -> bool {
    switched_on(WARM_ENV)
}

/// Gives every source file under `work` (not in its folders named `skip`)
/// the time `now`.
pub(crate) fn touch_sources(work: &Path, skip: &[&str], now: SystemTime) -> Result<(), String> {
    let enter = |dir: &Path| !(dir.parent() == Some(work) && skip.iter().any(|s| dir.ends_with(s)));
    let source = |file: &Path| file.file_name().is_some_and(|n| is_source(&n.into()));
    set_times(work, now, &enter, &source)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn only_source_files_outside_the_skipped_folders_get_the_time() {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path();
        for file in [
            "a.c",
            "sub/b.cpp",
            "sub/b.h",
            "Makefile",
            "kiln/c.c",
            "gen/parse.c",
        ] {
            let path = work.join(file);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(&path, "").unwrap();
        }
        let then = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000_000);
        touch_sources(work, &["kiln"], then).unwrap();
        let time = |f: &str| fs::metadata(work.join(f)).unwrap().modified().unwrap();
        for touched in ["a.c", "sub/b.cpp", "gen/parse.c"] {
            assert_eq!(time(touched), then, "{touched}");
        }
        for kept in ["sub/b.h", "Makefile", "kiln/c.c"] {
            assert_ne!(time(kept), then, "{kept}");
        }
    }
}
