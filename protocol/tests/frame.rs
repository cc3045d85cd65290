//! Wire framing: every message type round-trips; bad frames are errors, never panics.

use std::collections::BTreeMap;
use std::io::Cursor;

use kiln_protocol::bundle::{Bundle, BundleFile};
use kiln_protocol::config::{
    BenchmarkKind, BenchmarkSpec, Compiler, OutputCheck, ReplayFallback, RunPolicy,
};
use kiln_protocol::frame::{self, FrameError, MAX_FRAME};
use kiln_protocol::message::{
    BuildRecord, Capabilities, CutShort, Discovery, GpuInfo, Measurement, Race, RunRecord,
};
use kiln_protocol::{
    DecisionPoint, DecisionSet, DecisionValue, Metric, MetricValue, Request, Response, SiteId,
    StepId, StepOutcome, StepRequest, StepResult, Summary, PROTOCOL_VERSION,
};

fn spec() -> BenchmarkSpec {
    BenchmarkSpec {
        name: "b".into(),
        kind: BenchmarkKind::LlvmInline {
            compiler: Compiler::Clang,
            fallback: ReplayFallback::NeverInline,
        },
        sources: "bench-programs/b".into(),
        build: vec!["clang".into(), "main.c".into()],
        run: vec!["./bench".into()],
        timeout_s: 1.5,
        build_timeout_s: 10.0,
        discovery_cpu_s: 60.0,
        build_memory_bytes: 8 << 30,
        env: vec![("A".into(), "b c".into())],
        pass_env: Vec::new(),
        dependency_crates: Vec::new(),
        check_output: OutputCheck::File("out.txt".into()),
        limits: Default::default(),
        container: None,
    }
}

fn decisions() -> DecisionSet {
    let mut d = BTreeMap::new();
    d.insert(SiteId::from("f @ main:1:2"), DecisionValue::inline());
    d.insert(SiteId::from("tile"), DecisionValue::Int(32));
    DecisionSet(d)
}

fn requests() -> Vec<Request> {
    let bundle = Bundle::new(vec![BundleFile {
        path: "main.c".into(),
        executable: false,
        contents: vec![0, 1, 2, 255],
        modified_ns: None,
    }]);
    vec![
        Request::Hello {
            protocol_version: PROTOCOL_VERSION,
            controller_version: "0.1.0".into(),
        },
        Request::HasBundle { hash: bundle.hash },
        Request::BundlePart(Box::new(bundle.parts().remove(0))),
        Request::Discover {
            id: StepId(1),
            benchmark: Box::new(spec()),
            bundle: bundle.hash,
        },
        Request::Step(Box::new(StepRequest {
            id: StepId(7),
            slot: 1,
            cpus: vec![1],
            gpus: vec![0],
            benchmark: spec(),
            bundle: bundle.hash,
            decisions: decisions(),
            runs: RunPolicy::default(),
            objective: Metric::Instructions,
            expected_output: Some(bundle.hash),
            reuse_build: false,
            function_costs: false,
            race: Some(race()),
        })),
        Request::Cancel { step: StepId(7) },
        Request::Ping { nonce: 9 },
        Request::Shutdown,
    ]
}

fn race() -> Race {
    Race {
        incumbent: 1e6,
        bound: 1.2e6,
        p: 0.01,
    }
}

