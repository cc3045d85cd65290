//! A chain's course so far, kept in its state ([`super::ChainState::progress`])
//! and so written in the same atomic batch as each decided step: what
//! `kiln status` and the live page show of a campaign (steps per worker, the
//! best against steps and hours, throughput, failures by reason, acceptance
//! and temperature) without reading a single step, however many there are.
//!
//! The course is a downsampled series of at most [`MAX_POINTS`] points: a
//! point every `stride` decided steps, the stride doubling (and every other
//! point dropped) when the series is full. A week of a million steps keeps
//! the same few kilobytes per chain as an hour of a hundred.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use kiln_protocol::StepOutcome;

use super::summary::StepSummary;

/// Points a chain's series keeps at most.
pub const MAX_POINTS: usize = 128;

/// A chain's course: its steps per worker, its best step, and its figures every few steps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChainProgress {
    /// Steps each worker measured (a reused measurement counts for none).
    pub workers: BTreeMap<String, u64>,
    /// The step with the lowest objective measured: the chain's best, as
    /// every command means it (a best beats stock only below the baseline).
    #[serde(default)]
    pub lowest: Option<Lowest>,
    /// The steps that lowered `lowest`, oldest first: the best-so-far line's
    /// corners. Past [`MAX_POINTS`], every other one is dropped (the latest kept).
    #[serde(default)]
    pub improvements: Vec<u32>,
    /// Decided steps between two points of `series`.
    pub stride: u32,
    /// The chain's figures after every `stride`th decided step, oldest first.
    pub series: Vec<ProgressPoint>,
}

/// A chain's step with the lowest objective measured.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Lowest {
    /// The step.
    pub step: u32,
    /// Its objective.
    pub objective: f64,
}

/// A chain's figures after a decided step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProgressPoint {
    /// Steps decided.
    pub steps: u32,
    /// When the last of them was decided (Unix ms).
    pub at_ms: u64,
    /// The best objective so far: the lowest a step measured, or the
    /// baseline's until one measured below it (`None`: neither is known).
    pub best: Option<f64>,
    /// Proposals accepted so far.
    pub accepted: u32,
    /// Steps decided so far that could move the chain (what `accepted` is a share of).
    #[serde(default)]
    pub proposals: u32,
    /// Failed steps so far, by outcome.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub failures: BTreeMap<String, u32>,
    /// Temperature at the step.
    pub temperature: f64,
}

impl Default for ChainProgress {
    fn default() -> Self {
        ChainProgress {
            workers: BTreeMap::new(),
            lowest: None,
            improvements: Vec::new(),
            stride: 1,
            series: Vec::new(),
        }
    }
}

impl ChainProgress {
    /// Notes decided step `step`: measured by `worker` (`None`: its
    /// measurement was reused) as `objective` (`None`: it failed), leaving
    /// the chain at `point` (whose best this sets).
    pub fn note(
        &mut self,
        step: u32,
        worker: Option<&str>,
        objective: Option<f64>,
        baseline: f64,
        mut point: ProgressPoint,
    ) {
        if let Some(worker) = worker {
            *self.workers.entry(worker.to_string()).or_default() += 1;
        }
        if let Some(objective) = objective.filter(|o| self.lowest.is_none_or(|l| *o < l.objective))
        {
            self.lowest = Some(Lowest { step, objective });
            self.improvements.push(step);
            if self.improvements.len() > MAX_POINTS {
                let mut kept: Vec<u32> = self.improvements.iter().step_by(2).copied().collect();
                if kept.last() != Some(&step) {
                    kept.push(step);
                }
                self.improvements = kept;
            }
        }
        point.best = self.best(baseline);
        if !point.steps.is_multiple_of(self.stride) {
            return;
        }
        self.series.push(point);
        if self.series.len() > MAX_POINTS {
            self.stride *= 2;
            let stride = self.stride;
            self.series.retain(|p| p.steps.is_multiple_of(stride));
        }
    }

