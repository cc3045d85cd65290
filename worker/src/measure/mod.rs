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
//! | `gpu`, [`cupti`], [`nvml`] | GPU time from CUPTI traces; energy, power, clocks from NVML |
//! | [`report`] | the summary `kiln-worker measure` prints |
//!
//! It imports only the launcher ([`crate::launch`]).

pub mod callgrind;
pub mod cupti;
mod gpu;
pub mod nvml;
pub mod report;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use kiln_protocol::config::benchmark::{Container, Limits, RunPolicy};
use kiln_protocol::decision::ContentHash;
use kiln_protocol::message::{CutShort, Race, RunRecord, StepOutcome};
use kiln_protocol::metric::{Metric, MetricValue, Metrics};
use kiln_protocol::stats::Summary;
use serde::{Deserialize, Serialize};

use crate::launch::cgroup::RunCgroup;
use crate::launch::checked_output::{CheckedDigest, LineFilter};
use crate::launch::container::{self, ContainerRun};
use crate::launch::counters::Inherited;
use crate::launch::sampler::{self, SAMPLED_METRICS};
use crate::launch::{self, CancelToken, End, Finished, Launch, Output};
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

/// The runs of a plan and what they add up to (`measure --json` prints it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    /// `Ok`, or the first failure.
    pub outcome: StepOutcome,
    /// Every run, warm-ups and callgrind runs included.
    pub runs: Vec<RunRecord>,
    /// Per metric over the measured runs that have it; empty unless `Ok`.
    pub summary: BTreeMap<Metric, Summary>,
    /// Whether the objective's relative CI half-width reached the target.
    pub target_met: bool,
    /// Set when the candidate lost its race and its runs stopped early.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut_short: Option<CutShort>,
    /// Digest of the checked output of the first measured run.
    pub output_digest: Option<ContentHash>,
    /// The start of the checked output: the first measured run's when no
    /// digest was expected, the differing run's when one differed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checked_output: Option<String>,
    /// What the measurement found wrong without failing: a CUPTI client of the program's own
    /// that clashed with kiln's GPU tracing (a step's record keeps them as warnings).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// The instructions each function executed itself in the last callgrind
    /// run, by name as compiled, where the plan asked for them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub function_instructions: BTreeMap<String, u64>,
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
            Err(reason) => {
                return Measurement {
                    outcome: StepOutcome::Rejected { reason },
                    runs: Vec::new(),
                    summary: BTreeMap::new(),
                    target_met: false,
                    cut_short: None,
                    output_digest: None,
                    checked_output: None,
                    warnings: Vec::new(),
                    function_instructions: BTreeMap::new(),
                }
            }
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
    }
}