fn responses() -> Vec<Response> {
    let hash = decisions().hash();
    let mut metrics = BTreeMap::new();
    metrics.insert(Metric::WallTime, MetricValue::Measured(1.5e6));
    metrics.insert(Metric::Cycles, MetricValue::Unsupported);
    let mut summary = BTreeMap::new();
    summary.insert(Metric::WallTime, Summary::of(&[1.0, 2.0, 3.0]).unwrap());
    let outcomes = vec![
        StepOutcome::Ok,
        StepOutcome::BuildFailed {
            code: Some(1),
            log_tail: "error: x".into(),
        },
        StepOutcome::RunFailed {
            code: None,
            signal: Some(11),
            signal_name: Some("SIGSEGV".into()),
            stderr_tail: String::new(),
        },
        StepOutcome::Timeout {
            phase: "run".into(),
            limit_s: 1.0,
        },
        StepOutcome::WrongOutput {
            expected: hash,
            found: hash,
        },
        StepOutcome::DecisionMismatch {
            mismatched: vec!["f @ main:1:2".into()],
        },
        StepOutcome::WorkerLost {
            times: 3,
            reason: "link".into(),
        },
        StepOutcome::Cancelled,
        StepOutcome::Rejected {
            reason: "no bundle".into(),
        },
    ];
    let mut out: Vec<Response> = outcomes
        .into_iter()
        .map(|outcome| {
            let cut_short = (outcome == StepOutcome::Ok).then_some(CutShort {
                race: race(),
                runs: 3,
                max_runs: 10,
                ci_low: 1.3e6,
                ci_high: 1.6e6,
            });
            Response::StepDone(Box::new(StepResult {
                id: StepId(3),
                measurement: Measurement {
                    outcome,
                    runs: vec![RunRecord {
                        index: 0,
                        warmup: false,
                        exit_code: Some(0),
                        signal: None,
                        metrics: metrics.clone(),
                    }],
                    summary: summary.clone(),
                    target_met: true,
                    cut_short,
                    output_digest: Some(hash),
                    checked_output: None,
                    warnings: Vec::new(),
                    function_instructions: BTreeMap::new(),
                    function_code: BTreeMap::new(),
                },
                build: Some(BuildRecord {
                    wall_ns: 5,
                    text_bytes: Some(1234),
                    binary_hash: Some(hash),
                    log_tail: String::new(),
                    replay_file: Some("x: 'f' inlined into 'main' at callsite main:1:2;".into()),
                    reused: false,
                    moot: Default::default(),
                }),
                started_ms: 1,
                finished_ms: 2,
            }))
        })
        .collect();
    let mut counters = BTreeMap::new();
    counters.insert(Metric::Cycles, false);
    out.extend([
        Response::Hello {
            protocol_version: PROTOCOL_VERSION,
            capabilities: Box::new(Capabilities {
                worker_version: "0.1.0".into(),
                hostname: "h".into(),
                kernel: "6".into(),
                cpu_model: "cpu".into(),
                cpu_flags: vec!["avx2".into()],
                cores: 2,
                governor: None,
                aslr: Some("2".into()),
                counters,
                valgrind: Some("3.19".into()),
                gpus: vec![GpuInfo {
                    index: 0,
                    name: "H200".into(),
                    memory_bytes: 1,
                    driver: "550".into(),
                }],
                compilers: BTreeMap::new(),
                build_modes: BTreeMap::new(),
                gpu_time: Ok("/opt/kiln/libkiln_cupti.so".into()),
                limits: Default::default(),
                slurm_job: Some(42),
            }),
        },
        Response::Prepared { hash },
        Response::PartStored { hash, index: 2 },
        Response::BundleStatus {
            hash,
            present: false,
            parts_stored: 3,
            warning: Some("the cached bundle was discarded".into()),
        },
        Response::Discovered {
            id: StepId(1),
            result: Ok(Discovery {
                points: vec![DecisionPoint::inline_site(SiteId::from("f @ main:1:2"))],
                baseline: decisions(),
                features: [(
                    SiteId::from("f @ main:1:2"),
                    kiln_protocol::SiteFeatures {
                        inline_cost: Some(-15),
                        callee_recursive: Some(false),
                        callee_external: Some(true),
                        ..Default::default()
                    },
                )]
                .into(),
                fallbacks: vec!["big.c: failed (signal: 9) within its limits".into()],
                fixed: [(
                    SiteId::from("g @ main:3:4"),
                    "the compiler does not take the other decision: requested inline but not inlined"
                        .into(),
                )]
                .into(),
                forced: [SiteId::from("f @ g:2:9")].into(),
            }),
        },
        Response::Discovered {
            id: StepId(2),
            result: Err("build failed".into()),
        },
        Response::Pong { nonce: 9 },
        Response::Error {
            step: None,
            message: "bad".into(),
        },
        Response::Bye,
    ]);
    out
}

