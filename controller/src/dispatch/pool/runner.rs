//! One slot of a connected worker: calibrates when due, takes jobs from the
//! queue and runs them (alone, once a job has cost a worker), and hands each
//! answer on, or puts the job back when the connection is lost.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use anyhow::Result;
use tokio::sync::mpsc;

use kiln_protocol::{StepId, StepOutcome, StepResult};

use super::ledger::{Ledger, Losses};
use super::*;

/// Times a job is sent again, its bundle with it, to a worker that says it lacks the bundle;
/// past them the slot is unfit (a worker whose cache does not keep what it is sent).
const RESEND_BUNDLE: u32 = 3;

/// One slot of a connected worker: calibrates when due, runs jobs from the queue, and ends when
/// the connection is lost (putting its job back on the queue).
pub(super) struct SlotRunner<K> {
    pub(super) conn: Arc<Connection>,
    /// Held shared while a job runs on the connection, exclusively while a job that lost a
    /// worker before runs: alone, so that a loss then is its own.
    pub(super) turns: Arc<tokio::sync::RwLock<()>>,
    /// Losses after which a job is answered as failed.
    pub(super) step_losses: u32,
    pub(super) place: SlotPlace,
    pub(super) worker: String,
    pub(super) jobs: async_channel::Receiver<Queued<K>>,
    pub(super) requeue: async_channel::Sender<Queued<K>>,
    pub(super) done: mpsc::UnboundedSender<Done<K>>,
    pub(super) board: StatusBoard,
    pub(super) ids: Arc<AtomicU64>,
    /// Losses per decision set, all workers together.
    pub(super) ledger: Ledger,
    /// What became of this connection's jobs, all slots together.
    pub(super) tally: Arc<Tally>,
    pub(super) calibrator: Option<Arc<Calibrator>>,
}

