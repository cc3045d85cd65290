//! A cargo benchmark's `target` folder kept between a slot's steps, so that
//! the crates cargo builds without kiln's flags (the registry's, and path
//! crates outside the workspace) are built once per slot and sources, not
//! again every step (two thirds of a step's build on the corpus's toml).
//!
//! After a successful build the slot remembers its sources' bundle; before
//! the next fresh copy of the work folder its `target` is put aside in the
//! slot's folder (`cargo-target/`, named by the bundle's hash), and the next
//! build of the same bundle in that slot takes it back. The workspace's own
//! crates must still be built every step: their decisions are the replay
//! file's lines, which cargo does not track. So each file of the
//! workspace's members is given a new time first, and cargo rebuilds a path
//! package whose files are newer than its last build (and every crate that
//! depends on it); everything else it checks by its own fingerprints.
//!
//! rustc's incremental folder (kiln builds with `-C incremental`, which also
//! keeps the MIR inliner from hiding sites) is kept beside the target, so
//! the workspace's crates run their front end once per source state, and a
//! crate whose decisions did not change keeps its code ([`super::crates`]).
//!
//! A benchmark whose `dependency-crates` take decisions keeps its target
//! too, but cargo would take those crates for unchanged whatever their
//! replay lines: their fingerprints are removed when the target is taken
//! back, so cargo compiles them again (through the wrapper, which keeps a
//! crate's code where its decisions did not change, as for the workspace's
//! crates) and, their outputs being newer, the crates that depend on them;
//! every other dependency stays built. A worker with
//! `KILN_KEEP_CARGO_TARGET=off` in its environment keeps no target (for
//! comparisons).

use std::fs;
use std::path::{Path, PathBuf};

use kiln_protocol::config::benchmark::{BenchmarkKind, BenchmarkSpec, Compiler};
use kiln_protocol::decision::ContentHash;

use super::env::switched_on;
use super::{built_by_cargo, INCREMENTAL_DIR};
use crate::files::set_times;

/// The worker's variable that, set to `off`, keeps no target folder.
pub const KEEP_ENV: &str = "KILN_KEEP_CARGO_TARGET";

/// The slot's folder where a target is kept between steps.
const KEPT_DIR: &str = "cargo-target";
/// The file there naming the bundle whose build made it.
const BUNDLE_FILE: &str = "bundle";
/// rustc's incremental folder there.
const KEPT_INCREMENTAL: &str = "incremental";

/// Whether `spec`'s steps keep cargo's target folder between them.
pub(crate) fn applies(spec: &BenchmarkSpec) -> bool {
    let rustc = matches!(
        spec.kind,
        BenchmarkKind::LlvmInline {
            compiler: Compiler::Rustc,
            ..
        }
    );
    rustc && built_by_cargo(spec) && switched_on(KEEP_ENV)
}

/// Puts `work/target`, made by a successful build of `bundle`'s sources,
/// aside in `slot_dir` (in place of any kept before).
pub(crate) fn put_aside(slot_dir: &Path, work: &Path, bundle: &ContentHash) {
    let target = work.join("target");
    if !target.is_dir() {
        return;
    }
    let kept = slot_dir.join(KEPT_DIR);
    let _ = fs::remove_dir_all(&kept);
    let put = fs::create_dir_all(&kept).and_then(|()| fs::rename(&target, kept.join("target")));
    if put.is_ok() {
        let _ = fs::rename(work.join(INCREMENTAL_DIR), kept.join(KEPT_INCREMENTAL));
        let _ = fs::write(kept.join(BUNDLE_FILE), bundle.to_string());
    }
}

/// Moves the target kept in `slot_dir` for `bundle` into `work` (a fresh
/// copy of its sources), gives the workspace members' files a new time and
/// removes the fingerprints of the `dependency_crates` that take decisions;
/// whether it did. An error leaves `work` without a target.
pub(crate) fn take(
    slot_dir: &Path,
    work: &Path,
    bundle: &ContentHash,
    cargo: &str,
    dependency_crates: &[String],
) -> Result<bool, String> {
    let kept = slot_dir.join(KEPT_DIR);
    let target = work.join("target");
    let ours = fs::read_to_string(kept.join(BUNDLE_FILE)).is_ok_and(|h| h == bundle.to_string());
    if !ours || target.exists() {
        return Ok(false);
    }
    fs::rename(kept.join("target"), &target)
        .map_err(|e| format!("cannot take the kept {}: {e}", kept.display()))?;
    // Without it, rustc runs its front end again: slower, not different.
    let _ = fs::rename(kept.join(KEPT_INCREMENTAL), work.join(INCREMENTAL_DIR));
    let _ = fs::remove_dir_all(&kept);
    let touched = forget(&target, dependency_crates)
        .and_then(|()| members(work, cargo))
        .and_then(|roots| {
            let now = std::time::SystemTime::now();
            // A package nested in a member is a member touched as a root of
            // its own, or not the workspace's.
            let enter = |dir: &Path| !(dir.ends_with("target") || dir.join("Cargo.toml").is_file());
            roots
                .iter()
                .try_for_each(|root| set_times(root, now, &enter, &|_| true))
        });
    touched.map(|()| true).map_err(|why| {
        let _ = fs::remove_dir_all(&target);
        format!("cargo's kept target folder not used: {why}")
    })
}

