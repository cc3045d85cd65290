//! The worker pool: keeps every slot of every worker busy from one queue.
//!
//! Each worker has a supervisor task that connects (with exponential backoff),
//! then runs one task per slot pulling jobs from the shared queue. A job whose
//! worker is lost goes back on the queue for another slot: it is never lost,
//! and since only the campaign loop records results, never recorded twice.
//!
//! A job may itself be what ends its worker (a decision set that crashes the
//! machine's kiln-worker, or kills it): each loss is charged to the job's
//! decision set ([`ledger`]), whichever step brings it. A set that has cost a
//! worker runs alone from then on, so that a further loss is its own, and after
//! the campaign's `step-losses` it is answered as failed ([`StepOutcome::WorkerLost`])
//! rather than sent again, in every step that proposes it. A worker lost several
//! times in a row without finishing a job (losing the jobs it took, or dropping
//! within a minute of connecting) is quarantined for a while; losses a set
//! running alone caused count against the set, not the worker. A worker that answers hello with
//! something else, or a local one that cannot start, is unfit after
//! [`MAX_BAD_STARTS`] tries in a row. With calibration configured, each slot
//! measures the calibration benchmark before its first job and every N jobs
//! (see [`super::calibration`]).

mod ledger;
mod runner;
mod supervisor;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex};

use anyhow::Result;
use tokio::sync::mpsc;

use kiln_protocol::bundle::Bundle;
use kiln_protocol::config::{BenchmarkSpec, Limits, Timeouts, WorkerSpec};
use kiln_protocol::message::{Capabilities, Discovery};
use kiln_protocol::{StepRequest, StepResult};

use crate::store::now_ms;

use super::calibration::{Calibrator, SlotCalibration, RECHECK};
use super::connection::{BadHello, Connection, Heartbeat, Lost, VersionMismatch};
use super::slot::SlotPlace;
use super::slurm::JobWatch;
use super::transport;
use ledger::Ledger;
use runner::SlotRunner;
use supervisor::{folder_identity, Supervisor, Tally};

/// Work for a slot. `K` is the submitter's tag, returned with the result.
#[derive(Debug, Clone)]
pub struct Job<K> {
    /// The submitter's tag.
    pub tag: K,
    /// The benchmark's files.
    pub bundle: Arc<Bundle>,
    /// What to do.
    pub work: Work,
}

/// What a job asks of a worker.
#[derive(Debug, Clone)]
pub enum Work {
    /// Find the benchmark's decision points.
    Discover(Box<BenchmarkSpec>),
    /// Run a step (its id, slot and CPUs are filled in at dispatch).
    Step(Box<StepRequest>),
}

/// A finished job.
#[derive(Debug)]
pub struct Done<K> {
    /// The submitter's tag.
    pub tag: K,
    /// The worker that ran it.
    pub worker: String,
    /// The slot that ran it.
    pub slot: u32,
    /// What came back.
    pub answer: Answer,
}

/// The answer to a job.
#[derive(Debug)]
pub enum Answer {
    /// Discovery result.
    Discovered(Result<Discovery, String>),
    /// Step result.
    Step(Box<StepResult>),
}

/// How a worker is doing, for tables and progress.
#[derive(Debug, Clone, PartialEq)]
pub enum WorkerState {
    /// Connecting for the first time.
    Connecting,
    /// Connected and taking jobs.
    Ok,
    /// Not reachable; retrying.
    Unreachable(String),
    /// Lost too often in a row; resting before the next try.
    Quarantined(String),
    /// Connected, but cannot run this campaign's steps: run limits it cannot apply, or it
    /// rejected a step (a CPU it lacks).
    Unfit(String),
}

impl std::fmt::Display for WorkerState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WorkerState::Connecting => f.write_str("connecting"),
            WorkerState::Ok => f.write_str("ok"),
            WorkerState::Unreachable(r) => write!(f, "unreachable: {r}"),
            WorkerState::Quarantined(r) => write!(f, "quarantined: {r}"),
            WorkerState::Unfit(r) => write!(f, "unfit: {r}"),
        }
    }
}

/// A worker's state and counters.
#[derive(Debug, Clone)]
pub struct WorkerStatus {
    /// State.
    pub state: WorkerState,
    /// Address (`local`, `user@host:port`).
    pub address: String,
    /// Capabilities from the last hello.
    pub capabilities: Option<Capabilities>,
    /// Jobs finished.
    pub jobs_done: u64,
    /// Time its slots spent on jobs, summed (ms): its utilisation, against
    /// its slots and the time since `since_ms`.
    pub busy_ms: u64,
    /// When the pool took it on (Unix ms).
    pub since_ms: u64,
    /// Times the connection was lost.
    pub losses: u64,
    /// Per slot: calibration figures and verdict (all default without calibration).
    pub calibration: Vec<SlotCalibration>,
    /// A Slurm worker's current job.
    pub slurm: Option<Arc<JobWatch>>,
}

