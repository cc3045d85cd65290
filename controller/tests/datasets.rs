//! Datasets from a store: CSV export, reward assignment and the report, on
//! stores built synthetically through the Store API (no worker needed).

use std::collections::BTreeMap;
use std::path::Path;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use crate::common::splitmix::Gen;
use crate::common::{kiln_cmd, reopen, run_kiln, run_kiln_when_free, text};
use kiln_controller::export::{
    self, names, ExportOptions, Table, DECISION_COLUMNS, REWARD_TABLE_COLUMNS, RUN_COLUMNS,
    SITE_COLUMNS, STEP_COLUMNS, STEP_STATISTICS, WIDE_DECISION_COLUMNS,
};
use kiln_controller::rewards::{self, Distrust, RewardOptions, Target, Verdict};
use kiln_controller::store::layout::{rewards_best_file, rewards_proposal_file};
use kiln_controller::store::{
    blocks, manual_experiment, ChainState, Decision, ExperimentInfo, Incumbent, ProgressPoint,
    Reference, StepKey, StepKind, StepRecord, Store,
};
use kiln_protocol::message::{Discovery, Measurement, RunRecord, StepResult};
use kiln_protocol::{
    ContentHash, DecisionPoint, DecisionSet, DecisionValue, Metric, MetricValue, SiteId, StepId,
    StepOutcome, Summary,
};

/// Cost of inlining each site (negative: inlining helps), in instructions.
const EFFECTS: &[f64] = &[-200.0, 120.0, -80.0, 50.0, -30.0, 20.0, -10.0, 6.0];

/// Cost with nothing inlined.
const BASE_COST: f64 = 10_000.0;

const CONFIG: &str = r#"(campaign
  (name synthetic-datasets)
  (store "store")
  (objective (metric instructions) (statistic median))
  (runs (warmup 1) (min 3) (max 3))
  (experiments
    ((benchmark linear) (search (random-walk (steps 200))) (chains 2) (seed 1)))
  (benchmarks
    ((name linear) (kind knobs) (knobs (k 0 1))
     (sources "bench-programs/linear") (build ("true")) (run ("true")) (timeout-s 5)))
  (workers (local (slots 2))))
"#;

fn site(i: usize) -> SiteId {
    // Spaces, '@' and ':' as in real call-site keys, to exercise CSV quoting.
    SiteId(format!("f{i} @ main:{}:{}", 10 + i, 3 + i))
}

fn points() -> Vec<DecisionPoint> {
    (0..EFFECTS.len())
        .map(|i| DecisionPoint::inline_site(site(i)))
        .collect()
}

fn no_inline() -> DecisionSet {
    DecisionSet(
        (0..EFFECTS.len())
            .map(|i| (site(i), DecisionValue::no_inline()))
            .collect(),
    )
}

fn cost(decisions: &DecisionSet) -> f64 {
    BASE_COST
        + EFFECTS
            .iter()
            .enumerate()
            .filter(|(i, _)| {
                decisions
                    .get(&site(*i))
                    .is_some_and(DecisionValue::is_inline)
            })
            .map(|(_, e)| e)
            .sum::<f64>()
}

/// A successful result: a warm-up and three measured runs around `objective`.
fn ok_result(objective: f64, g: &mut Gen) -> StepResult {
    let mut runs = Vec::new();
    for index in 0..4 {
        let noise = (g.unit() - 0.5) * 10.0;
        let instructions = objective + noise;
        let wall = instructions * 1000.0;
        let mut metrics = BTreeMap::new();
        metrics.insert(Metric::Instructions, MetricValue::Measured(instructions));
        metrics.insert(Metric::WallTime, MetricValue::Measured(wall));
        metrics.insert(Metric::UserTime, MetricValue::Measured(wall * 0.8));
        metrics.insert(Metric::SystemTime, MetricValue::Measured(wall * 0.05));
        // No PMU on these machines: the worker says so rather than writing a zero.
        metrics.insert(Metric::Cycles, MetricValue::Unsupported);
        runs.push(RunRecord {
            index,
            warmup: index == 0,
            exit_code: Some(0),
            signal: None,
            metrics,
        });
    }
    let mut summary = BTreeMap::new();
    for m in [
        Metric::Instructions,
        Metric::WallTime,
        Metric::UserTime,
        Metric::SystemTime,
    ] {
        let samples: Vec<f64> = runs
            .iter()
            .filter(|r| !r.warmup)
            .filter_map(|r| r.metrics[&m].measured())
            .collect();
        summary.insert(m, Summary::of(&samples).unwrap());
    }
    StepResult {
        measurement: Measurement {
            runs,
            summary,
            target_met: true,
            ..Measurement::empty(StepOutcome::Ok)
        },
        started_ms: 1_000,
        finished_ms: 2_000,
        ..StepResult::new(StepId(1), StepOutcome::Ok)
    }
}

