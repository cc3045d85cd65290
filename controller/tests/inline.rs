//! Inlining campaigns on the bundled benchmarks with stock clang: site
//! discovery through `kiln sites`, and annealing that ends at or below the
//! stock compiler's instruction count on every bundled C benchmark.

use crate::common::*;
use kiln_protocol::DecisionFile;

/// Writes each (relative path, text) under `dir`.
fn write_files(dir: &std::path::Path, files: &[(&str, &str)]) {
    for (name, text) in files {
        std::fs::write(dir.join(name), text).unwrap();
    }
}

/// Runs `config` as `kiln run` in `dir` and opens its store: the store and
/// what it knows of `experiment`.
fn run_campaign(
    dir: &std::path::Path,
    config: &str,
    experiment: &str,
) -> (
    kiln_controller::store::Store,
    kiln_controller::store::ExperimentInfo,
) {
    std::fs::write(dir.join("c.sexp"), config).unwrap();
    let out = run_kiln(dir, &["run", "c.sexp"]);
    assert!(out.status.success(), "{}", text(&out));
    let store = kiln_controller::store::Store::open(&dir.join("store")).unwrap();
    let info = store.experiment(experiment).unwrap().unwrap();
    (store, info)
}

/// Asserts that every stored step of `experiment` measured ok (its build
/// realised every requested decision); returns how many there are.
fn assert_every_step_ok(store: &kiln_controller::store::Store, experiment: &str) -> usize {
    let mut steps = 0;
    for step in store.steps(Some(experiment)) {
        let step = step.unwrap();
        assert_eq!(
            step.result.measurement.outcome.name(),
            "ok",
            "{}: {:?}",
            step.key,
            step.result.measurement.outcome
        );
        steps += 1;
    }
    steps
}

/// A campaign config over one bundled C benchmark at a size small enough for callgrind.
fn config(benchmark: &str, size: &str, steps: u32) -> String {
    format!(
        r#"(campaign
  (name {benchmark})
  (store "store")
  (objective (metric instructions) (statistic median))
  (runs (warmup 0) (min 1) (max 1))
  (experiments
    ((benchmark {benchmark})
     (search (simulated-annealing (steps {steps}) (t-max 0.002) (t-min 0.00005) (flips 1)))
     (seed 9) (parallel 2)))
  (benchmarks
    ((name {benchmark}) (kind llvm-inline) (sources "bench-programs/{benchmark}")
     (build ("clang" "-O2" "main.c" "-o" "bench")) (run ("./bench" "{size}")) (timeout-s 60)))
  (workers (local (slots 2))))
"#
    )
}

/// Discovery records each site's features and `kiln sites` shows them: all
/// in `--json`, the main ones in its table. graph-walk's `heap_push` call in
/// `dijkstra` (main.c:166:17), which stock clang keeps, has the cost and
/// threshold of clang's remark `'heap_push' not inlined into 'dijkstra'
/// because too costly to inline (cost=260, threshold=225)`, sits in two loops
/// and ran in the profile of the stock build.
#[test]
fn sites_show_the_features_of_each_site() {
    if !have("clang") || !have("valgrind") {
        return skip("clang or valgrind is not installed");
    }
    let dir = tempfile::tempdir().unwrap();
    copy_benchmark("graph-walk", dir.path());
    std::fs::write(dir.path().join("c.sexp"), config("graph-walk", "1", 1)).unwrap();
    let out = run_kiln(dir.path(), &["sites", "--json", "c.sexp", "graph-walk"]);
    assert!(out.status.success(), "{}", text(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let points = json["points"].as_array().unwrap();
    let features = json["features"].as_object().unwrap();
    assert_eq!(features.len(), points.len(), "every site has features");
    let site = &features["heap_push @ dijkstra:14:17"];
    assert_eq!(site["inline-cost"], 260, "{site}");
    assert_eq!(site["inline-threshold"], 225, "{site}");
    assert_eq!(site["loop-depth"], 2, "{site}");
    assert_eq!(site["chain-length"], 1, "{site}");
    assert!(site["site-calls"].as_u64().unwrap() > 0, "{site}");
    assert!(site["callee-instructions"].as_u64().unwrap() > 0, "{site}");
    // A feature that cannot be had is null, never 0: a site stock clang
    // inlined has no call of its own in the profile.
    let inlined = &features["sift_up @ heap_push:10:5"];
    assert!(inlined["site-calls"].is_null(), "{inlined}");
    assert!(inlined["inline-cost"].is_i64(), "{inlined}");

    // The table, from the discovery kept beside the store.
    let out = run_kiln(dir.path(), &["sites", "c.sexp", "graph-walk"]);
    assert!(out.status.success(), "{}", text(&out));
    let shown = String::from_utf8_lossy(&out.stdout);
    let header = shown.lines().next().unwrap();
    for column in [
        "cost",
        "threshold",
        "caller IR",
        "callee IR",
        "loops",
        "calls",
    ] {
        assert!(header.contains(column), "{header}");
    }
    let row = shown
        .lines()
        .find(|l| l.starts_with("heap_push @ dijkstra:14:17 "))
        .unwrap();
    let cells: Vec<&str> = row.split_whitespace().collect();
    // Id (three words), stock, domain (two), cost, threshold.
    let stock_to_threshold = ["no-inline", "inline", "no-inline", "260", "225"];
    assert_eq!(&cells[3..8], stock_to_threshold, "{row}");
    // A call the stock build inlined shows how often it ran with nothing inlined.
    let inlined_row = shown
        .lines()
        .find(|l| l.starts_with("sift_up @ heap_push:10:5 "))
        .unwrap();
    let calls: u64 = inlined_row
        .split_whitespace()
        .last()
        .unwrap()
        .parse()
        .unwrap();
    assert!(calls > 0, "{inlined_row}");

    // Built by a script that compiles and links in two steps (make's way),
    // the compiles go through kiln's compiler wrapper, which also writes the
    // IR: the same features.
    let wrapped = tempfile::tempdir().unwrap();
    copy_benchmark("graph-walk", wrapped.path());
    let script = r#"("sh" "-c" "cc -O2 -MD -c main.c -o main.o && cc main.o -o bench")"#;
    let direct = r#"("clang" "-O2" "main.c" "-o" "bench")"#;
    let config = config("graph-walk", "1", 1)
        .replace(direct, script)
        .replace("(kind llvm-inline)", "(kind llvm-inline) (compiler clang)");
    std::fs::write(wrapped.path().join("c.sexp"), config).unwrap();
    let out = run_kiln(wrapped.path(), &["sites", "--json", "c.sexp", "graph-walk"]);
    assert!(out.status.success(), "{}", text(&out));
    let through_make: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(through_make["features"], json["features"]);
}

#[test]
fn sites_lists_the_decision_points_and_writes_the_stock_decisions() {
    if !have("clang") {
        return skip("clang is not installed");
    }
    let dir = tempfile::tempdir().unwrap();
    copy_benchmark("sample-dsp", dir.path());
    std::fs::write(dir.path().join("c.sexp"), config("sample-dsp", "80", 1)).unwrap();
    let out = run_kiln(
        dir.path(),
        &["sites", "c.sexp", "sample-dsp", "-o", "stock.sexp"],
    );
    assert!(out.status.success(), "{}", text(&out));
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.contains("74 decision points"), "{shown}");
    let stock = DecisionFile::parse(
        &std::fs::read_to_string(dir.path().join("stock.sexp")).unwrap(),
        "stock.sexp",
    )
    .unwrap();
    assert_eq!(stock.set.len(), 74);
    let inlined = stock.set.0.values().filter(|v| v.is_inline()).count();
    assert!(inlined > 0 && inlined < 74, "stock inlines {inlined} of 74");
    let unknown = run_kiln(dir.path(), &["sites", "c.sexp", "nope"]);
    assert!(!unknown.status.success());
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("no benchmark named 'nope'"));

    // Discovery said what it was doing, and is kept: the campaign takes its
    // decision points from it rather than discovering again.
    let said = String::from_utf8_lossy(&out.stderr);
    for build in ["discovery", "stock", "replay check"] {
        let line = format!("{build} build of 'sample-dsp' started");
        assert!(said.contains(&line), "{said}");
    }
    if !have("valgrind") {
        return skip("valgrind is not installed, for the campaign after the listing");
    }
    std::fs::write(dir.path().join("c.sexp"), config("sample-dsp", "80", 2)).unwrap();
    let run = run_kiln(dir.path(), &["run", "c.sexp"]);
    assert!(run.status.success(), "{}", text(&run));
    let said = String::from_utf8_lossy(&run.stderr);
    assert!(
        said.contains("decision points of sample-dsp from "),
        "{said}"
    );
    assert!(!said.contains("discovery build of"), "{said}");
    let info = kiln_controller::store::Store::open(&dir.path().join("store")).unwrap();
    let kept = info.experiment("sample-dsp").unwrap().unwrap().discovery;
    assert_eq!(kept.baseline, stock.set);
}

