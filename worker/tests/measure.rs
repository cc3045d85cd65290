//! The measuring engine on real processes: timing, counters, failures,
//! timeouts that leave no process behind, callgrind, output checks.

use std::path::Path;
use std::time::{Duration, Instant};

use kiln_protocol::config::benchmark::RunPolicy;
use kiln_protocol::decision::ContentHash;
use kiln_protocol::message::{Race, StepOutcome};
use kiln_protocol::metric::{Metric, MetricValue};
use kiln_worker::launch::counters;
use kiln_worker::launch::{output_std, CancelToken};
use kiln_worker::measure::{measure, Measurement, OutputSpec};

use crate::common::{plan, skip};

fn measured(m: &Measurement, metric: Metric) -> Vec<f64> {
    m.runs
        .iter()
        .filter(|r| !r.warmup)
        .filter_map(|r| r.metrics.get(&metric)?.measured())
        .collect()
}

#[test]
fn a_signal_is_a_run_failure_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let m = measure(
        &plan(
            &["sh", "-c", "echo about to crash >&2; kill -SEGV $$"],
            dir.path(),
            3,
        ),
        None,
    );
    match &m.outcome {
        StepOutcome::RunFailed {
            code,
            signal,
            signal_name,
            stderr_tail,
        } => {
            assert_eq!(*code, None);
            assert_eq!(*signal, Some(libc::SIGSEGV));
            assert_eq!(signal_name.as_deref(), Some("SIGSEGV"));
            assert!(
                stderr_tail.contains("about to crash"),
                "stderr tail: {stderr_tail:?}"
            );
        }
        other => panic!("expected run-failed, got {other:?}"),
    }
    assert_eq!(
        m.runs.len(),
        1,
        "the first failing run ends the measurement"
    );
    assert!(m.summary.is_empty(), "a failed measurement has no summary");
}

#[test]
fn a_nonzero_exit_is_a_run_failure_with_its_code() {
    let dir = tempfile::tempdir().unwrap();
    let m = measure(&plan(&["sh", "-c", "exit 3"], dir.path(), 3), None);
    assert!(
        matches!(
            m.outcome,
            StepOutcome::RunFailed {
                code: Some(3),
                signal: None,
                ..
            }
        ),
        "{:?}",
        m.outcome
    );
    assert_eq!(m.runs[0].exit_code, Some(3));
    assert!(m.summary.is_empty());
}

#[test]
fn a_missing_program_is_a_run_failure_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let m = measure(&plan(&["no-such-program-kiln"], dir.path(), 1), None);
    match &m.outcome {
        StepOutcome::RunFailed { stderr_tail, .. } => {
            assert!(stderr_tail.contains("no-such-program-kiln"))
        }
        other => panic!("expected run-failed, got {other:?}"),
    }
}

fn gone(pid: i32) -> bool {
    // Reaped: no /proc entry at all (not even a zombie).
    !Path::new(&format!("/proc/{pid}")).exists()
}

#[test]
fn a_hang_times_out_quickly_and_leaves_no_process() {
    let dir = tempfile::tempdir().unwrap();
    let script = "sleep 100 & echo $! > pids; sleep 100 & echo $! >> pids; echo $$ >> pids; wait";
    let mut p = plan(&["sh", "-c", script], dir.path(), 1);
    p.timeout = Duration::from_secs(1);
    let t = Instant::now();
    let m = measure(&p, None);
    let took = t.elapsed();
    assert!(
        matches!(&m.outcome, StepOutcome::Timeout { phase, limit_s } if phase == "run" && *limit_s == 1.0),
        "{:?}",
        m.outcome
    );
    assert!(took < Duration::from_secs(2), "timeout took {took:?}");
    let pids: Vec<i32> = std::fs::read_to_string(dir.path().join("pids"))
        .unwrap()
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    assert_eq!(pids.len(), 3);
    for pid in pids {
        assert!(gone(pid), "process {pid} was left behind");
    }
}

#[test]
fn the_plain_forking_hang_also_leaves_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = plan(&["sh", "-c", "sleep 100 & sleep 100"], dir.path(), 1);
    p.timeout = Duration::from_secs(1);
    p.output = OutputSpec::None;
    let t = Instant::now();
    let m = measure(&p, None);
    assert!(
        matches!(m.outcome, StepOutcome::Timeout { .. }),
        "{:?}",
        m.outcome
    );
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "timeout took {:?}",
        t.elapsed()
    );
    let left = sleepers(dir.path());
    assert!(left.is_empty(), "sleep 100 processes left behind: {left:?}");
}

