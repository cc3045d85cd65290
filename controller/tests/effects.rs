//! Screening in shared builds (`(screening (steps N) (flips-per-step K))`) on C programs whose
//! sites' effects are known: each flip's effect read from the instructions of its own
//! functions equals the flip measured alone; flips whose code overlaps are never built
//! together; a build whose flips do not add up to its change has them measured alone; and a
//! killed campaign resumes exactly.

use std::collections::BTreeMap;
use std::path::Path;

use crate::common::campaign::{resumes_exactly, stored_steps};
use crate::common::*;

/// Calls that never share a function: `leafK` inlined into `workK`, each `workK` called by
/// `main` through a pointer (no site), as `outer` is.
const PAIRS: usize = 10;

/// The program's sites: one call of each pair, and the overlapping pair.
const SITES: usize = PAIRS + 2;

/// What the program of [`program`] holds besides its pairs.
#[derive(Clone, Copy, PartialEq)]
enum Extra {
    None,
    /// `main` also reads its own binary and works in proportion to its zero bytes: code no
    /// site names that every build changes, as a flip's effect on its neighbours' code would.
    Spin,
    /// A hot call (`hleaf` in `hmid`) whose caller an `always_inline` attribute inlines into
    /// `hosted`, as brotli's `BROTLI_INLINE` functions are: no decision moves that call, but
    /// discovery reads it, so the flip's footprint holds `hosted`.
    Hosted,
    /// A call (`fleaf` in `fmid`) whose inlining changes what another function does:
    /// `fleaf` sets a flag where `__builtin_constant_p` sees its argument constant, which it
    /// does once inlined into `fmid`, and `flagreader` works forty times longer while the flag
    /// is set (its output the same): a change no footprint can name, as an interaction of
    /// flips would be.
    Flagged,
}

/// A C program of [`PAIRS`] independent calls, and an overlapping pair (`inner` called by
/// `middle`, `middle` by `outer`: a flip of either changes `middle` and `outer`), and `extra`.
/// The pair's calls run less often than any other (`outer` loops a tenth as long), so
/// screening, hottest first, reaches them last.
fn program(extra: Extra) -> String {
    let spin = extra == Extra::Spin;
    // No libc call but printf's and spin's: a header's inline wrapper (atoi) would be a site
    // whose flip also moves the loader's relocations, which no site names.
    let mut c = String::from("#include <stdio.h>\n");
    for k in 0..PAIRS {
        c += &format!(
            "static int leaf{k}(int x) {{ return (x ^ {k}) * {m} + (x >> {s}); }}\n\
             __attribute__((noinline)) static long work{k}(int n) {{\n  long s = 0;\n  \
             for (int i = 0; i < n * {r}; i++) s += leaf{k}(i);\n  return s;\n}}\n",
            m = k + 3,
            s = k % 4 + 1,
            r = k + 1,
        );
    }
    c += "static int inner(int x) { return x * x + 1; }\n\
          static int middle(int x) { int s = 0; for (int i = 0; i < 4; i++) s += inner(x + i); return s; }\n\
          __attribute__((noinline)) static long outer(int n) { long s = 0; for (int i = 0; i < n / 10; i++) s += middle(i); return s; }\n";
    if spin {
        c += "__attribute__((noinline)) static long spin(const char *self) {\n  \
              FILE *f = fopen(self, \"rb\");\n  volatile long acc = 0;\n  int c;\n  \
              while ((c = fgetc(f)) != EOF) if (c == 0) for (int j = 0; j < 40; j++) acc += j;\n  \
              fclose(f);\n  return acc;\n}\n";
    }
    let mut works: Vec<String> = (0..PAIRS)
        .map(|k| format!("work{k}"))
        .chain(["outer".to_string()])
        .collect();
    if extra == Extra::Hosted {
        c += "static int hleaf(int x) { return (x ^ 77) * 13 + (x >> 3); }\n\
              static inline __attribute__((always_inline)) long hmid(int n) {\n  \
              long s = 0;\n  for (int i = 0; i < n * 40; i++) s += hleaf(i);\n  return s;\n}\n\
              __attribute__((noinline)) static long hosted(int n) { return hmid(n) + 1; }\n";
        works.push("hosted".to_string());
    }
    if extra == Extra::Flagged {
        c += "static volatile int flagged;\n\
              static int fleaf(int x) { if (__builtin_constant_p(x)) flagged = 1; return x * 7 + 1; }\n\
              __attribute__((noinline)) static long fmid(int n) {\n  \
              long s = 0;\n  for (int i = 0; i < n; i++) s += fleaf(5);\n  return s;\n}\n\
              __attribute__((noinline)) static long flagreader(int n) {\n  \
              volatile long s = 0;\n  for (int i = 0; i < n * (flagged ? 40 : 1); i++) s += i ^ 3;\n  \
              return 1;\n}\n";
        works.extend(["fmid".to_string(), "flagreader".to_string()]);
    }
    c += &format!(
        "static long (*volatile works[])(int) = {{ {} }};\n",
        works.join(", ")
    );
    c += &format!(
        "int main(int argc, char **argv) {{\n  int n = 0;\n  \
         for (const char *p = argv[1]; *p; p++) n = n * 10 + (*p - '0');\n  long s = 0;\n  \
         for (int k = 0; k < {}; k++) s += works[k](n);\n",
        works.len()
    );
    if spin {
        c += "  s += spin(argv[0]) > 0;\n";
    }
    if extra == Extra::Flagged {
        // A call whose argument is never constant: fleaf's one constant argument would
        // otherwise reach its own body, inlined or not.
        c += "  s += fleaf(argc);\n";
    }
    c += "  printf(\"%ld\\n\", s);\n  return 0;\n}\n";
    c
}