#[test]
fn annealing_ends_at_or_below_stock_on_every_bundled_c_benchmark() {
    if !have("clang") || !have_valgrind() {
        return skip("needs clang and valgrind");
    }
    for (benchmark, size) in [
        ("sample-dsp", "80"),
        ("tiny-interp", "1"),
        ("graph-walk", "1"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        copy_benchmark(benchmark, dir.path());
        std::fs::write(dir.path().join("c.sexp"), config(benchmark, size, 60)).unwrap();
        let out = run_kiln(dir.path(), &["run", "c.sexp"]);
        assert!(out.status.success(), "{benchmark}: {}", text(&out));
        let store = kiln_controller::store::Store::open(&dir.path().join("store")).unwrap();
        let info = store.experiment(benchmark).unwrap().unwrap();
        let stock = info.baseline.objective().unwrap();
        let none = info.references["no-inline"].objective().unwrap();
        let chain = store.chain(benchmark, 0).unwrap().unwrap();
        let best = chain.best.objective();
        eprintln!("{benchmark}: stock {stock}, inline nothing {none}, best {best}");
        assert!(
            best <= stock,
            "{benchmark}: best {best} above stock {stock}"
        );
        assert!(
            stock < none,
            "{benchmark}: stock {stock} not below inlining nothing {none}"
        );
        let mismatches = chain
            .failures
            .get("decision-mismatch")
            .copied()
            .unwrap_or(0);
        assert_eq!(
            mismatches, 0,
            "{benchmark}: builds realised other decisions than requested"
        );
    }
}

#[test]
fn a_make_built_multi_file_program_with_plain_g_runs_unchanged() {
    // The build is `make`: kiln's replay and remark flags reach each compile
    // through its compiler wrapper, not the command line, and the Makefile's
    // plain `-g` (DWARF 5 with clang 14) still runs under callgrind.
    if !have("clang") || !have_valgrind() || !have("make") {
        return skip("needs clang, valgrind and make");
    }
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("bench-programs/twofile");
    std::fs::create_dir_all(&src).unwrap();
    write_files(&src, &TWO_FILE_MAKE);
    let config = two_file_config(6);
    let (store, info) = run_campaign(dir.path(), &config, "twofile");
    let sites: Vec<String> = info
        .discovery
        .points
        .iter()
        .map(|p| p.id.to_string())
        .collect();
    for callee in ["'sq'", "'add'", "'twice'", "'inc'"] {
        assert!(
            sites
                .iter()
                .any(|s| s.contains(&callee[1..callee.len() - 1])),
            "no site of {callee} among {sites:?}"
        );
    }
    // The stock build compiled afresh (make found no objects left by the
    // discovery build) and its remarks name what clang inlines by itself.
    let stock = &info.discovery.baseline;
    assert!(stock.0.values().any(|v| v.is_inline()), "{stock:?}");
    assert_every_step_ok(&store, "twofile");

    // Each step changes one decision, so one unit: the other's object is
    // reused, from the object cache or left in the last build's tree (both,
    // where a step returns to decisions built before), and its remarks still
    // prove its decisions: every step above is ok.
    let mut reused = 0;
    for step in store.steps(Some("twofile")) {
        let step = step.unwrap();
        let Some(log) = step.artifacts.get("build-log") else {
            continue;
        };
        let log = std::fs::read_to_string(kiln_controller::store::layout::artifact(
            &dir.path().join("store"),
            log,
        ))
        .unwrap();
        if log.contains(".c: object reused") {
            reused += 1;
        }
    }
    assert!(reused >= 3, "{reused} of 6 steps reused an object");
}

#[test]
fn remarks_stay_whole_while_another_make_job_prints() {
    // make -j2 runs a job that prints a line at a time (as CMake's progress
    // does) while a compile's remarks, hundreds of kilobytes, are written to
    // the same pipe: a line of the job's inside a remark cut it, and its site
    // read as not realised (yaml-cpp lost 4 % of its steps so), or as no
    // site at all in discovery.
    if !have("clang") || !have_valgrind() || !have("make") {
        return skip("needs clang, valgrind and make");
    }
    const SITES: usize = 4000;
    let mut main = String::from("#include <stdio.h>\n#include <stdlib.h>\n");
    for i in 0..SITES {
        main += &format!("static int f{i}(int x) {{ return x * {i} + 1; }}\n");
    }
    main += "int main(int argc, char **argv) {\n  int s = atoi(argv[1]);\n";
    for i in 0..SITES {
        main += &format!("  s = f{i}(s);\n");
    }
    main += "  printf(\"%d\\n\", s);\n  return 0;\n}\n";
    // The noise goes on from when clang has written main.o, before its
    // output is written, until bench is linked after it (bounded, should
    // the build fail).
    let makefile = ".PHONY: all fresh noise\n\
        all: bench noise\n\
        fresh:\n\trm -f main.o bench\n\
        main.o: fresh\n\t$(CC) -O2 -c main.c -o main.o\n\
        bench: main.o\n\t$(CC) -O2 main.o -o bench\n\
        noise: fresh\n\
        \tn=0; while [ ! -e main.o ] && [ $$n -lt 5000000 ]; do n=$$((n+1)); done; \\\n\
        \ti=0; while [ ! -e bench ] && [ $$i -lt 1000000 ]; do echo '[ 50%] Building C object'; i=$$((i+1)); done\n";
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("bench-programs/noisy");
    std::fs::create_dir_all(&src).unwrap();
    write_files(&src, &[("main.c", &main), ("Makefile", makefile)]);
    let config = r#"(campaign
  (name noisy)
  (store "store")
  (objective (metric instructions) (statistic median))
  (runs (warmup 0) (min 1) (max 1))
  (experiments ((benchmark noisy) (search (random-walk (steps 4) (flips 300))) (seed 5)))
  (benchmarks
    ((name noisy) (kind llvm-inline) (compiler clang) (sources "bench-programs/noisy")
     (build ("make" "-j2")) (run ("./bench" "7")) (timeout-s 60)))
  (workers (local (slots 1))))
"#;
    let (store, info) = run_campaign(dir.path(), config, "noisy");
    assert_eq!(
        (info.discovery.points.len(), info.discovery.fixed.len()),
        (SITES, 0),
        "sites found and left out"
    );
    assert_eq!(assert_every_step_ok(&store, "noisy"), 4);
}

