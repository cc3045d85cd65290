//! `kiln policy`: a policy benchmarked across the config's benchmarks.
//!
//! A policy decides a benchmark's sites: the built-in `stock` (the stock
//! compiler's decisions) and `nothing` (inline no site), or a command that
//! reads the benchmark's sites with their features on stdin (JSON lines, the
//! `sites` table's columns) and writes a decision file to stdout. For each
//! benchmark in turn, on one slot of one worker (a local one in the store's
//! own workers folder, as the campaign measured), kiln measures the policy's
//! decisions beside the stock decisions, inlining nothing and the campaign's
//! best step (where the store has one), records the policy's and the
//! inline-nothing measurements in the store (experiment `manual:BENCHMARK`,
//! so they export), and prints one row per benchmark. A benchmark whose
//! policy fails (a crash, a timeout, a malformed decision file, an unknown
//! site) or whose measurement fails is a row with the reason; the others go on, and the
//! command then fails (exit 1), or ends as bad input (exit 2) where a benchmark's sources
//! cannot be sent, as `kiln run` does.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde::Serialize;

use kiln_protocol::bundle::Bundle;
use kiln_protocol::config::{BenchmarkKind, BenchmarkSpec};
use kiln_protocol::message::Discovery;
use kiln_protocol::{CampaignConfig, DecisionFile, DecisionSet, DecisionValue};

use crate::atomic;
use crate::cli::{BuiltinPolicy, PolicyArgs};
use crate::dispatch::bundle;
use crate::error::{self, BadInput, Interrupted, Outcome};
use crate::export::site_records;
use crate::logging;
use crate::measure::{
    compare, pick_worker, pooled_objective, rounds, single_slot, Session, Sets, Slot,
};
use crate::store::{layout, time_ratio, Store};
use crate::text::{escape_controls, format_ratio, table, TIME_RATIO};

/// Most bytes a policy may write for one benchmark.
const MAX_OUTPUT: u64 = 64 << 20;

/// What decides the sites.
#[derive(Debug, Clone)]
enum Policy {
    /// The stock compiler's decisions.
    Stock,
    /// Inline no site.
    Nothing,
    /// A command's decision file.
    Command(Vec<String>),
}

impl Policy {
    fn from_args(args: &PolicyArgs) -> Policy {
        match args.builtin {
            Some(BuiltinPolicy::Stock) => Policy::Stock,
            Some(BuiltinPolicy::Nothing) => Policy::Nothing,
            None => Policy::Command(args.command.clone()),
        }
    }

    fn name(&self) -> String {
        match self {
            Policy::Stock => "stock".into(),
            Policy::Nothing => "nothing".into(),
            Policy::Command(argv) => argv.join(" "),
        }
    }

    /// The policy's decisions for a benchmark, every site decided (sites a
    /// decision file leaves out keep their stock value).
    fn decide(
        &self,
        spec: &BenchmarkSpec,
        discovery: &Discovery,
        timeout: Duration,
    ) -> Result<DecisionSet, String> {
        match self {
            Policy::Stock => Ok(discovery.baseline.clone()),
            Policy::Nothing => Ok(inline_nothing(discovery)),
            Policy::Command(argv) => {
                let text = run_policy(argv, spec, discovery, timeout)?;
                let origin = format!("the policy's decision file for {}", spec.name);
                let file = DecisionFile::parse_checked(&text, &origin, &discovery.points)
                    .map_err(|e| e.to_string())?;
                if let Some(other) = file.benchmark.as_deref().filter(|b| *b != spec.name) {
                    return Err(format!(
                        "the policy wrote a decision file for benchmark '{other}', not '{}'",
                        spec.name
                    ));
                }
                Ok(file.set.completed_from(&discovery.baseline))
            }
        }
    }
}

/// Every site no-inline.
fn inline_nothing(discovery: &Discovery) -> DecisionSet {
    DecisionSet(
        discovery
            .points
            .iter()
            .map(|p| (p.id.clone(), DecisionValue::no_inline()))
            .collect(),
    )
}