#[test]
fn every_request_round_trips() {
    for msg in requests() {
        let bytes = frame::encode(&msg);
        let back: Request = frame::read_frame(&mut Cursor::new(bytes), MAX_FRAME).unwrap();
        assert_eq!(back, msg);
    }
}

#[test]
fn every_response_round_trips() {
    for msg in responses() {
        let mut buf = Vec::new();
        frame::write_frame(&mut buf, &msg).unwrap();
        let back: Response = frame::read_frame(&mut Cursor::new(buf), MAX_FRAME).unwrap();
        assert_eq!(back, msg);
    }
}

#[tokio::test]
async fn async_framing_round_trips_a_stream_of_messages() {
    let mut buf = Vec::new();
    for msg in requests() {
        frame::write_frame_async(&mut buf, &msg).await.unwrap();
    }
    let mut r = Cursor::new(buf);
    for msg in requests() {
        let back: Request = frame::read_frame_async(&mut r, MAX_FRAME).await.unwrap();
        assert_eq!(back, msg);
    }
    let end = frame::read_frame_async::<Request>(&mut r, MAX_FRAME).await;
    assert!(matches!(end, Err(FrameError::Closed)));
}

#[test]
fn truncated_frames_are_errors() {
    let bytes = frame::encode(&Request::Ping { nonce: 1 });
    for cut in 1..bytes.len() {
        let err =
            frame::read_frame::<Request>(&mut Cursor::new(&bytes[..cut]), MAX_FRAME).unwrap_err();
        assert!(
            matches!(err, FrameError::Truncated { .. }),
            "cut at {cut}: {err}"
        );
    }
    let err = frame::read_frame::<Request>(&mut Cursor::new(Vec::new()), MAX_FRAME).unwrap_err();
    assert!(matches!(err, FrameError::Closed));
}

#[test]
fn oversized_frames_are_refused_before_allocating() {
    // A header announcing 4 GiB − 1 with no payload: must fail on the length alone.
    let bytes = [0xff, 0xff, 0xff, 0xff];
    let err = frame::read_frame::<Request>(&mut Cursor::new(bytes), MAX_FRAME).unwrap_err();
    assert!(
        matches!(
            err,
            FrameError::Oversized {
                len: 4294967295,
                ..
            }
        ),
        "{err}"
    );
    let small_limit =
        frame::read_frame::<Request>(&mut Cursor::new(frame::encode(&Request::Shutdown)), 4);
    assert!(matches!(small_limit, Err(FrameError::Oversized { .. })));
}

#[test]
fn malformed_payloads_are_errors() {
    let mut bytes = 5u32.to_be_bytes().to_vec();
    bytes.extend_from_slice(b"{\"ty");
    bytes.push(b'!');
    let err = frame::read_frame::<Request>(&mut Cursor::new(bytes), MAX_FRAME).unwrap_err();
    assert!(matches!(err, FrameError::Malformed(_)));
    assert!(err.is_recoverable());
    let unknown = frame::encode(&serde_json::json!({"type": "explode"}));
    let err = frame::read_frame::<Request>(&mut Cursor::new(unknown), MAX_FRAME).unwrap_err();
    assert!(err.to_string().contains("explode"), "{err}");
}

#[test]
fn version_mismatch_is_reported_clearly() {
    let hello = Request::Hello {
        protocol_version: PROTOCOL_VERSION + 1,
        controller_version: "9.9".into(),
    };
    let err = kiln_protocol::message::check_hello(&hello).unwrap_err();
    assert_eq!(
        err,
        format!(
            "protocol version mismatch: controller speaks {}, this worker speaks {}; deploy matching kiln and kiln-worker binaries",
            PROTOCOL_VERSION + 1,
            PROTOCOL_VERSION
        )
    );
    let ok = Request::Hello {
        protocol_version: PROTOCOL_VERSION,
        controller_version: "x".into(),
    };
    assert!(kiln_protocol::message::check_hello(&ok).is_ok());
}
