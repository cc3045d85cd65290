//! Campaigns over many programs (issue 32): one broken program stops its own experiment only,
//! and programs come and go between runs without touching recorded steps.

use std::path::Path;

use crate::common::campaign::{diagnostics, serial, start_campaign, stored_steps};
use crate::common::{run_kiln, text, worker};

/// A knob program `name` whose run sleeps 0.1 s and prints its knob; with `broken`, every run
/// exits 1 (its baseline fails).
fn program(dir: &Path, name: &str, broken: bool) {
    let src = dir.join(name);
    std::fs::create_dir_all(&src).unwrap();
    let fail = if broken {
        "echo broken >&2; exit 1\n"
    } else {
        ""
    };
    std::fs::write(src.join("run.sh"), format!("{fail}sleep 0.1\necho $1\n")).unwrap();
}

/// A campaign of one random-walk experiment of `steps` steps per program.
fn config(programs: &[&str], steps: u32) -> String {
    let experiments: String = programs
        .iter()
        .map(|p| {
            format!(
                "((name {p}) (benchmark {p}) (search (random-walk (steps {steps}))) (seed 1))\n"
            )
        })
        .collect();
    let benchmarks: String = programs
        .iter()
        .map(|p| {
            format!(
                "((name {p}) (kind knobs) (sources \"{p}\") (knobs (k 0 1 2 3)) \
                 (run (\"sh\" \"run.sh\" \"{{k}}\")) (timeout-s 10))\n"
            )
        })
        .collect();
    format!(
        r#"(campaign
  (name corpus)
  (store "store")
  (objective (metric wall-time) (statistic median))
  (runs (warmup 0) (min 1) (max 1))
  (experiments {experiments})
  (benchmarks {benchmarks})
  (workers (local (slots 2))))
"#
    )
}

/// Three programs, one whose baseline fails: the other two finish, the failure is reported by
/// `kiln run` (exit 1) and `kiln status`; run again with a fourth program added, every step
/// recorded before stays as it was and the new program's steps join them.
#[test]
fn a_broken_program_stops_its_own_experiment_and_programs_can_be_added() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    for (name, broken) in [("alpha", false), ("broken", true), ("gamma", false)] {
        program(dir.path(), name, broken);
    }
    let campaign = dir.path().join("campaign.sexp");
    std::fs::write(&campaign, config(&["alpha", "broken", "gamma"], 6)).unwrap();
    let first = run_kiln(dir.path(), &["run", "campaign.sexp"]);
    let said = text(&first);
    assert_eq!(first.status.code(), Some(1), "{said}");
    assert!(
        said.contains("experiment broken") && said.contains("baseline failed"),
        "{said}"
    );
    let steps = stored_steps(dir.path());
    let of = |steps: &[kiln_controller::store::StepRecord], e: &str| {
        steps.iter().filter(|s| s.key.experiment == e).count()
    };
    assert_eq!(
        (
            of(&steps, "alpha"),
            of(&steps, "gamma"),
            of(&steps, "broken")
        ),
        (6, 6, 0)
    );

    let status = run_kiln(dir.path(), &["status", "store"]);
    let shown = text(&status);
    assert!(shown.contains("experiment broken not prepared"), "{shown}");
    assert!(shown.contains("1 experiment failed to prepare"), "{shown}");

    // A fourth program joins; the broken one is tried again and fails again.
    program(dir.path(), "delta", false);
    std::fs::write(&campaign, config(&["alpha", "broken", "gamma", "delta"], 6)).unwrap();
    let child = start_campaign(dir.path(), &worker());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", diagnostics(dir.path()));
    let again = stored_steps(dir.path());
    assert_eq!(of(&again, "delta"), 6, "{}", diagnostics(dir.path()));
    for before in &steps {
        let now = again
            .iter()
            .find(|s| s.key == before.key)
            .expect("a recorded step is kept");
        assert_eq!(
            (now.decision_hash, now.objective, now.recorded_ms),
            (before.decision_hash, before.objective, before.recorded_ms)
        );
    }
    // Removing a program leaves its steps in the store.
    std::fs::write(&campaign, config(&["alpha", "delta"], 6)).unwrap();
    let third = run_kiln(dir.path(), &["run", "campaign.sexp"]);
    assert!(third.status.success(), "{}", text(&third));
    assert_eq!(of(&stored_steps(dir.path()), "gamma"), 6);
}

/// A program whose experiment never got past its baseline may be mended in the config (here its
/// run command): the campaign resumes and measures it. A program already measured may not change.
#[test]
fn a_program_never_prepared_may_be_mended_but_a_measured_one_may_not_change() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    program(dir.path(), "alpha", false);
    program(dir.path(), "broken", true);
    std::fs::write(dir.path().join("broken/mended.sh"), "echo $1\n").unwrap();
    let campaign = dir.path().join("campaign.sexp");
    let first = config(&["alpha", "broken"], 3);
    std::fs::write(&campaign, &first).unwrap();
    let out = run_kiln(dir.path(), &["run", "campaign.sexp"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));

    let broken_run = r#"(sources "broken") (knobs (k 0 1 2 3)) (run ("sh" "run.sh""#;
    assert!(first.contains(broken_run), "{first}");
    let mended = first.replace(broken_run, &broken_run.replace("run.sh", "mended.sh"));
    std::fs::write(&campaign, &mended).unwrap();
    let out = run_kiln(dir.path(), &["run", "campaign.sexp"]);
    assert!(out.status.success(), "{}", text(&out));
    let steps = stored_steps(dir.path());
    let broken = steps
        .iter()
        .filter(|s| s.key.experiment == "broken")
        .count();
    assert_eq!(broken, 3, "{}", text(&out));

    let changed = mended.replacen("(timeout-s 10)", "(timeout-s 11)", 1);
    std::fs::write(&campaign, changed).unwrap();
    let refused = run_kiln(dir.path(), &["run", "campaign.sexp"]);
    assert!(!refused.status.success());
    let said = text(&refused);
    assert!(
        said.contains("benchmark alpha: timeout-s: 10.0 -> 11.0"),
        "{said}"
    );
}
