//! `kiln-worker serve` as the controller sees it: a child process speaking
//! frames on stdin/stdout.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use kiln_protocol::bundle::{Bundle, BundleFile};
use kiln_protocol::config::benchmark::{BenchmarkKind, BenchmarkSpec, OutputCheck, RunPolicy};
use kiln_protocol::decision::{ContentHash, DecisionPoint, DecisionSet, DecisionValue, SiteId};
use kiln_protocol::frame::{read_frame, write_frame, MAX_FRAME};
use kiln_protocol::message::{Request, Response, StepId, StepOutcome, StepRequest};
use kiln_protocol::{Metric, PROTOCOL_VERSION};
use kiln_worker::launch::spawn_std;

struct Worker {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: ChildStdout,
    _rundir: Option<tempfile::TempDir>,
    rundir: PathBuf,
}

impl Worker {
    fn start(max_frame: usize) -> Worker {
        let rundir = tempfile::tempdir().unwrap();
        let mut w = Worker::start_in(rundir.path(), max_frame);
        w._rundir = Some(rundir);
        w
    }

    /// A worker on `rundir`, which another worker process may be using too.
    fn start_in(rundir: &Path, max_frame: usize) -> Worker {
        Worker::start_with_env(rundir, max_frame, Vec::new())
    }

    /// A worker on `rundir` with `env` added to its environment.
    fn start_with_env(rundir: &Path, max_frame: usize, env: Vec<(&str, PathBuf)>) -> Worker {
        let mut child = spawn_std(
            Command::new(env!("CARGO_BIN_EXE_kiln-worker"))
                .args(["serve", "--rundir"])
                .arg(rundir)
                .args(["--max-frame", &max_frame.to_string(), "--compiler", "cc"])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .envs(env)
                .env("KILN_LOG", "error"),
        )
        .unwrap();
        Worker {
            stdin: child.stdin.take(),
            stdout: child.stdout.take().unwrap(),
            child,
            rundir: rundir.to_path_buf(),
            _rundir: None,
        }
    }

    fn send(&mut self, req: &Request) {
        write_frame(self.stdin.as_mut().unwrap(), req).unwrap();
    }

    fn send_raw(&mut self, bytes: &[u8]) {
        let w = self.stdin.as_mut().unwrap();
        w.write_all(bytes).unwrap();
        w.flush().unwrap();
    }

    fn recv(&mut self) -> Response {
        read_frame(&mut self.stdout, MAX_FRAME).expect("a reply from the worker")
    }