/// A cargo package whose dependency is a path crate outside its workspace.
const APP_WITH_HELPER: [(&str, &str); 4] = [
    (
        "Cargo.toml",
        "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
         [dependencies]\nhelper = { path = \"helper\" }\n\n[workspace]\nexclude = [\"helper\"]\n",
    ),
    (
        "src/main.rs",
        "fn sq(x: u64) -> u64 { x.wrapping_mul(x) }\n\
         fn add(a: u64, b: u64) -> u64 { a.wrapping_add(b) }\n\
         fn main() {\n    let n: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(10);\n\
         let mut s = 0;\n    for i in 0..n { s = add(s, sq(i)) ^ helper::mix(i); }\n    println!(\"{s}\");\n}\n",
    ),
    (
        "helper/Cargo.toml",
        "[package]\nname = \"helper\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    ),
    (
        "helper/src/lib.rs",
        "fn rot(x: u64) -> u64 { x.rotate_left(7) }\n\
         #[inline(never)]\npub fn mix(x: u64) -> u64 { rot(x) ^ rot(x >> 3) }\n",
    ),
];

/// A workspace of two crates that both take decisions: `app`, whose main
/// calls into `helper`, where the work is.
const TWO_CRATE_WORKSPACE: [(&str, &str); 4] = [
    (
        "Cargo.toml",
        "[package]\nname = \"app\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n\
         [dependencies]\nhelper = { path = \"helper\" }\n\n[workspace]\nmembers = [\"helper\"]\n",
    ),
    (
        "src/main.rs",
        "fn main() {\n    println!(\"{}\", helper::run(std::env::args().count() as u64 * 1000));\n}\n",
    ),
    (
        "helper/Cargo.toml",
        "[package]\nname = \"helper\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    ),
    (
        "helper/src/lib.rs",
        "fn rot(x: u64) -> u64 { x.rotate_left(7) ^ x }\n\
         fn sq(x: u64) -> u64 { x.wrapping_mul(x) }\n\
         fn mix(x: u64, y: u64) -> u64 { rot(x) ^ sq(y) ^ rot(y >> 3) }\n\
         #[inline(never)]\n\
         pub fn run(n: u64) -> u64 { let mut s = 0; for i in 0..n { s = mix(s, i) ^ sq(i); } s }\n",
    ),
];

/// A random walk of `steps` over [`APP_WITH_HELPER`] in `dir/bench-programs/app`,
/// built by `cargo build --release` on one local slot.
fn app_with_helper_campaign(dir: &std::path::Path, steps: u32) -> String {
    cargo_campaign(dir, &APP_WITH_HELPER, steps)
}

/// A random walk of `steps` over the package `files` (a package `app` with
/// `helper` in its folder) in `dir/bench-programs/app`, built by `cargo build
/// --release` on one local slot.
fn cargo_campaign(dir: &std::path::Path, files: &[(&str, &str)], steps: u32) -> String {
    let src = dir.join("bench-programs/app");
    std::fs::create_dir_all(src.join("src")).unwrap();
    std::fs::create_dir_all(src.join("helper/src")).unwrap();
    write_files(&src, files);
    format!(
        r#"(campaign
  (name app)
  (store "store")
  (objective (metric wall-time) (statistic median))
  (runs (warmup 0) (min 1) (max 1))
  (experiments ((benchmark app) (search (random-walk (steps {steps}) (flips 1))) (seed 2)))
  (benchmarks
    ((name app) (kind llvm-inline) (sources "bench-programs/app")
     (build ("cargo" "build" "--release"))
     (run ("./target/release/app" "1000")) (timeout-s 60) (build-timeout-s 600)))
  (workers (local (slots 1))))
"#
    )
}

#[test]
fn a_cargo_build_applies_the_decisions_to_the_workspaces_own_crate() {
    // `cargo build --release` runs as it is: kiln's rustc flags reach the
    // workspace's crates through RUSTC_WORKSPACE_WRAPPER, and its dependency
    // (a path crate outside the workspace) is built as cargo builds it.
    if !have("cargo") {
        return skip("cargo is not installed");
    }
    let dir = tempfile::tempdir().unwrap();
    let config = app_with_helper_campaign(dir.path(), 3);
    let config = config.as_str();
    let (store, info) = run_campaign(dir.path(), config, "app");
    let sites: Vec<String> = info
        .discovery
        .points
        .iter()
        .map(|p| p.id.to_string())
        .collect();
    assert!(
        sites.iter().any(|s| s.contains("3app2sq")),
        "no site of app's own sq among {sites:?}"
    );
    assert!(
        !sites.iter().any(|s| s.contains("6helper3rot")),
        "the dependency was built with kiln's flags: {sites:?}"
    );
    assert_eq!(assert_every_step_ok(&store, "app"), 3);
    drop(store);

    // Opted in, the dependency's crate takes decisions too, and its steps
    // realise them; the workspace's crate keeps its own.
    let opted = config
        .replace(
            "(timeout-s 60)",
            "(timeout-s 60) (dependency-crates (\"helper\"))",
        )
        .replace("(store \"store\")", "(store \"store-deps\")");
    std::fs::write(dir.path().join("c.sexp"), &opted).unwrap();
    let out = run_kiln(dir.path(), &["run", "c.sexp"]);
    assert!(out.status.success(), "{}", text(&out));
    let store = kiln_controller::store::Store::open(&dir.path().join("store-deps")).unwrap();
    let info = store.experiment("app").unwrap().unwrap();
    let sites: Vec<String> = info
        .discovery
        .points
        .iter()
        .map(|p| p.id.to_string())
        .collect();
    assert!(sites.iter().any(|s| s.contains("6helper3rot")), "{sites:?}");
    assert!(sites.iter().any(|s| s.contains("3app2sq")), "{sites:?}");
    assert_eq!(assert_every_step_ok(&store, "app"), 3);
}

/// A step's build as a campaign stored it.
struct Built {
    decisions: kiln_protocol::decision::ContentHash,
    log: String,
    binary: Option<kiln_protocol::decision::ContentHash>,
}

/// Runs `config` (its store `store` in `dir`) with the worker's variable
/// `var` set, checks that every step of `experiment` measured, and moves the
/// store to `dir/done`, so that campaigns run this way build in the same
/// folder (debug info names it); returns the steps' builds.
fn builds_with(
    dir: &std::path::Path,
    config: &str,
    experiment: &str,
    var: (&str, &str),
    done: &str,
) -> Vec<Built> {
    std::fs::write(dir.join("c.sexp"), config).unwrap();
    let out = kiln_cmd(dir)
        .args(["run", "c.sexp"])
        .env(var.0, var.1)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let store_dir = dir.join(done);
    std::fs::rename(dir.join("store"), &store_dir).unwrap();
    let store = kiln_controller::store::Store::open(&store_dir).unwrap();
    assert_every_step_ok(&store, experiment);
    let steps: Vec<_> = store.steps(Some(experiment)).map(Result::unwrap).collect();
    let built: Vec<Built> = steps
        .iter()
        .filter(|s| s.artifacts.contains_key("build-log"))
        .map(|s| Built {
            decisions: s.decision_hash,
            log: artifact_text(&store_dir, s, "build-log"),
            binary: s.result.build.as_ref().unwrap().binary_hash,
        })
        .collect();
    assert!(built.len() >= 3, "{} builds", built.len());
    built
}

/// Asserts that each decision set built both ways (three at least) made
/// the same binary.
fn assert_same_binaries(a: &[Built], b: &[Built]) {
    let mut compared = 0;
    for x in a {
        if let Some(y) = b.iter().find(|y| y.decisions == x.decisions) {
            assert_eq!(
                x.binary, y.binary,
                "the binaries of one decision set differ"
            );
            compared += 1;
        }
    }
    assert!(compared >= 3, "{compared} decision sets built both ways");
}

/// cargo's target folder is kept between a slot's steps: the dependency,
/// built without kiln's flags, is compiled by the slot's first build (the
/// baseline's) only, the workspace's crate by every build (its decisions
/// verified, its front end taken from rustc's kept incremental folder), and
/// each binary is the one a build from a fresh copy makes of the same decisions.
#[test]
fn a_cargo_dependency_is_built_once_a_slot_and_the_binaries_equal_fresh_builds() {
    if !have("cargo") {
        return skip("cargo is not installed");
    }
    let dir = tempfile::tempdir().unwrap();
    let config = &app_with_helper_campaign(dir.path(), 4);
    let keep = "KILN_KEEP_CARGO_TARGET";
    let fresh = builds_with(dir.path(), config, "app", (keep, "off"), "store-fresh");
    let kept = builds_with(dir.path(), config, "app", (keep, "on"), "store-kept");
    let compiles = |log: &str, krate: &str| log.contains(&format!("Compiling {krate} v0.1.0"));
    // The slot's first build, the stock baseline's, compiled the dependency.
    for build in &kept {
        let log = &build.log;
        assert!(
            !compiles(log, "helper"),
            "the dependency was built again: {log}"
        );
        assert!(
            compiles(log, "app"),
            "the workspace's crate was not built: {log}"
        );
    }
    for build in &fresh {
        assert!(compiles(&build.log, "helper"), "{}", build.log);
    }
    // rustc's front end ran once: each later build kept the slot's
    // incremental folder (a build whose code rustc had not generated again
    // would have printed no remarks, failed verification and been built
    // again from a fresh copy, without it).
    for build in &kept {
        assert!(
            build.log.contains("incremental folder kept"),
            "{}",
            build.log
        );
    }
    let distinct: std::collections::BTreeSet<_> = kept.iter().map(|b| b.binary).collect();
    assert!(distinct.len() >= 2, "every step built the same binary");
    assert_same_binaries(&kept, &fresh);
}

/// A dependency crate opted in to decisions does not cost its benchmark the
/// kept target: cargo compiles that crate again every step (kiln removes
/// its fingerprint), with the step's decisions verified from its remarks,
/// and each binary is the one a build from a fresh copy makes of the same
/// decisions.
#[test]
fn an_opted_in_dependency_crate_is_compiled_again_every_step_from_the_kept_target() {
    if !have("cargo") {
        return skip("cargo is not installed");
    }
    let dir = tempfile::tempdir().unwrap();
    let config = app_with_helper_campaign(dir.path(), 6).replace(
        "(timeout-s 60)",
        "(timeout-s 60) (dependency-crates (\"helper\"))",
    );
    let keep = "KILN_KEEP_CARGO_TARGET";
    let fresh = builds_with(dir.path(), &config, "app", (keep, "off"), "store-fresh");
    let kept = builds_with(dir.path(), &config, "app", (keep, "on"), "store-kept");
    for build in &kept {
        let log = &build.log;
        assert!(log.contains("incremental folder kept"), "{log}");
        assert!(log.contains("Compiling helper v0.1.0"), "{log}");
        assert!(log.contains("kiln: crate helper: code"), "{log}");
    }
    let distinct: std::collections::BTreeSet<_> = kept.iter().map(|b| b.binary).collect();
    assert!(distinct.len() >= 2, "every step built the same binary");
    assert_same_binaries(&kept, &fresh);
}

/// In a workspace of two crates, a step that changes the decisions of one
/// crate generates that crate's code again (its front end from rustc's kept
/// incremental folder) and reuses the other's; every decision is verified
/// from the remarks (those of a reused crate kept from the compile that made
/// its code), and each binary is the one a build from a fresh copy makes of
/// the same decisions.
#[test]
fn a_step_generates_code_only_for_the_crate_whose_decisions_changed() {
    if !have("cargo") {
        return skip("cargo is not installed");
    }
    let dir = tempfile::tempdir().unwrap();
    let config = &cargo_campaign(dir.path(), &TWO_CRATE_WORKSPACE, 8);
    let keep = "KILN_KEEP_CARGO_TARGET";
    let fresh = builds_with(dir.path(), config, "app", (keep, "off"), "store-fresh");
    let kept = builds_with(dir.path(), config, "app", (keep, "on"), "store-kept");
    // The binary is named with its kind, the library without.
    let said =
        |log: &str, krate: &str, what: &str| log.contains(&format!("kiln: crate {krate}: {what}"));
    let (again, reused) = ("code generated again", "code reused");
    let only = |changed: &str, other: &str| {
        kept.iter()
            .filter(|b| said(&b.log, changed, again) && said(&b.log, other, reused))
            .count()
    };
    for build in &kept {
        let each = ["app (bin)", "helper"]
            .iter()
            .all(|k| said(&build.log, k, again) || said(&build.log, k, reused));
        assert!(each, "a crate's compile says neither: {}", build.log);
    }
    assert!(
        only("helper", "app (bin)") > 0,
        "no step changed helper's code alone"
    );
    assert!(
        only("app (bin)", "helper") > 0,
        "no step changed app's code alone"
    );
    for build in &fresh {
        assert!(!build.log.contains(reused), "{}", build.log);
    }
    assert_same_binaries(&kept, &fresh);
}

#[test]
fn a_cargo_package_builds_in_a_store_inside_another_cargo_project() {
    // The store (and so each work folder) lies inside a cargo workspace, as
    // kiln's own suite stores do: cargo must not take it for the package's.
    if !have("cargo") {
        return skip("cargo is not installed");
    }
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("bench-programs/solo");
    std::fs::create_dir_all(src.join("src")).unwrap();
    write_files(dir.path(), &[("Cargo.toml", "[workspace]\nmembers = []\n")]);
    write_files(
        &src,
        &[
            (
                "Cargo.toml",
                "[package]\nname = \"solo\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
            ),
            (
                "src/main.rs",
                "fn sq(x: u64) -> u64 { x.wrapping_mul(x) }\n\
                 fn main() { let n: u64 = std::env::args().count() as u64 * 1000;\n\
                 println!(\"{}\", (0..n).map(sq).fold(0u64, |a, b| a ^ b)); }\n",
            ),
        ],
    );
    let config = r#"(campaign
  (name solo)
  (store "store")
  (objective (metric wall-time) (statistic median))
  (runs (warmup 0) (min 1) (max 1))
  (experiments ((benchmark solo) (search (random-walk (steps 2) (flips 1))) (seed 2)))
  (benchmarks
    ((name solo) (kind llvm-inline) (sources "bench-programs/solo")
     (build ("cargo" "build" "--release" "--quiet"))
     (run ("./target/release/solo")) (timeout-s 60) (build-timeout-s 600)))
  (workers (local (slots 1))))
"#;
    let (store, info) = run_campaign(dir.path(), config, "solo");
    assert!(!info.discovery.points.is_empty());
    assert_eq!(assert_every_step_ok(&store, "solo"), 2);
    let bundled = std::fs::read_to_string(src.join("Cargo.toml")).unwrap();
    assert!(
        !bundled.contains("[workspace]"),
        "the sources are left as they are"
    );
}

#[test]
fn discovery_of_a_deeply_recursive_program_completes_within_its_limits() {
    // A 22-deep binary call tree: 4 million copies if every call were
    // inlined. Discovery ends within its limits and finds its sites. (With
    // full -g this very compile passes any CPU limit; kiln's line tables keep
    // it small. The fallback past a limit is tested in worker/tests/step.rs.)
    if !have("clang") || !have("make") {
        return skip("needs clang and make");
    }
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("bench-programs/deep");
    std::fs::create_dir_all(&src).unwrap();
    let mut program =
        String::from("#include <stdio.h>\nstatic int f0(int x) { return x * 3 + 1; }\n");
    for i in 1..=22 {
        program.push_str(&format!(
            "static int f{i}(int x) {{ return f{p}(x) ^ f{p}(x + {i}); }}\n",
            p = i - 1
        ));
    }
    program.push_str(
        "int main(int argc, char **argv) { (void)argv; printf(\"%d\\n\", f22(argc)); return 0; }\n",
    );
    std::fs::write(src.join("main.c"), program).unwrap();
    std::fs::write(
        src.join("Makefile"),
        "bench: main.c\n\t$(CC) -O2 -g main.c -o bench\n",
    )
    .unwrap();
    let config = r#"(campaign
  (name deep)
  (store "store")
  (objective (metric wall-time) (statistic median))
  (experiments ((benchmark deep) (search (random-walk (steps 1)))))
  (benchmarks
    ((name deep) (kind llvm-inline) (compiler clang) (sources "bench-programs/deep")
     (build ("make")) (run ("./bench")) (discovery-cpu-s 2) (build-timeout-s 120)))
  (workers (local (slots 1))))
"#;
    std::fs::write(dir.path().join("c.sexp"), config).unwrap();
    let started = std::time::Instant::now();
    let out = run_kiln(dir.path(), &["sites", "c.sexp", "deep"]);
    assert!(out.status.success(), "{}", text(&out));
    let shown = String::from_utf8_lossy(&out.stdout);
    let sites: usize = shown
        .lines()
        .last()
        .and_then(|l| l.strip_suffix(" decision points"))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("{shown}"));
    assert!(sites > 0, "{shown}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(60),
        "discovery took {:?}",
        started.elapsed()
    );
}