fn failed_result() -> StepResult {
    let mut result = StepResult {
        started_ms: 1_000,
        finished_ms: 2_000,
        ..StepResult::new(
            StepId(1),
            StepOutcome::RunFailed {
                code: Some(1),
                signal: None,
                signal_name: None,
                stderr_tail: "boom".into(),
            },
        )
    };
    result.measurement.runs = vec![RunRecord {
        index: 0,
        warmup: false,
        exit_code: Some(1),
        signal: None,
        metrics: BTreeMap::new(),
    }];
    result
}

fn chain_state(baseline: &DecisionSet, samples: &[f64]) -> ChainState {
    ChainState::at_start(
        baseline,
        samples.to_vec(),
        ChaCha8Rng::seed_from_u64(7),
        0.04,
        0,
    )
}

/// Builds a campaign store in `dir`: experiment `linear`, two chains of
/// `steps` random decision sets whose cost is [`cost`] plus noise; every
/// `fail_every`-th step fails (0: none). Returns the store, open.
fn synthetic_store(dir: &Path, steps: u32, fail_every: u32) -> Store {
    synthetic_store_pinning(dir, steps, fail_every, &|_, _| None)
}

/// [`synthetic_store`] where `pin(site, step)` may fix a site's value instead of drawing it.
fn synthetic_store_pinning(
    dir: &Path,
    steps: u32,
    fail_every: u32,
    pin: &dyn Fn(usize, u32) -> Option<DecisionValue>,
) -> Store {
    let store = Store::open(dir).unwrap();
    store.put_config(CONFIG, 1).unwrap();
    let mut g = Gen(42);
    let baseline = no_inline();
    let baseline_samples = vec![BASE_COST, BASE_COST + 1.0, BASE_COST - 1.0];
    let info = ExperimentInfo {
        discovery: Discovery {
            points: points(),
            baseline: baseline.clone(),
            ..Default::default()
        },
        bundle: ContentHash::of(b"linear"),
        baseline: Reference {
            decisions: baseline.clone(),
            samples: baseline_samples.clone(),
            outcome: StepOutcome::Ok,
            output_digest: None,
            checked_output: None,
            text_bytes: Some(1234),
            function_instructions: Default::default(),
            function_code: Default::default(),
        },
        references: BTreeMap::new(),
        runs: None,
        measured_before: Default::default(),
    };
    store.put_experiment("linear", &info).unwrap();
    for chain in 0..2 {
        let mut state = chain_state(&baseline, &baseline_samples);
        store.put_chain("linear", chain, &mut state).unwrap();
        for step in 0..steps {
            let decisions = DecisionSet(
                (0..EFFECTS.len())
                    .map(|i| {
                        let v = if g.unit() < 0.5 {
                            DecisionValue::inline()
                        } else {
                            DecisionValue::no_inline()
                        };
                        (site(i), pin(i, step).unwrap_or(v))
                    })
                    .collect(),
            );
            let failed = fail_every > 0 && step % fail_every == fail_every - 1;
            let (result, objective) = if failed {
                (failed_result(), None)
            } else {
                let r = ok_result(cost(&decisions), &mut g);
                let o = r.measurement.summary[&Metric::Instructions].median;
                (r, Some(o))
            };
            let accepted = objective.is_some() && g.unit() < 0.4;
            let mut record = StepRecord {
                key: StepKey {
                    experiment: "linear".into(),
                    chain,
                    step,
                },
                kind: if step % 10 == 9 {
                    StepKind::Remeasure
                } else {
                    StepKind::Proposal
                },
                decision_hash: decisions.hash(),
                diff: decisions.diff_from(&state.current.decisions),
                decisions,
                parent: step.checked_sub(1),
                temperature: 0.04 * (1.0 - f64::from(step) / f64::from(steps)),
                result,
                objective,
                worker: format!("w{}", step % 2),
                slot: chain,
                worker_fingerprint: None,
                artifacts: BTreeMap::new(),
                cached_from: None,
                dispatched_ms: 1_000_000 + u64::from(step) * 2_000,
                recorded_ms: 1_001_500 + u64::from(step) * 2_000,
                decision: None,
            };
            record.decision = Some(Decision {
                accepted,
                compared_with: state.current.objective(),
                decided_ms: record.recorded_ms + 1,
            });
            state.next_decide = step + 1;
            state.generated = step + 1;
            state.temperature = record.temperature;
            if record.kind.can_move() {
                *state.proposals.get_or_insert(0) += 1;
            }
            if accepted {
                state.accepted += 1;
                state.current = Incumbent {
                    decisions: record.decisions.clone(),
                    samples: vec![objective.unwrap()],
                    step: Some(step),
                };
            }
            if failed {
                *state.failures.entry("run-failed".into()).or_default() += 1;
            }
            // The chain's course, as a campaign keeps it.
            let point = ProgressPoint {
                steps: step + 1,
                at_ms: record.recorded_ms + 1,
                best: None,
                accepted: state.accepted,
                proposals: state.proposals.unwrap_or(0),
                failures: state.failures.clone(),
                temperature: record.temperature,
            };
            if let Some(progress) = &mut state.progress {
                progress.note(step, Some(&record.worker), objective, BASE_COST, point);
            }
            store.decide(&record, &mut state).unwrap();
        }
    }
    store
}

