//! Where a measurement's time goes, in the manner of IML's breakdown: wall time, CPU time
//! (user + system), GPU busy time, and the CPU-side remainder (wall − GPU busy: the time no
//! kernel ran, which the host side — Python, launches, copies and synchronisation — accounts
//! for). `kiln-worker measure` and `kiln benchmark` print it from the same figures.

use std::collections::BTreeMap;

use crate::message::RunRecord;
use crate::metric::{Metric, MetricValue};
use crate::stats::Summary;

/// The medians of one measurement's time components, in ns.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TimeBreakdown {
    /// Median wall time.
    pub wall: f64,
    /// Median user time plus median system time (CPU time of the process tree).
    pub cpu: MetricValue,
    /// Median GPU busy time (the union of kernel intervals), or unsupported.
    pub gpu_busy: MetricValue,
}

impl TimeBreakdown {
    /// The breakdown of a measurement, from its summary and runs; `None` unless wall time was
    /// measured and GPU time was asked for (measured, or unsupported in its runs).
    pub fn of(summary: &BTreeMap<Metric, Summary>, runs: &[RunRecord]) -> Option<TimeBreakdown> {
        let median = |m: Metric| summary.get(&m).map(|s| s.median);
        let wall = median(Metric::WallTime)?;
        let gpu_busy = match median(Metric::GpuTime) {
            Some(v) => MetricValue::Measured(v),
            None if runs
                .iter()
                .filter(|r| !r.warmup)
                .any(|r| r.metrics.get(&Metric::GpuTime) == Some(&MetricValue::Unsupported)) =>
            {
                MetricValue::Unsupported
            }
            None => return None,
        };
        let cpu = match (median(Metric::UserTime), median(Metric::SystemTime)) {
            (Some(u), Some(s)) => MetricValue::Measured(u + s),
            _ => MetricValue::Unsupported,
        };
        Some(TimeBreakdown {
            wall,
            cpu,
            gpu_busy,
        })
    }

    /// Wall time the GPU was not busy: what the CPU side accounts for.
    pub fn cpu_side(&self) -> MetricValue {
        match self.gpu_busy {
            MetricValue::Measured(g) => MetricValue::Measured((self.wall - g).max(0.0)),
            MetricValue::Unsupported => MetricValue::Unsupported,
        }
    }

    /// The rows to print, each with its label.
    pub fn rows(&self) -> [(&'static str, MetricValue); 4] {
        [
            ("wall", MetricValue::Measured(self.wall)),
            ("cpu (user+system)", self.cpu),
            ("gpu busy", self.gpu_busy),
            ("cpu-side (wall-gpu)", self.cpu_side()),
        ]
    }

    /// A value as a share of the wall time, e.g. `41.2 %` (empty when unsupported).
    pub fn share(&self, value: MetricValue) -> String {
        match value {
            MetricValue::Measured(v) if self.wall > 0.0 => {
                format!("{:.1} %", v / self.wall * 100.0)
            }
            _ => String::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metric::Metrics;

    fn run(warmup: bool, metrics: &[(Metric, MetricValue)]) -> RunRecord {
        RunRecord {
            index: 0,
            warmup,
            exit_code: Some(0),
            signal: None,
            metrics: metrics.iter().copied().collect::<Metrics>(),
        }
    }

    fn summary(pairs: &[(Metric, f64)]) -> BTreeMap<Metric, Summary> {
        pairs
            .iter()
            .map(|(m, v)| (*m, Summary::of(&[*v]).unwrap()))
            .collect()
    }

    #[test]
    fn splits_wall_into_gpu_and_cpu_side() {
        let s = summary(&[
            (Metric::WallTime, 1000.0),
            (Metric::UserTime, 300.0),
            (Metric::SystemTime, 100.0),
            (Metric::GpuTime, 600.0),
        ]);
        let b = TimeBreakdown::of(&s, &[]).unwrap();
        assert_eq!(b.cpu, MetricValue::Measured(400.0));
        assert_eq!(b.cpu_side(), MetricValue::Measured(400.0));
        assert_eq!(b.share(b.gpu_busy), "60.0 %");
        assert_eq!(b.rows()[3].0, "cpu-side (wall-gpu)");
    }

    #[test]
    fn unsupported_gpu_time_stays_unsupported() {
        let s = summary(&[(Metric::WallTime, 1000.0)]);
        let runs = [run(false, &[(Metric::GpuTime, MetricValue::Unsupported)])];
        let b = TimeBreakdown::of(&s, &runs).unwrap();
        assert_eq!(b.gpu_busy, MetricValue::Unsupported);
        assert_eq!(b.cpu_side(), MetricValue::Unsupported);
        assert_eq!(b.cpu, MetricValue::Unsupported);
        assert_eq!(b.share(b.cpu_side()), "");
    }

    #[test]
    fn no_breakdown_without_gpu_time_asked_for() {
        let s = summary(&[(Metric::WallTime, 1000.0)]);
        assert_eq!(TimeBreakdown::of(&s, &[]), None);
        let warmup_only = [run(true, &[(Metric::GpuTime, MetricValue::Unsupported)])];
        assert_eq!(TimeBreakdown::of(&s, &warmup_only), None);
    }
}
