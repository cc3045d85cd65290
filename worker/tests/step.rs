//! Steps in-process: builds that fail or hang, decision files, confinement.

use std::path::PathBuf;

use kiln_protocol::bundle::{Bundle, BundleFile};
use kiln_protocol::config::benchmark::{BenchmarkKind, BenchmarkSpec, OutputCheck, RunPolicy};
use kiln_protocol::decision::{DecisionFile, DecisionPoint, DecisionSet, DecisionValue, SiteId};
use kiln_protocol::message::{StepId, StepOutcome, StepRequest};
use kiln_protocol::Metric;
use kiln_worker::launch::{self, output_std, CancelToken};
use kiln_worker::step::{run_step, SlotState, Workspace};

use crate::common::{have, skip};

fn spec(build: &[&str], run: &[&str]) -> BenchmarkSpec {
    BenchmarkSpec {
        name: "knob-test".into(),
        kind: BenchmarkKind::Knobs {
            points: vec![DecisionPoint {
                id: SiteId::from("tile-size"),
                domain: vec![DecisionValue::Int(8), DecisionValue::Int(16)],
            }],
        },
        sources: PathBuf::from("unused"),
        build: build.iter().map(|s| s.to_string()).collect(),
        run: run.iter().map(|s| s.to_string()).collect(),
        timeout_s: 10.0,
        build_timeout_s: 1.0,
        discovery_cpu_s: 60.0,
        build_memory_bytes: 8 << 30,
        env: Vec::new(),
        pass_env: Vec::new(),
        dependency_crates: Vec::new(),
        check_output: OutputCheck::Stdout,
        limits: Default::default(),
        container: None,
    }
}

struct Fixture {
    _dir: tempfile::TempDir,
    ws: Workspace,
    bundle: Bundle,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let ws = crate::common::workspace(dir.path());
    let bundle = Bundle::new(vec![BundleFile {
        path: "main.sh".into(),
        executable: true,
        contents: b"#!/bin/sh\necho tile=$1\n".to_vec(),
        modified_ns: None,
    }]);
    ws.cache.store(&bundle).unwrap();
    Fixture {
        _dir: dir,
        ws,
        bundle,
    }
}

fn request(f: &Fixture, spec: BenchmarkSpec) -> StepRequest {
    StepRequest {
        id: StepId(1),
        slot: 0,
        cpus: Vec::new(),
        gpus: Vec::new(),
        benchmark: spec,
        bundle: f.bundle.hash,
        decisions: DecisionSet([(SiteId::from("tile-size"), DecisionValue::Int(16))].into()),
        runs: RunPolicy {
            warmup: 0,
            min: 2,
            max: 2,
            target_rel_ci: 0.5,
            max_time_s: 60.0,
        },
        objective: Metric::WallTime,
        expected_output: None,
        reuse_build: false,
        function_costs: false,
        race: None,
    }
}

fn step(f: &Fixture, req: &StepRequest) -> kiln_protocol::StepResult {
    run_step(
        req,
        &f.ws,
        &mut SlotState::default(),
        &CancelToken::new().unwrap(),
    )
}

#[test]
fn knobs_reach_arguments_environment_and_the_decision_file() {
    let f = fixture();
    let s = spec(
        &[
            "sh",
            "-c",
            "cp {decisions} seen.sexp; echo $KILN_KNOB_TILE_SIZE > env.txt",
        ],
        &["./main.sh", "{tile-size}"],
    );
    let r = step(&f, &request(&f, s));
    assert_eq!(r.measurement.outcome, StepOutcome::Ok, "{r:?}");
    assert_eq!(
        r.measurement.output_digest,
        Some(kiln_protocol::ContentHash::of(b"tile=16\n"))
    );
    let work = f.ws.rundir.join("slots/0/work");
    assert_eq!(
        std::fs::read_to_string(work.join("env.txt")).unwrap(),
        "16\n"
    );
    let seen = DecisionFile::parse(
        &std::fs::read_to_string(work.join("seen.sexp")).unwrap(),
        "seen",
    )
    .unwrap();
    assert_eq!(seen.benchmark.as_deref(), Some("knob-test"));
    assert_eq!(
        seen.set.get(&SiteId::from("tile-size")),
        Some(&DecisionValue::Int(16))
    );
    let build = r.build.unwrap();
    assert!(
        build.binary_hash.is_some(),
        "the run program in the work folder is hashed"
    );
}

