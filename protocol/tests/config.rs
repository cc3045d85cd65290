//! Config parsing: every prod config round-trips, and bad input gets a located, helpful error.

use std::path::PathBuf;

use kiln_protocol::config::{
    Annealing, BenchmarkKind, HillClimbing, LocalWorker, OutputCheck, RandomSearch, Search,
    WorkerSpec,
};
use kiln_protocol::{CampaignConfig, DecisionFile, DecisionPoint, DecisionValue, SiteId};

fn prod_configs() -> Vec<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../prod-configs");
    let mut files: Vec<PathBuf> = [root.clone(), root.join("real")]
        .iter()
        .flat_map(|dir| std::fs::read_dir(dir).expect("prod-configs/ exists"))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "sexp"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_prod_config_parses_and_round_trips() {
    let files = prod_configs();
    assert!(!files.is_empty(), "no configs found in prod-configs/");
    for path in files {
        let config = CampaignConfig::read(&path).unwrap_or_else(|e| panic!("{e}"));
        let printed = config.to_text();
        let again = CampaignConfig::parse(&printed, "printed").unwrap_or_else(|e| {
            panic!(
                "{}: normalized form does not parse: {e}\n{printed}",
                path.display()
            )
        });
        assert_eq!(config, again, "{} does not round-trip", path.display());
        // Printing is stable: the normalized text of the normalized form is itself.
        assert_eq!(printed, again.to_text());
    }
}

const SKETCH: &str = r#"(campaign
  (name quickstart)
  (store "results/quickstart")
  (objective (metric instructions) (statistic median))
  (runs (warmup 1) (min 3) (max 10) (target-rel-ci 0.01))
  (experiments
    ((benchmark sample-dsp) (search (simulated-annealing (steps 100) (t-max 0.04) (t-min 0.001))) (chains 1) (seed 42)))
  (benchmarks
    ((name sample-dsp) (kind llvm-inline) (sources "bench-programs/sample-dsp")
     (build ("clang" "-O2" "main.c" "-o" "bench")) (run ("./bench" "2000")) (timeout-s 30)))
  (workers
    ((local (slots 1) (cpus (1))))
    ((ssh (host "10.0.0.2") (user "bench") (rundir "/home/bench/kiln") (slots 2) (cpus (2 3))))))
"#;

#[test]
fn the_issue_sketch_parses_with_defaults_filled_in() {
    let c = CampaignConfig::parse(SKETCH, "sketch.sexp").unwrap();
    assert_eq!(c.name, "quickstart");
    assert_eq!(c.runs.min, 3);
    assert_eq!(c.experiments[0].name, "sample-dsp");
    assert!(matches!(
        c.experiments[0].search,
        Search::SimulatedAnnealing(Annealing {
            steps: 100,
            flips: 3,
            ..
        })
    ));
    assert!(matches!(
        c.benchmarks[0].kind,
        BenchmarkKind::LlvmInline { .. }
    ));
    assert!(matches!(
        &c.workers[0],
        WorkerSpec::Local(LocalWorker { slots: 1, .. })
    ));
    match &c.workers[1] {
        WorkerSpec::Ssh(s) => {
            assert_eq!(s.port, 22);
            assert_eq!(s.name, "10.0.0.2");
        }
        other => panic!("expected ssh worker, got {other:?}"),
    }
}

fn error_of(text: &str) -> String {
    CampaignConfig::parse(text, "prod-configs/x.sexp")
        .unwrap_err()
        .to_string()
}

#[test]
fn golden_unknown_field() {
    let text = SKETCH.replace("(steps 100)", "(stpes 100)");
    assert_eq!(
        error_of(&text),
        "prod-configs/x.sexp:7:58: unknown field 'stpes' in simulated-annealing; \
         expected one of: steps, t-max, t-min, flips, schedule"
    );
}

#[test]
fn golden_unbalanced_parenthesis() {
    let unclosed = SKETCH.replace(
        "(run (\"./bench\" \"2000\"))",
        "(run (\"./bench\" \"2000\")",
    );
    // Said at the likeliest place: `(workers` is indented as the sibling of `(benchmarks`,
    // which the missing `)` leaves open; beside it, the outermost list never closed.
    assert_eq!(
        error_of(&unclosed),
        "prod-configs/x.sexp:11:3: unbalanced parenthesis: a `)` is likely missing before this \
         line, which is indented as a sibling of the list opened at 8:3, not as its item; the \
         list opened at 1:1 is never closed (the file ends at 13:98)"
    );
    // With no line out of place (the `)` missing at the end) the outermost list is named.
    let unclosed_at_end = SKETCH.trim_end().strip_suffix(')').unwrap().to_string();
    assert_eq!(
        error_of(&unclosed_at_end),
        "prod-configs/x.sexp:1:1: unbalanced parenthesis: the list opened here is never closed \
         (the file ends at 13:97)"
    );
    let extra = format!("{})\n", SKETCH.trim_end());
    assert_eq!(
        error_of(&extra),
        "prod-configs/x.sexp:13:98: unbalanced parenthesis: this `)` closes no list"
    );
}

