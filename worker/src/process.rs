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

use std::collections::VecDeque;
use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Once, RwLock};
use std::time::{Duration, Instant};

use kiln_protocol::decision::ContentHash;
use kiln_protocol::metric::Metrics;

use crate::checked_output::{CheckedDigest, LineFilter};
use crate::counters::Inherited;
use crate::procfs::{group_members, group_resident_bytes};
use crate::sampler::{SampleStats, Sampler};
use crate::sweep::{self, LaunchId, Sweep};

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

    // The child's standard streams: stdin from /dev/null, stdout and stderr
    // as the output asks. The parent keeps the read ends; `writers` are our
    // copies of the child's ends of the pipes.
    let null = dev_null()?;
    let pipe = || pipe().map_err(|e| format!("cannot create a pipe for {}: {e}", what()));
    let (stdout_fd, stderr_fd, writers) = match &launch.output {
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
    let stdout = raw(&writers[0]).unwrap_or(null);
    let stdio = [null, stdout, raw(&writers[1]).unwrap_or(stdout)];
    let counted = counters.map(|c| {
        let before = c.before_launch();
        (c, before)
    });
    let id = LaunchId::next();
    let mut registry = sweep::registry();
    let Started { pid, pidfd, start } = spawn(launch, id, stdio).map_err(|e| {
        format!(
            "cannot start {}: {e}{}",
            what(),
            searched(&launch.argv[0], &launch.env)
        )
    })?;
    registry.add(id, pid);
    drop(registry);

    let mut out = Sink::new(&launch.output, stdout_fd);
    let mut err = Sink::tail(stderr_fd);
    let sampler = launch.sample_every.map(|every| Sampler::start(pid, every));

    let watched = watch(pid, pidfd, launch, start, cancel, &mut out, &mut err);
    // Our copies of the child's pipe ends stayed open until the leader
    // exited: its exit woke us once (its pidfd), not first for the pipes'
    // hang-up and again for the exit, which costs about 50 µs a run. Closed
    // now, they let the pipes see EOF once the group is gone.
    drop(writers);
    let samples = sampler.map(Sampler::finish);
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
            stdout_sample: None,
            kept: Vec::new(),
            kept_truncated: false,
            stderr_tail: String::new(),
            counters: Metrics::new(),
            samples: None,
        }
    }
}

/// A child started by [`spawn`], exec'd.
struct Started {
    pid: i32,
    /// A pidfd of the child, where the kernel gives one (Linux 5.2 on).
    pidfd: Option<OwnedFd>,
    /// When it exec'd (the wall clock of the run starts here).
    start: Instant,
}

/// Bytes of stack for the child between clone and exec.
const CHILD_STACK: usize = 64 << 10;

/// What the child needs between clone and exec, prepared by the parent.
struct ChildArgs {
    /// Paths to try to exec, in order (the program, or its `PATH` candidates).
    programs: *const *const libc::c_char,
    n_programs: usize,
    argv: *const *const libc::c_char,
    envp: *const *const libc::c_char,
    cwd: *const libc::c_char,
    /// Descriptors to become stdin, stdout and stderr.
    stdio: [RawFd; 3],
    /// CPUs to pin to (null: no pinning).
    cpus: *const libc::cpu_set_t,
    /// The `cgroup.procs` of the cgroups to join.
    cgroup_procs: *const RawFd,
    n_cgroup_procs: usize,
    /// Set by the child if it could not exec: the errno, and what failed.
    error: i32,
    failed: &'static str,
    /// Set by the child just before it execs (CLOCK_MONOTONIC, as [`Instant`]).
    exec_at: libc::timespec,
}

