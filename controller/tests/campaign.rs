//! Campaigns end to end with the real binaries on the local worker: exact
//! resume after SIGKILL, search quality on a known optimum, failed steps
//! recorded, and status.

use std::io::Write as _;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::campaign::{
    assert_every_step_once, decided, diagnostics, requeued_from, resumes_exactly,
    run_until_decided, slow_config, slow_setup, slow_setup_of, synthetic_config_on, trajectory,
};
use crate::common::*;
use kiln_controller::store::{now_ms, StepKind, StepRecord, Store};
use kiln_protocol::ContentHash;

/// The synthetic campaign on one local worker of two slots.
fn synthetic_config(steps: u32, seed: u64, parallel: u32) -> String {
    synthetic_config_on(steps, seed, parallel, "(workers (local (slots 2)))")
}

/// [`synthetic_config`] with proposals `uniform` or `guided`.
fn synthetic_config_proposing(steps: u32, seed: u64, parallel: u32, proposals: &str) -> String {
    let experiment_end = format!("(parallel {parallel})))");
    synthetic_config(steps, seed, parallel).replace(
        &experiment_end,
        &format!("(parallel {parallel}) (proposals {proposals})))"),
    )
}

fn setup(config: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_benchmark("synthetic", dir.path());
    std::fs::write(dir.path().join("campaign.sexp"), config).unwrap();
    dir
}

/// Every decided step of the store, in order.
fn steps(dir: &Path) -> Vec<StepRecord> {
    let store = Store::open(&dir.join("store")).unwrap();
    store.steps(None).map(Result::unwrap).collect()
}

/// [`synthetic_config`] searching with `search` (a `(search ...)` field's content).
fn synthetic_config_searching(steps: u32, seed: u64, parallel: u32, search: &str) -> String {
    synthetic_config(steps, seed, parallel).replace(
        &format!("(simulated-annealing (steps {steps}) (t-max 0.3) (t-min 0.005))"),
        search,
    )
}

#[test]
fn killed_and_resumed_campaign_equals_an_uninterrupted_one() {
    resumes_exactly(setup, &synthetic_config_proposing(24, 11, 2, "uniform"), 24);
}

#[test]
fn killed_and_resumed_guided_campaign_equals_an_uninterrupted_one() {
    // 24 steps: six screening flips (a quarter of the budget), the combined
    // improving flips, then guided proposals.
    resumes_exactly(setup, &synthetic_config_proposing(24, 11, 2, "guided"), 24);
}

#[test]
fn killed_and_resumed_random_search_equals_an_uninterrupted_one() {
    resumes_exactly(
        setup,
        &synthetic_config_searching(24, 11, 2, "(random-search (steps 24))"),
        24,
    );
}

#[test]
fn killed_and_resumed_hill_climbing_equals_an_uninterrupted_one() {
    // Ten knobs and 40 steps: the climb reaches a local optimum and restarts.
    let Some(steps) = resumes_exactly(
        setup,
        &synthetic_config_searching(40, 11, 2, "(hill-climbing (steps 40))"),
        40,
    ) else {
        return;
    };
    assert!(steps.iter().any(|s| s.kind == StepKind::Restart));
}

#[test]
fn hill_climbing_never_accepts_a_worse_step_and_restarts_only_at_a_local_optimum() {
    if !have_valgrind() {
        return skip("valgrind is not installed");
    }
    let dir = setup(&synthetic_config_searching(
        60,
        4,
        2,
        "(hill-climbing (steps 60))",
    ));
    let out = run_kiln(dir.path(), &["run", "campaign.sexp"]);
    assert!(out.status.success(), "{}", text(&out));
    let all = steps(dir.path());
    assert_eq!(all.len(), 60);
    let mut restarts = 0;
    for s in &all {
        let decision = s.decision.as_ref().unwrap();
        match s.kind {
            StepKind::Proposal => {
                assert_eq!(s.diff.0.len(), 1, "step {} is not one flip", s.key.step);
                if decision.accepted {
                    assert!(
                        s.objective.unwrap() < decision.compared_with,
                        "step {} accepted {:?} against {}",
                        s.key.step,
                        s.objective,
                        decision.compared_with
                    );
                } else if let Some(o) = s.objective {
                    assert!(
                        o >= decision.compared_with,
                        "step {} rejected a better set",
                        s.key.step
                    );
                }
            }
            StepKind::Restart => restarts += 1,
            other => panic!("step {} is a {other:?}", s.key.step),
        }
    }
    // Ten one-flip neighbours: 60 steps reach a local optimum and restart.
    assert!(restarts > 0);
    // Greedy one-flip moves from all zeros end at the separable optimum at least.
    let best = all
        .iter()
        .filter_map(|s| s.objective)
        .fold(f64::INFINITY, f64::min);
    let local = all
        .iter()
        .find(|s| {
            s.decisions
                .0
                .values()
                .map(|v| v.to_string())
                .collect::<Vec<_>>()
                .join(" ")
                == "0 0 1 0 1 0 1 0 1 0"
        })
        .expect("the climb passes the separable optimum");
    assert!(best <= local.objective.unwrap());
}

