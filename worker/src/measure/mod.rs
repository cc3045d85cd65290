//! The measuring engine shared by steps and `kiln-worker measure`.
//!
//! Warm-up runs first (recorded, not summarised), then timed runs until the
//! objective's median CI is narrow enough, `max` runs are done or `max_time_s`
//! has passed (adaptive repetition), or, for a candidate that races, the CI
//! lies above the race's bound (cut short). Instruction counts come from separate
//! callgrind runs, never from timed ones; GPU time and energy come from the
//! timed runs themselves, traced and sampled by the `gpu` module when wanted.
//! Every run's output is checked; the first failing run ends the measurement,
//! and a failed measurement carries no summary, so it can never pass for a
//! fast one.
//!
//! | module | owns |
//! |--------|------|
//! | [`callgrind`] | exact instruction counts and the profile of discovery's stock build |
//! | [`code`] | the optimised code of the functions a build holds (objdump), by kind |
//! | `gpu`, [`cupti`], [`nvml`] | GPU time from CUPTI traces; energy, power, clocks from NVML |
//! | `one_run` | one run: its launch, record, end and checked output |
//! | [`report`] | the summary `kiln-worker measure` prints |
//!
//! It imports only the launcher ([`crate::launch`]); `objdump` reads the code.

pub mod callgrind;
pub mod code;
pub mod cupti;
mod gpu;
pub mod nvml;
mod one_run;
pub mod report;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use kiln_protocol::config::benchmark::{Container, Limits, RunPolicy};
use kiln_protocol::decision::ContentHash;
pub use kiln_protocol::message::summarise;
pub use kiln_protocol::message::Measurement;
use kiln_protocol::message::{CutShort, FunctionCode, Race, RunRecord, StepOutcome};
use kiln_protocol::metric::{Metric, MetricValue, Metrics};

use crate::launch::cgroup::RunCgroup;
use crate::launch::checked_output::LineFilter;
use crate::launch::counters::Inherited;
use crate::launch::CancelToken;
use crate::measure::gpu::GpuSide;

/// How much longer than a timed run a callgrind run may take.
pub const CALLGRIND_TIMEOUT_FACTOR: u32 = 50;

/// Which output of a run is checked.
#[derive(Debug, Clone)]
pub enum OutputSpec {
    /// None: stdout is discarded.
    None,
    /// The lines of standard output that the filter checks.
    Stdout(LineFilter),
    /// A file the run writes (removed before each run, so a stale one cannot pass).
    File(PathBuf),
    /// The standard output of a command run in the run's folder after each
    /// run, with the run's environment and timeout.
    Command(Vec<String>),
}

/// One command to measure and how.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Program and arguments.
    pub argv: Vec<String>,
    /// Working directory.
    pub cwd: PathBuf,
    /// Complete environment.
    pub env: Vec<(String, String)>,
    /// CPUs to pin to; empty: no pinning.
    pub cpus: Vec<u32>,
    /// Timeout of one timed run.
    pub timeout: Duration,
    /// How many runs.
    pub policy: RunPolicy,
    /// The metric adaptive repetition watches.
    pub objective: Metric,
    /// The bound past which repeating stops, if the candidate races.
    pub race: Option<Race>,
    /// Metrics wanted besides the always-measured ones: `instructions` adds
    /// callgrind runs, the sampled metrics turn sampling on.
    pub extra: Vec<Metric>,
    /// The output checked.
    pub output: OutputSpec,
    /// The digest the output must have, if known.
    pub expected_output: Option<ContentHash>,
    /// Where callgrind writes its profile.
    pub callgrind_out: PathBuf,
    /// Whether to read each function's own instructions from callgrind's
    /// profile ([`Measurement::function_instructions`]).
    pub function_costs: bool,
    /// Where the CUPTI injection library writes a timed run's traces (emptied before each).
    pub gpu_trace_dir: PathBuf,
    /// CPU and memory limits on the timed runs.
    pub limits: Limits,
    /// The container image the timed runs run in, with its own limits.
    pub container: Option<Container>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Timed,
    Callgrind,
}

/// Measures a plan; `cancel` stops it between or during runs.
pub fn measure(plan: &Plan, cancel: Option<&CancelToken>) -> Measurement {
    let cgroup = if plan.limits.is_none() {
        None
    } else {
        match RunCgroup::create(&plan.limits) {
            Ok(cg) => Some(cg),
            // Not the candidate's failure: this worker cannot measure it as asked.
            Err(reason) => return Measurement::empty(StepOutcome::Rejected { reason }),
        }
    };
    let wanted: BTreeSet<Metric> = std::iter::once(plan.objective)
        .chain(plan.extra.iter().copied())
        .collect();
    let mut m = Engine {
        plan,
        cancel,
        gpu: GpuSide::new(&wanted, &plan.env, &plan.gpu_trace_dir),
        wanted,
        runs: Vec::new(),
        output_digest: None,
        checked_output: None,
        cut_short: None,
        cgroup,
        counters: None,
        functions: BTreeMap::new(),
        code: BTreeMap::new(),
    };
    let outcome = m.run_all().err().unwrap_or(StepOutcome::Ok);
    let summary = if outcome == StepOutcome::Ok {
        summarise(&m.runs)
    } else {
        BTreeMap::new()
    };
    let target_met = summary
        .get(&plan.objective)
        .is_some_and(|s| s.rel_ci_half_width() <= plan.policy.target_rel_ci);
    Measurement {
        // Only a successful measurement counts as one cut short.
        cut_short: m.cut_short.filter(|_| outcome == StepOutcome::Ok),
        outcome,
        runs: m.runs,
        summary,
        target_met,
        output_digest: m.output_digest,
        checked_output: m.checked_output,
        warnings: m.gpu.notes().to_vec(),
        function_instructions: m.functions,
        function_code: m.code,
    }
}

