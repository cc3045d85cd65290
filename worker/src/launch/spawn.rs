//! Starting a launch's child the way `posix_spawn` does (`clone` sharing our
//! memory, the parent's thread suspended until the child execs), and what the
//! child needs between clone and exec: its program's path, CPUs, streams.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Once;
use std::time::{Duration, Instant};

use super::sweep::LaunchId;
use super::{Launch, CLEAN_PATH, WRITING};

/// A child started by [`spawn`], exec'd.
pub(super) struct Started {
    pub(super) pid: i32,
    /// A pidfd of the child, where the kernel gives one (Linux 5.2 on).
    pub(super) pidfd: Option<OwnedFd>,
    /// When it exec'd (the wall clock of the run starts here).
    pub(super) start: Instant,
}

/// Bytes of stack for the child between clone and exec.
pub(super) const CHILD_STACK: usize = 64 << 10;

/// What the child needs between clone and exec, prepared by the parent.
pub(super) struct ChildArgs {
    /// Paths to try to exec, in order (the program, or its `PATH` candidates).
    pub(super) programs: *const *const libc::c_char,
    pub(super) n_programs: usize,
    pub(super) argv: *const *const libc::c_char,
    pub(super) envp: *const *const libc::c_char,
    pub(super) cwd: *const libc::c_char,
    /// Descriptors to become stdin, stdout and stderr.
    pub(super) stdio: [RawFd; 3],
    /// CPUs to pin to (null: no pinning).
    pub(super) cpus: *const libc::cpu_set_t,
    /// The `cgroup.procs` of the cgroups to join.
    pub(super) cgroup_procs: *const RawFd,
    pub(super) n_cgroup_procs: usize,
    /// Set by the child if it could not exec: the errno, and what failed.
    pub(super) error: i32,
    pub(super) failed: &'static str,
    /// Set by the child just before it execs (CLOCK_MONOTONIC, as [`Instant`]).
    pub(super) exec_at: libc::timespec,
}

/// Starts the command the way `posix_spawn` does, with `clone(CLONE_VM |
/// CLONE_VFORK)`: no copy of our page tables, this thread suspended until the
/// child execs (with a descriptor table of its own, as `fork` gives). Between
/// clone and exec the child takes its own process group, its CPUs, its run
/// cgroup, death with us, its standard streams and folder.
pub(super) fn spawn(launch: &Launch, id: LaunchId, stdio: [RawFd; 3]) -> Result<Started, String> {
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

pub(super) fn timespec_ns(t: &libc::timespec) -> u64 {
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
pub(super) fn searched(program: &str, env: &[(String, String)]) -> String {
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
        let (what, e) = match set_up(a) {
            Ok(()) => ("exec", exec(a)),
            Err(failed) => failed,
        };
        a.error = if e == 0 { libc::EINVAL } else { e };
        a.failed = what;
        libc::_exit(127)
    }
}

/// The child's process group, CPUs, cgroups, standard streams, folder and signals, as
/// [`spawn`] prepared them; what failed, and its errno.
///
/// # Safety
/// Only in [`child_main`], on its live `ChildArgs`.
unsafe fn set_up(a: &mut ChildArgs) -> Result<(), (&'static str, i32)> {
    let errno = || *libc::__errno_location();
    // Our own process group, so that a timeout or cancel kills the whole tree.
    if libc::setpgid(0, 0) != 0 {
        return Err(("setpgid", errno()));
    }
    if !a.cpus.is_null()
        && libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), a.cpus) != 0
    {
        return Err(("sched_setaffinity", errno()));
    }
    // Into the run's cgroup (limits) before exec, so the limits hold from the start.
    for i in 0..a.n_cgroup_procs {
        if libc::write(*a.cgroup_procs.add(i), b"0".as_ptr().cast(), 1) != 1 {
            return Err(("joining the run's cgroup", errno()));
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
            return Err(("dup2", errno()));
        }
    }
    if libc::chdir(a.cwd) != 0 {
        return Err(("chdir", errno()));
    }
    // As std's Command: default SIGPIPE (we ignore it), no handler of ours
    // left where a signal could run it in our memory, nothing blocked.
    for sig in [libc::SIGPIPE, libc::SIGSEGV, libc::SIGBUS] {
        libc::signal(sig, libc::SIG_DFL);
    }
    let mut none: libc::sigset_t = std::mem::zeroed();
    libc::sigemptyset(&mut none);
    libc::sigprocmask(libc::SIG_SETMASK, &none, std::ptr::null_mut());
    Ok(())
}

/// Executes the program, as execvp: the first candidate that runs; where none does, the
/// errno, EACCES from any winning over ENOENT.
///
/// # Safety
/// Only in [`child_main`], on its live `ChildArgs`.
unsafe fn exec(a: &mut ChildArgs) -> i32 {
    libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut a.exec_at);
    let mut error = libc::ENOENT;
    for i in 0..a.n_programs {
        libc::execve(*a.programs.add(i), a.argv, a.envp);
        match *libc::__errno_location() {
            libc::ENOENT | libc::ENOTDIR => {}
            libc::EACCES => error = libc::EACCES,
            e => return e,
        }
    }
    error
}

pub(super) fn cpu_set(cpus: &[u32]) -> Result<Option<libc::cpu_set_t>, String> {
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
pub(super) fn dev_null() -> Result<RawFd, String> {
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
pub(super) fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
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
pub(super) fn ensure_subreaper() {
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
