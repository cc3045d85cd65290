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
//! the workspace's crates run their front end once per source state: rustc
//! finds its queries (parsing, type and borrow checking, MIR) unchanged and
//! takes them from its cache. What LLVM made under the last build's
//! decisions (each codegen unit's object and bitcode) is removed before the
//! build, and rustc generates code for every codegen unit whose saved
//! output is gone, with this step's replay file, its remarks printed as in
//! a fresh build. The binary is a fresh build's byte for byte (a test
//! compares them).
//!
//! A benchmark whose `dependency-crates` take decisions keeps no target
//! (cargo would take those crates for unchanged), nor does a worker with
//! `KILN_KEEP_CARGO_TARGET=off` in its environment (for comparisons).

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

/// The files of a session in rustc's incremental folder that hold what its
/// front end did, which no decision changes; the others (objects, bitcode,
/// metadata) are outputs of the session's code generation.
const FRONT_END_FILES: &[&str] = &["dep-graph.bin", "query-cache.bin", "work-products.bin"];

/// Whether `spec`'s steps keep cargo's target folder between them.
pub(crate) fn applies(spec: &BenchmarkSpec) -> bool {
    let rustc = matches!(
        spec.kind,
        BenchmarkKind::LlvmInline {
            compiler: Compiler::Rustc,
            ..
        }
    );
    rustc && built_by_cargo(spec) && spec.dependency_crates.is_empty() && switched_on(KEEP_ENV)
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
/// copy of its sources) and gives the workspace members' files a new time;
/// whether it did. An error leaves `work` without a target.
pub(crate) fn take(
    slot_dir: &Path,
    work: &Path,
    bundle: &ContentHash,
    cargo: &str,
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
    let touched = members(work, cargo).and_then(|roots| {
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

/// Makes `dir` a build's incremental folder: where the slot's last build
/// left one ([`take`]), it is kept without that build's code generation
/// (see the module's comment), else it is made empty. Whether one was kept.
pub(crate) fn incremental_folder(dir: &Path) -> Result<bool, String> {
    if !dir.is_dir() {
        fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        return Ok(false);
    }
    // DIR/CRATE-HASH/s-SESSION/FILE; the crates' lock files stay.
    let entries = |d: &Path| {
        fs::read_dir(d)
            .map_err(|e| format!("cannot read {}: {e}", d.display()))
            .map(|r| {
                r.filter_map(Result::ok)
                    .map(|e| e.path())
                    .collect::<Vec<_>>()
            })
    };
    for krate in entries(dir)?.into_iter().filter(|p| p.is_dir()) {
        for session in entries(&krate)?.into_iter().filter(|p| p.is_dir()) {
            for file in entries(&session)? {
                let front_end = file
                    .file_name()
                    .is_some_and(|n| FRONT_END_FILES.iter().any(|f| n == *f));
                if !front_end {
                    fs::remove_file(&file)
                        .map_err(|e| format!("cannot remove {}: {e}", file.display()))?;
                }
            }
        }
    }
    Ok(true)
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
    fn a_kept_incremental_folder_loses_its_code_generation_and_keeps_its_front_end() {
        let dir = tempfile::tempdir().unwrap();
        let incremental = dir.path().join("inc");
        assert!(!incremental_folder(&incremental).unwrap(), "none to keep");
        assert!(incremental.is_dir());
        let session = incremental.join("app-0abc/s-hojs4qrl1l-0qr514s-xyz");
        fs::create_dir_all(&session).unwrap();
        let lock = incremental.join("app-0abc/s-hojs4qrl1l-0qr514s.lock");
        let made = ["a1ya2uvink.o", "do5d79ku8b.pre-lto.bc", "metadata.rmeta"];
        for file in FRONT_END_FILES.iter().chain(&made) {
            fs::write(session.join(file), "x").unwrap();
        }
        fs::write(&lock, "").unwrap();
        assert!(incremental_folder(&incremental).unwrap(), "kept");
        for file in FRONT_END_FILES {
            assert!(session.join(file).is_file(), "{file} was removed");
        }
        for file in made {
            assert!(!session.join(file).exists(), "{file} was kept");
        }
        assert!(lock.is_file());
    }
}
