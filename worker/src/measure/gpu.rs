//! The GPU side of a measurement's timed runs: GPU time from the CUPTI trace ([`cupti`]) and
//! energy, power, clock, temperature and throttling from NVML ([`nvml`]).
//!
//! Each source is set up only when the plan wants one of its metrics, and then yields all of
//! them. NVML sampling is passive and also runs along with CUPTI tracing; CUPTI tracing adds work
//! to every kernel launch and so runs only when a CUPTI metric is wanted, which leaves an energy
//! objective unperturbed. Where a source is missing (no GPU, no driver, no injection library, a
//! program that never initialised CUDA) its metrics read `unsupported`, never 0, and the reason
//! is logged once per measurement.
//!
//! A program with a CUPTI client of its own (`torch.profiler`) clashes with the tracing: CUPTI
//! serves one client per process. Whichever side lost says so in the measurement's notes: the
//! program, by what it prints on stderr ([`cupti::CLIENT_FAILED`]), or kiln's library, by the
//! note it leaves.

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
    /// The CUPTI metrics wanted, named in notes.
    cupti_wanted: Vec<Metric>,
    warned: BTreeSet<&'static str>,
    /// What the measurement's record says about its GPU side, each once.
    notes: Vec<String>,
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
            cupti_wanted: wanted.iter().copied().filter(|m| m.needs_cupti()).collect(),
            warned: BTreeSet::new(),
            notes: Vec::new(),
        }
    }

    /// The notes for the measurement's record: a CUPTI client of the program's own that clashed
    /// with the tracing. The worker's log has them too.
    pub fn notes(&self) -> &[String] {
        &self.notes
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

    /// Ends a timed run of length `wall`, whose stderr held `stderr_seen` of what
    /// [`GpuRun::stderr_watch`] looked for: its GPU metrics, each measured or unsupported.
    pub fn end(&mut self, run: GpuRun, wall: Duration, stderr_seen: &[&str]) -> Metrics {
        let mut metrics = Metrics::new();
        if run.traced == Some(Ok(())) && !stderr_seen.is_empty() {
            let said = stderr_seen.join("\", \"");
            let measured = self.cupti_names();
            self.note_once("program-client", || {
                format!(
                    "the program's own CUPTI client could not start (its stderr says \"{said}\"): \
                     CUPTI serves one client per process, and kiln's injection library held it to \
                     measure {measured}, so the program's profiler (torch.profiler, TensorFlow's \
                     or JAX's) recorded no GPU activity; kiln's GPU metrics are unaffected. To \
                     leave CUPTI to the program, measure energy or wall-time instead, e.g. \
                     (objective (metric energy)): kiln traces only for a CUPTI metric. Or keep \
                     the program's profiler out of the measured runs"
                )
            });
        }
        if let Some(traced) = run.traced {
            let collected = traced.and_then(|()| match &self.cupti {
                Some(Ok(tracer)) => tracer.collect(),
                _ => Err("no tracer".into()),
            });
            match collected {
                Ok(m) => metrics.extend(m),
                Err(reason) => {
                    if reason.contains(cupti::CLIENT_FAILED[0]) {
                        let measured = self.cupti_names();
                        self.note_once("kiln-client", || {
                            format!(
                                "kiln could not trace the run: a CUPTI client of the program's \
                                 own held CUPTI first, which serves one client per process \
                                 ({reason}), so {measured} is unsupported. Keep the program's \
                                 profiler out of the measured runs, or measure energy or \
                                 wall-time, which need no CUPTI"
                            )
                        });
                    }
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

    /// Logs `message` and keeps it for the measurement's record, once per `key`.
    fn note_once(&mut self, key: &'static str, message: impl FnOnce() -> String) {
        if self.warned.insert(key) {
            let message = message();
            tracing::warn!("{message}");
            self.notes.push(message);
        }
    }

    /// The CUPTI metrics wanted, by name.
    fn cupti_names(&self) -> String {
        let names: Vec<&str> = self.cupti_wanted.iter().map(|m| m.name()).collect();
        names.join(", ")
    }
}

impl GpuRun {
    /// What to look for in the run's stderr: where kiln's library traces the run, the messages
    /// of a program whose own CUPTI client could not start beside it.
    pub fn stderr_watch(&self) -> &'static [&'static str] {
        match self.traced {
            Some(Ok(())) => cupti::CLIENT_FAILED,
            _ => &[],
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
        assert!(side.end(run, Duration::from_secs(1), &[]).is_empty());
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
        let m = side.end(run, Duration::from_millis(5), &[]);
        let gpu: Vec<_> = Metric::ALL
            .iter()
            .filter(|m| m.needs_cupti() || m.needs_nvml())
            .collect();
        assert_eq!(m.len(), gpu.len());
        assert!(m.values().all(|v| *v == MetricValue::Unsupported));
    }

    /// GPU time wanted, traced by a tracer that needs no GPU, NVML left out.
    fn traced_side(trace_dir: &Path) -> GpuSide {
        let mut side = GpuSide::new(&BTreeSet::from([Metric::GpuTime]), &[], trace_dir);
        side.cupti = Some(Ok(Tracer::with_library(
            Path::new("/lib/libkiln_cupti.so"),
            trace_dir,
        )));
        side.nvml = None;
        side
    }

    #[test]
    fn a_traced_program_whose_own_cupti_client_failed_gets_one_note() {
        let tmp = tempfile::tempdir().unwrap();
        let mut side = traced_side(tmp.path());
        for _ in 0..2 {
            let mut env = Vec::new();
            let run = side.begin(&mut env);
            assert_eq!(run.stderr_watch(), cupti::CLIENT_FAILED);
            let m = side.end(
                run,
                Duration::from_secs(1),
                &["CUPTI initialization failed"],
            );
            assert_eq!(
                m[&Metric::GpuTime],
                MetricValue::Unsupported,
                "no trace file"
            );
        }
        assert_eq!(side.notes().len(), 1, "{:?}", side.notes());
        let note = &side.notes()[0];
        for needle in [
            "\"CUPTI initialization failed\"",
            "gpu-time",
            "energy or wall-time",
        ] {
            assert!(note.contains(needle), "{needle} in {note}");
        }

        // Untraced runs are not looked at: there the program's profiler failed on its own.
        let mut side = traced_side(tmp.path());
        side.cupti = Some(Err("no driver".into()));
        let run = side.begin(&mut Vec::new());
        assert!(run.stderr_watch().is_empty());
        side.end(
            run,
            Duration::from_secs(1),
            &["CUPTI initialization failed"],
        );
        assert!(side.notes().is_empty(), "{:?}", side.notes());
    }

    #[test]
    fn a_program_client_that_took_cupti_first_gets_a_note() {
        let tmp = tempfile::tempdir().unwrap();
        let mut side = traced_side(tmp.path());
        let run = side.begin(&mut Vec::new());
        // What kiln's library leaves where CUPTI refused it.
        std::fs::write(
            tmp.path().join(kiln_protocol::gpu_trace::note_file_name(7)),
            "cuptiActivityRegisterCallbacks: CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED\n",
        )
        .unwrap();
        let m = side.end(run, Duration::from_secs(1), &[]);
        assert_eq!(m[&Metric::GpuTime], MetricValue::Unsupported);
        assert_eq!(side.notes().len(), 1, "{:?}", side.notes());
        assert!(
            side.notes()[0].contains("held CUPTI first"),
            "{:?}",
            side.notes()
        );
    }
}
