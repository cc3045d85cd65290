//! Launching one command under control and accounting for it.
//!
//! Every launch gets its own process group (so a timeout or a cancel kills
//! the whole tree), is pinned to the slot's CPUs, sees only the environment
//! it is given, reads stdin from `/dev/null` and has its output captured. The
//! child waits on a gate between fork and exec, so perf counters are opened on
//! it before it runs a single instruction of the benchmark; the wall clock
//! starts when the gate opens. The leader is reaped with `wait4` for its
//! rusage, and the rest of the group is killed and reaped too, so no process
//! is left behind. (A process that left the group with `setsid` escapes this
//! and is out of scope: the worker cannot tell it from an unrelated process.)

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Once;
use std::time::{Duration, Instant};

use kiln_protocol::decision::ContentHash;
use kiln_protocol::metric::Metrics;

use crate::counters::Counters;
use crate::sampler::{SampleStats, Sampler};

/// The `PATH` every build and run sees unless the benchmark overrides it.
pub const CLEAN_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// How many bytes of stderr (or of a build log) are kept.
pub const TAIL_BYTES: usize = 8192;

/// How long stragglers of a process group may take to die and be reaped.
const REAP_GRACE: Duration = Duration::from_secs(2);

/// What happens to a command's output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Output {
    /// stdout goes to `/dev/null`; the tail of stderr is kept.
    Discard,
    /// stdout is hashed as it streams (no size limit); the tail of stderr is kept.
    HashStdout,
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
    /// The complete environment (nothing is inherited).
    pub env: Vec<(String, String)>,
    /// CPUs to pin to; empty: no pinning.
    pub cpus: Vec<u32>,
    /// What happens to the output.
    pub output: Output,
    /// The whole process group is killed after this long.
    pub timeout: Duration,
    /// Whether to open perf counters on the process (inherited by its children).
    pub counters: bool,
    /// Whether to sample the group's CPU and memory use, and how often.
    pub sample_every: Option<Duration>,
}

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
    /// From the gate opening (just before exec) to the leader's exit.
    pub wall: Duration,
    /// rusage from `wait4`.
    pub usage: Usage,
    /// Digest of stdout, with [`Output::HashStdout`].
    pub stdout_digest: Option<ContentHash>,
    /// The merged output, with [`Output::KeepMerged`].
    pub kept: Vec<u8>,
    /// Whether `kept` was cut at its cap.
    pub kept_truncated: bool,
    /// The last [`TAIL_BYTES`] of stderr (empty with [`Output::KeepMerged`]).
    pub stderr_tail: String,
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

