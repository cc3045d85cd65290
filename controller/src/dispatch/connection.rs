//! A live protocol session with one worker.
//!
//! A reader task routes each response to the request waiting for it; a pinger
//! task pings the worker and a watchdog task watches the silence. When the
//! stream ends, a frame is bad, or nothing arrives within the loss timeout, the
//! connection is marked lost and every waiting request fails with [`Lost`], so
//! the pool can re-dispatch.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use tokio::io::AsyncWriteExt;
use tokio::sync::{oneshot, watch, Mutex};

use kiln_protocol::bundle::Bundle;
use kiln_protocol::frame::{self, FrameError, MAX_FRAME};
use kiln_protocol::message::{Capabilities, Discovery};
use kiln_protocol::{
    ContentHash, Request, Response, StepId, StepRequest, StepResult, PROTOCOL_VERSION,
};

use super::transport::{Channel, ChannelGuard, ChannelReader, ChannelWriter};

/// A worker that speaks another protocol version than this controller: it
/// cannot serve until it is replaced by the matching `kiln-worker`.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct VersionMismatch(pub String);

/// The worker answered hello with something else than a hello: garbage on
/// the stream (another program, a corrupt binary) or a refusal. Retrying does
/// not mend it, so the pool gives such a worker up after a few tries.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BadHello(pub String);

/// The worker was lost while a request was outstanding.
#[derive(Debug, Clone, thiserror::Error)]
#[error("worker lost: {0}")]
pub struct Lost(pub String);

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
enum Waiting {
    Step(StepId),
    Bundle(ContentHash),
}

type Waiters = Arc<StdMutex<HashMap<Waiting, oneshot::Sender<Response>>>>;

/// An open session with a worker.
pub struct Connection {
    /// What the worker said of itself at hello.
    pub capabilities: Capabilities,
    writer: Mutex<ChannelWriter>,
    waiters: Waiters,
    lost: watch::Receiver<Option<String>>,
    /// The last sign of life: a frame from the worker, or the worker taking in our bytes.
    last_heard: Arc<StdMutex<Instant>>,
    prepared: Mutex<HashSet<ContentHash>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    _guard: ChannelGuard,
}

/// Frames are written in pieces of this size, each one a sign that the worker reads.
const WRITE_PIECE: usize = 64 << 10;

impl Drop for Connection {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

/// Heartbeat settings of a connection.
#[derive(Debug, Clone, Copy)]
pub struct Heartbeat {
    /// Interval between pings.
    pub interval: Duration,
    /// Silence after which the worker is lost.
    pub lost_after: Duration,
    /// Time allowed for the hello exchange.
    pub hello_timeout: Duration,
}

impl Connection {
    /// Says hello over `channel` and starts the reader and heartbeat tasks.
    pub async fn open(
        name: &str,
        channel: Channel,
        heartbeat: Heartbeat,
    ) -> Result<Arc<Connection>> {
        let Channel {
            mut reader,
            mut writer,
            guard,
            address,
        } = channel;
        let answer = exchange_hello(name, &address, &mut reader, &mut writer, heartbeat).await?;
        let capabilities = capabilities_of(answer, name, &address)?;

        let (lost_tx, lost) = watch::channel(None);
        let heard = Hearing {
            waiters: Arc::default(),
            lost_tx: Arc::new(lost_tx),
            last_heard: Arc::new(StdMutex::new(Instant::now())),
            name: name.to_string(),
        };
        let (waiters, last_heard) = (heard.waiters.clone(), heard.last_heard.clone());
        let reader_task = spawn_reader(reader, heard.clone());
        let watchdog_task = spawn_watchdog(heartbeat, heard);
        let connection = Arc::new_cyclic(|weak: &std::sync::Weak<Connection>| {
            let pinger_task = spawn_pinger(weak.clone(), lost.clone(), heartbeat.interval);
            Connection {
                capabilities,
                writer: Mutex::new(writer),
                waiters,
                lost,
                last_heard,
                prepared: Mutex::default(),
                tasks: vec![reader_task, watchdog_task, pinger_task],
                _guard: guard,
            }
        });
        Ok(connection)
    }

