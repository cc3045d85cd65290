//! Replays every kept fuzzing input through its target's body, on stable:
//! the corpora of `fuzz/corpus/TARGET` and the inputs of fixed findings in
//! `fuzz/regressions/TARGET` (see results/fuzzing.md).

use std::panic;
use std::path::{Path, PathBuf};

use kiln_fuzz_targets::TARGETS;

/// `fuzz/`, which holds this crate (`fuzz/targets`) beside the kept inputs.
fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn inputs(target: &str) -> Vec<PathBuf> {
    let fuzz = fuzz_dir();
    let mut files: Vec<PathBuf> = ["corpus", "regressions"]
        .iter()
        .filter_map(|kind| std::fs::read_dir(fuzz.join(kind).join(target)).ok())
        .flatten()
        .map(|entry| entry.expect("readable folder").path())
        .collect();
    files.sort();
    files
}

#[test]
fn every_kept_input_passes_its_target() {
    // The panics are collected and reported together, by file, below.
    panic::set_hook(Box::new(|_| {}));
    let mut failures = Vec::new();
    for (target, body) in TARGETS {
        let files = inputs(target);
        assert!(!files.is_empty(), "no corpus for target {target}");
        for file in files {
            let data = std::fs::read(&file).expect("readable input");
            if let Err(panic) = panic::catch_unwind(|| body(&data)) {
                let message = panic
                    .downcast_ref::<String>()
                    .map(String::as_str)
                    .or_else(|| panic.downcast_ref::<&str>().copied())
                    .unwrap_or("(no message)");
                let name = file.strip_prefix(fuzz_dir()).unwrap_or(&file);
                failures.push(format!("fuzz/{}: {message}", name.display()));
            }
        }
    }
    let _ = panic::take_hook();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
