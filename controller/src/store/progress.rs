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

/// A chain's course: its steps per worker, and its figures every few steps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChainProgress {
    /// Steps each worker measured (a reused measurement counts for none).
    pub workers: BTreeMap<String, u64>,
    /// Decided steps between two points of `series`.
    pub stride: u32,
    /// The chain's figures after every `stride`th decided step, oldest first.
    pub series: Vec<ProgressPoint>,
}

/// A chain's figures after a decided step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProgressPoint {
    /// Steps decided.
    pub steps: u32,
    /// When the last of them was decided (Unix ms).
    pub at_ms: u64,
    /// The best objective so far (the start's until a step beats it).
    pub best: f64,
    /// Proposals accepted so far.
    pub accepted: u32,
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
            stride: 1,
            series: Vec::new(),
        }
    }
}

impl ChainProgress {
    /// Notes a decided step: measured by `worker` (`None`: its measurement
    /// was reused), leaving the chain at `point`.
    pub fn note(&mut self, worker: Option<&str>, point: ProgressPoint) {
        if let Some(worker) = worker {
            *self.workers.entry(worker.to_string()).or_default() += 1;
        }
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
}

/// The course of a chain stored before kiln kept it, rebuilt from its steps'
/// rows in step order. Its best is the lowest objective measured so far,
/// where a campaign pools a set's repeated measurements: close, not the same.
pub struct Replay {
    progress: ChainProgress,
    best: f64,
    accepted: u32,
    failures: BTreeMap<String, u32>,
}

impl Replay {
    /// A replay of a chain that started at objective `start`.
    pub fn new(start: f64) -> Replay {
        Replay {
            progress: ChainProgress::default(),
            best: start,
            accepted: 0,
            failures: BTreeMap::new(),
        }
    }

    /// Notes the chain's next step.
    pub fn push(&mut self, row: &StepSummary<'_>) {
        if let Some(o) = row.objective.filter(|o| *o < self.best) {
            self.best = o;
        }
        self.accepted += u32::from(row.decision.is_some_and(|d| d.accepted));
        if row.outcome != StepOutcome::Ok.name() {
            *self.failures.entry(row.outcome.to_string()).or_default() += 1;
        }
        let point = ProgressPoint {
            steps: row.step + 1,
            at_ms: row.decision.map_or(row.recorded_ms, |d| d.decided_ms),
            best: self.best,
            accepted: self.accepted,
            failures: self.failures.clone(),
            temperature: row.temperature,
        };
        let worker = row.cached_from.is_none().then_some(&*row.worker);
        self.progress.note(worker, point);
    }

    /// The course replayed.
    pub fn finish(self) -> ChainProgress {
        self.progress
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(steps: u32) -> ProgressPoint {
        ProgressPoint {
            steps,
            at_ms: u64::from(steps) * 1000,
            best: 1.0 / f64::from(steps),
            accepted: steps / 2,
            failures: BTreeMap::new(),
            temperature: 0.5,
        }
    }

    #[test]
    fn the_series_stays_bounded_and_evenly_spaced() {
        let mut p = ChainProgress::default();
        for steps in 1..=100_000 {
            p.note(Some(if steps % 3 == 0 { "b" } else { "a" }), point(steps));
            assert!(p.series.len() <= MAX_POINTS, "{} points", p.series.len());
        }
        assert_eq!(p.workers["a"] + p.workers["b"], 100_000);
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
        p.note(None, point(1));
        p.note(Some("w"), point(2));
        assert_eq!(p.workers, [("w".to_string(), 1)].into());
        assert_eq!(p.series.len(), 2);
    }
}
