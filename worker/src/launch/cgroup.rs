//! Run limits through cgroups, as `docker run --cpus --memory` sets them.
//!
//! A measurement with limits gets a cgroup of its own under the worker's, with
//! the CPU quota and memory limit written; each timed run joins it between
//! clone and exec (see `launch`), so the whole process tree is limited from
//! its first instruction, and the cgroup is removed when the measurement ends.
//!
//! cgroup v2 is used where its hierarchy offers the cpu and memory
//! controllers; otherwise cgroup v1, where each controller has a hierarchy of
//! its own, and the run gets a cgroup in each (the cpu one and the memory one,
//! each under the worker's own path there).
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

use kiln_protocol::config::benchmark::Limits;
pub use kiln_protocol::message::CgroupVersion;
use kiln_protocol::message::LimitSupport;

/// The scheduling period the CPU quota is written with, µs (the kernel's default).
const CPU_PERIOD_US: u64 = 100_000;

/// Which limits this worker can apply, through which cgroup version, and why
/// not where it cannot.
pub fn support() -> LimitSupport {
    match chosen() {
        Ok(at) => at.support(),
        Err(detail) => LimitSupport {
            cpu: false,
            memory: false,
            detail,
            cgroup: None,
        },
    }
}

/// The cgroup versions on which this host offers both the cpu and the memory
/// controller to the worker (tests check limits on each).
pub fn offered() -> Vec<CgroupVersion> {
    [CgroupVersion::V2, CgroupVersion::V1]
        .into_iter()
        .filter(|&v| {
            located(v)
                .as_ref()
                .is_ok_and(|h| h.support().check(&BOTH).is_ok())
        })
        .collect()
}

/// Limits on both controllers, to ask whether a hierarchy offers both.
const BOTH: Limits = Limits {
    cpus: Some(1.0),
    memory_bytes: Some(1 << 30),
};

/// The worker's place in one cgroup version's hierarchies, located once per process.
fn located(version: CgroupVersion) -> &'static Result<Hierarchy, String> {
    static V1: OnceLock<Result<Hierarchy, String>> = OnceLock::new();
    static V2: OnceLock<Result<Hierarchy, String>> = OnceLock::new();
    match version {
        CgroupVersion::V1 => V1.get_or_init(|| V1Cgroups::locate().map(Hierarchy::V1)),
        CgroupVersion::V2 => V2.get_or_init(|| V2Cgroup::locate().map(Hierarchy::V2)),
    }
}

/// The version limits go through: v2 where it offers both controllers, else
/// v1 where it does, else whichever offers more (its support names what lacks).
fn chosen() -> Result<&'static Hierarchy, String> {
    if let Some(&v) = offered().first() {
        return located(v).as_ref().map_err(Clone::clone);
    }
    let score = |h: &Hierarchy| {
        let s = h.support();
        u8::from(s.cpu) + u8::from(s.memory)
    };
    match (located(CgroupVersion::V2), located(CgroupVersion::V1)) {
        (Ok(v2), Ok(v1)) if score(v1) > score(v2) => Ok(v1),
        (Ok(v2), _) => Ok(v2),
        (Err(_), Ok(v1)) => Ok(v1),
        (Err(e2), Err(e1)) => Err(format!("{e2}; {e1}")),
    }
}

/// Where the worker's cgroups are, in one version.
#[derive(Debug)]
enum Hierarchy {
    V1(V1Cgroups),
    V2(V2Cgroup),
}

impl Hierarchy {
    fn support(&self) -> LimitSupport {
        match self {
            Hierarchy::V1(v1) => v1.support(),
            Hierarchy::V2(v2) => v2.support(),
        }
    }
}

/// The worker's cgroup v2 and what it offers.
#[derive(Debug, Clone)]
struct V2Cgroup {
    /// The worker's cgroup folder when it started.
    base: PathBuf,
    /// Whether it is the hierarchy's root (exempt from the no-internal-process rule).
    is_root: bool,
    /// `cgroup.controllers` of `base`.
    controllers: String,
    cpu: bool,
    memory: bool,
}