    /// Resolves once the connection is lost, with the reason.
    pub async fn lost(&self) -> String {
        let mut rx = self.lost.clone();
        loop {
            if let Some(reason) = rx.borrow().clone() {
                return reason;
            }
            if rx.changed().await.is_err() {
                return "connection dropped".into();
            }
        }
    }

    /// Whether the connection is already lost.
    pub fn is_lost(&self) -> bool {
        self.lost.borrow().is_some()
    }

    async fn send(&self, request: &Request) -> Result<(), Lost> {
        if let Some(reason) = self.lost.borrow().clone() {
            return Err(Lost(reason));
        }
        let mut w = self.writer.lock().await;
        // A worker reading a large frame (a bundle) cannot answer pings meanwhile; each piece
        // it takes in after the first shows it alive, while a stalled write shows nothing. A
        // small frame (a ping) proves nothing: the stream's buffers take it from a frozen
        // worker too, so only its answers keep such a worker alive.
        let bytes = frame::encode(request);
        for (i, piece) in bytes.chunks(WRITE_PIECE).enumerate() {
            w.write_all(piece)
                .await
                .map_err(|e| Lost(format!("cannot write to worker: {e}")))?;
            if i > 0 {
                *self.last_heard.lock().expect("not poisoned") = Instant::now();
            }
        }
        w.flush()
            .await
            .map_err(|e| Lost(format!("cannot write to worker: {e}")))
    }

    async fn call(&self, key: Waiting, request: &Request) -> Result<Response, Lost> {
        let (tx, rx) = oneshot::channel();
        self.waiters
            .lock()
            .expect("not poisoned")
            .insert(key.clone(), tx);
        let mut lost = self.lost.clone();
        // A write stalled on a dead stream ends when the heartbeat declares the worker lost.
        let sent = tokio::select! {
            sent = self.send(request) => sent,
            _ = lost.wait_for(Option::is_some) => Err(self.lost_reason()),
        };
        if let Err(e) = sent {
            self.waiters.lock().expect("not poisoned").remove(&key);
            return Err(e);
        }
        tokio::select! {
            answer = rx => answer.map_err(|_| self.lost_reason()),
            _ = lost.wait_for(Option::is_some) => {
                self.waiters.lock().expect("not poisoned").remove(&key);
                Err(self.lost_reason())
            }
        }
    }

    fn lost_reason(&self) -> Lost {
        Lost(
            self.lost
                .borrow()
                .clone()
                .unwrap_or_else(|| "connection dropped".into()),
        )
    }

    /// Forgets that `bundle` was sent: the worker says it lacks it (its folder removed or
    /// replaced since), so the next job over it sends it again.
    pub async fn forget_bundle(&self, bundle: &ContentHash) {
        self.prepared.lock().await.remove(bundle);
    }

    /// Makes sure the worker has `bundle`, sending only the parts it lacks (a
    /// transfer cut off earlier resumes where it stopped).
    pub async fn ensure_bundle(&self, bundle: &Bundle) -> Result<(), Lost> {
        let mut prepared = self.prepared.lock().await;
        if prepared.contains(&bundle.hash) {
            return Ok(());
        }
        let key = Waiting::Bundle(bundle.hash);
        let (present, parts_stored) = match self
            .call(key.clone(), &Request::HasBundle { hash: bundle.hash })
            .await?
        {
            Response::BundleStatus {
                present,
                parts_stored,
                warning,
                ..
            } => {
                if let Some(warning) = warning {
                    tracing::warn!("{warning}; sending it again");
                }
                (present, parts_stored)
            }
            other => return Err(Lost(format!("unexpected answer to has-bundle: {other:?}"))),
        };
        if !present {
            for part in bundle.parts().into_iter().skip(parts_stored as usize) {
                let last = part.index + 1 == part.count;
                match self
                    .call(key.clone(), &Request::BundlePart(Box::new(part)))
                    .await?
                {
                    Response::PartStored { .. } if !last => {}
                    Response::Prepared { .. } if last => {}
                    Response::Error { message, .. } => {
                        return Err(Lost(format!("worker refused bundle: {message}")))
                    }
                    other => {
                        return Err(Lost(format!(
                            "unexpected answer to a bundle part: {other:?}"
                        )))
                    }
                }
            }
        }
        prepared.insert(bundle.hash);
        Ok(())
    }