/// Statistics per metric over the non-warm-up runs that carry it; a metric
/// unsupported in any of them has no summary.
pub fn summarise(runs: &[RunRecord]) -> BTreeMap<Metric, Summary> {
    let mut values: BTreeMap<Metric, Option<Vec<f64>>> = BTreeMap::new();
    for run in runs.iter().filter(|r| !r.warmup) {
        for (metric, value) in &run.metrics {
            let entry = values.entry(*metric).or_insert_with(|| Some(Vec::new()));
            match (entry.as_mut(), value) {
                (Some(v), MetricValue::Measured(x)) => v.push(*x),
                _ => *entry = None,
            }
        }
    }
    values
        .into_iter()
        .filter_map(|(m, v)| Some((m, Summary::of(&v?)?)))
        .collect()
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
            self.functions = callgrind::function_costs(text);
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

    /// One run, recorded; `Err` if it failed (the record is kept too).
    fn run(&mut self, kind: Kind, warmup: bool) -> Result<(), StepOutcome> {
        let plan = self.plan;
        if let OutputSpec::File(path) = &plan.output {
            remove_if_present(path);
        }
        let container = plan
            .container
            .as_ref()
            .filter(|_| kind == Kind::Timed)
            .map(|c| (c, ContainerRun::fresh()));
        let (argv, timeout) = match kind {
            Kind::Timed => match &container {
                Some((c, run)) => (run.argv(c, &plan.argv, &plan.cwd, &plan.env), plan.timeout),
                None => (plan.argv.clone(), plan.timeout),
            },
            Kind::Callgrind => {
                remove_if_present(&plan.callgrind_out);
                let wrap = match plan.function_costs {
                    true => callgrind::wrap_profile,
                    false => callgrind::wrap,
                };
                (
                    wrap(&plan.argv, &plan.callgrind_out),
                    plan.timeout
                        .checked_mul(CALLGRIND_TIMEOUT_FACTOR)
                        .unwrap_or(Duration::MAX),
                )
            }
        };
        let sample = kind == Kind::Timed && SAMPLED_METRICS.iter().any(|m| self.wanted.contains(m));
        let mut launch = Launch {
            argv,
            cwd: plan.cwd.clone(),
            env: plan.env.clone(),
            cpus: plan.cpus.clone(),
            output: match &plan.output {
                OutputSpec::Stdout(filter) => Output::HashStdout(filter.clone()),
                _ => Output::Discard,
            },
            timeout,
            sample_every: sample.then_some(sampler::DEFAULT_INTERVAL),
            // Limits shape timed runs only: callgrind's counts do not depend on them.
            cgroups: match kind {
                Kind::Timed => self
                    .cgroup
                    .as_ref()
                    .map(RunCgroup::procs)
                    .unwrap_or_default(),
                Kind::Callgrind => Vec::new(),
            },
            memory_limit: None,
            stderr_watch: &[],
        };
        let oom_kills_before = self.cgroup.as_ref().map_or(0, RunCgroup::oom_kills);
        let gpu = (kind == Kind::Timed).then(|| self.gpu.begin(&mut launch.env));
        if let Some(gpu) = &gpu {
            launch.stderr_watch = gpu.stderr_watch();
        }
        let index = self.runs.len() as u32;
        let counters = match kind {
            Kind::Timed => Some(self.counters.get_or_insert_with(Inherited::open)),
            Kind::Callgrind => {
                // Closed, so that valgrind's processes do not inherit them.
                self.counters = None;
                None
            }
        };
        let finished = match launch::run(&launch, counters, self.cancel) {
            Ok(f) => f,
            Err(message) => {
                return Err(StepOutcome::RunFailed {
                    code: None,
                    signal: None,
                    signal_name: None,
                    stderr_tail: message,
                })
            }
        };
        if let Some((c, run)) = &container {
            if matches!(finished.end, End::TimedOut | End::Cancelled) {
                run.remove(c);
            }
        }
        // A container the OOM killer ended is reported as a run the kernel killed.
        let container_oom = container
            .as_ref()
            .filter(|_| finished.end == End::Exited(container::KILLED_STATUS))
            .filter(|(c, run)| run.oom_killed(c))
            .map(|(c, _)| c.limits);
        let (exit_code, signal) = match finished.end {
            End::Exited(_) if container_oom.is_some() => (None, Some(libc::SIGKILL)),
            End::Exited(c) => (Some(c), None),
            End::Signaled(s) => (None, Some(s)),
            End::TimedOut | End::Cancelled | End::MemoryExceeded(_) => (None, Some(libc::SIGKILL)),
        };
        let metrics = match kind {
            Kind::Timed => {
                let mut m = timed_metrics(&finished);
                if let Some(gpu) = gpu {
                    m.extend(self.gpu.end(gpu, finished.wall, &finished.stderr_seen));
                }
                m
            }
            Kind::Callgrind if finished.end == End::Exited(0) => self.callgrind_metrics(),
            Kind::Callgrind => Metrics::new(),
        };
        self.runs.push(RunRecord {
            index,
            warmup,
            exit_code,
            signal,
            metrics,
        });
        if let Some(limits) = container_oom {
            return Err(StepOutcome::RunFailed {
                code: None,
                signal: Some(libc::SIGKILL),
                signal_name: Some(launch::signal_name(libc::SIGKILL)),
                stderr_tail: format!(
                    "the kernel's OOM killer ended the run's container at its memory limit \
                     {limits}\n{}",
                    finished.stderr_tail
                ),
            });
        }
        let limit = timeout.as_secs_f64();
        match finished.end {
            End::Cancelled => return Err(StepOutcome::Cancelled),
            End::TimedOut => {
                return Err(StepOutcome::Timeout {
                    phase: "run".into(),
                    limit_s: limit,
                })
            }
            End::Signaled(s) => {
                let oom = self
                    .cgroup
                    .as_ref()
                    .filter(|cg| cg.oom_kills() > oom_kills_before);
                let stderr_tail = match oom {
                    Some(cg) => format!(
                        "the kernel's OOM killer ended the run at its memory limit {}\n{}",
                        cg.limits(),
                        finished.stderr_tail
                    ),
                    None => finished.stderr_tail,
                };
                return Err(StepOutcome::RunFailed {
                    code: None,
                    signal: Some(s),
                    signal_name: Some(launch::signal_name(s)),
                    stderr_tail,
                });
            }
            // Runs are limited by their cgroup, never by this watch.
            End::MemoryExceeded(_) => unreachable!("a run launched with a memory limit"),
            End::Exited(c) if c != 0 => {
                return Err(StepOutcome::RunFailed {
                    code: Some(c),
                    signal: None,
                    signal_name: None,
                    stderr_tail: finished.stderr_tail,
                })
            }
            End::Exited(_) => {}
        }
        let checked = match &plan.output {
            OutputSpec::None => None,
            OutputSpec::Stdout(_) => finished.stdout_digest.zip(finished.stdout_sample),
            OutputSpec::File(path) => match std::fs::read(path) {
                Ok(bytes) => Some(CheckedDigest::of(LineFilter::All, &bytes)),
                Err(e) => {
                    return Err(StepOutcome::RunFailed {
                        code: Some(0),
                        signal: None,
                        signal_name: None,
                        stderr_tail: format!(
                        "the run exited 0 but its checked output file {} cannot be read: {e}\n{}",
                        path.display(),
                        finished.stderr_tail
                    ),
                    })
                }
            },
            OutputSpec::Command(argv) => Some(command_output(plan, argv)?),
        };
        let Some((digest, sample)) = checked else {
            return Ok(());
        };
        match plan.expected_output {
            Some(expected) if expected != digest => {
                self.checked_output = Some(sample);
                return Err(StepOutcome::WrongOutput {
                    expected,
                    found: digest,
                });
            }
            Some(_) => {}
            None if !warmup && self.output_digest.is_none() => {
                self.checked_output = Some(sample);
            }
            None => {}
        }
        if !warmup && self.output_digest.is_none() {
            self.output_digest = Some(digest);
        }
        Ok(())
    }
}

