//! A slot's next build of the same sources under the clang wrapper (make,
//! CMake) starts from its last build's tree, not from the bare sources:
//! the build system's own work (CMake's configure and compiler checks, a
//! library's archive steps) is not redone from nothing every step.
//!
//! The tree is the last build's outputs as the build cache kept them
//! before any run wrote into the folder ([`super::cache`]), laid over the
//! fresh copy of the sources, and only where that build was made in this
//! same folder (a build system's files name it). Then every source file in
//! the folder (by its extension) gets one and the same new time, but those
//! whose every unit keeps its decisions: make compiles each other unit
//! again through the wrapper, and no generated file looks older than a
//! source it was made from.
//!
//! The wrapper writes a line for each unit it compiles or reuses in a step
//! ([`UNITS_FILE`]: its inputs, its key under that step's decisions, its
//! source and object). A source is left alone when each of its units has
//! the same key under the next step's decisions, its object is in the tree
//! and the object cache still holds its output (the remarks that prove its
//! decisions, which the build's log gets instead of a compile). make then
//! does not run the compiler for it at all. A unit make would not compile
//! again that it should have shows: its decisions would have no remarks, or
//! the old ones, the build fails verification, and the step builds again
//! from a fresh copy (`step`).
//!
//! Where the run left the last build's tree as the build made it (every
//! entry's [`Stamp`] the same: [`TreeStamps`]), the next build starts in it
//! as it is: no fresh copy of the sources, no outputs laid over them (on a
//! C++ program of 6,635 sites those cost a step 0.1 s of its 1.3 s). A run
//! that wrote into its folder, or a build cache entry for the step's own
//! decisions, takes the way above.
//!
//! `KILN_WARM_TREE=off` in the worker's environment starts every build
//! from the bare sources (for comparisons).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use kiln_protocol::config::benchmark::{BenchmarkKind, BenchmarkSpec, Compiler};
use kiln_protocol::decision::{ContentHash, DecisionSet};

use super::env::{switched_on, write_decisions};
use super::objects::{is_source, kept_output, key_of, ReplayLines};
use super::runs_compiler_itself;
use crate::files::{set_times, Stamp};

/// The worker's variable that, set to `off`, starts no build from the last one's tree.
pub const WARM_ENV: &str = "KILN_WARM_TREE";

/// Whether `spec`'s builds start from the last build's tree: clang's
/// compiles under a build system (the wrapper's unit lines tell which to
/// leave alone), unless the worker's environment turns it off.
pub(crate) fn applies(spec: &BenchmarkSpec) -> bool {
    let clang = matches!(
        spec.kind,
        BenchmarkKind::LlvmInline {
            compiler: Compiler::Clang,
            ..
        }
    );
    let build_system = spec.build.first().is_some_and(|p| !runs_compiler_itself(p));
    clang && build_system && switched_on(WARM_ENV)
}

/// Every entry under a work folder (kiln's own folders left out) with its
/// stamp, in path order: the tree as a build left it, to tell whether the
/// runs since changed anything in it.
#[derive(Debug, PartialEq)]
pub(crate) struct TreeStamps(Vec<(PathBuf, Stamp)>);

