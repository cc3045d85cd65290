//! kiln-modcheck: fails when modules of a crate import each other, when a
//! function outside tests runs past its crate's limit (70 lines in kiln's stages,
//! `length::MAX_LINES` elsewhere), or when a file is out of place (a script under
//! results/, a heredoc in a shell script: [`layout`]).
//!
//! Usage: `kiln-modcheck [CRATE_SRC_DIR...]`. Without arguments it checks the
//! workspace's crates (found from `CARGO_MANIFEST_DIR`, else the current
//! folder) and its layout. Prints each cycle with the file and line of every
//! edge on it, each long function and each misplaced file with its file and
//! line, and exits 1; exits 0 with a one-line summary when there is none; 2 on
//! bad usage or an unreadable folder.

mod check;
mod layout;
mod length;
mod lex;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The crates checked when none are named, relative to the workspace root, each with the
/// most lines a function outside its tests may span: the stages of config → plan → dispatch →
/// measure → store → export keep to about a screen; the GPU library and the benchmarks to
/// [`length::MAX_LINES`].
const DEFAULT_DIRS: &[(&str, usize)] = &[
    ("protocol/src", STAGE_LINES),
    ("controller/src", STAGE_LINES),
    ("worker/src", STAGE_LINES),
    ("cupti/src", length::MAX_LINES),
    ("bench/src", length::MAX_LINES),
];

/// The most lines a function of kiln's stages may span.
const STAGE_LINES: usize = 70;

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
    let mut misplaced = 0;
    let dirs: Vec<(String, PathBuf, usize)> = if args.is_empty() {
        let root = workspace_root()?;
        misplaced = report_layout(&root)?;
        DEFAULT_DIRS
            .iter()
            .map(|(d, most)| (d.to_string(), root.join(d), *most))
            .collect()
    } else {
        args.into_iter()
            .map(|a| (a.clone(), a.into(), length::MAX_LINES))
            .collect()
    };

    let (mut modules, mut cycles, mut long) = (0, 0, 0);
    for (label, dir, most) in &dirs {
        let mut files = Vec::new();
        let rust = |p: &Path| p.extension().is_some_and(|e| e == "rs");
        read_tree(dir, dir, &rust, &mut files)
            .map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
        let report = check::check_crate(&files);
        modules += report.modules;
        cycles += report.cycles.len();
        for cycle in &report.cycles {
            println!("{label}: {cycle}");
        }
        long += report_long_functions(label, &files, *most);
    }
    let summary = format!(
        "modcheck: {} crates, {modules} modules, {cycles} import cycle(s), \
         {long} function(s) outside tests over their crate's limit, {misplaced} file(s) out of place",
        dirs.len(),
    );
    println!("{summary}");
    Ok(cycles == 0 && long == 0 && misplaced == 0)
}

/// Prints each breach of the repository's layout (see [`layout`]); returns how many.
fn report_layout(root: &Path) -> Result<usize, String> {
    let found =
        layout::problems(root).map_err(|e| format!("cannot read {}: {e}", root.display()))?;
    for problem in &found {
        println!("{problem}");
    }
    Ok(found.len())
}

/// Prints each function of `files` longer than `most` lines; returns how many.
fn report_long_functions(label: &str, files: &[(String, String)], most: usize) -> usize {
    let mut long = 0;
    for (path, source) in files {
        for f in length::functions(source) {
            if f.lines > most {
                println!(
                    "{label}/{path}:{}: fn {} is {} lines (at most {most})",
                    f.line, f.name, f.lines
                );
                long += 1;
            }
        }
    }
    long
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

/// Every file under `dir` that `keep` takes, as (path relative to `root` with `/`, text; a
/// file not UTF-8, an image say, read lossily).
fn read_tree(
    root: &Path,
    dir: &Path,
    keep: &dyn Fn(&Path) -> bool,
    out: &mut Vec<(String, String)>,
) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            read_tree(root, &path, keep, out)?;
        } else if keep(&path) {
            let rel = path.strip_prefix(root).unwrap_or(&path);
            let rel: Vec<_> = rel.iter().map(|c| c.to_string_lossy()).collect();
            let text = String::from_utf8_lossy(&std::fs::read(&path)?).into_owned();
            out.push((rel.join("/"), text));
        }
    }
    Ok(())
}
