//! One run of a plan, in stages: its command and launch, the run itself, its record, then
//! how it ended and its checked output, either of which can fail it. The record is kept
//! whatever the run's fate.

use std::path::Path;
use std::time::Duration;

use kiln_protocol::config::benchmark::{Container, Limits};
use kiln_protocol::decision::ContentHash;
use kiln_protocol::message::{RunRecord, StepOutcome};
use kiln_protocol::metric::{Metric, MetricValue, Metrics};

use crate::launch::cgroup::RunCgroup;
use crate::launch::checked_output::{CheckedDigest, LineFilter};
use crate::launch::container::{self, ContainerRun};
use crate::launch::counters::Inherited;
use crate::launch::sampler::{self, SAMPLED_METRICS};
use crate::launch::{self, End, Finished, Launch, Output};
use crate::measure::gpu::GpuRun;
use crate::measure::{callgrind, Engine, Kind, OutputSpec, Plan, CALLGRIND_TIMEOUT_FACTOR};

/// A timed run's container and this run's handle on it.
type InContainer<'a> = (&'a Container, ContainerRun);

impl Engine<'_> {
    /// One run, recorded; `Err` if it failed (the record is kept too).
    pub(super) fn run(&mut self, kind: Kind, warmup: bool) -> Result<(), StepOutcome> {
        if let OutputSpec::File(path) = &self.plan.output {
            remove_if_present(path);
        }
        let container = self
            .plan
            .container
            .as_ref()
            .filter(|_| kind == Kind::Timed)
            .map(|c| (c, ContainerRun::fresh()));
        let mut launch = self.launch(kind, container.as_ref());
        let oom_kills_before = self.cgroup.as_ref().map_or(0, RunCgroup::oom_kills);
        let gpu = (kind == Kind::Timed).then(|| self.gpu.begin(&mut launch.env));
        if let Some(gpu) = &gpu {
            launch.stderr_watch = gpu.stderr_watch();
        }
        let index = self.runs.len() as u32;
        let finished = self.start(kind, &launch)?;
        let container_oom = container.as_ref().and_then(|c| container_end(c, &finished));
        let (exit_code, signal) = exit_status(finished.end, container_oom.is_some());
        let metrics = self.run_metrics(kind, &finished, gpu);
        self.runs.push(RunRecord {
            index,
            warmup,
            exit_code,
            signal,
            metrics,
        });
        if let Some(limits) = container_oom {
            return Err(container_oom_failure(limits, &finished));
        }
        self.check_end(&finished, launch.timeout, oom_kills_before)?;
        self.check_output(finished, warmup)
    }

    /// The program and timeout of a run of `kind`: as planned (in its container, if any),
    /// or under callgrind, whose stale profile is removed first, with its longer timeout.
    fn command(&self, kind: Kind, container: Option<&InContainer>) -> (Vec<String>, Duration) {
        let plan = self.plan;
        match kind {
            Kind::Timed => match container {
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
        }
    }

    /// The launch of a run of `kind`, before its GPU side is prepared.
    fn launch(&self, kind: Kind, container: Option<&InContainer>) -> Launch {
        let plan = self.plan;
        let (argv, timeout) = self.command(kind, container);
        let sample = kind == Kind::Timed && SAMPLED_METRICS.iter().any(|m| self.wanted.contains(m));
        Launch {
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
        }
    }

    /// Runs `launch` to its end, counted by the perf counters timed runs share; a run
    /// that cannot be started fails.
    fn start(&mut self, kind: Kind, launch: &Launch) -> Result<Finished, StepOutcome> {
        let counters = match kind {
            Kind::Timed => Some(self.counters.get_or_insert_with(Inherited::open)),
            Kind::Callgrind => {
                // Closed, so that valgrind's processes do not inherit them.
                self.counters = None;
                None
            }
        };
        launch::run(launch, counters, self.cancel).map_err(|message| StepOutcome::RunFailed {
            code: None,
            signal: None,
            signal_name: None,
            stderr_tail: message,
        })
    }

    /// A finished run's metrics: a timed run's own, its GPU side's, or callgrind's count.
    fn run_metrics(&mut self, kind: Kind, finished: &Finished, gpu: Option<GpuRun>) -> Metrics {
        match kind {
            Kind::Timed => {
                let mut m = timed_metrics(finished);
                if let Some(gpu) = gpu {
                    m.extend(self.gpu.end(gpu, finished.wall, &finished.stderr_seen));
                }
                m
            }
            Kind::Callgrind if finished.end == End::Exited(0) => self.callgrind_metrics(),
            Kind::Callgrind => Metrics::new(),
        }
    }

    /// Fails a run that did not exit 0: cancelled, timed out after `timeout`, killed (by
    /// the OOM killer if the cgroup's count passed `oom_kills_before`) or exited otherwise.
    fn check_end(
        &self,
        finished: &Finished,
        timeout: Duration,
        oom_kills_before: u64,
    ) -> Result<(), StepOutcome> {
        match finished.end {
            End::Cancelled => Err(StepOutcome::Cancelled),
            End::TimedOut => Err(StepOutcome::Timeout {
                phase: "run".into(),
                limit_s: timeout.as_secs_f64(),
            }),
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
                    None => finished.stderr_tail.clone(),
                };
                Err(StepOutcome::RunFailed {
                    code: None,
                    signal: Some(s),
                    signal_name: Some(launch::signal_name(s)),
                    stderr_tail,
                })
            }
            // Runs are limited by their cgroup, never by this watch.
            End::MemoryExceeded(_) => unreachable!("a run launched with a memory limit"),
            End::Exited(c) if c != 0 => Err(StepOutcome::RunFailed {
                code: Some(c),
                signal: None,
                signal_name: None,
                stderr_tail: finished.stderr_tail.clone(),
            }),
            End::Exited(_) => Ok(()),
        }
    }

    /// Checks a run's output, if the plan checks one, against the expected digest; keeps the
    /// first measured run's digest (and its start where none was expected).
    fn check_output(&mut self, finished: Finished, warmup: bool) -> Result<(), StepOutcome> {
        let Some((digest, sample)) = checked_output(self.plan, finished)? else {
            return Ok(());
        };
        match self.plan.expected_output {
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

/// After a timed run in a container: removes the container if the run was stopped, and
/// gives the container's limits if the OOM killer ended it.
fn container_end((c, run): &InContainer, finished: &Finished) -> Option<Limits> {
    if matches!(finished.end, End::TimedOut | End::Cancelled) {
        run.remove(c);
    }
    // A container the OOM killer ended is reported as a run the kernel killed.
    Some(c.limits)
        .filter(|_| finished.end == End::Exited(container::KILLED_STATUS))
        .filter(|_| run.oom_killed(c))
}

/// The exit code and signal a run's record keeps; a run ended by the kernel or by kiln
/// (timeout, cancel, container OOM) shows as SIGKILL.
fn exit_status(end: End, container_oom: bool) -> (Option<i32>, Option<i32>) {
    match end {
        End::Exited(_) if container_oom => (None, Some(libc::SIGKILL)),
        End::Exited(c) => (Some(c), None),
        End::Signaled(s) => (None, Some(s)),
        End::TimedOut | End::Cancelled | End::MemoryExceeded(_) => (None, Some(libc::SIGKILL)),
    }
}

/// The failure of a run whose container the OOM killer ended at `limits`.
fn container_oom_failure(limits: Limits, finished: &Finished) -> StepOutcome {
    StepOutcome::RunFailed {
        code: None,
        signal: Some(libc::SIGKILL),
        signal_name: Some(launch::signal_name(libc::SIGKILL)),
        stderr_tail: format!(
            "the kernel's OOM killer ended the run's container at its memory limit \
             {limits}\n{}",
            finished.stderr_tail
        ),
    }
}

/// The digest and start of the output the plan checks of a run that exited 0, if any; an
/// output file that cannot be read, or a check command that fails, fails the run.
fn checked_output(
    plan: &Plan,
    finished: Finished,
) -> Result<Option<(ContentHash, String)>, StepOutcome> {
    Ok(match &plan.output {
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
    })
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

fn remove_if_present(path: &Path) {
    if let Err(e) = std::fs::remove_file(path) {
        if e.kind() != std::io::ErrorKind::NotFound {
            tracing::warn!("cannot remove {}: {e}", path.display());
        }
    }
}
