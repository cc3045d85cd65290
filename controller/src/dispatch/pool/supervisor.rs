//! One worker's supervisor: connects (with backoff), gives a connected
//! worker one runner per slot, and after a loss decides how long to rest:
//! briefly, in quarantine when the worker keeps losing the jobs it takes, or
//! for good (unfit) when it cannot be made to serve.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use tokio::sync::mpsc;

use kiln_protocol::config::{LocalWorker, WorkerSpec};

use crate::store::layout;

use super::*;

/// First wait between two connection attempts to an unreachable worker...
const FIRST_BACKOFF: Duration = Duration::from_secs(1);

/// ...doubled after each, up to this.
pub(super) const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// Quarantine lasts this long per loss in a row...
pub(super) const QUARANTINE_PER_LOSS: Duration = Duration::from_secs(30);

/// ...and at most this long.
pub(super) const MAX_QUARANTINE: Duration = Duration::from_secs(600);

/// A connection that held this long without losing work does not count towards quarantine.
pub(super) const STABLE: Duration = Duration::from_secs(60);

/// Starts in a row that fail in a way waiting does not mend (garbage for a hello, a local
/// worker that cannot start) before the worker is unfit.
pub(super) const MAX_BAD_STARTS: u32 = 3;

/// Where a worker's reconnecting stands: what its waits and giving it up depend on.
struct Retries {
    /// The wait before the next connection attempt.
    backoff: Duration,
    /// Connections in a row that lost work before they held [`STABLE`].
    losses_in_a_row: u32,
    /// Slurm allocations in a row that ended or never started without finishing a job.
    allocations_lost: u32,
    /// Starts in a row that failed in a way waiting does not mend.
    bad_starts: u32,
}

impl Retries {
    fn new() -> Self {
        Retries {
            backoff: FIRST_BACKOFF,
            losses_in_a_row: 0,
            allocations_lost: 0,
            bad_starts: 0,
        }
    }
}

/// A folder's device and inode: what stays the same while it is the same folder.
pub(super) fn folder_identity(dir: Option<&Path>) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(dir?).ok()?;
    Some((meta.dev(), meta.ino()))
}

pub(super) struct Supervisor<K> {
    /// The identity of the folder local workers' rundirs live in (the store's) when the pool
    /// started: a local worker is never started in a folder that replaced it.
    pub(super) local_home: Option<(u64, u64)>,
    pub(super) spec: WorkerSpec,
    pub(super) settings: PoolSettings,
    pub(super) jobs: async_channel::Receiver<Queued<K>>,
    pub(super) requeue: async_channel::Sender<Queued<K>>,
    pub(super) done: mpsc::UnboundedSender<Done<K>>,
    pub(super) board: StatusBoard,
    pub(super) ids: Arc<AtomicU64>,
    pub(super) ledger: Ledger,
    /// A Slurm worker's job.
    pub(super) slurm: Option<Arc<JobWatch>>,
    /// Turns to connect to an SSH worker, shared by the pool's supervisors.
    pub(super) connecting: Arc<tokio::sync::Semaphore>,
}

/// SSH workers connecting (handshakes, deployment, hello) at once. A hundred at once on a
/// 2-core controller each outlasted the 30 s connect timeout, and all retried together.
pub(super) const CONNECTING_AT_ONCE: usize = 16;

/// How long a Slurm worker's hello may take: a job may wait in the queue for days, and srun
/// ends by itself when it cannot have an allocation.
pub(super) const SLURM_HELLO: Duration = Duration::from_secs(365 * 24 * 3600);

