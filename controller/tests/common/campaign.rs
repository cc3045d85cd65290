//! Whole campaigns with the real binaries, for the tests of remote workers (ssh_campaign.rs,
//! slurm.rs): a knob benchmark whose steps sleep, scratch folders, the controller in the
//! background, its status snapshot and its store.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use kiln_controller::store::{StepRecord, Store};

use super::{have_valgrind, kiln_cmd, run_kiln, skip, text};

/// Short infrastructure timeouts, so that a loss is noticed within seconds.
pub const TIMEOUTS: &str = "(timeouts (connect-s 5) (heartbeat-s 1) (lost-after-s 4))";

/// One test at a time: the tests measure wall time and watch timeouts of a few seconds, which two
/// campaigns at once on a small machine would blur.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The knob benchmark's run script: sleeps `$3` tenths of a second plus 0–2 more depending on the
/// knobs, with a `running` marker in the work folder meanwhile (tests wait for it to strike
/// mid-step).
pub const RUN_SH: &str = "touch running\nsleep 0.$(($3 + ($1 * 7 + $2) % 3))\nrm -f running\n";

/// The calibration benchmark's script: sleeps for the number of seconds in `$1/<worker>` (0.1
/// when there is no such file), where the worker's name is its rundir's (the work folder is
/// `<rundir>/slots/<slot>/work`, and a local worker's rundir is named after it).
pub const CAL_SH: &str = "w=$(basename \"$(dirname \"$(dirname \"$(dirname \"$(pwd)\")\")\")\")\n\
                      sleep \"$(cat \"$1/$w\" 2>/dev/null || echo 0.1)\"\n";

/// A campaign config over `workers`: `chains` chains of `search` on the 100-combination knob
/// benchmark `knobs` (steps of `tenths`–`tenths + 2` tenths of a second), plus `extra` campaign
/// fields. The benchmark `cal` runs `CAL_SH` with the delay folder `delays`.
pub fn campaign_config(
    search: &str,
    chains: u32,
    tenths: u32,
    workers: &str,
    extra: &str,
) -> String {
    format!(
        r#"(campaign
  (name ssh-campaign)
  (store "store")
  (objective (metric wall-time) (statistic median))
  (runs (warmup 0) (min 1) (max 1))
  {TIMEOUTS}
  {extra}
  (experiments ((benchmark knobs) (search {search}) (chains {chains}) (seed 7)))
  (benchmarks
    ((name knobs) (kind knobs) (sources "bench-programs/knobs")
     ;; 100 combinations: few proposals repeat (a repeat reuses the earlier measurement).
     (knobs (a 0 1 2 3 4 5 6 7 8 9) (b 0 1 2 3 4 5 6 7 8 9))
     (run ("sh" "run.sh" "{{a}}" "{{b}}" "{tenths}")) (check-output none) (timeout-s 20))
    ((name cal) (kind knobs) (sources "bench-programs/knobs") (knobs (x 0))
     (run ("sh" "cal.sh" "delays")) (check-output none) (timeout-s 20)))
  {workers})
"#
    )
}

/// A scratch campaign folder with the knob benchmark and `config`.
pub fn campaign_dir(config: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let bench = dir.path().join("bench-programs/knobs");
    std::fs::create_dir_all(&bench).unwrap();
    std::fs::write(bench.join("run.sh"), RUN_SH).unwrap();
    std::fs::write(bench.join("cal.sh"), CAL_SH).unwrap();
    std::fs::create_dir_all(dir.path().join("delays")).unwrap();
    // Relative paths in the config are relative to the folder kiln runs in; the delay folder
    // is read by the worker, in its work folder, so it must be absolute.
    let delays = dir.path().join("delays").display().to_string();
    let config = config.replace("\"delays\"", &format!("{delays:?}"));
    std::fs::write(dir.path().join("campaign.sexp"), config).unwrap();
    dir
}

/// `kiln run campaign.sexp` in the background, deploying `worker_binary`; output to files.
pub fn start_campaign(dir: &Path, worker_binary: &Path) -> Child {
    let mut kiln = kiln_cmd(dir);
    kiln.env("KILN_WORKER", worker_binary);
    spawn_campaign(kiln, dir)
}

/// `kiln run campaign.sexp` in the background by `kiln` (a [`kiln_cmd`] for `dir`); output to
/// files.
pub fn spawn_campaign(mut kiln: Command, dir: &Path) -> Child {
    let out = std::fs::File::create(dir.join("kiln.out")).unwrap();
    let err = std::fs::File::create(dir.join("kiln.err")).unwrap();
    kiln.args(["run", "campaign.sexp"])
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .unwrap()
}

