//! Every stored number is what it claims to be, under faults a careless or hostile user brings
//! (issue 30): cached builds changed on disk, a second controller on a live store, a step that
//! kills its worker, executables written while other slots start programs.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::campaign::{
    decided, diagnostics, finish_campaign, serial, start_campaign, stored_steps,
};
use crate::common::{self, skip, worker};

/// A knob benchmark with a build: `build.sh A B` writes `bench`, a script that sleeps
/// 0.2A B seconds (so 0.200–0.222 s); nine combinations, so a random walk measures the same
/// set again and again, each time from the worker's build cache.
fn built_knobs_dir(steps: u32) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let bench = dir.path().join("bench");
    std::fs::create_dir_all(&bench).unwrap();
    std::fs::write(
        bench.join("build.sh"),
        "printf '#!/bin/sh\\nsleep 0.2%s%s\\n' \"$1\" \"$2\" > bench\nchmod +x bench\n",
    )
    .unwrap();
    let config = format!(
        r#"(campaign
  (name trust)
  (store "store")
  (objective (metric wall-time) (statistic median))
  (runs (warmup 0) (min 1) (max 1))
  (experiments ((benchmark built) (search (random-walk (steps {steps}) (flips 1))) (seed 5)))
  (benchmarks
    ((name built) (kind knobs) (sources "bench") (knobs (a 0 1 2) (b 0 1 2))
     (build ("sh" "build.sh" "{{a}}" "{{b}}")) (run ("./bench")) (check-output none)
     (timeout-s 10)))
  (workers (local (slots 2))))
"#
    );
    std::fs::write(dir.path().join("campaign.sexp"), config).unwrap();
    dir
}

/// Every cached build's `bench` in the store's local worker.
fn cached_binaries(dir: &Path) -> Vec<std::path::PathBuf> {
    let builds = dir.join("store/workers/local/builds");
    std::fs::read_dir(builds)
        .map(|entries| {
            entries
                .flatten()
                .map(|e| e.path().join("files/bench"))
                .filter(|p| p.is_file())
                .collect()
        })
        .unwrap_or_default()
}

