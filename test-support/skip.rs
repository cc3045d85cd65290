//! Saying that a test is skipped, for the controller's and the worker's integration tests. Each
//! crate's `tests/common` includes this file (`#[path]`), so the crate named below is that crate.

use std::io::Write;

/// The file in which [`skip`] lists the skipped tests, a line each, `<crate>::<test>\t<reason>`
/// (scripts/test names them and counts them apart from the passed).
const SKIPPED_TESTS_ENV: &str = "KILN_SKIPPED_TESTS";

/// Says that the running test is skipped for `reason` (a tool or rig missing here), for the
/// test to return at once (`return skip(...)`): libtest has no skipped outcome and counts it as
/// passed, so this prints `SKIPPED <test>: <reason>` past libtest's capture, where every run
/// shows it, and adds the test to the file `$KILN_SKIPPED_TESTS` names.
pub fn skip(reason: impl std::fmt::Display) {
    let reason = reason.to_string().trim().replace(['\n', '\t'], " ");
    // libtest runs each test on a thread named after the test's path.
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("<unnamed test>");
    // Written whole, so that tests running beside it do not split the line.
    let line = format!("SKIPPED {test}: {reason}\n");
    let _ = std::io::stderr().write_all(line.as_bytes());
    if let Some(path) = std::env::var_os(SKIPPED_TESTS_ENV) {
        let line = format!("{}::{test}\t{reason}\n", env!("CARGO_PKG_NAME"));
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .and_then(|mut file| file.write_all(line.as_bytes()))
            .unwrap_or_else(|e| panic!("cannot add to {}: {e}", path.to_string_lossy()));
    }
}
