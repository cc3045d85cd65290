//! `kiln rewards`: rewards assigned and written beside the store, summarized
//! as text or JSON.

use std::fmt::Write as _;
use std::io::Write;

use anyhow::Result;

use crate::cli::RewardsArgs;
use crate::error::Outcome;
use crate::rewards::{self, largest_effects, RewardOptions, Written};
use crate::store::{layout, Store};

/// Sites listed with the largest effects per experiment.
const LARGEST: usize = 5;

pub(super) fn run(args: &RewardsArgs, out: &mut dyn Write) -> Result<Outcome> {
    let store = Store::open_existing(&args.store)?;
    let dir = args
        .output
        .clone()
        .unwrap_or_else(|| layout::rewards_dir(&args.store));
    let options = RewardOptions {
        target: args.target,
        lambda: args.lambda,
    };
    let written = rewards::run(&store, args.experiment.as_deref(), &options, &dir)?;
    if args.json {
        serde_json::to_writer_pretty(&mut *out, &json(&written))?;
        writeln!(out)?;
    } else {
        write!(out, "{}", summary(&written))?;
    }
    Ok(Outcome::Success)
}

/// Per experiment: the fit, its held-out R², the largest effects and the best decisions.
fn summary(w: &Written) -> String {
    let mut out = String::new();
    for (a, path) in &w.assignments {
        let _ = writeln!(
            out,
            "experiment {}: {} rows fitted, {} held out; target {}, lambda {}",
            a.experiment,
            a.train_rows,
            a.test_rows,
            a.options.target.name(),
            a.options.lambda
        );
        let _ = writeln!(
            out,
            "  held-out R²: {}",
            a.r2.map_or("- (too few held-out rows)".to_string(), |r| format!(
                "{r:.3}"
            ))
        );
        for (site, spread) in largest_effects(a).into_iter().take(LARGEST) {
            let _ = writeln!(
                out,
                "  effect {spread:+.4}  {site} = {}",
                a.best
                    .get(&site)
                    .map(ToString::to_string)
                    .unwrap_or_default()
            );
        }
        let _ = writeln!(
            out,
            "  best decisions: {} ({} of {} differ from the baseline)",
            path.display(),
            a.best.diff_from(&a.baseline).len(),
            a.best.len()
        );
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

/// The same as JSON, every reward included.
fn json(w: &Written) -> serde_json::Value {
    let experiments: Vec<serde_json::Value> = w
        .assignments
        .iter()
        .map(|(a, path)| {
            let rewards: Vec<serde_json::Value> = a
                .rewards
                .iter()
                .map(|r| {
                    serde_json::json!({
                        "site": r.site.to_string(),
                        "value": r.value.to_string(),
                        "reward": r.reward,
                        "count": r.count,
                    })
                })
                .collect();
            serde_json::json!({
                "experiment": a.experiment,
                "benchmark": a.benchmark,
                "target": a.options.target.name(),
                "lambda": a.options.lambda,
                "train_rows": a.train_rows,
                "test_rows": a.test_rows,
                "held_out_r2": a.r2,
                "best_file": path,
                "differ_from_baseline": a.best.diff_from(&a.baseline).len(),
                "rewards": rewards,
            })
        })
        .collect();
    serde_json::json!({
        "experiments": experiments,
        "skipped": w.skipped,
        "table": w.table,
    })
}
