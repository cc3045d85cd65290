//! Exact instruction counts with valgrind's callgrind.
//!
//! A callgrind run is a separate run from the timed ones (valgrind slows a
//! program some fifty-fold). The count repeats to the instruction when the
//! program runs from the same path with the same environment, which the
//! launcher guarantees.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;
use std::process::Command;

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

/// What a callgrind profile says per function and per call: read with the
/// names as compiled (`--demangle=no`, see [`PROFILE_OPTIONS`]), so that they
/// are the names of inline remarks.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Profile {
    /// Instructions by function: its own and those of what it called.
    pub functions: HashMap<String, FunctionCost>,
    /// Calls by caller, callee and the source line of the call.
    pub calls: HashMap<CallKey, u64>,
    /// The object files (programs, shared libraries) the run executed code of, as callgrind
    /// names them (absolute paths).
    pub objects: BTreeSet<String>,
}

/// The instructions a function executed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct FunctionCost {
    /// In the function itself (`Ir`).
    pub self_ir: u64,
    /// In the function and everything it called.
    pub inclusive_ir: u64,
}

/// A call position in a profile: caller, callee, line of the call.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CallKey {
    /// The function holding the call.
    pub caller: String,
    /// The called function.
    pub callee: String,
    /// The call's source line (of the innermost inlined code, if any).
    pub line: u32,
}

/// The options of a profiling run, besides [`wrap`]'s: mangled names, and
/// names and positions written out in full.
pub const PROFILE_OPTIONS: &[&str] = &[
    "--demangle=no",
    "--compress-strings=no",
    "--compress-pos=no",
];

impl Profile {
    /// Reads a profile in callgrind's format (`fn=`, `cfn=`, `calls=` and
    /// cost lines whose first number is the line and the second `Ir`);
    /// compressed names (`(id) name`) and relative positions are read too.
    pub fn parse(text: &str) -> Profile {
        let mut profile = Profile::default();
        let mut names = Names::default();
        let mut name = |value: &str| names.read(value);
        let mut function = String::new();
        let mut callee = String::new();
        let mut pending_calls: Option<u64> = None;
        let mut line = 0u32;
        for raw in text.lines() {
            if let Some(v) = raw.strip_prefix("fn=") {
                function = name(v);
            } else if let Some(v) = raw.strip_prefix("cfn=") {
                callee = name(v);
            } else if let Some(v) = raw.strip_prefix("calls=") {
                pending_calls = v.split_whitespace().next().and_then(|n| n.parse().ok());
            } else if raw.starts_with(|c: char| c.is_ascii_digit() || matches!(c, '+' | '-' | '*'))
            {
                let mut fields = raw.split_whitespace();
                let position = fields.next().unwrap_or("*");
                line = match position.as_bytes()[0] {
                    b'+' => line.saturating_add(position[1..].parse().unwrap_or(0)),
                    b'-' => line.saturating_sub(position[1..].parse().unwrap_or(0)),
                    b'*' => line,
                    _ => position.parse().unwrap_or(line),
                };
                let ir: u64 = fields.next().and_then(|n| n.parse().ok()).unwrap_or(0);
                // Sums saturate: a corrupt profile's counts must not overflow.
                let cost = profile.functions.entry(function.clone()).or_default();
                cost.inclusive_ir = cost.inclusive_ir.saturating_add(ir);
                match pending_calls.take() {
                    Some(count) => {
                        let key = CallKey {
                            caller: function.clone(),
                            callee: callee.clone(),
                            line,
                        };
                        let calls = profile.calls.entry(key).or_default();
                        *calls = calls.saturating_add(count);
                    }
                    None => cost.self_ir = cost.self_ir.saturating_add(ir),
                }
            }
        }
        profile.objects = objects_of(text);
        profile
    }
}

/// A profile's function names, compressed ones (`(id) name`, then `(id)`) resolved.
#[derive(Default)]
struct Names(HashMap<String, String>);

impl Names {
    /// The function a `fn=` or `cfn=` value names; a recursion level callgrind tells apart
    /// (`fib'2`) is the function.
    fn read(&mut self, value: &str) -> String {
        let value = value.trim();
        let plain = match value.strip_prefix('(').and_then(|v| v.split_once(')')) {
            Some((id, rest)) if !rest.trim().is_empty() => {
                let rest = rest.trim().to_string();
                self.0.insert(id.to_string(), rest.clone());
                rest
            }
            Some((id, _)) => self.0.get(id).cloned().unwrap_or_default(),
            None => value.to_string(),
        };
        match plain.rsplit_once('\'') {
            Some((f, level)) if level.chars().all(|c| c.is_ascii_digit()) => f.to_string(),
            _ => plain,
        }
    }
}