/// A campaign killed halfway whose cached binaries are then replaced by a fast script (or
/// truncated) resumes to measure every step from a real build: the damage is found on restore,
/// the entry discarded and rebuilt, kiln.log and the step's record name it, and no step is
/// recorded from a changed binary (none faster than the real program, none failed).
#[test]
fn a_tampered_or_truncated_build_cache_is_rebuilt_on_resume() {
    let _serial = serial();
    type Damage = fn(&Path);
    let damages: [(&str, Damage); 2] = [
        ("replaced", |p| {
            std::fs::write(p, "#!/bin/sh\nsleep 0.05\n").unwrap();
        }),
        ("truncated", |p| {
            let len = std::fs::metadata(p).unwrap().len();
            let f = std::fs::OpenOptions::new().write(true).open(p).unwrap();
            f.set_len(len / 2).unwrap();
        }),
    ];
    for (what, damage) in damages {
        let dir = built_knobs_dir(24);
        let mut child = start_campaign(dir.path(), &worker());
        let deadline = Instant::now() + Duration::from_secs(60);
        while decided(dir.path()) < 8 {
            assert!(
                Instant::now() < deadline,
                "{what}: no progress\n{}",
                diagnostics(dir.path())
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        // Its local worker goes with it (death with the parent); give it a moment.
        std::thread::sleep(Duration::from_millis(300));
        let binaries = cached_binaries(dir.path());
        assert!(!binaries.is_empty(), "{what}: no cached build to damage");
        for binary in &binaries {
            damage(binary);
        }
        let resumed = start_campaign(dir.path(), &worker());
        finish_campaign(resumed, dir.path(), Duration::from_secs(120));

        let steps = stored_steps(dir.path());
        assert_eq!(steps.len(), 24, "{what}");
        for step in &steps {
            assert_eq!(
                step.result.measurement.outcome.name(),
                "ok",
                "{what}: {}",
                step.key
            );
            let objective = step.objective.unwrap();
            assert!(
                objective >= 0.19e9,
                "{what}: {} measured {objective} ns, faster than the real program: a damaged \
                 build was measured",
                step.key
            );
        }
        let warned: Vec<_> = steps
            .iter()
            .map(|s| &s.result.measurement.warnings)
            .filter(|w| !w.is_empty())
            .collect();
        assert!(
            !warned.is_empty(),
            "{what}: no step says it found a damaged build"
        );
        assert!(
            warned
                .iter()
                .all(|ws| ws.iter().all(|w| w.contains("cached build"))),
            "{what}: {:?}",
            warned[0]
        );
        let log = std::fs::read_to_string(dir.path().join("store/kiln.log")).unwrap();
        let named = binaries.iter().any(|b| {
            let entry = b.parent().unwrap().parent().unwrap();
            let hash = entry.file_name().unwrap().to_string_lossy();
            log.contains(&hash[..16])
        });
        assert!(named, "{what}: kiln.log names no damaged entry\n{log}");
    }
}

/// A make-built program whose cached objects are damaged while its campaign is stopped: the
/// resumed steps compile the damaged units again (the build log and the step's record say so)
/// and measure exactly what an undisturbed campaign measured.
#[test]
fn damaged_cached_objects_are_compiled_again() {
    if !common::have_valgrind() || !common::have("clang") || !common::have("make") {
        return skip("needs clang, make and valgrind");
    }
    let _serial = serial();
    let setup = || {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("bench-programs/twofile");
        std::fs::create_dir_all(&src).unwrap();
        for (name, text) in common::TWO_FILE_MAKE {
            std::fs::write(src.join(name), text).unwrap();
        }
        // Runs long enough (most of a second a step under callgrind) that the
        // campaign is stopped partway: with the shared config's 200 it could
        // finish all 8 steps before the status snapshot showed any.
        let config =
            common::two_file_config(8).replace(r#""./bench" "200""#, r#""./bench" "200000""#);
        std::fs::write(dir.path().join("campaign.sexp"), config).unwrap();
        dir
    };
    let straight = setup();
    finish_campaign(
        start_campaign(straight.path(), &worker()),
        straight.path(),
        Duration::from_secs(180),
    );
    let expected: Vec<_> = stored_steps(straight.path())
        .iter()
        .map(|s| (s.decision_hash, s.objective))
        .collect();

    let dir = setup();
    let mut child = start_campaign(dir.path(), &worker());
    let deadline = Instant::now() + Duration::from_secs(120);
    // Stopped at the first step the snapshot shows: it lags the store by a few steps.
    while decided(dir.path()) < 1 {
        assert!(
            Instant::now() < deadline,
            "no progress\n{}",
            diagnostics(dir.path())
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let stopped_at = stored_steps(dir.path()).len();
    let rundir = dir.path().join("store/workers/local");
    let objects: Vec<_> = std::fs::read_dir(rundir.join("objects"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "o"))
        .collect();
    assert!(!objects.is_empty(), "no object was cached");
    for object in &objects {
        let mut bytes = std::fs::read(object).unwrap();
        for b in bytes.iter_mut().skip(64).step_by(7) {
            *b ^= 0x5a;
        }
        std::fs::write(object, bytes).unwrap();
    }
    // Whole builds are cached too: without them every step compiles its units.
    std::fs::remove_dir_all(rundir.join("builds")).unwrap();
    finish_campaign(
        start_campaign(dir.path(), &worker()),
        dir.path(),
        Duration::from_secs(180),
    );
    let steps = stored_steps(dir.path());
    let found: Vec<_> = steps
        .iter()
        .map(|s| (s.decision_hash, s.objective))
        .collect();
    assert_eq!(found, expected, "the resumed campaign measured otherwise");
    let warned = steps
        .iter()
        .flat_map(|s| &s.result.measurement.warnings)
        .filter(|w| w.contains("cached object damaged") && w.contains("compiled again"))
        .count();
    assert!(
        warned > 0,
        "no step says it compiled a damaged object again (the campaign was stopped after {stopped_at} of 8 steps)"
    );
}

/// A campaign over knob `k` (`values`) whose value `poison` kills its worker (`kill -9 $PPID`
/// from the run), with `fields` (its experiments, timeouts), on a local worker of `slots`,
/// run to its end: its folder and how long it took.
fn poison_campaign(
    poison: &str,
    fields: &str,
    values: &str,
    slots: u32,
) -> (tempfile::TempDir, Duration) {
    let dir = tempfile::tempdir().unwrap();
    let bench = dir.path().join("bench");
    std::fs::create_dir_all(&bench).unwrap();
    std::fs::write(
        bench.join("run.sh"),
        format!("if [ \"$1\" = {poison} ]; then kill -9 $PPID; sleep 5; fi\nsleep 0.1\n"),
    )
    .unwrap();
    let config = format!(
        r#"(campaign
  (name poison)
  (store "store")
  (objective (metric wall-time) (statistic median))
  (runs (warmup 0) (min 1) (max 1))
  {fields}
  (benchmarks
    ((name kill) (kind knobs) (sources "bench") (knobs (k {values}))
     (run ("sh" "run.sh" "{{k}}")) (check-output none) (timeout-s 10)))
  (workers (local (slots {slots}))))
"#
    );
    std::fs::write(dir.path().join("campaign.sexp"), config).unwrap();
    let started = Instant::now();
    finish_campaign(
        start_campaign(dir.path(), &worker()),
        dir.path(),
        Duration::from_secs(120),
    );
    (dir, started.elapsed())
}

/// A knob value whose run kills its worker (`kill -9 $PPID`): its steps are recorded failed
/// after three losses, "worker lost while running this step (3 times", the other steps are
/// measured, and the campaign ends without waiting out a worker's quarantine.
#[test]
fn a_decision_set_that_kills_its_worker_is_recorded_failed_and_the_campaign_finishes() {
    let _serial = serial();
    let (dir, elapsed) = poison_campaign(
        "3",
        "(timeouts (connect-s 5) (heartbeat-s 1) (lost-after-s 3))
  (experiments ((benchmark kill) (search (random-walk (steps 12) (flips 1))) (seed 2) (parallel 2)))",
        "0 1 2 3 4 5 6",
        2,
    );
    let steps = stored_steps(dir.path());
    assert_eq!(steps.len(), 12);
    let knob =
        |s: &kiln_controller::store::StepRecord| s.decisions.0.values().next().unwrap().to_string();
    let poisoned: Vec<_> = steps.iter().filter(|s| knob(s) == "3").collect();
    assert!(
        !poisoned.is_empty(),
        "the walk never proposed the killing value; pick another seed"
    );
    for s in &steps {
        match knob(s).as_str() {
            "3" => {
                let reason = s.result.measurement.outcome.reason().unwrap();
                assert!(
                    reason.starts_with("worker lost while running this step (3 times"),
                    "{}: {reason}",
                    s.key
                );
            }
            _ => assert_eq!(
                s.result.measurement.outcome.name(),
                "ok",
                "{}: {:?}",
                s.key,
                s.result.measurement.outcome
            ),
        }
    }
    // A quarantine of the worker would cost 90 s; three losses of a few seconds each do not.
    assert!(
        elapsed < Duration::from_secs(80),
        "{elapsed:?}\n{}",
        diagnostics(dir.path())
    );
}

/// The losses a decision set causes are charged to the set, not its worker: a one-worker,
/// one-slot campaign of three steps whose every proposal is the set that kills its worker
/// (a random walk between two knob values, the stock one and the killing one) records both
/// steps failed, the second without running it again, and ends in seconds with its worker
/// never quarantined (each quarantine would cost 90 s).
#[test]
fn a_poison_set_is_charged_its_losses_and_never_quarantines_its_worker() {
    let _serial = serial();
    let (dir, elapsed) = poison_campaign(
        "1",
        "(experiments ((benchmark kill) (search (random-walk (steps 3) (flips 1))) (seed 2)))",
        "0 1",
        1,
    );
    let steps = stored_steps(dir.path());
    assert_eq!(steps.len(), 3);
    for s in &steps {
        let reason = s.result.measurement.outcome.reason().unwrap_or_default();
        assert!(
            reason.starts_with("worker lost while running this step (3 times"),
            "{}: {:?}",
            s.key,
            s.result.measurement.outcome
        );
    }
    let log = std::fs::read_to_string(dir.path().join("store/kiln.log")).unwrap();
    assert!(!log.contains("quarantined"), "{log}");
    assert_eq!(
        log.matches("re-queued (its decision set lost a worker")
            .count(),
        2,
        "{log}"
    );
    assert!(elapsed < Duration::from_secs(30), "{elapsed:?}\n{log}");
}

/// A worker binary that answers hello with garbage is unfit after a few tries, and a campaign
/// with no other worker stops with the reason (exit 1) instead of retrying it forever.
#[test]
fn a_worker_that_speaks_garbage_stops_a_campaign_with_no_other() {
    let _serial = serial();
    let dir = tempfile::tempdir().unwrap();
    let bench = dir.path().join("bench");
    std::fs::create_dir_all(&bench).unwrap();
    std::fs::write(bench.join("run.sh"), "sleep 0.1\n").unwrap();
    let fake = dir.path().join("fake-worker");
    std::fs::write(
        &fake,
        "#!/bin/sh\nprintf 'this is no kiln-worker\\n'\nsleep 30\n",
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let config = r#"(campaign
  (name garbage)
  (store "store")
  (runs (warmup 0) (min 1) (max 1))
  (timeouts (connect-s 5) (heartbeat-s 1) (lost-after-s 3))
  (experiments ((benchmark b) (search (random-walk (steps 4))) (seed 2)))
  (benchmarks
    ((name b) (kind knobs) (sources "bench") (knobs (k 0 1))
     (run ("sh" "run.sh")) (check-output none) (timeout-s 10)))
  (workers (local (slots 1))))
"#;
    std::fs::write(dir.path().join("campaign.sexp"), config).unwrap();
    let started = Instant::now();
    let out = common::kiln_cmd(dir.path())
        .env("KILN_WORKER", &fake)
        .args(["run", "campaign.sexp", "--progress-every", "1"])
        .output()
        .unwrap();
    let said = common::text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("no worker can run"), "{said}");
    assert!(said.contains("garbage"), "{said}");
    assert!(started.elapsed() < Duration::from_secs(60), "{said}");
}

/// `kiln run --force-new` on a store a running controller holds is refused, naming the
/// holder's pid, and moves nothing: the running campaign finishes in its own store with its
/// own result.
#[test]
fn force_new_on_a_live_store_is_refused_and_the_campaign_finishes() {
    let _serial = serial();
    let dir = built_knobs_dir(16);
    let mut running = start_campaign(dir.path(), &worker());
    let deadline = Instant::now() + Duration::from_secs(60);
    while decided(dir.path()) < 2 {
        assert!(
            Instant::now() < deadline,
            "no progress\n{}",
            diagnostics(dir.path())
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let second = common::run_kiln(dir.path(), &["run", "campaign.sexp", "--force-new"]);
    let said = common::text(&second);
    assert_eq!(second.status.code(), Some(1), "{said}");
    assert!(said.contains("in use by another controller"), "{said}");
    assert!(said.contains(&format!("pid {}", running.id())), "{said}");
    let moved: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().contains(".old-"))
        .collect();
    assert!(moved.is_empty(), "the live store was moved");
    let deadline = Instant::now() + Duration::from_secs(120);
    let status = loop {
        if let Some(status) = running.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "{}", diagnostics(dir.path()));
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(status.success(), "{}", diagnostics(dir.path()));
    let steps = stored_steps(dir.path());
    assert_eq!(steps.len(), 16);
    assert!(
        steps
            .iter()
            .all(|s| s.result.measurement.outcome.name() == "ok"),
        "{}",
        diagnostics(dir.path())
    );
}

/// With the config's own folder as its store (`(store ".")`), `--force-new` moves the store's
/// files aside, leaves the config and the sources, and starts afresh.
#[test]
fn force_new_with_the_config_folder_as_store_moves_only_the_store() {
    let _serial = serial();
    let dir = built_knobs_dir(4);
    let config = std::fs::read_to_string(dir.path().join("campaign.sexp")).unwrap();
    std::fs::write(
        dir.path().join("campaign.sexp"),
        config.replace("(store \"store\")", "(store \".\")"),
    )
    .unwrap();
    let first = common::run_kiln(dir.path(), &["run", "campaign.sexp"]);
    assert!(first.status.success(), "{}", common::text(&first));
    let again = common::run_kiln_when_free(dir.path(), &["run", "campaign.sexp", "--force-new"]);
    let said = common::text(&again);
    assert!(again.status.success(), "{said}");
    assert!(said.contains("moved the previous store to"), "{said}");
    assert!(dir.path().join("campaign.sexp").is_file(), "{said}");
    assert!(dir.path().join("bench/build.sh").is_file(), "{said}");
    let parent = dir.path().parent().unwrap();
    let name = dir
        .path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let aside: Vec<_> = std::fs::read_dir(parent)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(&format!("{name}.old-"))
        })
        .collect();
    assert_eq!(aside.len(), 1, "{said}");
    assert!(
        aside[0].join("db/db").is_file(),
        "the old database went aside"
    );
    assert!(!aside[0].join("campaign.sexp").exists());
    let store = kiln_controller::store::Store::open_existing(dir.path()).unwrap();
    assert_eq!(store.steps(None).count(), 4, "a fresh campaign of its own");
    drop(store);
    std::fs::remove_dir_all(&aside[0]).unwrap();
}

/// A source file whose name is not UTF-8 stops its experiment as one that could not be prepared
/// (other experiments would go on) and the run ends as bad input (exit 2); the file is named and
/// nothing is measured.
#[test]
fn a_source_file_name_that_is_not_utf8_is_bad_input() {
    use std::os::unix::ffi::OsStrExt;
    let dir = built_knobs_dir(2);
    let odd = std::ffi::OsStr::from_bytes(b"caf\xe9.c");
    std::fs::write(dir.path().join("bench").join(odd), "int x;\n").unwrap();
    let out = common::run_kiln(dir.path(), &["run", "campaign.sexp"]);
    let said = common::text(&out);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(
        said.contains("is not UTF-8") && said.contains("caf") && said.contains("not prepared"),
        "{said}"
    );
    let store = kiln_controller::store::Store::open_existing(&dir.path().join("store")).unwrap();
    assert_eq!(store.steps(None).count(), 0, "{said}");
}

/// A store the user may not read is reported as such, naming the path and the permission
/// (exit 1), never as "not a kiln store". Run as `nobody`, since root reads everything.
#[test]
fn a_store_the_user_may_not_read_says_so() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return common::skip(
            "runuser needs root (exit_status::an_unreadable_store_exits_1_naming_path_and_permission runs as this user)",
        );
    }
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let store = dir.path().join("store");
    std::fs::create_dir_all(store.join("db")).unwrap();
    std::fs::write(store.join("db/db"), "x").unwrap();
    std::fs::set_permissions(&store, std::fs::Permissions::from_mode(0o700)).unwrap();
    // A copy nobody may run, wherever the checkout lies.
    let kiln = dir.path().join("kiln");
    std::fs::copy(common::kiln(), &kiln).unwrap();
    let out = std::process::Command::new("runuser")
        .args(["-u", "nobody", "--"])
        .arg(&kiln)
        .arg("status")
        .arg(&store)
        .output()
        .expect("runuser runs (util-linux)");
    let said = common::text(&out);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("Permission denied"), "{said}");
    assert!(said.contains(&store.display().to_string()), "{said}");
    assert!(!said.contains("not a kiln store"), "{said}");
}