/// A guided chain whose budget cannot screen every site screens the hottest
/// by the stock build's profile: sample-dsp has 74 sites, and 20 steps leave
/// 5 for screening (a quarter of the budget). A site with no profile of its
/// own (its function was inlined everywhere) is as hot as the hottest site
/// calling that function.
#[test]
fn guided_screening_flips_the_hottest_sites_by_profile_when_the_budget_is_short() {
    if !have("clang") || !have("valgrind") {
        return skip("clang or valgrind is not installed");
    }
    let dir = tempfile::tempdir().unwrap();
    copy_benchmark("sample-dsp", dir.path());
    let (screened, _) = screens_hottest_first(dir.path(), "sample-dsp", "8", 20);
    assert_eq!(screened, 5);
}

/// The same on a program of more than 1,000 sites: 40 functions of 25 calls
/// each, called from `main` at 40 different rates.
#[test]
fn guided_screening_of_a_program_of_over_1000_sites_takes_the_hottest_once_each() {
    if !have("clang") || !have("valgrind") {
        return skip("clang or valgrind is not installed");
    }
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("bench-programs/wide");
    std::fs::create_dir_all(&src).unwrap();
    let mut program = String::from("#include <stdio.h>\n#include <stdlib.h>\n");
    for h in 0..25 {
        program += &format!(
            "static int h{h}(int x) {{ return (x ^ {h}) * {} + (x >> {}); }}\n",
            h + 3,
            h % 7
        );
    }
    for g in 0..40 {
        let calls: String = (0..25).map(|h| format!(" s += h{h}(x + {g});")).collect();
        program += &format!("static int g{g}(int x) {{ int s = 0;{calls} return s; }}\n");
    }
    let rates: String = (0..40)
        .map(|g| format!("    if (i % {} == 0) s += g{g}(i);\n", g + 1))
        .collect();
    program += &format!(
        "int main(int argc, char **argv) {{\n  int n = atoi(argv[1]), s = 0;\n  \
         for (int i = 0; i < n; i++) {{\n{rates}  }}\n  printf(\"%d\\n\", s);\n  return 0;\n}}\n"
    );
    std::fs::write(src.join("main.c"), program).unwrap();
    let (screened, sites) = screens_hottest_first(dir.path(), "wide", "400", 16);
    assert!(sites > 1000, "{sites} sites");
    assert!(screened >= 3, "{screened} sites screened");
}

