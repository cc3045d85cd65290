//! Candidates measured against each other on one slot of one worker, outside
//! a campaign: a session on a one-slot pool, decision sets measured in
//! interleaved rounds ([`compare`]) and their runs pooled. `kiln benchmark`
//! and `kiln rewards` measure with it.
//!
//! It drives dispatch and reads the plan's step requests; it stores nothing
//! and formats nothing for a command's output.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};

use kiln_protocol::bundle::Bundle;
use kiln_protocol::config::{BenchmarkSpec, LocalWorker, RunPolicy, WorkerSpec};
use kiln_protocol::message::StepResult;
use kiln_protocol::{CampaignConfig, DecisionSet, StepOutcome, StepRequest};

use crate::dispatch::pool::PoolSettings;
use crate::dispatch::pool::{Answer, Job, Pool, Work, WorkerState};
use crate::dispatch::slot::SlotPlace;
use crate::error::{BadInput, Interrupted};
use crate::plan::step::{self};
use crate::store::now_ms;

/// The worker to measure on: the named one of the config, else its first
/// local worker, else a plain local worker.
pub fn pick_worker(config: &CampaignConfig, name: Option<&str>) -> Result<WorkerSpec> {
    match name {
        Some(name) => config
            .workers
            .iter()
            .find(|w| w.name() == name)
            .cloned()
            .ok_or_else(|| {
                let known: Vec<_> = config.workers.iter().map(WorkerSpec::name).collect();
                BadInput(format!(
                    "no worker named '{name}'; the config defines: {}",
                    known.join(", ")
                ))
                .into()
            }),
        None => Ok(config
            .workers
            .iter()
            .find(|w| matches!(w, WorkerSpec::Local(_)))
            .cloned()
            .unwrap_or_else(|| {
                WorkerSpec::Local(LocalWorker {
                    name: "local".into(),
                    slots: 1,
                    cpus: Vec::new(),
                    gpus: Vec::new(),
                })
            })),
    }
}

/// The worker with one slot (its first slot's CPUs and GPUs): baseline and
/// candidate run one after the other, never beside each other.
pub fn single_slot(worker: &WorkerSpec) -> WorkerSpec {
    let first = SlotPlace::of(worker, 0);
    match worker.clone() {
        WorkerSpec::Local(local) => WorkerSpec::Local(LocalWorker {
            slots: 1,
            cpus: first.cpus,
            gpus: first.gpus,
            ..local
        }),
        WorkerSpec::Ssh(mut ssh) => {
            ssh.slots = 1;
            ssh.cpus = first.cpus;
            ssh.gpus = first.gpus;
            WorkerSpec::Ssh(ssh)
        }
        WorkerSpec::Slurm(mut slurm) => {
            slurm.slots = 1;
            WorkerSpec::Slurm(slurm)
        }
    }
}

/// One slot of one worker, started for a one-off command, and the scratch
/// folder its local worker runs in (removed after the pool, in field order).
pub struct Slot {
    pool: Pool<()>,
    worker: String,
    _scratch: tempfile::TempDir,
}

impl Slot {
    /// Starts `worker` (see [`single_slot`]) with `settings`, its local
    /// workers in `scratch` (removed when the slot is dropped).
    pub fn start(
        worker: &WorkerSpec,
        settings: PoolSettings,
        scratch: tempfile::TempDir,
    ) -> Result<Slot> {
        Ok(Slot {
            pool: Pool::start(std::slice::from_ref(worker), settings),
            worker: worker.name().to_string(),
            _scratch: scratch,
        })
    }

    /// A session on the slot.
    pub fn session(&mut self) -> Session<'_> {
        Session {
            pool: &mut self.pool,
            worker: &self.worker,
        }
    }
}

/// The pool of one worker and that worker's name, for error messages.
pub struct Session<'a> {
    pool: &'a mut Pool<()>,
    /// The worker's name.
    pub worker: &'a str,
}

impl Session<'_> {
    /// Runs one job to its answer; a worker that cannot be reached fails the
    /// command instead of leaving it waiting.
    pub async fn run(&mut self, bundle: &Arc<Bundle>, work: Work) -> Result<Answer> {
        self.pool.submit(Job {
            tag: (),
            bundle: bundle.clone(),
            work,
        });
        let mut watch = tokio::time::interval(Duration::from_millis(500));
        loop {
            tokio::select! {
                done = self.pool.done.recv() => {
                    return Ok(done.context("worker pool stopped")?.answer);
                }
                _ = watch.tick() => {
                    let state = self.pool.board.lock().expect("not poisoned")[self.worker].state.clone();
                    if let WorkerState::Unreachable(reason) | WorkerState::Quarantined(reason) = state {
                        bail!("worker {} cannot be reached: {reason}", self.worker);
                    }
                }
                signal = crate::error::interruption() => {
                    return Err(Interrupted(signal.said().into(), signal).into())
                }
            }
        }
    }
}

/// One measurement and when it was handed to the worker.
pub struct Measurement {
    /// What the worker measured.
    pub result: StepResult,
    /// When it was handed to the worker (Unix ms).
    pub dispatched_ms: u64,
    /// When its result came back (Unix ms).
    pub recorded_ms: u64,
}

/// Rounds of a comparison ([`compare`]) whose objective is noisy; one suffices for exact counts.
const NOISY_ROUNDS: u32 = 3;

