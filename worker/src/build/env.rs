//! What a benchmark's build and runs see: their environment (the clean base,
//! the benchmark's variables, one `KILN_KNOB_<ID>` per knob), the decision
//! file, and `{knob}` / `{decisions}` expanded in their command lines.

use std::path::Path;
use std::time::Duration;

use kiln_protocol::config::benchmark::BenchmarkSpec;
use kiln_protocol::decision::{DecisionFile, DecisionSet};

use crate::launch;

/// Name of the decision file written into the work folder.
pub const DECISIONS_FILE: &str = "decisions.sexp";

/// The environment of builds and runs: the clean base, the benchmark's own
/// variables, and for knobs one `KILN_KNOB_<ID>` per decision.
pub(crate) fn step_env(
    spec: &BenchmarkSpec,
    decisions: &DecisionSet,
    home: &Path,
) -> Vec<(String, String)> {
    let mut extra = spec.env.clone();
    if spec.knob_points().is_some() {
        extra.extend(
            decisions
                .0
                .iter()
                .map(|(id, v)| (knob_env_name(id.as_str()), v.to_string())),
        );
    }
    launch::clean_env(home, &extra)
}

/// The environment of builds: the runs' clean one with [`launch::TOOLCHAIN_ENV`] and
/// the benchmark's `pass-env` taken from the worker's environment where set
/// there. The benchmark's own `env` still wins. Runs never get these: what
/// they measure must not depend on who started the worker.
pub(crate) fn build_env(
    spec: &BenchmarkSpec,
    decisions: &DecisionSet,
    home: &Path,
) -> Vec<(String, String)> {
    let mut env = step_env(spec, decisions, home);
    let passed = launch::TOOLCHAIN_ENV
        .iter()
        .copied()
        .chain(spec.pass_env.iter().map(String::as_str));
    for name in passed {
        if spec.env.iter().any(|(k, _)| k == name) {
            continue;
        }
        let Some(value) = std::env::var_os(name) else {
            continue;
        };
        env.retain(|(k, _)| k != name);
        env.push((name.to_string(), value.to_string_lossy().into_owned()));
    }
    env
}

/// `KILN_KNOB_` and the id uppercased, other characters than letters and digits as `_`.
pub fn knob_env_name(id: &str) -> String {
    let suffix: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    format!("KILN_KNOB_{suffix}")
}

pub(crate) fn knobs_of<'a>(
    spec: &BenchmarkSpec,
    decisions: &'a DecisionSet,
) -> Option<&'a DecisionSet> {
    spec.knob_points().is_some().then_some(decisions)
}

pub(crate) fn expand_all(
    templates: &[String],
    knobs: Option<&DecisionSet>,
    decisions_file: &Path,
) -> Vec<String> {
    templates
        .iter()
        .map(|t| expand(t, knobs, decisions_file))
        .collect()
}

/// Replaces `{decisions}` by the decision file's path and, for knobs, `{id}`
/// by the knob's value; other braces are left alone (shell `${VAR}` included
/// unless VAR is a knob).
pub fn expand(template: &str, knobs: Option<&DecisionSet>, decisions_file: &Path) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else {
            rest = &rest[open..];
            break;
        };
        let name = &after[..close];
        let value = if name == "decisions" {
            Some(decisions_file.display().to_string())
        } else {
            knobs
                .and_then(|k| k.get(&name.into()))
                .map(ToString::to_string)
        };
        match value {
            Some(v) => {
                out.push_str(&v);
                rest = &after[close + 1..];
            }
            None => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

pub(crate) fn write_decisions(
    work: &Path,
    spec: &BenchmarkSpec,
    set: &DecisionSet,
) -> Result<(), String> {
    let file = DecisionFile {
        benchmark: Some(spec.name.clone()),
        set: set.clone(),
    };
    let path = work.join(DECISIONS_FILE);
    std::fs::write(&path, file.to_text())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// A timeout from a request: finite and positive (anything else would be a
/// controller bug, refused rather than panicking on).
pub(crate) fn seconds(value: f64, field: &str) -> Result<Duration, String> {
    Duration::try_from_secs_f64(value)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| format!("{field} must be a positive number of seconds, found {value}"))
}

/// Whether the worker's variable `var`, which turns a way of building off
/// for comparisons, leaves it on (anything but `off`).
pub(crate) fn switched_on(var: &str) -> bool {
    std::env::var(var).map_or(true, |v| v != "off")
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_protocol::decision::{DecisionValue, SiteId};

    #[test]
    fn expands_knobs_and_decisions() {
        let set = DecisionSet(
            [
                (SiteId::from("tile"), DecisionValue::Int(64)),
                (SiteId::from("algo"), DecisionValue::Name("fast".into())),
            ]
            .into(),
        );
        let d = Path::new("/w/decisions.sexp");
        assert_eq!(expand("-DTILE={tile}", Some(&set), d), "-DTILE=64");
        assert_eq!(expand("{algo}-{tile}", Some(&set), d), "fast-64");
        assert_eq!(
            expand("--file={decisions}", None, d),
            "--file=/w/decisions.sexp"
        );
        assert_eq!(
            expand("echo ${HOME} {x} {", Some(&set), d),
            "echo ${HOME} {x} {"
        );
        assert_eq!(
            expand("{tile}", None, d),
            "{tile}",
            "llvm-inline sites are not knobs"
        );
    }

    #[test]
    fn knob_env_names() {
        assert_eq!(knob_env_name("tile"), "KILN_KNOB_TILE");
        assert_eq!(knob_env_name("block-size.x"), "KILN_KNOB_BLOCK_SIZE_X");
    }
}
