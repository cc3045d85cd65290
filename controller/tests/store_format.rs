//! The store's layouts. A store written before kiln kept export rows (layout
//! 1, written here key by key as that kiln wrote it) exports exactly as it
//! did then, reads and verifies as it is, and is migrated (compressed, its
//! steps against their start, export rows added) when a command that writes
//! opens it, campaign or not; a store of the current layout exports the
//! same from its rows, and `kiln store verify` checks them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;

use crate::common::splitmix::Gen;
use crate::common::*;
use kiln_controller::export::{self, ExportOptions, Table};
use kiln_controller::store::{
    blocks, manual_experiment, open_database, pages_compressed, verify as verify_store, ChainState,
    Decision, Effect, ExperimentInfo, Incumbent, Proposal, Reference, StepKey, StepKind,
    StepRecord, Store, SCHEMA_VERSION,
};
use kiln_protocol::message::{
    summarise, BuildRecord, CutShort, Discovery, FunctionCode, Measurement, Race, RunRecord,
    StepResult,
};
use kiln_protocol::{
    ContentHash, DecisionPoint, DecisionSet, DecisionValue, Metric, MetricValue, SiteId, StepId,
    StepOutcome, Summary,
};

const CONFIG: &str = r#"(campaign
  (name store-format)
  (store "store")
  (objective (metric wall-time) (statistic median))
  (runs (warmup 1) (min 3) (max 3))
  (experiments
    ((name walk) (benchmark knobs) (search (random-walk (steps 1000))) (chains 2) (seed 1)))
  (benchmarks
    ((name knobs) (kind knobs) (knobs (k 0 1 2))
     (sources "bench-programs/knobs") (build ("true")) (run ("true")) (timeout-s 5)))
  (workers (local (slots 2))))
"#;

/// The steps table of [`campaign`]`(20)` written in layout 1, as kiln
/// exported it before it kept export rows (19161d1), built with serde_json's
/// `float_roundtrip`: without it, that kiln read some stored numbers of 16
/// and 17 significant digits one unit in the last place off, and printed
/// them so (`1008358.1111111112` for the stored `1008358.1111111111`). The
/// `failure` column came later: both layouts read it from the stored outcome;
/// and since export schema 2 a metric a worker cannot measure is an empty
/// field, not `unsupported`.
const GOLDEN_STEPS: &str = include_str!("golden/store_format_steps.csv");

/// A campaign's stored data: experiments, then decided steps in the order
/// they were written, each with its chain's state after it (`None`: a manual step).
struct Campaign {
    experiments: Vec<(String, ExperimentInfo)>,
    steps: Vec<(StepRecord, Option<ChainState>)>,
}

fn info() -> ExperimentInfo {
    let baseline = DecisionSet([(SiteId("k".into()), DecisionValue::Int(0))].into());
    ExperimentInfo {
        discovery: Discovery {
            points: vec![DecisionPoint {
                id: SiteId("k".into()),
                domain: (0..3).map(DecisionValue::Int).collect(),
            }],
            baseline: baseline.clone(),
            ..Default::default()
        },
        bundle: ContentHash::of(b"knobs"),
        baseline: Reference {
            decisions: baseline,
            samples: vec![1_000_000.0, 1_000_003.0, 999_998.5],
            outcome: StepOutcome::Ok,
            output_digest: None,
            checked_output: None,
            text_bytes: Some(4096),
            function_instructions: Default::default(),
            function_code: Default::default(),
        },
        references: BTreeMap::new(),
        runs: None,
        measured_before: Default::default(),
    }
}

/// Statistics as a worker computes them, some of them replaced by numbers
/// whose printing is easy to get wrong (17 significant digits, a tie at 16,
/// exponents, negative zero).
fn summary(samples: &[f64], step: u32) -> Summary {
    let mut s = Summary::of(samples).unwrap();
    match step % 6 {
        1 => s.mean = 411_950.699_999_999_95,
        2 => s.ci_high = f64::from_bits(0x4307_3C41_4C03_F1E2), // 817521951276604.25
        3 => (s.ci_low, s.ci_high) = (1e-7, 1e21),
        4 => s.stddev = -0.0,
        _ => {}
    }
    s
}

/// The result of a step: failed builds and runs among successful steps with
/// warm-ups and a metric the machine cannot measure.
fn result(g: &mut Gen, step: u32) -> StepResult {
    let failed = |outcome| StepResult {
        id: StepId(u64::from(step)),
        measurement: Measurement::empty(outcome),
        build: Some(BuildRecord {
            wall_ns: 20_000 + u64::from(step),
            text_bytes: None,
            binary_hash: None,
            log_tail: "error: no".into(),
            replay_file: None,
            reused: false,
            moot: Default::default(),
        }),
        started_ms: 1_000,
        finished_ms: 2_000,
    };
    match step % 7 {
        3 => {
            return failed(StepOutcome::BuildFailed {
                code: Some(2),
                log_tail: "error: no".into(),
            })
        }
        5 => {
            let mut r = failed(StepOutcome::RunFailed {
                code: None,
                signal: Some(9),
                signal_name: Some("SIGKILL".into()),
                stderr_tail: String::new(),
            });
            r.measurement.runs.push(RunRecord {
                index: 0,
                warmup: false,
                exit_code: None,
                signal: Some(9),
                metrics: [(Metric::WallTime, MetricValue::Measured(5.0))].into(),
            });
            return r;
        }
        _ => {}
    }
    let runs: Vec<RunRecord> = (0..4)
        .map(|index| {
            let wall = 1_000_000.0 + g.below(30_000) as f64 / 3.0;
            let mut metrics = BTreeMap::from([
                (Metric::WallTime, MetricValue::Measured(wall)),
                (Metric::UserTime, MetricValue::Measured(wall * 0.7)),
                (Metric::MaxRss, MetricValue::Measured(1_298_432.0)),
            ]);
            // Unsupported in every run, or (every fourth step) in one of them.
            if !step.is_multiple_of(4) || index == 2 {
                metrics.insert(Metric::Cycles, MetricValue::Unsupported);
            }
            RunRecord {
                index,
                warmup: index == 0,
                exit_code: Some(0),
                signal: None,
                metrics,
            }
        })
        .collect();
    let summary = [Metric::WallTime, Metric::UserTime, Metric::MaxRss]
        .into_iter()
        .map(|m| {
            let samples: Vec<f64> = runs[1..]
                .iter()
                .filter_map(|r| r.metrics[&m].measured())
                .collect();
            (m, summary(&samples, step))
        })
        .collect();
    StepResult {
        build: step.is_multiple_of(2).then(|| BuildRecord {
            wall_ns: 10_000 + u64::from(step),
            text_bytes: step.is_multiple_of(4).then_some(4096 + u64::from(step)),
            binary_hash: None,
            log_tail: String::new(),
            replay_file: None,
            reused: step % 8 == 6,
            moot: Default::default(),
        }),
        measurement: Measurement {
            runs,
            summary,
            target_met: !step.is_multiple_of(3),
            // Racing cut every ninth step short after three of at most ten runs.
            cut_short: (step.is_multiple_of(9) && step > 0).then_some(CutShort {
                race: Race {
                    incumbent: 900_000.0,
                    bound: 950_000.0,
                    p: 0.01,
                },
                runs: 3,
                max_runs: 10,
                ci_low: 1_000_000.0,
                ci_high: 1_010_000.0,
            }),
            ..Measurement::empty(StepOutcome::Ok)
        },
        started_ms: 1_000,
        finished_ms: 2_000,
        ..StepResult::new(StepId(u64::from(step)), StepOutcome::Ok)
    }
}

