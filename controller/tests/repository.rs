//! Conventions of the repository's layout: results/ holds results only; the scripts that made
//! them live under scripts/ (issue: the GPU checks' scripts had been kept in results/gpu/scripts).

use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

use crate::common::repo;

/// Why FILE (under results/) is a script rather than a result, if it is one: a shell or Python
/// file, an executable, a file that starts with `#!`, or a campaign config (a `.sexp` whose
/// first form is `(campaign`; a decision file such as a campaign's `best.sexp` is a result).
fn script_reason(file: &Path) -> Option<&'static str> {
    let name = file.file_name()?.to_string_lossy().into_owned();
    if [".sh", ".bash", ".py"]
        .iter()
        .any(|ext| name.ends_with(ext))
    {
        return Some("a shell or Python file");
    }
    let meta = std::fs::metadata(file).ok()?;
    if meta.permissions().mode() & 0o111 != 0 {
        return Some("executable");
    }
    let head: Vec<u8> = std::fs::read(file).ok()?.into_iter().take(4096).collect();
    if head.starts_with(b"#!") {
        return Some("starts with #!");
    }
    if name.ends_with(".sexp") {
        // The first form, past comments and blank lines.
        let text = String::from_utf8_lossy(&head);
        let first = text
            .lines()
            .map(str::trim)
            .find(|l| !l.is_empty() && !l.starts_with(';'));
        if first.is_some_and(|l| l.starts_with("(campaign")) {
            return Some("a campaign config");
        }
    }
    None
}

/// A kiln store (a campaign's database and what it keeps beside it, built binaries included) is a
/// result as a whole: not looked into.
fn is_store(dir: &Path) -> bool {
    dir.join("db").is_dir() && dir.join("kiln.log").is_file()
}

/// Every file under DIR, stores left out.
fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        let kind = std::fs::symlink_metadata(&path).unwrap().file_type();
        if kind.is_dir() {
            if !is_store(&path) {
                files_under(&path, out);
            }
        } else if kind.is_file() {
            out.push(path);
        }
    }
}

#[test]
fn no_script_under_results() {
    let root = repo();
    let mut files = Vec::new();
    files_under(&root.join("results"), &mut files);
    assert!(
        files.iter().any(|f| f.ends_with("results/gpu/README.md")),
        "the walk found no results/gpu/README.md: {} files",
        files.len()
    );
    let scripts: Vec<String> = files
        .iter()
        .filter_map(|f| {
            let why = script_reason(f)?;
            Some(format!(
                "{} ({why})",
                f.strip_prefix(&root).unwrap().display()
            ))
        })
        .collect();
    assert!(
        scripts.is_empty(),
        "results/ holds results only; move these under scripts/ (and what the scripts read, \
         such as a device check's configs, beside them):\n  {}",
        scripts.join("\n  ")
    );
}

#[test]
fn what_counts_as_a_script_under_results() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str, mode: u32| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path
    };
    let cases = [
        (write("check.sh", "echo hi\n", 0o644), true),
        (write("energy.py", "print(1)\n", 0o644), true),
        (write("run", "#!/bin/sh\necho hi\n", 0o644), true),
        (write("bench", "\x7fELF", 0o755), true),
        (
            write("gemm.sexp", ";; a config\n(campaign\n  (name g))\n", 0o644),
            true,
        ),
        (
            write(
                "best.sexp",
                ";; kiln decision file\n(decisions\n  (benchmark g))\n",
                0o644,
            ),
            false,
        ),
        (write("run1.log", "=== setup\n", 0o644), false),
        (write("steps.csv", "experiment,chain\n", 0o644), false),
    ];
    for (path, script) in cases {
        assert_eq!(
            script_reason(&path).is_some(),
            script,
            "{}: {:?}",
            path.display(),
            script_reason(&path)
        );
    }
}

/// README.md stays readable in a terminal and a diff: no line over 200 characters (long
/// explanations go to docs/, as docs/commands.md holds each command in full).
#[test]
fn no_readme_line_is_longer_than_200_characters() {
    let path = repo().join("README.md");
    let readme =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        readme.starts_with("# kiln"),
        "{} is not kiln's README",
        path.display()
    );
    let long: Vec<String> = readme
        .lines()
        .enumerate()
        .map(|(i, line)| (i + 1, line.chars().count()))
        .filter(|&(_, chars)| chars > 200)
        .map(|(n, chars)| format!("line {n}: {chars} characters"))
        .collect();
    assert!(
        long.is_empty(),
        "README.md has lines over 200 characters; shorten them and move the details to docs/:\n  {}",
        long.join("\n  ")
    );
}