/// A unit whose stock build inlines nothing into `f` (its one call is too costly): a decision
/// that inlines that call must compile the unit again, not take the stock object kept a moment
/// before. The unit's decisions are the replay lines of every function it defines, whatever
/// the first compile inlined.
#[test]
fn a_changed_decision_in_a_function_with_no_inlined_call_compiles_its_unit_again() {
    changed_decision_compiles_its_unit_again(Unit::C);
}

/// As above in C++, where `f` is a method: a call-site chain names it `f`, its symbol is
/// `_ZN1S1fEi`, and the unit's key must count the line either way.
#[test]
fn a_changed_decision_in_a_cpp_method_compiles_its_unit_again() {
    changed_decision_compiles_its_unit_again(Unit::Cpp);
}

#[derive(Clone, Copy)]
enum Unit {
    C,
    Cpp,
}

fn changed_decision_compiles_its_unit_again(unit: Unit) {
    let (compiler, a, main, makefile) = match unit {
        Unit::C => (
            "clang",
            ("a.c", A_C.to_string()),
            ("main.c", MAIN_C.to_string()),
            "CFLAGS = -O2 -g\nbench: main.o a.o\n\t$(CC) $(CFLAGS) main.o a.o -o bench\n\
             %.o: %.c\n\t$(CC) $(CFLAGS) -c $< -o $@\n",
        ),
        Unit::Cpp => (
            "clang++",
            (
                "a.cpp",
                A_C.replace("int g(int x)", "int S::g(int x)").replace(
                    "int f(int x)",
                    "struct S { int f(int x); int g(int x); };\nint S::f(int x)",
                ),
            ),
            (
                "main.cpp",
                MAIN_C
                    .replace("int f(int x);\nint g(int x);", "struct S { int f(int x); int g(int x); };")
                    .replace("f(n) + g(n)", "S().f(n) + S().g(n)"),
            ),
            // No -g, as CMake's Release builds: the unit's debug names come from kiln.
            "CXX = c++\nCXXFLAGS = -O2\nbench: main.o a.o\n\t$(CXX) $(CXXFLAGS) main.o a.o -o bench\n\
             %.o: %.cpp\n\t$(CXX) $(CXXFLAGS) -c $< -o $@\n",
        ),
    };
    if !common::have(compiler) || !common::have("make") {
        return skip(format!("needs {compiler} and make"));
    }
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("b");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join(a.0), a.1).unwrap();
    std::fs::write(src.join(main.0), main.1).unwrap();
    std::fs::write(src.join("Makefile"), makefile).unwrap();
    let config = r#"(campaign (name stale) (store "store")
  (runs (warmup 0) (min 1) (max 1))
  (experiments ((benchmark b) (search (random-walk (steps 1)))))
  (benchmarks ((name b) (kind llvm-inline) (compiler clang) (sources "b") (build ("make")) (run ("./bench" "2000"))))
  (workers (local (slots 1))))