struct Engine<'a> {
    plan: &'a Plan,
    cancel: Option<&'a CancelToken>,
    wanted: BTreeSet<Metric>,
    runs: Vec<RunRecord>,
    output_digest: Option<ContentHash>,
    checked_output: Option<String>,
    /// Why the objective's runs stopped early, if they did.
    cut_short: Option<CutShort>,
    /// GPU time and energy of timed runs, where wanted.
    gpu: GpuSide,
    /// Where timed runs are limited, if the plan has limits.
    cgroup: Option<RunCgroup>,
    /// perf counters for timed runs, opened on this thread at the first one
    /// and closed before callgrind runs (which need no counting).
    counters: Option<Inherited>,
    /// Each function's own instructions in the last callgrind run, where the plan wants them.
    functions: BTreeMap<String, u64>,
    /// The code of the functions the first callgrind run executed, where the plan wants
    /// their instructions (the build is the same for every run).
    code: BTreeMap<String, FunctionCode>,
}

impl Engine<'_> {
    /// A finished callgrind run's instruction count and, where the plan wants them, each
    /// function's own instructions: one read of its profile.
    fn callgrind_metrics(&mut self) -> Metrics {
        let out = &self.plan.callgrind_out;
        let text = callgrind::read_profile(out);
        let count = text
            .as_deref()
            .map_err(Clone::clone)
            .and_then(|t| callgrind::total_of(t, out))
            .map_err(|e| tracing::warn!("{e}"))
            .map_or(MetricValue::Unsupported, |n| {
                MetricValue::Measured(n as f64)
            });
        if let (true, Ok(text)) = (self.plan.function_costs, &text) {
            let profile = callgrind::Profile::parse(text);
            self.functions = callgrind::function_costs(&profile);
            if self.code.is_empty() {
                self.code = code::Code::of_executed(&profile, &self.plan.cwd);
            }
        }
        Metrics::from([(Metric::Instructions, count)])
    }

    fn run_all(&mut self) -> Result<(), StepOutcome> {
        let policy = self.plan.policy;
        let min = policy.min.max(1);
        let max = policy.max.max(min);
        for _ in 0..policy.warmup {
            self.run(Kind::Timed, true)?;
        }
        let objective_timed = !self.plan.objective.needs_callgrind();
        self.repeat(Kind::Timed, min, if objective_timed { max } else { min })?;
        if self.wanted.contains(&Metric::Instructions) {
            if callgrind::version().is_none() {
                tracing::warn!("valgrind is not installed: instruction counts are unsupported");
                let index = self.runs.len() as u32;
                self.runs.push(RunRecord {
                    index,
                    warmup: false,
                    exit_code: None,
                    signal: None,
                    metrics: Metrics::from([(Metric::Instructions, MetricValue::Unsupported)]),
                });
            } else if objective_timed {
                // Wanted on the side: one exact count is enough.
                self.repeat(Kind::Callgrind, 1, 1)?;
            } else {
                self.repeat(Kind::Callgrind, min, max)?;
            }
        }
        Ok(())
    }

    /// Measured runs of one kind: at least `min`, then until the objective's
    /// CI target, `max` runs, the time budget, or a lost race.
    fn repeat(&mut self, kind: Kind, min: u32, max: u32) -> Result<(), StepOutcome> {
        let started = Instant::now();
        let first = self.runs.len();
        for n in 1..=max {
            self.run(kind, false)?;
            if n < min {
                continue;
            }
            let summary = summarise(&self.runs[first..]);
            match summary.get(&self.plan.objective) {
                Some(s) if s.rel_ci_half_width() <= self.plan.policy.target_rel_ci => break,
                // Even the interval's lower end is worse than the chain could accept:
                // more runs would only say by how much.
                Some(s) if n < max && self.plan.race.is_some_and(|r| s.ci_low > r.bound) => {
                    self.cut_short = self.plan.race.map(|race| CutShort {
                        race,
                        runs: n,
                        max_runs: max,
                        ci_low: s.ci_low,
                        ci_high: s.ci_high,
                    });
                    break;
                }
                Some(_) => {}
                // The objective is not measured by these runs (or is
                // unsupported here): more runs cannot tighten it.
                None => break,
            }
            if started.elapsed().as_secs_f64() >= self.plan.policy.max_time_s {
                break;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
