//! `kiln rewards` on real campaigns: rewards of a benchmark whose per-knob
//! effects are known, verified by measurement; and a benchmark whose cost does
//! not depend on its knobs, where kiln refuses to trust the model.

use std::path::Path;

use crate::common::{copy_benchmark, have_valgrind, run_kiln, skip, text};
use kiln_controller::store::layout::{rewards_best_file, rewards_proposal_file};
use kiln_protocol::DecisionFile;

/// The synthetic benchmark's knobs x2..x9 (x0 and x1 held at 0, leaving out
/// their interaction), so the cost is a sum of per-knob effects:
/// 300 × (200 − 25·x2 + 15·x3 − 10·x4 + 40·x5 − 5·x6 + 20·x7 − 18·x8 + 8·x9)
/// loop iterations (bench-programs/synthetic/README.md).
const KNOBS: [(&str, f64); 8] = [
    ("x2", -25.0),
    ("x3", 15.0),
    ("x4", -10.0),
    ("x5", 40.0),
    ("x6", -5.0),
    ("x7", 20.0),
    ("x8", -18.0),
    ("x9", 8.0),
];

/// A campaign of two chains of random walks (one flip a step, `steps` steps, seed `seed`) over
/// the binary `knobs` of benchmark `name`, built by `build` in `sources` and run as `run`, with
/// callgrind's exact instruction count as the objective.
fn walk_config(
    name: &str,
    knobs: &[&str],
    (sources, build, run): (&str, &str, &str),
    steps: u32,
    seed: u64,
) -> String {
    let knobs: String = knobs.iter().map(|k| format!(" ({k} 0 1)")).collect();
    format!(
        r#"(campaign
  (name {name})
  (store "store")
  (objective (metric instructions) (statistic median))
  (runs (warmup 0) (min 1) (max 1))
  (experiments
    ((benchmark {name}) (search (random-walk (steps {steps}) (flips 1))) (chains 2) (seed {seed})
     (parallel 2)))
  (benchmarks
    ((name {name}) (kind knobs) (knobs{knobs})
     (sources "{sources}") (build {build}) (run {run})
     (check-output none) (timeout-s 30)))
  (workers (local (slots 2))))
"#
    )
}

/// [`walk_config`] over the synthetic benchmark's knobs [`KNOBS`]; `passed` is whether the
/// knobs reach the program (if not, its cost does not depend on them).
fn synthetic_walk(steps: u32, passed: bool) -> String {
    let names: Vec<&str> = KNOBS.iter().map(|(k, _)| *k).collect();
    let args: String = names
        .iter()
        .map(|k| {
            if passed {
                format!(" \"{{{k}}}\"")
            } else {
                " \"0\"".into()
            }
        })
        .collect();
    let run = format!(r#"("./bench" "0" "0"{args} "300")"#);
    let build = r#"("cc" "-O1" "main.c" "-o" "bench")"#;
    walk_config(
        "synthetic",
        &names,
        ("bench-programs/synthetic", build, &run),
        steps,
        3,
    )
}

/// A scratch folder where `config` has run to its end, after `setup` laid out its sources.
fn campaign(config: &str, setup: impl FnOnce(&Path)) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    setup(dir.path());
    std::fs::write(dir.path().join("campaign.sexp"), config).unwrap();
    let out = run_kiln(dir.path(), &["-q", "run", "campaign.sexp"]);
    assert!(out.status.success(), "{}", text(&out));
    dir
}

/// Lays out a benchmark folder `name` holding one file.
fn source(name: &'static str, file: &'static str, text: &'static str) -> impl FnOnce(&Path) {
    move |dir| {
        std::fs::create_dir_all(dir.join(name)).unwrap();
        std::fs::write(dir.join(name).join(file), text).unwrap();
    }
}

/// `kiln rewards store ARGS --json`, which must succeed.
fn rewards_json(dir: &Path, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["rewards", "store", "--json"];
    all.extend_from_slice(args);
    let out = run_kiln(dir, &all);
    assert!(out.status.success(), "{}", text(&out));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)))
}