/// Random search's sets depend on its seed only: the same seed over a program
/// that fails on half its sets and one that never fails draws the same sets.
#[test]
fn random_search_draws_the_same_sets_whatever_the_results() {
    if !have_valgrind() {
        return skip("valgrind is not installed");
    }
    let config = synthetic_config_searching(30, 9, 2, "(random-search (steps 30))");
    let plain = setup(&config);
    // x3 = 1 makes the run fail (the program refuses a knob of "11"); other
    // sets cost ten times less.
    let failing = setup(
        &config
            .replace(r#""{x3}""#, r#""{x3}{x3}""#)
            .replace(r#""{x9}" "300""#, r#""{x9}" "30""#),
    );
    let mut sets = Vec::new();
    for dir in [&plain, &failing] {
        let out = run_kiln(dir.path(), &["run", "campaign.sexp"]);
        assert!(out.status.success(), "{}", text(&out));
        let all = steps(dir.path());
        assert_eq!(all.len(), 30);
        assert!(all
            .iter()
            .all(|s| s.kind == StepKind::Proposal && s.parent.is_none()));
        sets.push(all);
    }
    let (plain, failing) = (&sets[0], &sets[1]);
    assert!(
        failing.iter().any(|s| s.objective.is_none()),
        "no run failed"
    );
    assert!(
        failing.iter().any(|s| s.objective.is_some()),
        "every run failed"
    );
    let hashes = |all: &[StepRecord]| -> Vec<String> {
        all.iter().map(|s| s.decision_hash.to_string()).collect()
    };
    assert_eq!(hashes(plain), hashes(failing));
    // Uniform over the space: sets differ from the start in several knobs, not one.
    assert!(plain.iter().any(|s| s.diff.0.len() > 2));
}

/// A campaign over two knobs of the synthetic benchmark (four decision sets),
/// so that proposals repeat, with `objective` and `runs`.
fn two_knob_config(steps: u32, objective: &str, runs: &str) -> String {
    format!(
        r#"(campaign
  (name two-knobs)
  (store "store")
  (objective (metric {objective}) (statistic median))
  (runs {runs})
  (experiments
    ((benchmark synthetic)
     (search (random-walk (steps {steps}) (flips 1)))
     (chains 2) (seed 5) (parallel 2)))
  (benchmarks
    ((name synthetic) (kind knobs)
     (knobs (x0 0 1) (x1 0 1))
     (sources "bench-programs/synthetic")
     (build ("cc" "-O1" "main.c" "-o" "bench"))
     (run ("./bench" "{{x0}}" "{{x1}}" "0" "0" "0" "0" "0" "0" "0" "0" "30"))
     (check-output none)
     (timeout-s 30)))
  (workers (local (slots 2))))
"#
    )
}

/// [`two_knob_config`] with one run a step, run to its end: the folder and its 24 steps.
fn two_knob_campaign(objective: &str) -> (tempfile::TempDir, Vec<StepRecord>) {
    let dir = setup(&two_knob_config(
        12,
        objective,
        "(warmup 0) (min 1) (max 1)",
    ));
    let out = run_kiln(dir.path(), &["run", "campaign.sexp"]);
    assert!(out.status.success(), "{}", text(&out));
    let all = steps(dir.path());
    assert_eq!(all.len(), 24);
    (dir, all)
}

#[test]
fn a_repeated_decision_set_under_callgrind_is_not_rebuilt_or_rerun() {
    if !have_valgrind() {
        return skip("valgrind is not installed");
    }
    let (dir, all) = two_knob_campaign("instructions");
    let measured: Vec<&StepRecord> = all.iter().filter(|s| s.cached_from.is_none()).collect();
    let mut sets: Vec<String> = measured
        .iter()
        .map(|s| s.decision_hash.to_string())
        .collect();
    sets.sort();
    sets.dedup();
    // Each decision set ran once over both chains; every other step took its result.
    assert_eq!(sets.len(), measured.len(), "a set was measured twice");
    assert!(measured.len() <= 4, "{} steps measured", measured.len());
    for reused in all.iter().filter(|s| s.cached_from.is_some()) {
        let source = all
            .iter()
            .find(|s| Some(&s.key) == reused.cached_from.as_ref())
            .expect("the source is stored");
        assert_eq!(source.decision_hash, reused.decision_hash);
        assert_eq!(source.result.started_ms, reused.result.started_ms, "re-run");
        assert_eq!(source.objective, reused.objective);
    }
    // The status counts each chain's distinct sets (start included) and varied knobs.
    let status = run_kiln(dir.path(), &["status", "store"]);
    let table = String::from_utf8_lossy(&status.stdout);
    assert!(status.status.success(), "{}", text(&status));
    assert!(
        table.contains("varied") && table.contains("sets"),
        "{table}"
    );
    for chain in 0..2u32 {
        let mut own: Vec<String> = all
            .iter()
            .filter(|s| s.key.chain == chain)
            .map(|s| s.decision_hash.to_string())
            .collect();
        own.sort();
        own.dedup();
        let row = table
            .lines()
            .find(|l| {
                l.split_whitespace()
                    .take(2)
                    .eq(["synthetic", &chain.to_string()])
            })
            .unwrap_or_else(|| panic!("no row for chain {chain}:\n{table}"));
        assert!(row.contains("2/2 100%"), "{row}");
        // The start (0 0) is counted whether or not a step returned to it.
        let start_measured = all
            .iter()
            .any(|s| s.key.chain == chain && s.decisions.0.values().all(|v| v.to_string() == "0"));
        let expected = own.len() + usize::from(!start_measured);
        assert!(
            row.split_whitespace().any(|w| w == expected.to_string()),
            "expected {expected} sets: {row}"
        );
    }
}

#[test]
fn a_repeated_decision_set_under_a_timed_objective_is_measured_again() {
    let (_dir, all) = two_knob_campaign("wall-time");
    assert!(
        all.iter().all(|s| s.cached_from.is_none()),
        "a timed step reused a result"
    );
    let mut sets: Vec<String> = all.iter().map(|s| s.decision_hash.to_string()).collect();
    sets.sort();
    sets.dedup();
    assert!(sets.len() <= 4);
}

#[test]
fn annealing_finds_the_known_optimum_of_the_synthetic_space() {
    finds_the_optimum("uniform");
}

#[test]
fn guided_annealing_finds_the_known_optimum_of_the_synthetic_space() {
    finds_the_optimum("guided");
}

fn finds_the_optimum(proposals: &str) {
    if !have_valgrind() {
        return skip("valgrind is not installed");
    }
    let dir = setup(&synthetic_config_proposing(100, 3, 2, proposals));
    let out = run_kiln(dir.path(), &["run", "campaign.sexp"]);
    assert!(out.status.success(), "{}", text(&out));
    let best =
        std::fs::read_to_string(dir.path().join("store/best/synthetic-chain0.sexp")).unwrap();
    let file = kiln_protocol::DecisionFile::parse(&best, "best").unwrap();
    let got: Vec<String> = (0..10)
        .map(|i| {
            file.set
                .get(&kiln_protocol::SiteId(format!("x{i}")))
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(
        got.join(" "),
        "1 1 1 0 1 0 1 0 1 0",
        "best found:\n{best}\n{}",
        text(&out)
    );
}

/// x0 and x1 of the synthetic program are each harmful alone and helpful together. At a
/// temperature that takes no harmful flip, one-point moves can never reach both; a guided
/// chain whose one-point moves stall moves two points at once, and finds the pair.
#[test]
fn a_stalled_guided_chain_moves_two_points_together_and_reaches_the_pair_optimum() {
    if !have_valgrind() {
        return skip("valgrind is not installed");
    }
    let config = synthetic_config_searching(
        100,
        3,
        1,
        "(simulated-annealing (steps 100) (t-max 0.00001) (t-min 0.000001))",
    )
    .replace("(parallel 1)))", "(parallel 1) (proposals guided)))");
    let dir = setup(&config);
    let out = run_kiln(dir.path(), &["run", "campaign.sexp"]);
    assert!(out.status.success(), "{}", text(&out));
    let all = steps(dir.path());
    let knob = |s: &StepRecord, i: usize| {
        s.decisions
            .get(&kiln_protocol::SiteId(format!("x{i}")))
            .map(ToString::to_string)
    };
    // Only two-point moves took the chain to both: no accepted proposal changed one of them alone.
    let both = all
        .iter()
        .position(|s| {
            s.decision.as_ref().is_some_and(|d| d.accepted)
                && knob(s, 0).as_deref() == Some("1")
                && knob(s, 1).as_deref() == Some("1")
        })
        .expect("the chain never took x0 and x1 together");
    assert!(all[both].diff.0.len() >= 2, "{:?}", all[both].diff);
    // The acceptance the status shows is a share of the proposals: the screened flips,
    // measured and never taken, are not among them.
    let screened = all.iter().filter(|s| s.kind == StepKind::Screen).count();
    let proposals = all.iter().filter(|s| s.kind.can_move()).count();
    let accepted = all
        .iter()
        .filter(|s| s.decision.as_ref().is_some_and(|d| d.accepted))
        .count();
    assert!(screened > 0 && proposals + screened <= all.len() && accepted > 0);
    let status = run_kiln(dir.path(), &["status", "store"]);
    let shown = format!(
        "{accepted} of {proposals} ({:.0}%)",
        100.0 * accepted as f64 / proposals as f64
    );
    assert!(
        text(&status).contains(&shown),
        "{shown}:\n{}",
        text(&status)
    );
    // The plots tell the screened flips from rejected proposals.
    let report = run_kiln(dir.path(), &["report", "store", "-o", "plots"]);
    assert!(report.status.success(), "{}", text(&report));
    let svg = std::fs::read_to_string(dir.path().join("plots/synthetic-objective.svg")).unwrap();
    assert!(svg.contains("screened flip (never taken)"), "{svg}");
    let best =
        std::fs::read_to_string(dir.path().join("store/best/synthetic-chain0.sexp")).unwrap();
    let file = kiln_protocol::DecisionFile::parse(&best, "best").unwrap();
    for i in [0, 1] {
        assert_eq!(
            file.set
                .get(&kiln_protocol::SiteId(format!("x{i}")))
                .map(ToString::to_string)
                .as_deref(),
            Some("1"),
            "{best}"
        );
    }
}

#[test]
fn failed_candidates_are_recorded_and_the_chain_carries_on() {
    let dir = tempfile::tempdir().unwrap();
    let bench = dir.path().join("bench-programs/flaky");
    std::fs::create_dir_all(&bench).unwrap();
    // A knob picks how the candidate fails; scripts keep the test free of compilers.
    std::fs::write(
        bench.join("build.sh"),
        "if [ \"$1\" = broken ]; then echo 'error: does not compile' >&2; exit 1; fi\n",
    )
    .unwrap();
    std::fs::write(
        bench.join("run.sh"),
        "case \"$1\" in\n  crash) echo 'fatal: bad state at 0x42' >&2; kill -SEGV $$ ;;\n  hang) sleep 100 ;;\n  wrong) echo different ;;\n  *) echo same ;;\nesac\n",
    )
    .unwrap();
    let config = r#"(campaign
  (name flaky)
  (store "store")
  (objective (metric wall-time) (statistic median))
  (runs (warmup 0) (min 1) (max 2))
  (experiments ((benchmark flaky) (search (random-walk (steps 16))) (seed 5)))
  (benchmarks
    ((name flaky) (kind knobs)
     (knobs (mode fine broken crash hang wrong))
     (sources "bench-programs/flaky")
     (build ("sh" "build.sh" "{mode}"))
     (run ("sh" "run.sh" "{mode}"))
     (timeout-s 1)))
  (workers (local (slots 2))))
"#;
    std::fs::write(dir.path().join("campaign.sexp"), config).unwrap();
    let out = run_kiln(dir.path(), &["run", "campaign.sexp"]);
    assert!(out.status.success(), "{}", text(&out));
    let steps = steps(dir.path());
    assert_eq!(steps.len(), 16, "every step stored once");
    let outcomes: std::collections::BTreeSet<&str> = steps
        .iter()
        .map(|s| s.result.measurement.outcome.name())
        .collect();
    for expected in ["build-failed", "run-failed", "timeout", "wrong-output"] {
        assert!(
            outcomes.contains(expected),
            "no {expected} among {outcomes:?}"
        );
    }
    for s in &steps {
        if s.result.measurement.outcome.name() != "ok" {
            assert_eq!(
                s.objective, None,
                "{}: a failed step has no objective",
                s.key
            );
            assert!(
                !s.decision.as_ref().unwrap().accepted,
                "{}: a failed step is never accepted",
                s.key
            );
        }
    }
    let status = run_kiln(dir.path(), &["status", "store"]);
    let shown = String::from_utf8_lossy(&status.stdout);
    assert!(status.status.success(), "{}", text(&status));
    assert!(shown.contains("finished"), "{shown}");
    assert!(shown.contains("16/16"), "{shown}");
    assert!(shown.contains("timeout"), "{shown}");
    let last = steps
        .iter()
        .rfind(|s| s.result.measurement.outcome.name() != "ok")
        .unwrap();
    assert!(
        shown.contains(&format!(
            "last failure of flaky/chain 0: step {}: ",
            last.key.step
        )),
        "{shown}"
    );

    // Each failure explains itself: in the step view, and in the log.
    let shown_step = |name: &str| {
        let s = steps
            .iter()
            .find(|s| s.result.measurement.outcome.name() == name)
            .unwrap();
        let path = format!("flaky/0/{}", s.key.step);
        let out = run_kiln(dir.path(), &["show", "store", &path]);
        assert!(out.status.success(), "{}", text(&out));
        String::from_utf8_lossy(&out.stdout).to_string()
    };
    let crashed = shown_step("run-failed");
    assert!(crashed.contains("killed by SIGSEGV"), "{crashed}");
    assert!(crashed.contains("| fatal: bad state at 0x42"), "{crashed}");
    let broken = shown_step("build-failed");
    assert!(broken.contains("| error: does not compile"), "{broken}");
    let log = std::fs::read_to_string(dir.path().join("store/kiln.log")).unwrap();
    assert!(
        log.contains("run failed (killed by SIGSEGV): fatal: bad state at 0x42"),
        "{log}"
    );
    // And in the export's failure column, beside its outcome.
    let export = run_kiln(dir.path(), &["export", "store", "--table", "steps"]);
    assert!(export.status.success(), "{}", text(&export));
    let mut table = csv::Reader::from_reader(&export.stdout[..]);
    let header = table.headers().unwrap().clone();
    let column = |name: &str| header.iter().position(|h| h == name).unwrap();
    let (outcome, failure) = (column("outcome"), column("failure"));
    let rows: Vec<csv::StringRecord> = table.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), steps.len());
    for row in &rows {
        match &row[outcome] {
            "ok" => assert_eq!(&row[failure], "", "{row:?}"),
            "run-failed" => assert_eq!(
                &row[failure],
                "run failed (killed by SIGSEGV): fatal: bad state at 0x42"
            ),
            "build-failed" => assert!(
                row[failure].ends_with(": error: does not compile"),
                "{row:?}"
            ),
            _ => assert_ne!(&row[failure], "", "{row:?}"),
        }
    }
    // A step or experiment the store lacks is a name it lacks: bad input, as the README says.
    let missing = run_kiln(dir.path(), &["show", "store", "flaky/0/99"]);
    assert_eq!(missing.status.code(), Some(2), "{}", text(&missing));
    let unknown = run_kiln(dir.path(), &["show", "store", "flakey/0/1"]);
    assert_eq!(unknown.status.code(), Some(2), "{}", text(&unknown));
    assert!(
        text(&unknown).contains("it holds: flaky"),
        "{}",
        text(&unknown)
    );
    let malformed = run_kiln(dir.path(), &["show", "store", "flaky-17"]);
    assert_eq!(malformed.status.code(), Some(2), "{}", text(&malformed));
}

