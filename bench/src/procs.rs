//! Process accounting: wall time, the CPU time of a command itself and of
//! everything it started, and peak memory.
//!
//! `kiln-bench account -- CMD` runs CMD as a child of a child subreaper, so
//! that every process CMD starts (local workers, ssh clients, the programs
//! they run) is reaped here in the end, even those CMD left behind, and
//! `getrusage(RUSAGE_CHILDREN)` covers the whole tree. CMD's own CPU time
//! is read from `/proc/PID/stat` while it is a zombie (after `waitid` with
//! `WNOWAIT`, before reaping), so it excludes its children.

use std::fs;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

/// What `account` reports of one command.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Account {
    /// Exit code (-signal if killed by one).
    pub exit: i32,
    /// From spawn to exit, seconds.
    pub wall_s: f64,
    /// The command's own user CPU time, seconds (its children excluded).
    pub self_user_s: f64,
    /// The command's own system CPU time, seconds.
    pub self_sys_s: f64,
    /// CPU time of the whole process tree (the command, its children and
    /// everything reparented here), seconds.
    pub tree_cpu_s: f64,
    /// Peak resident set of the command itself (sampled VmHWM, and wait4's ru_maxrss), KiB.
    pub max_rss_kib: u64,
    /// Descendants still alive 5 s after the command exited (killed then).
    pub left_behind: usize,
    /// The most the command and its tree held at once (sampled every half second).
    #[serde(default)]
    pub peaks: Peaks,
}

/// The largest of a few figures a running command was seen with.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
pub struct Peaks {
    /// The command's open file descriptors.
    pub fds: u64,
    /// The command's threads.
    pub threads: u64,
    /// The other processes of its tree (ssh clients, reparented ssh masters, local workers).
    pub helpers: u64,
    /// Their proportional set size together (shared pages split among the processes
    /// sharing them), KiB.
    pub helpers_pss_kib: u64,
}

impl Peaks {
    /// Looks at the command `pid` and the rest of this process's tree now and keeps each
    /// figure's larger value.
    fn sample(&mut self, pid: i32) {
        let fds = fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count() as u64);
        let threads = status_kib(pid, "Threads:").unwrap_or(0);
        let me = std::process::id() as i32;
        let helpers: Vec<i32> = descendants_and_self(me)
            .into_iter()
            .filter(|p| *p != me && *p != pid)
            .collect();
        let pss: u64 = helpers.iter().filter_map(|c| pss_kib(*c)).sum();
        self.fds = self.fds.max(fds);
        self.threads = self.threads.max(threads);
        self.helpers = self.helpers.max(helpers.len() as u64);
        self.helpers_pss_kib = self.helpers_pss_kib.max(pss);
    }
}

impl Account {
    /// The command's own CPU time.
    pub fn self_cpu_s(&self) -> f64 {
        self.self_user_s + self.self_sys_s
    }
}

/// Makes this process the reaper of its orphaned descendants.
pub fn become_subreaper() {
    // SAFETY: a plain prctl with integer arguments.
    unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1) };
}

fn ticks_per_s() -> f64 {
    // SAFETY: sysconf has no memory arguments.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// Fields of `/proc/PID/stat` after the command name; `n` is the 1-based field number of proc(5).
fn stat_fields(pid: i32) -> Option<Vec<u64>> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &text[text.rfind(')')? + 1..];
    // Field 3 (state) is the first after ')'; map it to 0 to keep indices numeric.
    Some(
        rest.split_whitespace()
            .map(|f| f.parse::<i64>().map_or(0, |v| v.max(0) as u64))
            .collect(),
    )
}

fn field(fields: &[u64], n: usize) -> u64 {
    fields.get(n - 3).copied().unwrap_or(0)
}

/// CPU seconds of a process and the children it reaped (utime+stime+cutime+cstime).
pub fn cpu_with_reaped_children(pid: i32) -> f64 {
    stat_fields(pid).map_or(0.0, |f| {
        (field(&f, 14) + field(&f, 15) + field(&f, 16) + field(&f, 17)) as f64 / ticks_per_s()
    })
}

/// Direct children of a process (every thread's list).
pub fn children(pid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for t in tasks.flatten() {
        if let Ok(text) = fs::read_to_string(t.path().join("children")) {
            out.extend(
                text.split_whitespace()
                    .filter_map(|p| p.parse::<i32>().ok()),
            );
        }
    }
    out
}

/// `pid` and every process below it.
pub fn descendants_and_self(pid: i32) -> Vec<i32> {
    let mut all = vec![pid];
    let mut k = 0;
    while k < all.len() {
        all.extend(children(all[k]));
        k += 1;
    }
    all
}

