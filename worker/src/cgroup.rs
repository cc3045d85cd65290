//! Run limits through cgroup v2, as `docker run --cpus --memory` sets them.
//!
//! A measurement with limits gets a cgroup of its own under the worker's, with
//! `cpu.max` and `memory.max` written; each timed run joins it between clone
//! and exec (see `process`), so the whole process tree is limited from its
//! first instruction, and the cgroup is removed when the measurement ends.
//!
//! cgroup v2 lets a cgroup hand controllers to its children only while no
//! process lives in it (the root excepted). So on first use a worker outside
//! the root moves itself into a leaf child, `kiln-worker`, and then enables the
//! controllers for its cgroup's children, which is what a delegated systemd
//! unit (`systemd-run --scope -p Delegate=yes`) expects of its service.

use std::fs;
use std::io::{self, Write as _};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use kiln_protocol::config::Limits;
use kiln_protocol::message::LimitSupport;

/// The scheduling period `cpu.max` is written with, µs (the kernel's default).
const CPU_PERIOD_US: u64 = 100_000;

/// Which limits this worker can apply, and why not where it cannot.
pub fn support() -> LimitSupport {
    match WorkerCgroup::locate() {
        Ok(at) => at.support(),
        Err(detail) => LimitSupport {
            cpu: false,
            memory: false,
            detail,
        },
    }
}

/// Where the worker's cgroup is and what it offers.
#[derive(Debug, Clone)]
struct WorkerCgroup {
    /// The worker's cgroup folder when it started.
    base: PathBuf,
    /// Whether it is the hierarchy's root (exempt from the no-internal-process rule).
    is_root: bool,
    /// `cgroup.controllers` of `base`.
    controllers: String,
    cpu: bool,
    memory: bool,
}

impl WorkerCgroup {
    /// Finds the cgroup v2 mount and this process's cgroup in it.
    fn locate() -> Result<WorkerCgroup, String> {
        let mountinfo = fs::read_to_string("/proc/self/mountinfo")
            .map_err(|e| format!("cannot read /proc/self/mountinfo: {e}"))?;
        let mount = cgroup2_mount(&mountinfo).ok_or(
            "no cgroup v2 hierarchy is mounted (cgroup v1 only); run limits need cgroup v2",
        )?;
        let membership = fs::read_to_string("/proc/self/cgroup")
            .map_err(|e| format!("cannot read /proc/self/cgroup: {e}"))?;
        let own = unified_path(&membership)
            .ok_or("this process has no cgroup v2 membership in /proc/self/cgroup")?;
        // A worker that moved itself into its leaf on an earlier use manages the parent.
        let own = own
            .strip_suffix(LEAF)
            .map_or(own, |p| p.trim_end_matches('/'));
        let base = mount.join(own.trim_start_matches('/'));
        let controllers = fs::read_to_string(base.join("cgroup.controllers"))
            .map_err(|e| {
                format!(
                    "cannot read {}: {e}",
                    base.join("cgroup.controllers").display()
                )
            })?
            .trim()
            .to_string();
        let has = |c: &str| controllers.split_whitespace().any(|x| x == c);
        Ok(WorkerCgroup {
            is_root: own == "/" || own.is_empty(),
            cpu: has("cpu"),
            memory: has("memory"),
            controllers,
            base,
        })
    }

    /// What this cgroup lets the worker limit.
    fn support(&self) -> LimitSupport {
        let detail = if self.cpu && self.memory {
            String::new()
        } else {
            format!(
                "{} offers the controllers: {}",
                self.base.join("cgroup.controllers").display(),
                if self.controllers.is_empty() {
                    "(none)"
                } else {
                    &self.controllers
                }
            )
        };
        LimitSupport {
            cpu: self.cpu,
            memory: self.memory,
            detail,
        }
    }

    /// Makes the controllers `limits` needs available to new child cgroups of
    /// `base`, moving the worker into its leaf first where the rule demands it.
    fn delegate(&self, limits: &Limits) -> Result<(), String> {
        let wanted: Vec<&str> = [
            (limits.cpus.is_some(), "cpu"),
            (limits.memory_bytes.is_some(), "memory"),
        ]
        .into_iter()
        .filter_map(|(w, c)| w.then_some(c))
        .collect();
        let subtree = self.base.join("cgroup.subtree_control");
        let enabled = fs::read_to_string(&subtree).unwrap_or_default();
        let missing: Vec<&str> = wanted
            .into_iter()
            .filter(|c| !enabled.split_whitespace().any(|x| x == *c))
            .collect();
        if missing.is_empty() {
            return Ok(());
        }
        if !self.is_root {
            let leaf = self.base.join(LEAF);
            create_dir(&leaf)?;
            write(&leaf.join("cgroup.procs"), &std::process::id().to_string())?;
        }
        for c in missing {
            write(&subtree, &format!("+{c}")).map_err(|e| {
                format!(
                    "{e}; other processes may share the worker's cgroup: start kiln-worker in \
                     a cgroup of its own (systemd-run --scope -p Delegate=yes kiln-worker ...)"
                )
            })?;
        }
        Ok(())
    }
}

/// The leaf the worker moves itself into.
const LEAF: &str = "kiln-worker";

/// The worker's cgroup, located and delegated once per process.
fn prepared(limits: &Limits) -> Result<&'static WorkerCgroup, String> {
    static AT: OnceLock<Result<WorkerCgroup, String>> = OnceLock::new();
    let at = AT
        .get_or_init(WorkerCgroup::locate)
        .as_ref()
        .map_err(Clone::clone)?;
    at.support().check(limits)?;
    // Serialised: two slots delegating at once would both move the worker.
    static DELEGATION: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one = DELEGATION.lock().unwrap_or_else(|e| e.into_inner());
    at.delegate(limits)
        .map_err(|e| format!("cannot apply {limits}: {e}"))?;
    Ok(at)
}