/// A campaign over the program (`spin` as [`program`] says) with `experiments` (the
/// `(experiments ...)` field's entries), counted by callgrind.
fn config(experiments: &str) -> String {
    format!(
        r#"(campaign
  (name effects)
  (store "store")
  (objective (metric instructions) (statistic median))
  (runs (warmup 0) (min 1) (max 1))
  (experiments
    {experiments})
  (benchmarks
    ((name prog) (kind llvm-inline) (compiler clang) (sources "prog")
     (build ("clang" "-O2" "-g" "main.c" "-o" "bench")) (run ("./bench" "2000")) (timeout-s 60)))
  (workers (local (slots 2))))
"#
    )
}

/// A scratch folder with the program (`extra` as [`program`] says) in `prog` and `config`.
fn setup(extra: Extra, config: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("prog")).unwrap();
    std::fs::write(dir.path().join("prog/main.c"), program(extra)).unwrap();
    std::fs::write(dir.path().join("campaign.sexp"), config).unwrap();
    dir
}

/// Whether this machine has what the tests need, else a skip said.
fn can_run() -> bool {
    if !have("clang") || !have_valgrind() {
        skip("clang or valgrind is not installed (inlining sites, callgrind's counts)");
        return false;
    }
    true
}

/// The `effects` table's rows of `dir`'s store, as JSON objects.
fn effects(dir: &Path) -> Vec<serde_json::Value> {
    effects_of(dir, "store")
}

/// The `effects` table's rows of the store `store` in `dir`, as JSON objects.
fn effects_of(dir: &Path, store: &str) -> Vec<serde_json::Value> {
    let out = run_kiln(
        dir,
        &["export", store, "--table", "effects", "--format", "jsonl"],
    );
    assert!(out.status.success(), "{}", text(&out));
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The rows of `experiment` whose estimate is `estimate`, by site.
fn rows_of<'a>(
    rows: &'a [serde_json::Value],
    experiment: &str,
    estimate: &str,
) -> BTreeMap<String, &'a serde_json::Value> {
    rows.iter()
        .filter(|r| r["experiment"] == experiment && r["estimate"] == estimate)
        .map(|r| (r["site"].as_str().unwrap().to_string(), r))
        .collect()
}