    /// Runs a step and waits for its result.
    pub async fn step(&self, request: StepRequest) -> Result<StepResult, Lost> {
        let id = request.id;
        match self
            .call(Waiting::Step(id), &Request::Step(Box::new(request)))
            .await?
        {
            Response::StepDone(result) => Ok(*result),
            // Not a loss: the worker is there but refuses the step (the pool sets it aside
            // rather than send it the step again and again).
            Response::Error { message, .. } => Ok(StepResult::rejected(id, message)),
            other => Err(Lost(format!("unexpected answer to step: {other:?}"))),
        }
    }

    /// Finds a benchmark's decision points.
    pub async fn discover(
        &self,
        id: StepId,
        benchmark: kiln_protocol::config::BenchmarkSpec,
        bundle: ContentHash,
    ) -> Result<Result<Discovery, String>, Lost> {
        let request = Request::Discover {
            id,
            benchmark: Box::new(benchmark),
            bundle,
        };
        match self.call(Waiting::Step(id), &request).await? {
            Response::Discovered { result, .. } => Ok(result),
            Response::Error { message, .. } => Ok(Err(message)),
            other => Err(Lost(format!("unexpected answer to discover: {other:?}"))),
        }
    }
}
/// Sends hello and reads the answer, the whole exchange bounded: a stalled stream must not
/// hang the supervisor.
async fn exchange_hello(
    name: &str,
    address: &str,
    reader: &mut ChannelReader,
    writer: &mut ChannelWriter,
    heartbeat: Heartbeat,
) -> Result<Response> {
    let hello = Request::Hello {
        protocol_version: PROTOCOL_VERSION,
        controller_version: env!("CARGO_PKG_VERSION").into(),
    };
    let exchange = async {
        frame::write_frame_async(writer, &hello)
            .await
            .with_context(|| format!("worker {name} ({address}): cannot send hello"))?;
        match frame::read_frame_async::<Response>(reader, MAX_FRAME).await {
            Ok(answer) => Ok(answer),
            Err(e @ (FrameError::Malformed(_) | FrameError::Oversized { .. })) => Err(BadHello(
                format!("worker {name} ({address}) answered hello with garbage: {e}"),
            )
            .into()),
            Err(e) => Err(anyhow::Error::new(e)
                .context(format!("worker {name} ({address}): no answer to hello"))),
        }
    };
    tokio::time::timeout(heartbeat.hello_timeout, exchange)
        .await
        .with_context(|| {
            format!(
                "worker {name} ({address}): no hello within {:?}",
                heartbeat.hello_timeout
            )
        })?
}

/// The capabilities a worker's answer to hello gives, or why it cannot serve.
fn capabilities_of(answer: Response, name: &str, address: &str) -> Result<Capabilities> {
    match answer {
        Response::Hello {
            protocol_version: PROTOCOL_VERSION,
            capabilities,
        } => Ok(*capabilities),
        Response::Hello { protocol_version, .. } => Err(VersionMismatch(format!(
            "worker {name} ({address}) speaks protocol {protocol_version}, this controller {PROTOCOL_VERSION}"
        ))
        .into()),
        Response::Error { message, .. } if message.starts_with("protocol version mismatch") => {
            Err(VersionMismatch(format!(
                "worker {name} ({address}) refused hello: {message}"
            ))
            .into())
        }
        Response::Error { message, .. } => {
            Err(BadHello(format!("worker {name} ({address}) refused hello: {message}")).into())
        }
        other => Err(BadHello(format!(
            "worker {name} ({address}) answered hello with {other:?}"
        ))
        .into()),
    }
}

/// What the reader and the watchdog share with the connection: who waits for which answer,
/// when the worker was last heard, and where to say it is lost.
#[derive(Clone)]
struct Hearing {
    waiters: Waiters,
    lost_tx: Arc<watch::Sender<Option<String>>>,
    last_heard: Arc<StdMutex<Instant>>,
    name: String,
}

impl Hearing {
    /// Marks the connection lost, failing every request still waiting.
    fn lost(&self, reason: String) {
        mark_lost(&self.lost_tx, &self.waiters, reason);
    }
}

/// Routes each frame from the worker to the request waiting for it, noting it heard;
/// marks the connection lost when the stream ends or a frame is bad.
fn spawn_reader(mut reader: ChannelReader, heard: Hearing) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let reason = loop {
            match frame::read_frame_async::<Response>(&mut reader, MAX_FRAME).await {
                Ok(response) => {
                    *heard.last_heard.lock().expect("not poisoned") = Instant::now();
                    route(&heard.waiters, response, &heard.name);
                }
                Err(e) => break format!("connection closed: {e}"),
            }
        };
        heard.lost(reason);
    })
}

