//! The worker pool: keeps every slot of every worker busy from one queue.
//!
//! Each worker has a supervisor task that connects (with exponential backoff),
//! then runs one task per slot pulling jobs from the shared queue. A job whose
//! worker is lost goes back on the queue for another slot: it is never lost,
//! and since only the campaign loop records results, never recorded twice.
//! A worker lost several times in a row without finishing a job is
//! quarantined for a while.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Result;
use tokio::sync::mpsc;

use kiln_protocol::config::{BenchmarkSpec, Timeouts, WorkerSpec};
use kiln_protocol::message::{Bundle, Capabilities, Discovery};
use kiln_protocol::{StepId, StepRequest, StepResult};

use crate::connection::{Connection, Heartbeat, Lost};
use crate::transport;

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
    Discover(BenchmarkSpec),
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
}

impl std::fmt::Display for WorkerState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WorkerState::Connecting => f.write_str("connecting"),
            WorkerState::Ok => f.write_str("ok"),
            WorkerState::Unreachable(r) => write!(f, "unreachable: {r}"),
            WorkerState::Quarantined(r) => write!(f, "quarantined: {r}"),
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
}

/// The running pool.
pub struct Pool<K> {
    queue: async_channel::Sender<Job<K>>,
    /// Finished jobs, in completion order.
    pub done: mpsc::UnboundedReceiver<Done<K>>,
    /// Every worker's status.
    pub board: StatusBoard,
    supervisors: Vec<tokio::task::JoinHandle<()>>,
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
                board.lock().expect("not poisoned").insert(
                    spec.name().to_string(),
                    WorkerStatus {
                        state: WorkerState::Connecting,
                        address: address_of(spec),
                        capabilities: None,
                        jobs_done: 0,
                        losses: 0,
                    },
                );
                let supervisor = Supervisor {
                    spec: spec.clone(),
                    settings: settings.clone(),
                    jobs: jobs.clone(),
                    requeue: queue.clone(),
                    done: done_tx.clone(),
                    board: board.clone(),
                    ids: ids.clone(),
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
        let _ = self.queue.try_send(job);
    }
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
    }
}