/// A step over `bundle`'s files with a knob benchmark that has no build and runs `run`, in
/// `slot` (kept between steps as the worker keeps it): the result and the inode of `probe`.
fn unbuilt_step(
    f: &Fixture,
    slot: &mut SlotState,
    run: &str,
    tile: i64,
) -> (kiln_protocol::StepResult, u64) {
    use std::os::unix::fs::MetadataExt;
    let mut req = request(f, spec(&[], &["sh", "-c", run]));
    req.decisions = DecisionSet([(SiteId::from("tile-size"), DecisionValue::Int(tile))].into());
    (req.runs.min, req.runs.max) = (1, 1);
    let r = run_step(&req, &f.ws, slot, &CancelToken::new().unwrap());
    assert_eq!(r.measurement.outcome, StepOutcome::Ok, "{r:?}");
    let probe = f.ws.rundir.join("slots/0/work/tree/f1999");
    (r, std::fs::metadata(probe).unwrap().ino())
}

/// A benchmark with no build runs in the copy of its sources its slot laid out, while its
/// runs write nothing there: the next step finds the same files (not copied again) with its
/// own decision file. A benchmark whose runs write into the folder gets a fresh copy.
#[test]
fn a_slot_reuses_the_sources_it_laid_out_until_a_run_writes_into_them() {
    let mut f = fixture();
    let mut files = f.bundle.files.clone();
    files.extend((0..2000).map(|i| BundleFile {
        path: format!("tree/f{i}"),
        executable: false,
        contents: format!("{i}\n").into_bytes(),
        modified_ns: None,
    }));
    f.bundle = Bundle::new(files);
    f.ws.cache.store(&f.bundle).unwrap();

    let mut slot = SlotState::default();
    let reads = "cat decisions.sexp";
    let (first, laid) = unbuilt_step(&f, &mut slot, reads, 8);
    let (second, again) = unbuilt_step(&f, &mut slot, reads, 16);
    let (_, third) = unbuilt_step(&f, &mut slot, reads, 8);
    assert_eq!(
        (laid, laid),
        (again, third),
        "a later step copied the sources again"
    );
    assert_ne!(
        first.measurement.output_digest, second.measurement.output_digest,
        "each step's own decision file"
    );

    let writes = "if [ -e out.txt ]; then echo stale; else echo fresh; fi; echo x > out.txt";
    let (before, _) = unbuilt_step(&f, &mut slot, writes, 8);
    let (after, _) = unbuilt_step(&f, &mut slot, writes, 8);
    let fresh = Some(kiln_protocol::ContentHash::of(b"fresh\n"));
    assert_eq!(
        (
            before.measurement.output_digest,
            after.measurement.output_digest
        ),
        (fresh, fresh)
    );
}

#[test]
fn a_failing_build_is_build_failed_with_its_log() {
    let f = fixture();
    let s = spec(
        &["sh", "-c", "echo 'main.c:3: error: oops' >&2; exit 2"],
        &["./main.sh"],
    );
    let r = step(&f, &request(&f, s));
    match &r.measurement.outcome {
        StepOutcome::BuildFailed { code, log_tail } => {
            assert_eq!(*code, Some(2));
            assert!(log_tail.contains("oops"), "{log_tail:?}");
        }
        other => panic!("expected build-failed, got {other:?}"),
    }
    assert!(
        r.measurement.runs.is_empty(),
        "nothing runs after a failed build"
    );
}

#[test]
fn a_build_past_its_memory_limit_is_killed_and_fails_naming_the_limit() {
    let f = fixture();
    // tail keeps the last 1 GiB of a pipe in memory: the group's resident
    // memory grows until the limit kills it, long before the timeout.
    let mut s = spec(
        &[
            "sh",
            "-c",
            "head -c 1G /dev/zero | tail -c 1G; echo finished",
        ],
        &["./main.sh"],
    );
    s.build_memory_bytes = 64 << 20;
    s.build_timeout_s = 60.0;
    let t = std::time::Instant::now();
    let r = step(&f, &request(&f, s));
    match &r.measurement.outcome {
        StepOutcome::BuildFailed { code, log_tail } => {
            assert_eq!(*code, None);
            assert!(
                log_tail.contains("more than 64 MiB") && log_tail.contains("build-memory"),
                "{log_tail:?}"
            );
            assert!(!log_tail.contains("finished"), "{log_tail:?}");
        }
        other => panic!("expected build-failed, got {other:?}"),
    }
    assert!(t.elapsed().as_secs_f64() < 30.0);
}