/// A cgroup holding one measurement's runs; removed on drop.
#[derive(Debug)]
pub struct RunCgroup {
    dir: PathBuf,
    limits: Limits,
    /// `cgroup.procs`, opened for the run's child to write itself into.
    procs: Arc<OwnedFd>,
}

impl RunCgroup {
    /// Creates a cgroup with `limits` under the worker's cgroup.
    pub fn create(limits: &Limits) -> Result<RunCgroup, String> {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let at = prepared(limits)?;
        let name = format!(
            "kiln-run-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let dir = at.base.join(name);
        create_dir(&dir)?;
        // From here on, drop removes the folder again.
        let procs = fs::OpenOptions::new()
            .write(true)
            .open(dir.join("cgroup.procs"))
            .map_err(|e| format!("cannot open {}: {e}", dir.join("cgroup.procs").display()));
        let procs = match procs {
            Ok(f) => Arc::new(OwnedFd::from(f)),
            Err(e) => {
                let _ = fs::remove_dir(&dir);
                return Err(e);
            }
        };
        let cg = RunCgroup {
            dir,
            limits: *limits,
            procs,
        };
        if let Some(cpus) = limits.cpus {
            let quota = ((cpus * CPU_PERIOD_US as f64).round() as u64).max(1000);
            write(&cg.dir.join("cpu.max"), &format!("{quota} {CPU_PERIOD_US}"))?;
        }
        if let Some(bytes) = limits.memory_bytes {
            write(&cg.dir.join("memory.max"), &bytes.to_string())?;
            // As docker's default --memory-swap: no swap beyond the memory limit.
            let swap = cg.dir.join("memory.swap.max");
            if swap.exists() {
                write(&swap, "0")?;
            }
        }
        Ok(cg)
    }

    /// The open `cgroup.procs` a child writes "0" to, to join the cgroup.
    pub fn procs(&self) -> Arc<OwnedFd> {
        self.procs.clone()
    }

    /// How many times the kernel's OOM killer has killed a process of this cgroup.
    pub fn oom_kills(&self) -> u64 {
        fs::read_to_string(self.dir.join("memory.events"))
            .ok()
            .and_then(|events| keyed_value(&events, "oom_kill"))
            .unwrap_or(0)
    }

    /// The limits this cgroup applies.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }
}

impl Drop for RunCgroup {
    fn drop(&mut self) {
        // The runs were reaped, but a straggler that escaped the process group may remain.
        let kill = self.dir.join("cgroup.kill");
        if kill.exists() {
            let _ = write(&kill, "1");
        }
        for _ in 0..100 {
            match fs::remove_dir(&self.dir) {
                Ok(()) => return,
                Err(e) if e.kind() == io::ErrorKind::NotFound => return,
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(10)),
            }
        }
        tracing::warn!("cannot remove cgroup {}", self.dir.display());
    }
}

/// The mount point of the cgroup v2 hierarchy, from `/proc/self/mountinfo`.
fn cgroup2_mount(mountinfo: &str) -> Option<PathBuf> {
    mountinfo.lines().find_map(|line| {
        let (before, after) = line.split_once(" - ")?;
        if after.split_whitespace().next()? != "cgroup2" {
            return None;
        }
        before.split_whitespace().nth(4).map(PathBuf::from)
    })
}

/// This process's path in the unified hierarchy: the `0::PATH` line of `/proc/self/cgroup`.
fn unified_path(membership: &str) -> Option<&str> {
    membership.lines().find_map(|l| l.strip_prefix("0::"))
}

/// The value of `key` in a flat keyed file such as `memory.events`.
fn keyed_value(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok())?
    })
}

fn create_dir(dir: &Path) -> Result<(), String> {
    match fs::create_dir(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(format!("cannot create cgroup {}: {e}", dir.display())),
    }
}

fn write(file: &Path, value: &str) -> Result<(), String> {
    fs::OpenOptions::new()
        .write(true)
        .open(file)
        .and_then(|mut f| f.write_all(value.as_bytes()))
        .map_err(|e| format!("cannot write '{value}' to {}: {e}", file.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_unified_mount_among_v1_ones() {
        let info = "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n\
                    41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
        assert_eq!(
            cgroup2_mount(info),
            Some(PathBuf::from("/sys/fs/cgroup/unified"))
        );
        assert_eq!(cgroup2_mount(&info[..info.find('\n').unwrap()]), None);
    }

    #[test]
    fn reads_membership_and_events() {
        assert_eq!(
            unified_path("4:memory:/a\n0::/user.slice/x.scope\n"),
            Some("/user.slice/x.scope")
        );
        assert_eq!(unified_path("4:memory:/a\n"), None);
        let events = "low 0\nhigh 0\nmax 3\noom 1\noom_kill 2\noom_group_kill 0\n";
        assert_eq!(keyed_value(events, "oom_kill"), Some(2));
        assert_eq!(keyed_value(events, "oom"), Some(1));
    }

    #[test]
    fn missing_controllers_are_named() {
        let support = LimitSupport {
            cpu: true,
            memory: false,
            detail: "x offers: cpu".into(),
        };
        let limits = Limits {
            cpus: Some(1.0),
            memory_bytes: Some(1 << 20),
        };
        let e = support.check(&limits).unwrap_err();
        assert!(e.contains("memory controller"), "{e}");
        assert!(e.contains("(memory 1048576)"), "{e}");
        assert!(support
            .check(&Limits {
                cpus: Some(2.0),
                memory_bytes: None
            })
            .is_ok());
    }
}
