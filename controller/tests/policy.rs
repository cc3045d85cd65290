//! The policy round trip of `examples/policy/`, end to end on small data: a
//! real campaign over two bundled benchmarks and a third left out, the dataset
//! exported as Parquet, a model trained in Python, applied to the left-out
//! benchmark's sites, and its decision file measured against stock.

use std::process::Command;

use crate::common::{self, copy_benchmark, kiln, repo, text, worker};

#[test]
fn policy_example_runs_end_to_end() {
    assert!(
        common::have_valgrind(),
        "the campaign's objective needs callgrind"
    );
    let dir = tempfile::tempdir().unwrap();
    for name in ["sample-dsp", "tiny-interp", "graph-walk"] {
        copy_benchmark(name, dir.path());
    }
    // The example's own campaign, cut to a few steps per experiment.
    let config = std::fs::read_to_string(repo().join("examples/policy/campaign.sexp"))
        .unwrap()
        .replace("(steps 150)", "(steps 12)")
        .replace("../../target/policy/store", "store")
        .replace("../../benchmarks/", "benchmarks/");
    std::fs::write(dir.path().join("campaign.sexp"), config).unwrap();

    let python = Command::new(repo().join("scripts/python-env"))
        .output()
        .unwrap();
    assert!(python.status.success(), "{}", text(&python));
    let out = Command::new(repo().join("examples/policy/run"))
        .args(["campaign.sexp", "graph-walk", "out"])
        .current_dir(dir.path())
        .env("KILN", kiln())
        .env("KILN_WORKER", worker())
        .env("PYTHON", String::from_utf8(python.stdout).unwrap().trim())
        .output()
        .unwrap();
    let log = text(&out);
    assert!(out.status.success(), "{log}");
    assert!(
        log.contains("\"benchmarks\": [\"sample-dsp\", \"tiny-interp\"]"),
        "trained on the two benchmarks not left out: {log}"
    );

    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("out/summary.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(summary["benchmark"], "graph-walk");
    for name in ["policy", "search-best"] {
        let ratio = summary[name]["time_ratio"].as_f64().unwrap();
        assert!(ratio > 0.5 && ratio < 2.0, "{name}: time ratio {ratio}");
        assert_eq!(summary[name]["objective"], "instructions");
    }
    // The search's best step on graph-walk is at or below stock (callgrind counts exactly).
    assert!(summary["search-best"]["time_ratio"].as_f64().unwrap() <= 1.0);
    let policy = std::fs::read_to_string(dir.path().join("out/policy.sexp")).unwrap();
    assert!(policy.contains("(benchmark graph-walk)"), "{policy}");
}