/// Runs 'steps' steps of guided annealing on `benchmark` (in `dir/bench-programs`)
/// at `size`, and checks that its screening steps flipped one site each,
/// each site once, and that no site left out is hotter by the stock profile
/// than any screened one. Returns how many sites it screened, of how many.
fn screens_hottest_first(
    dir: &std::path::Path,
    benchmark: &str,
    size: &str,
    steps: u32,
) -> (usize, usize) {
    let guided = config(benchmark, size, steps).replace("(seed 9)", "(seed 9) (proposals guided)");
    let (store, info) = run_campaign(dir, &guided, benchmark);
    let points = &info.discovery.points;
    let heat =
        |site: &kiln_protocol::SiteId| inherited_heat(site, points, &info.discovery.features, 8);
    let mut screened: Vec<_> = store
        .steps(Some(benchmark))
        .map(Result::unwrap)
        .filter(|s| s.kind == kiln_controller::store::StepKind::Screen)
        .map(|s| {
            assert_eq!(s.diff.0.len(), 1, "a screening step flips one site");
            s.diff.0.keys().next().unwrap().clone()
        })
        .collect();
    let n = screened.len();
    assert!(n > 0, "no screening step");
    let mut heats: Vec<_> = points.iter().map(|p| heat(&p.id)).collect();
    heats.sort_unstable_by(|a, b| b.cmp(a));
    let coldest_screened = screened.iter().map(heat).min().unwrap();
    assert!(coldest_screened.is_some(), "screened sites have a profile");
    // No site left out of screening is hotter than any screened one.
    assert_eq!(coldest_screened, heats[n - 1], "screened {screened:?}");
    screened.sort();
    screened.dedup();
    assert_eq!(screened.len(), n, "a site screened twice");
    (n, points.len())
}

/// A site's heat: its calls with nothing inlined, else the calls through it, else how often
/// its caller's body ran (the caller's own instructions over its size), else (up to `depth`
/// levels) the hottest of the sites whose callee is the function the site's
/// code runs in (`CALLEE @ F:LINE:COL`, outermost `F`).
fn inherited_heat(
    site: &kiln_protocol::SiteId,
    points: &[kiln_protocol::DecisionPoint],
    features: &std::collections::BTreeMap<kiln_protocol::SiteId, kiln_protocol::SiteFeatures>,
    depth: u32,
) -> Option<u64> {
    let own = features.get(site).and_then(|f| {
        f.uninlined_calls.or(f.site_calls).or_else(|| {
            let (cost, size) = (f.caller_self_cost?, f.caller_instructions?);
            (size > 0).then(|| cost / size)
        })
    });
    if own.is_some() || depth == 0 {
        return own;
    }
    let runs_in = site.as_str().rsplit(" @ ").next()?.rsplitn(3, ':').nth(2)?;
    points
        .iter()
        .filter(|p| p.id.as_str().split_once(" @ ").map(|(callee, _)| callee) == Some(runs_in))
        .filter_map(|p| inherited_heat(&p.id, points, features, depth - 1))
        .max()
}

/// A build that is one clang command, whose every-call-inlined compile blows up (each of 25
/// functions calls the one before twice): discovery bounds it as it bounds a make build's units,
/// compiles it again with the stock decisions, and says so in `kiln sites` and its `--json`.
#[test]
fn discovery_bounds_a_one_command_build_and_names_the_units_that_fell_back() {
    if !have("clang") {
        return skip("needs clang");
    }
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("b");
    std::fs::create_dir_all(&src).unwrap();
    let mut program = String::from(
        "#include <stdio.h>\n#include <stdlib.h>\nstatic int f0(int x) { return x * 3 + 1; }\n",
    );
    for k in 1..=25 {
        program += &format!(
            "static int f{k}(int x) {{ return f{}(x) + f{}(x ^ {k}); }}\n",
            k - 1,
            k - 1
        );
    }
    program +=
        "int main(int argc, char **argv) { printf(\"%d\\n\", f25(atoi(argv[1]))); return 0; }\n";
    std::fs::write(src.join("main.c"), program).unwrap();
    let config = r#"(campaign (name blow) (store "store")
  (experiments ((benchmark b) (search (random-walk (steps 1)))))
  (benchmarks ((name b) (kind llvm-inline) (sources "b") (build ("clang" "-O2" "main.c" "-o" "bench"))
    (run ("./bench" "3")) (discovery-cpu-s 2) (build-timeout-s 300)))
  (workers (local (slots 1))))