/// Waits until none of `pids` has a child left (sessions that ended are reaped), at most `limit`.
pub fn wait_childless(pids: &[i32], limit: Duration) -> bool {
    let until = Instant::now() + limit;
    loop {
        if pids.iter().all(|p| children(*p).is_empty()) {
            return true;
        }
        if Instant::now() > until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Busy and total jiffies of the whole machine, from `/proc/stat`.
pub fn machine_jiffies() -> (u64, u64) {
    let text = fs::read_to_string("/proc/stat").unwrap_or_default();
    let Some(line) = text.lines().find(|l| l.starts_with("cpu ")) else {
        return (0, 0);
    };
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    let get = |i: usize| v.get(i).copied().unwrap_or(0);
    // user nice system idle iowait irq softirq steal (guest is inside user)
    let busy = get(0) + get(1) + get(2) + get(5) + get(6) + get(7);
    (busy, busy + get(3) + get(4))
}

/// Converts jiffies of /proc/stat to seconds.
pub fn jiffies_s(j: u64) -> f64 {
    j as f64 / ticks_per_s()
}

/// A process's proportional set size, KiB.
fn pss_kib(pid: i32) -> Option<u64> {
    let text = fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    let line = text.lines().find(|l| l.starts_with("Pss:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// The number after `key` in `/proc/PID/status` (a size in KiB, or a count).
fn status_kib(pid: i32, key: &str) -> Option<u64> {
    let text = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = text.lines().find(|l| l.starts_with(key))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn children_cpu_s() -> f64 {
    // SAFETY: rusage is plain data; getrusage fills it.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a live out-pointer.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru) };
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

fn tv(t: libc::timeval) -> f64 {
    t.tv_sec as f64 + t.tv_usec as f64 * 1e-6
}

/// Runs `cmd` to its end and accounts for it and its whole process tree.
/// Must run in a process with no other children (the `account` subcommand).
/// The command is killed (SIGTERM, then SIGKILL 5 s later) after `timeout_s`.
pub fn account(mut cmd: Command, timeout_s: f64) -> Result<Account> {
    become_subreaper();
    let before = children_cpu_s();
    let t0 = Instant::now();
    let child = cmd.stdin(Stdio::null()).spawn().context("cannot start")?;
    let pid = child.id() as i32;
    // SAFETY: a raw syscall with integer arguments; the result is checked.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if fd < 0 {
        bail!("pidfd_open: {}", std::io::Error::last_os_error());
    }
    // SAFETY: a fresh descriptor we own.
    let pidfd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    let mut hwm = 0;
    let (mut polls, mut peaks) = (0u64, Peaks::default());
    let mut signalled = None::<Instant>;
    loop {
        let mut p = libc::pollfd {
            fd: pidfd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one live pollfd.
        let rc = unsafe { libc::poll(&mut p, 1, 20) };
        if rc > 0 {
            break;
        }
        if let Some(k) = status_kib(pid, "VmHWM:") {
            hwm = hwm.max(k);
        }
        // Every 25th poll: counting descriptors and children costs more than a status read.
        polls += 1;
        if polls % 25 == 0 {
            peaks.sample(pid);
        }
        let over = t0.elapsed().as_secs_f64() > timeout_s;
        match signalled {
            None if over => {
                eprintln!("kiln-bench: {cmd:?} ran past {timeout_s} s; terminating it");
                // SAFETY: a signal to our own child, by pid.
                unsafe { libc::kill(pid, libc::SIGTERM) };
                signalled = Some(Instant::now());
            }
            Some(at) if at.elapsed() > Duration::from_secs(5) => {
                // SAFETY: as above.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            _ => {}
        }
    }
    let wall_s = t0.elapsed().as_secs_f64();
    // SAFETY: siginfo_t is plain data; waitid on our own child.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above; WNOWAIT leaves the zombie for /proc.
    unsafe {
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOWAIT,
        )
    };
    let f = stat_fields(pid).unwrap_or_default();
    let tps = ticks_per_s();
    let self_user_s = field(&f, 14) as f64 / tps;
    let self_sys_s = field(&f, 15) as f64 / tps;
    let mut status = 0;
    // SAFETY: rusage is plain data.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: reaps our own child with live out-pointers.
    unsafe { libc::wait4(pid, &mut status, 0, &mut ru) };
    hwm = hwm.max(ru.ru_maxrss as u64);
    let exit = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -libc::WTERMSIG(status)
    };
    let left_behind = reap_all(Duration::from_secs(5));
    Ok(Account {
        exit,
        wall_s,
        self_user_s,
        self_sys_s,
        tree_cpu_s: children_cpu_s() - before,
        max_rss_kib: hwm,
        left_behind,
        peaks,
    })
}

/// Reaps every descendant reparented here; those alive after `grace` are
/// terminated (they are ours: the command left them behind). Returns their number.
fn reap_all(grace: Duration) -> usize {
    let until = Instant::now() + grace;
    let mut left = 0;
    let mut signalled = 0;
    loop {
        let mut status = 0;
        // SAFETY: reaps any child of ours.
        let rc = unsafe { libc::waitpid(-1, &mut status, libc::WNOHANG) };
        if rc > 0 {
            continue;
        }
        if rc < 0 {
            return left; // ECHILD: none left
        }
        if Instant::now() > until {
            let mine = children(std::process::id() as i32);
            if signalled == 0 {
                left = mine.len();
            }
            let sig = if signalled < 1 {
                libc::SIGTERM
            } else {
                libc::SIGKILL
            };
            for p in mine {
                // SAFETY: a signal to a child of ours, by pid.
                unsafe { libc::kill(p, sig) };
            }
            signalled += 1;
            if signalled > 3 {
                return left;
            }
            std::thread::sleep(Duration::from_millis(500));
            continue;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}
