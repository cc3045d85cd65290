//! `kiln benchmark`: one decision file measured by hand against the baseline.
//!
//! The baseline (the stock decisions, or the knobs' defaults) and the decision
//! file are measured one after the other on the same worker slot, so that the
//! comparison never mixes machines. [`compare`] does that for any number of
//! decision sets, interleaved in rounds; `kiln rewards` measures its proposal
//! with it. With `--store` the candidate is recorded
//! like any step, in experiment `manual:<benchmark>` chain 0, appended; the
//! baseline's samples are added to that experiment's baseline reference, and
//! the step's `compared_with` holds the baseline objective measured alongside
//! it.

use std::fmt::Write as _;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context, Result};

use kiln_protocol::breakdown::TimeBreakdown;
use kiln_protocol::bundle::Bundle;
use kiln_protocol::config::{BenchmarkSpec, RunPolicy};
use kiln_protocol::message::{self, Discovery};
use kiln_protocol::{CampaignConfig, DecisionFile, DecisionSet, Metric, MetricValue, StepOutcome};

use crate::cli::BenchmarkArgs;
use crate::dispatch::bundle;
use crate::error::{BadInput, Outcome};
use crate::measure::{compare, pick_worker, single_slot, Measurement, Session, Slot};
use crate::plan::step::objective_of;
use crate::store::time_ratio;
use crate::store::{now_ms, Store};
use crate::text::{
    escape_controls, format_measure, format_ratio, format_summary, TIME_RATIO, UNSUPPORTED,
};

pub(super) fn run(args: &BenchmarkArgs, out: &mut dyn Write) -> Result<Outcome> {
    let config = super::read_config(&args.config)?;
    let report = super::runtime()?.block_on(benchmark(&config, args))?;
    if args.json {
        serde_json::to_writer_pretty(&mut *out, &report.json)?;
        writeln!(out)?;
    } else {
        write!(out, "{}", report.text)?;
    }
    Ok(if report.ok {
        Outcome::Success
    } else {
        Outcome::Failure
    })
}

/// What `kiln benchmark` found.
struct BenchmarkReport {
    /// The summary table.
    text: String,
    /// The same for scripts, both results in full.
    json: serde_json::Value,
    /// Whether the candidate measured successfully.
    ok: bool,
}

/// Measures the baseline and the decision file on one worker slot.
async fn benchmark(config: &CampaignConfig, args: &BenchmarkArgs) -> Result<BenchmarkReport> {
    let spec = super::benchmark_spec(config, &args.benchmark)?;
    let decisions = args.decisions.as_path();
    let text = read_decision_file(decisions, &spec.name)?;
    let worker = single_slot(&pick_worker(config, args.worker.as_deref())?);
    let runs = run_policy(config.runs, args.runs)?;

    let bundle = Arc::new(bundle::pack(&spec.sources)?);
    let (scratch, settings) = super::scratch_pool(config, None, spec.limits)?;
    let mut slot = Slot::start(&worker, settings, scratch)?;
    let file = (text.as_str(), decisions);
    let measured = measure(
        slot.session(),
        config,
        spec,
        &bundle,
        file,
        runs,
        args.store.as_deref(),
    )
    .await;
    drop(slot);
    let (measured, store) = measured?;

    let mut out = summary_table(config, spec, worker.name(), decisions, &measured);
    let ok = measured.candidate.result.measurement.outcome == StepOutcome::Ok;
    let mut recorded = None;
    if let Some(store) = &store {
        let key = super::record_manual(
            store,
            spec,
            &bundle,
            &super::Manual {
                discovery: &measured.discovery,
                decisions: &measured.decisions,
                worker: &measured.worker,
                baseline: &measured.baseline,
                baseline_objective: measured.baseline_objective,
                candidate: &measured.candidate,
                candidate_objective: measured.candidate_objective,
            },
        )?;
        let _ = writeln!(out, "recorded as {key} in {}", store.dir().display());
        recorded = Some(key.to_string());
    }
    let json = report_json(spec, decisions, &measured, recorded);
    Ok(BenchmarkReport {
        text: out,
        json,
        ok,
    })
}

