//! Byte-stream channels to `kiln-worker serve`: a local child process or a
//! remote one over SSH. Everything above this module speaks the protocol over
//! a [`Channel`] and does not care which.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use tokio::io::{AsyncRead, AsyncWrite};

/// A reader half of a worker channel.
pub type ChannelReader = Box<dyn AsyncRead + Send + Unpin>;
/// A writer half of a worker channel.
pub type ChannelWriter = Box<dyn AsyncWrite + Send + Unpin>;

/// An open byte stream to a worker's `serve` loop, plus what keeps it alive.
pub struct Channel {
    /// Frames from the worker.
    pub reader: ChannelReader,
    /// Frames to the worker.
    pub writer: ChannelWriter,
    /// Dropping it ends the worker process (local) or the SSH session.
    pub guard: ChannelGuard,
    /// Where the worker is, for messages (`local`, `user@host:port`).
    pub address: String,
}

/// Owns the process or session behind a channel; dropping it tears it down.
pub enum ChannelGuard {
    /// A local worker process.
    Local(LocalWorker),
    /// Anything else that must live as long as the channel (an SSH session and its child).
    Other(Box<dyn std::any::Any + Send + Sync>),
}

/// Starts `kiln-worker serve` as a child process of the controller.
pub fn open_local(name: &str, worker_binary: &Path, rundir: &Path) -> Result<Channel> {
    let mut child = tokio::process::Command::new(worker_binary)
        .arg("serve")
        .arg("--rundir")
        .arg(rundir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot start local worker {}", worker_binary.display()))?;
    forward_log(
        name.to_string(),
        child.stderr.take().expect("stderr is piped"),
    );
    let reader = Box::new(child.stdout.take().expect("stdout is piped"));
    let writer = Box::new(child.stdin.take().expect("stdin is piped"));
    Ok(Channel {
        reader,
        writer,
        guard: ChannelGuard::Local(LocalWorker(child)),
        address: "local".into(),
    })
}

/// A local `kiln-worker serve`. Dropped while it still runs (the campaign
/// was interrupted), it gets SIGTERM, on which it cancels its steps and kills
/// their process groups before it exits; a SIGKILL would orphan them. One that
/// has not exited after the grace is killed.
pub struct LocalWorker(tokio::process::Child);

/// How long a local worker gets to cancel its builds and runs and exit.
const WORKER_STOP_GRACE: Duration = Duration::from_secs(15);

impl Drop for LocalWorker {
    fn drop(&mut self) {
        let Some(pid) = self.0.id() else {
            return;
        };
        if matches!(self.0.try_wait(), Ok(Some(_))) {
            return;
        }
        // SIGCONT too: a worker declared lost because it was stopped (SIGSTOP) acts on the
        // SIGTERM only once it runs, and its builds and runs did not stop with it.
        // SAFETY: signals our own child, which is not reaped yet (try_wait said so).
        unsafe {
            libc::kill(pid as libc::pid_t, libc::SIGTERM);
            libc::kill(pid as libc::pid_t, libc::SIGCONT);
        }
        let deadline = Instant::now() + WORKER_STOP_GRACE;
        while Instant::now() < deadline {
            if !matches!(self.0.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        tracing::warn!(
            "local worker {pid} did not stop within {WORKER_STOP_GRACE:?} of SIGTERM; killing it"
        );
        let _ = self.0.start_kill();
    }
}

/// Forwards a worker's log lines into the controller's log file (target
/// `kiln::worker`, tagged with the worker's name). They stay off the terminal:
/// what matters to the user (failed steps, lost workers) the controller reports
/// itself.
pub fn forward_log(
    name: String,
    stderr: impl tokio::io::AsyncRead + Send + Unpin + 'static,
) -> tokio::task::JoinHandle<()> {
    use tokio::io::AsyncBufReadExt;
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            tracing::info!(target: "kiln::worker", worker = %name, "{line}");
        }
    })
}

/// The kiln-worker binary to start locally and to deploy: `$KILN_WORKER`, or
/// the one beside this executable.
pub fn worker_binary() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os("KILN_WORKER") {
        return Ok(PathBuf::from(path));
    }
    let exe = std::env::current_exe().context("cannot locate the kiln executable")?;
    let dir = exe.parent().context("kiln executable has no folder")?;
    // Integration tests run from target/*/deps; the binary sits one level up.
    for candidate in [dir.join("kiln-worker"), dir.join("../kiln-worker")] {
        if candidate.exists() {
            return Ok(candidate);
        }
    }
    bail!(
        "cannot find kiln-worker beside {}; build it (cargo build --release) or set KILN_WORKER",
        exe.display()
    )
}