#[test]
fn golden_wrong_type() {
    let text = SKETCH.replace("(steps 100)", "(steps \"many\")");
    assert_eq!(
        error_of(&text),
        "prod-configs/x.sexp:7:65: field 'steps' expects a non-negative integer, found a string `\"many\"`"
    );
}

#[test]
fn golden_missing_required_field() {
    let text = SKETCH.replace("(store \"results/quickstart\")", "");
    assert_eq!(
        error_of(&text),
        "prod-configs/x.sexp:1:1: missing required field 'store' in campaign"
    );
}

#[test]
fn golden_unknown_benchmark_reference() {
    let text = SKETCH.replace("((benchmark sample-dsp)", "((benchmark sample-dps)");
    assert_eq!(
        error_of(&text),
        "prod-configs/x.sexp:7:5: experiment 'sample-dps' names benchmark 'sample-dps', \
         which is not defined; defined: sample-dsp"
    );
}

#[test]
fn golden_bad_choice() {
    let text = SKETCH.replace("(kind llvm-inline)", "(kind llvm-inlined)");
    assert_eq!(
        error_of(&text),
        "prod-configs/x.sexp:9:30: unknown value 'llvm-inlined' for 'kind'; expected one of: llvm-inline, knobs"
    );
}

#[test]
fn golden_unknown_metric() {
    let text = SKETCH.replace("(metric instructions)", "(metric instrs)");
    let err = error_of(&text);
    assert!(
        err.starts_with(
            "prod-configs/x.sexp:4:22: unknown metric 'instrs'; expected one of: wall-time"
        ),
        "{err}"
    );
}

fn points() -> Vec<DecisionPoint> {
    vec![
        DecisionPoint::inline_site(SiteId::from("fir @ main:3:5")),
        DecisionPoint {
            id: SiteId::from("tile"),
            domain: vec![DecisionValue::Int(8), DecisionValue::Int(16)],
        },
    ]
}

#[test]
fn golden_bad_decision_id() {
    let text = "(decisions\n  (values\n    (\"fir @ main:3:5\" inline)\n    (\"nope @ main:9:9\" inline)))";
    let err = DecisionFile::parse_checked(text, "best.sexp", &points()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "best.sexp:4:5: unknown decision point 'nope @ main:9:9': the benchmark has no such site or knob"
    );
}

/// A site id that is one line off a real one (a source edited since the file was written) names
/// the real one.
#[test]
fn golden_near_miss_decision_id_suggests_the_closest() {
    let text = "(decisions (values (\"fir @ main:4:5\" inline)))";
    let err = DecisionFile::parse_checked(text, "best.sexp", &points()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "best.sexp:1:20: unknown decision point 'fir @ main:4:5': the benchmark has no such site or knob; did you mean 'fir @ main:3:5'?"
    );
}

/// Where several ids are close (sites of one function a few lines apart), the closest three are
/// named, most alike first.
#[test]
fn golden_near_miss_decision_id_lists_up_to_three_closest() {
    let points: Vec<_> = [
        "fir @ main:3:5",
        "fir @ main:13:5",
        "fir @ main:23:5",
        "fir @ main:33:15",
    ]
    .into_iter()
    .map(|id| DecisionPoint::inline_site(SiteId::from(id)))
    .collect();
    let text = "(decisions (values (\"fri @ main:3:5\" inline)))";
    let err = DecisionFile::parse_checked(text, "best.sexp", &points).unwrap_err();
    assert_eq!(
        err.to_string(),
        "best.sexp:1:20: unknown decision point 'fri @ main:3:5': the benchmark has no such site or \
         knob; did you mean one of 'fir @ main:3:5', 'fir @ main:13:5', 'fir @ main:23:5'?"
    );
}

#[test]
fn golden_value_outside_domain() {
    let text = "(decisions (values (tile 12)))";
    let err = DecisionFile::parse_checked(text, "d.sexp", &points()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "d.sexp:1:20: value '12' is outside the domain of 'tile'; expected one of: 8, 16"
    );
}