/// Runs a policy command for one benchmark: its sites on stdin, its decision
/// file from stdout, within `timeout`.
fn run_policy(
    argv: &[String],
    spec: &BenchmarkSpec,
    discovery: &Discovery,
    timeout: Duration,
) -> Result<String, String> {
    let mut input = String::new();
    for record in site_records(&spec.name, &spec.name, discovery) {
        let line = serde_json::to_string(&record).map_err(|e| e.to_string())?;
        let _ = writeln!(input, "{line}");
    }
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        .env("KILN_BENCHMARK", &spec.name)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start the policy '{}': {e}", argv[0]))?;
    let mut stdin = child.stdin.take().expect("piped");
    // Written from a thread: a policy that writes before it has read all of
    // its input would otherwise stall both sides on full pipes.
    let writer = std::thread::spawn(move || {
        let _ = stdin.write_all(input.as_bytes());
    });
    let reader = read_apart(child.stdout.take().expect("piped"));
    let errors = read_apart(child.stderr.take().expect("piped"));
    let status = wait_within(&mut child, timeout)?;
    let _ = writer.join();
    let out = reader.join().unwrap_or_default();
    let err = errors.join().unwrap_or_default();
    let err = String::from_utf8_lossy(&err);
    if !status.success() {
        let last = err.lines().rfind(|l| !l.trim().is_empty()).unwrap_or("");
        return Err(format!("the policy failed ({status}): {}", last.trim()));
    }
    // What a policy says on stderr (which sites it flipped, and why) is the person's to read.
    for line in err.lines().filter(|l| !l.trim().is_empty()) {
        logging::note(format_args!("{}: the policy says: {line}", spec.name));
    }
    String::from_utf8(out).map_err(|_| "the policy's output is not UTF-8 text".to_string())
}

/// Reads up to [`MAX_OUTPUT`] bytes of `pipe` on a thread of its own.
fn read_apart(mut pipe: impl Read + Send + 'static) -> std::thread::JoinHandle<Vec<u8>> {
    std::thread::spawn(move || {
        let mut out = Vec::new();
        let _ = (&mut pipe).take(MAX_OUTPUT).read_to_end(&mut out);
        out
    })
}

/// Waits for the policy to exit; kills it past `timeout`.
fn wait_within(child: &mut Child, timeout: Duration) -> Result<ExitStatus, String> {
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait().map_err(|e| e.to_string())? {
            Some(status) => return Ok(status),
            None if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "the policy took more than {} s (--timeout-s)",
                    timeout.as_secs_f64()
                ));
            }
            None => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// One benchmark's row.
#[derive(Debug, Serialize)]
struct Row {
    benchmark: String,
    /// Sites the policy decided otherwise than stock.
    changed: Option<usize>,
    /// Objectives (the campaign's statistic of its metric).
    stock: Option<f64>,
    policy: Option<f64>,
    nothing: Option<f64>,
    best_step: Option<f64>,
    /// Why the benchmark has no result, if it has none.
    failure: Option<String>,
    /// Whether that is the input's fault (sources kiln cannot send), not a failure.
    #[serde(skip)]
    bad_input: bool,
}

impl Row {
    fn failed(benchmark: &str, why: String) -> Row {
        Row {
            benchmark: benchmark.to_string(),
            changed: None,
            stock: None,
            policy: None,
            nothing: None,
            best_step: None,
            failure: Some(why),
            bad_input: false,
        }
    }

    /// A time ratio against stock.
    fn ratio(&self, of: Option<f64>) -> Option<f64> {
        Some(time_ratio(of?, self.stock?))
    }
}