struct Supervisor<K> {
    spec: WorkerSpec,
    settings: PoolSettings,
    jobs: async_channel::Receiver<Job<K>>,
    requeue: async_channel::Sender<Job<K>>,
    done: mpsc::UnboundedSender<Done<K>>,
    board: StatusBoard,
    ids: Arc<AtomicU64>,
}

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
                let rundir = self.settings.local_rundir.join(name);
                std::fs::create_dir_all(&rundir)?;
                transport::open_local(&self.settings.worker_binary, &rundir)?
            }
            WorkerSpec::Ssh(ssh) => {
                crate::ssh::open_ssh(
                    ssh,
                    Duration::from_secs_f64(t.connect_s),
                    &self.settings.worker_binary,
                )
                .await?
                .channel
            }
        };
        let heartbeat = Heartbeat {
            interval: Duration::from_secs_f64(t.heartbeat_s),
            lost_after: Duration::from_secs_f64(t.lost_after_s),
            hello_timeout: Duration::from_secs_f64(t.connect_s),
        };
        Connection::open(self.spec.name(), channel, heartbeat).await
    }

    async fn run(self) {
        let name = self.spec.name().to_string();
        let mut backoff = Duration::from_secs(1);
        let mut losses_in_a_row = 0u32;
        loop {
            let conn = match self.connect().await {
                Ok(conn) => conn,
                Err(e) => {
                    tracing::warn!(worker = %name, "cannot connect: {e:#}; retrying in {backoff:?}");
                    self.set_state(WorkerState::Unreachable(format!("{e:#}")));
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(60));
                    continue;
                }
            };
            tracing::info!(worker = %name, "connected");
            backoff = Duration::from_secs(1);
            {
                let mut board = self.board.lock().expect("not poisoned");
                if let Some(s) = board.get_mut(&name) {
                    s.state = WorkerState::Ok;
                    s.capabilities = Some(conn.capabilities.clone());
                }
            }
            let slots = self.spec.slots();
            let finished = Arc::new(AtomicU64::new(0));
            let slot_tasks: Vec<_> = (0..slots)
                .map(|slot| tokio::spawn(self.slot_loop(conn.clone(), slot, finished.clone())))
                .collect();
            let reason = conn.lost().await;
            for t in slot_tasks {
                let _ = t.await;
            }
            drop(conn);
            if let Some(s) = self.board.lock().expect("not poisoned").get_mut(&name) {
                s.losses += 1;
            }
            losses_in_a_row = if finished.load(Ordering::Relaxed) > 0 {
                1
            } else {
                losses_in_a_row + 1
            };
            tracing::warn!(worker = %name, "lost: {reason}");
            if losses_in_a_row >= self.settings.quarantine_after {
                let rest = Duration::from_secs(30) * losses_in_a_row;
                self.set_state(WorkerState::Quarantined(format!(
                    "lost {losses_in_a_row} times in a row without finishing a job (last: {reason}); retry in {rest:?}"
                )));
                tokio::time::sleep(rest).await;
            } else {
                self.set_state(WorkerState::Unreachable(reason));
                tokio::time::sleep(backoff).await;
            }
        }
    }

    fn slot_loop(
        &self,
        conn: Arc<Connection>,
        slot: u32,
        finished: Arc<AtomicU64>,
    ) -> impl std::future::Future<Output = ()> + Send + 'static {
        let jobs = self.jobs.clone();
        let requeue = self.requeue.clone();
        let done = self.done.clone();
        let board = self.board.clone();
        let ids = self.ids.clone();
        let cpus = slot_cpus(self.spec.cpus(), self.spec.slots(), slot);
        let worker = self.spec.name().to_string();
        async move {
            loop {
                let job = tokio::select! {
                    job = jobs.recv() => match job { Ok(job) => job, Err(_) => return },
                    _ = conn.lost() => return,
                };
                let id = StepId(ids.fetch_add(1, Ordering::Relaxed));
                match run_job(&conn, &job, id, slot, &cpus).await {
                    Ok(answer) => {
                        finished.fetch_add(1, Ordering::Relaxed);
                        if let Some(s) = board.lock().expect("not poisoned").get_mut(&worker) {
                            s.jobs_done += 1;
                        }
                        let _ = done.send(Done {
                            tag: job.tag,
                            worker: worker.clone(),
                            slot,
                            answer,
                        });
                    }
                    Err(Lost(reason)) => {
                        tracing::warn!(worker = %worker, slot, "job {id} re-queued: {reason}");
                        let _ = requeue.try_send(job);
                        if conn.is_lost() {
                            return;
                        }
                    }
                }
            }
        }
    }
}

async fn run_job<K>(
    conn: &Connection,
    job: &Job<K>,
    id: StepId,
    slot: u32,
    cpus: &[u32],
) -> Result<Answer, Lost> {
    conn.ensure_bundle(&job.bundle).await?;
    match &job.work {
        Work::Discover(spec) => Ok(Answer::Discovered(
            conn.discover(id, spec.clone(), job.bundle.hash).await?,
        )),
        Work::Step(request) => {
            let mut request = (**request).clone();
            request.id = id;
            request.slot = slot;
            request.cpus = cpus.to_vec();
            Ok(Answer::Step(Box::new(conn.step(request).await?)))
        }
    }
}

/// The CPUs of slot `slot`: the worker's CPU list split evenly across its slots.
pub fn slot_cpus(cpus: &[u32], slots: u32, slot: u32) -> Vec<u32> {
    if cpus.is_empty() || slots == 0 {
        return Vec::new();
    }
    let per = (cpus.len() / slots as usize).max(1);
    let start = (slot as usize * per) % cpus.len();
    cpus[start..(start + per).min(cpus.len())].to_vec()
}

#[cfg(test)]
mod tests {
    use super::slot_cpus;

    #[test]
    fn cpus_split_evenly_across_slots() {
        assert_eq!(slot_cpus(&[2, 3], 2, 0), vec![2]);
        assert_eq!(slot_cpus(&[2, 3], 2, 1), vec![3]);
        assert_eq!(slot_cpus(&[0, 1, 2, 3], 2, 1), vec![2, 3]);
        assert_eq!(slot_cpus(&[], 2, 1), Vec::<u32>::new());
    }
}