impl TreeStamps {
    /// The stamps under `work`, but in its folders named `skip`.
    pub(crate) fn of(work: &Path, skip: &[&str]) -> Result<Self, String> {
        let mut stamps = Vec::new();
        let mut stack = vec![work.to_path_buf()];
        while let Some(dir) = stack.pop() {
            let entries =
                fs::read_dir(&dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
            for entry in entries {
                let path = entry
                    .map_err(|e| format!("cannot list {}: {e}", dir.display()))?
                    .path();
                if dir == work && skip.iter().any(|s| path.ends_with(s)) {
                    continue;
                }
                let meta = fs::symlink_metadata(&path)
                    .map_err(|e| format!("cannot stat {}: {e}", path.display()))?;
                if meta.is_dir() {
                    stack.push(path.clone());
                }
                stamps.push((path, Stamp::of(&meta)));
            }
        }
        stamps.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        Ok(TreeStamps(stamps))
    }

    /// Whether `work` still holds this tree, entry for entry.
    pub(crate) fn still_in(&self, work: &Path, skip: &[&str]) -> bool {
        TreeStamps::of(work, skip).is_ok_and(|now| now == *self)
    }

    /// The tree with `file` (written since) stamped again, the rest as they were: one file's
    /// stat where [`TreeStamps::of`] would take every file's.
    pub(crate) fn restamp(mut self, file: &Path) -> Result<Self, String> {
        let meta = fs::symlink_metadata(file)
            .map_err(|e| format!("cannot stat {}: {e}", file.display()))?;
        let stamp = Stamp::of(&meta);
        match self
            .0
            .binary_search_by(|(path, _)| path.as_path().cmp(file))
        {
            Ok(i) => self.0[i].1 = stamp,
            Err(i) => self.0.insert(i, (file.to_path_buf(), stamp)),
        }
        Ok(self)
    }
}

/// The variable naming the file where the wrapper writes its units' lines.
pub const UNITS_ENV: &str = "KILN_WRAP_UNITS";

/// That file, in the build's wrapper folder.
pub const UNITS_FILE: &str = "units";

/// A unit a step's build compiled or reused, as the wrapper wrote it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct UnitRecord {
    inputs: ContentHash,
    /// The unit's key under that step's decisions: its object cache entry.
    key: ContentHash,
    source: PathBuf,
    object: PathBuf,
}

/// The units the wrapper wrote to `file` (none if there is none); a line
/// that does not read is left out (its source is then compiled again).
pub(crate) fn read_units(file: &Path) -> Vec<UnitRecord> {
    let text = std::fs::read_to_string(file).unwrap_or_default();
    text.lines()
        .filter_map(|line| {
            let mut parts = line.split('\t');
            let mut hash = || ContentHash::try_from(parts.next()?.to_string()).ok();
            let (inputs, key) = (hash()?, hash()?);
            let source = PathBuf::from(parts.next()?);
            let object = PathBuf::from(parts.next()?);
            Some(UnitRecord {
                inputs,
                key,
                source,
                object,
            })
        })
        .collect()
}

/// What a warm start leaves as the last build made it.
#[derive(Default)]
pub(crate) struct Unchanged {
    /// The sources make need not compile again.
    pub sources: BTreeSet<PathBuf>,
    /// Their units, as the next build's own records.
    pub units: Vec<UnitRecord>,
    /// Their compiles' output (remarks) and a note for each, for the build's log.
    pub log: String,
}

/// Makes `work`, the last build's tree, ready for the next build under
/// `decisions`: kiln's own folders `skip` (the wrapper's unit lines, which
/// a build appends to) go, and the decision file is written.
pub(crate) fn reopen(
    work: &Path,
    skip: &[&str],
    spec: &BenchmarkSpec,
    decisions: &DecisionSet,
) -> Result<(), String> {
    for dir in skip.iter().map(|s| work.join(s)) {
        if dir.exists() {
            fs::remove_dir_all(&dir)
                .map_err(|e| format!("cannot remove {}: {e}", dir.display()))?;
        }
    }
    write_decisions(work, spec, decisions)
}

/// Of the last build's `units` in `work`, those whose every unit of the
/// same source keeps its key under `replay` (the next build's replay file's
/// text), has its object in the tree and its output in the object cache
/// `objects`.
pub(crate) fn unchanged(
    units: &[UnitRecord],
    work: &Path,
    objects: &Path,
    replay: &str,
) -> Unchanged {
    let mut by_source: BTreeMap<&Path, Vec<&UnitRecord>> = BTreeMap::new();
    for unit in units {
        by_source.entry(&unit.source).or_default().push(unit);
    }
    let replay = ReplayLines::new(replay);
    let mut out = Unchanged::default();
    'sources: for (source, units) in by_source {
        let mut log = String::new();
        for unit in &units {
            let same = key_of(objects, &unit.inputs, &replay) == Some(unit.key);
            let output = kept_output(objects, &unit.key).filter(|_| same && unit.object.is_file());
            let Some(output) = output else {
                continue 'sources;
            };
            log.push_str(&format!(
                "kiln: {}: {KEPT_IN_TREE}\n{}",
                source.strip_prefix(work).unwrap_or(source).display(),
                String::from_utf8_lossy(&output)
            ));
        }
        out.sources.insert(source.to_path_buf());
        out.units.extend(units.into_iter().cloned());
        out.log.push_str(&log);
    }
    out
}

