//! Racing on a real timed objective: an annealing chain's (or a hill
//! climber's) clearly worse candidate stops after its minimum runs, a
//! comparable one runs on.

use std::path::Path;

use crate::common::*;
use kiln_controller::store::{StepKind, StepRecord, Store};
use kiln_protocol::{DecisionValue, SiteId};

/// The run script: 0.4 s with `slow` at 1, else 0.1 s (`other` changes nothing).
const RUN_SH: &str = "if [ \"$1\" = 1 ]; then sleep 0.4; else sleep 0.1; fi\n";

/// At least 3 and at most 12 runs a step, towards a target no sleep meets;
/// at temperatures of 0.1 to 0.05 a candidate is raced out once even its
/// interval's lower end lies 46 % of the baseline (T · ln 100, at T = 0.1)
/// or less above the incumbent: the slow value is 300 % above it.
fn config(search: &str, race: &str) -> String {
    format!(
        r#"(campaign
  (name racing)
  (store "store")
  (objective (metric wall-time) (statistic median))
  (runs (warmup 0) (min 3) (max 12) (target-rel-ci 0.00001))
  (experiments
    ((benchmark sleepy)
     (search {search})
     (seed 3) {race}))
  (benchmarks
    ((name sleepy) (kind knobs) (knobs (slow 0 1) (other 0 1))
     (sources "bench-programs/sleepy")
     (run ("sh" "run.sh" "{{slow}}" "{{other}}")) (check-output none) (timeout-s 30)))
  (workers (local (slots 1))))
"#
    )
}

/// Annealing at temperatures of 0.1 to 0.05, one flip per proposal.
const ANNEALING: &str = "(simulated-annealing (steps 6) (t-max 0.1) (t-min 0.05) (flips 1))";

fn campaign(search: &str, race: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let bench = dir.path().join("bench-programs/sleepy");
    std::fs::create_dir_all(&bench).unwrap();
    std::fs::write(bench.join("run.sh"), RUN_SH).unwrap();
    std::fs::write(dir.path().join("campaign.sexp"), config(search, race)).unwrap();
    let out = run_kiln(dir.path(), &["run", "campaign.sexp"]);
    assert!(out.status.success(), "{}", text(&out));
    dir
}

fn steps(dir: &Path) -> Vec<StepRecord> {
    let store = Store::open_existing(&dir.join("store")).unwrap();
    store.steps(None).map(Result::unwrap).collect()
}

fn slow(record: &StepRecord) -> bool {
    record.decisions.get(&SiteId("slow".into())) == Some(&DecisionValue::Int(1))
}

fn measured_runs(record: &StepRecord) -> u32 {
    record
        .result
        .measurement
        .runs
        .iter()
        .filter(|r| !r.warmup)
        .count() as u32
}