/// Runs one command to its end (exit, signal, timeout or cancel).
///
/// `Err` means it could not be started at all; the message names the command.
pub fn run(launch: &Launch, cancel: Option<&CancelToken>) -> Result<Finished, String> {
    ensure_subreaper();
    let program = launch
        .argv
        .first()
        .ok_or_else(|| "empty command: nothing to run".to_string())?;
    let what = || format!("'{}' (in {})", launch.argv.join(" "), launch.cwd.display());
    if cancel.is_some_and(CancelToken::is_cancelled) {
        return Ok(Finished::cancelled_before_start());
    }

    let mut cmd = Command::new(program);
    cmd.args(&launch.argv[1..])
        .env_clear()
        .envs(launch.env.iter().map(|(k, v)| (k, v)))
        .current_dir(&launch.cwd)
        .stdin(Stdio::null());
    let mut merged_read = None;
    match launch.output {
        Output::Discard => {
            cmd.stdout(Stdio::null()).stderr(Stdio::piped());
        }
        Output::HashStdout => {
            cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        }
        Output::KeepMerged { .. } => {
            let (r, w) = pipe().map_err(|e| format!("cannot create a pipe for {}: {e}", what()))?;
            let w2 = w
                .try_clone()
                .map_err(|e| format!("cannot dup a pipe: {e}"))?;
            cmd.stdout(Stdio::from(w)).stderr(Stdio::from(w2));
            merged_read = Some(r);
        }
    }

    // The gate: the child reports its pid on one pipe and waits on the other
    // until the parent has opened the counters on it.
    let (pid_r, pid_w) = pipe().map_err(|e| format!("cannot create a pipe: {e}"))?;
    let (gate_r, gate_w) = pipe().map_err(|e| format!("cannot create a pipe: {e}"))?;
    let cpuset = cpu_set(&launch.cpus)?;
    let (pid_w_raw, gate_r_raw) = (pid_w.as_raw_fd(), gate_r.as_raw_fd());
    // SAFETY: the closure runs between fork and exec and only makes
    // async-signal-safe system calls on plain integers and a copied cpu_set_t.
    unsafe {
        cmd.pre_exec(move || child_setup(pid_w_raw, gate_r_raw, cpuset.as_ref()));
    }

    let want_counters = launch.counters;
    let (spawned, gate) = std::thread::scope(|scope| {
        let opener = scope.spawn(move || {
            let mut pid_r = File::from(pid_r);
            let mut buf = [0u8; 4];
            pid_r.read_exact(&mut buf).ok()?;
            let pid = i32::from_ne_bytes(buf);
            let counters = want_counters.then(|| Counters::open(pid));
            let start = Instant::now();
            let mut gate_w = File::from(gate_w);
            io::Write::write_all(&mut gate_w, &[1]).ok()?;
            Some((counters, start))
        });
        let spawned = cmd.spawn();
        // Our copies of the child's pipe ends must close now: the opener sees
        // EOF if the child never reported, and the output pipes see EOF once
        // the group exits.
        drop(pid_w);
        drop(gate_r);
        drop(cmd);
        (spawned, opener.join().unwrap_or(None))
    });
    let mut child = spawned.map_err(|e| format!("cannot start {}: {e}", what()))?;
    let (counters, start) = gate.ok_or_else(|| format!("{} did not reach exec", what()))?;
    let pid = child.id() as i32;

    let (stdout_fd, stderr_fd): (Option<OwnedFd>, Option<OwnedFd>) = match launch.output {
        Output::KeepMerged { .. } => (merged_read, None),
        _ => (
            child.stdout.take().map(OwnedFd::from),
            child.stderr.take().map(OwnedFd::from),
        ),
    };
    let mut out = Sink::new(launch.output, stdout_fd);
    let mut err = Sink::tail(stderr_fd);
    let sampler = launch.sample_every.map(|every| Sampler::start(pid, every));

    let watched = watch(pid, launch.timeout, start, cancel, &mut out, &mut err);
    let samples = sampler.map(Sampler::finish);
    // The leader is a zombie now, so its pid (the group id) cannot be reused:
    // killing the group reaches exactly our stragglers.
    kill_group(pid);
    let (status, usage) = reap(pid).map_err(|e| format!("cannot reap {}: {e}", what()))?;
    reap_group(pid);
    out.drain();
    err.drain();
    let counters = counters.map(Counters::read).unwrap_or_default();

    let end = match watched.kill_reason {
        Some(reason) => reason,
        None if libc::WIFSIGNALED(status) => End::Signaled(libc::WTERMSIG(status)),
        None => End::Exited(libc::WEXITSTATUS(status)),
    };
    Ok(Finished {
        end,
        wall: watched.exited_at.saturating_duration_since(start),
        usage,
        stdout_digest: out.digest(),
        kept_truncated: out.truncated,
        kept: out.kept,
        stderr_tail: err.tail_text(),
        counters,
        samples,
    })
}

impl Finished {
    fn cancelled_before_start() -> Self {
        Finished {
            end: End::Cancelled,
            wall: Duration::ZERO,
            usage: Usage::default(),
            stdout_digest: None,
            kept: Vec::new(),
            kept_truncated: false,
            stderr_tail: String::new(),
            counters: Metrics::new(),
            samples: None,
        }
    }
}

