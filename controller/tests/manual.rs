//! `kiln benchmark` with the real `kiln` and `kiln-worker` binaries on the
//! local worker: the quick-start benchmark against its own stock decisions,
//! recorded in a store that verifies, exports and reports; a decision file
//! naming an unknown site, refused with its file, line and column and the
//! closest known ids; and the discovery kept beside a store, taken instead of
//! discovering again.

use std::path::Path;

use crate::common::*;

/// The quick start's benchmark and objective, with the store in the test's folder.
const CONFIG: &str = r#"(campaign
  (name manual)
  (store "store")
  (objective (metric instructions) (statistic median))
  (runs (warmup 0) (min 1) (max 1))
  (experiments
    ((benchmark sample-dsp)
     (search (simulated-annealing (steps 10)))
     (chains 1)
     (seed 42)))
  (benchmarks
    ((name sample-dsp)
     (kind llvm-inline)
     (sources "bench-programs/sample-dsp")
     (build ("clang" "-O2" "main.c" "-o" "bench"))
     (run ("./bench" "80"))
     (timeout-s 30)))
  (workers
    (local (slots 2))))
"#;

fn setup() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    copy_benchmark("sample-dsp", dir.path());
    std::fs::write(dir.path().join("q.sexp"), CONFIG).unwrap();
    dir
}