/// Adds one manual step (as `kiln benchmark --store` records it) to the store.
fn add_manual_step(store: &Store) {
    let experiment = manual_experiment("linear");
    let baseline = no_inline();
    let info = ExperimentInfo {
        discovery: Discovery {
            points: points(),
            baseline: baseline.clone(),
            ..Default::default()
        },
        bundle: ContentHash::of(b"linear"),
        baseline: Reference {
            decisions: baseline.clone(),
            samples: vec![BASE_COST],
            outcome: StepOutcome::Ok,
            output_digest: None,
            checked_output: None,
            text_bytes: None,
            function_instructions: Default::default(),
            function_code: Default::default(),
        },
        references: BTreeMap::new(),
        runs: None,
        measured_before: Default::default(),
    };
    let mut decisions = baseline.clone();
    decisions.0.insert(site(0), DecisionValue::inline());
    let result = ok_result(cost(&decisions), &mut Gen(3));
    let record = StepRecord {
        key: StepKey {
            experiment,
            chain: 0,
            step: 0,
        },
        kind: StepKind::Proposal,
        decision_hash: decisions.hash(),
        diff: decisions.diff_from(&baseline),
        decisions,
        parent: None,
        temperature: 0.0,
        objective: Some(result.measurement.summary[&Metric::Instructions].median),
        result,
        worker: "local".into(),
        slot: 0,
        worker_fingerprint: None,
        artifacts: BTreeMap::new(),
        cached_from: None,
        dispatched_ms: 5,
        recorded_ms: 6,
        decision: Some(Decision {
            accepted: false,
            compared_with: BASE_COST,
            decided_ms: 7,
        }),
    };
    store.record_manual(&info, &record).unwrap();
}

fn export_table(store: &Store, table: Table, experiment: Option<&str>, wide: bool) -> Vec<u8> {
    let mut out = Vec::new();
    let options = ExportOptions {
        experiment,
        wide,
        ..ExportOptions::new(table)
    };
    export::export(store, options, &mut out).unwrap();
    out
}

fn read_csv(bytes: &[u8]) -> (Vec<String>, Vec<csv::StringRecord>) {
    let mut reader = csv::Reader::from_reader(bytes);
    let header = reader.headers().unwrap().iter().map(String::from).collect();
    let rows = reader.records().map(Result::unwrap).collect();
    (header, rows)
}

/// docs/export-schema.md up to its first section (the rewards command's).
fn schema_doc() -> String {
    let page = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/export-schema.md"),
    )
    .expect("docs/export-schema.md exists");
    let end = page.find("\n## ").unwrap_or(page.len());
    page[..end].to_string()
}

fn assert_documented(doc: &str, columns: &[&str]) {
    for c in columns {
        assert!(
            doc.contains(&format!("`{c}`")),
            "column {c} is not documented in docs/export-schema.md"
        );
    }
}