/// Runs in the child between fork and exec: own process group, CPUs, death
/// with the worker, then report the pid and wait for the parent's go.
fn child_setup(pid_w: RawFd, gate_r: RawFd, cpus: Option<&libc::cpu_set_t>) -> io::Result<()> {
    // SAFETY: only async-signal-safe calls on values owned by this closure.
    unsafe {
        if libc::setpgid(0, 0) != 0 {
            return Err(io::Error::last_os_error());
        }
        if let Some(set) = cpus {
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), set) != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        // If the worker thread that launched us dies, so do we.
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        let pid = libc::getpid().to_ne_bytes();
        if libc::write(pid_w, pid.as_ptr().cast(), 4) != 4 {
            return Err(io::Error::last_os_error());
        }
        let mut go = 0u8;
        loop {
            match libc::read(gate_r, (&mut go as *mut u8).cast(), 1) {
                1 => return Ok(()),
                0 => return Err(io::Error::other("the worker closed the start gate")),
                _ if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted => {}
                _ => return Err(io::Error::last_os_error()),
            }
        }
    }
}

fn cpu_set(cpus: &[u32]) -> Result<Option<libc::cpu_set_t>, String> {
    if cpus.is_empty() {
        return Ok(None);
    }
    // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    for &cpu in cpus {
        if cpu as usize >= libc::CPU_SETSIZE as usize {
            return Err(format!(
                "CPU {cpu} is beyond the largest CPU number this worker supports"
            ));
        }
        // SAFETY: the index is within the set, checked above.
        unsafe { libc::CPU_SET(cpu as usize, &mut set) };
    }
    Ok(Some(set))
}

/// The CPUs this process may run on.
pub fn allowed_cpus() -> Vec<u32> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity fills it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: the size matches the set passed.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Vec::new();
    }
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: the index is within the set.
        .filter(|&i| unsafe { libc::CPU_ISSET(i, &set) })
        .map(|i| i as u32)
        .collect()
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: fds has room for the two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors are fresh and owned by nobody else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Makes this process the reaper of its orphaned descendants, so that the
/// stragglers of a killed group become our children and can be reaped here
/// (otherwise they would go to init, which in a container may never reap).
fn ensure_subreaper() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: a plain prctl with integer arguments.
        if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1) } != 0 {
            tracing::warn!(
                "cannot become a child subreaper ({}): killed grandchildren may linger as zombies",
                io::Error::last_os_error()
            );
        }
    });
}

/// Where a pipe's bytes go.
struct Sink {
    fd: Option<OwnedFd>,
    mode: SinkMode,
    kept: Vec<u8>,
    truncated: bool,
    tail: VecDeque<u8>,
    hasher: Option<blake3::Hasher>,
}

#[derive(Clone, Copy)]
enum SinkMode {
    Hash,
    Keep(usize),
    Tail,
}

impl Sink {
    fn new(output: Output, fd: Option<OwnedFd>) -> Self {
        let mode = match output {
            Output::Discard => SinkMode::Tail,
            Output::HashStdout => SinkMode::Hash,
            Output::KeepMerged { cap } => SinkMode::Keep(cap),
        };
        Sink::with(mode, fd)
    }

    fn tail(fd: Option<OwnedFd>) -> Self {
        Sink::with(SinkMode::Tail, fd)
    }

    fn with(mode: SinkMode, fd: Option<OwnedFd>) -> Self {
        if let Some(fd) = &fd {
            set_nonblocking(fd.as_raw_fd());
        }
        Sink {
            fd,
            mode,
            kept: Vec::new(),
            truncated: false,
            tail: VecDeque::new(),
            hasher: matches!(mode, SinkMode::Hash).then(blake3::Hasher::new),
        }
    }

    fn raw(&self) -> Option<RawFd> {
        self.fd.as_ref().map(AsRawFd::as_raw_fd)
    }