/// Starts the command the way `posix_spawn` does, with `clone(CLONE_VM |
/// CLONE_VFORK)`: no copy of our page tables, this thread suspended until the
/// child execs (with a descriptor table of its own, as `fork` gives). Between
/// clone and exec the child takes its own process group, its CPUs, its run
/// cgroup, death with us, its standard streams and folder.
fn spawn(launch: &Launch, id: LaunchId, stdio: [RawFd; 3]) -> Result<Started, String> {
    let cstring =
        |s: &[u8]| CString::new(s).map_err(|_| "an argument contains a NUL byte".to_string());
    let argv: Vec<CString> = launch
        .argv
        .iter()
        .map(|a| cstring(a.as_bytes()))
        .collect::<Result<_, _>>()?;
    let envp: Vec<CString> = launch
        .env
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .chain([id.env_entry()])
        .map(|entry| cstring(entry.as_bytes()))
        .collect::<Result<_, _>>()?;
    let programs: Vec<CString> = exec_candidates(&launch.argv[0], &launch.env)
        .iter()
        .map(|p| cstring(p.as_os_str().as_bytes()))
        .collect::<Result<_, _>>()?;
    let cwd = cstring(launch.cwd.as_os_str().as_bytes())?;
    let pointers = |v: &[CString]| -> Vec<*const libc::c_char> {
        v.iter()
            .map(|c| c.as_ptr())
            .chain(std::iter::once(std::ptr::null()))
            .collect()
    };
    let (argv_p, envp_p, programs_p) = (pointers(&argv), pointers(&envp), pointers(&programs));
    let cpus = cpu_set(&launch.cpus)?;
    let cgroup_procs: Vec<RawFd> = launch.cgroups.iter().map(|fd| fd.as_raw_fd()).collect();
    let mut args = ChildArgs {
        programs: programs_p.as_ptr(),
        n_programs: programs.len(),
        argv: argv_p.as_ptr(),
        envp: envp_p.as_ptr(),
        cwd: cwd.as_ptr(),
        stdio,
        cpus: cpus.as_ref().map_or(std::ptr::null(), |c| c as *const _),
        cgroup_procs: cgroup_procs.as_ptr(),
        n_cgroup_procs: cgroup_procs.len(),
        error: 0,
        failed: "",
        exec_at: libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        },
    };
    let mut stack: Vec<u8> = Vec::with_capacity(CHILD_STACK);
    // SAFETY: one past the end of the allocation, rounded down to 16 bytes
    // as the ABI wants; the child only writes below it.
    let top = unsafe { stack.as_mut_ptr().add(CHILD_STACK) } as usize & !15;
    // SAFETY: sigset_t is plain data, filled by sigfillset.
    let (mut all, mut old): (libc::sigset_t, libc::sigset_t) = unsafe { std::mem::zeroed() };
    // SAFETY: the child shares our memory until it execs, and must run no
    // signal handler of ours: every signal is blocked across the clone (the
    // child unblocks them just before exec). The clone runs `child_main` on
    // its own stack with `args`, which outlive it: CLONE_VFORK suspends this
    // thread until the child has exec'd or exited.
    let mut pidfd: libc::c_int = -1;
    let exclusive = WRITING.write().unwrap_or_else(|p| p.into_inner());
    let (pid, clone_error, start) = unsafe {
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
        let mut clone = |flags| {
            libc::clone(
                child_main,
                top as *mut libc::c_void,
                libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD | flags,
                (&mut args as *mut ChildArgs).cast(),
                &mut pidfd as *mut libc::c_int,
            )
        };
        // With its pidfd (into `pidfd`), where the kernel knows CLONE_PIDFD.
        let mut pid = clone(libc::CLONE_PIDFD);
        if pid < 0 && *libc::__errno_location() == libc::EINVAL {
            pid = clone(0);
        }
        let clone_error = io::Error::last_os_error();
        // The run's clock starts when the child was about to exec, which it
        // noted: this thread may have been scheduled long after.
        let mut now_ts: libc::timespec = std::mem::zeroed();
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut now_ts);
        let now = Instant::now();
        let since_exec = timespec_ns(&now_ts).saturating_sub(timespec_ns(&args.exec_at));
        let start = now
            .checked_sub(Duration::from_nanos(since_exec))
            .unwrap_or(now);
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        (pid, clone_error, start)
    };
    // The child has exec'd (CLONE_VFORK): the descriptors it inherited are closed.
    drop(exclusive);
    drop(stack);
    if pid < 0 {
        return Err(format!("clone: {clone_error}"));
    }
    // SAFETY: a non-negative descriptor is the pidfd clone made for us.
    let pidfd = (pidfd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(pidfd) });
    if args.error != 0 {
        let mut status = 0;
        // SAFETY: reaps the child that failed to exec (it has exited).
        unsafe { libc::waitpid(pid, &mut status, 0) };
        return Err(format!(
            "{}: {}",
            args.failed,
            io::Error::from_raw_os_error(args.error)
        ));
    }
    Ok(Started { pid, pidfd, start })
}

