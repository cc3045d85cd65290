//! The files a rewards run leaves: the rewards table, the proposal under
//! its verdict, and the best decision file only where the check allows it.

use std::io::Write;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use kiln_protocol::DecisionFile;

use crate::atomic::Staging;
use crate::store::time_ratio;
use crate::store::{layout, Store};
use crate::text::{escape_controls, format_ratio};

use super::*;

/// What `kiln rewards` wrote.
#[derive(Debug)]
pub struct Written {
    /// Per experiment: its rewards, verdict and files.
    pub experiments: Vec<Checked>,
    /// Experiments with no successfully measured step.
    pub skipped: Vec<String>,
    /// The rewards table (CSV).
    pub table: PathBuf,
}

/// Writes the `rewards` table (header and rows); returns the number of rows.
pub fn write_table<'a, W: Write>(
    assignments: impl IntoIterator<Item = &'a Assignment>,
    csv: &mut csv::Writer<W>,
) -> Result<u64> {
    csv.write_record(REWARD_COLUMNS)?;
    let mut rows = 0;
    let number = |x: Option<f64>| x.map(|x| x.to_string()).unwrap_or_default();
    for a in assignments {
        for r in &a.rewards {
            // Shown with control characters escaped, as every CSV kiln writes.
            csv.write_record([
                &*escape_controls(&a.experiment),
                &escape_controls(r.site.as_str()),
                &r.value.to_string(),
                r.estimate.name(),
                &number(r.estimate.reward()),
                &number(r.estimate.std_error()),
                &r.count.to_string(),
            ])?;
            rows += 1;
        }
    }
    Ok(rows)
}

/// Writes the rewards table and each experiment's files into `dir`: the
/// proposal (labelled with its verdict), the best decision file only where
/// the verdict is [`Verdict::Best`] (an older one is removed otherwise), and
/// where it is not, the best measured step's file unless the store has it.
/// Every file is put in place once all are written (see [`crate::atomic`]).
pub fn write(
    store: &Store,
    dir: &Path,
    judged: Vec<(Assignment, Option<Verification>, Verdict)>,
    skipped: Vec<String>,
) -> Result<Written> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut staging = Staging::default();
    let table = layout::rewards_table(dir);
    let mut csv = csv::Writer::from_writer(staging.create(&table)?);
    write_table(judged.iter().map(|(a, _, _)| a), &mut csv)?;
    csv.flush()
        .with_context(|| format!("cannot write {}", table.display()))?;
    drop(csv);
    let mut experiments = Vec::new();
    let mut stale = Vec::new();
    for (a, verification, verdict) in judged {
        experiments.push(write_files(
            store,
            dir,
            &mut staging,
            &mut stale,
            a,
            verification,
            verdict,
        )?);
    }
    staging.commit()?;
    for best in stale {
        match std::fs::remove_file(&best) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(e).with_context(|| format!("cannot remove {}", best.display()))
            }
            _ => {}
        }
    }
    Ok(Written {
        experiments,
        skipped,
        table,
    })
}

/// Stages one experiment's files ([`write`]); a best file this verdict must not keep goes
/// into `stale`.
fn write_files(
    store: &Store,
    dir: &Path,
    staging: &mut Staging,
    stale: &mut Vec<PathBuf>,
    a: Assignment,
    verification: Option<Verification>,
    verdict: Verdict,
) -> Result<Checked> {
    let proposal_file = layout::rewards_proposal_file(dir, &a.experiment);
    let label = format!(
        "the model's proposal for {}: {}",
        a.experiment,
        verdict.says()
    );
    write_labelled(
        staging,
        &proposal_file,
        &label,
        &a.decision_file(&a.proposal),
    )?;
    let best = layout::rewards_best_file(dir, &a.experiment);
    let (best_file, best_step_file) = if verdict == Verdict::Best {
        let label = format!(
            "the best decisions for {}, {}",
            a.experiment,
            verdict.says()
        );
        write_labelled(staging, &best, &label, &a.decision_file(&a.proposal))?;
        (Some(best), None)
    } else {
        // An earlier run's best file must not outlive this verdict.
        stale.push(best);
        (None, best_step_file(store, staging, dir, &a)?)
    };
    Ok(Checked {
        assignment: a,
        verification,
        verdict,
        proposal_file,
        best_file,
        best_step_file,
    })
}

/// The decision file of the best measured step: the store's best file of its
/// chain where that holds the step's decisions, else one written into `dir`.
pub(super) fn best_step_file(
    store: &Store,
    staging: &mut Staging,
    dir: &Path,
    a: &Assignment,
) -> Result<Option<PathBuf>> {
    // A step no better than stock is no best decisions to hand anyone: stock is.
    let Some(step) = a.best_step.as_ref().filter(|s| s.beat_stock(a)) else {
        return Ok(None);
    };
    let kept = layout::best_file(store.dir(), &a.experiment, step.key.chain);
    let same = std::fs::read_to_string(&kept)
        .ok()
        .and_then(|text| DecisionFile::parse(&text, &kept.display().to_string()).ok())
        .is_some_and(|f| f.set.completed_from(&a.stock) == step.decisions);
    if same {
        return Ok(Some(kept));
    }
    let path = layout::rewards_best_step_file(dir, &a.experiment);
    let label = format!(
        "the best step kiln measured in {}: {}, {} {}",
        a.experiment,
        step.key,
        crate::text::TIME_RATIO,
        format_ratio(time_ratio(step.objective, a.baseline_objective))
    );
    write_labelled(staging, &path, &label, &a.decision_file(&step.decisions))?;
    Ok(Some(path))
}

/// Writes a decision file under a comment that says what it is.
pub(super) fn write_labelled(
    staging: &mut Staging,
    path: &Path,
    label: &str,
    file: &DecisionFile,
) -> Result<()> {
    staging.write(path, format!("; {label}\n{}", file.to_text()))
}

/// Fitted sites by their reward's distance from stock, largest first.
pub fn largest_effects(a: &Assignment) -> Vec<&Reward> {
    let mut out: Vec<&Reward> = a
        .rewards
        .iter()
        .filter(|r| matches!(r.estimate, Estimate::Fitted { .. }))
        .collect();
    out.sort_by(|x, y| {
        let size = |r: &Reward| r.estimate.reward().unwrap_or(0.0).abs();
        size(y).total_cmp(&size(x))
    });
    out
}
