//! `kiln sites`: a benchmark's decision points with the stock decision of each.

use std::io::Write;
use std::sync::Arc;

use anyhow::{bail, Context, Result};

use kiln_protocol::bundle::Bundle;
use kiln_protocol::config::{BenchmarkKind, BenchmarkSpec};
use kiln_protocol::message::Discovery;
use kiln_protocol::{CampaignConfig, DecisionFile};

use crate::atomic;
use crate::cli::SitesArgs;
use crate::dispatch::bundle;
use crate::dispatch::pool::{Answer, Job, Pool, Work};
use crate::error::{Interrupted, Outcome};
use crate::logging;
use crate::store::kept;
use crate::text::table;

pub(super) fn run(args: &SitesArgs, out: &mut dyn Write) -> Result<Outcome> {
    let config = super::read_config(&args.config)?;
    let discovery = super::runtime()?.block_on(sites(&config, &args.benchmark, args.rediscover))?;
    if let Some(path) = &args.output {
        let file = DecisionFile {
            benchmark: Some(args.benchmark.clone()),
            set: discovery.baseline.clone(),
        };
        atomic::write(path, file.to_text())?;
        logging::note(format_args!(
            "stock decisions written to {}",
            path.display()
        ));
    }
    if args.json {
        serde_json::to_writer_pretty(&mut *out, &discovery)?;
        writeln!(out)?;
    } else {
        write!(out, "{}", sites_table(&discovery))?;
    }
    Ok(Outcome::Success)
}

/// The decision points with the stock value and domain of each and, where
/// discovery recorded them, the main site features (`--json` has them all);
/// a feature that could not be had reads `-`.
fn sites_table(discovery: &Discovery) -> String {
    let with_features = !discovery.features.is_empty();
    let rows = discovery.points.iter().map(|p| {
        let stock = discovery
            .baseline
            .get(&p.id)
            .map(ToString::to_string)
            .unwrap_or_default();
        let domain: Vec<_> = p.domain.iter().map(ToString::to_string).collect();
        let mut row = vec![p.id.to_string(), stock, domain.join(" ")];
        if with_features {
            let f = discovery.features.get(&p.id).cloned().unwrap_or_default();
            let cell = |v: Option<String>| v.unwrap_or_else(|| "-".into());
            row.extend(
                [
                    f.inline_cost.map(|v| v.to_string()),
                    f.inline_threshold.map(|v| v.to_string()),
                    f.caller_instructions.map(|v| v.to_string()),
                    f.callee_instructions.map(|v| v.to_string()),
                    f.loop_depth.map(|v| v.to_string()),
                    f.constant_arguments.map(|v| v.to_string()),
                    f.uninlined_calls.or(f.site_calls).map(|v| v.to_string()),
                ]
                .map(cell),
            );
        }
        row
    });
    let mut header = vec!["decision point", "stock", "domain"];
    let mut right = Vec::new();
    if with_features {
        header.extend(FEATURE_HEADER);
        right.extend(3..3 + FEATURE_HEADER.len());
    }
    let mut out = table(&header, &right, rows);
    out.push_str(&format!("{} decision points\n", discovery.points.len()));
    out.push_str(&fallbacks_text(discovery));
    out.push_str(&fixed_text(discovery));
    out
}

/// The sites left out of the search, as the compiler does not take one of
/// their decisions, with why.
fn fixed_text(discovery: &Discovery) -> String {
    if discovery.fixed.is_empty() {
        return String::new();
    }
    let mut out = format!(
        "{} site(s) left out: the compiler does not take one of their decisions\n",
        discovery.fixed.len()
    );
    for (site, why) in &discovery.fixed {
        out.push_str(&format!("  {site}: {why}\n"));
    }
    out
}

/// The units whose sites are the stock compiler's, since their compile with
/// every call inlined passed its limits: what discovery could not search.
fn fallbacks_text(discovery: &Discovery) -> String {
    if discovery.fallbacks.is_empty() {
        return String::new();
    }
    let mut out = format!(
        "{} unit(s) compiled with the stock decisions in discovery (every call inlined passed \
         its limits), so their sites are the stock compiler's:\n",
        discovery.fallbacks.len()
    );
    for f in &discovery.fallbacks {
        out.push_str(&format!("  {f}\n"));
    }
    out
}

/// The feature columns of the table: the inliner's cost and threshold, IR
/// instructions of caller and callee, loop depth, constant arguments, and how
/// often the call ran (in the build that inlines nothing, so a call the stock
/// build inlined has a count too; else as a call in the stock build).
const FEATURE_HEADER: [&str; 7] = [
    "cost",
    "threshold",
    "caller IR",
    "callee IR",
    "loops",
    "const args",
    "calls",
];

/// Discovers a benchmark's decision points on the first worker that answers.
async fn discover(
    config: &CampaignConfig,
    spec: &BenchmarkSpec,
    bundle: Arc<Bundle>,
) -> Result<Discovery> {
    let (_scratch, settings) = super::scratch_pool(config, None, config.limits_in_use())?;
    let mut pool: Pool<()> = Pool::start(&config.workers, settings);
    pool.submit(Job {
        tag: (),
        bundle,
        work: Work::Discover(Box::new(spec.clone())),
    });
    let interruption = crate::error::interruption();
    tokio::pin!(interruption);
    let done = loop {
        tokio::select! {
            done = pool.done.recv() => break done.context("worker pool stopped")?,
            signal = &mut interruption => {
                let why = format!("{} during discovery", signal.said());
                return Err(Interrupted(why, signal).into())
            }
            _ = tokio::time::sleep(std::time::Duration::from_secs(1)) => {
                if let Some(reasons) = pool.all_unfit() {
                    bail!("no worker can discover the decision points:\n{reasons}");
                }
            }
        }
    };
    match done.answer {
        Answer::Discovered(Ok(d)) => Ok(d),
        Answer::Discovered(Err(e)) => bail!("discovery failed on worker {}: {e}", done.worker),
        Answer::Step(_) => bail!("unexpected step result"),
    }
}

/// `kiln sites`: a benchmark's decision points, from the discovery kept
/// beside the campaign's store (unless `rediscover`) or discovered (and kept) now.
async fn sites(config: &CampaignConfig, benchmark: &str, rediscover: bool) -> Result<Discovery> {
    let spec = super::benchmark_spec(config, benchmark)?;
    let discovery = match &spec.kind {
        BenchmarkKind::Knobs { points } => Discovery::of_knobs(points),
        BenchmarkKind::LlvmInline { .. } => {
            let bundle = Arc::new(bundle::pack(&spec.sources)?);
            let kept = kept::load_discovery(&config.store, &bundle.hash, spec);
            match kept.filter(|_| !rediscover) {
                Some((kept, path)) => {
                    logging::note(format_args!(
                        "decision points of {} from {} (an earlier discovery; delete it to discover again)",
                        spec.name,
                        path.display()
                    ));
                    kept
                }
                None => {
                    let found = discover(config, spec, bundle.clone()).await?;
                    kept::save_discovery(&config.store, &bundle.hash, spec, &found)?;
                    found
                }
            }
        }
    };
    Ok(discovery)
}