    /// The best so far against `baseline`: the lowest objective measured where
    /// it is below, else the baseline (`None` where neither is a number).
    pub fn best(&self, baseline: f64) -> Option<f64> {
        let lowest = self.lowest.map_or(f64::INFINITY, |l| l.objective);
        Some(lowest.min(baseline)).filter(|b| b.is_finite())
    }
}

/// The course of a chain stored before kiln kept it (or counted its
/// proposals), rebuilt from its steps' rows in step order.
pub struct Replay {
    progress: ChainProgress,
    baseline: f64,
    accepted: u32,
    proposals: u32,
    failures: BTreeMap<String, u32>,
}

impl Replay {
    /// A replay of a chain of an experiment whose baseline measured `baseline`.
    pub fn new(baseline: f64) -> Replay {
        Replay {
            progress: ChainProgress::default(),
            baseline,
            accepted: 0,
            proposals: 0,
            failures: BTreeMap::new(),
        }
    }

    /// Notes the chain's next step.
    pub fn push(&mut self, row: &StepSummary<'_>) {
        self.accepted += u32::from(row.decision.is_some_and(|d| d.accepted));
        self.proposals += u32::from(row.decision.is_some() && row.kind.can_move());
        if row.outcome != StepOutcome::Ok.name() {
            *self.failures.entry(row.outcome.to_string()).or_default() += 1;
        }
        let point = ProgressPoint {
            steps: row.step + 1,
            at_ms: row.decision.map_or(row.recorded_ms, |d| d.decided_ms),
            best: None,
            accepted: self.accepted,
            proposals: self.proposals,
            failures: self.failures.clone(),
            temperature: row.temperature,
        };
        let worker = row.cached_from.is_none().then_some(&*row.worker);
        self.progress
            .note(row.step, worker, row.objective, self.baseline, point);
    }

    /// The course replayed, and the proposals it counted.
    pub fn finish(self) -> (ChainProgress, u32) {
        (self.progress, self.proposals)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(steps: u32) -> ProgressPoint {
        ProgressPoint {
            steps,
            at_ms: u64::from(steps) * 1000,
            best: None,
            accepted: steps / 2,
            proposals: steps,
            failures: BTreeMap::new(),
            temperature: 0.5,
        }
    }

    #[test]
    fn the_series_stays_bounded_and_evenly_spaced() {
        let mut p = ChainProgress::default();
        for steps in 1..=100_000 {
            let worker = if steps % 3 == 0 { "b" } else { "a" };
            p.note(
                steps,
                Some(worker),
                Some(1.0 / f64::from(steps)),
                0.5,
                point(steps),
            );
            assert!(p.series.len() <= MAX_POINTS, "{} points", p.series.len());
        }
        assert_eq!(p.workers["a"] + p.workers["b"], 100_000);
        assert_eq!(p.lowest.unwrap().step, 100_000);
        // Every step improved: the corners are thinned, the latest kept.
        assert!(p.improvements.len() <= MAX_POINTS + 1);
        assert_eq!(p.improvements.last(), Some(&100_000));
        let last = p.series.last().unwrap();
        assert_eq!(last.best, Some(1.0 / f64::from(last.steps)));
        assert!(
            p.series.len() >= MAX_POINTS / 2,
            "{} points",
            p.series.len()
        );
        let gaps: Vec<u32> = p
            .series
            .windows(2)
            .map(|w| w[1].steps - w[0].steps)
            .collect();
        assert!(gaps.iter().all(|g| *g == p.stride), "{gaps:?}");
        assert_eq!(p.series[0].steps, p.stride);
    }

    #[test]
    fn a_reused_measurement_counts_for_no_worker() {
        let mut p = ChainProgress::default();
        p.note(0, None, Some(2.0), 1.5, point(1));
        p.note(1, Some("w"), None, 1.5, point(2));
        assert_eq!(p.workers, [("w".to_string(), 1)].into());
        assert_eq!(p.series.len(), 2);
        // No step beat the baseline: the best so far is the baseline.
        assert_eq!(
            p.lowest,
            Some(Lowest {
                step: 0,
                objective: 2.0
            })
        );
        assert_eq!(p.series[1].best, Some(1.5));
    }
}