/// A finished campaign's store held by another command (`kiln policy`, here
/// `flock`) is read from the snapshot its controller left: finished, not
/// "running: finished".
#[test]
fn status_of_a_finished_campaign_whose_store_is_held_says_it_finished() {
    if !have("flock") {
        return skip("no flock (util-linux) to hold the store with");
    }
    let dir = slow_setup(2);
    let out = run_kiln(dir.path(), &["run", "campaign.sexp"]);
    assert!(out.status.success(), "{}", text(&out));
    let mut holder = std::process::Command::new("flock")
        .args(["-x", "store/db/db", "sleep", "30"])
        .current_dir(dir.path())
        .spawn()
        .unwrap();
    // A kiln writer holding it (`kiln policy`) would have removed the sealed report.
    std::fs::remove_file(dir.path().join("store/status-sealed.json")).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let out = run_kiln(dir.path(), &["status", "store"]);
    holder.kill().unwrap();
    holder.wait().unwrap();
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("when the campaign finished"), "{said}");
    assert!(said.contains("campaign slow (finished"), "{said}");
    assert!(!said.contains("running:"), "{said}");
}

/// `kiln status` of a finished campaign reads the report its controller sealed, not the
/// database (seconds and hundreds of MB at ten million steps), until a writer opens the store
/// (which removes it) or the high-water file changes (a writer that does not know of it).
#[test]
fn status_of_an_ended_campaign_is_its_sealed_report_until_a_writer_opens_the_store() {
    let dir = slow_setup(2);
    let out = run_kiln(dir.path(), &["run", "campaign.sexp"]);
    assert!(out.status.success(), "{}", text(&out));
    let store = dir.path().join("store");
    let status = |dir: &Path| text(&run_kiln(dir, &["status", "store"]));
    let from_store = status(dir.path());
    assert!(
        from_store.contains("campaign slow (finished"),
        "{from_store}"
    );
    // Without its database: what is shown is the sealed report, the same.
    let (db, away) = (store.join("db/db"), store.join("db/db.away"));
    std::fs::rename(&db, &away).unwrap();
    assert_eq!(status(dir.path()), from_store);
    // Rewritten, the high-water file no longer vouches for the report.
    let marks = std::fs::read(store.join("high-water")).unwrap();
    std::thread::sleep(Duration::from_millis(20));
    std::fs::write(store.join("high-water"), marks).unwrap();
    let unsealed = status(dir.path());
    assert!(
        unsealed.contains("the snapshot its controller left"),
        "{unsealed}"
    );
    std::fs::rename(&away, &db).unwrap();
    assert_eq!(status(dir.path()), from_store);
    // A writer removes it as it opens the store.
    run_kiln(dir.path(), &["run", "campaign.sexp"]);
    assert!(store.join("status-sealed.json").is_file());
    drop(Store::open(&store).unwrap());
    assert!(!store.join("status-sealed.json").exists());
    assert_eq!(status(dir.path()), from_store);
}

#[test]
fn status_of_a_running_campaign_comes_from_its_snapshot() {
    let dir = slow_setup(40);
    let mut child = run_until_decided(dir.path(), 2);
    let status = run_kiln(dir.path(), &["status", "store"]);
    let shown = String::from_utf8_lossy(&status.stdout).to_string();
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(status.status.success(), "{}", text(&status));
    assert!(
        shown.contains("live snapshot from the running controller"),
        "{shown}"
    );
    assert!(shown.contains("/40"), "{shown}");
    assert!(shown.contains("local"), "{shown}");
    // How long until its last chain ends, in its first line.
    let head = shown.lines().find(|l| l.starts_with("campaign "));
    assert!(
        head.is_some_and(
            |h| h.starts_with("campaign slow (running: searching; about ") && h.ends_with(" left)")
        ),
        "{shown}"
    );
}

/// A view of a store beside the campaign running it (`kiln export`, `show`)
/// reads a copy of it (as the store would read after a crash then).
#[test]
fn a_store_a_running_campaign_holds_is_read_from_a_copy() {
    let dir = slow_setup(40);
    let mut running = run_until_decided(dir.path(), 1);
    let export = run_kiln(dir.path(), &["export", "store", "--table", "steps"]);
    let show = run_kiln(dir.path(), &["show", "store", "slow/0/0"]);
    running.kill().unwrap();
    running.wait().unwrap();
    assert!(export.status.success(), "{}", text(&export));
    let rows = String::from_utf8_lossy(&export.stdout).lines().count();
    assert!(
        rows >= 2,
        "a header and at least one step:\n{}",
        text(&export)
    );
    assert!(show.status.success(), "{}", text(&show));
}

#[test]
fn a_store_in_use_is_refused_naming_the_path_and_holder() {
    let dir = slow_setup(40);
    let mut first = run_until_decided(dir.path(), 1);
    let second = run_kiln(dir.path(), &["run", "campaign.sexp"]);
    first.kill().unwrap();
    first.wait().unwrap();
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(!second.status.success());
    assert!(
        err.contains("store store is in use by another controller"),
        "{err}"
    );
    assert!(err.contains(&format!("pid {}", first.id())), "{err}");
}