#[test]
fn every_table_reads_back_with_its_documented_columns_and_the_stores_row_count() {
    let dir = tempfile::tempdir().unwrap();
    let store = synthetic_store(&dir.path().join("store"), 30, 7);
    add_manual_step(&store);
    let doc = schema_doc();

    let records: Vec<StepRecord> = store.steps(None).map(Result::unwrap).collect();
    assert_eq!(records.len(), 61);

    // steps
    let (header, rows) = read_csv(&export_table(&store, Table::Steps, None, false));
    assert_documented(&doc, &names(STEP_COLUMNS));
    let statistics: Vec<String> = STEP_STATISTICS
        .iter()
        .map(|s| format!("METRIC.{s}"))
        .collect();
    assert_documented(
        &doc,
        &statistics.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let mut expected: Vec<String> = STEP_COLUMNS.iter().map(|c| c.name.to_string()).collect();
    // Metrics in Metric::ALL order: wall, user, system, cycles, instructions.
    for m in [
        "wall-time",
        "user-time",
        "system-time",
        "cycles",
        "instructions",
    ] {
        expected.extend(STEP_STATISTICS.iter().map(|s| format!("{m}.{s}")));
    }
    assert_eq!(header, expected);
    assert_eq!(rows.len(), records.len());
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    for (row, record) in rows.iter().zip(&records) {
        assert_eq!(&row[col("experiment")], record.key.experiment);
        assert_eq!(&row[col("step")], record.key.step.to_string());
        assert_eq!(
            &row[col("cycles.median")],
            // Null whether unsupported or not measured (the `support` table tells).
            ""
        );
        match record.objective {
            Some(o) => {
                let ratio: f64 = row[col("time_ratio")].parse().unwrap();
                assert!((ratio - o / BASE_COST).abs() < 1e-9);
                assert_eq!(&row[col("outcome")], "ok");
                let median: f64 = row[col("instructions.median")].parse().unwrap();
                assert_eq!(median, o);
            }
            None => {
                assert_eq!(&row[col("time_ratio")], "");
                assert_eq!(&row[col("outcome")], "run-failed");
                assert_eq!(&row[col("instructions.median")], "");
            }
        }
    }
    let manual = rows
        .iter()
        .find(|r| &r[col("experiment")] == "manual:linear")
        .unwrap();
    assert_eq!(&manual[col("kind")], "manual");
    assert_eq!(&manual[col("benchmark")], "linear");
    assert_eq!(&rows[0][col("campaign")], "synthetic-datasets");
    assert_eq!(&rows[0][col("benchmark")], "linear");

    // runs
    let (header, rows) = read_csv(&export_table(&store, Table::Runs, None, false));
    assert_documented(&doc, &names(RUN_COLUMNS));
    let mut expected: Vec<String> = RUN_COLUMNS.iter().map(|c| c.name.to_string()).collect();
    expected.extend(
        [
            "wall-time",
            "user-time",
            "system-time",
            "cycles",
            "instructions",
        ]
        .map(String::from),
    );
    assert_eq!(header, expected);
    let runs: usize = records
        .iter()
        .map(|r| r.result.measurement.runs.len())
        .sum();
    assert_eq!(rows.len(), runs);

    // decisions, long and wide
    let (header, rows) = read_csv(&export_table(&store, Table::Decisions, None, false));
    assert_documented(&doc, &names(DECISION_COLUMNS));
    assert_eq!(header, names(DECISION_COLUMNS));
    let decisions: usize = records.iter().map(|r| r.decisions.len()).sum();
    assert_eq!(rows.len(), decisions);
    assert_eq!(&rows[0][3], site(0).as_str());
    let (header, rows) = read_csv(&export_table(
        &store,
        Table::Decisions,
        Some("linear"),
        true,
    ));
    assert_documented(&doc, &names(WIDE_DECISION_COLUMNS));
    assert_eq!(header.len(), WIDE_DECISION_COLUMNS.len() + EFFECTS.len());
    assert_eq!(header[3], site(0).as_str());
    assert_eq!(rows.len(), 60);
    for row in &rows {
        assert!(row
            .iter()
            .skip(3)
            .all(|v| v == "inline" || v == "no-inline"));
    }

    // sites
    let (header, rows) = read_csv(&export_table(&store, Table::Sites, None, false));
    assert_documented(&doc, &names(SITE_COLUMNS));
    let features: Vec<String> = export::features()
        .into_iter()
        .map(|f| f.column.name)
        .collect();
    assert!(!features.is_empty());
    assert_documented(
        &doc,
        &features.iter().map(String::as_str).collect::<Vec<_>>(),
    );
    let mut expected: Vec<String> = names(SITE_COLUMNS).iter().map(|c| c.to_string()).collect();
    expected.extend(features);
    assert_eq!(header, expected);
    assert_eq!(rows.len(), 2 * EFFECTS.len());
    assert_eq!(&rows[0][4], "no-inline");
    assert_eq!(&rows[0][5], "inline no-inline");

    // rewards
    let (header, rows) = read_csv(&export_table(&store, Table::Rewards, Some("linear"), false));
    assert_documented(&doc, &names(REWARD_TABLE_COLUMNS));
    assert_eq!(header, names(REWARD_TABLE_COLUMNS));
    assert_eq!(rows.len(), 2 * EFFECTS.len());

    // An unknown experiment is refused, naming the ones there are.
    let mut sink = Vec::new();
    let options = ExportOptions {
        experiment: Some("nope"),
        ..ExportOptions::new(Table::Steps)
    };
    let err = export::export(&store, options, &mut sink)
        .unwrap_err()
        .to_string();
    assert!(err.contains("nope") && err.contains("linear"), "{err}");

    drop(store);
    let verified = kiln_controller::store::verify(&dir.path().join("store"), &mut |_| {}).unwrap();
    assert!(verified.problems.is_empty(), "{:?}", verified.problems);
}

#[test]
fn rewards_recover_the_sign_of_every_effect_and_the_ranking_of_the_largest() {
    let dir = tempfile::tempdir().unwrap();
    let store = synthetic_store(&dir.path().join("store"), 150, 0);
    for target in [Target::LogSpeedup, Target::Speedup, Target::Tanh] {
        let options = RewardOptions {
            target,
            ..RewardOptions::default()
        };
        let a = rewards::assign(&store, "linear", &options).unwrap();
        assert_eq!(a.rows, 300);
        assert_eq!(a.fitted(), EFFECTS.len());
        // Rewards are relative to stock (no-inline), whose reward is 0.
        assert!(EFFECTS
            .iter()
            .enumerate()
            .all(|(i, _)| a.reward(&site(i), &DecisionValue::no_inline()) == Some(0.0)));
        let gain = |i: usize| a.reward(&site(i), &DecisionValue::inline()).unwrap();
        for (i, effect) in EFFECTS.iter().enumerate() {
            // A cost added by inlining is a loss of benefit, and the other way round.
            assert_eq!(
                gain(i) > 0.0,
                *effect < 0.0,
                "{target:?}: site {i} effect {effect} got gain {}",
                gain(i)
            );
            let best = a.proposal.get(&site(i)).unwrap();
            assert_eq!(
                best.is_inline(),
                *effect < 0.0,
                "{target:?}: best value of site {i}"
            );
        }
        // The four largest effects keep their order.
        let mut by_size: Vec<usize> = (0..EFFECTS.len()).collect();
        by_size.sort_by(|x, y| gain(*y).abs().total_cmp(&gain(*x).abs()));
        assert_eq!(&by_size[..4], &[0, 1, 2, 3], "{target:?}");
        let r2 = a.cv_r2.unwrap();
        assert!(r2 > 0.9, "{target:?}: cross-validated R² {r2}");
        assert_eq!(a.distrust, None, "{target:?}");
        // Every reward has a standard error, smaller than the largest effect.
        for i in 0..EFFECTS.len() {
            let r = a
                .rewards
                .iter()
                .find(|r| r.site == site(i) && r.value.is_inline())
                .unwrap();
            let se = r.estimate.std_error().unwrap();
            assert!(
                se > 0.0 && se < gain(0).abs(),
                "{target:?}: site {i} ± {se}"
            );
        }
    }

    // The files of an unverified run: the table and the proposal, labelled, never a best file.
    let out = dir.path().join("rewards");
    std::fs::create_dir_all(&out).unwrap();
    std::fs::write(rewards_best_file(&out, "linear"), "stale").unwrap();
    let written = write_unverified(&store, &out);
    assert_eq!(written.experiments.len(), 1, "{written:?}");
    let checked = &written.experiments[0];
    assert_eq!(checked.verdict, Verdict::Unverified);
    assert_eq!(checked.best_file, None);
    assert!(
        !rewards_best_file(&out, "linear").exists(),
        "a stale best file survived"
    );
    assert_eq!(checked.proposal_file, rewards_proposal_file(&out, "linear"));
    assert_eq!(written.table, out.join("rewards.csv"));
    let (header, rows) = read_csv(&std::fs::read(out.join("rewards.csv")).unwrap());
    assert_eq!(header, names(REWARD_TABLE_COLUMNS));
    assert_eq!(rows.len(), 2 * EFFECTS.len());
    let text = std::fs::read_to_string(&checked.proposal_file).unwrap();
    assert!(
        text.starts_with("; the model's proposal for linear: unverified"),
        "{text}"
    );
    let file = kiln_protocol::DecisionFile::parse_checked(&text, "best", &points()).unwrap();
    assert_eq!(file.benchmark.as_deref(), Some("linear"));
    for (i, effect) in EFFECTS.iter().enumerate() {
        assert_eq!(file.set.get(&site(i)).unwrap().is_inline(), *effect < 0.0);
    }
}

#[test]
fn rewards_leave_out_and_list_sites_never_varied_and_values_seen_too_rarely() {
    let dir = tempfile::tempdir().unwrap();
    // Site 7 never leaves stock; site 6 is inlined only in the first step of each chain.
    let store = synthetic_store_pinning(&dir.path().join("store"), 100, 0, &|i, step| match i {
        7 => Some(DecisionValue::no_inline()),
        6 => Some(if step == 0 {
            DecisionValue::inline()
        } else {
            DecisionValue::no_inline()
        }),
        _ => None,
    });
    let a = rewards::assign(&store, "linear", &RewardOptions::default()).unwrap();
    assert_eq!(a.never_varied(), [&site(7)]);
    let rare: Vec<(&SiteId, &DecisionValue, u64)> =
        a.too_rare().map(|r| (&r.site, &r.value, r.count)).collect();
    assert_eq!(rare, [(&site(6), &DecisionValue::inline(), 2)]);
    assert_eq!(a.reward(&site(7), &DecisionValue::inline()), None);
    assert_eq!(a.reward(&site(7), &DecisionValue::no_inline()), None);
    assert_eq!(a.reward(&site(6), &DecisionValue::inline()), None);
    assert_eq!(a.fitted(), EFFECTS.len() - 2);
    // Without a reward, the proposal keeps the stock decision.
    assert!(!a.proposal.get(&site(7)).unwrap().is_inline());
    assert!(!a.proposal.get(&site(6)).unwrap().is_inline());
    // Options that cannot make a model are refused, naming the flag.
    for (options, flag) in [
        (
            RewardOptions {
                folds: 1,
                ..RewardOptions::default()
            },
            "--folds",
        ),
        (
            RewardOptions {
                min_count: 0,
                ..RewardOptions::default()
            },
            "--min-count",
        ),
        (
            RewardOptions {
                lambda: -1.0,
                ..RewardOptions::default()
            },
            "--lambda",
        ),
    ] {
        let err = rewards::assign(&store, "linear", &options).unwrap_err();
        assert!(err.to_string().contains(flag), "{err}");
    }
    // With --min-count 2, site 6's two steps are enough.
    let options = RewardOptions {
        min_count: 2,
        ..RewardOptions::default()
    };
    let a = rewards::assign(&store, "linear", &options).unwrap();
    assert!(a.reward(&site(6), &DecisionValue::inline()).is_some());
    assert_eq!(a.too_rare().count(), 0);
}

#[test]
fn rewards_refuse_an_experiment_without_successful_steps_and_skip_it_over_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = synthetic_store(&dir.path().join("store"), 5, 1);
    let err = rewards::assign(&store, "linear", &RewardOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("linear") && err.contains("no successfully measured steps"),
        "{err}"
    );
    // Over the whole store, such an experiment is skipped with a note, and measurements
    // by hand are no search's: left out unless named.
    add_manual_step(&store);
    let out = dir.path().join("rewards");
    let written = write_unverified(&store, &out);
    assert_eq!(written.skipped, ["linear"], "{written:?}");
    assert!(written.experiments.is_empty(), "{written:?}");
    assert!(!rewards_proposal_file(&out, "manual:linear").exists());
    // Named, one step is no model: it says so.
    let (named, _) =
        rewards::assign_all(&store, Some("manual:linear"), &RewardOptions::default()).unwrap();
    let manual = &named[0];
    assert!(
        matches!(manual.distrust, Some(Distrust::TooFewRows { rows: 1, .. })),
        "{:?}",
        manual.distrust
    );
}