    /// Reads what is available; closes the pipe at EOF.
    fn pump(&mut self) {
        let Some(fd) = self.raw() else { return };
        let mut buf = [0u8; 65536];
        loop {
            // SAFETY: reads into a live buffer of the given length.
            let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
            if n > 0 {
                self.take(&buf[..n as usize]);
                continue;
            }
            if n == 0 {
                self.fd = None;
            } else {
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::Interrupted => continue,
                    io::ErrorKind::WouldBlock => {}
                    _ => self.fd = None,
                }
            }
            return;
        }
    }

    fn take(&mut self, bytes: &[u8]) {
        match self.mode {
            SinkMode::Hash => {
                if let Some(h) = &mut self.hasher {
                    h.update(bytes);
                }
            }
            SinkMode::Keep(cap) => {
                let room = cap.saturating_sub(self.kept.len());
                self.kept.extend_from_slice(&bytes[..room.min(bytes.len())]);
                self.truncated |= bytes.len() > room;
            }
            SinkMode::Tail => {
                self.tail.extend(bytes);
                let excess = self.tail.len().saturating_sub(TAIL_BYTES);
                self.tail.drain(..excess);
            }
        }
    }

    /// Reads to EOF once the group is gone, waiting at most [`REAP_GRACE`]
    /// (a process that escaped the group may still hold the pipe).
    fn drain(&mut self) {
        let deadline = Instant::now() + REAP_GRACE;
        while let Some(fd) = self.raw() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                tracing::warn!("output pipe still open {REAP_GRACE:?} after the process group ended; giving up on it");
                self.fd = None;
                break;
            }
            let mut p = libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: polls one live pollfd.
            unsafe { libc::poll(&mut p, 1, left.as_millis().min(1000) as i32 + 1) };
            self.pump();
        }
    }

    fn digest(&mut self) -> Option<ContentHash> {
        self.hasher
            .take()
            .map(|h| ContentHash(*h.finalize().as_bytes()))
    }

    fn tail_text(&self) -> String {
        let (a, b) = self.tail.as_slices();
        String::from_utf8_lossy(&[a, b].concat()).into_owned()
    }
}

fn set_nonblocking(fd: RawFd) {
    // SAFETY: fcntl on a descriptor we own.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
    }
}

struct Watched {
    exited_at: Instant,
    kill_reason: Option<End>,
}

