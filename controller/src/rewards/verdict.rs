//! What the measured check of a proposal says: better than stock and than
//! the campaign's best step, or why not.

use std::path::PathBuf;

use super::*;

/// The objectives of stock, the best step and the proposal, measured side by
/// side on one worker with the campaign's objective.
#[derive(Debug, Clone, PartialEq)]
pub struct Verification {
    /// The worker they were measured on.
    pub worker: String,
    /// Rounds measured, each set once per round.
    pub rounds: u32,
    /// The stock decisions' objective.
    pub stock: f64,
    /// The best step's decisions' objective, measured again.
    pub best_step: f64,
    /// The proposal's objective, or why it failed.
    pub proposal: std::result::Result<f64, String>,
}

/// What became of a proposal.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Measured no worse than the stock decisions and the best step: the best decisions.
    Best,
    /// Measured worse than the stock decisions.
    WorseThanStock,
    /// Measured worse than the best step.
    WorseThanBestStep,
    /// Failed when measured, for this reason.
    Failed(String),
    /// The model is not trusted, so its proposal was not measured.
    Untrusted(Distrust),
    /// Not measured, as asked (`--no-verify`).
    Unverified,
}

impl Verdict {
    /// The name in JSON.
    pub fn name(&self) -> &'static str {
        match self {
            Verdict::Best => "best",
            Verdict::WorseThanStock => "worse-than-stock",
            Verdict::WorseThanBestStep => "worse-than-best-step",
            Verdict::Failed(_) => "failed",
            Verdict::Untrusted(_) => "untrusted",
            Verdict::Unverified => "unverified",
        }
    }

    /// What it means, in a sentence.
    pub fn says(&self) -> String {
        match self {
            Verdict::Best => {
                "measured no worse than the stock decisions and the best step: the best decisions"
                    .into()
            }
            Verdict::WorseThanStock => {
                "measured worse than the stock decisions: not the best decisions".into()
            }
            Verdict::WorseThanBestStep => {
                "measured worse than the campaign's best step: not the best decisions".into()
            }
            Verdict::Failed(reason) => format!("failed when measured ({reason})"),
            Verdict::Untrusted(why) => format!("the model is not trustworthy: {why}"),
            Verdict::Unverified => "unverified (--no-verify): never measured".into(),
        }
    }
}

/// The verdict that needs no measurement: an untrusted model's, or an
/// unverified one's; `None` where the proposal is to be measured.
pub fn prejudge(a: &Assignment, verify: bool) -> Option<Verdict> {
    if !verify {
        return Some(Verdict::Unverified);
    }
    a.distrust.map(Verdict::Untrusted)
}

/// The verdict of a measured proposal: best only where it measured no worse
/// than either the stock decisions or the best step.
pub fn judge(v: &Verification) -> Verdict {
    match &v.proposal {
        Err(reason) => Verdict::Failed(reason.clone()),
        Ok(p) if *p > v.stock => Verdict::WorseThanStock,
        Ok(p) if *p > v.best_step => Verdict::WorseThanBestStep,
        Ok(_) => Verdict::Best,
    }
}

/// One experiment's rewards, the check of its proposal, and the files written.
#[derive(Debug)]
pub struct Checked {
    /// The rewards.
    pub assignment: Assignment,
    /// The measurements, where the proposal was measured.
    pub verification: Option<Verification>,
    /// What became of the proposal.
    pub verdict: Verdict,
    /// The proposal's decision file, labelled with its verdict.
    pub proposal_file: PathBuf,
    /// The best decision file: only with [`Verdict::Best`].
    pub best_file: Option<PathBuf>,
    /// The best measured step's decision file, to use where the proposal is not the best.
    pub best_step_file: Option<PathBuf>,
}
