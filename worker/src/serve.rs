//! `kiln-worker serve`: the protocol over a byte stream (stdin/stdout).
//!
//! The reading thread answers quick requests itself (hello, a bundle's
//! parts, ping, cancel) and hands steps and discoveries to one thread each, so a ping is
//! answered while steps run. Replies from all threads go through one locked
//! writer, whole frames at a time.
//!
//! Bad input: a frame whose payload is not a valid request gets an `Error`
//! reply and serving goes on. An oversized frame gets an `Error` reply, then
//! its announced payload is read and dropped without being stored, which
//! keeps the stream in step with the controller; if the stream ends while
//! draining, the session ends. A frame cut off by the end of the stream ends
//! the session cleanly, as does the end of the stream itself: running steps
//! are then cancelled (nobody is left to read their results).
//!
//! SIGTERM, SIGINT and SIGHUP (a controller stopped, Ctrl-C at a terminal, a
//! scheduler ending the job) cancel every step and discovery too, whose
//! process groups are killed, before the worker exits; so is every process
//! that escaped its group (see `launch::sweep`): nothing it started outlives it.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use kiln_protocol::bundle::BundlePart;
use kiln_protocol::config::BenchmarkSpec;
use kiln_protocol::frame::{self, FrameError};
use kiln_protocol::message::{Request, Response, StepId, StepOutcome, StepRequest, StepResult};
use kiln_protocol::ContentHash;
use kiln_protocol::PROTOCOL_VERSION;

use crate::launch::sweep::{sweep_escaped, Sweep};
use crate::launch::CancelToken;
use crate::probe;
use crate::step::{self, SlotState, Workspace};

/// Options of `kiln-worker serve`.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// The worker's folder: bundle cache, slots, discovery scratch.
    pub rundir: PathBuf,
    /// Largest frame accepted.
    pub max_frame: usize,
    /// Compilers whose versions hello reports.
    pub compilers: Vec<String>,
}

/// Serves one session until shutdown or the end of `input`.
pub fn serve(
    opts: &ServeOptions,
    mut input: impl Read,
    output: impl Write + Send + 'static,
) -> Result<(), String> {
    let ws = Workspace::open(&opts.rundir)?;
    tracing::info!("serving from {}", ws.rundir.display());
    let shared = Arc::new(Shared {
        ws,
        out: Mutex::new(Box::new(output)),
        slots: Mutex::new(HashMap::new()),
        running: Mutex::new(HashMap::new()),
        stopping: AtomicBool::new(false),
    });
    exit_on_signals(Arc::clone(&shared))?;
    let mut session = Session {
        shared,
        opts: opts.clone(),
        threads: Vec::new(),
    };
    loop {
        let read = frame::read_payload(&mut input, opts.max_frame);
        match session.on_frame(read, &mut input) {
            Flow::Continue => {}
            Flow::Stop => {
                session.finish();
                sweep_escaped(Sweep::All);
                session.shared.send(&Response::Bye);
                tracing::info!("shut down on request");
                return Ok(());
            }
            Flow::Ended => break,
        }
    }
    session.shared.cancel_all();
    session.finish();
    sweep_escaped(Sweep::All);
    Ok(())
}

/// Most time the steps get to end after a signal: killing a process group and
/// reaping it takes milliseconds, a discovery's removal of its folder longer.
const SIGNAL_GRACE: Duration = Duration::from_secs(10);

/// On SIGTERM, SIGINT or SIGHUP: cancels everything running, waits for it to
/// end (its process groups killed and reaped), and exits 128 + the signal.
fn exit_on_signals(shared: Arc<Shared>) -> Result<(), String> {
    let mut signals = Signals::new([SIGTERM, SIGINT, SIGHUP])
        .map_err(|e| format!("cannot handle signals: {e}"))?;
    std::thread::spawn(move || {
        let Some(signal) = signals.forever().next() else {
            return;
        };
        tracing::info!(
            "{} received: cancelling every step",
            crate::launch::signal_name(signal)
        );
        shared.stopping.store(true, Ordering::SeqCst);
        shared.cancel_all();
        let deadline = Instant::now() + SIGNAL_GRACE;
        while !lock(&shared.running).is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        sweep_escaped(Sweep::All);
        std::process::exit(128 + signal);
    });
    Ok(())
}