/// Experiment `walk`, two chains of `steps` steps, then two manual steps.
fn campaign(steps: u32) -> Campaign {
    let mut g = Gen(7);
    let info = info();
    let mut out = Campaign {
        experiments: vec![("walk".into(), info.clone())],
        steps: Vec::new(),
    };
    for chain in 0..2 {
        let mut state = ChainState::at_start(
            &info.baseline.decisions,
            info.baseline.samples.clone(),
            ChaCha8Rng::seed_from_u64(u64::from(chain)),
            0.0,
            0,
        );
        for step in 0..steps {
            let record = step_record(&mut g, "walk", chain, step, &state, steps);
            state.next_decide = step + 1;
            state.generated = step + 1;
            state.temperature = record.temperature;
            state.updated_ms = record.recorded_ms + 1;
            if record.kind.can_move() {
                *state.proposals.get_or_insert(0) += 1;
            }
            if record.decision.as_ref().is_some_and(|d| d.accepted) {
                state.accepted += 1;
                state.current = Incumbent {
                    decisions: record.decisions.clone(),
                    samples: vec![record.objective.unwrap()],
                    step: Some(step),
                };
            }
            out.steps.push((record, Some(state.clone())));
        }
    }
    let manual = manual_experiment("knobs");
    out.experiments.push((manual.clone(), info.clone()));
    let state = out.steps[0].1.clone().unwrap();
    for n in 0..2 {
        let mut record = step_record(&mut g, &manual, 0, n, &state, steps);
        record.parent = None;
        record.temperature = 0.0;
        out.steps.push((record, None));
    }
    out
}