fn timespec_ns(t: &libc::timespec) -> u64 {
    (t.tv_sec as u64).saturating_mul(1_000_000_000) + t.tv_nsec as u64
}

/// The `PATH` a launch with `env` looks programs up on: its own, else the clean one.
pub fn search_path(env: &[(String, String)]) -> &str {
    env.iter()
        .rev()
        .find(|(k, _)| k == "PATH")
        .map_or(CLEAN_PATH, |(_, v)| v.as_str())
}

/// For an error starting `program`: where it was looked for, when it was
/// looked up on a `PATH` (the environment's, not the worker's own).
fn searched(program: &str, env: &[(String, String)]) -> String {
    if program.contains('/') {
        return String::new();
    }
    format!(" ('{program}' looked up on PATH={})", search_path(env))
}

/// The paths an `execvp` of `program` tries: the program itself if it has a
/// `/`, else each folder of the environment's `PATH` (the clean one by default).
pub fn exec_candidates(program: &str, env: &[(String, String)]) -> Vec<PathBuf> {
    if program.contains('/') {
        return vec![PathBuf::from(program)];
    }
    search_path(env)
        .split(':')
        .map(|dir| {
            let dir = if dir.is_empty() { "." } else { dir };
            Path::new(dir).join(program)
        })
        .collect()
}

/// The child between clone and exec: on its own stack, in our memory, with
/// the parent's thread suspended (as in `posix_spawn`), so it makes system
/// calls only, on what [`spawn`] prepared; it never returns to Rust code of ours.
extern "C" fn child_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the ChildArgs that `spawn` keeps alive until we exec
    // or exit; every pointer in it is live for as long.
    unsafe {
        let a = &mut *arg.cast::<ChildArgs>();
        let errno = || *libc::__errno_location();
        let fail = |a: &mut ChildArgs, what: &'static str, e: i32| -> ! {
            a.error = if e == 0 { libc::EINVAL } else { e };
            a.failed = what;
            libc::_exit(127)
        };
        // Our own process group, so that a timeout or cancel kills the whole tree.
        if libc::setpgid(0, 0) != 0 {
            fail(a, "setpgid", errno());
        }
        if !a.cpus.is_null()
            && libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), a.cpus) != 0
        {
            fail(a, "sched_setaffinity", errno());
        }
        // Into the run's cgroup (limits) before exec, so the limits hold from the start.
        for i in 0..a.n_cgroup_procs {
            if libc::write(*a.cgroup_procs.add(i), b"0".as_ptr().cast(), 1) != 1 {
                fail(a, "joining the run's cgroup", errno());
            }
        }
        // If the worker thread that launched us dies, so do we.
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
        for (target, &fd) in a.stdio.iter().enumerate() {
            let target = target as RawFd;
            if fd == target {
                let flags = libc::fcntl(fd, libc::F_GETFD);
                libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC);
            } else if libc::dup2(fd, target) < 0 {
                fail(a, "dup2", errno());
            }
        }
        if libc::chdir(a.cwd) != 0 {
            fail(a, "chdir", errno());
        }
        // As std's Command: default SIGPIPE (we ignore it), no handler of ours
        // left where a signal could run it in our memory, nothing blocked.
        for sig in [libc::SIGPIPE, libc::SIGSEGV, libc::SIGBUS] {
            libc::signal(sig, libc::SIG_DFL);
        }
        let mut none: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut none);
        libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
        libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut a.exec_at);
        // As execvp: the first candidate that runs; EACCES from any wins over ENOENT.
        let mut error = libc::ENOENT;
        for i in 0..a.n_programs {
            libc::execve(*a.programs.add(i), a.argv, a.envp);
            match errno() {
                libc::ENOENT | libc::ENOTDIR => {}
                libc::EACCES => error = libc::EACCES,
                e => {
                    error = e;
                    break;
                }
            }
        }
        fail(a, "exec", error)
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

