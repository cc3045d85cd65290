//! Slot calibration: noise control across machines.
//!
//! With `(calibration (benchmark NAME) ...)` in the config, the pool measures that benchmark
//! (its default decisions, the campaign's run policy, wall time) on every slot when the slot
//! connects and again every `every` jobs on it. A slot's first figure is its reference for the
//! pool's whole life (reconnects included); a later figure whose drift |figure / reference − 1|
//! exceeds `max-drift` flags the slot, and with `take-out-of-service` the slot gets no jobs
//! until a re-check every [`RECHECK`] finds it within bounds again. A calibration that fails
//! (build or run error) flags the slot too, but never takes it out of service: that is a
//! problem of the calibration benchmark, not a sign that the slot drifted.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use kiln_protocol::bundle::Bundle;
use kiln_protocol::config::{BenchmarkKind, Calibration};
use kiln_protocol::{CampaignConfig, DecisionSet, Metric, StepId, StepOutcome, StepRequest};

use super::connection::{Connection, Lost};
use super::slot::SlotPlace;

/// How long a slot out of service waits before calibrating again.
pub const RECHECK: Duration = Duration::from_secs(30);

/// The calibration benchmark, ready to send to any slot.
#[derive(Debug, Clone)]
pub struct Calibrator {
    /// The config's calibration settings.
    pub settings: Calibration,
    /// The benchmark's files.
    pub bundle: Arc<Bundle>,
    /// The step to run (id, slot and CPUs are filled in per calibration).
    pub request: StepRequest,
}

impl Calibrator {
    /// The calibrator of a config, `None` when it configures no calibration.
    ///
    /// Knob benchmarks run with every knob at its default; llvm-inline benchmarks with an empty
    /// decision set, i.e. every site left to the benchmark's replay fallback.
    pub fn from_config(config: &CampaignConfig) -> Result<Option<Arc<Calibrator>>> {
        let Some(settings) = &config.calibration else {
            return Ok(None);
        };
        let benchmark = config
            .benchmark(&settings.benchmark)
            .expect("config checks the calibration benchmark")
            .clone();
        let bundle = super::bundle::pack(&benchmark.sources)
            .with_context(|| format!("cannot pack calibration benchmark {}", benchmark.name))?;
        let decisions = match &benchmark.kind {
            BenchmarkKind::Knobs { points } => {
                kiln_protocol::message::Discovery::of_knobs(points).baseline
            }
            BenchmarkKind::LlvmInline { .. } => DecisionSet::default(),
        };
        let request = StepRequest {
            id: StepId(0),
            slot: 0,
            cpus: Vec::new(),
            gpus: Vec::new(),
            bundle: bundle.hash,
            benchmark,
            decisions,
            runs: config.runs,
            objective: Metric::WallTime,
            expected_output: None,
            reuse_build: false,
            function_costs: false,
            race: None,
        };
        Ok(Some(Arc::new(Calibrator {
            settings: settings.clone(),
            bundle: Arc::new(bundle),
            request,
        })))
    }

    /// Whether a slot that has finished `jobs_since` jobs since its last calibration is due.
    pub fn due(&self, jobs_since: u64) -> bool {
        self.settings.every > 0 && jobs_since >= u64::from(self.settings.every)
    }

    /// Measures the calibration benchmark on one slot: the median wall time in ms, or why the
    /// measurement failed.
    pub async fn measure(
        &self,
        conn: &Connection,
        id: StepId,
        place: &SlotPlace,
    ) -> Result<Result<f64, String>, Lost> {
        conn.ensure_bundle(&self.bundle).await?;
        let mut request = self.request.clone();
        request.id = id;
        place.apply(&mut request);
        let m = conn.step(request).await?.measurement;
        if m.outcome != StepOutcome::Ok {
            return Ok(Err(format!("calibration {}", m.outcome)));
        }
        Ok(m.summary
            .get(&Metric::WallTime)
            .map(|s| s.median / 1e6)
            .ok_or_else(|| "calibration measured no wall time".to_string()))
    }
}

/// A slot's calibration figures and verdict.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SlotCalibration {
    /// The slot's first figure (ms): what later figures are compared with.
    pub reference_ms: Option<f64>,
    /// The latest figure (ms).
    pub last_ms: Option<f64>,
    /// `last / reference − 1` of the latest figure.
    pub drift: Option<f64>,
    /// Calibrations run (failed ones included).
    pub count: u32,
    /// Whether the latest calibration failed.
    pub failed: bool,
    /// Whether the latest calibration drifted beyond `max-drift`, or failed.
    pub flagged: bool,
    /// Why the slot is flagged.
    pub reason: Option<String>,
    /// When the slot was last flagged (Unix ms).
    pub flagged_ms: Option<u64>,
    /// Whether the slot gets no jobs (it drifted, with `take-out-of-service`).
    pub out_of_service: bool,
}

