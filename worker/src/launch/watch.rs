//! Watching a launched process group until it ends: its timeout, a cancel,
//! its memory limit; then killing and reaping the whole group.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use super::procfs::{group_members, group_resident_bytes};
use super::sink::Sink;
use super::{CancelToken, End, Launch, Usage, MEMORY_CHECK_EVERY, REAP_GRACE};

pub(super) struct Watched {
    pub(super) exited_at: Instant,
    pub(super) kill_reason: Option<End>,
}

/// Pumps the output pipes until the leader exits, killing the group at the
/// deadline or on cancel. Returns when the leader is a zombie (not reaped).
pub(super) fn watch(
    pid: i32,
    pidfd: Option<OwnedFd>,
    launch: &Launch,
    start: Instant,
    cancel: Option<&CancelToken>,
    out: &mut Sink,
    err: &mut Sink,
) -> Watched {
    let mut limits = Limits::new(pid, launch, start, cancel);
    let mut kill_reason = None;
    let mut cancel_fd = cancel.map(|c| c.event.as_raw_fd());
    loop {
        if kill_reason.is_none() {
            kill_reason = limits.broken();
            if kill_reason.is_some() {
                kill_group(pid);
            }
        }
        let wait_ms = limits.wait_ms(kill_reason.is_some(), pidfd.is_some());
        let pidfd_raw = pidfd.as_ref().map(AsRawFd::as_raw_fd);
        let ready = poll([pidfd_raw, out.raw(), err.raw(), cancel_fd], wait_ms);
        let now = Instant::now();
        if ready[1] {
            out.pump();
        }
        if ready[2] {
            err.pump();
        }
        if ready[3] {
            // Once seen, the event stays readable: stop polling it.
            cancel_fd = None;
        }
        let exited = match &pidfd {
            Some(_) => ready[0],
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

/// What ends a run before its leader exits: a cancel, the deadline, the memory limit.
struct Limits<'a> {
    pid: i32,
    launch: &'a Launch,
    cancel: Option<&'a CancelToken>,
    deadline: Instant,
    next_memory_check: Instant,
}

impl<'a> Limits<'a> {
    fn new(pid: i32, launch: &'a Launch, start: Instant, cancel: Option<&'a CancelToken>) -> Self {
        // A timeout too large to add means none in practice.
        let deadline = start
            .checked_add(launch.timeout)
            .unwrap_or_else(|| start + Duration::from_secs(100 * 365 * 86400));
        Limits {
            pid,
            launch,
            cancel,
            deadline,
            next_memory_check: start + MEMORY_CHECK_EVERY,
        }
    }

    /// The limit the run broke, if it broke one now (the memory limit checked at most every
    /// [`MEMORY_CHECK_EVERY`]).
    fn broken(&mut self) -> Option<End> {
        let now = Instant::now();
        if self.cancel.is_some_and(CancelToken::is_cancelled) {
            return Some(End::Cancelled);
        }
        if now >= self.deadline {
            return Some(End::TimedOut);
        }
        let limit = self
            .launch
            .memory_limit
            .filter(|_| now >= self.next_memory_check)?;
        self.next_memory_check = now + MEMORY_CHECK_EVERY;
        (group_resident_bytes(self.pid) > limit).then_some(End::MemoryExceeded(limit))
    }

    /// How long to wait for the next event: until the deadline, or briefly while the
    /// killed group goes; at most until the next memory check, and a millisecond without
    /// a pidfd (Linux < 5.2: exit is noticed by polling).
    fn wait_ms(&self, killing: bool, have_pidfd: bool) -> i32 {
        let mut wait_ms = match killing {
            true => 50,
            false => {
                self.deadline
                    .saturating_duration_since(Instant::now())
                    .as_millis() as i32
                    + 1
            }
        };
        if self.launch.memory_limit.is_some() {
            wait_ms = wait_ms.min(MEMORY_CHECK_EVERY.as_millis() as i32);
        }
        if !have_pidfd {
            wait_ms = wait_ms.min(1);
        }
        wait_ms
    }
}

/// Waits up to `wait_ms` for any of `fds` (`None`: not polled) to be readable; which are.
fn poll<const N: usize>(fds: [Option<RawFd>; N], wait_ms: i32) -> [bool; N] {
    let mut polls = fds.map(|fd| libc::pollfd {
        fd: fd.unwrap_or(-1),
        events: libc::POLLIN,
        revents: 0,
    });
    // SAFETY: polls a live array of pollfds of the given length; -1 entries are ignored.
    unsafe { libc::poll(polls.as_mut_ptr(), N as libc::nfds_t, wait_ms) };
    polls.map(|p| p.revents != 0)
}

/// Whether the child has exited, without reaping it.
pub(super) fn has_exited(pid: i32) -> bool {
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

pub(super) fn kill_group(pgid: i32) {
    // SAFETY: a plain kill of our own process group.
    unsafe { libc::kill(-pgid, libc::SIGKILL) };
}

pub(super) fn reap(pid: i32) -> io::Result<(i32, Usage)> {
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
pub(super) fn reap_group(pgid: i32) {
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