/// Pids of `sleep 100` processes working in `dir`: other tests, in this
/// process and beside it, run `sleep 100` too.
fn sleepers(dir: &Path) -> Vec<i32> {
    let dir = dir.canonicalize().unwrap();
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == b"sleep\x00100\x00")
                && std::fs::read_link(format!("/proc/{pid}/cwd")).is_ok_and(|cwd| cwd == dir)
        })
        .collect()
}

#[test]
fn cancel_kills_a_running_command() {
    let dir = tempfile::tempdir().unwrap();
    let p = plan(&["sleep", "30"], dir.path(), 3);
    let token = CancelToken::new().unwrap();
    let t = Instant::now();
    let m = std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(200));
            token.cancel();
        });
        measure(&p, Some(&token))
    });
    assert_eq!(m.outcome, StepOutcome::Cancelled);
    assert!(t.elapsed() < Duration::from_secs(5));
}

#[test]
fn hardware_counters_are_unsupported_without_a_pmu() {
    if counters::available().get(&Metric::Cycles) == Some(&true) {
        return skip("perf_event_open for cycles succeeds here, so this machine has a PMU");
    }
    let dir = tempfile::tempdir().unwrap();
    let m = measure(&plan(&["true"], dir.path(), 2), None);
    assert_eq!(m.outcome, StepOutcome::Ok);
    for run in &m.runs {
        for hw in [
            Metric::Cycles,
            Metric::HwInstructions,
            Metric::Branches,
            Metric::CacheMisses,
        ] {
            assert_eq!(
                run.metrics.get(&hw),
                Some(&MetricValue::Unsupported),
                "{hw}"
            );
        }
        assert!(run.metrics[&Metric::TaskClock].measured().is_some());
    }
    assert!(
        !m.summary.contains_key(&Metric::Cycles),
        "unsupported must not be summarised"
    );
}

#[test]
fn callgrind_counts_repeat_exactly() {
    let dir = tempfile::tempdir().unwrap();
    if kiln_worker::measure::callgrind::version().is_none() {
        return skip("valgrind is not installed");
    }
    let src = dir.path().join("prog.c");
    std::fs::write(
        &src,
        "#include <stdio.h>\nint main(void){unsigned long s=0;for(int i=0;i<100000;i++)s+=(unsigned long)i*i;printf(\"%lu\\n\",s);return 0;}\n",
    )
    .unwrap();
    let cc = output_std(
        std::process::Command::new("cc")
            .args(["-O1", "-o", "prog", "prog.c"])
            .current_dir(dir.path()),
    )
    .unwrap();
    assert!(
        cc.status.success(),
        "{}",
        String::from_utf8_lossy(&cc.stderr)
    );
    let mut p = plan(&["./prog"], dir.path(), 3);
    p.objective = Metric::Instructions;
    p.policy.max = 10;
    let m = measure(&p, None);
    assert_eq!(m.outcome, StepOutcome::Ok);
    let counts = measured(&m, Metric::Instructions);
    assert_eq!(
        counts.len(),
        3,
        "identical counts meet the CI target at the minimum: {counts:?}"
    );
    assert!(counts[0] > 100_000.0);
    assert!(
        counts.iter().all(|c| *c == counts[0]),
        "counts differ: {counts:?}"
    );
    assert!(m.target_met);
    // Callgrind runs are separate from timed runs: no wall time in them.
    let timed = m
        .runs
        .iter()
        .filter(|r| r.metrics.contains_key(&Metric::WallTime))
        .count();
    assert_eq!(timed, 3);
    assert!(m
        .runs
        .iter()
        .all(|r| !(r.metrics.contains_key(&Metric::WallTime)
            && r.metrics.contains_key(&Metric::Instructions))));
}