/// Everything a failed assertion should show: the controller's output and log.
pub fn diagnostics(dir: &Path) -> String {
    let read = |p: &str| std::fs::read_to_string(dir.join(p)).unwrap_or_default();
    let log = read("store/kiln.log");
    let tail: Vec<&str> = log.lines().rev().take(60).collect();
    format!(
        "--- kiln stdout\n{}\n--- kiln stderr\n{}\n--- kiln.log (last 60 lines)\n{}",
        read("kiln.out"),
        read("kiln.err"),
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    )
}

/// Waits for the campaign to end (killing it after `limit`); asserts it succeeded.
pub fn finish_campaign(mut child: Child, dir: &Path, limit: Duration) {
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!(
                "campaign still running after {limit:?}\n{}",
                diagnostics(dir)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        status.success(),
        "kiln run failed: {status}\n{}",
        diagnostics(dir)
    );
}

/// The running controller's status snapshot, if there is one yet.
pub fn snapshot(dir: &Path) -> Option<serde_json::Value> {
    let bytes = std::fs::read(dir.join("store/status.json")).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Steps decided so far, from the snapshot.
pub fn decided(dir: &Path) -> u64 {
    snapshot(dir).map_or(0, |v| {
        v["chains"].as_array().map_or(0, |c| {
            c.iter().map(|r| r["done"].as_u64().unwrap_or(0)).sum()
        })
    })
}

/// Worker `name`'s row of the snapshot.
pub fn worker_row(dir: &Path, name: &str) -> Option<serde_json::Value> {
    snapshot(dir)?["workers"]
        .as_array()?
        .iter()
        .find(|w| w["name"] == name)
        .cloned()
}

/// Polls `ok` every 50 ms until it holds; panics with `what` after `limit`.
pub fn wait_for(what: &str, dir: &Path, limit: Duration, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !ok() {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}\n{}",
            diagnostics(dir)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Every decided step of the store, in order.
pub fn stored_steps(dir: &Path) -> Vec<StepRecord> {
    let store = Store::open(&dir.join("store")).unwrap();
    store.steps(None).map(Result::unwrap).collect()
}

/// `kiln store verify` passes, and the store holds exactly `budget` steps, each chain's steps
/// numbered 0.. without gap or repeat.
pub fn assert_every_step_once(dir: &Path, budget: usize) -> Vec<StepRecord> {
    let verify = run_kiln(dir, &["store", "verify", "store"]);
    assert!(verify.status.success(), "{}", text(&verify));
    assert!(
        String::from_utf8_lossy(&verify.stdout).contains("ok: no problems found"),
        "{}",
        text(&verify)
    );
    let steps = stored_steps(dir);
    assert_eq!(steps.len(), budget, "{}", text(&verify));
    let mut keys: Vec<(u32, u32)> = steps.iter().map(|s| (s.key.chain, s.key.step)).collect();
    keys.dedup();
    assert_eq!(keys.len(), budget, "a step is stored twice");
    steps
}

/// Steps worker `name` measured (not reused) that it started at or after `since_ms`.
pub fn measured_by_since(steps: &[StepRecord], name: &str, since_ms: u64) -> usize {
    steps
        .iter()
        .filter(|s| s.worker == name && s.cached_from.is_none() && s.result.started_ms >= since_ms)
        .count()
}

/// Whether the controller's log says a job of worker `name` was re-queued.
pub fn requeued_from(dir: &Path, name: &str) -> bool {
    let log = std::fs::read_to_string(dir.join("store/kiln.log")).unwrap_or_default();
    // A whole word: w1 is not w10.
    let word = format!("worker={name}");
    log.lines().any(|l| {
        l.contains("re-queued")
            && l.split(|c: char| c.is_whitespace() || c == ',')
                .any(|w| w == word)
    })
}

/// What must be identical between an interrupted and an uninterrupted run.
pub fn trajectory(steps: &[StepRecord]) -> Vec<(u32, String, Option<f64>, bool)> {
    steps
        .iter()
        .map(|s| {
            (
                s.key.step,
                s.decision_hash.to_string(),
                s.objective,
                s.decision.as_ref().unwrap().accepted,
            )
        })
        .collect()
}

/// A synthetic knob campaign: cost (callgrind instructions) is a known function
/// of ten binary knobs with a unique optimum 1 1 1 0 1 0 1 0 1 0. Its benchmark is
/// `copy_benchmark("synthetic", ..)`; `workers` is the `(workers ...)` field.
pub fn synthetic_config_on(steps: u32, seed: u64, parallel: u32, workers: &str) -> String {
    format!(
        r#"(campaign
  (name synthetic)
  (store "store")
  (objective (metric instructions) (statistic median))
  (runs (warmup 0) (min 1) (max 1))
  (experiments
    ((benchmark synthetic)
     (search (simulated-annealing (steps {steps}) (t-max 0.3) (t-min 0.005)))
     (chains 1) (seed {seed}) (parallel {parallel})))
  (benchmarks
    ((name synthetic) (kind knobs)
     (knobs (x0 0 1) (x1 0 1) (x2 0 1) (x3 0 1) (x4 0 1) (x5 0 1) (x6 0 1) (x7 0 1) (x8 0 1) (x9 0 1))
     (sources "bench-programs/synthetic")
     (build ("cc" "-O1" "main.c" "-o" "bench"))
     (run ("./bench" "{{x0}}" "{{x1}}" "{{x2}}" "{{x3}}" "{{x4}}" "{{x5}}" "{{x6}}" "{{x7}}" "{{x8}}" "{{x9}}" "300"))
     (check-output none)
     (timeout-s 30)))
  {workers})
"#
    )
}

/// Starts `kiln run campaign.sexp` in `dir` and waits (at most a minute) until its status
/// snapshot shows `steps` decided steps; the campaign goes on running.
pub fn run_until_decided(dir: &Path, steps: u64) -> Child {
    let child = kiln_cmd(dir)
        .args(["run", "campaign.sexp"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while decided(dir) < steps && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    child
}

/// A slow knob campaign on the local worker (0.2 s per run, 100 combinations).
pub fn slow_config(steps: u32) -> String {
    format!(
        r#"(campaign
  (name slow)
  (store "store")
  (runs (warmup 0) (min 1) (max 1))
  (experiments ((benchmark slow) (search (simulated-annealing (steps {steps}))) (seed 1)))
  (benchmarks
    ((name slow) (kind knobs) (sources "bench-programs/slow")
     (knobs (a 0 1 2 3 4 5 6 7 8 9) (b 0 1 2 3 4 5 6 7 8 9))
     (run ("sh" "run.sh" "{{a}}" "{{b}}")) (check-output none)))
  (workers (local (slots 1))))
"#
    )
}

/// A scratch folder holding [`slow_config`] and its benchmark.
pub fn slow_setup(steps: u32) -> tempfile::TempDir {
    slow_setup_of(steps, "0.2")
}

/// [`slow_setup`] with runs of `seconds` each.
pub fn slow_setup_of(steps: u32, seconds: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let bench = dir.path().join("bench-programs/slow");
    std::fs::create_dir_all(&bench).unwrap();
    std::fs::write(
        bench.join("run.sh"),
        format!("sleep {seconds}\necho $1 $2\n"),
    )
    .unwrap();
    std::fs::write(dir.path().join("campaign.sexp"), slow_config(steps)).unwrap();
    dir
}

/// Runs `config` in a folder `setup` makes straight, and again killed (SIGKILL) at several points and
/// resumed; the two trajectories must be equal. Returns the straight run's steps, or `None`
/// where the test is skipped.
pub fn resumes_exactly(
    setup: impl Fn(&str) -> tempfile::TempDir,
    config: &str,
    steps_in_all: usize,
) -> Option<Vec<StepRecord>> {
    if !have_valgrind() {
        skip("valgrind is not installed (callgrind is the deterministic objective)");
        return None;
    }
    let straight = setup(config);
    let out = run_kiln(straight.path(), &["run", "campaign.sexp"]);
    assert!(out.status.success(), "{}", text(&out));
    let expected = stored_steps(straight.path());
    assert_eq!(expected.len(), steps_in_all);

    let resumed = setup(config);
    // Kill at several points: while preparing, and after a few decided steps.
    for kill_after_steps in [0usize, 3, 9, 15] {
        let mut child = kiln_cmd(resumed.path())
            .args(["run", "campaign.sexp"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            std::thread::sleep(Duration::from_millis(50));
            let decided = decided(resumed.path()) as usize;
            if (kill_after_steps == 0 && resumed.path().join("store/db").exists())
                || decided >= kill_after_steps && kill_after_steps > 0
            {
                break;
            }
            if child.try_wait().unwrap().is_some() || Instant::now() > deadline {
                break;
            }
        }
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
    }
    let out = run_kiln(resumed.path(), &["run", "campaign.sexp"]);
    assert!(out.status.success(), "{}", text(&out));
    let got = stored_steps(resumed.path());
    assert_eq!(
        trajectory(&got),
        trajectory(&expected),
        "resumed run diverged"
    );
    let verify = run_kiln(resumed.path(), &["store", "verify", "store"]);
    assert!(verify.status.success(), "{}", text(&verify));
    assert!(String::from_utf8_lossy(&verify.stdout).contains("ok: no problems found"));
    Some(expected)
}