/// What a step or discovery reports if the worker hit a bug running it; the
/// slot is released and serving goes on.
const PANICKED: &str =
    "the worker panicked while handling this request (a worker bug; see its log)";

/// What the session does after a frame.
#[derive(PartialEq, Eq)]
enum Flow {
    Continue,
    /// Shut down on the controller's request.
    Stop,
    /// The session's input ended, or cannot be read on.
    Ended,
}

struct Shared {
    ws: Workspace,
    out: Mutex<Box<dyn Write + Send>>,
    /// Per slot: its state, or `None` while a step holds it.
    slots: Mutex<HashMap<u32, Option<SlotState>>>,
    /// Cancel tokens of running steps and discoveries.
    running: Mutex<HashMap<StepId, Arc<CancelToken>>>,
    /// Set once a signal told the worker to stop.
    stopping: AtomicBool,
}

impl Shared {
    fn send(&self, response: &Response) {
        let mut out = lock(&self.out);
        if let Err(e) = frame::write_frame(&mut *out, response) {
            tracing::warn!("cannot send a reply to the controller: {e}");
        }
    }

    fn error(&self, step: Option<StepId>, message: String) {
        self.send(&Response::Error { step, message });
    }

    fn cancel_all(&self) {
        for token in lock(&self.running).values() {
            token.cancel();
        }
    }

    /// A failed step that ended because the worker was stopped is cancelled,
    /// never the candidate's failure. A scheduler stops a job by signalling
    /// every process in it (`scancel`): the benchmark may die of the signal
    /// before the worker hears its own, so a run killed by a stopping signal
    /// waits a moment for the worker's.
    fn settle(&self, mut result: StepResult, token: &CancelToken) -> StepResult {
        if result.measurement.outcome == StepOutcome::Ok {
            return result;
        }
        let stop_signal = matches!(
            result.measurement.outcome,
            StepOutcome::RunFailed { signal: Some(s), .. } if [SIGTERM, SIGINT, SIGHUP].contains(&s)
        );
        let deadline = Instant::now() + STOP_HEARD_WITHIN;
        while stop_signal && !self.stopping.load(Ordering::SeqCst) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        if token.is_cancelled() || self.stopping.load(Ordering::SeqCst) {
            result.measurement.outcome = StepOutcome::Cancelled;
        }
        result
    }
}

/// How long a run killed by a stopping signal waits for the worker to hear
/// one too before it counts as the program's failure.
const STOP_HEARD_WITHIN: Duration = Duration::from_secs(1);

/// Locks a mutex, recovering the data if a thread panicked while holding it.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

struct Session {
    shared: Arc<Shared>,
    opts: ServeOptions,
    threads: Vec<JoinHandle<()>>,
}

impl Session {
    /// Takes one frame read from the controller: a request handled, a bad one answered with
    /// an error (an oversized one skipped in `input`), or the end of the session.
    fn on_frame(&mut self, read: Result<Vec<u8>, FrameError>, input: &mut impl Read) -> Flow {
        let shared = &self.shared;
        match read {
            Ok(payload) => match frame::decode::<Request>(&payload) {
                Ok(request) => return self.handle(request),
                Err(e) => {
                    tracing::warn!("{e}");
                    shared.error(None, format!("{e}"));
                }
            },
            Err(FrameError::Oversized { len, limit }) => {
                tracing::warn!(
                    "oversized frame: {len} bytes announced, limit {limit}; skipping it"
                );
                shared.error(
                    None,
                    format!(
                        "oversized frame: {len} bytes announced, this worker accepts at most \
                         {limit}; the frame was skipped"
                    ),
                );
                let skipped = io::copy(&mut input.take(len as u64), &mut io::sink()).unwrap_or(0);
                if skipped < len as u64 {
                    tracing::warn!(
                        "session ended inside the oversized frame ({skipped} of {len} bytes)"
                    );
                    return Flow::Ended;
                }
            }
            Err(FrameError::Closed) => {
                tracing::info!("the controller closed the session");
                return Flow::Ended;
            }
            Err(e @ FrameError::Truncated { .. }) => {
                tracing::warn!("session ended by a {e}");
                return Flow::Ended;
            }
            Err(e) => {
                tracing::error!("cannot read from the controller: {e}");
                return Flow::Ended;
            }
        }
        Flow::Continue
    }