/// Rewards of every experiment, written as `kiln rewards --no-verify` does.
fn write_unverified(store: &Store, out: &Path) -> rewards::Written {
    let (assignments, skipped) =
        rewards::assign_all(store, None, &RewardOptions::default()).unwrap();
    let judged = assignments
        .into_iter()
        .map(|a| {
            let verdict = rewards::prejudge(&a, false).unwrap();
            (a, None, verdict)
        })
        .collect();
    rewards::write(store, out, judged, skipped).unwrap()
}

/// Checks the report's files; `panels` is how many plots it should draw.
fn check_report(store: &Store, out: &Path, panels: usize) {
    let files = kiln_controller::report::report(store, out).unwrap();
    let (mut pngs, mut svgs) = (0, 0);
    for f in &files {
        match f.extension().and_then(|e| e.to_str()) {
            Some("png") => {
                let file = std::io::BufReader::new(std::fs::File::open(f).unwrap());
                let mut reader = png::Decoder::new(file).read_info().unwrap();
                let mut buf = vec![0; reader.output_buffer_size().unwrap()];
                let info = reader.next_frame(&mut buf).unwrap();
                assert_eq!((info.width, info.height), (1200, 500), "{}", f.display());
                // Something besides the white background was drawn.
                assert!(buf.iter().any(|b| *b < 200), "{} is blank", f.display());
                pngs += 1;
            }
            Some("svg") => {
                let text = std::fs::read_to_string(f).unwrap();
                let doc = roxmltree::Document::parse(&text)
                    .unwrap_or_else(|e| panic!("{} does not parse: {e}", f.display()));
                assert_eq!(doc.root_element().tag_name().name(), "svg");
                assert!(doc.descendants().any(|n| n.has_tag_name("text")));
                svgs += 1;
            }
            _ => {}
        }
    }
    assert_eq!(pngs, svgs);
    assert_eq!(pngs, panels, "{files:?}");
    let index = std::fs::read_to_string(out.join("index.html")).unwrap();
    for f in files
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "png"))
    {
        let name = f.file_name().unwrap().to_str().unwrap();
        assert!(index.contains(name), "index.html does not show {name}");
    }
}

