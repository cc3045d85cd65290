//! The worker pool: keeps every slot of every worker busy from one queue.
//!
//! Each worker has a supervisor task that connects (with exponential backoff),
//! then runs one task per slot pulling jobs from the shared queue. A job whose
//! worker is lost goes back on the queue for another slot: it is never lost,
//! and since only the campaign loop records results, never recorded twice.
//!
//! A job may itself be what ends its worker (a decision set that crashes the
//! machine's kiln-worker, or kills it): once it has lost a worker it runs
//! alone on its next one, so that a further loss is its own, and after the
//! campaign's `step-losses` it is answered as failed ([`StepOutcome::WorkerLost`])
//! rather than sent again. A worker lost several times in a row without
//! finishing a job (losing the jobs it took, or dropping within a minute of
//! connecting) is quarantined for a while; losses a job running alone caused
//! count against the job, not the worker. A worker that answers hello with
//! something else, or a local one that cannot start, is unfit after
//! [`MAX_BAD_STARTS`] tries in a row. With calibration configured, each slot
//! measures the calibration benchmark before its first job and every N jobs
//! (see [`super::calibration`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::sync::mpsc;

use kiln_protocol::config::{BenchmarkSpec, Limits, Timeouts, WorkerSpec};
use kiln_protocol::message::{Bundle, Capabilities, Discovery};
use kiln_protocol::{StepId, StepOutcome, StepRequest, StepResult};

use super::calibration::{Calibrator, SlotCalibration, RECHECK};
use super::connection::{BadHello, Connection, Heartbeat, Lost, VersionMismatch};
use super::slot::SlotPlace;
use super::slurm::JobWatch;
use super::transport;
use crate::store::{layout, now_ms};

/// Longest wait between two connection attempts to an unreachable worker.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Quarantine lasts this long per loss in a row...
const QUARANTINE_PER_LOSS: Duration = Duration::from_secs(30);

/// ...and at most this long.
const MAX_QUARANTINE: Duration = Duration::from_secs(600);

/// A connection that held this long without losing work does not count towards quarantine.
const STABLE: Duration = Duration::from_secs(60);

/// Starts in a row that fail in a way waiting does not mend (garbage for a hello, a local
/// worker that cannot start) before the worker is unfit.
const MAX_BAD_STARTS: u32 = 3;

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

/// A job on the queue, with the workers it cost so far.
#[derive(Debug)]
struct Queued<K> {
    job: Job<K>,
    /// Times a worker was lost while running it.
    losses: u32,
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
                    slurm,
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
        let _ = self.queue.try_send(Queued { job, losses: 0 });
    }
}

/// A folder's device and inode: what stays the same while it is the same folder.
fn folder_identity(dir: Option<&Path>) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(dir?).ok()?;
    Some((meta.dev(), meta.ino()))
}

fn address_of(spec: &WorkerSpec) -> String {
    match spec {
        WorkerSpec::Local { .. } => "local".into(),
        WorkerSpec::Ssh(s) => format!(
            "{}{}:{}",
            s.user.as_ref().map(|u| format!("{u}@")).unwrap_or_default(),
            s.host,
            s.port
        ),
        WorkerSpec::Slurm(s) => super::slurm::address(s),
    }
}

struct Supervisor<K> {
    /// The identity of the folder local workers' rundirs live in (the store's) when the pool
    /// started: a local worker is never started in a folder that replaced it.
    local_home: Option<(u64, u64)>,
    spec: WorkerSpec,
    settings: PoolSettings,
    jobs: async_channel::Receiver<Queued<K>>,
    requeue: async_channel::Sender<Queued<K>>,
    done: mpsc::UnboundedSender<Done<K>>,
    board: StatusBoard,
    ids: Arc<AtomicU64>,
    /// A Slurm worker's job.
    slurm: Option<Arc<JobWatch>>,
}

/// How long a Slurm worker's hello may take: a job may wait in the queue for days, and srun
/// ends by itself when it cannot have an allocation.
const SLURM_HELLO: Duration = Duration::from_secs(365 * 24 * 3600);