"#;
    std::fs::write(dir.path().join("c.sexp"), config).unwrap();
    let sites = common::run_kiln(dir.path(), &["sites", "c.sexp", "b", "-o", "stock.sexp"]);
    assert!(sites.status.success(), "{}", common::text(&sites));
    let stock = std::fs::read_to_string(dir.path().join("stock.sexp")).unwrap();
    let site = stock
        .lines()
        .find(|l| l.contains("big") && l.contains(" @ f:"))
        .unwrap_or_else(|| panic!("no site of big in f:\n{stock}"));
    assert!(
        site.contains("no-inline"),
        "the stock build inlines it: {site}"
    );
    std::fs::write(
        dir.path().join("inline.sexp"),
        stock.replace(site, &site.replace("no-inline", "inline")),
    )
    .unwrap();
    let out = common::run_kiln(
        dir.path(),
        &["benchmark", "c.sexp", "b", "inline.sexp", "--json"],
    );
    let said = common::text(&out);
    let json: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {said}"));
    assert_eq!(json["candidate"]["outcome"]["outcome"], "ok", "{said}");
}

const A_C: &str = r#"#include <stdio.h>
#include <stdlib.h>
static int big(int x) {
  int s = 0;
  for (int i = 0; i < x; i++) {
    switch ((i * 7 + x) % 9) {
    case 0: s += i * 3; break; case 1: s ^= i << 2; break; case 2: s -= i / 3; break;
    case 3: s = s * 31 + i; break; case 4: s += (i ^ s) >> 2; break; case 5: s ^= s * 2654435761u; break;
    case 6: s += (i % 13) * (s % 17); break; case 7: s = (s >> 3) | (s << 29); break; default: s += 7;
    }
    if (s % 5 == 0) s ^= i; else s += i >> 7;
    switch ((s + i) % 7) { case 0: s += 11; break; case 1: s ^= 0x55; break; case 2: s -= i * 5; break; case 3: s *= 3; break; case 4: s += s >> 4; break; default: s -= 1; }
    if (s % 3 == 1) s += x; else s -= x >> 1;
  }
  return s;
}
int f(int x) { return big(x) + 1; }
int g(int x) { return big(x + 1) * 2; }
"#;

const MAIN_C: &str = r#"#include <stdio.h>
#include <stdlib.h>
int f(int x);
int g(int x);
int main(int argc, char **argv) { int n = atoi(argv[1]); printf("%d\n", f(n) + g(n)); return 0; }
"#;