#[test]
fn golden_malformed_decision_entry() {
    let err = DecisionFile::parse("(decisions (values (tile)))", "d.sexp").unwrap_err();
    assert_eq!(
        err.to_string(),
        "d.sexp:1:20: expected a decision like (\"site-id\" value), found `(tile)`"
    );
}

#[test]
fn knobs_benchmarks_parse() {
    let text = r#"(campaign (name k) (store "s")
      (experiments ((benchmark mm) (search (random-walk (steps 5)))))
      (benchmarks ((name mm) (kind knobs) (sources "b") (build ("cc" "-DB={block}" "mm.c")) (run ("./a.out"))
                   (knobs (block 8 16 32) (order "ijk" "ikj"))))
      (workers (local)))"#;
    let c = CampaignConfig::parse(text, "k.sexp").unwrap();
    let points = c.benchmarks[0].knob_points().unwrap();
    assert_eq!(points.len(), 2);
    assert_eq!(points[1].domain[0], DecisionValue::Name("ijk".into()));
    let again = CampaignConfig::parse(&c.to_text(), "again").unwrap();
    assert_eq!(c, again);
}

#[test]
fn knob_only_fields_are_rejected_on_inline_benchmarks() {
    let text = SKETCH.replace("(timeout-s 30)", "(timeout-s 30) (knobs (x 1 2))");
    let err = error_of(&text);
    assert!(
        err.contains("field 'knobs' applies only to benchmarks of kind knobs"),
        "{err}"
    );
}

#[test]
fn calibration_parses_with_defaults_and_round_trips() {
    let text = SKETCH.replace(
        "(experiments",
        "(calibration (benchmark sample-dsp) (take-out-of-service #t))\n  (experiments",
    );
    let c = CampaignConfig::parse(&text, "c.sexp").unwrap();
    let cal = c.calibration.as_ref().unwrap();
    assert_eq!(cal.benchmark, "sample-dsp");
    assert_eq!(cal.every, 50);
    assert_eq!(cal.max_drift, 0.05);
    assert!(cal.take_out_of_service);
    let printed = c.to_text();
    assert!(printed.contains("(take-out-of-service #t)"), "{printed}");
    assert_eq!(CampaignConfig::parse(&printed, "again").unwrap(), c);
    assert!(CampaignConfig::parse(SKETCH, "s")
        .unwrap()
        .calibration
        .is_none());
}

#[test]
fn golden_calibration_errors() {
    let with = |cal: &str| SKETCH.replace("(experiments", &format!("{cal}\n  (experiments"));
    assert_eq!(
        error_of(&with("(calibration (benchmark nope))")),
        "prod-configs/x.sexp:6:16: calibration names benchmark 'nope', which is not defined; \
         defined: sample-dsp"
    );
    assert_eq!(
        error_of(&with(
            "(calibration (benchmark sample-dsp) (take-out-of-service yes))"
        )),
        "prod-configs/x.sexp:6:60: field 'take-out-of-service' expects #t or #f, found a symbol `yes`"
    );
}

#[test]
fn run_limits_parse_with_units_and_round_trip() {
    let text = SKETCH.replace(
        "(timeout-s 30)",
        "(timeout-s 30) (limits (cpus 1.5) (memory \"512m\"))",
    );
    let c = CampaignConfig::parse(&text, "l.sexp").unwrap();
    let limits = c.benchmarks[0].limits;
    assert_eq!(limits.cpus, Some(1.5));
    assert_eq!(limits.memory_bytes, Some(512 << 20));
    assert_eq!(c.limits_in_use(), limits);
    let printed = c.to_text();
    assert!(
        printed.contains("(limits (cpus 1.5) (memory 536870912))"),
        "{printed}"
    );
    assert_eq!(CampaignConfig::parse(&printed, "again").unwrap(), c);
    for (written, bytes) in [
        ("1048576", 1u64 << 20),
        ("\"64KiB\"", 64 << 10),
        ("\"2g\"", 2 << 30),
    ] {
        let t = SKETCH.replace("(timeout-s 30)", &format!("(limits (memory {written}))"));
        let c = CampaignConfig::parse(&t, "l.sexp").unwrap();
        assert_eq!(
            c.benchmarks[0].limits.memory_bytes,
            Some(bytes),
            "{written}"
        );
    }
    // Without the field, nothing is limited and nothing is printed.
    let plain = CampaignConfig::parse(SKETCH, "s").unwrap();
    assert!(plain.benchmarks[0].limits.is_none());
    assert!(!plain.to_text().contains("limits"));
}