impl<K: Send + Sync + Clone + 'static> Supervisor<K> {
    fn set_state(&self, state: WorkerState) {
        if let Some(s) = self
            .board
            .lock()
            .expect("not poisoned")
            .get_mut(self.spec.name())
        {
            s.state = state;
        }
    }

    async fn connect(&self) -> Result<Arc<Connection>> {
        let t = &self.settings.timeouts;
        let channel = match &self.spec {
            WorkerSpec::Local { name, .. } => {
                let home = self.settings.local_rundir.parent();
                if folder_identity(home) != self.local_home {
                    anyhow::bail!(
                        "{} is no longer the folder this controller started in (moved or \
                         replaced while it ran): no local worker is started in another store",
                        home.map_or(Path::new("?"), |h| h).display()
                    );
                }
                let rundir = layout::child(&self.settings.local_rundir, name)?;
                std::fs::create_dir_all(&rundir)
                    .with_context(|| format!("cannot create {}", rundir.display()))?;
                transport::open_local(name, &self.settings.worker_binary, &rundir)?
            }
            WorkerSpec::Ssh(ssh) => {
                super::ssh::open_ssh(
                    ssh,
                    Duration::from_secs_f64(t.connect_s),
                    &self.settings.worker_binary,
                )
                .await?
                .channel
            }
            WorkerSpec::Slurm(slurm) => {
                let watch = self.slurm.as_ref().expect("a Slurm worker has a job watch");
                let connect_timeout = Duration::from_secs_f64(t.connect_s);
                let binary = &self.settings.worker_binary;
                let channel =
                    super::slurm::open_slurm(slurm, connect_timeout, binary, watch).await?;
                let heartbeat = Heartbeat {
                    hello_timeout: SLURM_HELLO,
                    ..self.heartbeat()
                };
                return match Connection::open(self.spec.name(), channel, heartbeat).await {
                    Ok(conn) => {
                        watch.running(conn.capabilities.slurm_job);
                        Ok(conn)
                    }
                    Err(e) => Err(anyhow::anyhow!(
                        "slurm worker '{}': {}",
                        slurm.name,
                        watch.why_ended(&format!("{e:#}")).await
                    )),
                };
            }
        };
        Connection::open(self.spec.name(), channel, self.heartbeat()).await
    }

    fn heartbeat(&self) -> Heartbeat {
        let t = &self.settings.timeouts;
        Heartbeat {
            interval: Duration::from_secs_f64(t.heartbeat_s),
            lost_after: Duration::from_secs_f64(t.lost_after_s),
            hello_timeout: Duration::from_secs_f64(t.connect_s),
        }
    }

    async fn run(self) {
        let name = self.spec.name().to_string();
        let mut backoff = Duration::from_secs(1);
        let mut losses_in_a_row = 0u32;
        // Slurm allocations in a row that ended or never started without finishing a job.
        let mut allocations_lost = 0u32;
        // Starts in a row that failed in a way waiting does not mend.
        let mut bad_starts = 0u32;
        loop {
            let conn = match self.connect().await {
                Ok(conn) => conn,
                Err(e) if e.is::<VersionMismatch>() || self.is_bad_start(&e) => {
                    // Never better by itself: unfit, so that a campaign with no
                    // other worker stops and says why. Replaced, it is taken.
                    bad_starts += 1;
                    if e.is::<VersionMismatch>() || bad_starts >= MAX_BAD_STARTS {
                        tracing::error!(worker = %name, "takes no steps: {e:#}");
                        let tries = match bad_starts {
                            1 => String::new(),
                            n => format!(" ({n} tries in a row)"),
                        };
                        self.set_state(WorkerState::Unfit(format!("{e:#}{tries}")));
                        tokio::time::sleep(MAX_BACKOFF).await;
                    } else {
                        tracing::warn!(worker = %name, "cannot start: {e:#}; retrying in {backoff:?}");
                        self.set_state(WorkerState::Unreachable(format!("{e:#}")));
                        tokio::time::sleep(backoff).await;
                        backoff = (backoff * 2).min(MAX_BACKOFF);
                    }
                    continue;
                }
                Err(e) => {
                    allocations_lost += 1;
                    self.give_up_if_spent(allocations_lost, &format!("{e:#}"))
                        .await;
                    tracing::warn!(worker = %name, "cannot connect: {e:#}; retrying in {backoff:?}");
                    self.set_state(WorkerState::Unreachable(format!("{e:#}")));
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                    continue;
                }
            };
            if let Err(why) = conn.capabilities.limits.check(&self.settings.limits) {
                tracing::error!(worker = %name, "takes no steps: {why}");
                self.record(&conn, WorkerState::Unfit(why));
                drop(conn);
                // Its cgroups may be set up meanwhile: look again now and then.
                tokio::time::sleep(MAX_BACKOFF).await;
                continue;
            }
            tracing::info!(worker = %name, "connected");
            backoff = Duration::from_secs(1);
            bad_starts = 0;
            self.record(&conn, WorkerState::Ok);
            let connected_at = std::time::Instant::now();
            let tally = Arc::new(Tally::default());
            let turns = Arc::new(tokio::sync::RwLock::new(()));
            let mut slot_tasks = TaskGroup(
                (0..self.spec.slots())
                    .map(|slot| tokio::spawn(self.slot_runner(&conn, slot, &tally, &turns).run()))
                    .collect(),
            );
            let reason = conn.lost().await;
            for t in &mut slot_tasks.0 {
                let _ = t.await;
            }
            drop(conn);
            losses_in_a_row = tally.losses_in_a_row(losses_in_a_row, connected_at.elapsed());
            let reason = match &self.slurm {
                Some(watch) => watch.why_ended(&reason).await,
                None => reason,
            };
            tracing::warn!(worker = %name, "lost: {reason}");
            allocations_lost = if tally.finished.load(Ordering::Relaxed) > 0 {
                1
            } else {
                allocations_lost + 1
            };
            self.give_up_if_spent(allocations_lost, &reason).await;
            self.rest_after_loss(reason, losses_in_a_row).await;
        }
    }

    /// Whether a failed connection is one that waiting does not mend: the worker answered
    /// hello with something else than a hello (another program, a corrupt binary), or a local
    /// worker could not be started (a local one has no link to come back).
    fn is_bad_start(&self, e: &anyhow::Error) -> bool {
        e.is::<BadHello>() || matches!(self.spec, WorkerSpec::Local { .. })
    }

    /// Gives a Slurm worker up once its last `lost` allocations in a row ended or never started
    /// (the last because of `reason`) and its retries are spent: it is unfit from then on, and
    /// this never returns (the supervisor stays, so that the pool's answers do not end).
    async fn give_up_if_spent(&self, lost: u32, reason: &str) {
        let WorkerSpec::Slurm(slurm) = &self.spec else {
            return;
        };
        if lost <= slurm.retries {
            return;
        }
        let why = format!(
            "gave up after {lost} Slurm allocations in a row that ended or never started \
             (retries {}); the last: {reason}",
            slurm.retries
        );
        tracing::error!(worker = %slurm.name, "{why}");
        self.set_state(WorkerState::Unfit(why));
        std::future::pending::<()>().await;
    }

    /// Records a connected worker's state (`Ok`: taking jobs) and the capabilities it announced.
    fn record(&self, conn: &Connection, state: WorkerState) {
        let mut board = self.board.lock().expect("not poisoned");
        if let Some(s) = board.get_mut(self.spec.name()) {
            s.state = state;
            s.capabilities = Some(conn.capabilities.clone());
        }
    }

    /// Counts a loss and waits before reconnecting: briefly, or in quarantine when the worker
    /// was lost `losses_in_a_row` times without finishing a job.
    async fn rest_after_loss(&self, reason: String, losses_in_a_row: u32) {
        if let Some(s) = self
            .board
            .lock()
            .expect("not poisoned")
            .get_mut(self.spec.name())
        {
            s.losses += 1;
        }
        if losses_in_a_row >= self.settings.quarantine_after {
            let rest = (QUARANTINE_PER_LOSS * losses_in_a_row).min(MAX_QUARANTINE);
            self.set_state(WorkerState::Quarantined(format!(
                "lost {losses_in_a_row} times in a row without finishing a job (last: {reason}); retry in {rest:?}"
            )));
            tokio::time::sleep(rest).await;
        } else {
            self.set_state(WorkerState::Unreachable(reason));
            // A lost link often comes straight back (a restarted worker, a short outage).
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }

    fn slot_runner(
        &self,
        conn: &Arc<Connection>,
        slot: u32,
        tally: &Arc<Tally>,
        turns: &Arc<tokio::sync::RwLock<()>>,
    ) -> SlotRunner<K> {
        SlotRunner {
            conn: conn.clone(),
            turns: turns.clone(),
            step_losses: self.settings.timeouts.step_losses,
            place: SlotPlace::of(&self.spec, slot),
            worker: self.spec.name().to_string(),
            jobs: self.jobs.clone(),
            requeue: self.requeue.clone(),
            done: self.done.clone(),
            board: self.board.clone(),
            ids: self.ids.clone(),
            tally: tally.clone(),
            calibrator: self.settings.calibration.clone(),
        }
    }
}

