//! The policy round trip of `policy/`, end to end on small data: a
//! real campaign over two bundled benchmarks and a third left out, the dataset
//! exported as Parquet, a model trained in Python, applied to the left-out
//! benchmark's sites, and its decision file measured against stock; and the
//! corpus's leave-one-program-out loop (`policy/corpus`) on three.

use std::os::unix::process::CommandExt as _;
use std::process::Command;
use std::time::Duration;

use crate::common::{self, copy_benchmark, kiln, repo, text, worker};

/// The three bundled benchmarks and the example's own campaign, edited by
/// `edit`, its store and sources in the test's folder.
fn setup(edit: impl Fn(String) -> String) -> tempfile::TempDir {
    assert!(
        common::have_valgrind(),
        "the campaign's objective needs callgrind"
    );
    let dir = tempfile::tempdir().unwrap();
    for name in ["sample-dsp", "tiny-interp", "graph-walk"] {
        copy_benchmark(name, dir.path());
    }
    let config = std::fs::read_to_string(repo().join("policy/campaign.sexp"))
        .unwrap()
        .replace("../target/policy/store", "store")
        .replace("../bench-programs/", "bench-programs/");
    std::fs::write(dir.path().join("campaign.sexp"), edit(config)).unwrap();
    dir
}

/// Runs `policy/SCRIPT ARGS` in `dir` with this build's kiln; its
/// output, once it succeeded.
fn example(dir: &std::path::Path, script: &str, args: &[&str]) -> String {
    let out = Command::new(repo().join("policy").join(script))
        .args(args)
        .current_dir(dir)
        .env("KILN", kiln())
        .env("KILN_WORKER", worker())
        .env("PYTHON", python())
        .output()
        .unwrap();
    let log = text(&out);
    assert!(out.status.success(), "{log}");
    log
}

/// `kiln policy campaign.sexp` in `dir` on sample-dsp, rows as JSON, the policy command to add.
fn policy_of_sample_dsp(dir: &std::path::Path) -> Command {
    let mut cmd = common::kiln_cmd(dir);
    cmd.args([
        "policy",
        "campaign.sexp",
        "--benchmark",
        "sample-dsp",
        "--json",
        "--",
    ]);
    cmd
}

/// The scripts/python-env interpreter, with policy/requirements.txt.
fn python() -> String {
    let python = Command::new(repo().join("scripts/python-env"))
        .output()
        .unwrap();
    assert!(python.status.success(), "{}", text(&python));
    String::from_utf8(python.stdout).unwrap().trim().to_string()
}