"#;
    std::fs::write(dir.path().join("c.sexp"), config).unwrap();
    let out = run_kiln(dir.path(), &["sites", "c.sexp", "b"]);
    let said = text(&out);
    assert!(out.status.success(), "{said}");
    assert!(
        said.contains("compiled with the stock decisions in discovery"),
        "{said}"
    );
    assert!(said.contains("main.c: failed"), "{said}");
    let json = run_kiln(dir.path(), &["sites", "c.sexp", "b", "--json"]);
    let discovery: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert!(
        discovery["fallbacks"][0]
            .as_str()
            .unwrap()
            .starts_with("main.c"),
        "{discovery}"
    );
    // A campaign says it once, naming the units.
    let run = run_kiln(dir.path(), &["run", "c.sexp"]);
    let said = text(&run);
    assert!(run.status.success(), "{said}");
    let line = said
        .lines()
        .find(|l| l.contains("sites of the stock decisions only in 1 unit(s)"))
        .unwrap_or_else(|| panic!("{said}"));
    assert!(
        line.contains("(failed") && line.ends_with("): main.c"),
        "{line}"
    );
}

/// A unit that does not compile at all fails discovery with the compiler's own
/// error, not a note that its compile with every call inlined passed its limits
/// and fell back to the stock decisions (which fail as well).
#[test]
fn a_unit_that_does_not_compile_fails_discovery_with_its_own_error() {
    if !have("clang") {
        return skip("needs clang");
    }
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("b");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(
        src.join("main.c"),
        "int main(void) { return missing_name; }\n",
    )
    .unwrap();
    let config = r#"(campaign (name broken) (store "store")
  (experiments ((benchmark b) (search (random-walk (steps 1)))))
  (benchmarks ((name b) (kind llvm-inline) (sources "b") (build ("clang" "-O2" "main.c" "-o" "bench"))
    (run ("./bench")) (build-timeout-s 300)))
  (workers (local (slots 1))))
"#;
    std::fs::write(dir.path().join("c.sexp"), config).unwrap();
    let out = run_kiln(dir.path(), &["sites", "c.sexp", "b"]);
    let said = text(&out);
    assert!(!out.status.success(), "{said}");
    assert!(
        said.contains("use of undeclared identifier 'missing_name'"),
        "{said}"
    );
    assert!(!said.contains("with every call inlined"), "{said}");
}

/// A two-unit C++ program whose hot code is templates, built by make with
/// clang++. `KILN_FLAGS` is empty under kiln (its wrapper adds the flags);
/// the plain build below passes them itself.
const TWO_UNIT_CPP: [(&str, &str); 4] = [
    (
        "Makefile",
        "CXX = clang++\nCXXFLAGS = -O2 -g\nbench: main.o stats.o\n\t$(CXX) $(CXXFLAGS) main.o stats.o -o bench\n\
         %.o: %.cpp stats.h\n\t$(CXX) $(CXXFLAGS) -c $< -o $@ $(KILN_FLAGS)\n",
    ),
    (
        "stats.h",
        "#pragma once\n#include <cstdint>\n#include <vector>\n\
         template <typename T> struct Acc { T sum{}; void add(T x) { sum += x * x; } };\n\
         template <typename T> T fold(const std::vector<T> &v) { Acc<T> a; for (const T &x : v) a.add(x); return a.sum; }\n\
         std::uint64_t work(int n);\n",
    ),
    (
        "stats.cpp",
        "#include \"stats.h\"\nstatic std::uint64_t mix(std::uint64_t x) { return x ^ (x >> 7); }\n\
         std::uint64_t work(int n) { std::vector<std::uint64_t> v; for (int i = 0; i < n; i++) v.push_back(mix(i)); return fold(v); }\n",
    ),
    (
        "main.cpp",
        "#include <cstdio>\n#include <cstdlib>\n#include \"stats.h\"\nstatic int sq(int x) { return x * x; }\n\
         int main(int argc, char **argv) {\n  int n = std::atoi(argv[1]);\n  std::vector<int> v;\n\
         for (int i = 0; i < n; i++) v.push_back(sq(i) % 1000);\n\
         std::printf(\"%d %llu\\n\", fold(v), (unsigned long long)work(n % 100));\n  return 0;\n}\n",
    ),
];

/// [`TWO_UNIT_CPP`]'s Makefile had it compile and link `bench` in one
/// command, as SQLite's builds its benchmark program.
const ONE_COMMAND_MAKEFILE: &str = "CXX = clang++\nCXXFLAGS = -O2 -g\n\
     bench: main.cpp stats.cpp stats.h\n\t$(CXX) $(CXXFLAGS) main.cpp stats.cpp -o bench $(KILN_FLAGS)\n";

/// [`TWO_UNIT_CPP`]'s Makefile had its compiles leave the object's name to
/// the compiler (`-c main.cpp`, no `-o`), as Lua's does for its parser.
const NO_OUTPUT_MAKEFILE: &str = "CXX = clang++\nCXXFLAGS = -O2 -g\n\
     bench: main.o stats.o\n\t$(CXX) $(CXXFLAGS) main.o stats.o -o bench\n\
     %.o: %.cpp stats.h\n\t$(CXX) $(CXXFLAGS) -c $< $(KILN_FLAGS)\n";

/// A random walk over [`TWO_UNIT_CPP`] in `dir/cpp`, counted by callgrind.
fn two_unit_cpp_campaign(dir: &std::path::Path, steps: u32) -> String {
    let src = dir.join("cpp");
    std::fs::create_dir_all(&src).unwrap();
    write_files(&src, &TWO_UNIT_CPP);
    format!(
        r#"(campaign
  (name cpp)
  (store "store")
  (objective (metric instructions) (statistic median))
  (runs (warmup 0) (min 1) (max 1))
  (experiments ((benchmark cpp) (search (random-walk (steps {steps}) (flips 1))) (seed 3)))
  (benchmarks
    ((name cpp) (kind llvm-inline) (compiler clang) (sources "cpp")
     (build ("make")) (run ("./bench" "3000")) (timeout-s 60)))
  (workers (local (slots 1))))
"#
    )
}

/// The text of a step's stored artifact.
fn artifact_text(
    store_dir: &std::path::Path,
    step: &kiln_controller::store::StepRecord,
    name: &str,
) -> String {
    let hash = &step.artifacts[name];
    let path = kiln_controller::store::layout::artifact(store_dir, hash);
    std::fs::read_to_string(path).unwrap()
}

/// Front end once: a step that flips one site of a two-unit C++ program
/// optimises only that unit from its kept IR and reuses the other's object
/// (by hash); its decisions are verified from the remarks, and its binary is
/// byte for byte, and so in output and instruction count, the one a plain
/// build with the same replay file makes.
#[test]
fn a_cpp_step_optimises_only_its_changed_unit_from_kept_ir_and_equals_a_plain_build() {
    one_unit_optimised_from_ir_and_equal_to_a_plain_build(None);
}

/// The same where the build compiles and links in one command
/// (`clang++ main.cpp stats.cpp -o bench`): kiln splits it into a unit per
/// source and the link, and the program is the one-command build's.
#[test]
fn a_compile_and_link_in_one_command_is_split_into_units_and_equals_a_plain_build() {
    one_unit_optimised_from_ir_and_equal_to_a_plain_build(Some(ONE_COMMAND_MAKEFILE));
}

/// The same where each compile names no output (`-c main.cpp`): the wrapper
/// names clang's own (`main.o`), so the compile is a unit and reuses objects.
#[test]
fn a_compile_that_names_no_output_is_a_unit_and_equals_a_plain_build() {
    one_unit_optimised_from_ir_and_equal_to_a_plain_build(Some(NO_OUTPUT_MAKEFILE));
}