/// What became of the work of one connection.
#[derive(Debug, Default)]
struct Tally {
    /// Jobs finished.
    finished: AtomicU64,
    /// Jobs and calibrations cut short by the loss of the connection.
    interrupted: AtomicU64,
    /// Losses that struck while a job that had lost a worker before ran alone: the job's doing.
    caused_by_a_job: AtomicU64,
}

impl Tally {
    /// Losses in a row without a finished job, this loss included, given the count before it
    /// and how long the connection `lasted`. A loss that cost no work after a connection that
    /// held for [`STABLE`] leaves the count as it was: quarantine is for workers that lose the
    /// jobs they take or cannot stay connected, not for idle links that flap now and then. A
    /// loss a job running alone caused leaves it as it was too: it counts against the job.
    fn losses_in_a_row(&self, before: u32, lasted: Duration) -> u32 {
        if self.finished.load(Ordering::Relaxed) > 0 {
            1
        } else if self.caused_by_a_job.load(Ordering::Relaxed) > 0 {
            before
        } else if self.interrupted.load(Ordering::Relaxed) > 0 || lasted < STABLE {
            before + 1
        } else {
            before
        }
    }
}

/// Tasks aborted on drop: a supervisor's slot tasks end with it (when the pool is dropped),
/// and with them their hold on the connection and its worker process.
struct TaskGroup(Vec<tokio::task::JoinHandle<()>>);

