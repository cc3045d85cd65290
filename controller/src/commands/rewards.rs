//! `kiln rewards`: rewards assigned, the model's proposal measured against
//! the stock decisions and the campaign's best step, and the verdict written
//! beside the store, summarized as text or JSON.

use std::fmt::Write as _;
use std::io::Write;
use std::sync::Arc;

use anyhow::{anyhow, bail, Context, Result};

use kiln_protocol::bundle::Bundle;
use kiln_protocol::config::{BenchmarkSpec, WorkerSpec};
use kiln_protocol::CampaignConfig;

use crate::cli::RewardsArgs;
use crate::dispatch::bundle;
use crate::error::{BadInput, Outcome};
use crate::logging;
use crate::measure::{compare, pick_worker, pooled_objective, rounds, single_slot, Sets, Slot};
use crate::rewards::{
    self, judge, largest_effects, prejudge, Assignment, BestStep, Checked, RewardOptions,
    Verification, Written,
};
use crate::store::time_ratio;
use crate::store::{layout, ExperimentInfo, Store};
use crate::text::{format_ratio, listed, plural, TIME_RATIO};

/// Rewards listed per experiment, largest first.
const LARGEST: usize = 5;

/// Sites or values listed by name before "and N more".
const LISTED: usize = 8;

pub(super) fn run(args: &RewardsArgs, out: &mut dyn Write) -> Result<Outcome> {
    // `--config` and `--worker` are checked first, whether or not a proposal turns out to
    // need measuring: a config that does not parse, or a worker it lacks, is bad input.
    let mut given = args.config.as_deref().map(super::read_config).transpose()?;
    let store = Store::open_existing(&args.store)?;
    if let Some(name) = &args.worker {
        let stored;
        let config = match &given {
            Some(config) => Some(config),
            None => {
                stored = store.config()?;
                stored.as_ref()
            }
        };
        if let Some(config) = config {
            pick_worker(config, Some(name))?;
        }
    }
    let dir = args
        .output
        .clone()
        .unwrap_or_else(|| layout::rewards_dir(&args.store));
    let options = RewardOptions {
        target: args.target,
        lambda: args.lambda,
        min_count: args.min_count,
        folds: args.folds,
        min_r2: args.min_r2,
    };
    let (assignments, skipped) = rewards::assign_all(&store, args.experiment.as_deref(), &options)?;
    if assignments.is_empty() {
        bail!(
            "store {} holds no successfully measured steps to assign rewards from",
            store.dir().display()
        );
    }
    let verify = !args.no_verify;
    let mut judged = Vec::new();
    let mut config = None;
    for a in assignments {
        if let Some(verdict) = prejudge(&a, verify) {
            judged.push((a, None, verdict));
            continue;
        }
        if config.is_none() {
            config = Some(campaign_config(args, given.take(), &store)?);
        }
        let config = config.as_ref().expect("read above");
        let verification = super::runtime()?.block_on(measure(config, &store, &a, args))?;
        let verdict = judge(&verification);
        judged.push((a, Some(verification), verdict));
    }
    let written = rewards::write(&store, &dir, judged, skipped)?;
    if args.json {
        serde_json::to_writer_pretty(&mut *out, &json(&written))?;
        writeln!(out)?;
    } else {
        write!(out, "{}", summary(&written))?;
    }
    Ok(Outcome::Success)
}

/// The config to measure with: `--config` (`given`, read already), else the one the store
/// keeps; its objective must be the campaign's.
fn campaign_config(
    args: &RewardsArgs,
    given: Option<CampaignConfig>,
    store: &Store,
) -> Result<CampaignConfig> {
    let stored = store.config()?;
    let (Some(path), Some(config)) = (&args.config, given) else {
        return stored.ok_or_else(|| {
            BadInput(format!(
                "store {} keeps no campaign config to verify with: pass --config, or --no-verify",
                store.dir().display()
            ))
            .into()
        });
    };
    if let Some(stored) = stored.filter(|s| s.objective != config.objective) {
        return Err(BadInput(format!(
            "{} measures the {} of {}, the campaign of store {} the {} of {}: \
             a verification must use the campaign's objective",
            path.display(),
            config.objective.statistic.name(),
            config.objective.metric,
            store.dir().display(),
            stored.objective.statistic.name(),
            stored.objective.metric
        ))
        .into());
    }
    Ok(config)
}