/// Marks the connection lost once the worker has been silent for `heartbeat.lost_after`.
///
/// The watchdog never waits on the writer: a stalled stream cannot keep a silent worker
/// alive. Silence counts only while the controller itself was there: a wake later than asked
/// by more than an interval (the controller stopped, its host stalled) starts the count
/// afresh, so that the worker's answers to the pings sent since, and what it wrote meanwhile,
/// are heard before it is blamed.
fn spawn_watchdog(heartbeat: Heartbeat, heard: Hearing) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut counted_from = Instant::now();
        loop {
            let asleep = Instant::now();
            tokio::time::sleep(heartbeat.interval).await;
            let away = asleep.elapsed().saturating_sub(heartbeat.interval);
            if away > heartbeat.interval {
                tracing::info!(
                    worker = %heard.name,
                    "the controller was away for {:.0} s: the worker's silence counts from now",
                    away.as_secs_f64()
                );
                counted_from = Instant::now();
            }
            let since = heard.last_heard.lock().expect("not poisoned").elapsed();
            let silent = since.min(counted_from.elapsed());
            if silent > heartbeat.lost_after {
                let reason = format!("no answer for {:.0} s", silent.as_secs_f64());
                heard.lost(reason);
                return;
            }
        }
    })
}

/// Pings the worker every `interval`. The pinger holds only a weak reference, and gives up a
/// stalled ping once the worker is lost, so that the connection can drop.
fn spawn_pinger(
    weak: std::sync::Weak<Connection>,
    mut lost_rx: watch::Receiver<Option<String>>,
    interval: Duration,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut nonce = 0u64;
        loop {
            tokio::time::sleep(interval).await;
            let Some(conn) = weak.upgrade() else { return };
            nonce += 1;
            let ping = Request::Ping { nonce };
            tokio::select! {
                sent = conn.send(&ping) => if sent.is_err() { return },
                _ = lost_rx.wait_for(Option::is_some) => return,
            }
        }
    })
}

fn route(waiters: &Waiters, response: Response, name: &str) {
    let key = match &response {
        Response::StepDone(r) => Waiting::Step(r.id),
        Response::Discovered { id, .. } => Waiting::Step(*id),
        Response::Error { step: Some(id), .. } => Waiting::Step(*id),
        Response::Prepared { hash }
        | Response::PartStored { hash, .. }
        | Response::BundleStatus { hash, .. } => Waiting::Bundle(*hash),
        Response::Error {
            step: None,
            message,
        } => {
            // Errors without a step answer a bundle request, if one waits.
            let mut w = waiters.lock().expect("not poisoned");
            let bundle_key = w.keys().find(|k| matches!(k, Waiting::Bundle(_))).cloned();
            match bundle_key.and_then(|k| w.remove(&k)) {
                Some(tx) => {
                    let _ = tx.send(response);
                }
                None => tracing::warn!(worker = name, "worker error: {message}"),
            }
            return;
        }
        Response::Progress { message, .. } => {
            // For the person waiting on a discovery; the answer follows.
            crate::logging::note(format_args!("{name}: {message}"));
            return;
        }
        Response::Pong { .. } => return,
        Response::Hello { .. } | Response::Bye => return,
    };
    let tx = waiters.lock().expect("not poisoned").remove(&key);
    match tx {
        Some(tx) => {
            let _ = tx.send(response);
        }
        None => tracing::debug!(worker = name, "answer nobody waits for: {key:?}"),
    }
}