/// The objects a profile names (`ob=` and `cob=` lines), compressed names (`(id) path`) read
/// too: their ids are their own, apart from functions'.
fn objects_of(text: &str) -> BTreeSet<String> {
    let mut ids: HashMap<&str, &str> = HashMap::new();
    let mut objects = BTreeSet::new();
    for raw in text.lines() {
        let Some(value) = raw.strip_prefix("ob=").or_else(|| raw.strip_prefix("cob=")) else {
            continue;
        };
        let value = value.trim();
        let path = match value.strip_prefix('(').and_then(|v| v.split_once(')')) {
            Some((id, rest)) if !rest.trim().is_empty() => {
                ids.insert(id, rest.trim());
                rest.trim()
            }
            Some((id, _)) => ids.get(id).copied().unwrap_or_default(),
            None => value,
        };
        if !path.is_empty() {
            objects.insert(path.to_string());
        }
    }
    objects
}

/// [`wrap`] with [`PROFILE_OPTIONS`], for a run whose [`Profile`] is read.
pub fn wrap_profile(argv: &[String], out_file: &Path) -> Vec<String> {
    let mut wrapped = wrap(argv, out_file);
    wrapped.splice(2..2, PROFILE_OPTIONS.iter().map(|o| o.to_string()));
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

/// A profile file's text, naming the file on error.
pub fn read_profile(out_file: &Path) -> Result<String, String> {
    std::fs::read_to_string(out_file)
        .map_err(|e| format!("cannot read callgrind profile {}: {e}", out_file.display()))
}

/// The instruction count of a profile's text ([`parse_total`]), naming `out_file` on error.
pub fn total_of(text: &str, out_file: &Path) -> Result<u64, String> {
    parse_total(text).ok_or_else(|| {
        format!(
            "callgrind profile {} has no 'summary:' or 'totals:' line",
            out_file.display()
        )
    })
}

/// The instructions each function executed itself, by name as compiled, in
/// a profile written with [`PROFILE_OPTIONS`]; functions that executed none are left out.
pub fn function_costs(profile: &Profile) -> BTreeMap<String, u64> {
    profile
        .functions
        .iter()
        .filter(|(_, cost)| cost.self_ir > 0)
        .map(|(name, cost)| (name.clone(), cost.self_ir))
        .collect()
}

/// valgrind's version (`valgrind-3.19.0`), if it is installed on the build `PATH`.
pub fn version() -> Option<String> {
    let out = crate::launch::output_std(
        Command::new("valgrind")
            .arg("--version")
            .env("PATH", crate::launch::CLEAN_PATH),
    )
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
    fn reads_costs_per_function_and_call() {
        let profile = "events: Ir\nfl=(1) a.c\nfn=(1) main\n10 5\n+2 3\ncfl=(1)\ncfn=(2) heap_push\ncalls=4 30\n* 400\n\
                       fn=(2)\n30 100\nfn=(3) fib'2\n1 7\nfn=(4) fib\n1 8\ntotals: 515\n";
        let p = Profile::parse(profile);
        assert_eq!(
            p.functions["main"],
            FunctionCost {
                self_ir: 8,
                inclusive_ir: 408
            }
        );
        assert_eq!(p.functions["heap_push"].self_ir, 100);
        assert_eq!(p.functions["fib"].self_ir, 15);
        let key = CallKey {
            caller: "main".into(),
            callee: "heap_push".into(),
            line: 12,
        };
        assert_eq!(p.calls[&key], 4);
    }

    #[test]
    fn reads_the_objects_run() {
        let profile = "events: Ir\nob=(1) /w/bench\nfn=(1) main\n1 5\ncob=(2) /lib/libc.so.6\n\
                       cfn=(2) puts\ncalls=1 0\n1 9\nob=(2)\nfn=(2)\n1 9\nob=(1)\nfn=(3) f\n1 1\n";
        let p = Profile::parse(profile);
        let objects: Vec<&str> = p.objects.iter().map(String::as_str).collect();
        assert_eq!(objects, ["/lib/libc.so.6", "/w/bench"]);
    }

    #[test]
    fn huge_counts_saturate() {
        // Found by the callgrind fuzz target: sums past u64::MAX panicked.
        let max = u64::MAX;
        let profile = format!(
            "fn=main\n1 {max}\n2 {max}\ncfn=f\ncalls={max} 1\n3 {max}\ncalls={max} 1\n3 {max}\n"
        );
        let p = Profile::parse(&profile);
        assert_eq!(p.functions["main"].self_ir, max);
        assert_eq!(p.functions["main"].inclusive_ir, max);
        let key = CallKey {
            caller: "main".into(),
            callee: "f".into(),
            line: 3,
        };
        assert_eq!(p.calls[&key], max);
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
