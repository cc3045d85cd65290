//! Ending the processes that leave a launch's process group.
//!
//! A benchmark that starts a daemon (`setsid`, a double fork) takes it out of
//! the group that a launch kills at its end. The worker is a child subreaper,
//! so such a process, once its parent is gone, becomes a child of the worker.
//! The worker's other children are launch leaders (each leading its group),
//! members those leave behind, and the tools it runs itself (in the worker's
//! own group): a child outside all of those escaped a launch. Every launch
//! carries its id in its environment ([`MARKER`]), so that the end of one
//! launch ends only what escaped from it, not a daemon that a launch running
//! beside it in another slot still needs; an escaped process whose id cannot
//! be read (a new environment) is ended once no launch runs, and everything
//! escaped is ended when the worker exits. Unlike a cgroup this needs no
//! privilege and works on every host.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::launch::procfs::stat_field;

/// The environment variable that carries a launch's id (zero-padded, so that
/// every launch's environment has the same size).
pub const MARKER: &str = "KILN_LAUNCH";

/// A launch's id, unique within this worker process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LaunchId(u64);

impl LaunchId {
    /// A fresh id.
    pub fn next() -> LaunchId {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        LaunchId(NEXT.fetch_add(1, Ordering::Relaxed))
    }

    /// The `NAME=value` entry for the launch's environment.
    pub fn env_entry(self) -> String {
        format!("{MARKER}={:020}", self.0)
    }
}

#[derive(Default)]
struct Live {
    /// Process groups of the launches running now (each its leader's pid).
    groups: HashSet<i32>,
    ids: HashSet<LaunchId>,
}

static LIVE: Mutex<Option<Live>> = Mutex::new(None);

/// The registry of running launches. Held across a launch's clone, so that a
/// sweep on another thread never takes a child that is not registered yet for
/// an escaped one.
pub struct Registry(MutexGuard<'static, Option<Live>>);

/// Locks the registry.
pub fn registry() -> Registry {
    Registry(LIVE.lock().unwrap_or_else(|p| p.into_inner()))
}

impl Registry {
    fn live(&mut self) -> &mut Live {
        self.0.get_or_insert_with(Live::default)
    }

    /// Registers a launch just started, whose group `pgid` leads.
    pub fn add(&mut self, id: LaunchId, pgid: i32) {
        let live = self.live();
        live.groups.insert(pgid);
        live.ids.insert(id);
    }

    /// Forgets a launch that is over (its group killed and reaped).
    pub fn remove(&mut self, id: LaunchId, pgid: i32) {
        let live = self.live();
        live.groups.remove(&pgid);
        live.ids.remove(&id);
    }
}

/// Which escaped processes a sweep ends.
#[derive(Debug, Clone, Copy)]
pub enum Sweep {
    /// Those of this launch, which is over, and of launches already over.
    After(LaunchId),
    /// All of them: the worker is exiting.
    All,
}

/// How long escaped processes may take to die and be reaped.
const SWEEP_GRACE: Duration = Duration::from_secs(2);

/// Kills and reaps the children of this process that escaped a launch (see
/// the module's text), and theirs in turn as they become ours. Returns how
/// many it killed.
pub fn sweep_escaped(which: Sweep) -> usize {
    let mut registry = registry();
    let live = registry.live();
    // SAFETY: getpgrp has no arguments and cannot fail.
    let own_group = unsafe { libc::getpgrp() };
    let deadline = Instant::now() + SWEEP_GRACE;
    let mut killed = 0;
    loop {
        let mut left = Vec::new();
        for pid in children() {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            let group = stat_field(&stat, 5).unwrap_or_default() as i32;
            if group == own_group || live.groups.contains(&group) {
                continue;
            }
            // A dead one (a zombie) is only reaped: harmless to any launch.
            let zombie = stat[stat.rfind(')').unwrap_or(0) + 1..]
                .trim_start()
                .starts_with('Z');
            let ends = zombie
                || match (which, launch_of(pid)) {
                    (Sweep::All, _) => true,
                    (Sweep::After(_), Some(id)) => !live.ids.contains(&id),
                    (Sweep::After(_), None) => live.ids.is_empty(),
                };
            if !ends {
                continue;
            }
            if !zombie {
                // SAFETY: a child of ours, not reaped yet, so the pid is still its.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                killed += 1;
            }
            let mut status = 0;
            // SAFETY: waitpid on our own child. A killed one may not be dead yet: it is
            // reaped on a later round, its own children (now ours) killed then too.
            if unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) } != pid {
                left.push(pid);
            }
        }
        if left.is_empty() {
            return killed;
        }
        if Instant::now() >= deadline {
            tracing::warn!(
                "processes {left:?} escaped a launch and are still there {SWEEP_GRACE:?} after SIGKILL"
            );
            return killed;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The launch a process came from, from its environment.
fn launch_of(pid: i32) -> Option<LaunchId> {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let prefix = format!("{MARKER}=");
    environ
        .split(|&b| b == 0)
        .find_map(|entry| entry.strip_prefix(prefix.as_bytes()))
        .and_then(|v| std::str::from_utf8(v).ok()?.parse().ok())
        .map(LaunchId)
}

/// This process's children, from every thread's `children` list.
fn children() -> Vec<i32> {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("children")).ok())
        .flat_map(|list| {
            list.split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<i32>>()
        })
        .collect()
}