/// Pumps the output pipes until the leader exits, killing the group at the
/// deadline or on cancel. Returns when the leader is a zombie (not reaped).
fn watch(
    pid: i32,
    timeout: Duration,
    start: Instant,
    cancel: Option<&CancelToken>,
    out: &mut Sink,
    err: &mut Sink,
) -> Watched {
    // A timeout too large to add means none in practice.
    let deadline = start
        .checked_add(timeout)
        .unwrap_or_else(|| start + Duration::from_secs(100 * 365 * 86400));
    let pidfd = pidfd_open(pid);
    let mut kill_reason = None;
    let mut cancel_fd = cancel.map(|c| c.event.as_raw_fd());
    loop {
        if kill_reason.is_none() {
            if cancel.is_some_and(CancelToken::is_cancelled) {
                kill_reason = Some(End::Cancelled);
                kill_group(pid);
            } else if Instant::now() >= deadline {
                kill_reason = Some(End::TimedOut);
                kill_group(pid);
            }
        }
        let mut wait_ms = match kill_reason {
            Some(_) => 50,
            None => {
                deadline
                    .saturating_duration_since(Instant::now())
                    .as_millis() as i32
                    + 1
            }
        };
        if pidfd.is_none() {
            // Without pidfds (Linux < 5.3) exit is noticed by polling each ms.
            wait_ms = wait_ms.min(1);
        }
        let fds = [
            pidfd.as_ref().map(AsRawFd::as_raw_fd),
            out.raw(),
            err.raw(),
            cancel_fd,
        ];
        let mut polls: Vec<libc::pollfd> = fds
            .iter()
            .map(|fd| libc::pollfd {
                fd: fd.unwrap_or(-1),
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        // SAFETY: polls a live array of pollfds of the given length; -1 entries are ignored.
        unsafe { libc::poll(polls.as_mut_ptr(), polls.len() as libc::nfds_t, wait_ms) };
        let now = Instant::now();
        if polls[1].revents != 0 {
            out.pump();
        }
        if polls[2].revents != 0 {
            err.pump();
        }
        if polls[3].revents != 0 {
            // Once seen, the event stays readable: stop polling it.
            cancel_fd = None;
        }
        let exited = match &pidfd {
            Some(_) => polls[0].revents != 0,
            None => has_exited(pid),
        };
        if exited {
            return Watched {
                exited_at: now,
                kill_reason,
            };
        }
    }
}

fn pidfd_open(pid: i32) -> Option<OwnedFd> {
    // SAFETY: a raw syscall with integer arguments; the result is checked.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    // SAFETY: a non-negative result is a fresh descriptor we own.
    (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// Whether the child has exited, without reaping it.
fn has_exited(pid: i32) -> bool {
    // SAFETY: siginfo_t is plain data; waitid fills it.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: waitid on our own child with a live siginfo_t.
    let rc = unsafe {
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
        )
    };
    // SAFETY: si_pid is valid for SIGCHLD siginfo (and zero when none is ready).
    rc == 0 && unsafe { info.si_pid() } == pid
}

fn kill_group(pgid: i32) {
    // SAFETY: a plain kill of our own process group.
    unsafe { libc::kill(-pgid, libc::SIGKILL) };
}

fn reap(pid: i32) -> io::Result<(i32, Usage)> {
    let mut status = 0;
    // SAFETY: rusage is plain data; wait4 fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    loop {
        // SAFETY: wait4 on our own child with live out-pointers.
        let rc = unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
        if rc == pid {
            break;
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    let ns = |tv: libc::timeval| tv.tv_sec as u64 * 1_000_000_000 + tv.tv_usec as u64 * 1000;
    Ok((
        status,
        Usage {
            user_ns: ns(ru.ru_utime),
            system_ns: ns(ru.ru_stime),
            max_rss_bytes: ru.ru_maxrss as u64 * 1024,
            // Blocks of 512 bytes, as getrusage(2) counts them.
            block_io_bytes: (ru.ru_inblock as u64 + ru.ru_oublock as u64) * 512,
        },
    ))
}

/// Reaps the killed stragglers of a group (our children as the subreaper).
fn reap_group(pgid: i32) {
    let deadline = Instant::now() + REAP_GRACE;
    // SAFETY: signal 0 only checks whether the group has members.
    while unsafe { libc::kill(-pgid, 0) } == 0 {
        for member in group_members(pgid) {
            let mut status = 0;
            // SAFETY: waitpid on a specific pid; ECHILD if it is not ours.
            unsafe { libc::waitpid(member, &mut status, libc::WNOHANG) };
        }
        if Instant::now() >= deadline {
            tracing::warn!(
                "process group {pgid} still has members {REAP_GRACE:?} after being killed"
            );
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The pids whose process group is `pgid`, from `/proc`.
pub fn group_members(pgid: i32) -> Vec<i32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| stat_field(&s, 5))
                .is_some_and(|g| g == pgid as i64)
        })
        .collect()
}

/// Field `n` (1-based, as in proc(5)) of a `/proc/<pid>/stat` line, for fields after the name.
pub fn stat_field(stat: &str, n: usize) -> Option<i64> {
    // The name (field 2) may contain spaces and parentheses: split after the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(n.checked_sub(3)?)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_after_odd_names() {
        let line = "42 (a) b (c)) S 1 42 42 0 -1 4194304 100 0 0 0 7 3 0 0 20 0 1 0 5 1000 25";
        assert_eq!(stat_field(line, 4), Some(1));
        assert_eq!(stat_field(line, 5), Some(42));
        assert_eq!(stat_field(line, 14), Some(7));
        assert_eq!(stat_field(line, 24), Some(25));
    }

    #[test]
    fn signal_names() {
        assert_eq!(signal_name(libc::SIGSEGV), "SIGSEGV");
        assert_eq!(signal_name(libc::SIGKILL), "SIGKILL");
        assert_eq!(signal_name(40), "SIG40");
    }

    #[test]
    fn env_is_clean_and_overridable() {
        let env = clean_env(
            Path::new("/slot"),
            &[("PATH".into(), "/opt/bin".into()), ("X".into(), "1".into())],
        );
        assert!(env.contains(&("PATH".into(), "/opt/bin".into())));
        assert!(env.contains(&("HOME".into(), "/slot".into())));
        assert!(env.contains(&("LANG".into(), "C".into())));
        assert_eq!(env.iter().filter(|(k, _)| k == "PATH").count(), 1);
    }
}