#[test]
fn a_checksum_command_checks_the_files_a_run_writes() {
    let f = fixture();
    let mut s = spec(
        &[],
        &[
            "sh",
            "-c",
            "echo \"$KILN_KNOB_TILE_SIZE\" > out.txt; echo done",
        ],
    );
    s.check_output = OutputCheck::Command(vec!["sha256sum".into(), "out.txt".into()]);
    let mut req = request(&f, s.clone());
    let first = step(&f, &req);
    assert_eq!(first.measurement.outcome, StepOutcome::Ok, "{first:?}");
    let expected = first
        .measurement
        .output_digest
        .expect("the command's output is checked");
    assert!(first
        .measurement
        .checked_output
        .as_deref()
        .is_some_and(|o| o.contains("out.txt")));

    // The same stdout, another file: caught.
    req.expected_output = Some(expected);
    req.decisions = DecisionSet([(SiteId::from("tile-size"), DecisionValue::Int(8))].into());
    let other = step(&f, &req);
    assert!(
        matches!(other.measurement.outcome, StepOutcome::WrongOutput { .. }),
        "{other:?}"
    );

    // A command that fails fails the run, saying why.
    s.check_output = OutputCheck::Command(vec!["sha256sum".into(), "missing.txt".into()]);
    let broken = step(&f, &request(&f, s));
    match &broken.measurement.outcome {
        StepOutcome::RunFailed { stderr_tail, .. } => assert!(
            stderr_tail.contains("check-output command 'sha256sum missing.txt' exited with 1")
                && stderr_tail.contains("missing.txt: No such file"),
            "{stderr_tail}"
        ),
        other => panic!("expected run-failed, got {other:?}"),
    }
}

#[test]
fn a_hanging_build_times_out() {
    let f = fixture();
    let s = spec(&["sh", "-c", "sleep 100"], &["./main.sh"]);
    let t = std::time::Instant::now();
    let r = step(&f, &request(&f, s));
    assert_eq!(
        r.measurement.outcome,
        StepOutcome::Timeout {
            phase: "build".into(),
            limit_s: 1.0
        }
    );
    assert!(t.elapsed().as_secs_f64() < 3.0);
}

#[test]
fn bad_requests_are_rejected() {
    let f = fixture();
    let mut s = spec(&[], &["./main.sh"]);
    s.check_output = OutputCheck::File("../../escape.txt".into());
    let r = step(&f, &request(&f, s));
    assert!(
        matches!(&r.measurement.outcome, StepOutcome::Rejected { reason } if reason.contains("escape.txt")),
        "{:?}",
        r.measurement.outcome
    );

    let mut req = request(&f, spec(&[], &["./main.sh"]));
    req.cpus = vec![4000];
    let r = step(&f, &req);
    assert!(
        matches!(&r.measurement.outcome, StepOutcome::Rejected { reason } if reason.contains("CPU 4000")),
        "{:?}",
        r.measurement.outcome
    );

    let mut s = spec(&[], &["./main.sh"]);
    s.timeout_s = f64::NAN;
    let r = step(&f, &request(&f, s));
    assert!(
        matches!(&r.measurement.outcome, StepOutcome::Rejected { reason } if reason.contains("timeout-s")),
        "{:?}",
        r.measurement.outcome
    );

    let mut req = request(&f, spec(&[], &["./main.sh"]));
    req.decisions = DecisionSet([(SiteId::from("tile-size"), DecisionValue::Int(3))].into());
    let r = step(&f, &req);
    assert!(
        matches!(r.measurement.outcome, StepOutcome::Rejected { .. }),
        "{:?}",
        r.measurement.outcome
    );
}

const INLINE_PROGRAM: &str = r#"#include <stdio.h>
#include <stdlib.h>
static int sq(int x) { return x * x; }
static int blend(int a, int b) { return sq(a) * 3 + b; }
static long transform(int n) {
  long r = 0;
  for (int i = 0; i < n; i++) r += blend(i, n);
  return r;
}
int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 1000;
  printf("%ld\n", transform(n));
  return 0;
}
"#;