#[test]
fn golden_run_limit_errors() {
    let with = |l: &str| SKETCH.replace("(timeout-s 30)", l);
    assert_eq!(
        error_of(&with("(limits (memory \"lots\"))")),
        "prod-configs/x.sexp:10:93: field 'memory' expects a positive size in bytes below 8 EiB, \
         like 536870912 or \"512m\", found a string `\"lots\"`"
    );
    // 2^63 bytes and more would print as a negative integer, which does not read back.
    assert!(error_of(&with("(limits (memory \"8388608t\"))")).contains("below 8 EiB"));
    assert!(error_of(&with("(limits (memory \"9223372036854775808\"))")).contains("below 8 EiB"));
    assert!(CampaignConfig::parse(&with("(limits (memory \"8388607t\"))"), "x").is_ok());
    assert_eq!(
        error_of(&with("(limits (cpus 0))")),
        "prod-configs/x.sexp:10:91: field 'cpus' expects a number greater than 0, found \
         an integer `0`"
    );
    assert_eq!(
        error_of(&with("(limits (swap 1))")),
        "prod-configs/x.sexp:10:85: unknown field 'swap' in limits; expected one of: cpus, memory"
    );
}

#[test]
fn worker_gpus_parse_round_trip_and_need_one_per_slot() {
    let text = SKETCH.replace(
        "(local (slots 1) (cpus (1)))",
        "(local (slots 2) (cpus (0 1)) (gpus (2 3)))",
    );
    let c = CampaignConfig::parse(&text, "g.sexp").unwrap();
    assert_eq!(c.workers[0].gpus(), &[2, 3]);
    assert!(c.workers[1].gpus().is_empty());
    let printed = c.to_text();
    assert!(printed.contains("(gpus (2 3))"), "{printed}");
    assert_eq!(CampaignConfig::parse(&printed, "again").unwrap(), c);
    let err = error_of(&SKETCH.replace(
        "(local (slots 1) (cpus (1)))",
        "(local (slots 2) (gpus (0)))",
    ));
    assert!(
        err.contains("2 slots need at least 2 GPUs in (gpus ...), found 1"),
        "{err}"
    );
}

#[test]
fn pass_env_parses_round_trips_and_refuses_what_is_no_name() {
    let text = SKETCH.replace(
        "(timeout-s 30)",
        "(timeout-s 30) (pass-env (\"CC\" \"RUSTFLAGS\"))",
    );
    let c = CampaignConfig::parse(&text, "c.sexp").unwrap();
    assert_eq!(c.benchmarks[0].pass_env, ["CC", "RUSTFLAGS"]);
    let printed = c.to_text();
    assert!(
        printed.contains("(pass-env (\"CC\" \"RUSTFLAGS\"))"),
        "{printed}"
    );
    assert_eq!(CampaignConfig::parse(&printed, "again").unwrap(), c);

    let bad = SKETCH.replace("(timeout-s 30)", "(timeout-s 30) (pass-env (\"A=1\"))");
    let err = error_of(&bad);
    assert!(err.starts_with("prod-configs/x.sexp:"), "{err}");
    assert!(
        err.contains("'A=1' is no environment variable name (pass-env)"),
        "{err}"
    );
}

#[test]
fn output_checks_and_build_memory_parse_and_round_trip() {
    let text = SKETCH.replace(
        "(timeout-s 30)",
        "(timeout-s 30) (build-memory \"512m\") (check-output (command (\"sha256sum\" \"out.bin\")))",
    );
    let c = CampaignConfig::parse(&text, "c.sexp").unwrap();
    let b = &c.benchmarks[0];
    assert_eq!(b.build_memory_bytes, 512 << 20);
    assert_eq!(
        b.check_output,
        OutputCheck::Command(vec!["sha256sum".into(), "out.bin".into()])
    );
    let printed = c.to_text();
    assert!(
        printed.contains("(command (\"sha256sum\" \"out.bin\"))"),
        "{printed}"
    );
    assert_eq!(CampaignConfig::parse(&printed, "again").unwrap(), c);
    let empty = SKETCH.replace(
        "(timeout-s 30)",
        "(timeout-s 30) (check-output (command ()))",
    );
    assert!(error_of(&empty).contains("check-output (command ...) needs a command"));
    let default = CampaignConfig::parse(SKETCH, "c.sexp").unwrap();
    assert_eq!(default.benchmarks[0].build_memory_bytes, 8 << 30);
}