impl Drop for TaskGroup {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}

/// One slot of a connected worker: calibrates when due, runs jobs from the queue, and ends when
/// the connection is lost (putting its job back on the queue).
struct SlotRunner<K> {
    conn: Arc<Connection>,
    /// Held shared while a job runs on the connection, exclusively while a job that lost a
    /// worker before runs: alone, so that a loss then is its own.
    turns: Arc<tokio::sync::RwLock<()>>,
    /// Losses after which a job is answered as failed.
    step_losses: u32,
    place: SlotPlace,
    worker: String,
    jobs: async_channel::Receiver<Queued<K>>,
    requeue: async_channel::Sender<Queued<K>>,
    done: mpsc::UnboundedSender<Done<K>>,
    board: StatusBoard,
    ids: Arc<AtomicU64>,
    /// What became of this connection's jobs, all slots together.
    tally: Arc<Tally>,
    calibrator: Option<Arc<Calibrator>>,
}

impl<K: Send + Sync + Clone + 'static> SlotRunner<K> {
    async fn run(self) {
        // None until the slot has calibrated on this connection: a reconnect may mean another
        // machine state, so every connection starts with a calibration.
        let mut jobs_since_calibration: Option<u64> = None;
        loop {
            if let Err(Lost(reason)) = self.keep_calibrated(&mut jobs_since_calibration).await {
                tracing::warn!(worker = %self.worker, slot = self.place.slot, "calibration interrupted: {reason}");
                self.tally.interrupted.fetch_add(1, Ordering::Relaxed);
                return;
            }
            let job = tokio::select! {
                // A lost connection takes no more jobs.
                biased;
                _ = self.conn.lost() => return,
                job = self.jobs.recv() => match job { Ok(job) => job, Err(_) => return },
            };
            if !self.run_one(job).await {
                return;
            }
            jobs_since_calibration = jobs_since_calibration.map(|n| n + 1);
        }
    }

    fn next_id(&self) -> StepId {
        StepId(self.ids.fetch_add(1, Ordering::Relaxed))
    }

    /// Runs one job and hands its answer on; `false` once the connection is lost (the job is
    /// back on the queue for another slot, or answered as failed once it has cost its worker
    /// `step_losses` times).
    async fn run_one(&self, queued: Queued<K>) -> bool {
        // The bundle first: a loss before the job is sent costs the job nothing.
        if let Err(Lost(reason)) = self.conn.ensure_bundle(&queued.job.bundle).await {
            tracing::warn!(worker = %self.worker, slot = self.place.slot, "job re-queued: {reason}");
            return self.requeue(queued);
        }
        let alone = queued.losses > 0;
        let _turn = tokio::select! {
            biased;
            _ = self.conn.lost() => return self.requeue(queued),
            turn = self.turn(alone) => turn,
        };
        let id = self.next_id();
        match run_job(&self.conn, &queued.job, id, &self.place).await {
            Ok(Answer::Step(result)) if matches!(result.outcome, StepOutcome::Rejected { .. }) => {
                // The worker could not run the step at all (a CPU it lacks, limits it cannot
                // apply): that is no result of the candidate's. Another worker takes the step,
                // and this slot takes no more.
                let why = format!(
                    "slot {} rejected a step: {}",
                    self.place.slot, result.outcome
                );
                tracing::error!(worker = %self.worker, "{why}; the step goes back on the queue");
                let _ = self.requeue.try_send(queued);
                if let Some(s) = self
                    .board
                    .lock()
                    .expect("not poisoned")
                    .get_mut(&self.worker)
                {
                    s.state = WorkerState::Unfit(why);
                }
                false
            }
            Ok(answer) => {
                self.tally.finished.fetch_add(1, Ordering::Relaxed);
                if let Some(s) = self
                    .board
                    .lock()
                    .expect("not poisoned")
                    .get_mut(&self.worker)
                {
                    s.jobs_done += 1;
                }
                self.hand_on(queued.job.tag, answer);
                true
            }
            Err(Lost(reason)) if !self.conn.is_lost() => {
                // The worker is there but answered oddly: no loss of the job's making.
                tracing::warn!(worker = %self.worker, slot = self.place.slot, "job {id} re-queued: {reason}");
                let _ = self.requeue.try_send(queued);
                true
            }
            Err(Lost(reason)) => {
                self.tally.interrupted.fetch_add(1, Ordering::Relaxed);
                if alone {
                    self.tally.caused_by_a_job.fetch_add(1, Ordering::Relaxed);
                }
                let losses = queued.losses + 1;
                if losses < self.step_losses {
                    tracing::warn!(worker = %self.worker, slot = self.place.slot,
                        "job {id} re-queued (its worker lost {losses} times): {reason}");
                    let _ = self.requeue.try_send(Queued { losses, ..queued });
                    return false;
                }
                tracing::error!(worker = %self.worker, slot = self.place.slot,
                    "job {id} lost its worker {losses} times, the last: {reason}; recorded failed");
                let answer = match &queued.job.work {
                    Work::Step(_) => Answer::Step(Box::new(StepResult::new(
                        id,
                        StepOutcome::WorkerLost {
                            times: losses,
                            reason,
                        },
                    ))),
                    Work::Discover(_) => Answer::Discovered(Err(format!(
                        "worker lost while discovering ({losses} times; the last: {reason})"
                    ))),
                };
                self.hand_on(queued.job.tag, answer);
                false
            }
        }
    }

    /// Puts a job back on the queue for another slot; `false` once the connection is lost.
    fn requeue(&self, queued: Queued<K>) -> bool {
        let _ = self.requeue.try_send(queued);
        if self.conn.is_lost() {
            self.tally.interrupted.fetch_add(1, Ordering::Relaxed);
        }
        !self.conn.is_lost()
    }

    /// This slot's turn to run a job on the connection: shared with the other slots, or alone.
    async fn turn(&self, alone: bool) -> Turn<'_> {
        match alone {
            true => Turn::Alone {
                _held: self.turns.write().await,
            },
            false => Turn::Shared {
                _held: self.turns.read().await,
            },
        }
    }

    fn hand_on(&self, tag: K, answer: Answer) {
        let _ = self.done.send(Done {
            tag,
            worker: self.worker.clone(),
            slot: self.place.slot,
            answer,
        });
    }

    /// Calibrates when due (first thing on a connection, then every N jobs); while the slot is
    /// out of service, calibrates again every [`RECHECK`] until it is back within bounds.
    async fn keep_calibrated(&self, jobs_since: &mut Option<u64>) -> Result<(), Lost> {
        let Some(calibrator) = &self.calibrator else {
            return Ok(());
        };
        if jobs_since.is_some_and(|n| !calibrator.due(n)) {
            return Ok(());
        }
        while self.calibrate(calibrator).await? {
            tokio::select! {
                _ = tokio::time::sleep(RECHECK) => {}
                // Lost while idle: no work lost; the caller sees the loss and ends.
                _ = self.conn.lost() => return Ok(()),
            }
        }
        *jobs_since = Some(0);
        Ok(())
    }

    /// Measures the calibration benchmark and records the figure; whether the slot is now out
    /// of service.
    async fn calibrate(&self, calibrator: &Calibrator) -> Result<bool, Lost> {
        let figure = calibrator
            .measure(&self.conn, self.next_id(), &self.place)
            .await?;
        let mut board = self.board.lock().expect("not poisoned");
        let Some(s) = board
            .get_mut(&self.worker)
            .and_then(|w| w.calibration.get_mut(self.place.slot as usize))
        else {
            return Ok(false);
        };
        s.record(figure, &calibrator.settings, now_ms());
        let (worker, slot) = (&self.worker, self.place.slot);
        match &s.reason {
            Some(reason) if s.out_of_service => {
                tracing::warn!(worker = %worker, slot, "calibration: {reason}; out of service, re-checking in {RECHECK:?}")
            }
            Some(reason) => {
                tracing::warn!(worker = %worker, slot, "calibration flagged the slot: {reason}")
            }
            None => {
                tracing::info!(worker = %worker, slot, "calibration: {:.1} ms", s.last_ms.unwrap_or(f64::NAN))
            }
        }
        Ok(s.out_of_service)
    }
}

