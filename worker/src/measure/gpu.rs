//! The GPU side of a measurement's timed runs: GPU time from the CUPTI trace ([`cupti`]) and
//! energy, power, clock, temperature and throttling from NVML ([`nvml`]).
//!
//! Each source is set up only when the plan wants one of its metrics, and then yields all of
//! them. NVML sampling is passive and also runs along with CUPTI tracing; CUPTI tracing adds work
//! to every kernel launch and so runs only when a CUPTI metric is wanted, which leaves an energy
//! objective unperturbed. Where a source is missing (no GPU, no driver, no injection library, a
//! program that never initialised CUDA) its metrics read `unsupported`, never 0, and the reason
//! is logged once per measurement.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use kiln_protocol::metric::{Metric, Metrics};

use crate::measure::cupti::{self, Tracer};
use crate::measure::nvml::{self, Sampler};

/// The GPU sources of one measurement.
pub struct GpuSide {
    /// The tracer, or why GPU time cannot be measured; `None`: not wanted.
    cupti: Option<Result<Tracer, String>>,
    /// The NVML indexes of the run's GPUs, or why they cannot be sampled; `None`: not wanted.
    nvml: Option<Result<Vec<u32>, String>>,
    energy_wanted: bool,
    warned: BTreeSet<&'static str>,
}

/// One timed run's GPU side, between [`GpuSide::begin`] and [`GpuSide::end`].
pub struct GpuRun {
    traced: Option<Result<(), String>>,
    sampler: Option<Result<Sampler, String>>,
}

impl GpuSide {
    /// The sources the `wanted` metrics need, for runs with environment `env`; traces go to
    /// `trace_dir`.
    pub fn new(wanted: &BTreeSet<Metric>, env: &[(String, String)], trace_dir: &Path) -> GpuSide {
        let wants_cupti = wanted.iter().any(|m| m.needs_cupti());
        let wants_nvml = wants_cupti || wanted.iter().any(|m| m.needs_nvml());
        GpuSide {
            cupti: wants_cupti.then(|| Tracer::new(trace_dir, env)),
            nvml: wants_nvml.then(|| nvml::visible(env)),
            energy_wanted: wanted.contains(&Metric::Energy) || wanted.contains(&Metric::PowerAvg),
            warned: BTreeSet::new(),
        }
    }

    /// Prepares a timed run: adds the tracing variables to its environment and starts sampling.
    pub fn begin(&mut self, env: &mut Vec<(String, String)>) -> GpuRun {
        GpuRun {
            traced: self.cupti.as_ref().map(|t| match t {
                Ok(tracer) => tracer.prepare(env),
                Err(e) => Err(e.clone()),
            }),
            sampler: self.nvml.as_ref().map(|d| match d {
                Ok(devices) => Sampler::start(devices.clone()),
                Err(e) => Err(e.clone()),
            }),
        }
    }

    /// Ends a timed run of length `wall`: its GPU metrics, each measured or unsupported.
    pub fn end(&mut self, run: GpuRun, wall: Duration) -> Metrics {
        let mut metrics = Metrics::new();
        if let Some(traced) = run.traced {
            let collected = traced.and_then(|()| match &self.cupti {
                Some(Ok(tracer)) => tracer.collect(),
                _ => Err("no tracer".into()),
            });
            match collected {
                Ok(m) => metrics.extend(m),
                Err(reason) => {
                    self.warn_once("cupti", || format!("GPU time is unsupported: {reason}"));
                    metrics.extend(cupti::unsupported());
                }
            }
        }
        match run.sampler {
            None => {}
            Some(Ok(sampler)) => {
                metrics.extend(sampler.finish());
                if self.energy_wanted && wall < nvml::MIN_ENERGY_WINDOW {
                    self.warn_once("short", || {
                        format!(
                            "a run took {:.0} ms: NVML's energy counter updates every 20-100 ms, \
                             so energy per run is coarse below {} s; make each run longer",
                            wall.as_secs_f64() * 1e3,
                            nvml::MIN_ENERGY_WINDOW.as_secs()
                        )
                    });
                }
            }
            Some(Err(reason)) => {
                self.warn_once("nvml", || {
                    format!("energy, power and GPU clocks are unsupported: {reason}")
                });
                metrics.extend(nvml::unsupported());
            }
        }
        metrics
    }

    fn warn_once(&mut self, key: &'static str, message: impl FnOnce() -> String) {
        if self.warned.insert(key) {
            tracing::warn!("{}", message());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_protocol::metric::MetricValue;

    #[test]
    fn nothing_gpu_wanted_nothing_done() {
        let wanted = BTreeSet::from([Metric::WallTime, Metric::Instructions]);
        let mut side = GpuSide::new(&wanted, &[], Path::new("/nonexistent"));
        let mut env = Vec::new();
        let run = side.begin(&mut env);
        assert!(env.is_empty());
        assert!(side.end(run, Duration::from_secs(1)).is_empty());
    }

    #[test]
    fn a_missing_source_gives_every_metric_unsupported() {
        let tmp = tempfile::tempdir().unwrap();
        let wanted = BTreeSet::from([Metric::GpuTime]);
        let mut side = GpuSide::new(&wanted, &[], tmp.path());
        // Force both sources missing, whatever this machine has.
        side.cupti = Some(Err("no driver".into()));
        side.nvml = Some(Err("no NVML".into()));
        let mut env = Vec::new();
        let run = side.begin(&mut env);
        assert!(env.is_empty(), "nothing injected when tracing cannot work");
        let m = side.end(run, Duration::from_millis(5));
        let gpu: Vec<_> = Metric::ALL
            .iter()
            .filter(|m| m.needs_cupti() || m.needs_nvml())
            .collect();
        assert_eq!(m.len(), gpu.len());
        assert!(m.values().all(|v| *v == MetricValue::Unsupported));
    }
}