#[test]
fn names_that_would_leave_a_folder_are_refused_where_they_stand() {
    for bad in [
        "\"../escape\"",
        "\"/abs\"",
        "\".hidden\"",
        "\"manual:x\"",
        "\"a b\"",
    ] {
        let text = SKETCH.replace(
            "(benchmark sample-dsp) (search",
            &format!("(benchmark sample-dsp) (name {bad}) (search"),
        );
        assert_ne!(text, SKETCH, "the sketch has an experiment to rename");
        let err = error_of(&text);
        assert!(err.starts_with("prod-configs/x.sexp:"), "{err}");
        assert!(err.contains("cannot be a name"), "{err}");
    }
}

#[test]
fn every_name_kiln_may_file_something_under_is_checked() {
    let long = "n".repeat(kiln_protocol::decode::MAX_NAME_LEN + 1);
    for (from, to, line_col) in [
        ("(name quickstart)", "(name \"../x\")", "2:9"),
        ("((name sample-dsp)", "((name \"x/y\")", "9:12"),
        (
            "(local (slots 1)",
            "(local (name \"/abs\") (slots 1)",
            "12:19",
        ),
        (
            "(name quickstart)",
            &format!("(name {long})") as &str,
            "2:9",
        ),
    ] {
        let text = SKETCH.replace(from, to);
        assert_ne!(text, SKETCH, "the sketch has {from}");
        let err = error_of(&text);
        assert!(
            err.starts_with(&format!("prod-configs/x.sexp:{line_col}: '")),
            "{err}"
        );
        assert!(err.contains("' cannot be a name: "), "{err}");
    }
    // An SSH worker without a name takes its host's, which must be a name too (found by the
    // config fuzz target: the normalized config did not parse).
    assert_eq!(
        error_of(&SKETCH.replace("(host \"10.0.0.2\")", "(host \"fe80::1\")")),
        "prod-configs/x.sexp:13:11: host 'fe80::1' cannot be the worker's name (use letters, \
         digits, '-', '_' and '.', not starting with '.' or '-'); give the worker a (name ...)"
    );
    let named = SKETCH.replace("(host \"10.0.0.2\")", "(name w) (host \"fe80::1\")");
    assert!(CampaignConfig::parse(&named, "x").is_ok());
}

#[test]
fn a_slurm_entry_of_n_nodes_is_n_workers_and_round_trips() {
    let slurm = r#"((slurm (name gpu) (partition "a100") (nodes 3) (slots 2) (cpus-per-task 8)
        (gpus-per-task 1) (time "7-00:00:00") (srun-args ("--exclusive")) (rundir "/shared/kiln")
        (via-ssh (host "login1") (user "me") (port 2200))))
    ((slurm (name one) (rundir "kiln")))"#;
    let text = SKETCH.replace(
        "((ssh (host \"10.0.0.2\") (user \"bench\") (rundir \"/home/bench/kiln\") (slots 2) (cpus (2 3))))",
        slurm,
    );
    let c = CampaignConfig::parse(&text, "slurm.sexp").unwrap();
    let names: Vec<&str> = c.workers.iter().map(WorkerSpec::name).collect();
    assert_eq!(names, ["local", "gpu-1", "gpu-2", "gpu-3", "one"]);
    let WorkerSpec::Slurm(gpu2) = &c.workers[2] else {
        panic!("expected a slurm worker, got {:?}", c.workers[2]);
    };
    assert_eq!(gpu2.partition.as_deref(), Some("a100"));
    assert_eq!(
        (gpu2.slots, gpu2.cpus_per_task, gpu2.gpus_per_task),
        (2, Some(8), Some(1))
    );
    assert_eq!(gpu2.time.as_deref(), Some("7-00:00:00"));
    assert_eq!(gpu2.srun_args, ["--exclusive"]);
    assert_eq!(gpu2.retries, 3, "the default");
    let login = gpu2.via_ssh.as_ref().expect("via-ssh");
    assert_eq!((login.host.as_str(), login.port), ("login1", 2200));
    assert_eq!(
        (login.name.as_str(), login.rundir.as_str()),
        ("gpu-2", "/shared/kiln")
    );
    let WorkerSpec::Slurm(one) = &c.workers[4] else {
        panic!("expected a slurm worker");
    };
    assert!(one.partition.is_none() && one.via_ssh.is_none());

    let printed = c.to_text();
    let again = CampaignConfig::parse(&printed, "printed").unwrap();
    assert_eq!(c, again, "does not round-trip:\n{printed}");
    assert_eq!(printed, again.to_text());
}