/// Measures the stock decisions, the best step's and the proposal against
/// each other on one slot of a campaign worker: by default the one that
/// measured the best step.
async fn measure(
    config: &CampaignConfig,
    store: &Store,
    a: &Assignment,
    args: &RewardsArgs,
) -> Result<Verification> {
    let name = a.benchmark.as_deref().with_context(|| {
        format!(
            "the config does not say which benchmark experiment {} measures",
            a.experiment
        )
    })?;
    let spec = super::benchmark_spec(config, name)?;
    let info = store
        .experiment(&a.experiment)?
        .with_context(|| format!("experiment {} left the store", a.experiment))?;
    let best = a
        .best_step
        .as_ref()
        .context("no best step to verify against")?;
    let bundle = Arc::new(unchanged_sources(spec, &info, &a.experiment)?);
    let worker = single_slot(&verifying_worker(config, args, best)?);
    let rounds = rounds(config, info.runs);
    // Each distinct set once: stock (the reference) first.
    let mut sets = Sets::new(&a.stock);
    let (best_at, proposal_at) = (sets.place(&best.decisions), sets.place(&a.proposal));
    logging::note(format_args!(
        "{}: measuring the proposal against the stock decisions and {} on worker {} \
         ({} set(s), {rounds} round(s))",
        a.experiment,
        best.key,
        worker.name(),
        sets.0.len()
    ));
    let runs = info.runs.unwrap_or(config.runs);
    let (scratch, settings) = super::scratch_pool(config, None, spec.limits)?;
    let mut slot = Slot::start(&worker, settings, scratch)?;
    let measured = compare(
        &mut slot.session(),
        config,
        spec,
        &bundle,
        &sets.0,
        runs,
        rounds,
    )
    .await;
    drop(slot);
    let measured = measured?;
    let objective = |i: usize| pooled_objective(config, &measured[i]);
    let failed = |what: &str, e: String| {
        anyhow!(
            "{what} of experiment {} failed on worker {}: {e}",
            a.experiment,
            worker.name()
        )
    };
    Ok(Verification {
        worker: worker.name().to_string(),
        rounds,
        stock: objective(0).map_err(|e| failed("the stock decisions", e))?,
        best_step: objective(best_at).map_err(|e| failed(&format!("best step {}", best.key), e))?,
        proposal: objective(proposal_at),
    })
}

/// The benchmark's sources, packed, where they are still those the experiment measured.
fn unchanged_sources(
    spec: &BenchmarkSpec,
    info: &ExperimentInfo,
    experiment: &str,
) -> Result<Bundle> {
    let name = &spec.name;
    let bundle = bundle::pack(&spec.sources).with_context(|| {
        format!(
            "cannot read the sources of benchmark {name} to measure the proposal; where the \
             campaign's config named them relative to another folder, pass it with --config"
        )
    })?;
    if bundle.hash != info.bundle {
        bail!(
            "benchmark {name} ({}) changed since experiment {experiment} measured its steps, so \
             its proposal cannot be compared with them; pass the campaign's config with \
             --config, or --no-verify",
            spec.sources.display(),
        );
    }
    Ok(bundle)
}

/// The worker that measures the proposal: `--worker`'s, else the one that measured the best
/// step, else the config's first.
fn verifying_worker(
    config: &CampaignConfig,
    args: &RewardsArgs,
    best: &BestStep,
) -> Result<WorkerSpec> {
    match &args.worker {
        Some(name) => pick_worker(config, Some(name.as_str())),
        None => match config.workers.iter().find(|w| w.name() == best.worker) {
            Some(w) => Ok(w.clone()),
            None => pick_worker(config, None),
        },
    }
}