#[test]
fn report_draws_a_finished_campaign() {
    let dir = tempfile::tempdir().unwrap();
    let store = synthetic_store(&dir.path().join("store"), 40, 0);
    // objective, temperature, acceptance, run times, breakdown, and throughput.
    check_report(&store, &dir.path().join("report"), 6);
    let index = std::fs::read_to_string(dir.path().join("report/index.html")).unwrap();
    assert!(index.contains("gpu-time"), "the missing GPU time is noted");
    assert!(index.contains("time ratio"), "{index}");
    let objective =
        std::fs::read_to_string(dir.path().join("report/linear-objective.svg")).unwrap();
    assert!(
        objective.contains("time ratio (step / baseline)"),
        "{objective}"
    );
    let breakdown =
        std::fs::read_to_string(dir.path().join("report/linear-time-breakdown.svg")).unwrap();
    assert!(!breakdown.contains("GPU busy"), "no GPU part without a GPU");
}

#[test]
fn report_draws_a_campaign_with_failed_steps() {
    let dir = tempfile::tempdir().unwrap();
    let store = synthetic_store(&dir.path().join("store"), 40, 3);
    add_manual_step(&store);
    // Five for the search, three for the manual step (no temperature, no acceptance), throughput.
    check_report(&store, &dir.path().join("report"), 9);
    let index = std::fs::read_to_string(dir.path().join("report/index.html")).unwrap();
    assert!(
        index.contains("run-failed"),
        "failures are listed by outcome"
    );
    // Every step failed: the plots still draw, but none of run times that no step measured.
    let dir = tempfile::tempdir().unwrap();
    let store = synthetic_store(&dir.path().join("store"), 6, 1);
    check_report(&store, &dir.path().join("report"), 4);
}