#[test]
fn golden_slurm_errors() {
    let worker = |w: &str| {
        SKETCH.replace(
            "((ssh (host \"10.0.0.2\") (user \"bench\") (rundir \"/home/bench/kiln\") (slots 2) (cpus (2 3))))",
            w,
        )
    };
    assert_eq!(
        error_of(&worker(
            "((slurm (name s) (partition \"a b\") (rundir \"k\")))"
        )),
        "prod-configs/x.sexp:13:33: partition \"a b\" must be a non-empty word without spaces"
    );
    assert_eq!(
        error_of(&worker("((slurm (name s)))")),
        "prod-configs/x.sexp:13:6: missing required field 'rundir' in slurm worker"
    );
    assert!(
        error_of(&worker("((slurm (rundir \"k\") (via-ssh (port 22))))"))
            .ends_with("missing required field 'host' in via-ssh"),
    );
    // Four billion workers filled memory; a name at the length limit gave node names past it,
    // and a printed config that did not parse.
    assert_eq!(
        error_of(&worker("((slurm (rundir \"k\") (nodes 4000000000)))")),
        "prod-configs/x.sexp:13:26: (nodes 4000000000) is more than 1024 workers: each is an \
         srun and an allocation of its own"
    );
    let long = "n".repeat(kiln_protocol::decode::MAX_NAME_LEN - 1);
    assert!(error_of(&worker(&format!(
        "((slurm (name {long}) (rundir \"k\") (nodes 10)))"
    )))
    .contains(&format!(
        "'{long}-10' cannot be a worker name: it is longer than 100 bytes"
    )),);
}