#[test]
fn a_slots_gpus_are_the_only_ones_its_runs_see() {
    let f = fixture();
    let check = [
        "sh",
        "-c",
        "test \"$CUDA_VISIBLE_DEVICES\" = 1,3 && test \"$CUDA_DEVICE_ORDER\" = PCI_BUS_ID",
    ];
    let mut req = request(&f, spec(&[], &check));
    req.gpus = vec![1, 3];
    let r = step(&f, &req);
    assert_eq!(r.measurement.outcome, StepOutcome::Ok, "{r:?}");
    // Without GPUs for the slot, nothing is set (a run sees every GPU).
    req.gpus.clear();
    let r = step(&f, &req);
    assert_eq!(r.measurement.outcome.name(), "run-failed", "{r:?}");
}

/// The discovery of a clang benchmark of one source `file` (name, text), built with `build` and
/// run with `run`, with its bundle (stored in `ws`) and spec.
fn discovered(
    ws: &Workspace,
    file: (&str, &str),
    build: &[&str],
    run: &[&str],
) -> (Bundle, BenchmarkSpec, kiln_protocol::message::Discovery) {
    let bundle = Bundle::new(vec![BundleFile {
        path: file.0.into(),
        executable: false,
        contents: file.1.as_bytes().to_vec(),
        modified_ns: None,
    }]);
    ws.cache.store(&bundle).unwrap();
    let spec = inline_spec(build, run);
    let cancel = CancelToken::new().unwrap();
    let discovery =
        kiln_worker::step::discover(StepId(9), &spec, &bundle.hash, ws, &cancel, &|_| {}).unwrap();
    (bundle, spec, discovery)
}

/// An llvm-inline benchmark built by clang with `build` and run with `run`.
fn inline_spec(build: &[&str], run: &[&str]) -> BenchmarkSpec {
    BenchmarkSpec {
        name: "inline-test".into(),
        kind: BenchmarkKind::LlvmInline {
            compiler: kiln_protocol::config::benchmark::Compiler::Clang,
            fallback: kiln_protocol::config::benchmark::ReplayFallback::NeverInline,
        },
        sources: PathBuf::from("unused"),
        build: build.iter().map(|s| s.to_string()).collect(),
        run: run.iter().map(|s| s.to_string()).collect(),
        timeout_s: 10.0,
        build_timeout_s: 60.0,
        discovery_cpu_s: 60.0,
        build_memory_bytes: 8 << 30,
        env: Vec::new(),
        pass_env: Vec::new(),
        dependency_crates: Vec::new(),
        check_output: OutputCheck::Stdout,
        limits: Default::default(),
        container: None,
    }
}