/// The text of the decision file `path`, its syntax and benchmark (`benchmark`) checked before
/// anything is packed, started or built; its ids are checked once the sites are known (kept,
/// or discovered first).
fn read_decision_file(path: &Path, benchmark: &str) -> Result<String> {
    let text = DecisionFile::read_text(path).map_err(|e| BadInput(e.to_string()))?;
    let file = DecisionFile::parse(&text, &path.display().to_string())
        .map_err(|e| BadInput(e.to_string()))?;
    if let Some(other) = file.benchmark.as_deref().filter(|b| *b != benchmark) {
        return Err(BadInput(format!(
            "decision file {} was written for benchmark '{other}', not '{benchmark}'",
            path.display(),
        ))
        .into());
    }
    Ok(text)
}

/// The result for scripts (`--json`): both measurements in full.
fn report_json(
    spec: &BenchmarkSpec,
    decisions: &Path,
    m: &Measured,
    recorded: Option<String>,
) -> serde_json::Value {
    let metric = m.objective_metric;
    serde_json::json!({
        "benchmark": spec.name,
        "worker": m.worker,
        "decisions": decisions,
        "objective": metric.name(),
        "unit": metric.unit(),
        "baseline_objective": m.baseline_objective,
        "candidate_objective": m.candidate_objective,
        "time_ratio": m.candidate_objective.map(|c| time_ratio(c, m.baseline_objective)),
        "verdict": verdict(
            metric,
            m.baseline.result.measurement.summary.get(&metric),
            m.candidate.result.measurement.summary.get(&metric),
        ),
        "recorded_as": recorded,
        "baseline": m.baseline.result,
        "candidate": m.candidate.result,
    })
}

fn run_policy(mut policy: RunPolicy, runs: Option<u32>) -> Result<RunPolicy> {
    if let Some(n) = runs {
        if n == 0 {
            return Err(BadInput("--runs must be at least 1".into()).into());
        }
        policy.min = n;
        policy.max = n;
    }
    Ok(policy)
}

fn open_store(dir: &Path, config: &CampaignConfig) -> Result<Store> {
    let store = Store::open(dir)?;
    store.claim()?;
    match store.config()? {
        // A fresh store: remember how its steps were measured.
        None => store.put_config(&config.to_text(), now_ms())?,
        Some(stored) if stored.objective != config.objective => bail!(
            "store {} measures the {} of {}, this config the {} of {}; \
             objectives in one store must compare",
            dir.display(),
            stored.objective.statistic.name(),
            stored.objective.metric,
            config.objective.statistic.name(),
            config.objective.metric
        ),
        Some(_) => {}
    }
    Ok(store)
}

/// Everything measured by one `kiln benchmark`.
struct Measured {
    discovery: Discovery,
    decisions: DecisionSet,
    objective_metric: Metric,
    worker: String,
    baseline: Measurement,
    baseline_objective: f64,
    candidate: Measurement,
    candidate_objective: Option<f64>,
}

async fn measure(
    mut session: Session<'_>,
    config: &CampaignConfig,
    spec: &BenchmarkSpec,
    bundle: &Arc<Bundle>,
    (text, path): (&str, &Path),
    runs: RunPolicy,
    store: Option<&Path>,
) -> Result<(Measured, Option<Store>)> {
    // The discovery kept beside `--store` or the config's store, else one
    // made now and kept beside `--store` (else the config's store).
    let kept_in = store.unwrap_or(&config.store);
    let discovery = super::discovery(kept_in, &config.store, spec, bundle, &mut session).await?;
    // Before any step is built. The located error names file:line:col of an
    // unknown site (with the closest known ids) or a bad value.
    let file = DecisionFile::parse_checked(text, &path.display().to_string(), &discovery.points)
        .map_err(|e| BadInput(e.to_string()))?;
    let decisions = file.set.completed_from(&discovery.baseline);
    // Opened once the file is known good (a refused file leaves no store
    // behind), and before measuring, so that a store held by a running
    // campaign is refused before minutes are spent.
    let store = store.map(|dir| open_store(dir, config)).transpose()?;
    let mut measured = compare(
        &mut session,
        config,
        spec,
        bundle,
        &[&discovery.baseline, &decisions],
        runs,
        1,
    )
    .await?
    .into_iter()
    .map(|mut rounds| rounds.remove(0));
    let (baseline, candidate) = (
        measured.next().expect("two sets"),
        measured.next().expect("two sets"),
    );
    let baseline_objective = objective_of(config, &baseline.result).with_context(|| {
        format!(
            "worker {} measured no {} for the baseline of benchmark {}",
            session.worker, config.objective.metric, spec.name
        )
    })?;
    let measured = Measured {
        baseline_objective,
        worker: session.worker.to_string(),
        candidate_objective: objective_of(config, &candidate.result),
        objective_metric: config.objective.metric,
        discovery,
        decisions,
        baseline,
        candidate,
    };
    Ok((measured, store))
}