/// A slot's hold on its connection while its job runs (see `SlotRunner::turns`).
enum Turn<'a> {
    Shared {
        _held: tokio::sync::RwLockReadGuard<'a, ()>,
    },
    Alone {
        _held: tokio::sync::RwLockWriteGuard<'a, ()>,
    },
}

/// Runs a job whose bundle the worker has.
async fn run_job<K>(
    conn: &Connection,
    job: &Job<K>,
    id: StepId,
    place: &SlotPlace,
) -> Result<Answer, Lost> {
    match &job.work {
        Work::Discover(spec) => Ok(Answer::Discovered(
            conn.discover(id, (**spec).clone(), job.bundle.hash).await?,
        )),
        Work::Step(request) => {
            let mut request = (**request).clone();
            request.id = id;
            place.apply(&mut request);
            Ok(Answer::Step(Box::new(conn.step(request).await?)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Tally, STABLE};
    use std::sync::atomic::Ordering;

    #[test]
    fn only_losses_that_cost_work_or_come_quickly_lead_to_quarantine() {
        let long = STABLE * 2;
        let idle = Tally::default();
        assert_eq!(
            idle.losses_in_a_row(2, long),
            2,
            "an idle loss counts nothing"
        );
        assert_eq!(
            idle.losses_in_a_row(2, STABLE / 2),
            3,
            "unless it came quickly"
        );
        let crashed = Tally::default();
        crashed.interrupted.store(1, Ordering::Relaxed);
        assert_eq!(crashed.losses_in_a_row(2, long), 3);
        let worked = Tally::default();
        worked.finished.store(4, Ordering::Relaxed);
        worked.interrupted.store(1, Ordering::Relaxed);
        assert_eq!(
            worked.losses_in_a_row(2, long),
            1,
            "a finished job starts the count afresh"
        );
    }
}