impl SlotCalibration {
    /// Takes in a calibration's outcome (`now_ms`: its time) under `settings`.
    pub fn record(&mut self, figure: Result<f64, String>, settings: &Calibration, now_ms: u64) {
        self.count += 1;
        self.failed = figure.is_err();
        self.reason = match figure {
            Err(reason) => Some(reason),
            Ok(ms) => {
                let reference = *self.reference_ms.get_or_insert(ms);
                let drift = ms / reference - 1.0;
                self.last_ms = Some(ms);
                self.drift = Some(drift);
                (drift.abs() > settings.max_drift).then(|| {
                    format!(
                        "drift {:+.1}% from {reference:.1} ms is beyond {:.1}%",
                        100.0 * drift,
                        100.0 * settings.max_drift
                    )
                })
            }
        };
        self.flagged = self.reason.is_some();
        self.out_of_service = self.flagged && !self.failed && settings.take_out_of_service;
        if self.flagged {
            self.flagged_ms = Some(now_ms);
        }
    }

    /// The figure for tables: `101.3`; `301.9 (+198.0%!)` when flagged (`, out` when out of
    /// service); `(failed!)` after a failed calibration; `-` before any figure.
    pub fn cell(&self) -> String {
        let figure = self
            .last_ms
            .map_or("-".to_string(), |ms| format!("{ms:.1}"));
        if self.failed {
            format!("{figure} (failed!)")
        } else if self.flagged {
            let out = if self.out_of_service { ", out" } else { "" };
            let drift = 100.0 * self.drift.unwrap_or(f64::NAN);
            format!("{figure} ({drift:+.1}%!{out})")
        } else {
            figure
        }
    }
}

/// A worker's calibration column: each slot's [`SlotCalibration::cell`], `/`-separated; `-`
/// when no slot has calibrated.
pub fn cells(slots: &[SlotCalibration]) -> String {
    if slots.iter().all(|s| s.count == 0) {
        return "-".into();
    }
    slots
        .iter()
        .map(SlotCalibration::cell)
        .collect::<Vec<_>>()
        .join(" / ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(take_out: bool) -> Calibration {
        Calibration {
            benchmark: "cal".into(),
            every: 3,
            max_drift: 0.1,
            take_out_of_service: take_out,
        }
    }

    #[test]
    fn first_figure_is_the_reference_and_drift_flags() {
        let mut s = SlotCalibration::default();
        s.record(Ok(100.0), &settings(true), 1);
        assert_eq!(s.reference_ms, Some(100.0));
        assert!(!s.flagged);
        assert_eq!(s.cell(), "100.0");
        s.record(Ok(108.0), &settings(true), 2);
        assert!(!s.flagged, "within 10 %");
        s.record(Ok(130.0), &settings(true), 3);
        assert!(s.flagged && s.out_of_service);
        assert_eq!(s.flagged_ms, Some(3));
        assert_eq!(s.reference_ms, Some(100.0), "the reference stays");
        assert_eq!(s.cell(), "130.0 (+30.0%!, out)");
        s.record(Ok(95.0), &settings(true), 4);
        assert!(!s.flagged && !s.out_of_service, "back within bounds");
        assert_eq!(s.flagged_ms, Some(3), "when it was last flagged");
    }

    #[test]
    fn flagged_without_taking_out_of_service_and_failures() {
        let mut s = SlotCalibration::default();
        s.record(Ok(100.0), &settings(false), 1);
        s.record(Ok(50.0), &settings(false), 2);
        assert!(s.flagged && !s.out_of_service);
        assert_eq!(s.cell(), "50.0 (-50.0%!)");
        s.record(Err("calibration build-failed".into()), &settings(true), 3);
        assert!(
            s.flagged && !s.out_of_service,
            "a failure never takes it out"
        );
        assert_eq!(s.cell(), "50.0 (failed!)");
        assert_eq!(
            cells(&[s.clone(), SlotCalibration::default()]),
            "50.0 (failed!) / -"
        );
        assert_eq!(cells(&[SlotCalibration::default()]), "-");
    }
}