#[test]
fn rewards_recover_known_effects_and_the_verified_best_file_is_no_worse_than_the_best_step() {
    if !have_valgrind() {
        return skip("valgrind is not installed (callgrind is the deterministic objective)");
    }
    let dir = campaign(&synthetic_walk(40, true), |d| {
        copy_benchmark("synthetic", d)
    });
    let json = rewards_json(dir.path(), &[]);
    let e = &json["experiments"][0];
    assert_eq!(e["experiment"], "synthetic", "{e}");
    assert_eq!(e["trusted"], true, "{e}");
    assert!(e["cv_r2"].as_f64().unwrap() > 0.9, "{e}");
    // Every knob's reward of 1 (against stock 0) has the sign of its benefit, beyond its error.
    for (knob, effect) in KNOBS {
        let reward = e["rewards"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["site"] == knob && r["value"] == "1")
            .unwrap_or_else(|| panic!("no reward for {knob} = 1: {e}"));
        assert_eq!(reward["status"], "fitted", "{reward}");
        let (r, se) = (
            reward["reward"].as_f64().unwrap(),
            reward["std_error"].as_f64().unwrap(),
        );
        // An added cost is a loss of benefit.
        assert_eq!(r > 0.0, effect < 0.0, "{knob}: effect {effect}, reward {r}");
        assert!(r.abs() > 2.0 * se, "{knob}: reward {r} ± {se}");
    }
    // Measured against stock and the best step: the proposal is no worse than either.
    let v = &e["verification"];
    assert_eq!(v["rounds"], 1, "{v}");
    assert_eq!(v["worker"], "local", "{v}");
    assert!(v["proposal_to_best_step"].as_f64().unwrap() <= 1.0, "{v}");
    assert!(v["proposal_to_stock"].as_f64().unwrap() < 1.0, "{v}");
    assert_eq!(e["verdict"], "best", "{e}");
    let best = rewards_best_file(Path::new("store/rewards"), "synthetic");
    assert_eq!(e["best_file"], best.display().to_string(), "{e}");
    let best = dir.path().join(best);
    // The best file holds the known optimum: every knob that lowers the cost on.
    let file = DecisionFile::read(&best).unwrap();
    assert_eq!(file.benchmark.as_deref(), Some("synthetic"));
    for (knob, effect) in KNOBS {
        let value = file.set.get(&knob.into()).unwrap().to_string();
        assert_eq!(value == "1", effect < 0.0, "{knob} = {value}");
    }

    // The text names the measured ratios and the file.
    let out = run_kiln(dir.path(), &["rewards", "store"]);
    let said = String::from_utf8_lossy(&out.stdout);
    eprintln!("{said}");
    assert!(said.contains("proposal / best step"), "{said}");
    assert!(said.contains("best decisions: "), "{said}");

    // --no-verify measures nothing and labels the proposal unverified, never best.
    let json = rewards_json(dir.path(), &["--no-verify"]);
    let e = &json["experiments"][0];
    assert_eq!(e["verdict"], "unverified", "{e}");
    assert!(e["best_file"].is_null(), "{e}");
    assert!(e["verification"].is_null(), "{e}");
    assert!(
        !best.exists(),
        "the earlier best file outlived an unverified run"
    );
    let proposal = rewards_proposal_file(&dir.path().join("store/rewards"), "synthetic");
    let labelled = std::fs::read_to_string(proposal).unwrap();
    assert!(
        labelled.starts_with("; the model's proposal for synthetic: unverified"),
        "{labelled}"
    );
}

#[test]
fn rewards_of_knobs_that_do_not_change_the_cost_are_not_trusted_and_write_no_best_file() {
    if !have_valgrind() {
        return skip("valgrind is not installed (callgrind is the deterministic objective)");
    }
    let dir = campaign(&synthetic_walk(15, false), |d| {
        copy_benchmark("synthetic", d)
    });
    let json = rewards_json(dir.path(), &[]);
    let e = &json["experiments"][0];
    assert_eq!(e["trusted"], false, "{e}");
    assert_eq!(e["verdict"], "untrusted", "{e}");
    assert!(
        e["distrust"]
            .as_str()
            .unwrap()
            .contains("measured the same"),
        "{e}"
    );
    assert!(e["verification"].is_null(), "{e}");
    assert!(e["best_file"].is_null(), "{e}");
    assert!(!rewards_best_file(&dir.path().join("store/rewards"), "synthetic").exists());
    // Every step measured as stock did: none is called best, and no step's file is
    // handed out as the best decisions (stock is).
    assert_eq!(e["best_step"]["beat_stock"], false, "{e}");
    assert!(e["best_step"]["file"].is_null(), "{e}");
    let out = run_kiln(dir.path(), &["rewards", "store"]);
    let said = String::from_utf8_lossy(&out.stdout);
    eprintln!("{said}");
    assert!(said.contains("the model is not trustworthy"), "{said}");
    assert!(
        said.contains("no step beat stock (the lowest measured: "),
        "{said}"
    );
    assert!(said.contains("no best decision file written"), "{said}");
}

/// Knobs passed to `true`: the wall time is noise only.
const NOISE: &str = r#"(campaign
  (name noise)
  (store "store")
  (objective (metric wall-time) (statistic median))
  (runs (warmup 0) (min 1) (max 1))
  (experiments
    ((benchmark noise) (search (random-walk (steps 30) (flips 1))) (chains 2) (seed 9)))
  (benchmarks
    ((name noise) (kind knobs) (knobs (a 0 1) (b 0 1) (c 0 1) (d 0 1) (e 0 1) (f 0 1))
     (sources "noise") (build ())
     (run ("true" "{a}" "{b}" "{c}" "{d}" "{e}" "{f}"))
     (check-output none) (timeout-s 10)))
  (workers (local (slots 2))))