/// Removes cargo's fingerprints of the `crates`' libraries (by crate name:
/// `-` and `_` alike) from every profile's `.fingerprint` folder under
/// `target` (and under a target triple's folder).
fn forget(target: &Path, crates: &[String]) -> Result<(), String> {
    if crates.is_empty() {
        return Ok(());
    }
    let name = |s: &str| s.replace('-', "_");
    let wanted: Vec<String> = crates.iter().map(|c| name(c)).collect();
    let listed = |dir: &Path| -> Vec<PathBuf> {
        fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.is_dir())
            .collect()
    };
    let profiles = listed(target)
        .into_iter()
        .flat_map(|dir| std::iter::once(dir.clone()).chain(listed(&dir)));
    for fingerprints in profiles
        .map(|p| p.join(".fingerprint"))
        .filter(|d| d.is_dir())
    {
        for entry in listed(&fingerprints) {
            // `PACKAGE-HASH`, one for the library (holding `lib-CRATE`) and
            // one for each of a build script's compile and run, which stay:
            // what a -sys crate's script builds takes no rustc decisions.
            let package = entry
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.rsplit_once('-'))
                .map(|(package, _)| name(package));
            let library = || {
                fs::read_dir(&entry)
                    .into_iter()
                    .flatten()
                    .flatten()
                    .any(|f| {
                        f.file_name()
                            .to_str()
                            .is_some_and(|n| n.starts_with("lib-"))
                    })
            };
            if package.is_some_and(|p| wanted.contains(&p)) && library() {
                fs::remove_dir_all(&entry)
                    .map_err(|e| format!("cannot remove {}: {e}", entry.display()))?;
            }
        }
    }
    Ok(())
}

/// Makes `dir` a build's incremental folder: the one the slot's last build
/// left ([`take`]) where there is one, else a new one. Whether one was kept.
pub(crate) fn incremental_folder(dir: &Path) -> Result<bool, String> {
    if dir.is_dir() {
        return Ok(true);
    }
    fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    Ok(false)
}

/// The folders of the workspace's member packages in `work`, from `cargo
/// metadata` (`cargo` is the benchmark's own).
fn members(work: &Path, cargo: &str) -> Result<Vec<PathBuf>, String> {
    let out = std::process::Command::new(cargo)
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--offline",
        ])
        .current_dir(work)
        .output()
        .map_err(|e| format!("cannot run {cargo} metadata: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{cargo} metadata failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("{cargo} metadata wrote no JSON: {e}"))?;
    let members = meta["workspace_members"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let roots: Vec<PathBuf> = meta["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|p| members.contains(&p["id"]))
        .filter_map(|p| {
            Some(
                Path::new(p["manifest_path"].as_str()?)
                    .parent()?
                    .to_path_buf(),
            )
        })
        .collect();
    match roots.is_empty() {
        true => Err(format!("{cargo} metadata names no workspace member")),
        false => Ok(roots),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_opted_in_crates_library_fingerprints_go_in_every_profile() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path();
        let fingerprint = |profile: &str, entry: &str, file: &str| {
            let path = target.join(profile).join(".fingerprint").join(entry);
            fs::create_dir_all(&path).unwrap();
            fs::write(path.join(file), "").unwrap();
            path
        };
        let gone = [
            fingerprint("release", "zstd-sys-aaa", "lib-zstd_sys"),
            fingerprint(
                "x86_64-unknown-linux-gnu/release",
                "zstd-sys-ddd",
                "lib-zstd_sys",
            ),
        ];
        let kept = [
            fingerprint("release", "zstd-sys-bbb", "build-script-build-script-build"),
            fingerprint(
                "release",
                "zstd-sys-eee",
                "run-build-script-build-script-build",
            ),
            fingerprint("release", "zstd-fff", "lib-zstd"),
        ];
        forget(target, &["zstd_sys".to_string()]).unwrap();
        for path in gone {
            assert!(!path.exists(), "{}", path.display());
        }
        for path in kept {
            assert!(path.exists(), "{}", path.display());
        }
    }
}