pub(super) fn run(args: &PolicyArgs, out: &mut dyn Write) -> Result<Outcome> {
    let config = super::read_config(&args.config)?;
    let policy = Policy::from_args(args);
    let specs = benchmarks(&config, &args.benchmarks)?;
    let worker = single_slot(&pick_worker(&config, args.worker.as_deref())?);
    let store_dir = args.store.clone().unwrap_or_else(|| config.store.clone());
    let store = Store::open(&store_dir)?;
    store.claim()?;
    let (scratch, mut settings) = super::scratch_pool(&config, None, config.limits_in_use())?;
    // Local workers run where the campaign's did: a program's count under callgrind depends
    // on the folder it runs in, and the campaign's builds are cached there.
    settings.local_rundir = layout::local_workers(store.dir());
    let timeout = Duration::from_secs_f64(args.timeout_s);
    let rows: Vec<Row> = super::runtime()?.block_on(async {
        let mut slot = Slot::start(&worker, settings, scratch)?;
        let mut rows = Vec::new();
        for spec in &specs {
            logging::note(format_args!("{}: policy {}", spec.name, policy.name()));
            let row = match evaluate(&config, &store, spec, &policy, &mut slot.session(), timeout)
                .await
            {
                Ok(row) => row,
                // A signal stops the command, not only this benchmark.
                Err(e) if e.downcast_ref::<Interrupted>().is_some() => return Err(e),
                Err(e) => Row {
                    bad_input: error::status_of(&e) == 2,
                    ..Row::failed(&spec.name, format!("{e:#}"))
                },
            };
            rows.push(row);
        }
        anyhow::Ok(rows)
    })?;
    if let Some(path) = &args.output {
        atomic::write(path, csv_text(&rows)?.as_bytes())?;
    }
    if args.json {
        serde_json::to_writer_pretty(&mut *out, &rows)?;
        writeln!(out)?;
    } else {
        write!(out, "{}", escape_controls(&render(&policy, &rows)))?;
    }
    // As `kiln run` ends: bad input where a benchmark's sources were at fault, after the others.
    Ok(
        match (
            rows.iter().any(|r| r.bad_input),
            rows.iter().any(|r| r.failure.is_some()),
        ) {
            (true, _) => Outcome::BadInput,
            (false, true) => Outcome::Failure,
            (false, false) => Outcome::Success,
        },
    )
}

/// The config's llvm-inline benchmarks (or the ones named, which must be such).
fn benchmarks(config: &CampaignConfig, names: &[String]) -> Result<Vec<BenchmarkSpec>> {
    let inline = |b: &BenchmarkSpec| matches!(b.kind, BenchmarkKind::LlvmInline { .. });
    if names.is_empty() {
        let all: Vec<BenchmarkSpec> = config
            .benchmarks
            .iter()
            .filter(|b| inline(b))
            .cloned()
            .collect();
        if all.is_empty() {
            return Err(
                BadInput("the config has no llvm-inline benchmark for a policy".into()).into(),
            );
        }
        return Ok(all);
    }
    names
        .iter()
        .map(|name| {
            let spec = super::benchmark_spec(config, name)?;
            if !inline(spec) {
                return Err(
                    BadInput(format!("benchmark {name} has knobs, not inlining sites")).into(),
                );
            }
            Ok(spec.clone())
        })
        .collect()
}

/// Measures one benchmark: its discovery (kept in the store, or found now),
/// the policy's decisions, then stock, the policy, nothing and the best step
/// side by side; records the policy and nothing as manual steps.
async fn evaluate(
    config: &CampaignConfig,
    store: &Store,
    spec: &BenchmarkSpec,
    policy: &Policy,
    session: &mut Session<'_>,
    timeout: Duration,
) -> Result<Row> {
    let bundle = Arc::new(bundle::pack(&spec.sources)?);
    let discovery = super::discovery(store.dir(), &config.store, spec, &bundle, session).await?;
    let decisions = match policy.decide(spec, &discovery, timeout) {
        Ok(decisions) => decisions,
        Err(why) => return Ok(Row::failed(&spec.name, why)),
    };
    let nothing = inline_nothing(&discovery);
    let best = best_step(store, spec, &bundle)?;
    let mut sets = Sets::new(&discovery.baseline);
    let (policy_at, nothing_at) = (sets.place(&decisions), sets.place(&nothing));
    let best_at = best.as_ref().map(|b| sets.place(b));
    let runs = config.runs;
    let rounds = rounds(config, None);
    let measured = compare(session, config, spec, &bundle, &sets.0, runs, rounds).await?;
    let objective = |i: usize| pooled_objective(config, &measured[i]);
    let stock = objective(0).map_err(anyhow::Error::msg)?;
    let mut failures = Vec::new();
    let mut keep = |what: &str, i: usize| match objective(i) {
        Ok(v) => Some(v),
        Err(e) => {
            failures.push(format!("{what}: {e}"));
            None
        }
    };
    let row = Row {
        benchmark: spec.name.clone(),
        changed: Some(decisions.diff_from(&discovery.baseline).len()),
        stock: Some(stock),
        policy: keep("policy", policy_at),
        nothing: keep("nothing", nothing_at),
        best_step: best_at.and_then(|i| keep("best step", i)),
        failure: None,
        bad_input: false,
    };
    let recorded = [
        (&decisions, &measured[policy_at][0], row.policy),
        (&nothing, &measured[nothing_at][0], row.nothing),
    ];
    for (set, candidate, value) in recorded {
        let manual = super::Manual {
            discovery: &discovery,
            decisions: set,
            worker: session.worker,
            baseline: &measured[0][0],
            baseline_objective: stock,
            candidate,
            candidate_objective: value,
        };
        super::record_manual(store, spec, &bundle, &manual)?;
    }
    store.flush()?;
    Ok(Row {
        failure: (!failures.is_empty()).then(|| failures.join("; ")),
        ..row
    })
}