/// `/dev/null`, opened once per process for reading and writing: every
/// run's stdin, and its stdout where that is discarded (the child dup2s it).
fn dev_null() -> Result<RawFd, String> {
    static NULL: std::sync::OnceLock<io::Result<File>> = std::sync::OnceLock::new();
    NULL.get_or_init(|| {
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open("/dev/null")
    })
    .as_ref()
    .map(AsRawFd::as_raw_fd)
    .map_err(|e| format!("cannot open /dev/null: {e}"))
}

/// A pipe for a child's output: both ends close-on-exec (the child dup2s
/// its end), ours to read without blocking.
fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: fds has room for the two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both descriptors are fresh and owned by nobody else.
    let (r, w) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: fcntl on a descriptor we own; a fresh read end has no other status flag.
    if unsafe { libc::fcntl(r.as_raw_fd(), libc::F_SETFL, libc::O_NONBLOCK) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((r, w))
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
    hasher: Option<CheckedDigest>,
}

#[derive(Clone, Copy)]
enum SinkMode {
    Hash,
    Keep(usize),
    Tail,
}

impl Sink {
    fn new(output: &Output, fd: Option<OwnedFd>) -> Self {
        let (mode, hasher) = match output {
            Output::Discard => (SinkMode::Tail, None),
            Output::HashStdout(filter) => {
                (SinkMode::Hash, Some(CheckedDigest::new(filter.clone())))
            }
            Output::KeepMerged { cap } => (SinkMode::Keep(*cap), None),
        };
        Sink::with(mode, hasher, fd)
    }

    fn tail(fd: Option<OwnedFd>) -> Self {
        Sink::with(SinkMode::Tail, None, fd)
    }

    /// `fd`: the read end of a [`pipe`].
    fn with(mode: SinkMode, hasher: Option<CheckedDigest>, fd: Option<OwnedFd>) -> Self {
        Sink {
            fd,
            mode,
            kept: Vec::new(),
            truncated: false,
            tail: VecDeque::new(),
            hasher,
        }
    }

    fn raw(&self) -> Option<RawFd> {
        self.fd.as_ref().map(AsRawFd::as_raw_fd)
    }

