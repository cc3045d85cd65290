//! Launching one command under control and accounting for it.
//!
//! Every launch gets its own process group (so a timeout or a cancel kills
//! the whole tree), is pinned to the slot's CPUs, sees only the environment
//! it is given, reads stdin from `/dev/null` and has its output captured. The
//! child is started as `posix_spawn` starts one (`clone` sharing our memory,
//! this thread suspended until it execs: no copy of our page tables). A
//! counted launch inherits the thread's perf counters (see `counters`),
//! which count from its exec on; the wall clock starts when it is about to
//! exec. The
//! leader is reaped with `wait4` for its rusage, and the rest of the group is
//! killed and reaped too, so no process is left behind. A process that left
//! the group (`setsid`, a double fork) is ended by [`sweep`] once the launch
//! is over.
//!
//! | module | owns |
//! |--------|------|
//! | [`spawn`] | the clone and exec, the child's CPUs, cgroups, streams and folder |
//! | [`sink`] | where output goes while the launch runs |
//! | [`checked_output`] | the lines of output compared with the baseline's, digested |
//! | [`watch`] | timeouts, cancels and memory limits while it runs; killing and reaping the group |
//! | [`counters`], [`sampler`], [`procfs`] | perf counters it inherits; its CPU and memory sampled from `/proc` |
//! | [`sweep`] | processes that left the group |
//! | [`cgroup`], [`container`] | CPU and memory limits; runs inside a container image |
//!
//! The lowest layer of the worker: it imports nothing else of it.

pub mod cgroup;
pub mod checked_output;
pub mod container;
pub mod counters;
pub(crate) mod procfs;
pub(crate) mod sampler;
mod sink;
mod spawn;
pub mod sweep;
mod watch;

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use kiln_protocol::decision::ContentHash;
use kiln_protocol::metric::Metrics;

use crate::launch::checked_output::LineFilter;
use crate::launch::counters::Inherited;
use crate::launch::sampler::{SampleStats, Sampler};
use sink::Sink;
pub use spawn::{allowed_cpus, exec_candidates, search_path};
use spawn::{dev_null, ensure_subreaper, pipe, searched, spawn, Started};
use sweep::{LaunchId, Sweep};
use watch::{kill_group, reap, reap_group, watch};

/// The `PATH` every build and run sees unless the benchmark overrides it.
pub const CLEAN_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// How many bytes of stderr (or of a build log) are kept.
pub const TAIL_BYTES: usize = 8192;

/// How long stragglers of a process group may take to die and be reaped.
const REAP_GRACE: Duration = Duration::from_secs(2);

/// Held shared while the worker has a file open for writing that something
/// may execute (a restored build, a copied script), and exclusively across
/// the clone of every launch. A child holds every descriptor open at its
/// clone until it execs, and a file open for writing anywhere cannot be
/// executed (`ETXTBSY`, "Text file busy"): without this, one slot's copy
/// would make another slot's run of it fail, a failure of kiln's own that
/// would be recorded as the program's.
static WRITING: RwLock<()> = RwLock::new(());

/// Runs `write` (which opens, writes and closes files) while no launch starts.
pub fn writing<T>(write: impl FnOnce() -> T) -> T {
    let _shared = WRITING.read().unwrap_or_else(|p| p.into_inner());
    write()
}

/// Spawns a standard-library command once no file is open for writing (see
/// [`writing`]): for the worker's own helpers (valgrind's version, container
/// engines), not for measured launches, which go through [`run`].
pub fn spawn_std(command: &mut std::process::Command) -> io::Result<std::process::Child> {
    let _exclusive = WRITING.write().unwrap_or_else(|p| p.into_inner());
    command.spawn()
}

/// [`spawn_std`], then the command's whole output.
pub fn output_std(command: &mut std::process::Command) -> io::Result<std::process::Output> {
    command
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    spawn_std(command)?.wait_with_output()
}

/// What happens to a command's output.
#[derive(Debug, Clone)]
pub enum Output {
    /// stdout goes to `/dev/null`; the tail of stderr is kept.
    Discard,
    /// The lines of stdout the filter checks are hashed as they stream (no
    /// size limit), their start kept; the tail of stderr is kept.
    HashStdout(LineFilter),
    /// stdout and stderr share one pipe and are kept, up to `cap` bytes (a build log).
    KeepMerged {
        /// Bytes kept; the rest is read and dropped.
        cap: usize,
    },
}