#[test]
fn policy_example_runs_end_to_end() {
    // The example's own campaign, cut to a few steps per experiment.
    let dir = setup(|config| config.replace("(steps 150)", "(steps 12)"));
    let log = example(dir.path(), "run", &["campaign.sexp", "graph-walk", "out"]);
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

/// A campaign of a few steps over two bundled benchmarks, then `kiln policy`: `stock` measures
/// 1.0 on both, `nothing` the campaign's own inline-nothing reference, and a policy that writes
/// garbage for one benchmark fails that benchmark only (exit 1), its reason named.
#[test]
fn kiln_policy_measures_stock_nothing_and_a_failing_policy_per_benchmark() {
    if !common::have_valgrind() {
        return common::skip("valgrind is not installed (callgrind is the objective)");
    }
    let dir = tempfile::tempdir().unwrap();
    for name in ["sample-dsp", "tiny-interp"] {
        copy_benchmark(name, dir.path());
    }
    let config = r#"(campaign
  (name policies)
  (store "store")
  (objective (metric instructions) (statistic median))
  (runs (warmup 0) (min 1) (max 1))
  (experiments
    ((benchmark sample-dsp) (search (random-walk (steps 2))) (seed 1))
    ((benchmark tiny-interp) (search (random-walk (steps 2))) (seed 2)))
  (benchmarks
    ((name sample-dsp) (kind llvm-inline) (sources "bench-programs/sample-dsp")
     (build ("clang" "-O2" "main.c" "-o" "bench")) (run ("./bench" "80")) (timeout-s 60))
    ((name tiny-interp) (kind llvm-inline) (sources "bench-programs/tiny-interp")
     (build ("clang" "-O2" "main.c" "-o" "bench")) (run ("./bench" "1")) (timeout-s 60)))
  (workers (local (slots 2))))
"#;
    std::fs::write(dir.path().join("campaign.sexp"), config).unwrap();
    let run = common::run_kiln(dir.path(), &["run", "campaign.sexp"]);
    assert!(run.status.success(), "{}", text(&run));

    // Flags after the built-in's name, as the README types them.
    let json = |args: &[&str]| -> serde_json::Value {
        let mut all = vec!["policy", "campaign.sexp"];
        all.extend(args);
        all.extend([
            "--json",
            "--benchmark",
            "sample-dsp",
            "--benchmark",
            "tiny-interp",
        ]);
        let out = common::run_kiln(dir.path(), &all);
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)))
    };
    let stock = json(&["stock"]);
    for row in stock.as_array().unwrap() {
        assert_eq!(row["failure"], serde_json::Value::Null, "{row}");
        assert_eq!(row["policy"], row["stock"], "{row}");
        assert_eq!(row["changed"], 0);
    }
    let nothing = json(&["nothing"]);
    let store = kiln_controller::store::Store::open_existing(&dir.path().join("store")).unwrap();
    for row in nothing.as_array().unwrap() {
        let info = store
            .experiment(row["benchmark"].as_str().unwrap())
            .unwrap()
            .unwrap();
        let reference = info.references["no-inline"].objective().unwrap();
        assert_eq!(row["policy"].as_f64(), Some(reference), "{row}");
    }
    drop(store);

    let garbage = dir.path().join("garbage.sh");
    std::fs::write(
        &garbage,
        "cat >/dev/null\nif [ \"$KILN_BENCHMARK\" = tiny-interp ]; then echo '(decisions (values'; \
         else echo '(decisions (values))'; fi\n",
    )
    .unwrap();
    let out = common::run_kiln_when_free(
        dir.path(),
        &[
            "policy",
            "campaign.sexp",
            "--",
            "sh",
            garbage.to_str().unwrap(),
        ],
    );
    let said = text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    let line = |b: &str| {
        said.lines()
            .find(|l| l.starts_with(b))
            .unwrap_or_else(|| panic!("{said}"))
            .to_string()
    };
    assert!(line("sample-dsp").contains("1.0000"), "{said}");
    assert!(line("tiny-interp").contains("decision file"), "{said}");
}

/// `policy/corpus` on three bundled programs: screening campaigns,
/// one model per program trained on the other two's effects (the decision
/// rule validated on those alone), and `kiln policy` measuring each program
/// under the model that never saw it; the summary has a row per program.
#[test]
fn corpus_policies_decide_each_program_with_a_model_that_never_saw_it() {
    let dir = setup(|config| {
        config
            .replace(
                "(simulated-annealing (steps 150) (t-max 0.002) (t-min 0.00005) (flips 2))",
                "(screening (steps 6))",
            )
            .replace("(chains 2)", "(chains 1)")
    });
    let config = std::fs::read_to_string(dir.path().join("campaign.sexp")).unwrap();
    assert!(config.contains("(screening (steps 6))"), "{config}");
    let log = example(dir.path(), "corpus", &["campaign.sexp", "out"]);
    let names = ["sample-dsp", "tiny-interp", "graph-walk"];
    for name in names {
        assert!(
            log.contains(&format!("{name}: trained on 2 programs' flips")),
            "{name}'s model is trained on the two others: {log}"
        );
    }
    let rows: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("out/policy.json")).unwrap())
            .unwrap();
    assert_eq!(rows.len(), 3, "{rows:?}");
    for row in &rows {
        assert!(row["failure"].is_null(), "{row}");
        let ratio = row["policy"].as_f64().unwrap() / row["stock"].as_f64().unwrap();
        assert!(ratio > 0.5 && ratio < 2.0, "{row}");
    }
    let summary = std::fs::read_to_string(dir.path().join("out/summary.md")).unwrap();
    for name in names {
        assert!(summary.contains(&format!("| {name} |")), "{summary}");
    }
    assert!(
        summary.contains("3 held-out programs measured"),
        "{summary}"
    );
}