/// Each metric either measured, baseline beside candidate, and those neither could measure.
fn metrics_table(
    base: &kiln_protocol::Measurement,
    cand: &kiln_protocol::Measurement,
    worker: &str,
) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<20} {:>36}  {:>36}  {:>7}",
        "metric", "baseline median [95% CI]", "candidate median [95% CI]", "ratio"
    );
    let mut unsupported = Vec::new();
    for metric in Metric::ALL {
        let (b, c) = (cell(base, *metric), cell(cand, *metric));
        if b.is_none() && c.is_none() {
            continue;
        }
        if b.as_deref() == Some(UNSUPPORTED) && c.as_deref() == Some(UNSUPPORTED) {
            unsupported.push(metric.name());
            continue;
        }
        let ratio = match (base.summary.get(metric), cand.summary.get(metric)) {
            (Some(b), Some(c)) if b.median != 0.0 => format!("{:.3}", c.median / b.median),
            _ => "-".into(),
        };
        let _ = writeln!(
            out,
            "{:<20} {:>36}  {:>36}  {:>7}",
            metric.name(),
            b.unwrap_or_else(|| "-".into()),
            c.unwrap_or_else(|| "-".into()),
            ratio
        );
    }
    if !unsupported.is_empty() {
        let _ = writeln!(
            out,
            "not measurable on worker {worker}: {}",
            unsupported.join(", ")
        );
    }
    out
}

fn summary_table(
    config: &CampaignConfig,
    spec: &BenchmarkSpec,
    worker: &str,
    path: &Path,
    m: &Measured,
) -> String {
    let mut out = String::new();
    let changed = m.decisions.diff_from(&m.discovery.baseline).len();
    let _ = writeln!(
        out,
        "benchmark {} on worker {worker}; objective: {} of {} ({})",
        spec.name,
        config.objective.statistic.name(),
        m.objective_metric,
        m.objective_metric.unit()
    );
    let _ = writeln!(
        out,
        "decision file {}: {changed} of {} decisions differ from the baseline\n",
        path.display(),
        m.decisions.len()
    );
    let base = &m.baseline.result.measurement;
    let cand = &m.candidate.result.measurement;
    out.push_str(&metrics_table(base, cand, worker));
    out.push_str(&breakdown_table(base, cand));
    let _ = writeln!(out);
    let b = m.baseline_objective;
    match m.candidate_objective {
        Some(c) => {
            let metric = &m.objective_metric;
            let verdict = verdict(*metric, base.summary.get(metric), cand.summary.get(metric));
            let _ = writeln!(
                out,
                "{TIME_RATIO} {} (candidate {} / baseline {}; below 1 is faster); {verdict}",
                format_ratio(time_ratio(c, b)),
                format_measure(c, metric.unit()),
                format_measure(b, metric.unit())
            );
        }
        None => {
            let failed = cand.outcome.to_string();
            let _ = writeln!(out, "candidate failed: {}", escape_controls(&failed));
        }
    }
    out
}

/// Fewer runs than this and the median's 95 % interval (order statistics) is
/// the whole range of the samples: it cannot show two results apart.
const RUNS_TO_COMPARE: usize = 6;

/// What the measurements say of candidate against baseline, with the method and
/// the numbers of runs it rests on; no claim of a difference without enough runs.
fn verdict(
    metric: Metric,
    base: Option<&kiln_protocol::Summary>,
    cand: Option<&kiln_protocol::Summary>,
) -> String {
    let (Some(b), Some(c)) = (base, cand) else {
        return "no interval to compare".into();
    };
    // Callgrind counts exactly: one run of each says all there is.
    if metric == Metric::Instructions {
        return match c.median.total_cmp(&b.median) {
            std::cmp::Ordering::Equal => "the same count (callgrind counts exactly)".into(),
            std::cmp::Ordering::Less => "fewer instructions (callgrind counts exactly)".into(),
            std::cmp::Ordering::Greater => "more instructions (callgrind counts exactly)".into(),
        };
    }
    let n = format!("n = {} and {}", b.n, c.n);
    if b.n < RUNS_TO_COMPARE || c.n < RUNS_TO_COMPARE {
        return format!(
            "too few runs to tell them apart ({n}; {RUNS_TO_COMPARE} or more each, --runs {RUNS_TO_COMPARE})"
        );
    }
    let method = format!("the medians' 95% intervals (order statistics, {n})");
    if b.ci_low <= c.ci_high && c.ci_low <= b.ci_high {
        format!("within noise: {method} overlap")
    } else if c.median < b.median {
        format!("faster: {method} are apart")
    } else {
        format!("slower: {method} are apart")
    }
}