"#;

#[test]
fn rewards_of_noise_say_the_model_does_not_predict_and_write_no_best_file() {
    let dir = campaign(NOISE, source("noise", "README", "nothing to build\n"));
    let json = rewards_json(dir.path(), &[]);
    let e = &json["experiments"][0];
    eprintln!("noise: cv_r2 {} over {} steps", e["cv_r2"], e["rows"]);
    assert_eq!(e["trusted"], false, "{e}");
    assert_eq!(e["verdict"], "untrusted", "{e}");
    assert!(e["cv_r2"].as_f64().unwrap() < 0.5, "{e}");
    assert!(
        e["distrust"]
            .as_str()
            .unwrap()
            .contains("cross-validated R²"),
        "{e}"
    );
    assert!(e["best_file"].is_null(), "{e}");
    assert!(!rewards_best_file(&dir.path().join("store/rewards"), "noise").exists());
}

/// A program of eight knobs, each saving 10 units of 200, and a penalty of 200
/// when all eight are on: additive wherever a short random walk goes, so the
/// model fits well, and wrong where it extrapolates to.
const TRAP: &str = r#"#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv) {
    long on = 0, all = 1;
    for (int i = 1; i < argc; i++) {
        long x = atol(argv[i]);
        on += x;
        all &= x;
    }
    long cost = 300 * (200 - 10 * on + 200 * all);
    volatile uint64_t acc = 1;
    for (long i = 0; i < cost; i++)
        acc = acc * 6364136223846793005ull + 1;
    printf("%ld\n", cost);
    return 0;
}
"#;

#[test]
fn a_proposal_that_measures_worse_is_refused_and_the_best_step_is_pointed_at() {
    if !have_valgrind() {
        return skip("valgrind is not installed (callgrind is the deterministic objective)");
    }
    let knobs = ["k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7"];
    let build = r#"("cc" "-O1" "trap.c" "-o" "trap")"#;
    let run = r#"("./trap" "{k0}" "{k1}" "{k2}" "{k3}" "{k4}" "{k5}" "{k6}" "{k7}")"#;
    let config = walk_config("trap", &knobs, ("trap", build, run), 30, 4);
    let dir = campaign(&config, source("trap", "trap.c", TRAP));
    let store = kiln_controller::store::Store::open(&dir.path().join("store")).unwrap();
    let all_on = store
        .steps(Some("trap"))
        .map(Result::unwrap)
        .any(|s| s.decisions.0.values().all(|v| v.to_string() == "1"));
    assert!(!all_on, "the walk reached the trap: the data would show it");
    drop(store);

    // Eight clear savings: the model is trusted and proposes every knob on.
    let json = rewards_json(dir.path(), &[]);
    let e = &json["experiments"][0];
    assert_eq!(e["trusted"], true, "{e}");
    assert_eq!(e["differ_from_stock"], 8, "{e}");
    // Measured, the proposal (320 units, stock 200) costs more than stock: refused, no best file.
    let v = &e["verification"];
    let (stock, proposal) = (
        v["stock"].as_f64().unwrap(),
        v["proposal"].as_f64().unwrap(),
    );
    assert!(proposal / stock > 1.3, "{v}");
    assert!(v["best_step_to_stock"].as_f64().unwrap() < 1.0, "{v}");
    assert_eq!(e["verdict"], "worse-than-stock", "{e}");
    assert!(e["best_file"].is_null(), "{e}");
    assert!(!rewards_best_file(&dir.path().join("store/rewards"), "trap").exists());
    // The best measured step's file instead, with the step's decisions: their known cost is
    // what the best step measured (instructions = start-up + per unit × units, both from
    // stock and proposal).
    let step_file = dir.path().join(e["best_step"]["file"].as_str().unwrap());
    let decisions = DecisionFile::read(&step_file).unwrap().set;
    let on = decisions
        .0
        .values()
        .filter(|v| v.to_string() == "1")
        .count() as f64;
    assert!(
        (1.0..8.0).contains(&on),
        "{on} knobs on in {}",
        step_file.display()
    );
    let per_unit = (proposal - stock) / (320.0 - 200.0);
    let expected = stock - per_unit * 10.0 * on;
    let best = v["best_step"].as_f64().unwrap();
    assert!(
        (best / expected - 1.0).abs() < 0.01,
        "best step {best}, expected {expected}"
    );
    let out = run_kiln(dir.path(), &["rewards", "store"]);
    let said = String::from_utf8_lossy(&out.stdout);
    eprintln!("{said}");
    assert!(
        said.contains("measured worse than the stock decisions"),
        "{said}"
    );
    assert!(said.contains("no best decision file written"), "{said}");
}