/// What the build log says of a unit a warm start left alone.
pub const KEPT_IN_TREE: &str =
    "object reused from the last build's tree (its decisions did not change)";

/// Gives every source file under `work` (not in its folders named `skip`,
/// nor among `keep`) the time `now`.
pub(crate) fn touch_sources(
    work: &Path,
    skip: &[&str],
    keep: &BTreeSet<PathBuf>,
    now: SystemTime,
) -> Result<(), String> {
    let enter = |dir: &Path| !(dir.parent() == Some(work) && skip.iter().any(|s| dir.ends_with(s)));
    let source = |file: &Path| {
        file.file_name().is_some_and(|n| is_source(&n.into())) && !keep.contains(file)
    };
    set_times(work, now, &enter, &source)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn the_wrappers_unit_lines_read_back_and_a_bad_line_is_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join(UNITS_FILE);
        let (a, b) = (ContentHash::of(b"a"), ContentHash::of(b"b"));
        fs::write(
            &file,
            format!("{a}\t{b}\t/w/x.c\t/w/x.o\nnot a line\n{a}\t{b}\t/w/y.c\n"),
        )
        .unwrap();
        let units = read_units(&file);
        assert_eq!(
            units,
            [UnitRecord {
                inputs: a,
                key: b,
                source: "/w/x.c".into(),
                object: "/w/x.o".into(),
            }]
        );
        assert!(read_units(&dir.path().join("none")).is_empty());
    }

    #[test]
    fn a_tree_is_still_in_its_folder_until_an_entry_outside_kilns_folders_changes() {
        let dir = tempfile::tempdir().unwrap();
        let work = dir.path();
        fs::create_dir_all(work.join("src")).unwrap();
        fs::create_dir_all(work.join(".kiln-wrap")).unwrap();
        fs::write(work.join("src/a.o"), "object").unwrap();
        let skip = [".kiln-wrap"];
        let tree = TreeStamps::of(work, &skip).unwrap();
        fs::write(work.join(".kiln-wrap/units"), "appended").unwrap();
        let _ = fs::read(work.join("src/a.o")).unwrap();
        assert!(
            tree.still_in(work, &skip),
            "read, or written in kiln's folder"
        );
        let changes: [&dyn Fn(); 3] = [
            &|| fs::write(work.join("src/a.o"), "spoilt!").unwrap(),
            &|| fs::write(work.join("out.txt"), "").unwrap(),
            &|| fs::remove_file(work.join("src/a.o")).unwrap(),
        ];
        for change in changes {
            let tree = TreeStamps::of(work, &skip).unwrap();
            change();
            assert!(!tree.still_in(work, &skip));
        }
    }

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
        let keep = BTreeSet::from([work.join("sub/kept.c")]);
        fs::write(work.join("sub/kept.c"), "").unwrap();
        touch_sources(work, &["kiln"], &keep, then).unwrap();
        let time = |f: &str| fs::metadata(work.join(f)).unwrap().modified().unwrap();
        for touched in ["a.c", "sub/b.cpp", "gen/parse.c"] {
            assert_eq!(time(touched), then, "{touched}");
        }
        for kept in ["sub/b.h", "Makefile", "kiln/c.c", "sub/kept.c"] {
            assert_ne!(time(kept), then, "{kept}");
        }
    }
}
