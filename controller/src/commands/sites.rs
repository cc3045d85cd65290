//! `kiln sites`: a benchmark's decision points with the stock decision of each.

use std::fmt::Write as _;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;

use anyhow::{bail, Context, Result};

use kiln_protocol::config::BenchmarkKind;
use kiln_protocol::message::Discovery;
use kiln_protocol::{CampaignConfig, DecisionFile};

use crate::cli::SitesArgs;
use crate::dispatch::bundle;
use crate::dispatch::pool::{Answer, Job, Pool, Work};
use crate::error::{Interrupted, Outcome};

pub(super) fn run(args: &SitesArgs, out: &mut dyn Write) -> Result<Outcome> {
    let config = super::read_config(&args.config)?;
    let text =
        super::runtime()?.block_on(sites(&config, &args.benchmark, args.output.as_deref()))?;
    write!(out, "{text}")?;
    Ok(Outcome::Success)
}

/// `kiln sites`: discovers a benchmark's decision points on the first worker that answers.
async fn sites(config: &CampaignConfig, benchmark: &str, output: Option<&Path>) -> Result<String> {
    let spec = super::benchmark_spec(config, benchmark)?;
    let discovery = match &spec.kind {
        BenchmarkKind::Knobs { points } => Discovery::of_knobs(points),
        BenchmarkKind::LlvmInline { .. } => {
            let bundle = Arc::new(bundle::pack(&spec.sources)?);
            let (_scratch, settings) = super::scratch_pool(config, None, config.limits_in_use())?;
            let mut pool: Pool<()> = Pool::start(&config.workers, settings);
            pool.submit(Job {
                tag: (),
                bundle,
                work: Work::Discover(Box::new(spec.clone())),
            });
            let done = tokio::select! {
                done = pool.done.recv() => done.context("worker pool stopped")?,
                why = crate::error::interruption() => {
                    return Err(Interrupted(format!("{why} during discovery")).into())
                }
            };
            match done.answer {
                Answer::Discovered(Ok(d)) => d,
                Answer::Discovered(Err(e)) => {
                    bail!("discovery failed on worker {}: {e}", done.worker)
                }
                Answer::Step(_) => bail!("unexpected step result"),
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