/// The policy shipped with the dataset (dataset/model.joblib, trained on corpus programs only)
/// decides a bundled benchmark through `policy/decide`: `kiln policy` measures its
/// decisions against stock, and passes on what the policy said it flipped.
#[test]
fn the_shipped_policy_decides_a_program_outside_the_corpus() {
    let dir = setup(|config| config);
    let out = policy_of_sample_dsp(dir.path())
        .arg(repo().join("policy/decide"))
        .env("PYTHON", python())
        .output()
        .unwrap();
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("sample-dsp: the policy says: lopo.py: sample-dsp: flipping"),
        "{said}"
    );
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rows.len(), 1, "{said}");
    assert!(rows[0]["failure"].is_null(), "{said}");
    let ratio = rows[0]["policy"].as_f64().unwrap() / rows[0]["stock"].as_f64().unwrap();
    assert!(ratio > 0.5 && ratio < 2.0, "{said}");
}

/// `policy/hottest_call.py` inlines at most the one hottest call stock left as a call, and
/// `kiln policy` measures it: the site it names is the one changed.
#[test]
fn the_hottest_call_policy_inlines_one_call_and_is_measured() {
    let dir = setup(|config| config);
    let out = policy_of_sample_dsp(dir.path())
        .arg(python())
        .arg(repo().join("policy/hottest_call.py"))
        .output()
        .unwrap();
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    let inlines = said.contains("hottest_call.py: sample-dsp: inlining ");
    assert!(
        inlines || said.contains("hottest_call.py: sample-dsp: no call as hot as"),
        "{said}"
    );
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rows.len(), 1, "{said}");
    assert!(rows[0]["failure"].is_null(), "{said}");
    assert_eq!(
        rows[0]["changed"].as_u64(),
        Some(u64::from(inlines)),
        "{said}"
    );
}

/// `policy/draw_odds.py` on the shipped dataset: a row a program, and uniform's draws land on
/// a helping flip as often as the program's share of sites whose flip helped.
#[test]
fn draw_odds_reads_where_each_scheme_draws_on_the_shipped_dataset() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("odds.csv");
    let out = Command::new(python())
        .arg(repo().join("policy/draw_odds.py"))
        .args(["--effects", "dataset/effects.parquet"])
        .args(["--sites", "dataset/sites.parquet"])
        .arg("--csv")
        .arg(&csv)
        .current_dir(repo())
        .output()
        .unwrap();
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("programs hold a measured helping flip"),
        "{said}"
    );
    let mut table = csv::Reader::from_path(&csv).unwrap();
    let header = table.headers().unwrap().clone();
    let column = |name: &str| header.iter().position(|c| c == name).unwrap();
    let (sites, helping, uniform) = (
        column("sites"),
        column("helping sites"),
        column("uniform helps"),
    );
    let rows: Vec<csv::StringRecord> = table.records().map(Result::unwrap).collect();
    assert!(rows.len() >= 30, "{said}");
    for row in &rows {
        let cell = |i: usize| row[i].parse::<f64>().unwrap();
        let share = cell(helping) / cell(sites);
        assert!((cell(uniform) - share).abs() < 1e-12, "{row:?}");
    }
}