impl<K: Send + Sync + Clone + 'static> Supervisor<K> {
    pub(super) fn set_state(&self, state: WorkerState) {
        if let Some(s) = self
            .board
            .lock()
            .expect("not poisoned")
            .get_mut(self.spec.name())
        {
            s.state = state;
        }
    }

    pub(super) async fn connect(&self) -> Result<Arc<Connection>> {
        let t = &self.settings.timeouts;
        let channel = match &self.spec {
            WorkerSpec::Local(LocalWorker { name, .. }) => {
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
                // Its turn held until the worker said hello: see CONNECTING_AT_ONCE.
                let _turn = self.connecting.acquire().await?;
                let channel = crate::dispatch::ssh::open_ssh(
                    ssh,
                    Duration::from_secs_f64(t.connect_s),
                    &self.settings.worker_binary,
                )
                .await?
                .channel;
                return Connection::open(self.spec.name(), channel, self.heartbeat()).await;
            }
            WorkerSpec::Slurm(slurm) => {
                let watch = self.slurm.as_ref().expect("a Slurm worker has a job watch");
                let connect_timeout = Duration::from_secs_f64(t.connect_s);
                let binary = &self.settings.worker_binary;
                let channel =
                    crate::dispatch::slurm::open_slurm(slurm, connect_timeout, binary, watch)
                        .await?;
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

    pub(super) fn heartbeat(&self) -> Heartbeat {
        let t = &self.settings.timeouts;
        Heartbeat {
            interval: Duration::from_secs_f64(t.heartbeat_s),
            lost_after: Duration::from_secs_f64(t.lost_after_s),
            hello_timeout: Duration::from_secs_f64(t.connect_s),
        }
    }

    pub(super) async fn run(self) {
        let mut retries = Retries::new();
        loop {
            let conn = match self.connect().await {
                Ok(conn) => conn,
                Err(e) => {
                    self.after_failed_start(&mut retries, e).await;
                    continue;
                }
            };
            if let Err(why) = conn.capabilities.limits.check(&self.settings.limits) {
                tracing::error!(worker = %self.spec.name(), "takes no steps: {why}");
                self.record(&conn, WorkerState::Unfit(why));
                drop(conn);
                // Its cgroups may be set up meanwhile: look again now and then.
                tokio::time::sleep(MAX_BACKOFF).await;
                continue;
            }
            tracing::info!(worker = %self.spec.name(), "connected");
            retries.backoff = FIRST_BACKOFF;
            retries.bad_starts = 0;
            self.record(&conn, WorkerState::Ok);
            self.serve_until_lost(conn, &mut retries).await;
        }
    }

    /// After a start that failed: unfit where waiting does not mend it, else unreachable
    /// for a while (longer after each failure).
    async fn after_failed_start(&self, r: &mut Retries, e: anyhow::Error) {
        let name = self.spec.name();
        if e.is::<VersionMismatch>() || self.is_bad_start(&e) {
            // Never better by itself: unfit, so that a campaign with no
            // other worker stops and says why. Replaced, it is taken.
            r.bad_starts += 1;
            if e.is::<VersionMismatch>() || r.bad_starts >= MAX_BAD_STARTS {
                tracing::error!(worker = %name, "takes no steps: {e:#}");
                let tries = match r.bad_starts {
                    1 => String::new(),
                    n => format!(" ({n} tries in a row)"),
                };
                self.set_state(WorkerState::Unfit(format!("{e:#}{tries}")));
                tokio::time::sleep(MAX_BACKOFF).await;
                return;
            }
            tracing::warn!(worker = %name, "cannot start: {e:#}; retrying in {:?}", r.backoff);
        } else {
            r.allocations_lost += 1;
            self.give_up_if_spent(r.allocations_lost, &format!("{e:#}"))
                .await;
            tracing::warn!(worker = %name, "cannot connect: {e:#}; retrying in {:?}", r.backoff);
        }
        self.set_state(WorkerState::Unreachable(format!("{e:#}")));
        tokio::time::sleep(r.backoff).await;
        r.backoff = (r.backoff * 2).min(MAX_BACKOFF);
    }

    /// Runs the worker's slots on `conn` until the connection is lost, then rests as the
    /// losses in a row say (or gives a spent Slurm worker up).
    async fn serve_until_lost(&self, conn: Arc<Connection>, r: &mut Retries) {
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
        r.losses_in_a_row = tally.losses_in_a_row(r.losses_in_a_row, connected_at.elapsed());
        let reason = match &self.slurm {
            Some(watch) => watch.why_ended(&reason).await,
            None => reason,
        };
        tracing::warn!(worker = %self.spec.name(), "lost: {reason}");
        r.allocations_lost = if tally.finished.load(Ordering::Relaxed) > 0 {
            1
        } else {
            r.allocations_lost + 1
        };
        self.give_up_if_spent(r.allocations_lost, &reason).await;
        self.rest_after_loss(reason, r.losses_in_a_row).await;
    }

    /// Whether a failed connection is one that waiting does not mend: the worker answered
    /// hello with something else than a hello (another program, a corrupt binary), or a local
    /// worker could not be started (a local one has no link to come back).
    pub(super) fn is_bad_start(&self, e: &anyhow::Error) -> bool {
        e.is::<BadHello>() || matches!(self.spec, WorkerSpec::Local(_))
    }

    /// Gives a Slurm worker up once its last `lost` allocations in a row ended or never started
    /// (the last because of `reason`) and its retries are spent: it is unfit from then on, and
    /// this never returns (the supervisor stays, so that the pool's answers do not end).
    pub(super) async fn give_up_if_spent(&self, lost: u32, reason: &str) {
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
    pub(super) fn record(&self, conn: &Connection, state: WorkerState) {
        let mut board = self.board.lock().expect("not poisoned");
        if let Some(s) = board.get_mut(self.spec.name()) {
            s.state = state;
            s.capabilities = Some(conn.capabilities.clone());
        }
    }

    /// Counts a loss and waits before reconnecting: briefly, or in quarantine when the worker
    /// was lost `losses_in_a_row` times without finishing a job.
    pub(super) async fn rest_after_loss(&self, reason: String, losses_in_a_row: u32) {
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

    pub(super) fn slot_runner(
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
            ledger: self.ledger.clone(),
            tally: tally.clone(),
            calibrator: self.settings.calibration.clone(),
        }
    }
}

/// What became of the work of one connection.
#[derive(Debug, Default)]
pub(super) struct Tally {
    /// Jobs finished.
    pub(super) finished: AtomicU64,
    /// Jobs and calibrations cut short by the loss of the connection.
    pub(super) interrupted: AtomicU64,
    /// Losses that struck while a decision set that had lost a worker before ran alone: the
    /// set's doing.
    pub(super) caused_by_a_job: AtomicU64,
}

impl Tally {
    /// Losses in a row without a finished job, this loss included, given the count before it
    /// and how long the connection `lasted`. A loss that cost no work after a connection that
    /// held for [`STABLE`] leaves the count as it was: quarantine is for workers that lose the
    /// jobs they take or cannot stay connected, not for idle links that flap now and then. A
    /// loss a set running alone caused leaves it as it was too: it counts against the set.
    pub(super) fn losses_in_a_row(&self, before: u32, lasted: Duration) -> u32 {
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
pub(super) struct TaskGroup(Vec<tokio::task::JoinHandle<()>>);

impl Drop for TaskGroup {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
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