/// One command to launch.
#[derive(Debug, Clone)]
pub struct Launch {
    /// Program and arguments; the program is looked up in the given `PATH`.
    pub argv: Vec<String>,
    /// The working directory.
    pub cwd: PathBuf,
    /// The complete environment (nothing is inherited; the launch's
    /// [`sweep::MARKER`] is added).
    pub env: Vec<(String, String)>,
    /// CPUs to pin to; empty: no pinning.
    pub cpus: Vec<u32>,
    /// What happens to the output.
    pub output: Output,
    /// The whole process group is killed after this long.
    pub timeout: Duration,
    /// Whether to sample the group's CPU and memory use, and how often.
    pub sample_every: Option<Duration>,
    /// The `cgroup.procs` of each cgroup the child joins before it execs (run
    /// limits: one per hierarchy on cgroup v1, where each controller has its own).
    pub cgroups: Vec<Arc<OwnedFd>>,
    /// The whole group is killed once its resident memory passes this many
    /// bytes (checked every [`MEMORY_CHECK_EVERY`]; a build's limit, which
    /// needs no cgroup).
    pub memory_limit: Option<u64>,
    /// Strings looked for in the whole of stderr as it streams, not only in the tail kept:
    /// those it held are in [`Finished::stderr_seen`].
    pub stderr_watch: &'static [&'static str],
}

/// How often a launch with a memory limit sums its group's resident memory.
pub const MEMORY_CHECK_EVERY: Duration = Duration::from_millis(100);

/// How a launched command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// It exited with this code.
    Exited(i32),
    /// A signal killed it.
    Signaled(i32),
    /// It ran past its timeout and its group was killed.
    TimedOut,
    /// It was cancelled and its group was killed.
    Cancelled,
    /// Its group's resident memory passed this limit (bytes) and the group was killed.
    MemoryExceeded(u64),
}

/// Resource use of the process and the children it waited for (`wait4`).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Usage {
    /// User CPU time, ns.
    pub user_ns: u64,
    /// System CPU time, ns.
    pub system_ns: u64,
    /// Peak resident set size, bytes.
    pub max_rss_bytes: u64,
    /// Block input and output, bytes.
    pub block_io_bytes: u64,
}

/// Everything known about a launch once it is over.
#[derive(Debug, Clone)]
pub struct Finished {
    /// How it ended.
    pub end: End,
    /// From just before exec to the leader's exit.
    pub wall: Duration,
    /// rusage from `wait4`.
    pub usage: Usage,
    /// Digest of the checked lines of stdout, with [`Output::HashStdout`].
    pub stdout_digest: Option<ContentHash>,
    /// The start of those lines, with [`Output::HashStdout`].
    pub stdout_sample: Option<String>,
    /// The merged output, with [`Output::KeepMerged`].
    pub kept: Vec<u8>,
    /// Whether `kept` was cut at its cap.
    pub kept_truncated: bool,
    /// The last [`TAIL_BYTES`] of stderr (empty with [`Output::KeepMerged`]).
    pub stderr_tail: String,
    /// Which of [`Launch::stderr_watch`] stderr held anywhere.
    pub stderr_seen: Vec<&'static str>,
    /// perf counters, if asked for (unsupported ones say so).
    pub counters: Metrics,
    /// Sampled CPU and memory use, if asked for.
    pub samples: Option<SampleStats>,
}

/// A cancellation flag that also wakes a launch waiting in `poll`.
#[derive(Debug)]
pub struct CancelToken {
    flag: AtomicBool,
    event: OwnedFd,
}