/// [`TWO_UNIT_CPP`] (with `makefile` in place of its own): a step flips a
/// site of one unit, optimises it from its kept IR and reuses the other's
/// object; its binary is the plain build's with the same replay.
fn one_unit_optimised_from_ir_and_equal_to_a_plain_build(makefile: Option<&str>) {
    if !have("clang++") || !have_valgrind() || !have("make") {
        return skip("needs clang++, valgrind and make");
    }
    let dir = tempfile::tempdir().unwrap();
    let config = two_unit_cpp_campaign(dir.path(), 8);
    if let Some(makefile) = makefile {
        std::fs::write(dir.path().join("cpp/Makefile"), makefile).unwrap();
    }
    let (store, _) = run_campaign(dir.path(), &config, "cpp");
    assert_every_step_ok(&store, "cpp");
    let steps: Vec<_> = store.steps(Some("cpp")).map(Result::unwrap).collect();
    drop(store);
    let from_ir =
        |log: &str, unit: &str| log.contains(&format!("{unit}: optimised from its kept IR"));
    let reused = |log: &str, unit: &str| log.contains(&format!("{unit}: object reused"));
    // A step that compiled one unit from its IR and reused the other's object.
    let (step, log) = steps
        .iter()
        .filter(|s| s.artifacts.contains_key("build-log"))
        .map(|s| (s, artifact_text(&dir.path().join("store"), s, "build-log")))
        .find(|(_, log)| {
            (from_ir(log, "main.cpp") && reused(log, "stats.cpp"))
                || (from_ir(log, "stats.cpp") && reused(log, "main.cpp"))
        })
        .expect("no step compiled one unit from its IR and reused the other");
    assert!(!log.contains("compiled whole"), "{log}");
    // A reused object brings its compile's output, never kiln's notes of that compile.
    assert_eq!(
        log.matches("optimised from its kept IR").count(),
        1,
        "{log}"
    );
    let replay = artifact_text(&dir.path().join("store"), step, "replay-file");
    let built = step.result.build.as_ref().unwrap().binary_hash;

    // The plain build: the same Makefile in the same work folder (the
    // store's folder is the same path), the compiler run by make itself with
    // the flags kiln gives a step.
    std::fs::rename(dir.path().join("store"), dir.path().join("kiln-store")).unwrap();
    let src = dir.path().join("cpp");
    std::fs::write(src.join("replay.step"), &replay).unwrap();
    let flags = "-gline-tables-only -fdebug-default-version=4 -Rpass=inline \
                 -mllvm -cgscc-inline-replay=$PWD/replay.txt -mllvm -cgscc-inline-replay-scope=Module \
                 -mllvm -cgscc-inline-replay-fallback=NeverInline";
    let plain = format!(
        r#"(campaign
  (name plain)
  (store "store")
  (objective (metric instructions) (statistic median))
  (runs (warmup 0) (min 1) (max 1))
  (experiments ((benchmark cpp) (search (random-walk (steps 1) (flips 1))) (seed 3)))
  (benchmarks
    ((name cpp) (kind knobs) (knobs (unused 0 1)) (sources "cpp")
     (build ("sh" "-c" "sed 's|<work>/|'$PWD/'|g' replay.step > replay.txt && make KILN_FLAGS=\"{flags}\""))
     (run ("./bench" "3000")) (timeout-s 60)))
  (workers (local (slots 1))))
"#
    );
    let (plain_store, _) = run_campaign(dir.path(), &plain, "cpp");
    let plain_step = plain_store
        .steps(Some("cpp"))
        .map(Result::unwrap)
        .find(|s| s.result.build.is_some())
        .unwrap();
    let plain_built = plain_step.result.build.as_ref().unwrap().binary_hash;
    assert!(built.is_some());
    // The same bytes run the same instructions (the counts kiln measured
    // differ by the knob variable in the plain run's environment alone).
    assert_eq!(built, plain_built, "the binaries differ");
    assert_eq!(
        step.result.measurement.output_digest,
        plain_step.result.measurement.output_digest
    );
}

/// A make build starts from the slot's last build of the same sources:
/// what the build system did once (here a configure step) is not done
/// again, a unit whose decisions did not change is left as that build made
/// it (make does not compile it; its remarks come from the object cache and
/// its decisions are verified), and each binary is the one a build from a
/// fresh copy makes of the same decisions.
#[test]
fn a_make_step_starts_from_the_last_builds_tree_and_its_binaries_equal_fresh_builds() {
    if !have("clang++") || !have("make") {
        return skip("needs clang++ and make");
    }
    let dir = tempfile::tempdir().unwrap();
    let config = two_unit_cpp_campaign(dir.path(), 5).replace(
        "(objective (metric instructions) (statistic median))",
        "(objective (metric wall-time) (statistic median))",
    );
    std::fs::write(
        dir.path().join("cpp/Makefile"),
        "CXX = clang++\nCXXFLAGS = -O2 -g\nbench: config.stamp main.o stats.o\n\t$(CXX) $(CXXFLAGS) main.o stats.o -o bench\n\
         config.stamp:\n\techo configuring; touch config.stamp\n\
         %.o: %.cpp stats.h config.stamp\n\t$(CXX) $(CXXFLAGS) -c $< -o $@ $(KILN_FLAGS)\n",
    )
    .unwrap();
    let fresh = builds_with(
        dir.path(),
        &config,
        "cpp",
        ("KILN_WARM_TREE", "off"),
        "store-fresh",
    );
    let warm = builds_with(
        dir.path(),
        &config,
        "cpp",
        ("KILN_WARM_TREE", "on"),
        "store-warm",
    );
    // The slot's first build, the stock baseline's, configured.
    for build in &warm {
        let log = &build.log;
        assert!(!log.contains("configuring"), "configured again: {log}");
        assert!(
            log.contains("main.cpp") && log.contains("stats.cpp"),
            "{log}"
        );
    }
    for build in &fresh {
        assert!(build.log.contains("configuring"), "{}", build.log);
    }
    let left = "object reused from the last build's tree";
    assert!(
        warm.iter().any(|b| b.log.contains(left)),
        "no step left a unit alone"
    );
    // Its runs write nothing into the folder: each build starts in it as it is.
    let in_place = "the build started from the last build's tree, in place";
    for build in &warm {
        assert!(build.log.contains(in_place), "{}", build.log);
    }
    assert_same_binaries(&warm, &fresh);

    // A run that spoils an object in the folder: the next build starts from
    // a fresh copy with the last build's outputs laid over it, not in place
    // (in place, make would link the spoilt object, the link would fail and
    // the step would build again from a fresh copy, whose log says no warm
    // start). Its run is the shell, so its steps record no binary's hash.
    let spoiling = config.replace(
        r#"(run ("./bench" "3000"))"#,
        r#"(run ("sh" "-c" "./bench 3000 && echo spoilt > main.o"))"#,
    );
    assert_ne!(spoiling, config);
    let laid = builds_with(
        dir.path(),
        &spoiling,
        "cpp",
        ("KILN_WARM_TREE", "on"),
        "store-spoilt",
    );
    for build in &laid {
        let log = &build.log;
        assert!(
            log.contains("the build started from the last build's tree") && !log.contains(in_place),
            "{log}"
        );
    }
}