/// The decisions of the store's best step of `spec` (over the chains of every
/// experiment of the benchmark measured from these sources).
fn best_step(store: &Store, spec: &BenchmarkSpec, bundle: &Bundle) -> Result<Option<DecisionSet>> {
    let Some(stored) = store.config()? else {
        return Ok(None);
    };
    let mut best: Option<(f64, DecisionSet)> = None;
    for e in stored
        .experiments
        .iter()
        .filter(|e| e.benchmark == spec.name)
    {
        let Some(info) = store.experiment(&e.name)? else {
            continue;
        };
        if info.bundle != bundle.hash {
            continue;
        }
        let baseline = info.baseline.objective().unwrap_or(f64::NAN);
        for chain in 0..e.chains {
            let Some(state) = store.chain_view(&e.name, chain)? else {
                continue;
            };
            let Some(step) = store.best_step(&e.name, chain, &state, baseline)? else {
                continue;
            };
            let objective = step.objective.unwrap_or(f64::NAN);
            if best.as_ref().is_none_or(|(o, _)| objective < *o) {
                best = Some((objective, step.decisions));
            }
        }
    }
    Ok(best.map(|(_, set)| set))
}

/// The rows as a table, ratios against stock.
fn render(policy: &Policy, rows: &[Row]) -> String {
    let mut out = format!(
        "policy {}; {TIME_RATIO}s against the stock decisions (below 1 is faster)\n",
        policy.name()
    );
    let cells = rows.iter().map(|r| {
        vec![
            r.benchmark.clone(),
            r.changed.map_or("-".into(), |c| c.to_string()),
            format_ratio(r.ratio(r.policy).unwrap_or(f64::NAN)),
            format_ratio(r.ratio(r.nothing).unwrap_or(f64::NAN)),
            format_ratio(r.ratio(r.best_step).unwrap_or(f64::NAN)),
            r.failure.clone().unwrap_or_default(),
        ]
    });
    out.push_str(&table(
        &[
            "benchmark",
            "changed",
            "policy",
            "nothing",
            "best step",
            "failure",
        ],
        &[1, 2, 3, 4],
        cells,
    ));
    let ok: Vec<f64> = rows.iter().filter_map(|r| r.ratio(r.policy)).collect();
    if !ok.is_empty() {
        let mut sorted = ok.clone();
        sorted.sort_by(f64::total_cmp);
        let median = sorted[sorted.len() / 2];
        let worst = sorted.last().copied().unwrap_or(f64::NAN);
        let _ = writeln!(
            out,
            "{} of {} benchmarks measured; median {TIME_RATIO} {}, worst {}",
            ok.len(),
            rows.len(),
            format_ratio(median),
            format_ratio(worst)
        );
    }
    out
}

/// The rows as CSV: objectives and ratios against stock.
fn csv_text(rows: &[Row]) -> Result<String> {
    let mut w = csv::Writer::from_writer(Vec::new());
    w.write_record([
        "benchmark",
        "changed",
        "stock",
        "policy",
        "nothing",
        "best_step",
        "policy_ratio",
        "nothing_ratio",
        "best_step_ratio",
        "failure",
    ])?;
    let cell = |v: Option<f64>| v.map_or(String::new(), |v| v.to_string());
    for r in rows {
        w.write_record([
            r.benchmark.clone(),
            r.changed.map_or(String::new(), |c| c.to_string()),
            cell(r.stock),
            cell(r.policy),
            cell(r.nothing),
            cell(r.best_step),
            cell(r.ratio(r.policy)),
            cell(r.ratio(r.nothing)),
            cell(r.ratio(r.best_step)),
            escape_controls(r.failure.as_deref().unwrap_or("")).into_owned(),
        ])?;
    }
    String::from_utf8(w.into_inner().context("cannot write the table")?).context("CSV is text")
}