/// A C++ lambda's name holds its file's path, and site ids hold such names: the sites discovery
/// found in its folder are the sites a step builds in a slot's (jsoncpp's and yaml-cpp's
/// baselines failed as decision mismatches at 48 and 98 such sites).
#[test]
fn sites_in_lambda_instances_are_the_same_in_every_build_folder() {
    if !have("clang++") {
        return skip("clang++ is not installed");
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = crate::common::workspace(dir.path());
    let program = r#"#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>
static int find(const std::vector<int>& v, int k) {
    return std::find_if(v.begin(), v.end(), [k](int x) { return x % 97 == k; }) - v.begin();
}
int main(int argc, char** argv) {
    std::vector<int> v;
    for (int i = 0; i < atoi(argv[1]); i++) v.push_back(i * 7);
    std::sort(v.begin(), v.end(), [](int a, int b) { return a % 13 < b % 13; });
    printf("%d\n", find(v, 5));
}
"#;
    // By its absolute path, as CMake names sources.
    let (bundle, spec, discovery) = discovered(
        &ws,
        ("main.cpp", program),
        &["sh", "-c", "clang++ -O2 \"$PWD/main.cpp\" -o bench"],
        &["./bench", "1000"],
    );
    let cancel = CancelToken::new().unwrap();
    let in_lambdas: Vec<&str> = discovery
        .points
        .iter()
        .map(|p| p.id.as_str())
        .filter(|id| id.contains("(lambda at "))
        .collect();
    assert!(!in_lambdas.is_empty(), "{discovery:?}");
    assert!(discovery.fixed.is_empty(), "{:?}", discovery.fixed);
    assert!(
        in_lambdas
            .iter()
            .all(|id| id.contains("(lambda at <work>/main.cpp:")),
        "{in_lambdas:?}"
    );
    let mut req = inline_request(spec, &bundle, discovery.baseline.clone());
    let mut slot = SlotState::default();
    let stock = run_step(&req, &ws, &mut slot, &cancel);
    assert_eq!(stock.measurement.outcome, StepOutcome::Ok, "{stock:?}");
    req.id = StepId(2);
    req.decisions = DecisionSet(
        discovery
            .points
            .iter()
            .map(|p| (p.id.clone(), DecisionValue::no_inline()))
            .collect(),
    );
    let none = run_step(&req, &ws, &mut slot, &cancel);
    assert_eq!(none.measurement.outcome, StepOutcome::Ok, "{none:?}");
}

/// clang 14 takes both decisions at calls LLVM's own heuristic never inlines (a variadic callee,
/// one that calls setjmp, a `noinline` one, a recursive call) when the replay file asks: such
/// sites are decision points, kept by both discovery probes, and a step with every decision
/// flipped from stock realises them all. A site the compiler would not take one decision at is
/// left out of the points with why (`Discovery::fixed`).
#[test]
fn sites_llvm_never_inlines_by_itself_are_decisions_under_replay() {
    if !have("clang") {
        return skip("clang is not installed");
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = crate::common::workspace(dir.path());
    let program = r#"#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
static jmp_buf env;
__attribute__((noinline)) static int bump(int x) { return x + 1; }
static int sq(int x) { if (x > 1000000) longjmp(env, 1); return x * bump(x); }
static int guarded(int (*f)(int), int x) {
    if (setjmp(env)) return -1;
    return f(x);
}
static int sum(int n, ...) {
    va_list ap;
    va_start(ap, n);
    int s = 0;
    for (int i = 0; i < n; i++) s += va_arg(ap, int);
    va_end(ap);
    return s;
}
static int fib(int n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }
int main(int argc, char **argv) {
    int n = atoi(argv[1]), t = 0;
    for (int i = 0; i < n; i++) t += guarded(sq, i % 100) + sum(3, i, i + 1, i + 2);
    printf("%d %d\n", t, fib(20));
    return 0;
}
"#;
    let (bundle, spec, discovery) = discovered(
        &ws,
        ("main.c", program),
        &["clang", "-O2", "main.c", "-o", "bench"],
        &["./bench", "1000"],
    );
    let cancel = CancelToken::new().unwrap();
    let ids: Vec<&str> = discovery.points.iter().map(|p| p.id.as_str()).collect();
    for callee in [
        "guarded @ main:",
        "sum @ main:",
        "bump @ sq:",
        "fib @ main:",
    ] {
        assert!(
            ids.iter().any(|id| id.starts_with(callee)),
            "{callee} among {ids:?}, left out: {:?}",
            discovery.fixed
        );
    }
    assert!(discovery.fixed.is_empty(), "{:?}", discovery.fixed);
    let flipped = kiln_worker::build::llvm_inline::flipped(&discovery.baseline);
    let req = inline_request(spec, &bundle, flipped);
    let r = run_step(&req, &ws, &mut SlotState::default(), &cancel);
    assert_eq!(r.measurement.outcome, StepOutcome::Ok, "{r:?}");
}

/// A one-run step of `spec` under `decisions` on slot 0.
fn inline_request(spec: BenchmarkSpec, bundle: &Bundle, decisions: DecisionSet) -> StepRequest {
    StepRequest {
        id: StepId(1),
        slot: 0,
        cpus: Vec::new(),
        gpus: Vec::new(),
        benchmark: spec,
        bundle: bundle.hash,
        decisions,
        runs: RunPolicy {
            warmup: 0,
            min: 1,
            max: 1,
            target_rel_ci: 0.5,
            max_time_s: 60.0,
        },
        objective: Metric::WallTime,
        expected_output: None,
        reuse_build: false,
        function_costs: false,
        race: None,
    }
}

#[test]
fn llvm_inline_discovery_and_steps_realise_decisions() {
    if !have("clang") {
        return skip("clang is not installed");
    }
    let dir = tempfile::tempdir().unwrap();
    let ws = crate::common::workspace(dir.path());
    let (bundle, spec, discovery) = discovered(
        &ws,
        ("main.c", INLINE_PROGRAM),
        &["clang", "-O2", "main.c", "-o", "bench"],
        &["./bench", "200"],
    );
    let cancel = CancelToken::new().unwrap();
    assert!(!discovery.points.is_empty(), "{discovery:?}");
    assert!(
        !ws.rundir.join("discover/9").exists(),
        "the discovery folder is removed"
    );

    let mut req = inline_request(spec, &bundle, discovery.baseline.clone());
    let mut slot = SlotState::default();
    let stock = run_step(&req, &ws, &mut slot, &cancel);
    assert_eq!(stock.measurement.outcome, StepOutcome::Ok, "{stock:?}");
    let build = stock.build.as_ref().unwrap();
    assert!(build.text_bytes.is_some_and(|t| t > 0));
    assert!(build.replay_file.as_ref().is_some_and(|r| !r.is_empty()));
    assert!(
        !build.log_tail.contains("remark"),
        "remarks are stripped: {}",
        build.log_tail
    );

    // Nothing inlined: a different binary, the same output.
    req.id = StepId(2);
    req.decisions = DecisionSet(
        discovery
            .points
            .iter()
            .map(|p| (p.id.clone(), DecisionValue::no_inline()))
            .collect(),
    );
    req.expected_output = stock.measurement.output_digest;
    let none = run_step(&req, &ws, &mut slot, &cancel);
    assert_eq!(none.measurement.outcome, StepOutcome::Ok, "{none:?}");
    assert_ne!(none.build.unwrap().binary_hash, build.binary_hash);

    // A site that does not exist cannot be realised.
    req.id = StepId(3);
    req.decisions =
        DecisionSet([(SiteId::from("nothing @ main:1:1"), DecisionValue::inline())].into());
    let bogus = run_step(&req, &ws, &mut slot, &cancel);
    assert!(
        matches!(
            bogus.measurement.outcome,
            StepOutcome::DecisionMismatch { .. }
        ),
        "{:?}",
        bogus.measurement.outcome
    );
    assert!(
        bogus.measurement.runs.is_empty(),
        "a mismatched build is not run"
    );

    // The stock decisions again, in another slot: the build is the cached
    // one, the binary the same, and its runs as good.
    req.id = StepId(4);
    req.slot = 1;
    req.decisions = discovery.baseline.clone();
    let again = run_step(&req, &ws, &mut SlotState::default(), &cancel);
    assert_eq!(again.measurement.outcome, StepOutcome::Ok, "{again:?}");
    let cached = again.build.as_ref().unwrap();
    assert!(cached.reused, "{cached:?}");
    assert_eq!(cached.binary_hash, build.binary_hash);
    let binary = std::fs::read(dir.path().join("slots/1/work/bench")).unwrap();
    assert_eq!(
        Some(kiln_protocol::ContentHash::of(&binary)),
        build.binary_hash
    );
    // A failed build is never cached: the bogus decisions are built again.
    req.id = StepId(5);
    req.decisions =
        DecisionSet([(SiteId::from("nothing @ main:1:1"), DecisionValue::inline())].into());
    let rebuilt = run_step(&req, &ws, &mut SlotState::default(), &cancel);
    assert!(!rebuilt.build.unwrap().reused);
}

#[test]
fn builds_see_the_workers_toolchain_and_passed_variables_and_runs_do_not() {
    // rustup's proxies and compilers under /opt are found through the
    // worker's PATH and HOME; runs keep the clean, documented environment.
    let var = |name: &str| std::env::var(name).unwrap();
    let f = fixture();
    let build = format!(
        "[ \"$PATH\" = '{}' ] && [ \"$HOME\" = '{}' ] && [ \"$CARGO_MANIFEST_DIR\" = '{}' ]",
        var("PATH"),
        var("HOME"),
        var("CARGO_MANIFEST_DIR")
    );
    let run = "[ \"$PATH\" = /usr/local/bin:/usr/bin:/bin ] && [ -z \"$CARGO_MANIFEST_DIR\" ] \
               && [ \"$HOME\" != \"$0\" ] && echo clean";
    let mut s = spec(&["sh", "-c", &build], &["sh", "-c", run, &var("HOME")]);
    s.pass_env = vec!["CARGO_MANIFEST_DIR".into()];
    let r = step(&f, &request(&f, s));
    assert_eq!(r.measurement.outcome, StepOutcome::Ok, "{r:?}");

    // A program the build's PATH lacks: the error says where it was looked for.
    let s = spec(&["no-such-compiler-kiln"], &["./main.sh"]);
    let r = step(&f, &request(&f, s));
    let StepOutcome::BuildFailed { log_tail, .. } = &r.measurement.outcome else {
        panic!("expected build-failed, got {:?}", r.measurement.outcome);
    };
    assert!(
        log_tail.contains(&format!("looked up on PATH={}", var("PATH"))),
        "{log_tail}"
    );
}

/// Runs `clang ARGS` through kiln's compiler wrapper, with a stand-in for the
/// real clang that logs its arguments and, given `--all`, spins or fails.
fn wrapped_compile(stand_in: &str, fallback: bool) -> (std::process::Output, String) {
    let dir = tempfile::tempdir().unwrap();
    let (wrap, real) = (dir.path().join("wrap"), dir.path().join("real"));
    std::fs::create_dir_all(&wrap).unwrap();
    std::fs::create_dir_all(&real).unwrap();
    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_kiln-worker"), wrap.join("clang")).unwrap();
    let log = dir.path().join("log");
    let script = format!("#!/bin/sh\necho \"$*\" >> {}\n{stand_in}\n", log.display());
    launch::writing(|| std::fs::write(real.join("clang"), script)).unwrap();
    std::fs::set_permissions(
        real.join("clang"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let mut cmd = std::process::Command::new("clang");
    cmd.args(["-O2", "-c", "x.c"])
        .env("PATH", format!("{}:/usr/bin:/bin", wrap.display()))
        .env("KILN_WRAP_PATH", &real)
        .env("KILN_WRAP_FLAGS", r#"["--all"]"#)
        .env("KILN_WRAP_CPU_S", "1");
    if fallback {
        cmd.env("KILN_WRAP_FALLBACK", r#"["--stock"]"#);
    }
    let out = output_std(&mut cmd).unwrap();
    (out, std::fs::read_to_string(log).unwrap_or_default())
}

#[test]
fn a_discovery_compile_past_its_limits_is_compiled_again_with_the_stock_flags() {
    // Spinning with every call inlined: the CPU limit stops it.
    let spin = "case \"$*\" in *--all*) while :; do :; done ;; esac";
    let (out, log) = wrapped_compile(spin, true);
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{said}");
    assert_eq!(log, "-O2 -c x.c --all\n-O2 -c x.c --stock\n");
    assert!(
        said.contains("compiling x.c with every call inlined failed"),
        "{said}"
    );
    assert!(said.contains("1 s of CPU"), "{said}");

    // A real compile error fails the build, with the stock flags' error.
    let broken = "echo 'x.c:1: error: nope' >&2; exit 1";
    let (out, log) = wrapped_compile(broken, true);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(log.lines().count(), 2, "{log}");

    // Outside discovery the flags are added, unbounded, once.
    let (out, log) = wrapped_compile("exit 0", false);
    assert!(out.status.success());
    assert_eq!(log, "-O2 -c x.c --all\n");
}

/// Many short steps on six slots at once, each restoring its binary from the build cache
/// (written by the worker) and running it while other slots start their programs: none fails
/// with "Text file busy", the race between writing an executable and a concurrent launch.
#[test]
fn executables_the_worker_writes_never_run_busy() {
    let f = fixture();
    // A binary of a few MB: the longer its copy, the wider the window for the race.
    let s = spec(
        &["sh", "-c", "cp /usr/bin/perl bench"],
        &["./bench", "-e", "1"],
    );
    let base = request(&f, s);
    let failures = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for slot in 0..6u32 {
            let (f, base, failures) = (&f, &base, &failures);
            scope.spawn(move || {
                for i in 0..40u64 {
                    let mut req = base.clone();
                    req.id = StepId(u64::from(slot) * 1000 + i);
                    req.slot = slot;
                    req.runs.min = 1;
                    req.runs.max = 1;
                    let tile = if i % 2 == 0 { 8 } else { 16 };
                    req.decisions =
                        DecisionSet([(SiteId::from("tile-size"), DecisionValue::Int(tile))].into());
                    // A fresh slot state: each step lays the cached build over fresh sources.
                    let r = step(f, &req);
                    if r.measurement.outcome != StepOutcome::Ok {
                        failures
                            .lock()
                            .unwrap()
                            .push(r.measurement.outcome.reason().unwrap());
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    assert!(
        failures.is_empty(),
        "{} failed: {:?}",
        failures.len(),
        &failures[..failures.len().min(3)]
    );
}