/// The number after "time ratio " in `kiln benchmark`'s summary.
fn time_ratio(stdout: &str) -> f64 {
    let at = stdout.find("time ratio ").expect("a time ratio line") + "time ratio ".len();
    let number: String = stdout[at..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    number.parse().unwrap()
}

/// `kiln benchmark q.sexp BENCH FILE --store STORE` in `path`.
fn benchmark(path: &Path, bench: &str, file: &str, store: &str) -> std::process::Output {
    run_kiln(
        path,
        &["benchmark", "q.sexp", bench, file, "--store", store],
    )
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_stock_decisions_benchmark_at_a_time_ratio_of_one_and_record_as_a_manual_step() {
    if !have("clang") || !have_valgrind() {
        return skip("needs clang and valgrind (the quick start's objective is callgrind's)");
    }
    let dir = setup();
    let path = dir.path();
    let out = run_kiln(path, &["sites", "q.sexp", "sample-dsp", "-o", "stock.sexp"]);
    assert!(out.status.success(), "{}", text(&out));

    let out = benchmark(path, "sample-dsp", "stock.sexp", "store");
    assert!(out.status.success(), "{}", text(&out));
    let summary = stdout(&out);
    let s = time_ratio(&summary);
    assert!((s - 1.0).abs() < 0.005, "time ratio {s}:\n{summary}");
    assert!(
        summary.contains("the same count (callgrind counts exactly)"),
        "{summary}"
    );
    assert!(
        summary.contains("manual:sample-dsp/chain 0/step 0"),
        "{summary}"
    );

    // A second measurement is appended as the next step.
    let out = benchmark(path, "sample-dsp", "stock.sexp", "store");
    assert!(out.status.success(), "{}", text(&out));
    assert!(stdout(&out).contains("manual:sample-dsp/chain 0/step 1"));

    let out = run_kiln(path, &["store", "verify", "store"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        stdout(&out).contains("manual steps           2"),
        "{}",
        text(&out)
    );

    let out = run_kiln(
        path,
        &["export", "store", "--table", "steps", "-o", "steps.csv"],
    );
    assert!(out.status.success(), "{}", text(&out));
    let mut reader = csv::Reader::from_path(path.join("steps.csv")).unwrap();
    let header = reader.headers().unwrap().clone();
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    let rows: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    assert_eq!(rows.len(), 2);
    for row in &rows {
        assert_eq!(&row[col("experiment")], "manual:sample-dsp");
        assert_eq!(&row[col("kind")], "manual");
        assert_eq!(&row[col("outcome")], "ok");
        let s: f64 = row[col("time_ratio")].parse().unwrap();
        assert!((s - 1.0).abs() < 0.005, "{s}");
    }

    let out = run_kiln(path, &["report", "store", "-o", "report"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(path.join("report/index.html").exists());
}

#[test]
fn a_decision_file_with_an_unknown_site_is_refused_naming_file_line_and_column() {
    if !have("clang") {
        return skip("needs clang to find the benchmark's call sites");
    }
    let dir = setup();
    let path = dir.path();
    std::fs::write(
        path.join("bad.sexp"),
        "(decisions\n  (values\n    (\"nope @ main:1:2\" inline)))\n",
    )
    .unwrap();
    let out = benchmark(path, "sample-dsp", "bad.sexp", "store");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("bad.sexp:3:5")
            && stderr.contains("unknown decision point 'nope @ main:1:2'"),
        "{}",
        text(&out)
    );
    // Refused right after discovery (no discovery was kept), before the store
    // was opened for the baseline's and the candidate's steps.
    assert!(
        stderr.contains("discovery build of 'sample-dsp' started"),
        "{stderr}"
    );
    // Nothing was measured, so no database was made; the discovery is kept for the next command.
    assert!(!Path::new(&path.join("store/db")).exists());
    assert!(path.join("store/discoveries").is_dir());
}

/// The one discovery kept in `store`'s `discoveries/` folder, its file and content.
fn kept_discovery(store: &Path) -> (std::path::PathBuf, serde_json::Value) {
    let files: Vec<_> = std::fs::read_dir(store.join("discoveries"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let json = serde_json::from_slice(&std::fs::read(&files[0]).unwrap()).unwrap();
    (files[0].clone(), json)
}

/// A fallback unit no discovery would report, marking a kept discovery.
const MARK: &str = "kept.c: only in the kept discovery";

/// `kiln sites` (with `extra` arguments) on a config of sample-dsp in `path` (wall time: one
/// quick run each, no valgrind needed), its kept discovery then marked with [`MARK`]; the
/// kept file.
fn kept_and_marked(path: &Path, extra: &[&str]) -> std::path::PathBuf {
    let config = CONFIG.replace("(metric instructions)", "(metric wall-time)");
    std::fs::write(path.join("q.sexp"), config).unwrap();
    let args = [&["sites", "q.sexp", "sample-dsp"], extra].concat();
    let out = run_kiln(path, &args);
    assert!(out.status.success(), "{}", text(&out));
    let (kept, mut json) = kept_discovery(&path.join("store"));
    json["fallbacks"] = serde_json::json!([MARK]);
    std::fs::write(&kept, serde_json::to_vec(&json).unwrap()).unwrap();
    kept
}

/// `kiln sites` discovers and keeps; `kiln benchmark --store` then takes that
/// discovery, marked here with a fallback unit no discovery would report:
/// the step recorded in the store carries the mark, and no discovery build
/// started.
#[test]
fn benchmark_takes_the_kept_discovery_and_starts_no_discovery_build() {
    if !have("clang") {
        return skip("needs clang to find the benchmark's call sites");
    }
    let dir = setup();
    let path = dir.path();
    let kept = kept_and_marked(path, &["-o", "stock.sexp"]);

    let out = benchmark(path, "sample-dsp", "stock.sexp", "store");
    assert!(out.status.success(), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Named as the config names the store, relative to the config's folder.
    let note = format!(
        "decision points of sample-dsp from {} (an earlier discovery",
        kept.strip_prefix(path).unwrap().display()
    );
    assert_eq!(stderr.matches(&note).count(), 1, "{stderr}");
    assert!(!stderr.contains("discovery build"), "{stderr}");
    let store = kiln_controller::store::Store::open(&path.join("store")).unwrap();
    let info = store.experiment("manual:sample-dsp").unwrap().unwrap();
    assert_eq!(info.discovery.fallbacks, [MARK]);
}

/// `kiln sites --rediscover` discovers again where a discovery is kept, and keeps the new
/// one in its place: here the kept one is marked, and the mark is gone.
#[test]
fn sites_rediscover_replaces_the_kept_discovery() {
    if !have("clang") {
        return skip("needs clang to find the benchmark's call sites");
    }
    let dir = setup();
    let path = dir.path();
    let kept = kept_and_marked(path, &[]);

    let args = ["sites", "q.sexp", "sample-dsp", "--rediscover", "--json"];
    let out = run_kiln(path, &args);
    assert!(out.status.success(), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("discovery build"));
    assert!(!String::from_utf8_lossy(&out.stdout).contains(MARK));
    let (again, json) = kept_discovery(&path.join("store"));
    assert_eq!(again, kept);
    assert!(!json.to_string().contains(MARK), "{json}");
}

/// A mistyped site id is refused as bad input (exit 2) before anything is
/// built, naming the closest known ids: here of a discovery kept beside the
/// config's store (by `kiln sites`) while `--store` names another, with a
/// site only that kept file has, so that a discovery made anew could not
/// name it.
#[test]
fn a_mistyped_site_is_refused_before_any_build_naming_the_closest_ids() {
    if !have("clang") {
        return skip("needs clang to find the benchmark's call sites");
    }
    let dir = setup();
    let path = dir.path();
    let out = run_kiln(path, &["sites", "q.sexp", "sample-dsp"]);
    assert!(out.status.success(), "{}", text(&out));
    let (kept, mut json) = kept_discovery(&path.join("store"));
    const SITE: &str = "kept_only @ main:1:1";
    let mut point = json["points"][0].clone();
    point["id"] = SITE.into();
    json["points"].as_array_mut().unwrap().push(point);
    std::fs::write(&kept, serde_json::to_vec(&json).unwrap()).unwrap();
    std::fs::write(
        path.join("typo.sexp"),
        "(decisions\n  (values\n    (\"kept_onyl @ main:1:1\" inline)))\n",
    )
    .unwrap();

    let out = benchmark(path, "sample-dsp", "typo.sexp", "other");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("typo.sexp:3:5: unknown decision point 'kept_onyl @ main:1:1'")
            && stderr.contains(&format!("did you mean '{SITE}'")),
        "{stderr}"
    );
    let kept = kept.strip_prefix(path).unwrap().display().to_string();
    assert!(stderr.contains(&kept), "{stderr}");
    assert!(!stderr.contains("build of"), "{stderr}");
    // Refused before the store was opened: nothing made for it.
    assert!(!path.join("other").exists());
}

/// A decision that takes a call away from a nested site makes that site's
/// decision moot: graph-walk's `heap_push @ top_k_far:4:13 @ main:19:15` is
/// the copy of a call that reaches `main` with `top_k_far`. Inlining
/// `heap_push` inside `top_k_far` first (or keeping `top_k_far` out of
/// `main`) leaves no such call, so the stock decision "inline" there decides
/// nothing: the step is measured, never a mismatch, and `kiln show` and the
/// dataset say which decision was moot and why.
#[test]
fn a_decision_that_takes_a_nested_call_away_makes_its_site_moot() {
    if !have("clang") || !have_valgrind() {
        return skip("needs clang and valgrind (the objective is callgrind's)");
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path();
    copy_benchmark("graph-walk", path);
    let config = CONFIG
        .replace("sample-dsp", "graph-walk")
        .replace("\"80\"", "\"5\"");
    std::fs::write(path.join("q.sexp"), config).unwrap();
    let out = run_kiln(path, &["sites", "q.sexp", "graph-walk", "-o", "stock.sexp"]);
    assert!(out.status.success(), "{}", text(&out));
    let stock = std::fs::read_to_string(path.join("stock.sexp")).unwrap();
    let nested = "heap_push @ top_k_far:4:13 @ main:19:15";
    assert!(stock.contains(&format!("(\"{nested}\" inline)")), "{stock}");
    let cases = [
        (
            "(\"heap_push @ top_k_far:4:13\" no-inline)",
            "(\"heap_push @ top_k_far:4:13\" inline)",
            "'heap_push' was inlined at 'top_k_far:4:13' already",
        ),
        (
            "(\"top_k_far @ main:19:15\" inline)",
            "(\"top_k_far @ main:19:15\" no-inline)",
            "'top_k_far' was not inlined at 'main:19:15'",
        ),
    ];
    for (step, (from, to, why)) in cases.iter().enumerate() {
        assert!(stock.contains(from), "{stock}");
        std::fs::write(path.join("moot.sexp"), stock.replace(from, to)).unwrap();
        let out = benchmark(path, "graph-walk", "moot.sexp", "store");
        assert!(out.status.success(), "{}", text(&out));
        let key = format!("manual:graph-walk/0/{step}");
        let out = run_kiln(path, &["show", "store", &key]);
        assert!(out.status.success(), "{}", text(&out));
        let shown = stdout(&out);
        assert!(shown.contains("outcome: ok"), "{shown}");
        assert!(shown.contains("1 moot decision:"), "{shown}");
        assert!(shown.contains(&format!("  {nested}: {why}")), "{shown}");
    }

    let out = run_kiln(
        path,
        &["export", "store", "--table", "dataset", "-o", "dataset.csv"],
    );
    assert!(out.status.success(), "{}", text(&out));
    let mut reader = csv::Reader::from_path(path.join("dataset.csv")).unwrap();
    let header = reader.headers().unwrap().clone();
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    let mut moot: Vec<(String, String)> = reader
        .records()
        .map(Result::unwrap)
        .filter(|r| &r[col("moot")] == "true")
        .map(|r| (r[col("step")].to_string(), r[col("site")].to_string()))
        .collect();
    moot.sort();
    assert_eq!(
        moot,
        [
            ("0".to_string(), nested.to_string()),
            ("1".into(), nested.into())
        ]
    );
}