#[test]
fn an_incompatible_config_change_is_refused_until_force_new() {
    let dir = slow_setup(2);
    let out = run_kiln(dir.path(), &["run", "campaign.sexp"]);
    assert!(out.status.success(), "{}", text(&out));
    let first = steps(dir.path());
    assert!(
        first.iter().all(|s| s.worker_fingerprint.is_some()),
        "steps carry the worker's fingerprint"
    );
    std::fs::write(dir.path().join("campaign.sexp"), slow_config(3)).unwrap();
    let refused = run_kiln(dir.path(), &["run", "campaign.sexp"]);
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success());
    assert!(err.contains("the config changed incompatibly"), "{err}");
    // One line per changed field, not a dump of the whole experiment.
    assert!(
        err.contains("  experiment slow: search.simulated-annealing.steps: 2 -> 3\n"),
        "{err}"
    );
    assert!(!err.contains("ExperimentSpec"), "{err}");
    assert!(err.contains("--force-new"), "{err}");
    assert_eq!(steps(dir.path()).len(), 2, "the refusal lost nothing");
    // Sources that moved with their content are the same campaign (a renamed folder).
    let (slow, moved) = (
        dir.path().join("bench-programs/slow"),
        dir.path().join("bench-programs/moved"),
    );
    std::fs::rename(&slow, &moved).unwrap();
    let renamed = slow_config(2).replace("bench-programs/slow", "bench-programs/moved");
    std::fs::write(dir.path().join("campaign.sexp"), renamed).unwrap();
    let resumed = run_kiln(dir.path(), &["run", "campaign.sexp"]);
    assert!(resumed.status.success(), "{}", text(&resumed));
    assert_eq!(
        steps(dir.path()).len(),
        2,
        "the moved sources resumed the campaign"
    );
    std::fs::rename(&moved, &slow).unwrap();
    // Sources that moved are what `kiln check` says they are, before any store is read.
    let moved = slow_config(2).replace("bench-programs/slow", "bench-programs/gone");
    std::fs::write(dir.path().join("campaign.sexp"), moved).unwrap();
    let refused = run_kiln(dir.path(), &["run", "campaign.sexp"]);
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
    assert!(text(&refused).contains("no folder"), "{}", text(&refused));
    std::fs::write(dir.path().join("campaign.sexp"), slow_config(3)).unwrap();
    let fresh = run_kiln(dir.path(), &["run", "campaign.sexp", "--force-new"]);
    assert!(fresh.status.success(), "{}", text(&fresh));
    assert_eq!(steps(dir.path()).len(), 3);
    let moved: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("store.old-"))
        .collect();
    assert_eq!(moved.len(), 1, "the old store is kept aside");
}

/// A search whose steps are only its budget (hill climbing here) may be given more of them
/// under a stored campaign: the chain goes on as an uninterrupted one of the new length.
#[test]
fn a_budget_extended_under_a_stored_campaign_goes_on_as_one_of_that_length() {
    if !have_valgrind() {
        return skip("valgrind is not installed (callgrind is the deterministic objective)");
    }
    let climbing = |steps: u32| {
        let search = format!("(hill-climbing (steps {steps}))");
        synthetic_config_searching(steps, 11, 2, &search)
    };
    let straight = setup(&climbing(12));
    let out = run_kiln(straight.path(), &["run", "campaign.sexp"]);
    assert!(out.status.success(), "{}", text(&out));
    let extended = setup(&climbing(6));
    let out = run_kiln(extended.path(), &["run", "campaign.sexp"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(steps(extended.path()).len(), 6);
    std::fs::write(extended.path().join("campaign.sexp"), climbing(12)).unwrap();
    let out = run_kiln(extended.path(), &["run", "campaign.sexp"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        trajectory(&steps(extended.path())),
        trajectory(&steps(straight.path()))
    );
}

/// Whether this machine's worker can apply a memory limit (a cgroup memory controller).
fn worker_limits_memory() -> bool {
    let out = std::process::Command::new(worker())
        .args(["probe", "--json"])
        .output()
        .expect("kiln-worker probe runs");
    let caps: serde_json::Value = serde_json::from_slice(&out.stdout).expect("probe prints JSON");
    caps["limits"]["memory"].as_bool() == Some(true)
}

#[test]
fn run_limits_no_worker_can_apply_stop_the_campaign_naming_why() {
    if worker_limits_memory() {
        return skip("this machine's worker can apply memory limits");
    }
    let config = synthetic_config(4, 1, 1)
        .replace(
            "(objective (metric instructions)",
            "(objective (metric wall-time)",
        )
        .replace(
            "(timeout-s 30)",
            "(timeout-s 30)\n     (limits (cpus 1) (memory \"256m\"))",
        );
    let dir = setup(&config);
    let started = Instant::now();
    let out = run_kiln(dir.path(), &["run", "campaign.sexp"]);
    let said = text(&out);
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains("no worker can run this campaign's steps") && said.contains("worker local"),
        "{said}"
    );
    assert!(
        said.contains("memory controller")
            && said.contains("(limits (cpus 1.0) (memory 268435456))"),
        "{said}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "the campaign must stop, not wait for a fit worker"
    );
    // Nothing was measured, and the store stays resumable.
    assert!(steps(dir.path()).is_empty());
}

#[test]
fn a_worker_that_rejects_steps_is_set_aside_and_its_steps_run_elsewhere() {
    // Worker "bad" is pinned to a CPU this machine lacks: it rejects every step.
    let config = synthetic_config(6, 3, 1)
        .replace(
            "(objective (metric instructions)",
            "(objective (metric wall-time)",
        )
        .replace(
            "(workers (local (slots 2)))",
            "(workers (local (name good) (slots 1)) (local (name bad) (slots 1) (cpus (1000))))",
        );
    assert!(config.contains("(name bad)"), "{config}");
    let dir = setup(&config);
    let out = run_kiln(dir.path(), &["run", "campaign.sexp"]);
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("CPU 1000 is not available"), "{said}");
    let steps = steps(dir.path());
    assert_eq!(steps.len(), 6);
    for s in &steps {
        assert_eq!(
            s.result.measurement.outcome.name(),
            "ok",
            "{:?}",
            s.result.measurement.outcome
        );
        assert_eq!(s.worker, "good");
    }
}

/// A 2-step random walk over the knob benchmark `name` (its source `file`, name and text; its
/// knobs, build form and run command as config text) on callgrind's instructions, one run a step
/// configured; the campaign's folder and what `kiln run` said on stderr.
fn counted_walk(
    name: &str,
    file: (&str, &str),
    knobs: &str,
    build: &str,
    run: &str,
) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let bench = dir.path().join("bench-programs").join(name);
    std::fs::create_dir_all(&bench).unwrap();
    std::fs::write(bench.join(file.0), file.1).unwrap();
    let config = format!(
        r#"(campaign
  (name {name})
  (store "store")
  (objective (metric instructions) (statistic median))
  (runs (warmup 0) (min 1) (max 1))
  (experiments ((benchmark {name}) (search (random-walk (steps 2))) (seed 1)))
  (benchmarks
    ((name {name}) (kind knobs) (knobs {knobs}) (sources "bench-programs/{name}") {build}
     (run {run}) (check-output none)))
  (workers (local (slots 1))))
"#
    );
    std::fs::write(dir.path().join("campaign.sexp"), config).unwrap();
    let out = run_kiln(dir.path(), &["run", "campaign.sexp"]);
    assert!(out.status.success(), "{}", text(&out));
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    (dir, said)
}

#[test]
fn a_baseline_whose_instruction_counts_differ_is_reported_with_the_spread() {
    if !have_valgrind() {
        return skip("valgrind is not installed");
    }
    // Work that depends on the process id, as a hash seeded from addresses does.
    let script = "i=0; n=$(( $$ % 97 + 20 )); while [ $i -lt $n ]; do i=$((i+1)); done\n";
    let (dir, said) = counted_walk(
        "uneven",
        ("run.sh", script),
        "(k 1 2)",
        "",
        r#"("sh" "run.sh")"#,
    );
    assert!(
        said.contains("kiln: experiment uneven: the baseline's instructions differ by up to"),
        "{said}"
    );
    // One run a step cannot tell a step from that spread: each gets at least three.
    assert!(
        said.contains("each step is measured at least 3 times"),
        "{said}"
    );
    let decided = steps(dir.path());
    assert_eq!(decided.len(), 2);
    for step in &decided {
        let runs = &step.result.measurement.runs;
        let measured = runs.iter().filter(|r| !r.warmup).count();
        assert!(measured >= 3, "{}: {measured} runs", step.key);
    }
}

/// Counts that differ by a few instructions of tens of millions (a program's start varies that
/// much) are measured once a step: repeats would cost three times the step for a spread far below
/// any effect; the spread is noted.
#[test]
fn a_negligible_spread_of_instruction_counts_keeps_one_run_a_step() {
    if !have_valgrind() || !have("cc") {
        return skip("needs valgrind and cc");
    }
    // Fixed work of tens of millions of instructions, and a few more that depend on the pid.
    let program = "#include <stdio.h>\n#include <unistd.h>\nint main(void) {\n\
         volatile unsigned long s = 0;\n\
         unsigned long n = 8000000 + (unsigned long)getpid() % 97;\n\
         for (unsigned long i = 0; i < n; i++) s += i;\n\
         printf(\"%d\\n\", (int)(s > 0));\n  return 0;\n}\n";
    let (dir, said) = counted_walk(
        "steady",
        ("main.c", program),
        "(o 1 2)",
        r#"(build ("cc" "-O{o}" "main.c" "-o" "steady"))"#,
        r#"("./steady")"#,
    );
    assert!(said.contains("so each step is measured once"), "{said}");
    let decided = steps(dir.path());
    assert_eq!(decided.len(), 2);
    for step in &decided {
        let counted = &step.result.measurement.summary[&kiln_protocol::Metric::Instructions];
        assert_eq!(counted.n, 1, "{}", step.key);
    }
}

