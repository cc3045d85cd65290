//! `kiln sites`: a benchmark's decision points with the stock decision of each.

use std::fmt::Write as _;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context, Result};

use kiln_protocol::config::{BenchmarkKind, BenchmarkSpec};
use kiln_protocol::message::{Bundle, Discovery};
use kiln_protocol::{CampaignConfig, DecisionFile};

use crate::cli::SitesArgs;
use crate::dispatch::bundle;
use crate::dispatch::pool::{Answer, Job, Pool, Work};
use crate::error::{Interrupted, Outcome};
use crate::logging;
use crate::store::kept;

pub(super) fn run(args: &SitesArgs, out: &mut dyn Write) -> Result<Outcome> {
    let config = super::read_config(&args.config)?;
    let text =
        super::runtime()?.block_on(sites(&config, &args.benchmark, args.output.as_deref()))?;
    write!(out, "{text}")?;
    Ok(Outcome::Success)
}

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
/// beside the campaign's store or discovered (and kept) now.
async fn sites(config: &CampaignConfig, benchmark: &str, output: Option<&Path>) -> Result<String> {
    let spec = super::benchmark_spec(config, benchmark)?;
    let discovery = match &spec.kind {
        BenchmarkKind::Knobs { points } => Discovery::of_knobs(points),
        BenchmarkKind::LlvmInline { .. } => {
            let bundle = Arc::new(bundle::pack(&spec.sources)?);
            match kept::load_discovery(&config.store, &bundle.hash, spec) {
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
    let mut out = String::new();
    let _ = writeln!(out, "{:<60} {:>10}  domain", "decision point", "stock");
    for p in &discovery.points {
        let stock = discovery
            .baseline
            .get(&p.id)
            .map(ToString::to_string)
            .unwrap_or_default();
        let domain: Vec<_> = p.domain.iter().map(ToString::to_string).collect();
        let _ = writeln!(out, "{:<60} {:>10}  {}", p.id, stock, domain.join(" "));
    }
    let _ = writeln!(out, "{} decision points", discovery.points.len());
    if let Some(path) = output {
        let file = DecisionFile {
            benchmark: Some(spec.name.clone()),
            set: discovery.baseline.clone(),
        };
        std::fs::write(path, file.to_text())
            .with_context(|| format!("cannot write {}", path.display()))?;
        let _ = writeln!(out, "stock decisions written to {}", path.display());
    }
    Ok(out)
}