/// The checked output of a `(check-output (command ...))`: the digest and
/// start of the command's standard output; a command that fails fails the run.
fn command_output(plan: &Plan, argv: &[String]) -> Result<(ContentHash, String), StepOutcome> {
    let failed = |why: String| StepOutcome::RunFailed {
        code: Some(0),
        signal: None,
        signal_name: None,
        stderr_tail: format!(
            "the run exited 0, but its check-output command '{}' {why}",
            argv.join(" ")
        ),
    };
    let launch = Launch {
        argv: argv.to_vec(),
        cwd: plan.cwd.clone(),
        env: plan.env.clone(),
        cpus: plan.cpus.clone(),
        output: Output::HashStdout(LineFilter::All),
        timeout: plan.timeout,
        sample_every: None,
        cgroups: Vec::new(),
        memory_limit: None,
        stderr_watch: &[],
    };
    let finished = launch::run(&launch, None, None).map_err(|e| failed(format!("failed: {e}")))?;
    match finished.end {
        End::Exited(0) => finished
            .stdout_digest
            .zip(finished.stdout_sample)
            .ok_or_else(|| failed("printed nothing to check".into())),
        end => {
            let how = match end {
                End::Exited(c) => format!("exited with {c}"),
                End::Signaled(s) => format!("was killed by {}", launch::signal_name(s)),
                End::TimedOut => format!("timed out after {} s", plan.timeout.as_secs_f64()),
                other => format!("ended as {other:?}"),
            };
            Err(failed(format!("{how}:\n{}", finished.stderr_tail)))
        }
    }
}

fn timed_metrics(f: &Finished) -> Metrics {
    let mut m = Metrics::from([
        (
            Metric::WallTime,
            MetricValue::Measured(f.wall.as_nanos() as f64),
        ),
        (
            Metric::UserTime,
            MetricValue::Measured(f.usage.user_ns as f64),
        ),
        (
            Metric::SystemTime,
            MetricValue::Measured(f.usage.system_ns as f64),
        ),
        (
            Metric::MaxRss,
            MetricValue::Measured(f.usage.max_rss_bytes as f64),
        ),
        (
            Metric::BlockIoBytes,
            MetricValue::Measured(f.usage.block_io_bytes as f64),
        ),
    ]);
    m.extend(f.counters.iter().map(|(k, v)| (*k, *v)));
    if let Some(s) = &f.samples {
        m.extend(s.metrics());
    }
    m
}

fn remove_if_present(path: &std::path::Path) {
    if let Err(e) = std::fs::remove_file(path) {
        if e.kind() != std::io::ErrorKind::NotFound {
            tracing::warn!("cannot remove {}: {e}", path.display());
        }
    }
}

#[cfg(test)]
mod tests;