impl<K: Send + Sync + Clone + 'static> SlotRunner<K> {
    pub(super) async fn run(self) {
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

    pub(super) fn next_id(&self) -> StepId {
        StepId(self.ids.fetch_add(1, Ordering::Relaxed))
    }

    /// Runs one job and hands its answer on; `false` once the connection is lost (the job is
    /// back on the queue for another slot, or answered as failed once it has cost its worker
    /// `step_losses` times).
    pub(super) async fn run_one(&self, queued: Queued<K>) -> bool {
        // The bundle first: a loss before the job is sent costs the job nothing. A worker
        // that refuses it is asked again a few times, then takes no more jobs.
        if let Err(Lost(reason)) = self.conn.ensure_bundle(&queued.job.bundle).await {
            return self.bundle_refused(queued, reason);
        }
        let before = self.ledger.losses(&queued.job);
        if before.times >= self.step_losses {
            // Another step brought a set that has already cost its workers: failed as it was.
            let answer = lost_answer(&queued.job, self.next_id(), before);
            self.hand_on(queued.job.tag, answer);
            return true;
        }
        let alone = before.times > 0;
        // Held until the answer is dealt with.
        let _turn = tokio::select! {
            biased;
            _ = self.conn.lost() => return self.requeue(queued),
            turn = self.turn(alone) => turn,
        };
        let id = self.next_id();
        let started = Instant::now();
        let answered = run_job(&self.conn, &queued.job, id, &self.place).await;
        self.on_board(|s| s.busy_ms += started.elapsed().as_millis() as u64);
        match answered {
            Ok(Answer::Step(result))
                if result.measurement.outcome.lacks_bundle() && queued.resent < RESEND_BUNDLE =>
            {
                self.resend_bundle(queued).await
            }
            Ok(Answer::Step(result))
                if matches!(result.measurement.outcome, StepOutcome::Rejected { .. }) =>
            {
                self.rejected(queued, &result.measurement.outcome)
            }
            Ok(answer) => self.finished(queued, answer),
            Err(Lost(reason)) if !self.conn.is_lost() => {
                // The worker is there but answered oddly: no loss of the job's making.
                tracing::warn!(worker = %self.worker, slot = self.place.slot, "job {id} re-queued: {reason}");
                let _ = self.requeue.try_send(queued);
                true
            }
            Err(Lost(reason)) => self.job_lost(queued, id, alone, reason),
        }
    }

    /// Changes this worker's entry on the board, where it has one.
    fn on_board(&self, change: impl FnOnce(&mut WorkerStatus)) {
        if let Some(s) = self
            .board
            .lock()
            .expect("not poisoned")
            .get_mut(&self.worker)
        {
            change(s);
        }
    }

    /// The worker did not take a job's bundle: the job goes back on the queue, and after
    /// [`RESEND_BUNDLE`] refusals the slot is unfit. Whether the slot takes more jobs.
    fn bundle_refused(&self, queued: Queued<K>, reason: String) -> bool {
        tracing::warn!(worker = %self.worker, slot = self.place.slot, "job re-queued: {reason}");
        if self.conn.is_lost() {
            return self.requeue(queued);
        }
        let resent = queued.resent + 1;
        let _ = self.requeue.try_send(Queued { resent, ..queued });
        if resent > RESEND_BUNDLE {
            self.unfit(format!(
                "slot {} cannot store a bundle: {reason}",
                self.place.slot
            ));
            return false;
        }
        true
    }

    /// The worker lost its folder (a cleaner, a reimage, a tmpfs after a reboot): prepared
    /// again, it takes the step as before.
    async fn resend_bundle(&self, queued: Queued<K>) -> bool {
        tracing::warn!(worker = %self.worker, slot = self.place.slot,
            "the worker lacks bundle {}: it is sent again", queued.job.bundle.hash.short());
        self.conn.forget_bundle(&queued.job.bundle.hash).await;
        let resent = queued.resent + 1;
        let _ = self.requeue.try_send(Queued { resent, ..queued });
        true
    }

    /// The worker could not run the step at all (a CPU it lacks, limits it cannot apply):
    /// that is no result of the candidate's. Another worker takes the step, and this slot
    /// takes no more.
    fn rejected(&self, queued: Queued<K>, outcome: &StepOutcome) -> bool {
        let _ = self.requeue.try_send(queued);
        self.unfit(format!(
            "slot {} rejected a step: {}",
            self.place.slot, outcome
        ));
        false
    }

    /// A job answered: counted, its decision set cleared of losses, the answer handed on.
    fn finished(&self, queued: Queued<K>, answer: Answer) -> bool {
        self.tally.finished.fetch_add(1, Ordering::Relaxed);
        self.ledger.acquit(&queued.job);
        self.on_board(|s| s.jobs_done += 1);
        self.hand_on(queued.job.tag, answer);
        true
    }

    /// The connection was lost while job `id` ran: the loss is charged to its decision set,
    /// and the job goes back on the queue, or is answered as failed once the set has cost
    /// its workers `step_losses` times. Always `false`: the slot is done.
    fn job_lost(&self, queued: Queued<K>, id: StepId, alone: bool, reason: String) -> bool {
        self.tally.interrupted.fetch_add(1, Ordering::Relaxed);
        if alone {
            self.tally.caused_by_a_job.fetch_add(1, Ordering::Relaxed);
        }
        let losses = self.ledger.charge(&queued.job, reason.clone());
        let times = losses.times;
        if times < self.step_losses {
            tracing::warn!(worker = %self.worker, slot = self.place.slot,
                "job {id} re-queued (its decision set lost a worker {times} times): {reason}");
            let _ = self.requeue.try_send(queued);
            return false;
        }
        tracing::error!(worker = %self.worker, slot = self.place.slot,
            "job {id}'s decision set lost a worker {times} times, the last: {reason}; recorded failed");
        let answer = lost_answer(&queued.job, id, losses);
        self.hand_on(queued.job.tag, answer);
        false
    }

    /// Marks the worker unfit for `why`: its job went back on the queue, and this slot takes
    /// no more.
    fn unfit(&self, why: String) {
        tracing::error!(worker = %self.worker, "{why}; the step goes back on the queue");
        if let Some(s) = self
            .board
            .lock()
            .expect("not poisoned")
            .get_mut(&self.worker)
        {
            s.state = WorkerState::Unfit(why);
        }
    }

    /// Puts a job back on the queue for another slot; `false` once the connection is lost.
    pub(super) fn requeue(&self, queued: Queued<K>) -> bool {
        let _ = self.requeue.try_send(queued);
        if self.conn.is_lost() {
            self.tally.interrupted.fetch_add(1, Ordering::Relaxed);
        }
        !self.conn.is_lost()
    }

    /// This slot's turn to run a job on the connection: shared with the other slots, or alone.
    pub(super) async fn turn(&self, alone: bool) -> Turn<'_> {
        match alone {
            true => Turn::Alone {
                _held: self.turns.write().await,
            },
            false => Turn::Shared {
                _held: self.turns.read().await,
            },
        }
    }

    pub(super) fn hand_on(&self, tag: K, answer: Answer) {
        let _ = self.done.send(Done {
            tag,
            worker: self.worker.clone(),
            slot: self.place.slot,
            answer,
        });
    }

    /// Calibrates when due (first thing on a connection, then every N jobs); while the slot is
    /// out of service, calibrates again every [`RECHECK`] until it is back within bounds.
    pub(super) async fn keep_calibrated(&self, jobs_since: &mut Option<u64>) -> Result<(), Lost> {
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
    pub(super) async fn calibrate(&self, calibrator: &Calibrator) -> Result<bool, Lost> {
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
pub(super) enum Turn<'a> {
    Shared {
        _held: tokio::sync::RwLockReadGuard<'a, ()>,
    },
    Alone {
        _held: tokio::sync::RwLockWriteGuard<'a, ()>,
    },
}

/// Runs a job whose bundle the worker has.
pub(super) async fn run_job<K>(
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

/// The answer to a job whose decision set cost its workers `losses.times` times.
fn lost_answer<K>(job: &Job<K>, id: StepId, losses: Losses) -> Answer {
    let Losses { times, last } = losses;
    match &job.work {
        Work::Step(_) => Answer::Step(Box::new(StepResult::new(
            id,
            StepOutcome::WorkerLost {
                times,
                reason: last,
            },
        ))),
        Work::Discover(_) => Answer::Discovered(Err(format!(
            "worker lost while discovering ({times} times; the last: {last})"
        ))),
    }
}