    /// Waits for the process to exit on its own, at most `limit`.
    fn wait_exit(&mut self, limit: Duration) -> ExitStatus {
        let t = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                t.elapsed() < limit,
                "the worker did not exit within {limit:?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn frame(payload: &[u8]) -> Vec<u8> {
    let mut f = (payload.len() as u32).to_be_bytes().to_vec();
    f.extend_from_slice(payload);
    f
}

fn expect_error(resp: Response, needle: &str) -> String {
    match resp {
        Response::Error { message, .. } => {
            assert!(
                message.contains(needle),
                "error {message:?} should mention {needle:?}"
            );
            message
        }
        other => panic!("expected an error mentioning {needle:?}, got {other:?}"),
    }
}

#[test]
fn bad_input_gets_errors_and_serving_goes_on() {
    let mut w = Worker::start(4096);

    // A frame of the right length whose JSON is cut short.
    w.send_raw(&frame(br#"{"type":"ping","non"#));
    expect_error(w.recv(), "malformed");

    // An oversized frame: announced past the limit, then sent in full.
    let mut big = (10_000u32).to_be_bytes().to_vec();
    big.extend(std::iter::repeat_n(b'x', 10_000));
    w.send_raw(&big);
    expect_error(w.recv(), "oversized");

    // A hello of another protocol version: both versions are named.
    w.send(&Request::Hello {
        protocol_version: 999,
        controller_version: "test".into(),
    });
    let message = expect_error(w.recv(), "999");
    assert!(message.contains(&PROTOCOL_VERSION.to_string()));

    // Still in step: a ping, then a proper hello.
    w.send(&Request::Ping { nonce: 7 });
    assert_eq!(w.recv(), Response::Pong { nonce: 7 });
    w.send(&Request::Hello {
        protocol_version: PROTOCOL_VERSION,
        controller_version: "test".into(),
    });
    match w.recv() {
        Response::Hello {
            protocol_version,
            capabilities,
        } => {
            assert_eq!(protocol_version, PROTOCOL_VERSION);
            assert!(capabilities.cores >= 1);
            assert_eq!(capabilities.counters.get(&Metric::TaskClock), Some(&true));
        }
        other => panic!("expected hello, got {other:?}"),
    }

    // A frame cut off by the end of the stream ends the session cleanly.
    w.send_raw(&100u32.to_be_bytes());
    w.send_raw(b"{\"type\":");
    drop(w.stdin.take());
    let status = w.wait_exit(Duration::from_secs(10));
    assert!(status.success(), "exit status {status}");
    let mut rest = Vec::new();
    w.stdout.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "no reply to a truncated frame");
}

fn knobs_spec(run: &[&str], build: &[&str], timeout_s: f64) -> BenchmarkSpec {
    BenchmarkSpec {
        name: "echo-knob".into(),
        kind: BenchmarkKind::Knobs {
            points: vec![DecisionPoint {
                id: SiteId::from("x"),
                domain: vec![DecisionValue::Int(1), DecisionValue::Int(2)],
            }],
        },
        sources: PathBuf::from("unused"),
        build: build.iter().map(|s| s.to_string()).collect(),
        run: run.iter().map(|s| s.to_string()).collect(),
        timeout_s,
        build_timeout_s: 30.0,
        discovery_cpu_s: 60.0,
        build_memory_bytes: 8 << 30,
        env: vec![("GREETING".into(), "hello".into())],
        pass_env: Vec::new(),
        dependency_crates: Vec::new(),
        check_output: OutputCheck::Stdout,
        limits: Default::default(),
        container: None,
    }
}

fn step(id: u64, slot: u32, spec: &BenchmarkSpec, bundle: ContentHash, x: i64) -> StepRequest {
    StepRequest {
        id: StepId(id),
        slot,
        cpus: Vec::new(),
        gpus: Vec::new(),
        benchmark: spec.clone(),
        bundle,
        decisions: DecisionSet([(SiteId::from("x"), DecisionValue::Int(x))].into()),
        runs: RunPolicy {
            warmup: 1,
            min: 3,
            max: 3,
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

fn bundle() -> Bundle {
    Bundle::new(vec![BundleFile {
        path: "data/greeting.txt".into(),
        executable: false,
        contents: b"from the bundle\n".to_vec(),
        modified_ns: None,
    }])
}

fn prepare(w: &mut Worker, b: &Bundle) {
    w.send(&Request::HasBundle { hash: b.hash });
    assert_eq!(w.recv(), status(b, false));
    send_parts(w, b);
    assert_eq!(w.recv(), Response::Prepared { hash: b.hash });
    w.send(&Request::HasBundle { hash: b.hash });
    assert_eq!(w.recv(), status(b, true));
}

/// Sends every part of a bundle, taking the answers to all but the last.
fn send_parts(w: &mut Worker, b: &Bundle) {
    for part in b.parts() {
        let last = part.index + 1 == part.count;
        w.send(&Request::BundlePart(Box::new(part)));
        if !last {
            assert!(matches!(w.recv(), Response::PartStored { .. }));
        }
    }
}

/// The answer to has-bundle for a bundle no transfer began.
fn status(b: &Bundle, present: bool) -> Response {
    Response::BundleStatus {
        hash: b.hash,
        present,
        parts_stored: 0,
        warning: None,
    }
}

fn step_done(resp: Response) -> kiln_protocol::StepResult {
    match resp {
        Response::StepDone(r) => *r,
        other => panic!("expected step-done, got {other:?}"),
    }
}

#[test]
fn prepare_and_step_a_knobs_benchmark_end_to_end() {
    let mut w = Worker::start(MAX_FRAME);
    let b = bundle();
    prepare(&mut w, &b);
    assert!(w
        .rundir
        .join("bundles")
        .join(b.hash.to_string())
        .join("data/greeting.txt")
        .is_file());

    let spec = knobs_spec(
        &[
            "sh",
            "-c",
            "echo {x} $KILN_KNOB_X $GREETING; cat data/greeting.txt built.txt",
        ],
        &["sh", "-c", "echo built with {x} $KILN_KNOB_X > built.txt"],
        10.0,
    );
    let mut req = step(1, 0, &spec, b.hash, 2);
    let expected = ContentHash::of(b"2 2 hello\nfrom the bundle\nbuilt with 2 2\n");
    req.expected_output = Some(expected);
    w.send(&Request::Step(Box::new(req.clone())));
    let r = step_done(w.recv());
    assert_eq!(r.id, StepId(1));
    assert_eq!(r.measurement.outcome, StepOutcome::Ok, "{r:?}");
    assert_eq!(
        r.measurement.runs.len(),
        4,
        "one warm-up and three measured runs"
    );
    assert_eq!(r.measurement.output_digest, Some(expected));
    assert_eq!(r.measurement.summary[&Metric::WallTime].n, 3);
    let build = r.build.expect("a build record");
    assert!(!build.reused);
    let decisions = std::fs::read_to_string(w.rundir.join("slots/0/work/decisions.sexp")).unwrap();
    assert!(decisions.contains("(x 2)"), "{decisions}");

    // Re-measuring the same candidate reuses its build.
    req.id = StepId(2);
    req.reuse_build = true;
    w.send(&Request::Step(Box::new(req.clone())));
    let r = step_done(w.recv());
    assert_eq!(r.measurement.outcome, StepOutcome::Ok);
    assert!(r.build.expect("a build record").reused);

    // Another decision changes the output: wrong output against the old digest.
    let mut other = step(3, 0, &spec, b.hash, 1);
    other.expected_output = Some(expected);
    w.send(&Request::Step(Box::new(other)));
    let r = step_done(w.recv());
    assert!(
        matches!(r.measurement.outcome, StepOutcome::WrongOutput { .. }),
        "{:?}",
        r.measurement.outcome
    );
    assert!(r.measurement.summary.is_empty());

    // Knob discovery comes from the spec: baseline = first value of each domain.
    w.send(&Request::Discover {
        id: StepId(4),
        benchmark: Box::new(spec.clone()),
        bundle: b.hash,
    });
    match w.recv() {
        Response::Discovered { id, result } => {
            assert_eq!(id, StepId(4));
            let d = result.unwrap();
            assert_eq!(d.points.len(), 1);
            assert_eq!(
                d.baseline.get(&SiteId::from("x")),
                Some(&DecisionValue::Int(1))
            );
        }
        other => panic!("expected discovered, got {other:?}"),
    }

    // A step whose bundle is missing is rejected, not failed.
    w.send(&Request::Step(Box::new(step(
        5,
        1,
        &spec,
        ContentHash::of(b"nothing"),
        1,
    ))));
    let r = step_done(w.recv());
    assert!(
        r.measurement.outcome.is_infrastructure(),
        "{:?}",
        r.measurement.outcome
    );

    w.send(&Request::Shutdown);
    assert_eq!(w.recv(), Response::Bye);
    assert!(w.wait_exit(Duration::from_secs(10)).success());
}

#[test]
fn pings_are_answered_while_steps_run_and_cancel_works() {
    let mut w = Worker::start(MAX_FRAME);
    let b = bundle();
    prepare(&mut w, &b);
    let spec = knobs_spec(&["sh", "-c", "sleep 30 & sleep 30"], &[], 60.0);
    w.send(&Request::Step(Box::new(step(1, 0, &spec, b.hash, 1))));

    // The slot is busy: a second step there is rejected at once.
    w.send(&Request::Step(Box::new(step(2, 0, &spec, b.hash, 1))));
    let r = step_done(w.recv());
    assert_eq!(r.id, StepId(2));
    assert!(
        matches!(&r.measurement.outcome, StepOutcome::Rejected { reason } if reason.contains("busy")),
        "{:?}",
        r.measurement.outcome
    );

    let t = Instant::now();
    w.send(&Request::Ping { nonce: 1 });
    assert_eq!(w.recv(), Response::Pong { nonce: 1 });
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "pong took {:?}",
        t.elapsed()
    );

    w.send(&Request::Cancel { step: StepId(1) });
    let r = step_done(w.recv());
    assert_eq!(r.id, StepId(1));
    assert_eq!(r.measurement.outcome, StepOutcome::Cancelled);
    assert!(t.elapsed() < Duration::from_secs(10));

    w.send(&Request::Cancel { step: StepId(1) });
    expect_error(w.recv(), "not running");

    // The end of the stream ends the session.
    drop(w.stdin.take());
    assert!(w.wait_exit(Duration::from_secs(10)).success());
}

#[test]
fn a_tampered_bundle_is_refused() {
    let mut w = Worker::start(MAX_FRAME);
    let mut b = bundle();
    b.files[0].contents.push(b'!');
    send_parts(&mut w, &b);
    expect_error(w.recv(), "mismatch");
    w.send(&Request::HasBundle { hash: b.hash });
    assert_eq!(w.recv(), status(&b, false));
    let leftovers: Vec<_> = std::fs::read_dir(Path::new(&w.rundir).join("bundles"))
        .unwrap()
        .collect();
    assert!(
        leftovers.is_empty(),
        "nothing is stored from a refused bundle"
    );
}

#[test]
fn slots_run_steps_at_once() {
    let mut w = Worker::start(MAX_FRAME);
    let b = bundle();
    prepare(&mut w, &b);
    let spec = knobs_spec(&["sh", "-c", "sleep 0.3; echo {x}"], &[], 10.0);
    w.send(&Request::Step(Box::new(step(1, 0, &spec, b.hash, 1))));
    w.send(&Request::Step(Box::new(step(2, 1, &spec, b.hash, 2))));
    let mut results: Vec<_> = (0..2).map(|_| step_done(w.recv())).collect();
    results.sort_by_key(|r| r.id);
    for r in &results {
        assert_eq!(r.measurement.outcome, StepOutcome::Ok, "{r:?}");
        assert_eq!(r.measurement.runs.len(), 4);
    }
    let (a, b) = (&results[0], &results[1]);
    assert!(
        a.started_ms < b.finished_ms && b.started_ms < a.finished_ms,
        "the two slots' steps overlap in time: {}..{} and {}..{}",
        a.started_ms,
        a.finished_ms,
        b.started_ms,
        b.finished_ms
    );
    assert!(w.rundir.join("slots/0/work").is_dir() && w.rundir.join("slots/1/work").is_dir());
}

#[test]
fn two_worker_sessions_never_share_a_slot_at_once() {
    // As after a cut link: the old session still runs a step in slot 0 when a
    // new session on the same run directory is sent one for the same slot.
    let mut old = Worker::start(MAX_FRAME);
    let mut new = Worker::start_in(&old.rundir.clone(), MAX_FRAME);
    let b = bundle();
    prepare(&mut old, &b);
    // The bundle cache on disk is shared: the new session finds the bundle there.
    let spec = knobs_spec(&["sh", "-c", "sleep 0.2; echo {x}"], &[], 10.0);
    old.send(&Request::Step(Box::new(step(1, 0, &spec, b.hash, 1))));
    std::thread::sleep(Duration::from_millis(100));
    new.send(&Request::Step(Box::new(step(2, 0, &spec, b.hash, 2))));
    let first = step_done(old.recv());
    let second = step_done(new.recv());
    for r in [&first, &second] {
        assert_eq!(r.measurement.outcome, StepOutcome::Ok, "{r:?}");
    }
    // Under load the new session may get the slot first; either way, one waits.
    assert!(
        first.finished_ms <= second.started_ms || second.finished_ms <= first.started_ms,
        "one session waited for the other's step: {}..{} and {}..{}",
        first.started_ms,
        first.finished_ms,
        second.started_ms,
        second.finished_ms
    );
}

#[test]
fn a_step_records_that_the_programs_own_cupti_client_failed_beside_tracing() {
    let rundir = tempfile::tempdir().unwrap();
    let env = match crate::gpu::tracing_env(rundir.path()) {
        Ok(env) => env,
        Err(why) => return crate::common::skip(why),
    };
    let mut w = Worker::start_with_env(rundir.path(), MAX_FRAME, env);
    let b = bundle();
    prepare(&mut w, &b);
    let spec = knobs_spec(&["sh", "-c", crate::gpu::OWN_PROFILER], &[], 10.0);
    let mut req = step(1, 0, &spec, b.hash, 1);
    req.objective = Metric::GpuTime;
    w.send(&Request::Step(Box::new(req)));
    let r = step_done(w.recv());
    assert_eq!(r.measurement.outcome, StepOutcome::Ok, "{r:?}");
    let stdout = r.measurement.checked_output.clone().unwrap_or_default();
    assert!(stdout.contains("libkiln_cupti"), "traced: {stdout}");
    assert_eq!(
        r.measurement.warnings.len(),
        1,
        "{:?}",
        r.measurement.warnings
    );
    assert!(
        r.measurement.warnings[0].contains("CUPTI initialization failed"),
        "{:?}",
        r.measurement.warnings
    );
    w.send(&Request::Shutdown);
    assert_eq!(w.recv(), Response::Bye);
}