impl V2Cgroup {
    /// Finds the cgroup v2 mount and this process's cgroup in it.
    fn locate() -> Result<V2Cgroup, String> {
        let mountinfo = read("/proc/self/mountinfo")?;
        let mount = cgroup2_mount(&mountinfo).ok_or("no cgroup v2 hierarchy is mounted")?;
        let membership = read("/proc/self/cgroup")?;
        let own = unified_path(&membership)
            .ok_or("this process has no cgroup v2 membership in /proc/self/cgroup")?;
        // A worker that moved itself into its leaf on an earlier use manages the parent.
        let own = own
            .strip_suffix(LEAF)
            .map_or(own, |p| p.trim_end_matches('/'));
        let base = mount.join(own.trim_start_matches('/'));
        let controllers = read(base.join("cgroup.controllers"))?.trim().to_string();
        let has = |c: &str| controllers.split_whitespace().any(|x| x == c);
        Ok(V2Cgroup {
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
            cgroup: Some(CgroupVersion::V2),
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

/// The worker's own cgroup in the cgroup v1 cpu and memory hierarchies.
#[derive(Debug, Clone)]
struct V1Cgroups {
    /// Its folder in the hierarchy with the cpu controller, or why there is none.
    cpu: Result<PathBuf, String>,
    /// Its folder in the hierarchy with the memory controller, or why there is none.
    memory: Result<PathBuf, String>,
}

impl V1Cgroups {
    fn locate() -> Result<V1Cgroups, String> {
        let mountinfo = read("/proc/self/mountinfo")?;
        let membership = read("/proc/self/cgroup")?;
        let find = |controller: &str, file: &str| {
            let dir = v1_own_dir(&mountinfo, &membership, controller)?;
            // A hierarchy that is mounted but not ours to see is no help.
            if dir.join(file).exists() {
                Ok(dir)
            } else {
                Err(format!("{} does not exist", dir.join(file).display()))
            }
        };
        Ok(V1Cgroups {
            cpu: find("cpu", "cpu.cfs_quota_us"),
            memory: find("memory", "memory.limit_in_bytes"),
        })
    }

    fn support(&self) -> LimitSupport {
        LimitSupport {
            cpu: self.cpu.is_ok(),
            memory: self.memory.is_ok(),
            detail: [&self.cpu, &self.memory]
                .into_iter()
                .filter_map(|r| r.as_ref().err().cloned())
                .collect::<Vec<_>>()
                .join("; "),
            cgroup: Some(CgroupVersion::V1),
        }
    }
}

/// The worker's cgroup in `version`, ready for children with `limits`.
fn prepared(version: Option<CgroupVersion>, limits: &Limits) -> Result<&'static Hierarchy, String> {
    let at = match version {
        Some(v) => located(v).as_ref().map_err(Clone::clone)?,
        None => chosen()?,
    };
    at.support().check(limits)?;
    if let Hierarchy::V2(v2) = at {
        // Serialised: two slots delegating at once would both move the worker.
        static DELEGATION: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _one = DELEGATION.lock().unwrap_or_else(|e| e.into_inner());
        v2.delegate(limits)
            .map_err(|e| format!("cannot apply {limits}: {e}"))?;
    }
    Ok(at)
}

/// A cgroup holding one measurement's runs (one per hierarchy on cgroup v1);
/// removed on drop.
#[derive(Debug)]
pub struct RunCgroup {
    version: CgroupVersion,
    limits: Limits,
    /// The run's folders, each in its hierarchy.
    dirs: Vec<PathBuf>,
    /// Their `cgroup.procs`, opened for the run's child to write itself into.
    procs: Vec<Arc<OwnedFd>>,
    /// The folder with the memory controller's files, where memory is limited.
    memory: Option<PathBuf>,
}

impl RunCgroup {
    /// Creates a cgroup with `limits` under the worker's, in the version [`support`] names.
    pub fn create(limits: &Limits) -> Result<RunCgroup, String> {
        RunCgroup::create_with(None, limits)
    }

    /// As [`RunCgroup::create`], in the given version's hierarchies (tests check each).
    pub fn create_in(version: CgroupVersion, limits: &Limits) -> Result<RunCgroup, String> {
        RunCgroup::create_with(Some(version), limits)
    }

    fn create_with(version: Option<CgroupVersion>, limits: &Limits) -> Result<RunCgroup, String> {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let at = prepared(version, limits)?;
        let name = format!(
            "kiln-run-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let quota = limits
            .cpus
            .map(|cpus| ((cpus * CPU_PERIOD_US as f64).round() as u64).max(1000));
        let mut cg = RunCgroup {
            version: match at {
                Hierarchy::V1(_) => CgroupVersion::V1,
                Hierarchy::V2(_) => CgroupVersion::V2,
            },
            limits: *limits,
            dirs: Vec::new(),
            procs: Vec::new(),
            memory: None,
        };
        // Each folder is added as soon as it exists, so that drop removes it on error.
        match at {
            Hierarchy::V2(v2) => {
                let dir = cg.add(&v2.base.join(&name))?;
                if let Some(quota) = quota {
                    write(&dir.join("cpu.max"), &format!("{quota} {CPU_PERIOD_US}"))?;
                }
                if let Some(bytes) = limits.memory_bytes {
                    write(&dir.join("memory.max"), &bytes.to_string())?;
                    // As docker's default --memory-swap: no swap beyond the memory limit.
                    write_if_exists(&dir.join("memory.swap.max"), "0")?;
                    cg.memory = Some(dir);
                }
            }
            Hierarchy::V1(v1) => {
                // check() above made sure the hierarchies the limits need are there.
                if let (Some(quota), Ok(base)) = (quota, &v1.cpu) {
                    let dir = cg.add(&base.join(&name))?;
                    write(&dir.join("cpu.cfs_period_us"), &CPU_PERIOD_US.to_string())?;
                    write(&dir.join("cpu.cfs_quota_us"), &quota.to_string())?;
                }
                if let (Some(bytes), Ok(base)) = (limits.memory_bytes, &v1.memory) {
                    let dir = cg.add(&base.join(&name))?;
                    write(&dir.join("memory.limit_in_bytes"), &bytes.to_string())?;
                    // Memory plus swap (set after memory: it may not be below it),
                    // so that swapping does not dodge the limit.
                    write_if_exists(&dir.join("memory.memsw.limit_in_bytes"), &bytes.to_string())?;
                    cg.memory = Some(dir);
                }
            }
        }
        Ok(cg)
    }

    /// Creates the folder `dir` and opens its `cgroup.procs`.
    fn add(&mut self, dir: &Path) -> Result<PathBuf, String> {
        create_dir(dir)?;
        self.dirs.push(dir.to_path_buf());
        let procs = dir.join("cgroup.procs");
        let file = fs::OpenOptions::new()
            .write(true)
            .open(&procs)
            .map_err(|e| format!("cannot open {}: {e}", procs.display()))?;
        self.procs.push(Arc::new(OwnedFd::from(file)));
        Ok(dir.to_path_buf())
    }

    /// The open `cgroup.procs` files a child writes "0" to, to join the cgroup
    /// (one per hierarchy).
    pub fn procs(&self) -> Vec<Arc<OwnedFd>> {
        self.procs.clone()
    }

    /// How many times the kernel's OOM killer has killed a process of this cgroup.
    pub fn oom_kills(&self) -> u64 {
        let Some(dir) = &self.memory else { return 0 };
        let counted = |file: &str, key: Option<&str>| {
            let text = fs::read_to_string(dir.join(file)).ok()?;
            match key {
                Some(key) => keyed_value(&text, key),
                None => text.trim().parse().ok(),
            }
        };
        match self.version {
            CgroupVersion::V2 => counted("memory.events", Some("oom_kill")),
            // Kernels before 4.13 count no kills: the times the limit was hit
            // stand in (the run is named OOM-killed only if also SIGKILLed).
            CgroupVersion::V1 => counted("memory.oom_control", Some("oom_kill"))
                .or_else(|| counted("memory.failcnt", None)),
        }
        .unwrap_or(0)
    }

    /// The limits this cgroup applies.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// Its folders, one in each hierarchy it uses.
    pub fn dirs(&self) -> &[PathBuf] {
        &self.dirs
    }

    /// The cgroup version it is made in.
    pub fn version(&self) -> CgroupVersion {
        self.version
    }
}

impl Drop for RunCgroup {
    fn drop(&mut self) {
        for dir in &self.dirs {
            kill_stragglers(dir);
            let removed = (0..100).any(|_| match fs::remove_dir(dir) {
                Ok(()) => true,
                Err(e) if e.kind() == io::ErrorKind::NotFound => true,
                Err(_) => {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                    false
                }
            });
            if !removed {
                tracing::warn!("cannot remove cgroup {}", dir.display());
            }
        }
    }
}

/// Kills what is left in the cgroup `dir`: the runs were reaped, but a
/// straggler that escaped the process group may remain.
fn kill_stragglers(dir: &Path) {
    let kill = dir.join("cgroup.kill");
    if kill.exists() {
        let _ = write(&kill, "1");
        return;
    }
    // cgroup v1 (and v2 before 5.14) has no cgroup.kill.
    let pids = fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
    for pid in pids
        .lines()
        .filter_map(|l| l.trim().parse::<libc::pid_t>().ok())
    {
        // SAFETY: kill has no memory effects.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}

/// This process's folder in the cgroup v1 hierarchy with `controller`.
fn v1_own_dir(mountinfo: &str, membership: &str, controller: &str) -> Result<PathBuf, String> {
    let (root, mount) = mountinfo
        .lines()
        .find_map(|line| {
            let (before, after) = line.split_once(" - ")?;
            let mut fs = after.split_whitespace();
            let options = (fs.next()? == "cgroup").then(|| fs.nth(1))??;
            options.split(',').any(|o| o == controller).then_some(())?;
            let mut fields = before.split_whitespace().skip(3);
            Some((fields.next()?, fields.next()?))
        })
        .ok_or(format!(
            "no cgroup v1 hierarchy with the {controller} controller is mounted"
        ))?;
    let own = membership
        .lines()
        .find_map(|l| {
            let mut parts = l.splitn(3, ':');
            let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            controllers
                .split(',')
                .any(|c| c == controller)
                .then_some(path)
        })
        .ok_or(format!(
            "this process has no cgroup v1 {controller} membership in /proc/self/cgroup"
        ))?;
    // A mount of a subtree (as in a container) shows it at its mount point.
    let relative = own.strip_prefix(root).unwrap_or(own);
    Ok(Path::new(mount).join(relative.trim_start_matches('/')))
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

fn read(file: impl AsRef<Path>) -> Result<String, String> {
    let file = file.as_ref();
    fs::read_to_string(file).map_err(|e| format!("cannot read {}: {e}", file.display()))
}

/// Writes `value` to `file` where the kernel offers it (swap accounting may be off).
fn write_if_exists(file: &Path, value: &str) -> Result<(), String> {
    if file.exists() {
        write(file, value)?;
    }
    Ok(())
}

fn write(file: &Path, value: &str) -> Result<(), String> {
    fs::OpenOptions::new()
        .write(true)
        .open(file)
        .and_then(|mut f| f.write_all(value.as_bytes()))
        .map_err(|e| format!("cannot write '{value}' to {}: {e}", file.display()))
}

#[cfg(test)]
mod tests;