#[test]
fn a_line_filter_passes_a_program_that_prints_timings_and_catches_a_wrong_result() {
    let dir = tempfile::tempdir().unwrap();
    let bench = dir.path().join("bench-programs/timed");
    std::fs::create_dir_all(&bench).unwrap();
    // Every run prints a different timing; the `wrong` knob a different result.
    std::fs::write(
        bench.join("run.sh"),
        "echo \"took $$ us\"\nif [ \"$1\" = wrong ]; then echo 'result 43'; else echo 'result 42'; fi\n",
    )
    .unwrap();
    let config = r#"(campaign
  (name timed)
  (store "store")
  (objective (metric wall-time) (statistic median))
  (runs (warmup 0) (min 2) (max 2))
  (experiments ((benchmark timed) (search (random-walk (steps 12))) (seed 3)))
  (benchmarks
    ((name timed) (kind knobs) (knobs (mode fine also-fine wrong))
     (sources "bench-programs/timed") (run ("sh" "run.sh" "{mode}"))
     (check-output (lines "^result "))))
  (workers (local (slots 1))))
"#;
    std::fs::write(dir.path().join("campaign.sexp"), config).unwrap();
    let out = run_kiln(dir.path(), &["run", "campaign.sexp"]);
    assert!(out.status.success(), "{}", text(&out));
    let steps = steps(dir.path());
    let mode = |s: &StepRecord| s.decisions.0.values().next().unwrap().to_string();
    for s in &steps {
        let expected = if mode(s) == "wrong" {
            "wrong-output"
        } else {
            "ok"
        };
        assert_eq!(
            s.result.measurement.outcome.name(),
            expected,
            "{}: {}",
            s.key,
            mode(s)
        );
    }
    let wrong = steps
        .iter()
        .find(|s| mode(s) == "wrong")
        .expect("a wrong step");
    let path = format!("timed/0/{}", wrong.key.step);
    let shown = run_kiln(dir.path(), &["show", "store", &path]);
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(
        shown.contains("this step's checked output (its start):\n  > result 43"),
        "{shown}"
    );
    assert!(
        shown.contains("the baseline's checked output (its start):\n  > result 42"),
        "{shown}"
    );
}

/// The live (not zombie) descendants of `pid`, each as `pid: command line`.
fn descendants(pid: u32) -> Vec<(u32, String)> {
    let mut parent_of = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(p) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{p}/stat")) else {
            continue;
        };
        // Fields after the command name: state, ppid.
        let mut rest = stat[stat.rfind(')').unwrap() + 1..].split_whitespace();
        let (state, ppid) = (
            rest.next().unwrap(),
            rest.next().unwrap().parse::<u32>().unwrap(),
        );
        if state != "Z" {
            parent_of.push((p, ppid));
        }
    }
    let mut found = vec![pid];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(
            parent_of
                .iter()
                .filter(|(_, pp)| *pp == parent)
                .map(|(p, _)| *p),
        );
        i += 1;
    }
    found[1..]
        .iter()
        .filter_map(|p| {
            let cmdline = std::fs::read(format!("/proc/{p}/cmdline")).ok()?;
            Some((*p, String::from_utf8_lossy(&cmdline).replace('\0', " ")))
        })
        .collect()
}

/// Which of `processes` are still alive (and not zombies).
fn still_alive(processes: &[(u32, String)]) -> Vec<&(u32, String)> {
    processes
        .iter()
        .filter(|(p, _)| {
            std::fs::read_to_string(format!("/proc/{p}/stat"))
                .is_ok_and(|s| !s[s.rfind(')').unwrap() + 1..].trim_start().starts_with('Z'))
        })
        .collect()
}

/// Waits (at most 30 s) until `what` holds.
fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Sends SIGTERM to a running kiln and returns its exit status, stderr included.
fn terminate(child: std::process::Child) -> std::process::Output {
    stop_with(child, libc::SIGTERM)
}

/// Sends `signal` to a running kiln and returns its exit status, stderr included.
fn stop_with(mut child: std::process::Child, signal: libc::c_int) -> std::process::Output {
    // SAFETY: signals our own child, not yet reaped.
    unsafe { libc::kill(child.id() as libc::pid_t, signal) };
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        assert!(
            Instant::now() < deadline,
            "kiln did not stop on signal {signal}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// The slow campaign of `steps` steps, run until 3 are decided and then until a run hangs
/// (its runs, after `prelude`, hang while the file `hang` exists): its folder, that file, the
/// running kiln and the processes it had then.
fn hanging_campaign(
    steps: u32,
    prelude: &str,
) -> (
    tempfile::TempDir,
    std::path::PathBuf,
    std::process::Child,
    Vec<(u32, String)>,
) {
    let dir = slow_setup(steps);
    let hang = dir.path().join("hang");
    std::fs::write(
        dir.path().join("bench-programs/slow/run.sh"),
        format!(
            "{prelude}sleep 0.2\nwhile [ -e {} ]; do sleep 0.05; done\necho $1 $2\n",
            hang.display()
        ),
    )
    .unwrap();
    let child = run_until_decided(dir.path(), 3);
    std::fs::write(&hang, "").unwrap();
    let mut started = Vec::new();
    wait_for("a hanging run", || {
        started = descendants(child.id());
        started.iter().any(|(_, cmd)| cmd.contains("run.sh"))
    });
    (dir, hang, child, started)
}

#[test]
fn sigterm_during_a_step_leaves_no_process_and_the_campaign_resumes() {
    let (dir, hang, child, started) = hanging_campaign(8, "");
    let out = terminate(child);
    assert_eq!(out.status.code(), Some(143), "{}", text(&out));
    let left = still_alive(&started);
    assert!(left.is_empty(), "left behind: {left:?}");
    let log = std::fs::read_to_string(dir.path().join("store/kiln.log")).unwrap();
    assert!(
        log.contains("terminated (SIGTERM); the campaign is stored in"),
        "{log}"
    );

    let before = steps(dir.path());
    assert!(before.len() >= 3, "{}", before.len());
    std::fs::remove_file(&hang).unwrap();
    let out = run_kiln(dir.path(), &["run", "campaign.sexp"]);
    assert!(out.status.success(), "{}", text(&out));
    let after = steps(dir.path());
    assert_eq!(after.len(), 8);
    // The steps stored before the signal are kept as they were, not run again.
    assert_eq!(trajectory(&after[..before.len()]), trajectory(&before));
    assert!(before
        .iter()
        .zip(&after)
        .all(|(b, a)| b.result.started_ms == a.result.started_ms));
}

/// The live (not zombie) processes anywhere whose command line contains `needle`.
fn processes_with(needle: &str) -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.parse::<u32>().is_ok())
        })
        .filter_map(|e| {
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            let zombie = stat[stat.rfind(')')? + 1..].trim_start().starts_with('Z');
            (!zombie && cmdline.contains(needle)).then_some(cmdline)
        })
        .collect()
}