/// The rounds of a comparison under `config`, whose runs are `runs` where an experiment
/// measured its own (a baseline that varied).
pub fn rounds(config: &CampaignConfig, runs: Option<RunPolicy>) -> u32 {
    match step::repeatability(config, runs) {
        step::Repeatability::Exact => 1,
        step::Repeatability::Noisy => NOISY_ROUNDS,
    }
}

/// Decision sets to measure against each other ([`compare`]), each once: the reference first.
pub struct Sets<'s>(pub Vec<&'s DecisionSet>);

impl<'s> Sets<'s> {
    /// The reference alone.
    pub fn new(reference: &'s DecisionSet) -> Self {
        Sets(vec![reference])
    }

    /// Where `set` is among them, added where it is not yet.
    pub fn place(&mut self, set: &'s DecisionSet) -> usize {
        match self.0.iter().position(|s| *s == set) {
            Some(i) => i,
            None => {
                self.0.push(set);
                self.0.len() - 1
            }
        }
    }
}

/// Decision sets measured against each other on one slot: round after round,
/// each set once per round, so that a drift of the machine falls on all of
/// them alike (builds are kept by the worker, so a later round only runs).
/// The first set is the reference: it must succeed, and the others' output
/// must match its. Returns each set's measurements, one per round.
pub async fn compare(
    session: &mut Session<'_>,
    config: &CampaignConfig,
    spec: &BenchmarkSpec,
    bundle: &Arc<Bundle>,
    sets: &[&DecisionSet],
    runs: RunPolicy,
    rounds: u32,
) -> Result<Vec<Vec<Measurement>>> {
    let mut measured: Vec<Vec<Measurement>> = sets.iter().map(|_| Vec::new()).collect();
    let mut expected = None;
    for _ in 0..rounds {
        for (i, set) in sets.iter().enumerate() {
            let request = step::request(config, spec, bundle, set, runs, None, expected);
            let m = step(session, bundle, request).await?;
            if i == 0 {
                if m.result.measurement.outcome != StepOutcome::Ok {
                    bail!(
                        "the baseline of benchmark {} failed on worker {}: {}",
                        spec.name,
                        session.worker,
                        m.result.measurement.outcome
                    );
                }
                expected = expected.or(m.result.measurement.output_digest);
            }
            measured[i].push(m);
        }
    }
    Ok(measured)
}

/// The objective of one set's measurements, its runs of every round pooled;
/// the outcome of the first that failed, if one did.
pub fn pooled_objective(
    config: &CampaignConfig,
    measured: &[Measurement],
) -> std::result::Result<f64, String> {
    let metric = config.objective.metric;
    if let Some(failed) = measured
        .iter()
        .find(|m| m.result.measurement.outcome != StepOutcome::Ok)
    {
        return Err(failed.result.measurement.outcome.to_string());
    }
    let samples: Vec<f64> = measured
        .iter()
        .flat_map(|m| &m.result.measurement.runs)
        .filter(|r| !r.warmup)
        .filter_map(|r| r.metrics.get(&metric)?.measured())
        .collect();
    kiln_protocol::Summary::of(&samples)
        .map(|s| config.objective.statistic.of(&s))
        .ok_or_else(|| format!("no {metric} was measured"))
}

async fn step(
    session: &mut Session<'_>,
    bundle: &Arc<Bundle>,
    request: StepRequest,
) -> Result<Measurement> {
    let dispatched_ms = now_ms();
    match session.run(bundle, Work::Step(Box::new(request))).await? {
        Answer::Step(result) => Ok(Measurement {
            result: *result,
            dispatched_ms,
            recorded_ms: now_ms(),
        }),
        Answer::Discovered(_) => bail!("unexpected discovery answer to a step"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_protocol::message::RunRecord;
    use kiln_protocol::{Metric, MetricValue, StepId};

    #[test]
    fn rounds_pool_their_measured_runs_and_a_failed_round_fails_the_set() {
        let config = CampaignConfig::parse(
            r#"(campaign (name pooled) (store "s")
                 (objective (metric instructions) (statistic median))
                 (experiments ((benchmark b) (search (random-walk (steps 1)))))
                 (benchmarks ((name b) (kind knobs) (knobs (k 0)) (sources "b") (run ("true"))))
                 (workers (local)))"#,
            "test",
        )
        .unwrap();
        let round = |samples: &[f64]| {
            let mut result = StepResult::new(StepId(0), StepOutcome::Ok);
            // A warm-up that must not count, then the measured runs.
            result.measurement.runs = std::iter::once((true, 1e9))
                .chain(samples.iter().map(|s| (false, *s)))
                .enumerate()
                .map(|(i, (warmup, v))| RunRecord {
                    index: i as u32,
                    warmup,
                    exit_code: Some(0),
                    signal: None,
                    metrics: [(Metric::Instructions, MetricValue::Measured(v))].into(),
                })
                .collect();
            Measurement {
                result,
                dispatched_ms: 0,
                recorded_ms: 0,
            }
        };
        let rounds = [round(&[1.0, 2.0, 3.0]), round(&[10.0, 11.0, 12.0])];
        // The median of all six measured runs, not of either round.
        assert_eq!(pooled_objective(&config, &rounds), Ok(6.5));
        let mut failed = round(&[1.0]);
        failed.result.measurement.outcome = StepOutcome::Timeout {
            phase: "run".into(),
            limit_s: 5.0,
        };
        let [first, _] = rounds;
        let err = pooled_objective(&config, &[first, failed]).unwrap_err();
        assert_eq!(err, "run timed out after 5 s");
    }
}