/// The program screened from `baseline` (a decision file; stock where `None`) alone and in
/// shared builds: the store's folder, every site measured both ways.
fn screened_both_ways(baseline: Option<&str>) -> tempfile::TempDir {
    let start = baseline.map_or(String::new(), |file| format!(" (baseline {file:?})"));
    let dir = setup(
        Extra::None,
        &config(&format!(
            "((name alone) (benchmark prog) (search (screening (steps 12))) (seed 1){start})\n    \
             ((name shared) (benchmark prog) (search (screening (steps 4) (flips-per-step 8))) \
             (seed 1){start})"
        )),
    );
    if let Some(file) = baseline {
        write_context(dir.path(), file);
    }
    let out = run_kiln(dir.path(), &["run", "campaign.sexp"]);
    assert!(out.status.success(), "{}", text(&out));
    // Screening chains end by saying what they measured, never a best they could not move to.
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(said.matches("effects of chain 0").count(), 2, "{said}");
    assert!(!said.contains("best of chain"), "{said}");
    // `kiln status` says the same where an annealing chain's acceptance stands.
    let status = run_kiln(dir.path(), &["status", "store", "--json"]);
    let report: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    let chains = report["chains"].as_array().unwrap();
    let alone = chains.iter().find(|c| c["experiment"] == "alone").unwrap();
    let rows = rows_of(&effects(dir.path()), "alone", "alone").len();
    assert_eq!(alone["effects"]["measured"], rows, "{report}");
    let table = text(&run_kiln(dir.path(), &["status", "store"]));
    assert!(table.contains(&format!("{rows} effects (")), "{table}");
    dir
}