/// Where the time of baseline and candidate went (wall, CPU, GPU busy, CPU side), when GPU
/// time was measured or asked for; empty otherwise.
fn breakdown_table(base: &message::Measurement, cand: &message::Measurement) -> String {
    let of = |m: &message::Measurement| TimeBreakdown::of(&m.summary, &m.runs);
    let (b, c) = (of(base), of(cand));
    if b.is_none() && c.is_none() {
        return String::new();
    }
    let mut out = String::new();
    let _ = writeln!(
        out,
        "\n{:<20} {:>22}  {:>22}",
        "time (medians)", "baseline", "candidate"
    );
    let cell = |t: &Option<TimeBreakdown>, row: usize| match t {
        None => "-".to_string(),
        Some(t) => match t.rows()[row].1 {
            MetricValue::Measured(v) => {
                format!(
                    "{} {:>7}",
                    format_measure(v, "ns"),
                    t.share(MetricValue::Measured(v))
                )
            }
            MetricValue::Unsupported => UNSUPPORTED.to_string(),
        },
    };
    let labels = b.or(c).expect("one is some").rows().map(|(label, _)| label);
    for (row, label) in labels.iter().enumerate() {
        let _ = writeln!(
            out,
            "{label:<20} {:>22}  {:>22}",
            cell(&b, row),
            cell(&c, row)
        );
    }
    out
}

/// A metric's median and interval in a measurement, "unsupported" where the worker
/// cannot measure it, `None` where it was not measured at all.
fn cell(measured: &message::Measurement, metric: Metric) -> Option<String> {
    if let Some(s) = measured.summary.get(&metric) {
        return Some(format_summary(s, metric.unit()));
    }
    measured
        .runs
        .iter()
        .any(|r| r.metrics.get(&metric) == Some(&MetricValue::Unsupported))
        .then(|| UNSUPPORTED.to_string())
}

/// Appends the candidate to experiment `manual:<benchmark>`, chain 0.
#[cfg(test)]
mod tests {
    use super::*;
    use kiln_protocol::message::RunRecord;
    use kiln_protocol::Summary;

    fn result(metrics: &[(Metric, MetricValue)]) -> message::Measurement {
        let runs = vec![RunRecord {
            index: 0,
            warmup: false,
            exit_code: Some(0),
            signal: None,
            metrics: metrics.iter().copied().collect(),
        }];
        let summary = metrics
            .iter()
            .filter_map(|(m, v)| Some((*m, Summary::of(&[v.measured()?])?)))
            .collect();
        message::Measurement {
            runs,
            summary,
            target_met: true,
            ..message::Measurement::empty(StepOutcome::Ok)
        }
    }

    #[test]
    fn breakdown_shows_only_when_gpu_time_was_asked_for() {
        let m = MetricValue::Measured;
        let cpu_only = result(&[(Metric::WallTime, m(1e9)), (Metric::UserTime, m(9e8))]);
        assert_eq!(breakdown_table(&cpu_only, &cpu_only), "");

        let base = result(&[
            (Metric::WallTime, m(2e9)),
            (Metric::UserTime, m(5e8)),
            (Metric::SystemTime, m(5e8)),
            (Metric::GpuTime, m(1.5e9)),
        ]);
        let cand = result(&[
            (Metric::WallTime, m(1e9)),
            (Metric::GpuTime, MetricValue::Unsupported),
        ]);
        let text = breakdown_table(&base, &cand);
        let row = |label: &str| {
            text.lines()
                .find(|l| l.starts_with(label))
                .unwrap_or_else(|| panic!("no {label} in {text}"))
                .to_string()
        };
        assert!(row("gpu busy").contains("1.500 s"), "{text}");
        assert!(row("gpu busy").contains("75.0 %"), "{text}");
        assert!(row("gpu busy").ends_with(UNSUPPORTED), "{text}");
        assert!(row("cpu-side").contains("500.0 ms"), "{text}");
    }
}
