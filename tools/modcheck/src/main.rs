//! kiln-modcheck: fails when modules of a crate import each other.
//!
//! Usage: `kiln-modcheck [CRATE_SRC_DIR...]`. Without arguments it checks the
//! workspace's crates (found from `CARGO_MANIFEST_DIR`, else the current
//! folder). Prints each cycle with the file and line of every edge on it and
//! exits 1; exits 0 with a one-line summary when there is none; 2 on bad usage
//! or an unreadable folder.

mod check;
mod lex;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The crates checked when none are named, relative to the workspace root.
const DEFAULT_DIRS: &[&str] = &[
    "protocol/src",
    "controller/src",
    "worker/src",
    "cupti/src",
    "bench/src",
];

fn main() -> ExitCode {
    match run(std::env::args().skip(1).collect()) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("modcheck: {e}");
            ExitCode::from(2)
        }
    }
}

/// Checks the crates; `Ok(false)` when a cycle was found.
fn run(args: Vec<String>) -> Result<bool, String> {
    if args.iter().any(|a| a.starts_with('-')) {
        return Err("usage: kiln-modcheck [CRATE_SRC_DIR...]".into());
    }
    let dirs: Vec<(String, PathBuf)> = if args.is_empty() {
        let root = workspace_root()?;
        DEFAULT_DIRS
            .iter()
            .map(|d| (d.to_string(), root.join(d)))
            .collect()
    } else {
        args.into_iter().map(|a| (a.clone(), a.into())).collect()
    };

    let (mut modules, mut cycles) = (0, 0);
    for (label, dir) in &dirs {
        let mut files = Vec::new();
        read_tree(dir, dir, &mut files)
            .map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
        let report = check::check_crate(&files);
        modules += report.modules;
        cycles += report.cycles.len();
        for cycle in &report.cycles {
            println!("{label}: {cycle}");
        }
    }
    if cycles > 0 {
        println!(
            "modcheck: {} crates, {modules} modules, {cycles} import cycle(s)",
            dirs.len()
        );
        return Ok(false);
    }
    println!(
        "modcheck: {} crates, {modules} modules, no import cycles",
        dirs.len()
    );
    Ok(true)
}

/// The nearest folder at or above `CARGO_MANIFEST_DIR` (set by `cargo run`),
/// else the current folder, whose Cargo.toml has a `[workspace]` table.
fn workspace_root() -> Result<PathBuf, String> {
    let start = match std::env::var_os("CARGO_MANIFEST_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => std::env::current_dir().map_err(|e| format!("no current folder: {e}"))?,
    };
    start
        .ancestors()
        .find(|d| {
            std::fs::read_to_string(d.join("Cargo.toml"))
                .is_ok_and(|t| t.lines().any(|l| l.trim() == "[workspace]"))
        })
        .map(Path::to_path_buf)
        .ok_or_else(|| format!("no workspace Cargo.toml at or above {}", start.display()))
}

/// Every `.rs` file under `dir`, as (path relative to `root` with `/`, text).
fn read_tree(root: &Path, dir: &Path, out: &mut Vec<(String, String)>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            read_tree(root, &path, out)?;
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path.strip_prefix(root).unwrap_or(&path);
            let rel: Vec<_> = rel.iter().map(|c| c.to_string_lossy()).collect();
            out.push((rel.join("/"), std::fs::read_to_string(&path)?));
        }
    }
    Ok(())
}