/// A decision file `file` in `dir` that takes four of the program's inlined calls out.
fn write_context(dir: &Path, file: &str) {
    let out = run_kiln(dir, &["sites", "campaign.sexp", "prog", "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let sites: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let values: Vec<String> = sites["points"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|p| p["id"].as_str())
        .filter(|id| id.starts_with("leaf"))
        .take(4)
        .map(|id| format!("({id:?} no-inline)"))
        .collect();
    let text = format!(
        "(decisions (benchmark prog) (values {}))\n",
        values.join(" ")
    );
    std::fs::write(dir.join(file), text).unwrap();
}

/// Every site of the store's `shared` experiment was measured (in a shared build or alone), and
/// each shared-build estimate equals the site's one-flip measurement of experiment `alone`.
fn assert_shared_equals_alone(rows: &[serde_json::Value]) {
    let alone = rows_of(rows, "alone", "alone");
    let shared = rows_of(rows, "shared", "shared-build");
    assert_eq!(alone.len(), SITES, "every site alone: {alone:?}");
    let shared_alone = rows_of(rows, "shared", "alone");
    let mut measured: Vec<&String> = shared.keys().chain(shared_alone.keys()).collect();
    measured.sort();
    assert_eq!(measured, alone.keys().collect::<Vec<_>>());
    for (site, row) in &shared {
        assert_eq!(row["separable"], true, "{row}");
        assert_eq!(
            row["residual"], 0.0,
            "nothing changed but the flips' own code: {row}"
        );
        let (got, want) = (
            row["effect"].as_f64().unwrap(),
            alone[site]["effect"].as_f64().unwrap(),
        );
        assert!(
            (got - want).abs() < 1e-12,
            "{site}: shared build {got}, alone {want}"
        );
    }
    assert!(
        alone
            .values()
            .any(|r| r["effect"].as_f64().unwrap().abs() > 1e-3),
        "some flip moves the count: {alone:?}"
    );
}

#[test]
fn shared_builds_measure_each_flip_as_alone_and_never_build_overlapping_flips_together() {
    if !can_run() {
        return;
    }
    let dir = screened_both_ways(None);
    let rows = effects(dir.path());
    assert_shared_equals_alone(&rows);
    // Three builds hold them all: the overlapping pair in different ones (`middle`'s flip
    // alone, as the last), the fourth repeats the first.
    assert_eq!(rows_of(&rows, "shared", "shared-build").len(), SITES - 1);
    assert!(rows.iter().all(|r| r["context"] == "stock"));
    assert_caller_code_with_and_without(&rows);
    // The overlapping pair: measured, never in one build.
    for step in stored_steps(dir.path()) {
        let sites: Vec<&str> = step.diff.0.keys().map(|s| s.as_str()).collect();
        let pair = sites
            .iter()
            .filter(|s| s.starts_with("inner @") || s.starts_with("middle @"));
        assert!(pair.count() <= 1, "{sites:?}");
    }
}

#[test]
fn screening_ends_where_no_build_of_min_flips_is_left() {
    if !can_run() {
        return;
    }
    // The builds hold 8 flips, then the 3 left but `middle`'s, then `middle`'s alone: with
    // (min-flips 2) the third is never built and the chain ends, complete, after two.
    // (plan::attribution's tests: a site whose build would be thin, left out before others.)
    let dir = setup(
        Extra::None,
        &config(
            "((name shared) (benchmark prog) \
             (search (screening (steps 4) (flips-per-step 8) (min-flips 2))) (seed 1))",
        ),
    );
    let out = run_kiln(dir.path(), &["run", "campaign.sexp"]);
    assert!(out.status.success(), "{}", text(&out));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains(
            "ended at step 2: no build of (min-flips 2) is left (sites not built: 1, each \
             sharing functions with too many others)"
        ),
        "{said}"
    );
    assert_eq!(stored_steps(dir.path()).len(), 2);
    let rows = effects(dir.path());
    assert_eq!(rows_of(&rows, "shared", "shared-build").len(), SITES - 1);
    let status = run_kiln(dir.path(), &["status", "store", "--json"]);
    let report: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    assert_eq!(report["phase"], "finished", "{report}");
    assert_eq!(report["chains"][0]["total"], 2, "{report}");
    let table = text(&run_kiln(dir.path(), &["status", "store"]));
    assert!(
        table.contains("shared/chain 0 ended at step 2: no build of (min-flips 2) is left"),
        "{table}"
    );
    // A build cannot hold more than flips-per-step: a min-flips above it is refused.
    let bad = config(
        "((name shared) (benchmark prog) \
         (search (screening (steps 4) (flips-per-step 8) (min-flips 9))) (seed 1))",
    );
    std::fs::write(dir.path().join("bad.sexp"), bad).unwrap();
    let out = run_kiln(dir.path(), &["run", "bad.sexp"]);
    assert!(!out.status.success());
    assert!(
        text(&out).contains("(min-flips 9) is more than (flips-per-step 8)"),
        "{}",
        text(&out)
    );
}

/// Each `leafK` flip of the shared builds takes the inline out of `workK`: the caller's code
/// with the flip keeps a call it did not have and is another size; around stock, its code
/// before the flip is the stock build's that discovery read. One-flip screening reads no code.
fn assert_caller_code_with_and_without(rows: &[serde_json::Value]) {
    let count = |row: &serde_json::Value, column: &str| row[column].as_u64().unwrap();
    let shared = rows_of(rows, "shared", "shared-build");
    let leaves: Vec<_> = shared
        .iter()
        .filter(|(site, _)| site.starts_with("leaf"))
        .collect();
    assert_eq!(leaves.len(), PAIRS, "{leaves:?}");
    for (site, row) in leaves {
        assert_eq!(row["value"], "no-inline", "{row}");
        let calls = (
            count(row, "caller_start_calls"),
            count(row, "caller_flipped_calls"),
        );
        assert_eq!(
            calls.1,
            calls.0 + 1,
            "{site}: a call left with the flip: {row}"
        );
        let size = ["caller_start_instructions", "caller_flipped_instructions"];
        assert_ne!(count(row, size[0]), count(row, size[1]), "{site}: {row}");
        for kind in ["instructions", "vector", "calls", "loops"] {
            let stock = format!("caller_code_{kind}");
            let start = format!("caller_start_{kind}");
            assert_eq!(row[&stock], row[&start], "{site}: {kind}: {row}");
        }
    }
    let alone = rows_of(rows, "alone", "alone");
    assert!(alone
        .values()
        .all(|r| r["caller_flipped_instructions"].is_null()));
}

/// Effects in context: the same around a decision file that is not stock's, which the
/// `effects` table names.
#[test]
fn shared_builds_measure_flips_around_another_context_as_alone() {
    if !can_run() {
        return;
    }
    let dir = screened_both_ways(Some("context.sexp"));
    let rows = effects(dir.path());
    assert_shared_equals_alone(&rows);
    assert!(
        rows.iter().all(|r| r["context"] == "context.sexp"),
        "{rows:?}"
    );
}

/// Effects around a random set beside those around stock: `(each-benchmark (suffix random)
/// (baseline (random (flips 3))) ...)` names its experiment `prog-random`, starts it from stock
/// with three sites moved (the same three in a second campaign of the same seed), and the
/// `effects` table says each row's context.
#[test]
fn screening_around_a_random_start_says_its_context_and_draws_it_again() {
    if !can_run() {
        return;
    }
    let experiments =
        "(each-benchmark (search (screening (steps 2) (flips-per-step 8))) (seed 1))\n    \
        (each-benchmark (suffix random) (baseline (random (flips 3))) \
        (search (screening (steps 2) (flips-per-step 8))) (seed 5))";
    let started = || {
        let dir = setup(Extra::None, &config(experiments));
        let out = run_kiln(dir.path(), &["run", "campaign.sexp"]);
        assert!(out.status.success(), "{}", text(&out));
        let rows = effects(dir.path());
        for (experiment, context) in [("prog", "stock"), ("prog-random", "random 3 flips")] {
            let of: Vec<_> = rows
                .iter()
                .filter(|r| r["experiment"] == experiment)
                .collect();
            assert!(!of.is_empty(), "{experiment}: {rows:?}");
            assert!(of.iter().all(|r| r["context"] == context), "{of:?}");
        }
        let store =
            kiln_controller::store::Store::open_existing(&dir.path().join("store")).unwrap();
        let info = store.experiment("prog-random").unwrap().unwrap();
        let moved = info.baseline.decisions.diff_from(&info.discovery.baseline);
        assert_eq!(moved.0.len(), 3, "{moved:?}");
        // One discovery for both experiments of the program.
        let log = std::fs::read_to_string(dir.path().join("store/kiln.log")).unwrap();
        assert_eq!(
            log.matches("discovery build of 'prog' started").count(),
            1,
            "{log}"
        );
        moved
    };
    assert_eq!(started(), started());
}

#[test]
fn flips_whose_build_changed_more_than_their_own_code_are_measured_alone() {
    if !can_run() {
        return;
    }
    let dir = setup(
        Extra::Spin,
        &config(
            "((name shared) (benchmark prog) (search (screening (steps 40) (flips-per-step 8))) (seed 1))",
        ),
    );
    let out = run_kiln(dir.path(), &["run", "campaign.sexp"]);
    assert!(out.status.success(), "{}", text(&out));
    let rows = effects(dir.path());
    let shared = rows_of(&rows, "shared", "shared-build");
    let alone = rows_of(&rows, "shared", "alone");
    let mixed: Vec<&String> = shared
        .iter()
        .filter(|(_, r)| r["separable"] == false)
        .map(|(site, _)| site)
        .collect();
    assert!(
        !mixed.is_empty(),
        "the binary's bytes moved spin's count: {shared:?}"
    );
    for site in mixed {
        let (row, alone) = (shared[site], &alone.get(site));
        assert!(row["residual"].as_f64().unwrap() > 1e-4, "{row}");
        assert!(alone.is_some(), "{site} was measured alone too: {alone:?}");
    }
}

/// A flip inside a function an attribute always inlines (`hleaf @ hmid`, `hmid` always inlined
/// into `hosted`) changes `hosted`'s code: its footprint holds `hosted`, so its shared build's
/// effect is read there and equals the flip measured alone, and nothing is measured again.
#[test]
fn a_flip_in_an_always_inlined_function_is_read_from_the_function_it_runs_in() {
    if !can_run() {
        return;
    }
    let dir = setup(
        Extra::Hosted,
        &config(
            "((name alone) (benchmark prog) (search (screening (steps 13))) (seed 1))\n    \
             ((name shared) (benchmark prog) (search (screening (steps 2) (flips-per-step 16))) \
             (seed 1))",
        ),
    );
    let out = run_kiln(dir.path(), &["run", "campaign.sexp"]);
    assert!(out.status.success(), "{}", text(&out));
    let rows = effects(dir.path());
    let alone = rows_of(&rows, "alone", "alone");
    let shared = rows_of(&rows, "shared", "shared-build");
    let hosted = |rows: &BTreeMap<String, &serde_json::Value>| {
        let found = rows.iter().find(|(s, _)| s.starts_with("hleaf @ hmid"));
        found.map(|(_, r)| r["effect"].as_f64().unwrap())
    };
    let (got, want) = (hosted(&shared), hosted(&alone));
    assert!(want.is_some_and(|e| e.abs() > 1e-3), "{alone:?}");
    assert!(
        got.zip(want).is_some_and(|(g, w)| (g - w).abs() < 1e-12),
        "shared build {got:?}, alone {want:?}"
    );
    assert!(
        shared.values().all(|r| r["separable"] == true),
        "{shared:?}"
    );
    let again = rows_of(&rows, "shared", "alone");
    assert!(!again.keys().any(|s| s.starts_with("hleaf")), "{again:?}");
}

/// One flip that changes a function its footprint misses (`fleaf @ fmid`, which sets the flag
/// `flagreader` reads) spoils its first build; the build is made again in two halves, and only
/// the half that holds it has its flips measured alone: the other half's are read from its build.
#[test]
fn a_build_spoilt_by_one_flip_is_built_again_in_halves() {
    if !can_run() {
        return;
    }
    let dir = setup(
        Extra::Flagged,
        &config(
            "((name shared) (benchmark prog) (search (screening (steps 10) (flips-per-step 16))) (seed 1))",
        ),
    );
    let out = run_kiln(dir.path(), &["run", "campaign.sexp"]);
    assert!(out.status.success(), "{}", text(&out));
    let steps = stored_steps(dir.path());
    let flips = |i: usize| -> Vec<String> {
        steps[i]
            .diff
            .0
            .keys()
            .map(|s| s.as_str().to_string())
            .collect()
    };
    let spoiler = |flips: &[String]| flips.iter().any(|s| s.starts_with("fleaf @ fmid"));
    // Every leaf, one of the overlapping pair and the spoiler.
    let first = flips(0);
    assert!(first.len() == PAIRS + 2 && spoiler(&first), "{first:?}");
    let halves: Vec<Vec<String>> = (1..steps.len())
        .map(flips)
        .filter(|f| f.len() == first.len() / 2)
        .collect();
    assert_eq!(halves.len(), 2, "{halves:?}");
    assert_eq!(
        [halves[0].clone(), halves[1].clone()].concat().len(),
        first.len()
    );
    let (spoilt, clean) = match spoiler(&halves[0]) {
        true => (&halves[0], &halves[1]),
        false => (&halves[1], &halves[0]),
    };
    let rows = effects(dir.path());
    let alone = rows_of(&rows, "shared", "alone");
    let shared = rows_of(&rows, "shared", "shared-build");
    let mut measured_alone: Vec<&String> = alone.keys().filter(|s| first.contains(s)).collect();
    measured_alone.sort();
    let mut expected: Vec<&String> = spoilt.iter().collect();
    expected.sort();
    assert_eq!(measured_alone, expected, "only the spoilt half one a step");
    for site in clean {
        assert_eq!(
            shared[site]["separable"], true,
            "{site}: read from its half"
        );
    }
    for site in spoilt {
        assert_eq!(shared[site]["separable"], false, "{site}");
    }
    // `kiln show` says what the step was, and its time on the worker beside its time queued.
    let shown = text(&run_kiln(dir.path(), &["show", "store", "shared/0/0"]));
    assert!(
        shown.contains("step 0: screening, a shared build, from the baseline"),
        "{shown}"
    );
    assert!(
        shown.contains(" s on the worker, ") && shown.contains(" s from its dispatch"),
        "{shown}"
    );
}

#[test]
fn killed_and_resumed_shared_screening_equals_an_uninterrupted_one() {
    if !can_run() {
        return;
    }
    let config = config(
        "((name shared) (benchmark prog) (search (screening (steps 18) (flips-per-step 3))) (seed 1) (parallel 2))",
    );
    resumes_exactly(|c| setup(Extra::None, c), &config, 18);
}

/// The sites of `rows` of experiment `experiment`.
fn sites_of(rows: &[serde_json::Value], experiment: &str) -> Vec<String> {
    let mut sites: Vec<String> = rows
        .iter()
        .filter(|r| r["experiment"] == experiment)
        .map(|r| r["site"].as_str().unwrap().to_string())
        .collect();
    sites.sort();
    sites.dedup();
    sites
}

#[test]
fn a_campaign_in_a_new_store_screens_only_the_sites_its_effects_table_lacks() {
    if !can_run() {
        return;
    }
    let screening = |steps: u32, skip: &str| {
        format!("(search (screening (steps {steps}) (flips-per-step 4){skip})) (seed 1)")
    };
    let dir = setup(
        Extra::None,
        &config(&format!(
            "((name shared) (benchmark prog) {})",
            screening(1, "")
        )),
    );
    let out = run_kiln(dir.path(), &["run", "campaign.sexp"]);
    assert!(out.status.success(), "{}", text(&out));
    let table = ["--format", "parquet", "-o", "measured.parquet"];
    let out = run_kiln(
        dir.path(),
        &[&["export", "store", "--table", "effects"], &table[..]].concat(),
    );
    assert!(out.status.success(), "{}", text(&out));
    let before = sites_of(&effects(dir.path()), "shared");
    assert!(!before.is_empty() && before.len() < SITES, "{before:?}");

    // The same experiment in a new store, told what the table holds; another name screens
    // its sites again; a table that cannot be read fails that experiment's preparation
    // alone, and one that is not there is refused before anything runs.
    let skip = |file: &str| format!(" (skip-measured {file:?})");
    let again = |lost: &str| {
        config(&format!(
            "((name shared) (benchmark prog) {})\n    ((name renamed) (benchmark prog) {})\n    \
             ((name lost) (benchmark prog) {})",
            screening(6, &skip("measured.parquet")),
            screening(1, &skip("measured.parquet")),
            screening(1, &skip(lost)),
        ))
        .replace(r#"(store "store")"#, r#"(store "again")"#)
    };
    std::fs::write(dir.path().join("again.sexp"), again("nowhere.parquet")).unwrap();
    let checked = run_kiln(dir.path(), &["check", "again.sexp"]);
    assert_eq!(checked.status.code(), Some(2), "{}", text(&checked));
    assert!(
        text(&checked).contains("experiment lost: (skip-measured ...): no file nowhere.parquet")
            && !text(&checked).contains("experiment shared:"),
        "{}",
        text(&checked)
    );
    std::fs::write(dir.path().join("broken.parquet"), "not a table").unwrap();
    std::fs::write(dir.path().join("again.sexp"), again("broken.parquet")).unwrap();
    let out = run_kiln(dir.path(), &["run", "again.sexp"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("(skip-measured \"broken.parquet\")"),
        "{}",
        text(&out)
    );
    let rows = effects_of(dir.path(), "again");
    let after = sites_of(&rows, "shared");
    assert!(
        after.iter().all(|s| !before.contains(s)),
        "{before:?} {after:?}"
    );
    assert_eq!(before.len() + after.len(), SITES, "{before:?} {after:?}");
    assert_eq!(
        sites_of(&rows, "renamed"),
        before,
        "its own name: the hottest again"
    );
    assert!(sites_of(&rows, "lost").is_empty());
}