/// Per experiment: the model and how far to trust it, the measured ratios,
/// the verdict and where its files are.
fn summary(w: &Written) -> String {
    let mut out = String::new();
    for c in &w.experiments {
        experiment_summary(&mut out, c);
    }
    for name in &w.skipped {
        let _ = writeln!(
            out,
            "experiment {name}: skipped, no successfully measured steps"
        );
    }
    let _ = writeln!(out, "rewards table: {}", w.table.display());
    out
}

/// One experiment's part of the summary.
fn experiment_summary(out: &mut String, c: &Checked) {
    let a = &c.assignment;
    model_summary(out, a);
    unrewarded_summary(out, a);
    largest_summary(out, a);
    if let Some(best) = &a.best_step {
        let ratio = format_ratio(time_ratio(best.objective, a.baseline_objective));
        let _ = match best.beat_stock(a) {
            true => writeln!(
                out,
                "  best step measured: {}, {TIME_RATIO} {ratio}",
                best.key
            ),
            false => writeln!(
                out,
                "  no step beat stock (the lowest measured: {}, {TIME_RATIO} {ratio})",
                best.key
            ),
        };
    }
    if let Some(v) = &c.verification {
        verification_summary(out, v);
    }
    verdict_summary(out, c);
}

/// The model: its rows, target and penalty, and its cross-validated R².
fn model_summary(out: &mut String, a: &Assignment) {
    let o = &a.options;
    let _ = writeln!(
        out,
        "experiment {}: {} steps fitted; target {}, lambda {}; {} rewards fitted, relative \
         to the stock decisions",
        a.experiment,
        a.rows,
        o.target.name(),
        o.lambda,
        a.fitted()
    );
    let _ = writeln!(
        out,
        "  cross-validated R² ({} folds): {}",
        o.folds,
        a.cv_r2
            .map_or("- (too few steps, or none differ)".into(), |r| format!(
                "{r:.3}"
            ))
    );
}

/// The sites never varied, and the values seen too rarely, that got no reward.
fn unrewarded_summary(out: &mut String, a: &Assignment) {
    let never = a.never_varied();
    if !never.is_empty() {
        let _ = writeln!(
            out,
            "  no reward, never varied ({}): {}",
            never.len(),
            listed(never.iter(), LISTED)
        );
    }
    let rare: Vec<String> = a
        .too_rare()
        .map(|r| {
            format!(
                "{} = {} ({})",
                r.site,
                r.value,
                plural(r.count as usize, "step")
            )
        })
        .collect();
    if !rare.is_empty() {
        let _ = writeln!(
            out,
            "  no reward, seen in fewer than {} steps, or its stock value was ({}): {}",
            a.options.min_count,
            rare.len(),
            listed(rare.iter(), LISTED)
        );
    }
}

/// The largest rewards, each with its standard error.
fn largest_summary(out: &mut String, a: &Assignment) {
    let largest = largest_effects(a);
    if !largest.is_empty() {
        let _ = writeln!(
            out,
            "  largest rewards (benefit against stock; ± standard error):"
        );
    }
    for r in largest.into_iter().take(LARGEST) {
        let se = r
            .estimate
            .std_error()
            .map_or("-".into(), |s| format!("{s:.4}"));
        let _ = writeln!(
            out,
            "    {:+.4} ± {se}  {} = {}",
            r.estimate.reward().unwrap_or(0.0),
            r.site,
            r.value
        );
    }
}

/// The ratios measured between the proposal, the best step and stock.
fn verification_summary(out: &mut String, v: &Verification) {
    let _ = writeln!(
        out,
        "  measured on worker {} ({} round(s)), {TIME_RATIO}s (below 1 is faster):",
        v.worker, v.rounds
    );
    let proposal = v.proposal.as_ref().ok().copied();
    for (label, x, y) in [
        ("proposal / stock", proposal, v.stock),
        ("best step / stock", Some(v.best_step), v.stock),
        ("proposal / best step", proposal, v.best_step),
    ] {
        let ratio = format_ratio(x.map_or(f64::NAN, |x| time_ratio(x, y)));
        let _ = writeln!(out, "    {label:<21} {ratio}");
    }
}