#[test]
fn report_of_long_chains_draws_one_step_in_a_few_and_counts_every_one() {
    let dir = tempfile::tempdir().unwrap();
    // Past 4000 steps a chain's plots draw one step in every few (here 3) and every new best.
    let store = synthetic_store(&dir.path().join("store"), 8_001, 7);
    check_report(&store, &dir.path().join("report"), 6);
    let index = std::fs::read_to_string(dir.path().join("report/index.html")).unwrap();
    assert!(
        index.contains("one in every 3 is drawn, and every new best"),
        "{index}"
    );
    // The table counts every step: 8001 per chain, one in 7 failed.
    assert!(
        index.contains("<tr><td>0</td><td>8001</td><td>6858</td><td>1143</td>"),
        "{index}"
    );
    assert!(index.contains("run-failed: 2286"), "{index}");
    // A point's runs are read from its whole record: of the 2286 measured points, one in 3.
    assert!(index.contains("the runs of one in every 3 are"), "{index}");
    let runtimes = std::fs::read_to_string(dir.path().join("report/linear-runtimes.svg")).unwrap();
    let dots = runtimes.matches("<circle").count();
    // At most 1000 points a chain, three measured runs each (`ok_result`), two chains, and
    // the legend's two: every measured point's runs would be three times as many.
    assert!(dots > 0 && dots <= 2 * 1_000 * 3 + 2, "{dots} dots");
}