/// Shared view of every worker's status.
pub type StatusBoard = Arc<Mutex<BTreeMap<String, WorkerStatus>>>;

/// Where workers come from and how they are watched.
#[derive(Debug, Clone)]
pub struct PoolSettings {
    /// The kiln-worker binary to run locally and to deploy.
    pub worker_binary: PathBuf,
    /// Folder for local workers' run directories.
    pub local_rundir: PathBuf,
    /// Connection timeouts.
    pub timeouts: Timeouts,
    /// Losses in a row before quarantine.
    pub quarantine_after: u32,
    /// The calibration benchmark every slot measures, if configured.
    pub calibration: Option<Arc<Calibrator>>,
    /// Run limits every worker must be able to apply.
    pub limits: Limits,
}

/// A job on the queue.
#[derive(Debug)]
struct Queued<K> {
    job: Job<K>,
    /// Times a worker refused it for lack of its bundle, which was then sent again.
    resent: u32,
}

/// The running pool.
pub struct Pool<K> {
    queue: async_channel::Sender<Queued<K>>,
    /// Finished jobs, in completion order.
    pub done: mpsc::UnboundedReceiver<Done<K>>,
    /// Every worker's status.
    pub board: StatusBoard,
    supervisors: Vec<tokio::task::JoinHandle<()>>,
}

impl<K> Pool<K> {
    /// Why no step can ever run, when every worker is unfit for this campaign.
    pub fn all_unfit(&self) -> Option<String> {
        let board = self.board.lock().expect("not poisoned");
        let reasons: Option<Vec<String>> = board
            .iter()
            .map(|(name, s)| match &s.state {
                WorkerState::Unfit(why) => Some(format!("worker {name}: {why}")),
                _ => None,
            })
            .collect();
        reasons.filter(|r| !r.is_empty()).map(|r| r.join("\n"))
    }
}
impl<K> Drop for Pool<K> {
    fn drop(&mut self) {
        for s in &self.supervisors {
            s.abort();
        }
    }
}
impl<K: Send + Sync + Clone + 'static> Pool<K> {
    /// Starts a supervisor per worker.
    pub fn start(workers: &[WorkerSpec], settings: PoolSettings) -> Pool<K> {
        let (queue, jobs) = async_channel::unbounded();
        let (done_tx, done) = mpsc::unbounded_channel();
        let board: StatusBoard = Arc::default();
        let ids = Arc::new(AtomicU64::new(1));
        let ledger = Ledger::default();
        let connecting = Arc::new(tokio::sync::Semaphore::new(supervisor::CONNECTING_AT_ONCE));
        let supervisors = workers
            .iter()
            .map(|spec| {
                let slurm = matches!(spec, WorkerSpec::Slurm(_)).then(Arc::default);
                board.lock().expect("not poisoned").insert(
                    spec.name().to_string(),
                    WorkerStatus {
                        state: WorkerState::Connecting,
                        address: address_of(spec),
                        capabilities: None,
                        jobs_done: 0,
                        busy_ms: 0,
                        since_ms: now_ms(),
                        losses: 0,
                        calibration: vec![SlotCalibration::default(); spec.slots() as usize],
                        slurm: slurm.clone(),
                    },
                );
                let supervisor = Supervisor {
                    local_home: folder_identity(settings.local_rundir.parent()),
                    spec: spec.clone(),
                    settings: settings.clone(),
                    jobs: jobs.clone(),
                    requeue: queue.clone(),
                    done: done_tx.clone(),
                    board: board.clone(),
                    ids: ids.clone(),
                    ledger: ledger.clone(),
                    slurm,
                    connecting: connecting.clone(),
                };
                tokio::spawn(supervisor.run())
            })
            .collect();
        Pool {
            queue,
            done,
            board,
            supervisors,
        }
    }

    /// Queues a job.
    pub fn submit(&self, job: Job<K>) {
        // The receiver lives in the supervisors for the pool's whole life.
        let _ = self.queue.try_send(Queued { job, resent: 0 });
    }
}

fn address_of(spec: &WorkerSpec) -> String {
    match spec {
        WorkerSpec::Local(_) => "local".into(),
        WorkerSpec::Ssh(s) => format!(
            "{}{}:{}",
            s.user.as_ref().map(|u| format!("{u}@")).unwrap_or_default(),
            s.host,
            s.port
        ),
        WorkerSpec::Slurm(s) => crate::dispatch::slurm::address(s),
    }
}