fn mark_lost(lost_tx: &watch::Sender<Option<String>>, waiters: &Waiters, reason: String) {
    lost_tx.send_if_modified(|v| {
        if v.is_none() {
            *v = Some(reason);
            true
        } else {
            false
        }
    });
    // Dropping the senders wakes every waiter with an error.
    waiters.lock().expect("not poisoned").clear();
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dispatch::transport::{Channel, ChannelGuard};
    use kiln_protocol::bundle::BundleFile;

    fn capabilities() -> Capabilities {
        Capabilities {
            worker_version: "test".into(),
            hostname: "fake".into(),
            kernel: "-".into(),
            cpu_model: "-".into(),
            cpu_flags: vec![],
            cores: 1,
            governor: None,
            aslr: None,
            counters: Default::default(),
            valgrind: None,
            gpus: vec![],
            compilers: Default::default(),
            build_modes: Default::default(),
            gpu_time: Err("no GPU".into()),
            limits: Default::default(),
            slurm_job: None,
        }
    }

    /// The fake worker's side of hello.
    async fn say_hello(
        reader: &mut (impl tokio::io::AsyncRead + Unpin),
        writer: &mut (impl tokio::io::AsyncWrite + Unpin),
    ) {
        let _: Request = frame::read_frame_async(reader, MAX_FRAME).await.unwrap();
        let hello = Response::Hello {
            protocol_version: PROTOCOL_VERSION,
            capabilities: Box::new(capabilities()),
        };
        frame::write_frame_async(writer, &hello).await.unwrap();
    }

    /// Opens a connection to a fake worker, declared lost after 0.5 s of silence.
    async fn connect_fake(
        reader: impl tokio::io::AsyncRead + Send + Unpin + 'static,
        writer: impl tokio::io::AsyncWrite + Send + Unpin + 'static,
    ) -> Result<Arc<Connection>> {
        let channel = Channel {
            reader: Box::new(reader),
            writer: Box::new(writer),
            guard: ChannelGuard::Other(Box::new(())),
            address: "fake".into(),
        };
        let heartbeat = Heartbeat {
            interval: Duration::from_millis(100),
            lost_after: Duration::from_millis(500),
            hello_timeout: Duration::from_secs(5),
        };
        Connection::open("fake", channel, heartbeat).await
    }

    /// A connection to a fake worker that said hello.
    async fn open_fake(
        reader: impl tokio::io::AsyncRead + Send + Unpin + 'static,
        writer: impl tokio::io::AsyncWrite + Send + Unpin + 'static,
    ) -> Arc<Connection> {
        connect_fake(reader, writer).await.unwrap()
    }

    /// A worker of another protocol version, as a newer one answers (its own
    /// hello) and as an older one does (a refusal): both are told apart from
    /// a worker that cannot be reached, since neither gets better by retrying.
    #[tokio::test]
    async fn a_worker_of_another_protocol_is_a_version_mismatch() {
        let answers = [
            Response::Hello {
                protocol_version: PROTOCOL_VERSION + 1,
                capabilities: Box::new(capabilities()),
            },
            Response::Error {
                step: None,
                message: "protocol version mismatch: the controller speaks version 9".into(),
            },
        ];
        for answer in answers {
            let (ours, theirs) = tokio::io::duplex(4096);
            let (our_reader, our_writer) = tokio::io::split(ours);
            let (mut reader, mut writer) = tokio::io::split(theirs);
            let _fake = tokio::spawn(async move {
                let _: Request = frame::read_frame_async(&mut reader, MAX_FRAME)
                    .await
                    .unwrap();
                frame::write_frame_async(&mut writer, &answer)
                    .await
                    .unwrap();
            });
            let e = connect_fake(our_reader, our_writer).await.err().unwrap();
            assert!(e.is::<VersionMismatch>(), "{e:#}");
        }
    }

    /// A bundle of 1 MiB, about 1.4 MB on the wire.
    fn big_bundle() -> Bundle {
        Bundle::new(vec![BundleFile {
            path: "big".into(),
            executable: false,
            contents: vec![7; 1 << 20],
            modified_ns: None,
        }])
    }

    /// A worker that says hello, answers one has-bundle with "missing", then reads nothing
    /// more (a hung process, a dead link with full buffers): the bundle's write stalls.
    #[tokio::test]
    async fn a_stalled_write_does_not_keep_a_silent_worker_alive() {
        let (ours, theirs) = tokio::io::duplex(4096);
        let (our_reader, our_writer) = tokio::io::split(ours);
        let (mut reader, mut writer) = tokio::io::split(theirs);
        let _fake = tokio::spawn(async move {
            say_hello(&mut reader, &mut writer).await;
            if let Request::HasBundle { hash } = frame::read_frame_async(&mut reader, MAX_FRAME)
                .await
                .unwrap()
            {
                let missing = Response::BundleStatus {
                    hash,
                    present: false,
                    parts_stored: 0,
                    warning: None,
                };
                frame::write_frame_async(&mut writer, &missing)
                    .await
                    .unwrap();
            }
            // Hold the stream open without reading.
            tokio::time::sleep(Duration::from_secs(600)).await;
            drop((reader, writer));
        });
        let conn = open_fake(our_reader, our_writer).await;
        let bundle = big_bundle();
        let started = Instant::now();
        let answer = tokio::time::timeout(Duration::from_secs(10), conn.ensure_bundle(&bundle))
            .await
            .expect("a stalled write ends once the worker is lost");
        assert!(answer.is_err(), "the bundle cannot have arrived");
        assert!(conn.is_lost());
        assert!(started.elapsed() < Duration::from_secs(3));
    }

    /// A frozen worker (SIGSTOP, a hung machine) keeps its stream open, and the stream's
    /// buffers take in our pings: only an answer shows a worker alive, so it is lost.
    #[tokio::test]
    async fn pings_that_nobody_answers_do_not_keep_a_frozen_worker_alive() {
        let (ours, theirs) = tokio::io::duplex(1 << 20);
        let (our_reader, our_writer) = tokio::io::split(ours);
        let (mut reader, mut writer) = tokio::io::split(theirs);
        let _fake = tokio::spawn(async move {
            say_hello(&mut reader, &mut writer).await;
            tokio::time::sleep(Duration::from_secs(600)).await;
            drop((reader, writer));
        });
        let conn = open_fake(our_reader, our_writer).await;
        let started = Instant::now();
        let reason = tokio::time::timeout(Duration::from_secs(5), conn.lost())
            .await
            .expect("a worker that answers nothing is lost");
        assert!(reason.contains("no answer"), "{reason}");
        // lost_after (0.5 s) plus one heartbeat (0.1 s), and some slack for a busy machine.
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
    }

    /// A worker that takes in a large bundle more slowly than `lost_after` (a slow link) is
    /// not lost: every piece it reads is a sign of life.
    #[tokio::test]
    async fn a_slow_but_steady_upload_keeps_the_worker_alive() {
        use tokio::io::AsyncReadExt;
        let (ours, theirs) = tokio::io::duplex(4096);
        let (our_reader, our_writer) = tokio::io::split(ours);
        let (mut reader, mut writer) = tokio::io::split(theirs);
        let _fake = tokio::spawn(async move {
            say_hello(&mut reader, &mut writer).await;
            loop {
                let mut header = [0u8; 4];
                reader.read_exact(&mut header).await.unwrap();
                let mut payload = vec![0u8; u32::from_be_bytes(header) as usize];
                // 64 KiB every 100 ms: about 2 s for this bundle, four times `lost_after`.
                for piece in payload.chunks_mut(64 << 10) {
                    reader.read_exact(piece).await.unwrap();
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                let answer = match frame::decode::<Request>(&payload).unwrap() {
                    Request::HasBundle { hash } => Response::BundleStatus {
                        hash,
                        present: false,
                        parts_stored: 0,
                        warning: None,
                    },
                    Request::BundlePart(p) if p.index + 1 < p.count => Response::PartStored {
                        hash: p.hash,
                        index: p.index,
                    },
                    Request::BundlePart(p) => Response::Prepared { hash: p.hash },
                    Request::Ping { nonce } => Response::Pong { nonce },
                    other => panic!("unexpected {other:?}"),
                };
                frame::write_frame_async(&mut writer, &answer)
                    .await
                    .unwrap();
            }
        });
        let conn = open_fake(our_reader, our_writer).await;
        let bundle = big_bundle();
        let started = Instant::now();
        conn.ensure_bundle(&bundle)
            .await
            .expect("the bundle arrives over the slow link");
        assert!(
            started.elapsed() > Duration::from_secs(1),
            "the link was slow"
        );
        assert!(!conn.is_lost());
    }
}
