//! Exact instruction counts with valgrind's callgrind.
//!
//! A callgrind run is a separate run from the timed ones (valgrind slows a
//! program some fifty-fold). The count repeats to the instruction when the
//! program runs from the same path with the same environment, which the
//! launcher guarantees.

use std::path::Path;
use std::process::{Command, Stdio};

/// The valgrind command line that runs `argv` under callgrind, writing its profile to `out_file`.
pub fn wrap(argv: &[String], out_file: &Path) -> Vec<String> {
    let mut wrapped = vec![
        "valgrind".to_string(),
        "--tool=callgrind".to_string(),
        format!("--callgrind-out-file={}", out_file.display()),
    ];
    wrapped.extend(argv.iter().cloned());
    wrapped
}

/// The total instruction count (`Ir`) from a callgrind profile's `summary:` or `totals:` line.
pub fn parse_total(profile: &str) -> Option<u64> {
    let mut totals = None;
    for line in profile.lines() {
        if let Some(rest) = line.strip_prefix("summary:") {
            return rest.split_whitespace().next()?.parse().ok();
        }
        if let Some(rest) = line.strip_prefix("totals:") {
            totals = rest.split_whitespace().next().and_then(|v| v.parse().ok());
        }
    }
    totals
}

/// Reads the instruction count from a profile file, naming the file on error.
pub fn read_total(out_file: &Path) -> Result<u64, String> {
    let text = std::fs::read_to_string(out_file)
        .map_err(|e| format!("cannot read callgrind profile {}: {e}", out_file.display()))?;
    parse_total(&text).ok_or_else(|| {
        format!(
            "callgrind profile {} has no 'summary:' or 'totals:' line",
            out_file.display()
        )
    })
}

/// valgrind's version (`valgrind-3.19.0`), if it is installed on the build `PATH`.
pub fn version() -> Option<String> {
    let out = Command::new("valgrind")
        .arg("--version")
        .env("PATH", crate::process::CLEAN_PATH)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_summary_and_totals() {
        let profile = "version: 1\ncmd: ./a\nevents: Ir\nfn=(1) main\n3 10\nsummary: 123456\ntotals: 123456\n";
        assert_eq!(parse_total(profile), Some(123456));
        assert_eq!(parse_total("events: Ir\ntotals: 77\n"), Some(77));
        assert_eq!(parse_total("events: Ir\n"), None);
    }

    #[test]
    fn wraps_command() {
        let w = wrap(&["./a".into(), "x".into()], Path::new("/tmp/cg.out"));
        assert_eq!(
            w,
            [
                "valgrind",
                "--tool=callgrind",
                "--callgrind-out-file=/tmp/cg.out",
                "./a",
                "x"
            ]
        );
    }
}