    /// Reads what is available; closes the pipe at EOF.
    fn pump(&mut self) {
        let Some(fd) = self.raw() else { return };
        // Not zeroed: read(2) fills what is then looked at.
        let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 65536];
        loop {
            // SAFETY: reads into a live buffer of the given length.
            let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
            if n > 0 {
                // SAFETY: read(2) initialised the first n bytes.
                let bytes =
                    unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), n as usize) };
                self.take(bytes);
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
        // Usually every writer is gone and the pipe reads to EOF at once: poll only if not.
        self.pump();
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

    fn digest(&mut self) -> Option<(ContentHash, String)> {
        self.hasher.take().map(CheckedDigest::finish)
    }

    fn tail_text(&self) -> String {
        let (a, b) = self.tail.as_slices();
        String::from_utf8_lossy(&[a, b].concat()).into_owned()
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
    pidfd: Option<OwnedFd>,
    launch: &Launch,
    start: Instant,
    cancel: Option<&CancelToken>,
    out: &mut Sink,
    err: &mut Sink,
) -> Watched {
    // A timeout too large to add means none in practice.
    let deadline = start
        .checked_add(launch.timeout)
        .unwrap_or_else(|| start + Duration::from_secs(100 * 365 * 86400));
    let mut kill_reason = None;
    let mut cancel_fd = cancel.map(|c| c.event.as_raw_fd());
    let mut next_memory_check = start + MEMORY_CHECK_EVERY;
    loop {
        if kill_reason.is_none() {
            let now = Instant::now();
            if cancel.is_some_and(CancelToken::is_cancelled) {
                kill_reason = Some(End::Cancelled);
            } else if now >= deadline {
                kill_reason = Some(End::TimedOut);
            } else if let Some(limit) = launch.memory_limit.filter(|_| now >= next_memory_check) {
                next_memory_check = now + MEMORY_CHECK_EVERY;
                if group_resident_bytes(pid) > limit {
                    kill_reason = Some(End::MemoryExceeded(limit));
                }
            }
            if kill_reason.is_some() {
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
        if launch.memory_limit.is_some() {
            wait_ms = wait_ms.min(MEMORY_CHECK_EVERY.as_millis() as i32);
        }
        if pidfd.is_none() {
            // Without a pidfd (Linux < 5.2) exit is noticed by polling each ms.
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

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_protocol::metric::{Metric, MetricValue};

    #[test]
    fn signal_names() {
        assert_eq!(signal_name(libc::SIGSEGV), "SIGSEGV");
        assert_eq!(signal_name(libc::SIGKILL), "SIGKILL");
        assert_eq!(signal_name(40), "SIG40");
    }

    fn launch(script: &str, output: Output) -> Launch {
        Launch {
            argv: vec!["sh".into(), "-c".into(), script.into()],
            cwd: std::env::temp_dir(),
            env: clean_env(&std::env::temp_dir(), &[]),
            cpus: Vec::new(),
            output,
            timeout: Duration::from_secs(30),
            sample_every: None,
            cgroups: Vec::new(),
            memory_limit: None,
        }
    }

    /// A launch waits for a file being written to be closed: its child would otherwise hold
    /// the file open for writing until it execs, and a run of that file then fails (ETXTBSY).
    #[test]
    fn no_launch_starts_while_a_file_is_being_written() {
        let (opened, wait) = std::sync::mpsc::channel();
        let writer = std::thread::spawn(move || {
            writing(|| {
                opened.send(()).unwrap();
                std::thread::sleep(Duration::from_millis(300));
                Instant::now()
            })
        });
        wait.recv().unwrap();
        let finished = run(&launch("true", Output::Discard), None, None).unwrap();
        let returned = Instant::now();
        assert_eq!(finished.end, End::Exited(0));
        let closed = writer.join().unwrap();
        assert!(returned >= closed, "the launch ran while the file was open");
    }

    #[test]
    fn output_beyond_a_pipe_buffer_streams_while_the_command_runs() {
        // 1 MiB on each stream: the command finishes only if both pipes are
        // read while it runs (our copies of their write ends stay open).
        let script =
            "head -c 1048576 /dev/zero; head -c 1048575 /dev/zero | tr '\\0' x >&2; echo end >&2";
        let f = run(
            &launch(script, Output::HashStdout(LineFilter::All)),
            None,
            None,
        )
        .unwrap();
        assert_eq!(f.end, End::Exited(0));
        let zeros = vec![0u8; 1 << 20];
        assert_eq!(
            f.stdout_digest,
            Some(ContentHash(*blake3::hash(&zeros).as_bytes()))
        );
        assert_eq!(f.stderr_tail.len(), TAIL_BYTES);
        assert!(
            f.stderr_tail.ends_with("xxxxend\n"),
            "{:?}",
            &f.stderr_tail[TAIL_BYTES - 16..]
        );
    }

    #[test]
    fn a_leader_that_exits_before_its_children_ends_the_launch() {
        // The background sleeper keeps the pipes open; the leader's exit
        // ends the launch all the same, its group killed, its output whole,
        // and without waiting out the grace given to escaped holders of a pipe.
        let started = Instant::now();
        let script = "sleep 30 & echo kept; echo said >&2";
        let f = run(
            &launch(script, Output::KeepMerged { cap: 1024 }),
            None,
            None,
        )
        .unwrap();
        assert_eq!(f.end, End::Exited(0));
        assert_eq!(String::from_utf8_lossy(&f.kept), "kept\nsaid\n");
        assert!(started.elapsed() < REAP_GRACE, "{:?}", started.elapsed());
    }

    /// Whether process `pid` is alive (not gone, not a zombie).
    fn alive(pid: i32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|s| !s[s.rfind(')').unwrap() + 1..].trim_start().starts_with('Z'))
    }

    /// The pids written, one per line, to `file`.
    fn pids_in(file: &Path) -> Vec<i32> {
        std::fs::read_to_string(file)
            .unwrap_or_default()
            .lines()
            .map(|l| l.trim().parse().unwrap())
            .collect()
    }

    #[test]
    fn a_daemon_that_leaves_the_group_ends_with_the_launch() {
        // Double forks into a new session (`setsid`), as daemons start: out of the launch's
        // process group, and alive after its leader has exited. Each notes its pid.
        let pids = std::env::temp_dir().join(format!("kiln-escapees-{}", std::process::id()));
        let _ = std::fs::remove_file(&pids);
        let daemon = format!("setsid sh -c 'echo $$ >> {}; sleep 300; :'", pids.display());
        let script = format!(
            "({daemon} &) ; ({daemon} </dev/null >/dev/null 2>&1 &) ; \
             while [ \"$(wc -l < {} 2>/dev/null)\" != 2 ]; do sleep 0.01; done",
            pids.display()
        );
        let f = run(&launch(&script, Output::Discard), None, None).unwrap();
        assert_eq!(f.end, End::Exited(0));
        let daemons = pids_in(&pids);
        let _ = std::fs::remove_file(&pids);
        assert_eq!(daemons.len(), 2);
        assert!(
            !daemons.iter().any(|&p| alive(p)),
            "{daemons:?} outlived the launch"
        );
    }

    #[test]
    fn a_daemon_of_a_launch_that_still_runs_is_left_alone() {
        // Two launches side by side (two slots): the end of the first must not end a
        // daemon that the second one started and still needs.
        let started = std::env::temp_dir().join(format!("kiln-needed-{}", std::process::id()));
        let _ = std::fs::remove_file(&started);
        let script = format!(
            "(setsid sh -c 'echo $$ > {0}.tmp; mv {0}.tmp {0}; sleep 300; :' &) ; \
             while [ ! -e {0} ]; do sleep 0.01; done; sleep 1; kill -0 $(cat {0})",
            started.display()
        );
        let second = std::thread::spawn(move || run(&launch(&script, Output::Discard), None, None));
        while !started.exists() {
            std::thread::sleep(Duration::from_millis(10));
        }
        let first = run(&launch("true", Output::Discard), None, None).unwrap();
        assert_eq!(first.end, End::Exited(0));
        let second = second.join().unwrap().unwrap();
        assert_eq!(second.end, End::Exited(0), "the daemon was ended too early");
        let daemon = pids_in(&started);
        let _ = std::fs::remove_file(&started);
        assert!(!alive(daemon[0]), "the daemon outlived its launch");
    }

    fn task_clock_ms(f: &Finished) -> f64 {
        match f.counters.get(&Metric::TaskClock) {
            Some(MetricValue::Measured(ns)) => ns / 1e6,
            other => panic!("task-clock: {other:?}"),
        }
    }

    #[test]
    fn each_counted_run_gets_its_own_counts() {
        let mut counters = Inherited::open();
        let busy = launch(
            "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done",
            Output::Discard,
        );
        let busy = run(&busy, Some(&mut counters), None).unwrap();
        let idle = run(&launch("true", Output::Discard), Some(&mut counters), None).unwrap();
        // The first run's shell counted its own loop; the second, only itself.
        assert!(task_clock_ms(&busy) > 20.0, "{}", task_clock_ms(&busy));
        assert!(task_clock_ms(&idle) < 10.0, "{}", task_clock_ms(&idle));
    }

    #[test]
    fn a_process_left_over_from_a_run_is_not_counted_in_the_next() {
        // The first run leaves a busy process that escaped its group (setsid):
        // it still holds copies of the counters, but the next run must not
        // see its CPU time.
        let dir = std::env::temp_dir().join(format!("kiln-escapee-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pidfile = dir.join("pid");
        let mut counters = Inherited::open();
        let escape = format!(
            "setsid sh -c 'echo $$ > {}; while :; do :; done' & sleep 0.1",
            pidfile.display()
        );
        run(&launch(&escape, Output::Discard), Some(&mut counters), None).unwrap();
        let pid: i32 = std::fs::read_to_string(&pidfile)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        let next = run(
            &launch("sleep 0.3", Output::Discard),
            Some(&mut counters),
            None,
        );
        // SAFETY: kills and reaps the escapee (our child: we are its subreaper).
        unsafe {
            libc::kill(pid, libc::SIGKILL);
            libc::waitpid(pid, std::ptr::null_mut(), 0);
        }
        std::fs::remove_dir_all(&dir).unwrap();
        let next = next.unwrap();
        assert!(task_clock_ms(&next) < 50.0, "{}", task_clock_ms(&next));
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