    fn handle(&mut self, request: Request) -> Flow {
        let shared = &self.shared;
        match request {
            Request::Hello {
                protocol_version,
                controller_version,
            } => self.hello(protocol_version, &controller_version),
            Request::BundlePart(part) => self.store_part(&part),
            Request::HasBundle { hash } => {
                let holding = shared.ws.cache.holding(&hash);
                if let Some(why) = &holding.discarded {
                    tracing::warn!("{why}");
                }
                shared.send(&Response::BundleStatus {
                    hash,
                    present: holding.present,
                    parts_stored: holding.parts_stored,
                    warning: holding.discarded,
                })
            }
            Request::Discover {
                id,
                benchmark,
                bundle,
            } => self.start_discovery(id, benchmark, bundle),
            Request::Step(req) => self.start_step(*req),
            Request::Cancel { step } => match lock(&shared.running).get(&step) {
                Some(token) => {
                    tracing::info!("cancelling step {step}");
                    token.cancel();
                }
                None => shared.error(
                    Some(step),
                    format!("cannot cancel step {step}: it is not running"),
                ),
            },
            Request::Ping { nonce } => shared.send(&Response::Pong { nonce }),
            Request::Shutdown => return Flow::Stop,
        }
        Flow::Continue
    }

    /// Answers the controller's hello: this worker's capabilities, or an error where the
    /// two speak different protocol versions.
    fn hello(&self, protocol_version: u32, controller_version: &str) {
        if protocol_version != PROTOCOL_VERSION {
            self.shared.error(
                None,
                format!(
                    "protocol version mismatch: the controller ({controller_version}) speaks \
                     version {protocol_version}, this worker speaks version {PROTOCOL_VERSION}"
                ),
            );
            return;
        }
        tracing::info!("hello from controller {controller_version}");
        self.shared.send(&Response::Hello {
            protocol_version: PROTOCOL_VERSION,
            capabilities: Box::new(probe::capabilities(&self.opts.compilers)),
        });
    }

    /// Stores one part of a bundle: says when the bundle is whole, else which part is kept.
    fn store_part(&self, part: &BundlePart) {
        let shared = &self.shared;
        match shared.ws.cache.store_part(part) {
            Ok(Some(dir)) => {
                tracing::info!("bundle {} stored in {}", part.hash.short(), dir.display());
                shared.send(&Response::Prepared { hash: part.hash });
            }
            Ok(None) => shared.send(&Response::PartStored {
                hash: part.hash,
                index: part.index,
            }),
            Err(e) => shared.error(
                None,
                format!("cannot store bundle {}: {e}", part.hash.short()),
            ),
        }
    }

    /// Discovers a benchmark's decision points on a thread of its own.
    fn start_discovery(&mut self, id: StepId, benchmark: Box<BenchmarkSpec>, bundle: ContentHash) {
        let Some(token) = self.register(id) else {
            return;
        };
        let shared = Arc::clone(&self.shared);
        self.spawn(move || {
            let result = catch_unwind(AssertUnwindSafe(|| {
                let progress = |message| shared.send(&Response::Progress { id, message });
                step::discover(id, &benchmark, &bundle, &shared.ws, &token, &progress)
            }))
            .unwrap_or_else(|_| Err(PANICKED.to_string()));
            if let Err(e) = &result {
                tracing::warn!("discovery {id} of {} failed: {e}", benchmark.name);
            }
            lock(&shared.running).remove(&id);
            shared.send(&Response::Discovered { id, result });
        });
    }