#[test]
fn sigkill_of_the_controller_leaves_no_benchmark_process_not_even_a_daemon() {
    // Each run starts a daemon (double fork into a new session), named after a unique needle;
    // steps enough that the campaign is still running when the runs start to hang.
    let needle = format!("kiln-daemon-{}-{}", std::process::id(), now_ms());
    let daemon = format!("(setsid sh -c 'sleep 300; :' {needle} &)\n");
    let (_dir, _hang, mut child, started) = hanging_campaign(40, &daemon);
    child.kill().unwrap();
    child.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !(still_alive(&started).is_empty() && processes_with(&needle).is_empty()) {
        assert!(
            Instant::now() < deadline,
            "left behind 5 s after the controller's SIGKILL: {:?} {:?}",
            still_alive(&started),
            processes_with(&needle)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Measurements of the baseline kept in the store's `references/` folder, in its one file.
fn kept_reference_measurements(store: &Path) -> usize {
    let Ok(dir) = std::fs::read_dir(store.join("references")) else {
        return 0;
    };
    dir.flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
        .filter_map(|e| {
            let kept: serde_json::Value =
                serde_json::from_slice(&std::fs::read(e.path()).ok()?).ok()?;
            Some(kept.as_array()?.len())
        })
        .sum()
}

#[test]
fn a_controller_killed_during_preparation_resumes_it() {
    let dir = slow_setup(4);
    let (count, hang) = (dir.path().join("count"), dir.path().join("hang"));
    // Every run adds a line to `count`; while `hang` exists, the third run hangs.
    std::fs::write(
        dir.path().join("bench-programs/slow/run.sh"),
        format!(
            "echo run >> {count}\nif [ -e {hang} ] && [ $(wc -l < {count}) -ge 3 ]; then sleep 300; fi\necho $1 $2\n",
            count = count.display(),
            hang = hang.display()
        ),
    )
    .unwrap();
    std::fs::write(&hang, "").unwrap();
    let mut child = kiln_cmd(dir.path())
        .args(["run", "campaign.sexp"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_for("two of the baseline's three measurements kept", || {
        kept_reference_measurements(&dir.path().join("store")) >= 2
    });
    child.kill().unwrap();
    child.wait().unwrap();
    std::fs::remove_file(&hang).unwrap();
    let out = run_kiln(dir.path(), &["run", "campaign.sexp"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("2 of 3 measurements of the baseline kept from an earlier start"),
        "{}",
        text(&out)
    );
    assert_eq!(kept_reference_measurements(&dir.path().join("store")), 3);
}

#[test]
fn ctrl_c_on_a_terminal_leaves_the_bars_and_says_each_thing_once() {
    let dir = slow_setup(400);
    let hang = dir.path().join("hang");
    std::fs::write(
        dir.path().join("bench-programs/slow/run.sh"),
        format!(
            "sleep 0.1\nwhile [ -e {} ]; do sleep 0.05; done\necho $1 $2\n",
            hang.display()
        ),
    )
    .unwrap();
    // Under `script`, kiln's stderr is a terminal: it draws its bars. A Ctrl-C typed into that
    // terminal (0x03 on script's input) interrupts it, as a person's would.
    let line = format!("{} run campaign.sexp", kiln().display());
    let mut tty = Command::new("script")
        .args(["-qfec", &line, "/dev/null"])
        .current_dir(dir.path())
        .env("KILN_WORKER", worker())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for("three steps decided", || decided(dir.path()) >= 3);
    std::fs::write(&hang, "").unwrap();
    wait_for("a hanging run", || {
        descendants(tty.id())
            .iter()
            .any(|(_, cmd)| cmd.contains("run.sh"))
    });
    let mut input = tty.stdin.take().unwrap();
    input.write_all(b"\x03").unwrap();
    input.flush().unwrap();
    let out = tty.wait_with_output().unwrap();
    drop(input);
    assert_eq!(out.status.code(), Some(130), "{}", text(&out));
    // What the terminal shows, without its cursor movements: each line as a redraw left it.
    let escapes = regex::Regex::new("\x1b\\[[0-9;]*[A-Za-z]").unwrap();
    let shown = escapes
        .replace_all(&String::from_utf8_lossy(&out.stdout), "")
        .replace("\r\n", "\n");
    let lines: Vec<&str> = shown
        .lines()
        .map(|l| l.rsplit('\r').next().unwrap_or(l))
        .collect();
    // One line says what was abandoned, right under the bar, which stays where the chain got
    // to with nothing printed onto it; the error says why once.
    let abandoned: Vec<usize> = (0..lines.len())
        .filter(|i| lines[*i].contains("steps abandoned in flight"))
        .collect();
    assert!(
        abandoned.len() == 1 && lines[abandoned[0]].starts_with("kiln: steps abandoned"),
        "{shown}"
    );
    let bar = lines[abandoned[0] - 1];
    assert!(
        bar.contains("slow/chain 0") && bar.contains("eta") && !bar.contains("kiln"),
        "{bar:?} in {shown}"
    );
    assert_eq!(
        lines.get(abandoned[0] + 1).copied(),
        Some("kiln: error: interrupted; the campaign is stored in store and `kiln run` resumes it"),
        "{shown}"
    );
    assert_eq!(
        shown.matches("the campaign is stored in").count(),
        1,
        "{shown}"
    );
    std::fs::remove_file(&hang).unwrap();
}

/// The summary block a campaign's kiln.log ends with: from `campaign NAME ENDING` on, what
/// `kiln run` printed and the `kiln status` table, each line a log line.
fn summary_block(dir: &Path, ending: &str) -> String {
    let log = std::fs::read_to_string(dir.join("store/kiln.log")).unwrap();
    let start = log
        .rfind(&format!("campaign slow {ending}"))
        .unwrap_or_else(|| panic!("no `campaign slow {ending}` in the log:\n{log}"));
    let block = &log[start..];
    for header in [
        "experiment slow (benchmark slow):",
        "best of chain 0",
        "chain  steps",
    ] {
        assert!(block.contains(header), "{header:?} in {block}");
    }
    assert!(block.lines().count() > 8, "{block}");
    block.to_string()
}

/// kiln.log tells the story to one who reads only it: a progress line per chain at least every
/// `--progress-every` seconds and, at the end, the summary block, on a terminal (bars on
/// stderr) as off it.
#[test]
fn a_campaigns_log_ends_with_its_summary_on_a_terminal_and_off_it() {
    let off = slow_setup(6);
    let out = run_kiln(
        off.path(),
        &["run", "--progress-every", "0.3", "campaign.sexp"],
    );
    assert!(out.status.success(), "{}", text(&out));
    let block = summary_block(off.path(), "finished");
    assert!(block.contains("6/6"), "{block}");

    let on = slow_setup(6);
    let line = format!(
        "{} run --progress-every 0.3 campaign.sexp",
        kiln().display()
    );
    let out = Command::new("script")
        .args(["-qfec", &line, "/dev/null"])
        .current_dir(on.path())
        .env("KILN_WORKER", worker())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("slow/chain 0"),
        "bars drawn: {}",
        text(&out)
    );
    summary_block(on.path(), "finished");
    let log = std::fs::read_to_string(on.path().join("store/kiln.log")).unwrap();
    let progress = log.matches("slow/chain 0: step ").count();
    assert!(progress >= 2, "progress lines in the log under bars: {log}");
}

#[test]
fn sigint_during_a_step_exits_130_records_the_abandoned_step_and_resumes() {
    let (dir, hang, child, _) = hanging_campaign(8, "");
    let out = stop_with(child, libc::SIGINT);
    assert_eq!(out.status.code(), Some(130), "{}", text(&out));
    let log = std::fs::read_to_string(dir.path().join("store/kiln.log")).unwrap();
    assert!(
        log.contains("steps abandoned in flight: slow/chain 0/step "),
        "{log}"
    );
    assert!(
        log.contains("interrupted; the campaign is stored in"),
        "{log}"
    );
    let block = summary_block(dir.path(), "stopped: interrupted");
    assert!(block.contains("/8"), "{block}");
    let before = steps(dir.path());
    std::fs::remove_file(&hang).unwrap();
    let out = run_kiln(dir.path(), &["run", "campaign.sexp"]);
    assert!(out.status.success(), "{}", text(&out));
    summary_block(dir.path(), "finished");
    // The resume says where it resumes.
    let resuming = format!("{} of 8 steps decided", before.len());
    assert!(
        !before.is_empty() && text(&out).contains(&resuming),
        "{resuming}: {}",
        text(&out)
    );
    let after = steps(dir.path());
    assert_eq!(after.len(), 8);
    // Nothing of the abandoned step was stored as a measurement: the stored prefix is kept.
    assert_eq!(trajectory(&after[..before.len()]), trajectory(&before));
}

/// A folder whose `bench-programs/slow-build` builds for five minutes: a build
/// to stop.
fn slow_build_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let sources = dir.path().join("bench-programs/slow-build");
    std::fs::create_dir_all(&sources).unwrap();
    std::fs::write(sources.join("build.sh"), "sleep 300\n").unwrap();
    dir
}

/// A signal stops `kiln policy` as a whole, with its status: not only the
/// benchmark it was measuring (which it used to report failed before going
/// on to the next, so that Ctrl-C and SIGTERM never ended it).
#[test]
fn a_signal_stops_kiln_policy_not_only_its_benchmark() {
    let dir = slow_build_dir();
    let benchmark = |name: &str| {
        format!(
            "(({name}) (kind llvm-inline) (compiler clang) (sources \"bench-programs/slow-build\")
             (build (\"sh\" \"build.sh\")) (run (\"./bench\")))"
        )
        .replace("((", "((name ")
    };
    let config = format!(
        "(campaign (name p) (store \"store\")
           (experiments ((benchmark one) (search (random-walk (steps 2)))))
           (benchmarks {} {})
           (workers (local (slots 1))))",
        benchmark("one"),
        benchmark("two")
    );
    std::fs::write(dir.path().join("campaign.sexp"), config).unwrap();
    let child = kiln_cmd(dir.path())
        .args(["policy", "campaign.sexp", "stock"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for("the first discovery build", || {
        descendants(child.id())
            .iter()
            .any(|(_, cmd)| cmd.contains("sleep 300"))
    });
    let out = stop_with(child, libc::SIGINT);
    assert_eq!(out.status.code(), Some(130), "{}", text(&out));
    assert!(!text(&out).contains("two: policy"), "{}", text(&out));
}

#[test]
fn sigterm_during_discovery_leaves_no_process_behind() {
    let dir = slow_build_dir();
    std::fs::write(
        dir.path().join("campaign.sexp"),
        r#"(campaign
  (name slow-build)
  (store "store")
  (experiments ((benchmark slow-build) (search (random-walk (steps 2)))))
  (benchmarks
    ((name slow-build) (kind llvm-inline) (compiler clang) (sources "bench-programs/slow-build")
     (build ("sh" "build.sh")) (run ("./bench"))))
  (workers (local (slots 1))))
"#,
    )
    .unwrap();
    let child = kiln_cmd(dir.path())
        .args(["sites", "campaign.sexp", "slow-build"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut started = Vec::new();
    wait_for("the discovery build", || {
        started = descendants(child.id());
        started.iter().any(|(_, cmd)| cmd.contains("sleep 300"))
    });
    let out = terminate(child);
    assert_eq!(out.status.code(), Some(143), "{}", text(&out));
    assert!(
        text(&out).contains("terminated (SIGTERM) during discovery"),
        "{}",
        text(&out)
    );
    let left = still_alive(&started);
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn an_experiment_whose_first_steps_all_fail_alike_stops_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let bench = dir.path().join("bench-programs/picky");
    std::fs::create_dir_all(&bench).unwrap();
    // Only the stock tile size works: every proposal moves it, and fails alike.
    std::fs::write(
        bench.join("run.sh"),
        "[ \"$1\" = 8 ] || { echo \"unsupported tile $1\" >&2; echo 'fatal: no kernel for this tile' >&2; exit 3; }\necho ok\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("campaign.sexp"),
        r#"(campaign
  (name picky)
  (store "store")
  (runs (warmup 0) (min 1) (max 1))
  (experiments ((benchmark picky) (search (random-walk (steps 200))) (chains 2) (seed 3)))
  (benchmarks
    ((name picky) (kind knobs) (sources "bench-programs/picky")
     (knobs (tile 8 16 32 64)) (run ("sh" "run.sh" "{tile}"))))
  (workers (local (slots 2))))
"#,
    )
    .unwrap();
    let out = run_kiln(dir.path(), &["run", "campaign.sexp"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let why =
        "its first 5 steps all failed alike (run failed (exit 3): fatal: no kernel for this tile)";
    assert!(
        text(&out).contains("experiment picky stopped: chain "),
        "{}",
        text(&out)
    );
    assert!(text(&out).contains(why), "{}", text(&out));
    let decided = steps(dir.path());
    assert!(decided.len() <= 10, "{} steps spent", decided.len());
    assert!(decided
        .iter()
        .all(|s| s.result.measurement.outcome.name() == "run-failed"));
    let status = run_kiln(dir.path(), &["status", "store"]);
    let shown = String::from_utf8_lossy(&status.stdout).to_string();
    assert!(shown.contains("picky/chain 0 stopped at step "), "{shown}");
    assert!(shown.contains("picky/chain 1 stopped at step "), "{shown}");
    // The campaign is over, and says its chains did not run their budget.
    assert!(
        shown.contains("finished, 2 of 2 chains stopped early"),
        "{shown}"
    );
    // Resuming does not spend more steps on it.
    let again = run_kiln(dir.path(), &["run", "campaign.sexp"]);
    assert_eq!(again.status.code(), Some(1), "{}", text(&again));
    assert_eq!(steps(dir.path()).len(), decided.len());
}

#[test]
fn two_experiments_prepare_at_the_same_time_on_a_two_slot_worker() {
    let dir = slow_setup(2);
    // Two experiments of the slow benchmark: each measures its baseline three times (0.2 s
    // each). One after the other, the first's third measurement would run alone.
    let config = slow_config(2)
        .replace(
            "(experiments ((benchmark slow) (search (simulated-annealing (steps 2))) (seed 1)))",
            "(experiments ((name one) (benchmark slow) (search (simulated-annealing (steps 2))))
               ((name two) (benchmark slow) (search (simulated-annealing (steps 2)))))",
        )
        .replace("(slots 1)", "(slots 2)");
    assert!(config.contains("(name two)"));
    std::fs::write(dir.path().join("campaign.sexp"), config).unwrap();
    let out = run_kiln(dir.path(), &["run", "campaign.sexp"]);
    assert!(out.status.success(), "{}", text(&out));
    // Each experiment's baseline measurements are kept in a file of their own.
    let spans: Vec<Vec<(u64, u64)>> = std::fs::read_dir(dir.path().join("store/references"))
        .unwrap()
        .flatten()
        .map(|e| {
            let kept: serde_json::Value =
                serde_json::from_slice(&std::fs::read(e.path()).unwrap()).unwrap();
            kept.as_array()
                .unwrap()
                .iter()
                .map(|r| {
                    (
                        r["started_ms"].as_u64().unwrap(),
                        r["finished_ms"].as_u64().unwrap(),
                    )
                })
                .collect()
        })
        .collect();
    assert_eq!(spans.len(), 2, "{spans:?}");
    assert!(spans.iter().all(|s| s.len() == 3), "{spans:?}");
    let overlap = spans[0]
        .iter()
        .any(|a| spans[1].iter().any(|b| a.0 < b.1 && b.0 < a.1));
    assert!(
        overlap,
        "the experiments prepared one after the other: {spans:?}"
    );
    assert_eq!(steps(dir.path()).len(), 4);
}

/// A guided chain screens points one flip away from the stock set: the `effects` export has a
/// row per screened point whose effect is the screening step's time ratio less one, exact
/// (callgrind), and the step's own features.
#[test]
fn screened_flips_export_as_exact_effects() {
    if !have_valgrind() {
        return crate::common::skip("valgrind is not installed (callgrind is the objective)");
    }
    let dir = setup(&synthetic_config_proposing(16, 11, 2, "guided"));
    let out = run_kiln(dir.path(), &["run", "campaign.sexp"]);
    assert!(out.status.success(), "{}", text(&out));
    let all = steps(dir.path());
    let screens: Vec<&StepRecord> = all.iter().filter(|s| s.kind == StepKind::Screen).collect();
    assert!(!screens.is_empty());
    let export = run_kiln(
        dir.path(),
        &["export", "store", "--table", "effects", "--format", "jsonl"],
    );
    assert!(export.status.success(), "{}", text(&export));
    let rows: Vec<serde_json::Value> = String::from_utf8_lossy(&export.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let store = Store::open(&dir.path().join("store")).unwrap();
    let info = store.experiment("synthetic").unwrap().unwrap();
    for s in &screens {
        let diff = s.decisions.diff_from(&info.discovery.baseline);
        let (site, value) = diff.0.iter().next().unwrap();
        let row = rows
            .iter()
            .find(|r| r["site"] == site.as_str() && r["value"] == value.to_string())
            .unwrap_or_else(|| panic!("no effect row for {site} = {value}: {rows:?}"));
        let expected = info.time_ratio(s.objective.unwrap()).unwrap() - 1.0;
        assert!(
            (row["effect"].as_f64().unwrap() - expected).abs() < 1e-12,
            "{row}"
        );
        assert_eq!(row["exact"], true);
        assert_eq!(row["std_error"], serde_json::Value::Null);
    }
}

/// A screening search flips one point alone per step, every point once before any twice, and
/// never moves from its start: each step is one flip from the stock set, an effects row each.
#[test]
fn screening_flips_each_point_alone_from_the_start() {
    if !have_valgrind() {
        return crate::common::skip("valgrind is not installed (callgrind is the objective)");
    }
    let dir = setup(&synthetic_config_searching(
        12,
        5,
        2,
        "(screening (steps 12))",
    ));
    let out = run_kiln(dir.path(), &["run", "campaign.sexp"]);
    assert!(out.status.success(), "{}", text(&out));
    let store = Store::open(&dir.path().join("store")).unwrap();
    let info = store.experiment("synthetic").unwrap().unwrap();
    let all: Vec<StepRecord> = store.steps(None).map(Result::unwrap).collect();
    assert_eq!(all.len(), 12);
    let flipped: Vec<String> = all
        .iter()
        .map(|s| {
            assert_eq!(s.kind, StepKind::Screen);
            assert!(
                !s.decision.as_ref().unwrap().accepted,
                "screening never moves"
            );
            let diff = s.decisions.diff_from(&info.discovery.baseline);
            assert_eq!(diff.0.len(), 1, "{}", s.key);
            diff.0.keys().next().unwrap().to_string()
        })
        .collect();
    let first: std::collections::BTreeSet<&String> = flipped[..10].iter().collect();
    assert_eq!(first.len(), 10, "every knob once first: {flipped:?}");
    assert_eq!(flipped[10..], flipped[..2], "then from the first again");
}

/// A package that ships a generated file newer than its source (a parser
/// made by yacc, as bc ships `bc.c` beside `bc.y`) builds as shipped: the
/// worker's copy keeps every file's time, so make does not try to run a
/// generator the machine lacks. Every step builds, in discovery's copy and
/// the steps'.
#[test]
fn a_shipped_generated_file_stays_newer_than_its_source_in_the_workers_copy() {
    if !have("make") || !have("cc") {
        return skip("needs make and cc");
    }
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(&src).unwrap();
    let files = [
        // No generator here: make must find gen.c up to date.
        (
            "Makefile",
            "bench: gen.c\n\tcc -O1 gen.c -o bench\ngen.c: gen.y\n\techo no yacc here >&2; exit 127\n",
        ),
        ("gen.y", "%%\n"),
        ("gen.c", "#include <stdio.h>\nint main(int c, char **v) { printf(\"%s\\n\", v[1]); return 0; }\n"),
    ];
    for (name, contents) in files {
        std::fs::write(src.join(name), contents).unwrap();
    }
    let at = |name: &str, secs: u64| {
        let time = std::time::UNIX_EPOCH + Duration::from_secs(secs);
        std::fs::File::options()
            .write(true)
            .open(src.join(name))
            .unwrap()
            .set_modified(time)
            .unwrap();
    };
    at("Makefile", 1_000_000_000);
    at("gen.y", 1_000_000_000);
    at("gen.c", 1_000_000_100);
    let config = r#"(campaign
  (name shipped)
  (store "store")
  (experiments ((benchmark b) (search (random-walk (steps 3)))))
  (benchmarks
    ((name b) (kind knobs) (knobs (n 1 2)) (sources "src")
     (build ("sh" "-c" "test \"$(stat -c %Y gen.c)\" = 1000000100 && make"))
     (run ("./bench" "{n}")) (check-output none) (timeout-s 30)))
  (workers (local (slots 1))))
"#;
    std::fs::write(dir.path().join("c.sexp"), config).unwrap();
    let out = run_kiln(dir.path(), &["run", "c.sexp"]);
    assert!(out.status.success(), "{}", text(&out));
    let store = Store::open(&dir.path().join("store")).unwrap();
    let steps: Vec<StepRecord> = store.steps(None).map(Result::unwrap).collect();
    assert!(!steps.is_empty());
    for step in &steps {
        assert_eq!(
            step.result.measurement.outcome.name(),
            "ok",
            "{:?}",
            step.result
        );
    }
}

/// The controller stopped (SIGSTOP, as a suspended VM or a stalled login node) mid-step for
/// longer than the loss timeout: on SIGCONT it hears its worker out before it blames it: no
/// worker lost, no job re-queued, every step measured once.
#[test]
fn a_controller_stopped_past_the_loss_timeout_blames_no_worker() {
    let steps = 3;
    // Each step runs 4 s: the one in flight says nothing while the controller is stopped.
    let dir = slow_setup_of(steps, "4");
    let config = slow_config(steps).replace(
        "(runs (warmup 0) (min 1) (max 1))",
        "(runs (warmup 0) (min 1) (max 1))\n  (timeouts (heartbeat-s 0.5) (lost-after-s 2))",
    );
    std::fs::write(dir.path().join("campaign.sexp"), config).unwrap();
    let mut child = run_until_decided(dir.path(), 1);
    std::thread::sleep(Duration::from_millis(500));
    let pid = child.id() as libc::pid_t;
    unsafe { libc::kill(pid, libc::SIGSTOP) };
    std::thread::sleep(Duration::from_secs(3));
    unsafe { libc::kill(pid, libc::SIGCONT) };
    assert!(
        child.wait().unwrap().success(),
        "{}",
        diagnostics(dir.path())
    );
    assert_every_step_once(dir.path(), steps as usize);
    let log = std::fs::read_to_string(dir.path().join("store/kiln.log")).unwrap();
    assert!(!log.contains("no answer for"), "{log}");
    assert!(!requeued_from(dir.path(), "local"), "{log}");
}

/// The worker's slots removed mid-step, its bundles left: the step in flight, whose run then
/// fails (its folder is gone), is the environment's failure, not its decisions': the worker is
/// prepared again, the step measured again, and no step of the store failed.
#[test]
fn a_step_whose_slot_was_removed_under_it_is_measured_again_not_failed() {
    let steps = 6;
    let dir = slow_setup_of(steps, "1");
    std::fs::write(
        dir.path().join("bench-programs/slow/run.sh"),
        "sleep 1\ncat run.sh >/dev/null || exit 3\necho $1 $2\n",
    )
    .unwrap();
    let child = run_until_decided(dir.path(), 2);
    wait_for("a run in flight", || {
        descendants(child.id())
            .iter()
            .any(|(_, cmd)| cmd.contains("run.sh"))
    });
    finishes_after_removing(
        dir.path(),
        child,
        "store/workers/local/slots",
        steps,
        "was removed or replaced during the step",
    );
}

/// Removes `folder` (under `dir`) while the campaign `child` runs: it ends by itself, every one
/// of its `steps` measured once and none failed, and its log says `said`.
fn finishes_after_removing(dir: &Path, mut child: Child, folder: &str, steps: u32, said: &str) {
    std::fs::remove_dir_all(dir.join(folder)).unwrap();
    assert!(child.wait().unwrap().success(), "{}", diagnostics(dir));
    let all = assert_every_step_once(dir, steps as usize);
    assert!(all.iter().all(|s| s.objective.is_some()), "{all:#?}");
    let log = std::fs::read_to_string(dir.join("store/kiln.log")).unwrap();
    assert!(log.contains(said), "{log}");
}

/// The worker's folder removed mid-campaign (a temporary-files cleaner, a reimaged worker, a
/// tmpfs after a reboot): the worker, which then lacks the campaign's bundle, is sent it
/// again and the campaign goes on to its end, every step measured once and none failed.
#[test]
fn a_worker_whose_folder_was_removed_is_prepared_again() {
    let steps = 8;
    let dir = slow_setup_of(steps, "1");
    let child = run_until_decided(dir.path(), 2);
    finishes_after_removing(
        dir.path(),
        child,
        "store/workers/local",
        steps,
        "it is sent again",
    );
}

#[test]
fn a_decision_set_measured_before_a_resume_is_not_measured_again_after_it() {
    let config = two_knob_config(12, "instructions", "(warmup 0) (min 1) (max 1)");
    let Some(got) = resumes_exactly(setup, &config, 24) else {
        return;
    };
    let measured: Vec<ContentHash> = got
        .iter()
        .filter(|s| s.cached_from.is_none())
        .map(|s| s.decision_hash)
        .collect();
    let mut sets = measured.clone();
    sets.sort();
    sets.dedup();
    assert_eq!(sets.len(), measured.len(), "a set was measured again");
    assert!(measured.len() < got.len(), "no step reused a measurement");
}

/// A campaign of several programs steps the first one while it prepares the others: on one
/// slot, the first program's first step is measured before the last program's discovery is
/// kept, and, the discoveries known, before the last program's references are (every
/// preparation job first, it would come after all of them).
#[test]
fn a_campaign_of_several_programs_steps_the_first_before_it_prepares_the_last() {
    if !have("clang") || !have_valgrind() {
        skip("clang or valgrind is not installed (inlining sites, callgrind's counts)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (mut benchmarks, mut experiments) = (String::new(), String::new());
    for k in 0..3 {
        let sources = dir.path().join(format!("p{k}"));
        std::fs::create_dir_all(&sources).unwrap();
        let program = format!(
            "static int f(int x) {{ return x * {} + (x >> 2); }}\n\
             int main(int argc, char **argv) {{\n  int s = 0;\n  \
             for (int i = 0; i < 100000; i++) s += f(i + argc);\n  return s == 7;\n}}\n",
            k + 3
        );
        std::fs::write(sources.join("main.c"), program).unwrap();
        benchmarks += &format!(
            "((name p{k}) (kind llvm-inline) (compiler clang) (sources \"p{k}\")
              (build (\"clang\" \"-O2\" \"-g\" \"main.c\" \"-o\" \"bench\")) (run (\"./bench\")))\n"
        );
        experiments += &format!("((benchmark p{k}) (search (random-walk (steps 2))) (seed 1))\n");
    }
    let config = format!(
        "(campaign (name several) (store \"store\")
           (objective (metric instructions) (statistic median))
           (runs (warmup 0) (min 1) (max 1))
           (experiments {experiments})
           (benchmarks {benchmarks})
           (workers (local (slots 1))))"
    );
    std::fs::write(dir.path().join("campaign.sexp"), config).unwrap();
    let out = run_kiln(dir.path(), &["run", "campaign.sexp"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_first_step_before_last_kept(dir.path(), "discoveries", 3);
    // Again in a new store, the discoveries kept: every program's references are asked for at
    // once (a file each for the baseline and inlining nothing), and the first program's steps
    // still come before the last program's references.
    let out = run_kiln(dir.path(), &["run", "--force-new", "campaign.sexp"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_first_step_before_last_kept(dir.path(), "references", 3 * 2);
}

/// Experiment p0's first step was recorded before the last of the `n` files the store keeps in
/// its folder `kept` (discoveries, references) was written.
fn assert_first_step_before_last_kept(dir: &Path, kept: &str, n: usize) {
    let first_step = crate::common::campaign::stored_steps(dir)
        .iter()
        .filter(|s| s.key.experiment == "p0")
        .map(|s| s.recorded_ms)
        .min()
        .expect("p0 measured steps");
    let written: Vec<u64> = std::fs::read_dir(dir.join("store").join(kept))
        .unwrap()
        .map(|e| {
            let modified = e.unwrap().metadata().unwrap().modified().unwrap();
            modified
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_millis() as u64
        })
        .collect();
    assert_eq!(written.len(), n, "{kept}: {written:?}");
    let last = *written.iter().max().unwrap();
    assert!(
        first_step < last,
        "p0's first step at {first_step}, the last of {kept} kept at {last}"
    );
}