#[test]
fn proposals_default_to_uniform_and_guided_and_profile_round_trip() {
    use kiln_protocol::config::Proposals;
    let text = |proposals: &str| {
        format!(
            "(campaign (name p) (store \"s\") (objective (metric instructions) (statistic median))
               (experiments ((benchmark b) (search (random-walk (steps 5))) {proposals}))
               (benchmarks ((name b) (kind knobs) (knobs (x 0 1)) (sources \".\")
                 (build (\"true\")) (run (\"true\"))))
               (workers (local (slots 1))))"
        )
    };
    let plain = CampaignConfig::parse(&text(""), "plain").unwrap();
    assert_eq!(plain.experiments[0].proposals, Proposals::Uniform);
    // `kiln check` spells the default out; a config stored before the field reads as it.
    assert!(plain.to_text().contains("(proposals uniform)"));
    let again = CampaignConfig::parse(&plain.to_text(), "again").unwrap();
    assert_eq!(again, plain);
    for proposals in [Proposals::Guided, Proposals::Profile, Proposals::Helping] {
        let field = format!("(proposals {})", proposals.word());
        let set = CampaignConfig::parse(&text(&field), "set").unwrap();
        assert_eq!(set.experiments[0].proposals, proposals);
        let again = CampaignConfig::parse(&set.to_text(), "again").unwrap();
        assert_eq!(again.experiments[0].proposals, proposals);
    }
    let wrong = CampaignConfig::parse(&text("(proposals smart)"), "wrong").unwrap_err();
    assert!(wrong.to_string().contains("proposals"), "{wrong}");
}

#[test]
fn racing_defaults_to_one_percent_and_off_or_another_level_round_trips() {
    use kiln_protocol::config::Experiment;
    let text = |race: &str| {
        format!(
            "(campaign (name p) (store \"s\") (objective (metric wall-time) (statistic median))
               (experiments ((benchmark b) (search (simulated-annealing (steps 5))) {race}))
               (benchmarks ((name b) (kind knobs) (knobs (x 0 1)) (sources \".\")
                 (build (\"true\")) (run (\"true\"))))
               (workers (local (slots 1))))"
        )
    };
    let plain = CampaignConfig::parse(&text(""), "plain").unwrap();
    assert_eq!(plain.experiments[0].race, Some(Experiment::DEFAULT_RACE));
    assert!(plain.to_text().contains("(race 0.01)"));
    assert_eq!(
        CampaignConfig::parse(&plain.to_text(), "again").unwrap(),
        plain
    );
    for (field, race) in [("(race off)", None), ("(race 0.05)", Some(0.05))] {
        let config = CampaignConfig::parse(&text(field), "race").unwrap();
        assert_eq!(config.experiments[0].race, race, "{field}");
        let again = CampaignConfig::parse(&config.to_text(), "again").unwrap();
        assert_eq!(again.experiments[0].race, race, "{field}");
    }
    for bad in ["(race 1)", "(race 0)", "(race on)", "(race \"0.1\")"] {
        let e = error_of(&text(bad));
        assert!(
            e.contains("'race' must be off or an acceptance probability between 0 and 1"),
            "{bad}: {e}"
        );
    }
}

/// An experiment's start: a decision file, a random set or the stock one with K points moved,
/// each kept through printing; `each-benchmark (suffix S)` names its experiments `BENCH-S`.
#[test]
fn starts_and_each_benchmark_suffixes_parse_and_round_trip() {
    use kiln_protocol::config::Start;
    let text = |experiments: &str| {
        format!(
            "(campaign (name p) (store \"s\") (objective (metric instructions) (statistic median))
               (experiments {experiments})
               (benchmarks ((name b) (kind llvm-inline) (compiler clang) (sources \".\")
                 (build (\"true\")) (run (\"true\"))))
               (workers (local (slots 1))))"
        )
    };
    let each = |start: &str| {
        text(&format!(
            "(each-benchmark (search (screening (steps 5))))
             (each-benchmark (suffix random) (baseline {start}) (search (screening (steps 5))))"
        ))
    };
    for (start, want) in [
        ("\"best.sexp\"", Start::File("best.sexp".into())),
        ("random", Start::Random { flips: None }),
        ("(random)", Start::Random { flips: None }),
        ("(random (flips 8))", Start::Random { flips: Some(8) }),
    ] {
        let config = CampaignConfig::parse(&each(start), "each").unwrap();
        let names: Vec<&str> = config.experiments.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["b", "b-random"], "{start}");
        assert_eq!(config.experiments[0].baseline, None);
        let again = CampaignConfig::parse(&config.to_text(), "again").unwrap();
        assert_eq!(again, config, "{start}");
        match (&again.experiments[1].baseline, &want) {
            // A file is read relative to the config's folder.
            (Some(Start::File(path)), Start::File(file)) => assert!(path.ends_with(file)),
            (got, want) => assert_eq!(got.as_ref(), Some(want), "{start}"),
        }
    }
    for (bad, says) in [
        (
            "7",
            "'baseline' must be a decision file (a double-quoted string), random or",
        ),
        ("(random (flips 0))", "flips"),
        ("(random (steps 2))", "steps"),
    ] {
        let e = error_of(&each(bad));
        assert!(e.contains(says), "{bad}: {e}");
    }
    let twice = error_of(&text(
        "(each-benchmark (suffix a) (suffix b) (search (screening (steps 5))))",
    ));
    assert!(twice.contains("one (suffix NAME)"), "{twice}");
    let clash = error_of(&text(
        "(each-benchmark (search (screening (steps 5)))) (each-benchmark (search (screening (steps 5))))",
    ));
    assert!(clash.contains("two experiments are named 'b'"), "{clash}");
}

#[test]
fn random_search_and_hill_climbing_parse_round_trip_and_locate_errors() {
    let with = |search: &str| {
        SKETCH.replace(
            "(search (simulated-annealing (steps 100) (t-max 0.04) (t-min 0.001)))",
            search,
        )
    };
    let search_of = |text: &str| {
        let config = CampaignConfig::parse(text, "x").unwrap();
        let again = CampaignConfig::parse(&config.to_text(), "again").unwrap();
        assert_eq!(config, again, "does not round-trip");
        again.experiments[0].search.clone()
    };
    assert_eq!(
        search_of(&with("(search (random-search (steps 50)))")),
        Search::RandomSearch(RandomSearch {
            steps: 50,
            flips: None
        })
    );
    assert_eq!(
        search_of(&with("(search (random-search (steps 50) (flips 2)))")),
        Search::RandomSearch(RandomSearch {
            steps: 50,
            flips: Some(2)
        })
    );
    assert_eq!(
        search_of(&with("(search (hill-climbing (steps 80)))")),
        Search::HillClimbing(HillClimbing { steps: 80, kick: 3 })
    );
    assert_eq!(
        search_of(&with("(search (hill-climbing (steps 80) (kick 5)))")),
        Search::HillClimbing(HillClimbing { steps: 80, kick: 5 })
    );
    assert_eq!(
        error_of(&with("(search (hill-climbing (steps 80) (flips 2)))")),
        "prod-configs/x.sexp:7:63: unknown field 'flips' in hill-climbing; expected one of: steps, kick"
    );
    assert_eq!(
        error_of(&with("(search (random-search (flips 2)))")),
        "prod-configs/x.sexp:7:37: missing required field 'steps' in random-search"
    );
    assert_eq!(
        error_of(&with(
            "(search (hill-climbing (steps 80))) (proposals guided)"
        )),
        "prod-configs/x.sexp:7:76: (proposals guided) applies to simulated-annealing and \
         random-walk only: random-search and hill-climbing draw their own moves"
    );
    assert!(error_of(&with(
        "(search (random-search (steps 80))) (proposals profile)"
    ))
    .contains("(proposals profile) applies to simulated-annealing and random-walk only"));
    assert!(error_of(&with("(search (tabu (steps 3)))"))
        .contains("(hill-climbing ...) or (screening ...)"));
}

/// `(include "FOLDER")` in `(benchmarks ...)` takes one benchmark entry from each `.sexp` file
/// of the folder, its paths relative to its own file; `(each-benchmark ...)` makes one
/// experiment per benchmark; an error in an included file names that file, line and column.
#[test]
fn included_benchmark_files_and_one_experiment_each() {
    let dir = tempfile::tempdir().unwrap();
    let corpus = dir.path().join("corpus");
    std::fs::create_dir_all(&corpus).unwrap();
    for name in ["alpha", "beta"] {
        std::fs::write(
            corpus.join(format!("{name}.sexp")),
            format!(
                "; the {name} program\n((name {name}) (kind knobs) (sources \"../src/{name}\") (knobs (k 0 1))\n (run (\"./run\")))\n"
            ),
        )
        .unwrap();
    }
    std::fs::write(corpus.join("README.md"), "not a benchmark").unwrap();
    let config = |extra: &str| {
        format!(
            r#"(campaign (name c) (store "s")
  (experiments (each-benchmark (search (random-walk (steps 5))) (seed 3)))
  (benchmarks (include "corpus") {extra})
  (workers (local)))"#
        )
    };
    let path = dir.path().join("c.sexp");
    std::fs::write(&path, config("")).unwrap();
    let c = CampaignConfig::read(&path).unwrap();
    let names: Vec<&str> = c.benchmarks.iter().map(|b| b.name.as_str()).collect();
    assert_eq!(names, ["alpha", "beta"]);
    let src = dir.path().canonicalize().unwrap().join("src/alpha");
    assert_eq!(c.benchmarks[0].sources, src);
    let experiments: Vec<(&str, &str, u64)> = c
        .experiments
        .iter()
        .map(|e| (e.name.as_str(), e.benchmark.as_str(), e.seed))
        .collect();
    assert_eq!(experiments, [("alpha", "alpha", 3), ("beta", "beta", 3)]);
    // The normalized text holds what was included, and reads back alike.
    let again = CampaignConfig::parse(&c.to_text(), "printed").unwrap();
    assert_eq!(again, c);

    // A twin of an included benchmark is refused where it is written.
    std::fs::write(
        &path,
        config("((name alpha) (kind knobs) (sources \"x\") (knobs (k 0)) (run (\"r\")))"),
    )
    .unwrap();
    let twice = CampaignConfig::read(&path).unwrap_err().to_string();
    assert!(twice.contains("defined twice"), "{twice}");

    // An error inside an included file: that file, its line and column.
    std::fs::write(
        corpus.join("beta.sexp"),
        "; the beta program\n((name beta) (kind knobs)\n (srces \"x\"))\n",
    )
    .unwrap();
    std::fs::write(&path, config("")).unwrap();
    let e = CampaignConfig::read(&path).unwrap_err().to_string();
    let beta = corpus.join("beta.sexp").display().to_string();
    assert!(e.starts_with(&format!("{beta}:3:")), "{e}");
    assert!(e.contains("srces"), "{e}");
}

/// prod-configs/README.md's field reference is what the records declare; with
/// `KILN_BLESS=1` the test writes it there instead.
#[test]
fn the_field_reference_in_prod_configs_readme_is_the_declared_one() {
    use kiln_protocol::config::reference::{markdown, BEGIN, END};
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../prod-configs/README.md");
    let text = std::fs::read_to_string(&path).unwrap();
    let start = text
        .find(BEGIN)
        .expect("the README holds the reference's first line");
    let end = text
        .find(END)
        .expect("the README holds the reference's last line")
        + END.len()
        + 1;
    let wanted = markdown();
    if std::env::var_os("KILN_BLESS").is_some() {
        std::fs::write(&path, format!("{}{wanted}{}", &text[..start], &text[end..])).unwrap();
    } else {
        assert!(
            text[start..end] == wanted,
            "prod-configs/README.md's field reference differs from the declarations: \
             KILN_BLESS=1 cargo test -p kiln-protocol field_reference writes it"
        );
    }
}
