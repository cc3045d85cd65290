//! The field reference of prod-configs/README.md, written from the records'
//! declarations ([`super::record`]): what each field takes, its default and
//! what it means. A test keeps the README's copy equal to it.

use super::record::{Absent, FieldRow};
use super::{
    Annealing, BenchmarkSpec, Calibration, Container, Experiment, HillClimbing, Limits,
    LocalWorker, Objective, RandomSearch, RandomWalk, RunPolicy, Screening, SlurmWorker, SshWorker,
    Timeouts,
};

/// The lines that open and close the reference in prod-configs/README.md.
pub const BEGIN: &str = "<!-- field reference: written by `KILN_BLESS=1 cargo test -p kiln-protocol field_reference`; do not edit -->";
pub const END: &str = "<!-- end of the field reference -->";

/// The records of the reference, each with the form it is written in.
fn records() -> Vec<(&'static str, Vec<FieldRow>)> {
    vec![
        ("(campaign ... (objective FIELDS))", Objective::reference()),
        ("(campaign ... (runs FIELDS))", RunPolicy::reference()),
        ("(campaign ... (timeouts FIELDS))", Timeouts::reference()),
        (
            "(campaign ... (calibration FIELDS))",
            Calibration::reference(),
        ),
        ("(experiments (FIELDS) ...)", Experiment::reference()),
        (
            "(search (simulated-annealing FIELDS))",
            Annealing::reference(),
        ),
        ("(search (random-walk FIELDS))", RandomWalk::reference()),
        ("(search (random-search FIELDS))", RandomSearch::reference()),
        ("(search (hill-climbing FIELDS))", HillClimbing::reference()),
        ("(search (screening FIELDS))", Screening::reference()),
        ("(benchmarks (FIELDS) ...)", BenchmarkSpec::reference()),
        ("(benchmarks ... (limits FIELDS))", Limits::reference()),
        (
            "(benchmarks ... (container FIELDS))",
            Container::reference(),
        ),
        ("(workers (local FIELDS) ...)", LocalWorker::reference()),
        ("(workers (ssh FIELDS) ...)", SshWorker::reference()),
        ("(workers (slurm FIELDS) ...)", slurm_rows()),
    ]
}

/// A slurm entry's fields, and `(nodes N)`, which makes it N workers.
fn slurm_rows() -> Vec<FieldRow> {
    let mut rows = SlurmWorker::reference();
    rows.push(FieldRow {
        word: "nodes",
        takes: "an integer from 1 to 1024",
        default: Absent::Value("1".into()),
        doc: "Workers this entry stands for, named NAME-1 .. NAME-N (one, named NAME, without it).",
    });
    rows
}

/// The reference as markdown, between [`BEGIN`] and [`END`], lines of at most 100 characters.
pub fn markdown() -> String {
    let mut out = format!("{BEGIN}\n");
    for (form, rows) in records() {
        out.push_str(&format!("\n#### `{form}`\n\n"));
        for row in rows {
            let default = match &row.default {
                Absent::Required => "required".to_string(),
                Absent::Optional => "optional".to_string(),
                Absent::Value(value) if value.is_empty() => "default: none".to_string(),
                Absent::Value(value) => format!("default `{value}`"),
                Absent::Said(words) => format!("default: {words}"),
            };
            let item = format!("- `{}`: {}; {}. {}", row.word, row.takes, default, row.doc);
            out.push_str(&wrap(&item, 100, "  "));
        }
    }
    out.push_str(&format!("\n{END}\n"));
    out
}

/// `text` broken at spaces into lines of at most `width` characters, the later
/// lines indented by `indent`.
fn wrap(text: &str, width: usize, indent: &str) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split(' ') {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            out.push_str(line.trim_end());
            out.push('\n');
            line = indent.to_string();
        } else if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    out.push_str(&line);
    out.push('\n');
    out
}