/// `scripts/dataset` over two bundled benchmarks in shared builds: stopped during its campaign
/// (SIGINT to its process group, as Ctrl-C sends) it adds nothing; started again it resumes and
/// the dataset holds each of the store's effects once; a third run adds none. 16 builds reach
/// sample-dsp's two calls stock left that help inlined (`compress_step`'s), ranked below about
/// twenty hotter inlined calls.
#[test]
fn the_dataset_script_resumes_and_adds_no_duplicate_effect() {
    let dir = setup(|_| {
        r#"(campaign
  (name data)
  (store "store")
  (objective (metric instructions) (statistic median))
  (runs (warmup 0) (min 1) (max 1))
  (experiments (each-benchmark (search (screening (steps 16) (flips-per-step 4))) (seed 1)))
  (benchmarks
    ((name sample-dsp) (kind llvm-inline) (sources "bench-programs/sample-dsp")
     (build ("clang" "-O2" "main.c" "-o" "bench")) (run ("./bench" "80")))
    ((name tiny-interp) (kind llvm-inline) (sources "bench-programs/tiny-interp")
     (build ("clang" "-O2" "main.c" "-o" "bench")) (run ("./bench" "1"))))
  (workers (local (slots 2))))
"#
        .to_string()
    });
    let script = || {
        let mut cmd = Command::new(repo().join("scripts/dataset"));
        cmd.args(["campaign.sexp", "--out", "dataset"])
            .current_dir(dir.path())
            .env("KILN", kiln())
            .env("KILN_WORKER", worker())
            .env("PYTHON", python());
        cmd
    };
    let mut first = script().process_group(0).spawn().unwrap();
    common::campaign::wait_for(
        "3 decided steps",
        dir.path(),
        Duration::from_secs(300),
        || common::campaign::decided(dir.path()) >= 3,
    );
    unsafe { libc::kill(-(first.id() as libc::pid_t), libc::SIGINT) };
    assert_eq!(first.wait().unwrap().code(), Some(130));
    assert!(!dir.path().join("dataset").exists());

    let rows = |dir: &std::path::Path| -> usize {
        let sheet = std::fs::read_to_string(dir.join("dataset/DATASHEET.md")).unwrap();
        let line = sheet
            .lines()
            .find(|l| l.starts_with("- effects: "))
            .unwrap();
        line["- effects: ".len()..]
            .split(' ')
            .next()
            .unwrap()
            .replace(',', "")
            .parse()
            .unwrap()
    };
    for _ in 0..2 {
        let out = script().output().unwrap();
        assert!(out.status.success(), "{}", text(&out));
        let stored = common::run_kiln(
            dir.path(),
            &["export", "store", "--table", "effects", "--format", "jsonl"],
        );
        let effects = String::from_utf8_lossy(&stored.stdout).lines().count();
        assert!(effects > 32, "two programs, 16 builds each: {effects}");
        assert_eq!(rows(dir.path()), effects, "each effect once");
    }
    // Shared builds read each flip's caller's code before and after it.
    let sheet = std::fs::read_to_string(dir.path().join("dataset/DATASHEET.md")).unwrap();
    let effects_line = sheet
        .lines()
        .find(|l| l.starts_with("- effects: "))
        .unwrap();
    let with_code = effects_line
        .split("; ")
        .find_map(|part| part.strip_suffix(" with their caller's code before and after the flip);"))
        .map(|n| n.replace(',', "").parse::<usize>().unwrap());
    assert!(with_code.is_some_and(|n| n > 0), "{sheet}");
    assert!(dir.path().join("dataset/effects.parquet").exists());
    assert!(dir.path().join("dataset/sites.parquet").exists());
    assert!(dir.path().join("dataset/model.joblib").exists());
    assert_measured_policy_flips_what_helped(dir.path());
}

/// `policy/measured.py` over the dataset in `dir`: `kiln policy` measures, for sample-dsp,
/// every flip whose effect around stock saved instructions, built together.
fn assert_measured_policy_flips_what_helped(dir: &std::path::Path) {
    let stored = common::run_kiln(
        dir,
        &["export", "store", "--table", "effects", "--format", "jsonl"],
    );
    let helped: std::collections::BTreeSet<String> = String::from_utf8_lossy(&stored.stdout)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|r| r["benchmark"] == "sample-dsp" && r["context"] == "stock")
        .filter(|r| r["value"] != r["stock"] && r["effect"].as_f64().is_some_and(|e| e < 0.0))
        .map(|r| r["site"].as_str().unwrap().to_string())
        .collect();
    assert!(!helped.is_empty(), "no flip of sample-dsp helped");
    let out = policy_of_sample_dsp(dir)
        .arg(python())
        .arg(repo().join("policy/measured.py"))
        .args(["--effects", "dataset/effects.parquet", "--margin", "0"])
        .output()
        .unwrap();
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains(&format!("sample-dsp: flipping {} site(s)", helped.len())),
        "{said}"
    );
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rows[0]["changed"], helped.len(), "{said}");
    assert!(rows[0]["failure"].is_null(), "{said}");
}