fn step_record(
    g: &mut Gen,
    experiment: &str,
    chain: u32,
    step: u32,
    state: &ChainState,
    steps: u32,
) -> StepRecord {
    let mut decisions = state.current.decisions.clone();
    decisions
        .0
        .insert(SiteId("k".into()), DecisionValue::Int(g.below(3) as i64));
    let result = result(g, step);
    let objective = result
        .measurement
        .summary
        .get(&Metric::WallTime)
        .map(|s| s.median);
    let t = 1_700_000_000_000 + u64::from(step) * 1_000;
    StepRecord {
        key: StepKey {
            experiment: experiment.into(),
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
        parent: state.current.step,
        temperature: 0.04 * (1.0 - f64::from(step) / f64::from(steps)),
        result,
        objective,
        worker: ["w0", "host,1", "say \"hi\""][step as usize % 3].into(),
        slot: step % 4,
        worker_fingerprint: None,
        artifacts: BTreeMap::new(),
        cached_from: (step % 11 == 6).then(|| StepKey {
            experiment: experiment.into(),
            chain,
            step: step - 5,
        }),
        dispatched_ms: t,
        recorded_ms: t + 400,
        decision: Some(Decision {
            accepted: objective.is_some() && g.below(3) > 0,
            compared_with: state.current.objective(),
            decided_ms: t + 401,
        }),
    }
}

fn put(db: &sled::Db, key: &str, value: &impl Serialize) {
    db.insert(key, serde_json::to_vec(value).unwrap()).unwrap();
}

/// Writes `c` into `dir` as kiln wrote stores before it kept export rows:
/// `meta/schema` 1, the same keys and JSON, no `row/…`.
fn write_layout_1(dir: &Path, c: &Campaign) {
    let db = sled::open(dir.join("db")).unwrap();
    put(&db, "meta/schema", &1u32);
    put(&db, "meta/config", &CONFIG);
    put(&db, "meta/created-ms", &1u64);
    let mut metrics: BTreeMap<&str, BTreeSet<Metric>> = BTreeMap::new();
    for (name, info) in &c.experiments {
        put(&db, &format!("exp/{name}"), info);
    }
    for (record, state) in &c.steps {
        let k = &record.key;
        let suffix = format!("{}/{:06}/{:09}", k.experiment, k.chain, k.step);
        put(&db, &format!("step/{suffix}"), record);
        if let Some(state) = state {
            put(
                &db,
                &format!("chain/{}/{:06}", k.experiment, k.chain),
                state,
            );
        }
        let r = &record.result;
        let found = metrics.entry(&k.experiment).or_default();
        found.extend(r.measurement.summary.keys().copied());
        found.extend(
            r.measurement
                .runs
                .iter()
                .flat_map(|run| run.metrics.keys().copied()),
        );
    }
    for (name, set) in metrics {
        put(&db, &format!("metrics/{name}"), &set);
    }
    db.flush().unwrap();
}

/// Writes `c` into `dir` through the Store API, as kiln writes a campaign now.
fn write_current(dir: &Path, c: &Campaign) -> Store {
    let store = Store::open(dir).unwrap();
    store.put_config(CONFIG, 1).unwrap();
    for (name, info) in &c.experiments {
        store.put_experiment(name, info).unwrap();
    }
    for (record, state) in &c.steps {
        write_step(&store, c, record, state.as_ref());
    }
    store
}

fn write_step(store: &Store, c: &Campaign, record: &StepRecord, state: Option<&ChainState>) {
    match state {
        Some(state) => store.decide(record, &mut state.clone()).unwrap(),
        None => {
            let info = &c
                .experiments
                .iter()
                .find(|(n, _)| *n == record.key.experiment);
            store.record_manual(&info.unwrap().1, record).unwrap();
        }
    }
}

fn steps_table(store: &Store) -> String {
    let mut out = Vec::new();
    export::export(store, ExportOptions::new(Table::Steps), &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn a_store_without_export_rows_exports_as_kiln_did_before_them() {
    let dir = tempfile::tempdir().unwrap();
    let c = campaign(20);
    write_layout_1(dir.path(), &c);
    let store = reopen(|| Store::open_existing(dir.path()));
    assert_eq!(store.schema(), 1);
    let table = steps_table(&store);
    assert!(
        table == GOLDEN_STEPS,
        "the steps table differs from kiln's before export rows:\n{table}"
    );
    // Stored numbers print as stored, every digit of them.
    assert!(table.contains(",411950.69999999995,"), "{table}");
    // Reading leaves the store as it is.
    assert_eq!(store.schema(), 1);
    drop(store);
    let verified = reopen(|| verify_store(dir.path(), &mut |_| {}));
    assert!(verified.problems.is_empty(), "{:?}", verified.problems);
    let store = reopen(|| Store::open_existing(dir.path()));
    assert_eq!(store.schema(), 1);
    drop(store);
    assert!(!pages_compressed(&dir.path().join("db")));

    // The same campaign written now exports the same table from its rows.
    let now = tempfile::tempdir().unwrap();
    let current = write_current(now.path(), &c);
    assert_eq!(current.schema(), SCHEMA_VERSION);
    assert!(
        steps_table(&current) == GOLDEN_STEPS,
        "{}",
        steps_table(&current)
    );
}

#[test]
fn a_store_without_export_rows_is_migrated_when_opened_to_write() {
    // Enough steps for several of the export's parallel chunks per chain.
    let mut c = campaign(601);
    let last = c.steps.iter().rposition(|(r, _)| r.key.chain == 1).unwrap();
    let (extra, extra_state) = c.steps.remove(last);
    let old = tempfile::tempdir().unwrap();
    write_layout_1(old.path(), &c);
    let now = tempfile::tempdir().unwrap();
    let current = write_current(now.path(), &c);
    let store = reopen(|| Store::open_existing(old.path()));
    assert!(steps_table(&store) == steps_table(&current));
    drop(store);

    // A campaign resuming on it opens it to write: it is migrated first.
    let store = reopen(|| Store::open(old.path()));
    assert_eq!(store.schema(), SCHEMA_VERSION);
    assert!(pages_compressed(&old.path().join("db")));
    let names: BTreeSet<String> = std::fs::read_dir(old.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(!names.iter().any(|n| n.starts_with("db.")), "{names:?}");
    assert!(steps_table(&store) == steps_table(&current));
    write_step(&store, &c, &extra, extra_state.as_ref());
    write_step(&current, &c, &extra, extra_state.as_ref());
    assert_eq!(store.schema(), SCHEMA_VERSION);
    let table = steps_table(&store);
    assert!(table == steps_table(&current));
    assert_eq!(table.lines().count(), 1 + c.steps.len() + 1);
    // Nothing else changed: every step reads back as written.
    let mut expected: Vec<StepRecord> = c.steps.iter().map(|(r, _)| r.clone()).collect();
    expected.push(extra);
    expected.sort_by(|a, b| a.key.cmp(&b.key));
    let stored: Vec<StepRecord> = store.steps(None).map(Result::unwrap).collect();
    assert!(stored == expected, "the stored steps changed");
    drop(store);
    let verified = reopen(|| verify_store(old.path(), &mut |_| {}));
    assert!(verified.problems.is_empty(), "{:?}", verified.problems);
    // Reopened, it is a store of the current layout.
    let store = reopen(|| Store::open(old.path()));
    assert_eq!(store.schema(), SCHEMA_VERSION);
    assert!(steps_table(&store) == steps_table(&current));
}

/// Rewrites the store in `dir` (closed) as layouts 2 to 4 kept its steps and chains' sets:
/// one a key (`step/…`, `row/…`, `chainset/<experiment>/<chain>/<hash>`), `meta/schema` 4.
fn as_layout_4(dir: &Path) {
    let db = reopen(|| open_database(&dir.join("db")).map_err(anyhow::Error::from));
    for kind in [blocks::Kind::Step, blocks::Kind::Row, blocks::Kind::Set] {
        let stored: Vec<_> = db
            .scan_prefix(kind.block_prefix())
            .map(Result::unwrap)
            .collect();
        for (key, block) in stored {
            for entry in blocks::expand(kind, (key.clone(), block)) {
                let (mut name, value) = entry.unwrap();
                if kind == blocks::Kind::Set {
                    let (hash, _): (ContentHash, Vec<f64>) =
                        serde_json::from_slice(&value).unwrap();
                    let chain = String::from_utf8(name.to_vec()).unwrap();
                    let chain = &chain[..chain.rfind('/').unwrap() + 1];
                    name = format!("{chain}{hash}").as_bytes().into();
                }
                db.insert(name, value).unwrap();
            }
            db.remove(key).unwrap();
        }
    }
    // A chain's sets not yet in a block, one a key by number: by hash, after the blocks'.
    let numbered: Vec<_> = db
        .scan_prefix("chainset/")
        .map(Result::unwrap)
        .filter(|(key, _)| blocks::number_of(key).is_ok())
        .collect();
    for (key, value) in numbered {
        let (hash, _): (ContentHash, Vec<f64>) = serde_json::from_slice(&value).unwrap();
        let name = String::from_utf8(key.to_vec()).unwrap();
        db.insert(
            format!("{}{hash}", &name[..name.rfind('/').unwrap() + 1]),
            value,
        )
        .unwrap();
        db.remove(key).unwrap();
    }
    put(&db, "meta/schema", &4u32);
    db.flush().unwrap();
}

#[test]
fn a_store_of_a_key_a_step_reads_as_it_is_and_is_migrated_when_opened_to_write() {
    let c = campaign_with_sets(601);
    let (old, now) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    drop(write_current(old.path(), &c));
    let current = write_current(now.path(), &c);
    let written: Vec<StepRecord> = current.steps(None).map(Result::unwrap).collect();
    as_layout_4(old.path());
    let store = reopen(|| Store::open_existing(old.path()));
    assert_eq!(store.schema(), 4);
    assert!(steps_table(&store) == steps_table(&current));
    drop(store);
    let verified = reopen(|| verify_store(old.path(), &mut |_| {}));
    assert!(verified.problems.is_empty(), "{:?}", verified.problems);
    assert_eq!(
        verified.counts["steps"] + verified.counts["manual steps"],
        written.len()
    );

    // Opened to write, it is migrated: its steps kept in blocks, the same steps and rows.
    let store = reopen(|| Store::open(old.path()));
    assert_eq!(store.schema(), SCHEMA_VERSION);
    assert!(steps_table(&store) == steps_table(&current));
    let stored: Vec<StepRecord> = store.steps(None).map(Result::unwrap).collect();
    assert!(stored == written, "the stored steps changed");
    for chain in 0..2 {
        let sets = |s: &Store| s.chain("walk", chain).unwrap().unwrap().sets;
        assert!(sets(&current).len() > 1);
        assert_eq!(sets(&store), sets(&current));
    }
    drop(store);
    let verified = reopen(|| verify_store(old.path(), &mut |_| {}));
    assert!(verified.problems.is_empty(), "{:?}", verified.problems);
    let db = reopen(|| open_database(&old.path().join("db")).map_err(anyhow::Error::from));
    // One a key are only each chain's last steps, of a block not yet complete.
    let chains: BTreeSet<(&str, u32)> = written
        .iter()
        .map(|r| (r.key.experiment.as_str(), r.key.chain))
        .collect();
    let loose = db.scan_prefix("step/").count() + db.scan_prefix("row/").count();
    assert!(loose < 2 * 16 * chains.len(), "{loose} steps one a key");
    assert!(db.scan_prefix("steps/").count() * 8 < written.len());
}

#[test]
fn verify_finds_export_rows_missing_astray_or_wrong() {
    let dir = tempfile::tempdir().unwrap();
    drop(write_current(dir.path(), &campaign(12)));
    {
        let db = reopen(|| open_database(&dir.path().join("db")).map_err(anyhow::Error::from));
        let row = |chain: u32, step: u32| format!("row/walk/{chain:06}/{step:09}");
        let other = blocks::entry(&db, &row(1, 8)).unwrap().unwrap();
        assert!(blocks::set_entry(&db, &row(0, 5), None).unwrap());
        blocks::set_entry(&db, &row(1, 7), Some(&other)).unwrap();
        blocks::set_entry(&db, &row(1, 99), Some(&other)).unwrap();
        db.flush().unwrap();
    }
    let verified = reopen(|| verify_store(dir.path(), &mut |_| {}));
    assert_eq!(
        verified.problems,
        [
            "walk/chain 0/step 5: no export row",
            "walk/chain 1/step 7: its export row differs from it",
            "row/walk/000001/000000099: a row without its step",
        ]
    );
}

/// A decided step's stored value, its decisions against `start` (by number in it, or by name
/// as layout 5 wrote them), its functions in full (its experiment has no reference profile, or
/// layout 5 wrote them so), its summaries left out where its runs give them.
fn sealed(record: &StepRecord, start: &DecisionSet, by_number: bool) -> String {
    let mut written = record.clone();
    written
        .decisions
        .0
        .retain(|point, value| start.0.get(point) != Some(value));
    assert!(written.decisions.0.len() <= record.decisions.0.len());
    let numbered = |set: &mut DecisionSet| {
        let number = |p: SiteId| SiteId(start.0.keys().position(|k| *k == p).unwrap().to_string());
        set.0 = std::mem::take(&mut set.0)
            .into_iter()
            .map(|(p, v)| (number(p), v))
            .collect();
    };
    if by_number {
        numbered(&mut written.decisions);
        numbered(&mut written.diff);
    }
    // Summaries that are the runs' own are left out, to be computed again.
    let m = &record.result.measurement;
    let of_runs = !m.summary.is_empty() && summarise(&m.runs) == m.summary;
    written.result.measurement.summary.retain(|_, _| !of_runs);
    let marker = [
        (true, format!("\"base\":\"{}\",", start.hash())),
        (by_number, "\"by_number\":true,".into()),
        (of_runs, "\"summary_of_runs\":true,".into()),
    ];
    let marker: String = marker
        .into_iter()
        .filter(|(on, _)| *on)
        .map(|(_, m)| m)
        .collect();
    let json = String::from_utf8(serde_json::to_vec(&written).unwrap()).unwrap();
    let body = format!("{{{marker}{}", &json[1..]);
    let sum = ContentHash::of(body.as_bytes()).short();
    format!("{{\"checksum\":\"{sum}\",{}", &body[1..])
}

#[test]
fn a_decided_step_is_stored_as_its_json_against_its_start_by_number_with_its_checksum_first() {
    let dir = tempfile::tempdir().unwrap();
    let c = campaign(8);
    drop(write_current(dir.path(), &c));
    let db = reopen(|| open_database(&dir.path().join("db")).map_err(anyhow::Error::from));
    let start = &c.experiments[0].1.baseline.decisions;
    let base = start.hash();
    let stored_start = db.get(format!("set/{base}")).unwrap().unwrap();
    assert_eq!(&*stored_start, serde_json::to_vec(start).unwrap());
    let mut summaries_left_out = 0;
    for (record, _) in &c.steps {
        let k = &record.key;
        let key = format!("step/{}/{:06}/{:09}", k.experiment, k.chain, k.step);
        let stored = blocks::entry(&db, &key).unwrap().unwrap();
        let m = &record.result.measurement;
        summaries_left_out += usize::from(!m.summary.is_empty() && summarise(&m.runs) == m.summary);
        assert_eq!(
            std::str::from_utf8(&stored).unwrap(),
            sealed(record, start, true),
            "{key}"
        );
    }
    drop(db);
    // Both kinds among the steps: summaries of runs, and summaries a worker made otherwise.
    assert!((1..c.steps.len()).contains(&summaries_left_out));
    let store = reopen(|| Store::open_existing(dir.path()));
    for (record, _) in &c.steps {
        assert_eq!(store.step(&record.key).unwrap().as_ref(), Some(record));
    }
}

/// `names`, each with instructions and code of `base` plus its name's length.
fn functions(names: &[&str], base: u64) -> (BTreeMap<String, u64>, BTreeMap<String, FunctionCode>) {
    let at = |f: &str| base + f.len() as u64;
    let instructions = names.iter().map(|f| (f.to_string(), at(f)));
    let codes = names
        .iter()
        .map(|f| (f.to_string(), FunctionCode::from([at(f), 0, 1, 0])));
    (instructions.collect(), codes.collect())
}

/// [`campaign`]`(steps)` whose experiment `walk` has a reference profile and whose steps ran
/// functions: every step of `walk` ran `unchanged_helper` as the reference did; some lost
/// `parse_args` (inlined everywhere), and each changed `hot_loop` and ran a function of its own.
fn campaign_with_functions(steps: u32) -> Campaign {
    let mut c = campaign(steps);
    let reference = &mut c.experiments[0].1.baseline;
    let names = ["hot_loop", "main", "parse_args", "unchanged_helper"];
    (reference.function_instructions, reference.function_code) = functions(&names, 100);
    for (record, _) in c.steps.iter_mut().filter(|(r, _)| {
        r.result.measurement.outcome == StepOutcome::Ok && r.key.experiment == "walk"
    }) {
        let m = &mut record.result.measurement;
        let lost = record.key.step % 2 == 0;
        let own = format!("outlined_{}", record.key.step);
        let ran = [
            &names[..2],
            &names[2 + usize::from(lost)..],
            &[own.as_str()],
        ]
        .concat();
        (m.function_instructions, m.function_code) = functions(&ran, 100);
        *m.function_instructions.get_mut("hot_loop").unwrap() += 7;
    }
    c
}

/// Every step of `c` reads back as it was from the store in `dir`, opened with `open`; closed
/// again, the store verifies clean.
fn reads_back_and_verifies(open: fn(&Path) -> anyhow::Result<Store>, dir: &Path, c: &Campaign) {
    let store = reopen(|| open(dir));
    for (record, _) in &c.steps {
        assert_eq!(store.step(&record.key).unwrap().as_ref(), Some(record));
    }
    drop(store);
    let verified = reopen(|| verify_store(dir, &mut |_| {}));
    assert_eq!(verified.problems, Vec::<String>::new());
}

#[test]
fn a_steps_functions_are_stored_against_its_experiments_reference_profile() {
    let dir = tempfile::tempdir().unwrap();
    let c = campaign_with_functions(8);
    drop(write_current(dir.path(), &c));
    let db = reopen(|| open_database(&dir.path().join("db")).map_err(anyhow::Error::from));
    let profile = db
        .scan_prefix("profile/")
        .map(Result::unwrap)
        .collect::<Vec<_>>();
    assert_eq!(profile.len(), 1, "one reference profile stored");
    let mut profiled = 0;
    for (record, _) in &c.steps {
        let k = &record.key;
        let key = format!("step/{}/{:06}/{:09}", k.experiment, k.chain, k.step);
        let stored =
            String::from_utf8(blocks::entry(&db, &key).unwrap().unwrap().to_vec()).unwrap();
        if record.result.measurement.function_instructions.is_empty() {
            assert!(!stored.contains("\"profile\""), "{stored}");
            continue;
        }
        profiled += 1;
        assert!(!stored.contains("unchanged_helper"), "{stored}");
        assert!(
            stored.contains("hot_loop") && stored.contains("outlined_"),
            "{stored}"
        );
        assert_eq!(
            stored.contains("\"gone\":[\"parse_args\"]"),
            k.step % 2 == 0
        );
    }
    assert!(profiled > 0);
    drop(db);
    reads_back_and_verifies(Store::open_existing, dir.path(), &c);
    // A reference lost is a step that does not read, said so.
    let db = reopen(|| open_database(&dir.path().join("db")).map_err(anyhow::Error::from));
    db.remove(&profile[0].0).unwrap();
    db.flush().unwrap();
    drop(db);
    let verified = reopen(|| verify_store(dir.path(), &mut |_| {}));
    assert!(
        verified
            .problems
            .iter()
            .all(|p| p.contains("reference profile profile/")),
        "{:?}",
        verified.problems
    );
    assert_eq!(verified.problems.len(), profiled);
}

/// Rewrites the steps of `c`, stored in `dir` (closed), as layout 5 kept them: decisions by
/// name, functions in full; `meta/schema` 5.
fn as_layout_5(dir: &Path, c: &Campaign) {
    let db = reopen(|| open_database(&dir.join("db")).map_err(anyhow::Error::from));
    let start = &c.experiments[0].1.baseline.decisions;
    for (record, _) in &c.steps {
        let k = &record.key;
        let key = format!("step/{}/{:06}/{:09}", k.experiment, k.chain, k.step);
        let value = sealed(record, start, false);
        assert!(blocks::set_entry(&db, &key, Some(value.as_bytes())).unwrap());
    }
    for profile in db.scan_prefix("profile/").map(Result::unwrap) {
        db.remove(profile.0).unwrap();
    }
    put(&db, "meta/schema", &5u32);
    db.flush().unwrap();
}

#[test]
fn a_layout_5_store_reads_as_it_is_and_is_migrated_to_take_layout_6s_room() {
    let dir = tempfile::tempdir().unwrap();
    let c = campaign_with_functions(40);
    drop(write_current(dir.path(), &c));
    as_layout_5(dir.path(), &c);
    let view = reopen(|| Store::open_existing(dir.path()));
    assert_eq!(view.schema(), 5);
    for (record, _) in &c.steps {
        assert_eq!(view.step(&record.key).unwrap().as_ref(), Some(record));
    }
    drop(view);
    let store = reopen(|| Store::open(dir.path()));
    assert_eq!(
        (store.schema(), store.migrated_from()),
        (SCHEMA_VERSION, Some(5))
    );
    drop(store);
    reads_back_and_verifies(Store::open_existing, dir.path(), &c);
    let db = reopen(|| open_database(&dir.path().join("db")).map_err(anyhow::Error::from));
    let stored = blocks::entry(&db, "step/walk/000000/000000001")
        .unwrap()
        .unwrap();
    let stored = String::from_utf8_lossy(&stored);
    assert!(
        stored.contains("\"by_number\":true,\"profile\":{") && !stored.contains("unchanged_helper"),
        "{stored}"
    );
}

#[test]
fn an_undecided_result_is_stored_against_its_start_and_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = campaign_with_functions(8);
    let steps = std::mem::take(&mut c.steps);
    let store = write_current(dir.path(), &c);
    let results: Vec<&StepRecord> = steps
        .iter()
        .map(|(record, _)| record)
        .filter(|r| r.key.experiment == "walk")
        .collect();
    for record in &results {
        store.put_result(record).unwrap();
    }
    for record in &results {
        assert_eq!(store.result(&record.key).unwrap().as_ref(), Some(*record));
    }
    drop(store);
    let db = reopen(|| open_database(&dir.path().join("db")).map_err(anyhow::Error::from));
    let stored: Vec<_> = db.scan_prefix("result/").map(Result::unwrap).collect();
    assert_eq!(stored.len(), results.len());
    for (key, value) in stored {
        let value = String::from_utf8_lossy(&value);
        assert!(value.contains("\"by_number\":true,"), "{key:?}: {value}");
        assert!(!value.contains("unchanged_helper"), "{key:?}: {value}");
    }
}

#[test]
fn a_store_of_a_newer_layout_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = sled::open(dir.path().join("db")).unwrap();
        put(&db, "meta/schema", &(SCHEMA_VERSION + 1));
        db.flush().unwrap();
    }
    let e = reopen(|| Ok(Store::open(dir.path()).map(|_| ()).unwrap_err()));
    let said = format!("{e:#}");
    assert!(
        said.contains(&format!("schema version {}", SCHEMA_VERSION + 1))
            && said.contains("a newer kiln wrote it"),
        "{said}"
    );
}

#[test]
fn a_campaign_stored_without_export_rows_resumes_and_exports() {
    let dir = noop_campaign();
    // Make it a store as kiln wrote them before export rows: steps as their JSON in full.
    {
        let store = reopen(|| Store::open_existing(&dir.path().join("store")));
        let steps: Vec<StepRecord> = store.steps(None).map(Result::unwrap).collect();
        drop(store);
        let db =
            reopen(|| open_database(&dir.path().join("store/db")).map_err(anyhow::Error::from));
        for step in &steps {
            let k = &step.key;
            put(
                &db,
                &format!("step/{}/{:06}/{:09}", k.experiment, k.chain, k.step),
                step,
            );
        }
        assert_eq!(steps.len(), 24);
        let blocks: Vec<_> = ["steps/", "rows/"]
            .into_iter()
            .flat_map(|prefix| db.scan_prefix(prefix).keys().map(Result::unwrap))
            .collect();
        blocks.iter().for_each(|k| drop(db.remove(k).unwrap()));
        put(&db, "meta/schema", &1u32);
        db.flush().unwrap();
    }
    let export = |dir: &Path| {
        let out = run_kiln_when_free(dir, &["export", "store", "--table", "steps"]);
        assert!(out.status.success(), "{}", text(&out));
        String::from_utf8(out.stdout).unwrap()
    };
    let before = export(dir.path());
    assert_eq!(before.lines().count(), 1 + 24);

    // A second experiment is added to the campaign and run: the store is
    // migrated when the campaign opens it, and exports the first
    // experiment's steps as before.
    std::fs::write(dir.path().join("campaign.sexp"), noop_config(true)).unwrap();
    let out = run_kiln(dir.path(), &["run", "campaign.sexp"]);
    assert!(out.status.success(), "{}", text(&out));
    let after = export(dir.path());
    assert_eq!(after.lines().count(), 1 + 24 + 16);
    assert!(after.starts_with(&before), "{before}\n{after}");
    let store = Store::open(&dir.path().join("store")).unwrap();
    assert_eq!(store.schema(), SCHEMA_VERSION);
    drop(store);
    let verify = run_kiln(dir.path(), &["store", "verify", "store"]);
    assert!(verify.status.success(), "{}", text(&verify));
    assert!(String::from_utf8_lossy(&verify.stdout).contains("ok: no problems found"));
}

#[test]
fn a_chain_stored_before_kiln_kept_its_course_has_it_replayed_from_its_steps() {
    let mut c = campaign(300);
    for (_, state) in &mut c.steps {
        if let Some(state) = state {
            state.progress = None;
            state.proposals = None;
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let store = write_current(dir.path(), &c);
    let state = store.chain("walk", 1).unwrap().unwrap();
    let progress = state.progress.expect("replayed");
    let chain: Vec<&StepRecord> = c
        .steps
        .iter()
        .map(|(r, _)| r)
        .filter(|r| r.key.experiment == "walk" && r.key.chain == 1)
        .collect();
    // Steps per worker, a reused measurement counted for none.
    let mut workers: BTreeMap<String, u64> = BTreeMap::new();
    for r in chain.iter().filter(|r| r.cached_from.is_none()) {
        *workers.entry(r.worker.clone()).or_default() += 1;
    }
    assert_eq!(progress.workers, workers);
    // Downsampled to at most 128 points, evenly; the last point's figures are the chain's.
    assert!(progress.series.len() <= 128 && progress.stride == 4);
    let last = progress.series.last().unwrap();
    assert_eq!(last.steps, 300);
    let accepted = chain
        .iter()
        .filter(|r| r.decision.as_ref().unwrap().accepted)
        .count();
    assert_eq!(last.accepted as usize, accepted);
    // The share of steps that could move the chain, re-measurements not among them.
    let proposals = chain
        .iter()
        .filter(|r| r.kind == StepKind::Proposal)
        .count();
    assert_eq!((proposals, chain.len()), (270, 300));
    assert_eq!(state.proposals, Some(proposals as u32));
    assert_eq!(last.proposals as usize, proposals);
    let lowest = chain
        .iter()
        .filter_map(|r| r.objective)
        .fold(info().baseline.objective().unwrap(), f64::min);
    assert_eq!(last.best, Some(lowest));
    assert_eq!(last.at_ms, chain[299].decision.as_ref().unwrap().decided_ms);
}

/// The names in `dir` that a migration leaves only while it runs.
fn migration_leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("db."))
        .collect()
}

#[test]
fn a_migration_cut_short_is_done_again_or_finished_by_the_next_open() {
    let c = campaign(50);
    let now = tempfile::tempdir().unwrap();
    let expected = steps_table(&write_current(now.path(), &c));

    // Cut short while it built the new database: that is built again.
    let a = tempfile::tempdir().unwrap();
    write_layout_1(a.path(), &c);
    std::fs::create_dir(a.path().join("db.migrating")).unwrap();
    std::fs::write(a.path().join("db.migrating/db"), b"half a database").unwrap();
    let store = reopen(|| Store::open(a.path()));
    assert_eq!(store.migrated_from(), Some(1));
    assert!(steps_table(&store) == expected);
    drop(store);
    assert_eq!(migration_leftovers(a.path()), Vec::<String>::new());

    // Cut short between moving the old database aside and the new one into
    // its place: the new one (complete) is moved in.
    let b = tempfile::tempdir().unwrap();
    write_layout_1(b.path(), &c);
    std::fs::rename(b.path().join("db"), b.path().join("db.replaced")).unwrap();
    std::fs::create_dir(b.path().join("db.migrated")).unwrap();
    for file in std::fs::read_dir(a.path().join("db")).unwrap() {
        let file = file.unwrap();
        if file.file_type().unwrap().is_file() {
            std::fs::copy(
                file.path(),
                b.path().join("db.migrated").join(file.file_name()),
            )
            .unwrap();
        }
    }
    let store = reopen(|| Store::open(b.path()));
    assert_eq!(store.migrated_from(), None);
    assert!(steps_table(&store) == expected);
    drop(store);
    assert_eq!(migration_leftovers(b.path()), Vec::<String>::new());
    let verified = reopen(|| verify_store(b.path(), &mut |_| {}));
    assert!(verified.problems.is_empty(), "{:?}", verified.problems);
}

#[test]
fn kiln_store_migrate_says_what_it_did_and_then_that_nothing_is_left() {
    let dir = tempfile::tempdir().unwrap();
    let c = campaign(20);
    write_layout_1(&dir.path().join("store"), &c);
    let migrate = || run_kiln_when_free(dir.path(), &["store", "migrate", "store"]);
    let out = migrate();
    assert!(out.status.success(), "{}", text(&out));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.starts_with(&format!("store store: layout 1 → {SCHEMA_VERSION} in "))
            && said.contains("; database "),
        "{said}"
    );
    let out = migrate();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        format!("store store is of the current layout ({SCHEMA_VERSION}): nothing to do\n")
    );
    let out = run_kiln(dir.path(), &["store", "migrate", "nothing-here"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(!dir.path().join("nothing-here").exists());
}

/// [`campaign`]`(steps)` with each chain's measured sets in its state, as a campaign keeps them.
fn campaign_with_sets(steps: u32) -> Campaign {
    let mut c = campaign(steps);
    let mut sets: BTreeMap<(String, u32), BTreeMap<ContentHash, Vec<f64>>> = BTreeMap::new();
    for (record, state) in &mut c.steps {
        let Some(state) = state else { continue };
        let chain = sets
            .entry((record.key.experiment.clone(), record.key.chain))
            .or_insert_with(|| state.sets.clone());
        chain
            .entry(record.decision_hash)
            .or_default()
            .extend(record.objective);
        state.sets = chain.clone();
    }
    c
}

/// The raw value of `key` in the store in `dir`, and the distinct sets of the blocks under
/// `prefix` (`chainsets/<experiment>/<chain>/`).
fn raw(dir: &Path, key: &str, prefix: &str) -> (Vec<u8>, usize) {
    let db = reopen(|| open_database(&dir.join("db")).map_err(anyhow::Error::from));
    let value = db.get(key).unwrap().unwrap().to_vec();
    let packed = db
        .scan_prefix(prefix)
        .flat_map(|block| blocks::expand(blocks::Kind::Set, block.unwrap()));
    let loose = db.scan_prefix(prefix.replacen("chainsets/", "chainset/", 1));
    let values = packed
        .map(|entry| entry.unwrap().1)
        .chain(loose.map(|entry| entry.unwrap().1));
    let sets: BTreeSet<ContentHash> = values
        .map(|value| serde_json::from_slice::<(ContentHash, Vec<f64>)>(&value))
        .map(|set| set.unwrap().0)
        .collect();
    (value, sets.len())
}

#[test]
fn a_chains_sets_are_stored_apart_so_its_state_written_each_step_does_not_grow() {
    let c = campaign_with_sets(200);
    let expected = c.steps.iter().rev().find_map(|(r, s)| {
        s.as_ref()
            .filter(|_| r.key.chain == 1)
            .map(|s| s.sets.clone())
    });
    let expected = expected.unwrap();
    assert!(expected.len() >= 3, "{} sets", expected.len());
    let dir = tempfile::tempdir().unwrap();
    drop(write_current(dir.path(), &c));
    let (state, stored_sets) = raw(dir.path(), "chain/walk/000001", "chainsets/walk/000001/");
    assert!(state.len() < 4096, "a state of {} bytes", state.len());
    assert!(!String::from_utf8_lossy(&state).contains("\"sets\""));
    assert_eq!(stored_sets, expected.len());
    let view = reopen(|| Store::open_existing(dir.path()));
    assert_eq!(view.chain("walk", 1).unwrap().unwrap().sets, expected);
    // `kiln status` and the report count them without reading them.
    let counted = view.chain_view("walk", 1).unwrap().unwrap();
    assert!(counted.sets.is_empty());
    assert_eq!(counted.coverage(&[]).sets as usize, expected.len());
}

#[test]
fn a_chain_state_an_older_kiln_wrote_with_its_sets_inside_keeps_them() {
    let c = campaign_with_sets(40);
    let dir = tempfile::tempdir().unwrap();
    write_layout_1(dir.path(), &c);
    // As an older kiln wrote them: the sets inside each chain's state.
    let db = reopen(|| sled::open(dir.path().join("db")).map_err(anyhow::Error::from));
    for chain in 0..2 {
        let state = c.steps.iter().rev().find_map(|(r, s)| {
            s.as_ref()
                .filter(|_| r.key.experiment == "walk" && r.key.chain == chain)
        });
        let state = state.unwrap();
        let mut json = serde_json::to_value(state).unwrap();
        json["sets"] = serde_json::to_value(&state.sets).unwrap();
        put(&db, &format!("chain/walk/{chain:06}"), &json);
    }
    db.flush().unwrap();
    drop(db);
    let last = |chain| {
        c.steps.iter().rev().find_map(|(r, s)| {
            s.as_ref()
                .filter(|_| r.key.chain == chain)
                .map(|s| s.sets.clone())
        })
    };
    let expected = last(0).unwrap();
    // A view reads them inside the state, and writes nothing.
    let view = reopen(|| Store::open_existing(dir.path()));
    assert_eq!(view.chain("walk", 0).unwrap().unwrap().sets, expected);
    let counted = view.chain_view("walk", 0).unwrap().unwrap();
    assert_eq!(counted.coverage(&[]).sets as usize, expected.len());
    drop(view);
    // A controller moves them out as it reads the state.
    let store = reopen(|| Store::open(dir.path()));
    assert_eq!(store.chain("walk", 0).unwrap().unwrap().sets, expected);
    drop(store);
    let (state, stored_sets) = raw(dir.path(), "chain/walk/000000", "chainsets/walk/000000/");
    assert!(!String::from_utf8_lossy(&state).contains("\"sets\""));
    assert_eq!(stored_sets, expected.len());
    let view = reopen(|| Store::open_existing(dir.path()));
    assert_eq!(view.chain("walk", 0).unwrap().unwrap().sets, expected);
    assert_eq!(
        view.chain("walk", 1).unwrap().unwrap().sets,
        last(1).unwrap()
    );
}

/// A layout-3 store (one of layout 4 as it is: a key a step) is migrated like layout 4's.
#[test]
fn a_layout_3_store_is_migrated_when_opened_to_write() {
    let dir = tempfile::tempdir().unwrap();
    let c = campaign(12);
    drop(write_current(dir.path(), &c));
    as_layout_4(dir.path());
    {
        let db = reopen(|| open_database(&dir.path().join("db")).map_err(anyhow::Error::from));
        put(&db, "meta/schema", &3u32);
        db.flush().unwrap();
    }
    let store = reopen(|| Store::open(dir.path()));
    assert_eq!(
        (store.schema(), store.migrated_from()),
        (SCHEMA_VERSION, Some(3))
    );
    for (record, _) in &c.steps {
        assert_eq!(store.step(&record.key).unwrap().as_ref(), Some(record));
    }
}

/// An inlining experiment's start: `n` sites named as clang names them, all inlined.
fn info_of_sites(n: usize) -> ExperimentInfo {
    let site = |k: usize| SiteId(format!("DEREF @ setup_frame_{k}:47:4"));
    let mut info = info();
    info.baseline.decisions =
        DecisionSet((0..n).map(|k| (site(k), DecisionValue::Int(1))).collect());
    info.discovery.baseline = info.baseline.decisions.clone();
    info
}

/// `start` with the points numbered `flipped` set to 0: a set and its diff from `start`.
fn flipped(start: &DecisionSet, flipped: &[usize]) -> (DecisionSet, DecisionSet) {
    let mut set = start.clone();
    for (k, value) in set.0.values_mut().enumerate() {
        if flipped.contains(&k) {
            *value = DecisionValue::Int(0);
        }
    }
    let diff = set.diff_from(start);
    (set, diff)
}

#[test]
fn a_chains_state_is_stored_against_its_experiments_start_and_reads_back() {
    let info = info_of_sites(400);
    let start = &info.baseline.decisions;
    let mut state = ChainState::at_start(start, vec![1e6], ChaCha8Rng::seed_from_u64(3), 0.1, 0);
    state.current.decisions = flipped(start, &[3, 70]).0;
    for (step, points) in [(5, [3, 70, 9]), (6, [3, 70, 399])] {
        let (decisions, diff) = flipped(start, &points);
        let proposal = Proposal {
            kind: StepKind::Proposal,
            decisions,
            parent: Some(4),
            diff,
            temperature: 0.1,
            race: None,
        };
        state.pending.insert(step, proposal);
    }
    let sites: Vec<SiteId> = start.0.keys().cloned().collect();
    let effect = |change| Effect {
        change: Some(change),
        uncertainty: 1e-4,
        value: Some(DecisionValue::Int(0)),
    };
    state.effects = [
        (sites[3].clone(), effect(-0.01)),
        (sites[7].clone(), effect(0.02)),
    ]
    .into();
    state.varied = [sites[3].clone(), sites[7].clone(), sites[70].clone()].into();
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    store.put_config(CONFIG, 1).unwrap();
    store.put_experiment("walk", &info).unwrap();
    store.put_chain("walk", 0, &mut state).unwrap();
    drop(store);
    let stored = || {
        let (stored, _) = raw(dir.path(), "chain/walk/000000", "chainsets/walk/000000/");
        String::from_utf8(stored).unwrap()
    };
    let read_back = |state: &ChainState| {
        let view = reopen(|| Store::open_existing(dir.path()));
        let mut back = view.chain("walk", 0).unwrap().unwrap();
        back.set_count = state.set_count;
        assert_eq!(&back, state);
    };
    let opening = format!("{{\"base\":\"{}\",\"by_number\":true,", start.hash());
    let (value, whole) = (stored(), serde_json::to_vec(&state).unwrap().len());
    let points = format!("{opening}\"points_by_number\":true,");
    assert!(value.starts_with(&points), "{}", &value[..200]);
    assert!(!value.contains("setup_frame"), "no site by name: {value}");
    assert!(
        value.len() * 20 < whole,
        "{} bytes, {whole} in full",
        value.len()
    );
    read_back(&state);
    // An effect of a point its start lacks: its points by name, its sets by number.
    state
        .effects
        .insert(SiteId("elsewhere".into()), effect(0.0));
    let store = reopen(|| Store::open(dir.path()));
    store.put_chain("walk", 0, &mut state).unwrap();
    drop(store);
    let value = stored();
    assert!(value.starts_with(&opening) && !value.contains("points_by_number"));
    let named = |site: &SiteId| value.contains(&format!("\"{}\"", site.0));
    assert!(named(&sites[3]) && named(&SiteId("elsewhere".into())));
    read_back(&state);
    // `kiln store verify` reads every state: its start gone, the state is unreadable, by name.
    let db = reopen(|| open_database(&dir.path().join("db")).map_err(anyhow::Error::from));
    db.remove(format!("set/{}", start.hash())).unwrap();
    db.flush().unwrap();
    drop(db);
    let err = verify_store(dir.path(), &mut |_| {}).unwrap_err();
    let err = format!("{err:#}");
    assert!(
        err.contains("chain/walk/000000") && err.contains("is missing"),
        "{err}"
    );
}

#[test]
fn a_chains_state_whose_set_lacks_a_point_of_its_start_is_stored_whole() {
    let info = info_of_sites(40);
    let start = &info.baseline.decisions;
    let mut state = ChainState::at_start(start, vec![1e6], ChaCha8Rng::seed_from_u64(3), 0.1, 0);
    state.best.decisions.0.pop_first();
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    store.put_experiment("walk", &info).unwrap();
    store.put_chain("walk", 0, &mut state).unwrap();
    drop(store);
    let (stored, _) = raw(dir.path(), "chain/walk/000000", "chainsets/walk/000000/");
    assert!(stored.starts_with(b"{\"next_decide\":"));
    let view = reopen(|| Store::open_existing(dir.path()));
    let mut back = view.chain("walk", 0).unwrap().unwrap();
    back.set_count = state.set_count;
    assert_eq!(back, state);
}