#[test]
fn a_clearly_worse_candidate_under_a_timed_objective_is_cut_short_after_its_minimum_runs() {
    let dir = campaign(ANNEALING, "");
    let steps = steps(dir.path());
    assert_eq!(steps.len(), 6);
    // The seed proposes both kinds: flips of `slow` (4x slower) and of `other` (no change).
    let (worse, comparable): (Vec<&StepRecord>, Vec<&StepRecord>) =
        steps.iter().partition(|r| slow(r));
    assert!(
        !worse.is_empty() && !comparable.is_empty(),
        "seed 3 proposes {} slow and {} comparable candidates",
        worse.len(),
        comparable.len()
    );
    for r in &worse {
        let cut = r
            .result
            .measurement
            .cut_short
            .unwrap_or_else(|| panic!("step {} was not cut short: {r:?}", r.key));
        assert_eq!(measured_runs(r), 3, "step {}", r.key);
        assert_eq!((cut.runs, cut.max_runs, cut.runs_saved()), (3, 12, 9));
        assert!(cut.ci_low > cut.race.bound, "{cut:?}");
        let race = r.result.measurement.cut_short.map(|c| c.race);
        assert_eq!(race.map(|r| r.p), Some(0.01));
        // A measured, rejected candidate: ok, with an objective, never taken.
        assert_eq!(r.result.measurement.outcome.name(), "ok");
        assert!(r.objective.is_some());
        assert!(!r.decision.as_ref().unwrap().accepted, "step {}", r.key);
    }
    for r in &comparable {
        assert_eq!(r.result.measurement.cut_short, None, "step {}", r.key);
        let runs = measured_runs(r);
        assert!(
            r.result.measurement.target_met || runs == 12,
            "step {} stopped after {runs} runs without meeting its target",
            r.key
        );
    }
    let store = Store::open_existing(&dir.path().join("store")).unwrap();
    let state = store.chain("sleepy", 0).unwrap().unwrap();
    assert_eq!(state.raced.cut_short, worse.len() as u32);
    assert_eq!(state.raced.runs_saved, 9 * worse.len() as u64);
    let not_slow = |d: &kiln_protocol::DecisionSet| {
        d.get(&SiteId("slow".into())) == Some(&DecisionValue::Int(0))
    };
    assert!(not_slow(&state.best.decisions) && not_slow(&state.current.decisions));
    drop(store);

    let status = run_kiln(dir.path(), &["status", "store", "--json"]);
    assert!(status.status.success(), "{}", text(&status));
    let report: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    let raced = &report["chains"][0]["raced"];
    assert_eq!(raced["cut_short"], worse.len() as u64, "{report}");
    assert_eq!(raced["runs_saved"], 9 * worse.len() as u64, "{report}");
    let export = run_kiln(dir.path(), &["export", "store", "--table", "steps"]);
    assert!(export.status.success(), "{}", text(&export));
    let table = String::from_utf8(export.stdout).unwrap();
    let mut lines = table.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let column = header.iter().position(|c| *c == "cut_short").unwrap();
    let cut_rows = lines
        .filter(|l| l.split(',').nth(column) == Some("true"))
        .count();
    assert_eq!(cut_rows, worse.len(), "{table}");
}

#[test]
fn hill_climbing_races_its_candidates_against_the_incumbent_itself() {
    let dir = campaign("(hill-climbing (steps 6))", "");
    let steps = steps(dir.path());
    assert_eq!(steps.len(), 6);
    let to_slow = |r: &StepRecord| {
        r.decisions.get(&SiteId("slow".into())) == Some(&DecisionValue::Int(1))
            && r.diff.get(&SiteId("slow".into())).is_some()
    };
    // A one-flip proposal to the slow value from a fast incumbent: cut after 3 runs, the
    // bound the incumbent itself, since a hill climber takes only a better candidate.
    let proposals: Vec<&StepRecord> = steps
        .iter()
        .filter(|r| r.kind == StepKind::Proposal)
        .collect();
    let raced: Vec<&&StepRecord> = proposals.iter().filter(|r| to_slow(r)).collect();
    assert!(!raced.is_empty(), "{proposals:?}");
    for r in raced {
        let cut = r
            .result
            .measurement
            .cut_short
            .unwrap_or_else(|| panic!("step {} was not cut short: {r:?}", r.key));
        assert_eq!(measured_runs(r), 3, "step {}", r.key);
        assert_eq!(cut.race.bound, cut.race.incumbent, "{cut:?}");
        assert!(!r.decision.as_ref().unwrap().accepted, "step {}", r.key);
    }
    // A restart goes on from whatever it measures: it is measured in full.
    for r in steps.iter().filter(|r| r.kind == StepKind::Restart) {
        assert_eq!(r.result.measurement.cut_short, None, "step {}", r.key);
    }
    let none = campaign("(hill-climbing (steps 6))", "(race off)");
    assert!(self::steps(none.path())
        .iter()
        .all(|r| r.result.measurement.cut_short.is_none()));
}