#[test]
fn steps_export_reads_the_same_from_a_store_without_the_metrics_index() {
    // Stores written before kiln kept `metrics/<experiment>` are scanned for
    // their metrics; the table must not change. Many steps, so that the
    // export's parallel chunks and their order are exercised too.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    let store = synthetic_store(&path, 700, 9);
    add_manual_step(&store);
    assert!(store.kept_metrics("linear").unwrap().is_some());
    let indexed = export_table(&store, Table::Steps, None, false);
    let (_, rows) = read_csv(&indexed);
    assert_eq!(rows.len(), 1401);
    drop(store);
    {
        let db = reopen(|| {
            kiln_controller::store::open_database(&path.join("db")).map_err(anyhow::Error::from)
        });
        for key in ["metrics/linear", "metrics/manual:linear"] {
            assert!(db.remove(key).unwrap().is_some(), "{key} is kept");
        }
        db.flush().unwrap();
    }
    let store = reopen(|| Store::open(&path));
    assert!(store.kept_metrics("linear").unwrap().is_none());
    let scanned = export_table(&store, Table::Steps, None, false);
    assert!(
        indexed == scanned,
        "the steps table differs without the metrics index"
    );
    // A step recorded now brings the index back, covering the older steps.
    add_manual_step(&store);
    assert_eq!(
        store.kept_metrics("manual:linear").unwrap(),
        Some(
            [
                Metric::WallTime,
                Metric::UserTime,
                Metric::SystemTime,
                Metric::Cycles,
                Metric::Instructions
            ]
            .into_iter()
            .collect()
        )
    );
}

#[test]
fn a_reader_that_closes_the_pipe_early_is_no_error() {
    // `kiln export | head`: the table is far larger than a pipe's buffer, so
    // kiln is still writing when the reader goes.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store");
    drop(synthetic_store(&path, 400, 9));
    let mut child = kiln_cmd(dir.path())
        .args(["export", path.to_str().unwrap(), "--table", "runs"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut first,
    )
    .unwrap();
    assert!(first.starts_with("experiment,chain,step"), "{first}");
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(out.stderr.is_empty(), "{}", text(&out));
}

#[test]
fn bad_input_exits_2_and_a_failure_1() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("bad.sexp");
    std::fs::write(&config, "(campaign (name x) (nope 1))").unwrap();
    let out = run_kiln(dir.path(), &["check", config.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("bad.sexp:1:"),
        "{}",
        text(&out)
    );

    let nowhere = dir.path().join("no-store");
    let out = run_kiln(dir.path(), &["status", nowhere.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let out = run_kiln(dir.path(), &["store", "verify", nowhere.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        !nowhere.exists(),
        "verify created a store where there was none"
    );

    let out = run_kiln(dir.path(), &["export", "--table", "nope", "x"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));

    // A store with a problem: verify runs, finds it, and fails.
    let path = dir.path().join("store");
    drop(synthetic_store(&path, 10, 9));
    {
        let db = reopen(|| {
            kiln_controller::store::open_database(&path.join("db")).map_err(anyhow::Error::from)
        });
        // A row in a block, or one a key (a block not yet complete).
        let packed = db
            .scan_prefix("rows/")
            .flat_map(|block| blocks::expand(blocks::Kind::Row, block.unwrap()));
        let loose = db.scan_prefix("row/").map(|row| Ok(row?));
        let (row, _) = packed.chain(loose).next().unwrap().unwrap();
        assert!(blocks::set_entry(&db, &String::from_utf8_lossy(&row), None).unwrap());
        db.flush().unwrap();
    }
    let out = run_kiln_when_free(dir.path(), &["store", "verify", path.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("no export row"),
        "{}",
        text(&out)
    );
}