    /// Registers a cancel token under `id`; `None` (after an error reply) if
    /// that id is already running or no token can be made.
    fn register(&self, id: StepId) -> Option<Arc<CancelToken>> {
        let mut running = lock(&self.shared.running);
        if running.contains_key(&id) {
            drop(running);
            self.shared
                .error(Some(id), format!("step {id} is already running"));
            return None;
        }
        match CancelToken::new() {
            Ok(token) => {
                let token = Arc::new(token);
                running.insert(id, Arc::clone(&token));
                Some(token)
            }
            Err(e) => {
                drop(running);
                self.shared
                    .error(Some(id), format!("cannot start step {id}: {e}"));
                None
            }
        }
    }

    fn start_step(&mut self, req: StepRequest) {
        let shared = Arc::clone(&self.shared);
        let (id, slot) = (req.id, req.slot);
        let state = {
            let mut slots = lock(&shared.slots);
            slots
                .entry(slot)
                .or_insert_with(|| Some(SlotState::default()))
                .take()
        };
        let Some(mut state) = state else {
            let reason = format!("slot {slot} is busy with another step");
            shared.send(&Response::StepDone(Box::new(StepResult::rejected(
                id, reason,
            ))));
            return;
        };
        let Some(token) = self.register(id) else {
            lock(&shared.slots).insert(slot, Some(state));
            return;
        };
        // Per-step lines are debug: at hundreds of steps a second they would
        // cost the worker and the controller (which logs what the worker says)
        // more than the steps; failures are logged at info.
        tracing::debug!("step {id} of {} starts in slot {slot}", req.benchmark.name);
        self.spawn(move || {
            let result = catch_unwind(AssertUnwindSafe(|| {
                step::run_step(&req, &shared.ws, &mut state, &token)
            }))
            .unwrap_or_else(|_| StepResult::rejected(id, PANICKED.to_string()));
            let result = shared.settle(result, &token);
            if result.measurement.outcome == StepOutcome::Ok {
                tracing::debug!("step {id} finished: ok");
            } else {
                tracing::info!("step {id} finished: {}", result.measurement.outcome);
            }
            lock(&shared.slots).insert(slot, Some(state));
            lock(&shared.running).remove(&id);
            shared.send(&Response::StepDone(Box::new(result)));
        });
    }

    fn spawn(&mut self, work: impl FnOnce() + Send + 'static) {
        self.threads.retain(|t| !t.is_finished());
        self.threads.push(std::thread::spawn(work));
    }

    /// Waits for every step and discovery to finish.
    fn finish(&mut self) {
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared(dir: &std::path::Path) -> Shared {
        Shared {
            ws: Workspace::open(dir).unwrap(),
            out: Mutex::new(Box::new(io::sink())),
            slots: Mutex::default(),
            running: Mutex::default(),
            stopping: AtomicBool::new(false),
        }
    }

    fn killed_by(signal: i32) -> StepResult {
        StepResult::new(
            StepId(1),
            StepOutcome::RunFailed {
                code: None,
                signal: Some(signal),
                signal_name: None,
                stderr_tail: String::new(),
            },
        )
    }

    /// A run killed by SIGTERM is the program's failure unless the worker is stopping too (a
    /// scheduler's scancel signals every process of the job): then it is cancelled, and the
    /// controller runs the step again.
    #[test]
    fn a_run_killed_as_the_worker_stops_is_cancelled_not_failed() {
        let dir = tempfile::tempdir().unwrap();
        let shared = shared(dir.path());
        let token = CancelToken::new().unwrap();
        let failed = shared.settle(killed_by(SIGTERM), &token);
        assert_eq!(failed.measurement.outcome.name(), "run-failed");
        shared.stopping.store(true, Ordering::SeqCst);
        let stopped = shared.settle(killed_by(SIGTERM), &token);
        assert_eq!(stopped.measurement.outcome, StepOutcome::Cancelled);
        let ok = shared.settle(StepResult::new(StepId(2), StepOutcome::Ok), &token);
        assert_eq!(
            ok.measurement.outcome,
            StepOutcome::Ok,
            "a finished measurement stands"
        );
    }
}