#[test]
fn wrong_output_is_detected() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = plan(&["echo", "hello"], dir.path(), 3);
    p.expected_output = Some(ContentHash::of(b"hello\n"));
    let ok = measure(&p, None);
    assert_eq!(ok.outcome, StepOutcome::Ok);
    assert_eq!(ok.output_digest, Some(ContentHash::of(b"hello\n")));

    p.expected_output = Some(ContentHash::of(b"goodbye\n"));
    let bad = measure(&p, None);
    assert_eq!(
        bad.outcome,
        StepOutcome::WrongOutput {
            expected: ContentHash::of(b"goodbye\n"),
            found: ContentHash::of(b"hello\n")
        }
    );
    assert!(bad.summary.is_empty());
}

#[test]
fn a_checked_output_file_is_compared_and_must_be_written() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = plan(&["sh", "-c", "echo 42 > out.txt"], dir.path(), 2);
    p.output = OutputSpec::File(dir.path().join("out.txt"));
    p.expected_output = Some(ContentHash::of(b"42\n"));
    assert_eq!(measure(&p, None).outcome, StepOutcome::Ok);

    p.argv = vec!["true".into()];
    let m = measure(&p, None);
    assert!(
        matches!(m.outcome, StepOutcome::RunFailed { code: Some(0), .. }),
        "{:?}",
        m.outcome
    );
}

#[test]
fn adaptive_repetition_stops_at_the_time_budget() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = plan(&["sleep", "0.05"], dir.path(), 2);
    p.policy = RunPolicy {
        warmup: 0,
        min: 2,
        max: 1000,
        target_rel_ci: 0.0,
        max_time_s: 0.5,
    };
    let m = measure(&p, None);
    assert_eq!(m.outcome, StepOutcome::Ok);
    assert!((2..=20).contains(&m.runs.len()), "{} runs", m.runs.len());
    assert!(!m.target_met);
}

#[test]
fn a_candidate_past_its_race_bound_stops_after_its_minimum_runs() {
    let dir = tempfile::tempdir().unwrap();
    let race = |bound_ms: f64| Race {
        incumbent: bound_ms * 0.9e6,
        bound: bound_ms * 1e6,
        p: 0.01,
    };
    let mut p = plan(&["sleep", "0.05"], dir.path(), 3);
    p.policy = RunPolicy {
        warmup: 1,
        max: 8,
        target_rel_ci: 0.0,
        ..p.policy
    };
    // 50 ms runs against a bound of 10 ms: lost after the minimum.
    p.race = Some(race(10.0));
    let m = measure(&p, None);
    assert_eq!(m.outcome, StepOutcome::Ok);
    assert_eq!(measured(&m, Metric::WallTime).len(), 3);
    let cut = m.cut_short.expect("cut short");
    assert_eq!((cut.runs, cut.max_runs, cut.runs_saved()), (3, 8, 5));
    assert_eq!(cut.race, race(10.0));
    let s = m.summary[&Metric::WallTime];
    assert_eq!((cut.ci_low, cut.ci_high), (s.ci_low, s.ci_high));
    assert!(cut.ci_low > 10e6, "{cut:?}");
    // Against a bound of 10 s the runs go on to the policy's end.
    p.race = Some(race(10_000.0));
    let m = measure(&p, None);
    assert_eq!(measured(&m, Metric::WallTime).len(), 8);
    assert_eq!(m.cut_short, None);
}

#[test]
fn the_environment_is_clean_and_runs_are_pinned() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = plan(
        &[
            "sh",
            "-c",
            "env | sort > env.txt; grep Cpus_allowed_list /proc/self/status > cpus.txt",
        ],
        dir.path(),
        1,
    );
    p.cpus = vec![0];
    assert_eq!(measure(&p, None).outcome, StepOutcome::Ok);
    let env = std::fs::read_to_string(dir.path().join("env.txt")).unwrap();
    // Only what the worker sets (the launch's id among it), plus what sh itself adds.
    for line in env.lines() {
        let key = line.split('=').next().unwrap();
        assert!(
            [
                "PATH",
                "HOME",
                "LANG",
                "KILN_LAUNCH",
                "PWD",
                "SHLVL",
                "OLDPWD",
                "_"
            ]
            .contains(&key),
            "leaked: {line}"
        );
    }
    assert!(env.contains("LANG=C"));
    assert!(env.contains(&format!("HOME={}", dir.path().display())));
    let cpus = std::fs::read_to_string(dir.path().join("cpus.txt")).unwrap();
    assert!(cpus.trim().ends_with("\t0"), "{cpus}");
}