/// Where clang cannot compile IR, a changed unit is compiled whole (today's
/// per-unit rebuild), the step still measures, the worker warns once, and
/// `kiln-worker probe` says which mode it can use and why.
#[test]
fn a_clang_that_cannot_compile_ir_falls_back_to_the_per_unit_rebuild_and_probe_says_why() {
    if !have("clang++") || !have_valgrind() || !have("make") {
        return skip("needs clang++, valgrind and make");
    }
    let dir = tempfile::tempdir().unwrap();
    // Stand-ins for clang and clang++ that refuse IR input, first on PATH.
    let bin = dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for name in ["clang", "clang++"] {
        let real = String::from_utf8(
            std::process::Command::new("sh")
                .args(["-c", &format!("command -v {name}")])
                .output()
                .unwrap()
                .stdout,
        )
        .unwrap();
        let script = format!(
            "#!/bin/sh\nfor a in \"$@\"; do [ \"$a\" = ir ] && {{ echo 'error: no IR input here' >&2; exit 1; }}; done\n\
             exec {} \"$@\"\n",
            real.trim()
        );
        let path = bin.join(name);
        std::fs::write(&path, script).unwrap();
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
    }
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap());
    let probe = std::process::Command::new(worker())
        .arg("probe")
        .env("PATH", &path)
        .output()
        .unwrap();
    let said = text(&probe);
    assert!(probe.status.success(), "{said}");
    let line = said
        .lines()
        .find(|l| l.starts_with("clang steps"))
        .unwrap_or_else(|| panic!("{said}"));
    assert!(
        line.contains("per-unit rebuild") && line.contains("no IR input here"),
        "{line}"
    );

    let config = two_unit_cpp_campaign(dir.path(), 5);
    std::fs::write(dir.path().join("c.sexp"), &config).unwrap();
    let out = kiln_cmd(dir.path())
        .args(["run", "c.sexp"])
        .env("PATH", &path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let store = kiln_controller::store::Store::open(&dir.path().join("store")).unwrap();
    assert_every_step_ok(&store, "cpp");
    let mut whole = 0;
    for step in store.steps(Some("cpp")).map(Result::unwrap) {
        if step.artifacts.contains_key("build-log") {
            let log = artifact_text(&dir.path().join("store"), &step, "build-log");
            assert!(!log.contains("optimised from its kept IR"), "{log}");
            whole += log
                .matches("its kept IR did not compile; compiled whole")
                .count();
        }
    }
    assert!(whole >= 2, "{whole} units compiled whole");
    // Said by the first build that fell back (the baseline's), never again.
    let said = text(&out);
    assert_eq!(said.matches("said once").count(), 1, "{said}");
}

/// A tool that the build compiles and links in one command and then runs
/// (as SQLite's makefile does with its parser generator) is not the
/// benchmark: it is compiled as the build says, without kiln's flags, so
/// inlining every call cannot break the build, and none of its sites is a
/// decision point. The benchmark's own sites are.
#[test]
fn a_tool_the_build_compiles_in_one_command_and_runs_gets_no_flags_and_no_sites() {
    if !have("clang") || !have("make") {
        return skip("needs clang and make");
    }
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("b");
    std::fs::create_dir_all(&src).unwrap();
    write_files(
        &src,
        &[
            (
                "Makefile",
                "bench: main.c gen.h\n\tclang -O2 -g main.c -o bench\n\
                 gen.h: gentool\n\t./gentool > gen.h\n\
                 gentool: gentool.c\n\tclang -O2 -g gentool.c -o gentool\n",
            ),
            (
                "gentool.c",
                "#include <stdio.h>\nstatic int tool_twice(int x) { return 2 * x; }\n\
                 int main(void) { printf(\"#define SCALE %d\\n\", tool_twice(21)); return 0; }\n",
            ),
            (
                "main.c",
                "#include <stdio.h>\n#include <stdlib.h>\n#include \"gen.h\"\n\
                 static int bench_sq(int x) { return x * x + SCALE; }\n\
                 int main(int argc, char **argv) { int s = 0; for (int i = 0; i < atoi(argv[1]); i++) \
                 s += bench_sq(i); printf(\"%d\\n\", s); return 0; }\n",
            ),
        ],
    );
    let config = r#"(campaign (name tool) (store "store")
  (experiments ((benchmark b) (search (random-walk (steps 1)))))
  (benchmarks ((name b) (kind llvm-inline) (compiler clang) (sources "b") (build ("make"))
    (run ("./bench" "30")) (build-timeout-s 300)))
  (workers (local (slots 1))))
"#;
    std::fs::write(dir.path().join("c.sexp"), config).unwrap();
    let json = run_kiln(dir.path(), &["sites", "c.sexp", "b", "--json"]);
    assert!(json.status.success(), "{}", text(&json));
    let discovery: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let sites: Vec<&str> = discovery["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap())
        .collect();
    assert!(sites.iter().any(|s| s.contains("bench_sq")), "{sites:?}");
    assert!(!sites.iter().any(|s| s.contains("tool_twice")), "{sites:?}");
}

/// `(proposals profile)` and `(proposals helping)` draw the sites a hot loop runs far more
/// often than uniform draws: a program of 8 calls in a loop of 200,000 rounds and 100 calls
/// run once, 12 one-point moves of a random walk with each, the same seed. (Which way the
/// stock build decided a call weighs in helping's draws too: plan::search's unit tests.)
#[test]
fn profile_and_helping_proposals_move_the_hot_sites_more_often_than_uniform() {
    if !have("clang") || !have("valgrind") {
        return skip("clang or valgrind is not installed");
    }
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("bench-programs/hot");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("main.c"), hot_and_cold_program(8, 100)).unwrap();
    let walk = |proposals: &str| {
        format!(
            "((name {proposals}) (benchmark hot) (search (random-walk (steps 12) (flips 1))) \
             (proposals {proposals}) (seed 9) (parallel 2))"
        )
    };
    let one = config("hot", "200000", 12);
    let (head, rest) = one.split_once("  (experiments").unwrap();
    let (_, benchmarks) = rest.split_once("  (benchmarks").unwrap();
    let both = format!(
        "{head}  (experiments\n    {}\n    {}\n    {})\n  (benchmarks{benchmarks}",
        walk("uniform"),
        walk("profile"),
        walk("helping")
    );
    let (store, info) = run_campaign(dir.path(), &both, "profile");
    assert!(
        info.discovery.points.len() > 100,
        "{} sites",
        info.discovery.points.len()
    );
    let hot_share = |experiment: &str| {
        let moved: Vec<_> = store
            .steps(Some(experiment))
            .map(Result::unwrap)
            .flat_map(|s| s.diff.0.into_keys())
            .collect();
        let hot = moved
            .iter()
            .filter(|site| site.as_str().starts_with("hot"))
            .count();
        hot as f64 / moved.len() as f64
    };
    let (uniform, profile) = (hot_share("uniform"), hot_share("profile"));
    assert!(
        profile >= 0.5,
        "profile proposals moved hot sites {profile:.2} of the time"
    );
    let helping = hot_share("helping");
    assert!(
        helping >= 0.5,
        "helping proposals moved hot sites {helping:.2} of the time"
    );
    assert!(
        uniform < 0.25,
        "uniform proposals moved hot sites {uniform:.2} of the time"
    );
}

/// A C program whose `hot` functions are called in `main`'s loop and whose `cold` ones once,
/// from a function never inlined (so they do not share the loop's profile).
fn hot_and_cold_program(hot: usize, cold: usize) -> String {
    let mut program = String::from("#include <stdio.h>\n#include <stdlib.h>\n");
    for k in 0..hot {
        program += &format!(
            "static int hot{k}(int x) {{ return x * {} + (x >> {k}); }}\n",
            k + 3
        );
    }
    for j in 0..cold {
        program += &format!(
            "static int cold{j}(int x) {{ return (x ^ {j}) * {}; }}\n",
            j % 7 + 2
        );
    }
    let colds: String = (0..cold).map(|j| format!(" s += cold{j}(x);")).collect();
    let hots: String = (0..hot).map(|k| format!(" s += hot{k}(i);")).collect();
    program += &format!(
        "__attribute__((noinline)) static int setup(int x) {{ int s = 0;{colds} return s; }}\n\
         int main(int argc, char **argv) {{\n  int n = atoi(argv[1]), s = setup(argc);\n  \
         for (int i = 0; i < n; i++) {{{hots} }}\n  printf(\"%d\\n\", s);\n  return 0;\n}}\n"
    );
    program
}