/// The proposal's verdict and the files written for it.
fn verdict_summary(out: &mut String, c: &Checked) {
    let a = &c.assignment;
    let _ = writeln!(
        out,
        "  proposal ({} of {} decisions differ from stock): {}",
        a.proposal.diff_from(&a.stock).len(),
        a.proposal.len(),
        c.verdict.says()
    );
    match (&c.best_file, &c.best_step_file) {
        (Some(best), _) => {
            let _ = writeln!(out, "  best decisions: {}", best.display());
        }
        (None, Some(step)) => {
            let _ = writeln!(
                out,
                "  no best decision file written; the best measured step's decisions: {}",
                step.display()
            );
        }
        (None, None) => {
            let _ = writeln!(out, "  no best decision file written");
        }
    }
    let _ = writeln!(out, "  proposal file: {}", c.proposal_file.display());
}

/// The same as JSON, every reward included.
fn json(w: &Written) -> serde_json::Value {
    let experiments: Vec<serde_json::Value> = w.experiments.iter().map(experiment_json).collect();
    serde_json::json!({
        "experiments": experiments,
        "skipped": w.skipped,
        "table": w.table,
    })
}

/// The experiment's best measured step, for `--json`.
fn best_step_json(c: &Checked, b: &BestStep) -> serde_json::Value {
    let a = &c.assignment;
    serde_json::json!({
        "step": b.key.to_string(),
        "chain": b.key.chain,
        "index": b.key.step,
        "objective": b.objective,
        "time_ratio": time_ratio(b.objective, a.baseline_objective),
        "beat_stock": b.beat_stock(a),
        "worker": b.worker,
        "file": c.best_step_file,
    })
}

/// The proposal measured against stock and the best step, for `--json`.
fn verification_json(v: &Verification) -> serde_json::Value {
    let proposal = v.proposal.as_ref().ok().copied();
    serde_json::json!({
        "worker": v.worker,
        "rounds": v.rounds,
        "stock": v.stock,
        "best_step": v.best_step,
        "proposal": proposal,
        "proposal_failed": v.proposal.as_ref().err(),
        "proposal_to_stock": proposal.map(|p| time_ratio(p, v.stock)),
        "best_step_to_stock": time_ratio(v.best_step, v.stock),
        "proposal_to_best_step": proposal.map(|p| time_ratio(p, v.best_step)),
    })
}

fn experiment_json(c: &Checked) -> serde_json::Value {
    let a = &c.assignment;
    let rewards: Vec<serde_json::Value> = a
        .rewards
        .iter()
        .map(|r| {
            serde_json::json!({
                "site": r.site.to_string(),
                "value": r.value.to_string(),
                "status": r.estimate.name(),
                "reward": r.estimate.reward(),
                "std_error": r.estimate.std_error(),
                "count": r.count,
            })
        })
        .collect();
    let too_rare: Vec<serde_json::Value> = a
        .too_rare()
        .map(|r| serde_json::json!({"site": r.site.to_string(), "value": r.value.to_string(), "count": r.count}))
        .collect();
    let best_step = a.best_step.as_ref().map(|b| best_step_json(c, b));
    let verification = c.verification.as_ref().map(verification_json);
    serde_json::json!({
        "experiment": a.experiment,
        "benchmark": a.benchmark,
        "target": a.options.target.name(),
        "lambda": a.options.lambda,
        "rows": a.rows,
        "intercept": a.intercept,
        "folds": a.options.folds,
        "cv_r2": a.cv_r2,
        "min_r2": a.options.min_r2,
        "min_count": a.options.min_count,
        "trusted": a.distrust.is_none(),
        "distrust": a.distrust.map(|d| d.to_string()),
        "never_varied": a.never_varied().iter().map(ToString::to_string).collect::<Vec<_>>(),
        "too_rare": too_rare,
        "best_step": best_step,
        "verification": verification,
        "verdict": c.verdict.name(),
        "verdict_says": c.verdict.says(),
        "proposal_file": c.proposal_file,
        "best_file": c.best_file,
        "differ_from_stock": a.proposal.diff_from(&a.stock).len(),
        "rewards": rewards,
    })
}