impl CancelToken {
    /// A fresh, not cancelled token.
    pub fn new() -> io::Result<Self> {
        // SAFETY: eventfd has no memory arguments; the result is checked.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(CancelToken {
            flag: AtomicBool::new(false),
            // SAFETY: fd is a fresh descriptor that nothing else owns.
            event: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// Cancels: a running launch kills its process group, later ones do not start.
    pub fn cancel(&self) {
        self.flag.store(true, Ordering::SeqCst);
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to our own eventfd.
        unsafe { libc::write(self.event.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    /// Whether [`cancel`](Self::cancel) was called.
    pub fn is_cancelled(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }
}

/// The variables every build takes from the worker's own environment, so that
/// toolchains installed per user (rustup's proxies in `~/.cargo/bin`, a
/// compiler under `/opt`) are found as the worker finds them. Runs do not.
pub const TOOLCHAIN_ENV: &[&str] = &["PATH", "HOME", "RUSTUP_HOME", "CARGO_HOME"];

/// The environment of every build and run: a fixed `PATH`, `HOME`, `LANG=C`,
/// then `extra` (later entries override earlier ones with the same name).
pub fn clean_env(home: &Path, extra: &[(String, String)]) -> Vec<(String, String)> {
    let mut env: Vec<(String, String)> = vec![
        ("PATH".into(), CLEAN_PATH.into()),
        ("HOME".into(), home.display().to_string()),
        ("LANG".into(), "C".into()),
    ];
    for (k, v) in extra {
        env.retain(|(name, _)| name != k);
        env.push((k.clone(), v.clone()));
    }
    env
}

/// The conventional name of a signal (`SIGSEGV`), or `SIG<n>` for others.
pub fn signal_name(sig: i32) -> String {
    let name = match sig {
        libc::SIGHUP => "SIGHUP",
        libc::SIGINT => "SIGINT",
        libc::SIGQUIT => "SIGQUIT",
        libc::SIGILL => "SIGILL",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGFPE => "SIGFPE",
        libc::SIGKILL => "SIGKILL",
        libc::SIGUSR1 => "SIGUSR1",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGUSR2 => "SIGUSR2",
        libc::SIGPIPE => "SIGPIPE",
        libc::SIGALRM => "SIGALRM",
        libc::SIGTERM => "SIGTERM",
        libc::SIGSTKFLT => "SIGSTKFLT",
        libc::SIGCHLD => "SIGCHLD",
        libc::SIGCONT => "SIGCONT",
        libc::SIGSTOP => "SIGSTOP",
        libc::SIGTSTP => "SIGTSTP",
        libc::SIGTTIN => "SIGTTIN",
        libc::SIGTTOU => "SIGTTOU",
        libc::SIGURG => "SIGURG",
        libc::SIGXCPU => "SIGXCPU",
        libc::SIGXFSZ => "SIGXFSZ",
        libc::SIGVTALRM => "SIGVTALRM",
        libc::SIGPROF => "SIGPROF",
        libc::SIGWINCH => "SIGWINCH",
        libc::SIGIO => "SIGIO",
        libc::SIGPWR => "SIGPWR",
        libc::SIGSYS => "SIGSYS",
        _ => return format!("SIG{sig}"),
    };
    name.to_string()
}

/// Runs one command to its end (exit, signal, timeout or cancel), its whole
/// process group included. With `counters` (opened on this thread), the
/// child inherits them and the run's counts are in the result.
///
/// `Err` means it could not be started at all; the message names the command.
pub fn run(
    launch: &Launch,
    counters: Option<&mut Inherited>,
    cancel: Option<&CancelToken>,
) -> Result<Finished, String> {
    ensure_subreaper();
    if launch.argv.is_empty() {
        return Err("empty command: nothing to run".to_string());
    }
    let what = || format!("'{}' (in {})", launch.argv.join(" "), launch.cwd.display());
    if cancel.is_some_and(CancelToken::is_cancelled) {
        return Ok(Finished::cancelled_before_start());
    }

    let streams = Streams::open(&launch.output, &what)?;
    let counted = counters.map(|c| {
        let before = c.before_launch();
        (c, before)
    });
    let (id, Started { pid, pidfd, start }) = start_registered(launch, streams.stdio, &what)?;

    let mut out = Sink::new(&launch.output, streams.stdout);
    let mut err = Sink::tail(streams.stderr, launch.stderr_watch);
    let sampler = launch.sample_every.map(|every| Sampler::start(pid, every));

    let watched = watch(pid, pidfd, launch, start, cancel, &mut out, &mut err);
    // Our copies of the child's pipe ends stayed open until the leader
    // exited: its exit woke us once (its pidfd), not first for the pipes'
    // hang-up and again for the exit, which costs about 50 µs a run. Closed
    // now, they let the pipes see EOF once the group is gone.
    drop(streams.writers);
    let samples = sampler.map(Sampler::finish);
    let (status, usage) = end_group(pid, id, &what)?;
    out.drain();
    err.drain();
    let counters = counted.map_or_else(Metrics::new, |(c, before)| c.after_exit(before));

    let (stdout_digest, stdout_sample) = out.digest().unzip();
    let end = match watched.kill_reason {
        Some(reason) => reason,
        None if libc::WIFSIGNALED(status) => End::Signaled(libc::WTERMSIG(status)),
        None => End::Exited(libc::WEXITSTATUS(status)),
    };
    Ok(Finished {
        end,
        wall: watched.exited_at.saturating_duration_since(start),
        usage,
        stdout_digest,
        stdout_sample,
        kept_truncated: out.truncated,
        kept: out.kept,
        stderr_tail: err.tail_text(),
        stderr_seen: err.watch.seen(),
        counters,
        samples,
    })
}

/// The child's standard streams: stdin from /dev/null, stdout and stderr as the output asks.
struct Streams {
    /// The child's descriptors 0, 1 and 2.
    stdio: [RawFd; 3],
    /// The read ends the parent keeps: stdout (where it is read) and stderr (unless merged).
    stdout: Option<OwnedFd>,
    stderr: Option<OwnedFd>,
    /// Our copies of the child's ends of the pipes (stdout, stderr).
    writers: [Option<OwnedFd>; 2],
}

impl Streams {
    fn open(output: &Output, what: &dyn Fn() -> String) -> Result<Streams, String> {
        let null = dev_null()?;
        let pipe = || pipe().map_err(|e| format!("cannot create a pipe for {}: {e}", what()));
        let (stdout, stderr, writers) = match output {
            Output::Discard => {
                let (r, w) = pipe()?;
                (None, Some(r), [None, Some(w)])
            }
            Output::HashStdout(_) => {
                let ((or, ow), (er, ew)) = (pipe()?, pipe()?);
                (Some(or), Some(er), [Some(ow), Some(ew)])
            }
            Output::KeepMerged { .. } => {
                let (r, w) = pipe()?;
                (Some(r), None, [Some(w), None])
            }
        };
        let raw = |w: &Option<OwnedFd>| w.as_ref().map(AsRawFd::as_raw_fd);
        let out = raw(&writers[0]).unwrap_or(null);
        Ok(Streams {
            stdio: [null, out, raw(&writers[1]).unwrap_or(out)],
            stdout,
            stderr,
            writers,
        })
    }
}

/// Spawns the run's leader, registered (for the sweep of what escapes its group) before any
/// other launch can look.
fn start_registered(
    launch: &Launch,
    stdio: [RawFd; 3],
    what: &dyn Fn() -> String,
) -> Result<(LaunchId, Started), String> {
    let id = LaunchId::next();
    let mut registry = sweep::registry();
    let started = spawn(launch, id, stdio).map_err(|e| {
        format!(
            "cannot start {}: {e}{}",
            what(),
            searched(&launch.argv[0], &launch.env)
        )
    })?;
    registry.add(id, started.pid);
    Ok((id, started))
}

/// Ends a run whose leader `pid` exited: reaps it, kills and reaps what is left of its
/// process group and sweeps what escaped the group; the leader's status and usage.
fn end_group(pid: i32, id: LaunchId, what: &dyn Fn() -> String) -> Result<(i32, Usage), String> {
    // The leader is a zombie now, so its pid (the group id) cannot be reused:
    // killing the group reaches exactly our stragglers.
    kill_group(pid);
    let (status, usage) = reap(pid).map_err(|e| format!("cannot reap {}: {e}", what()))?;
    reap_group(pid);
    sweep::registry().remove(id, pid);
    let escaped = sweep::sweep_escaped(Sweep::After(id));
    if escaped > 0 {
        tracing::info!(
            "killed {escaped} processes that {} left running outside its process group",
            what()
        );
    }
    Ok((status, usage))
}

impl Finished {
    fn cancelled_before_start() -> Self {
        Finished {
            end: End::Cancelled,
            wall: Duration::ZERO,
            usage: Usage::default(),
            stdout_digest: None,
            stdout_sample: None,
            kept: Vec::new(),
            kept_truncated: false,
            stderr_tail: String::new(),
            stderr_seen: Vec::new(),
            counters: Metrics::new(),
            samples: None,
        }
    }
}

/// The first line of `NAME --version`, run with the toolchain environment builds get.
pub fn compiler_version(name: &str) -> Option<String> {
    let own = TOOLCHAIN_ENV
        .iter()
        .filter_map(|n| std::env::var_os(n).map(|v| (*n, v)));
    let out = output_std(
        std::process::Command::new(name)
            .arg("--version")
            .env_clear()
            .env("PATH", CLEAN_PATH)
            .envs(own),
    )
    .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let first = text.lines().next()?.trim();
    (out.status.success() && !first.is_empty()).then(|| first.to_string())
}

#[cfg(test)]
mod tests;
