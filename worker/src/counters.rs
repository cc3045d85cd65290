//! perf counters of one launched process and its descendants.
//!
//! The launched child opens its counters on itself between clone and exec
//! (see `process`), from attributes [`plan`] prepares: `enable_on_exec`
//! (counting starts at exec), `inherit` (children it forks are counted too;
//! their counts fold into ours when they exit). A counter that cannot be
//! opened, as hardware events on a machine without a PMU, is reported
//! `Unsupported`, never 0, and is not tried again by this process.

use std::collections::BTreeMap;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Once;

use kiln_protocol::metric::{Metric, MetricValue, Metrics};
use perf_event::events::{Cache, CacheId, CacheOp, CacheResult, Hardware, Software};
use perf_event::{Builder, Counter};
use perf_event_open_sys::bindings::perf_event_attr;

/// The metrics that come from perf counters, in display order.
pub const PERF_METRICS: &[Metric] = &[
    Metric::TaskClock,
    Metric::ContextSwitches,
    Metric::CpuMigrations,
    Metric::PageFaults,
    Metric::Cycles,
    Metric::HwInstructions,
    Metric::Branches,
    Metric::BranchMisses,
    Metric::CacheReferences,
    Metric::CacheMisses,
    Metric::L1dLoadMisses,
    Metric::LlcLoadMisses,
    Metric::DtlbLoadMisses,
];

/// Bit `i` set: `PERF_METRICS[i]` cannot be opened on this machine (no PMU,
/// an unsupported event), so later launches do not try it again.
static UNAVAILABLE: AtomicU32 = AtomicU32::new(0);

const _: () = assert!(PERF_METRICS.len() <= 32);

/// Whether an error of `perf_event_open` says the event cannot be counted
/// here at all (as opposed to a passing shortage such as too many open files).
fn is_permanent(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOENT | libc::EOPNOTSUPP | libc::ENODEV | libc::EINVAL | libc::EACCES)
    )
}

/// The kernel enables a static key the first time a software event of a
/// kind is created and disables it when the last one is closed, patching
/// kernel text and interrupting every CPU each time. Keeping one disabled
/// counter of each kind open on the worker itself keeps the keys enabled,
/// so opening and closing counters per run costs no cross-CPU interrupts
/// (which would also disturb the runs on other slots).
fn keep_software_events_enabled() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        for m in [
            Metric::TaskClock,
            Metric::ContextSwitches,
            Metric::CpuMigrations,
            Metric::PageFaults,
        ] {
            match build(m, None) {
                // Never enabled, never read: it only holds the key.
                Ok(counter) => std::mem::forget(counter),
                Err(e) => tracing::debug!("cannot keep a {m} counter open: {e}"),
            }
        }
    });
}

/// A counter for a launched child to open on itself before it execs.
pub struct Planned {
    /// The metric.
    pub metric: Metric,
    /// Its attributes, kernel time included.
    pub attr: perf_event_attr,
    /// The same counting user space only (where the kernel refuses the first with EACCES).
    pub user_only: perf_event_attr,
}

/// The counters to open for one launch: every perf metric not known to be
/// unavailable here, disabled until exec, inherited by the child's children.
pub fn plan() -> Vec<Planned> {
    keep_software_events_enabled();
    let unavailable = UNAVAILABLE.load(Ordering::Relaxed);
    PERF_METRICS
        .iter()
        .enumerate()
        .filter(|(i, _)| unavailable & (1 << i) == 0)
        .filter_map(|(_, &metric)| {
            let mut b = builder(metric).ok()?;
            // Count kernel time too, as `perf stat` does.
            b.inherit(true).enable_on_exec(true).include_kernel();
            let attr = *b.attrs();
            b.exclude_kernel(true);
            Some(Planned {
                metric,
                attr,
                user_only: *b.attrs(),
            })
        })
        .collect()
}

/// Counters a launched child opened on itself (those that could not be opened are `None`).
pub struct Counters {
    open: Vec<(Metric, Option<OwnedFd>)>,
}

impl Counters {
    /// The counters of `plan` as the child opened them: `results[i]` is a
    /// descriptor in this process, or a negated errno. A metric the machine
    /// cannot count is remembered, and not planned again.
    pub fn opened(plan: &[Planned], results: &[i32]) -> Counters {
        let open = plan
            .iter()
            .zip(results)
            .map(|(p, &r)| {
                if r >= 0 {
                    // SAFETY: the child opened it in the descriptor table it
                    // shared with us; nothing else owns it.
                    return (p.metric, Some(unsafe { OwnedFd::from_raw_fd(r) }));
                }
                let e = io::Error::from_raw_os_error(-r);
                if is_permanent(&e) {
                    if let Some(i) = PERF_METRICS.iter().position(|m| *m == p.metric) {
                        UNAVAILABLE.fetch_or(1 << i, Ordering::Relaxed);
                    }
                }
                tracing::debug!("perf counter {} unavailable: {e}", p.metric);
                (p.metric, None)
            })
            .collect();
        Counters { open }
    }

    /// Reads the totals, once the process and its children have exited; every
    /// perf metric is in the result, `Unsupported` where it could not be counted.
    pub fn read(self) -> Metrics {
        let mut out: Metrics = PERF_METRICS
            .iter()
            .map(|&m| (m, MetricValue::Unsupported))
            .collect();
        for (m, fd) in self.open {
            let value = fd
                .and_then(|fd| read_count(&fd))
                .and_then(|(count, enabled, running)| scaled(count, enabled, running))
                .map_or(MetricValue::Unsupported, MetricValue::Measured);
            out.insert(m, value);
        }
        out
    }
}

/// Count, time enabled and time running of a counter (read format
/// `TOTAL_TIME_ENABLED | TOTAL_TIME_RUNNING`, as [`Builder::new`] sets it).
fn read_count(fd: &OwnedFd) -> Option<(u64, u64, u64)> {
    let mut v = [0u64; 3];
    // SAFETY: reads at most 24 bytes into a live buffer of 24 bytes.
    let n = unsafe { libc::read(fd.as_raw_fd(), v.as_mut_ptr().cast(), 24) };
    (n == 24).then_some((v[0], v[1], v[2]))
}

/// A count corrected for multiplexing; `None` if the counter never ran while enabled.
fn scaled(count: u64, enabled: u64, running: u64) -> Option<f64> {
    if enabled == 0 {
        // Never enabled: the process did nothing countable.
        return Some(count as f64);
    }
    if running == 0 {
        return None;
    }
    Some(count as f64 * enabled as f64 / running as f64)
}

/// Which perf metrics open on this machine (tried on the calling process).
pub fn available() -> BTreeMap<Metric, bool> {
    PERF_METRICS
        .iter()
        .map(|&m| (m, build(m, None).is_ok()))
        .collect()
}

fn build(metric: Metric, pid: Option<i32>) -> io::Result<Counter> {
    let mut builder = builder(metric)?;
    match pid {
        Some(pid) => builder.observe_pid(pid).inherit(true).enable_on_exec(true),
        None => builder.observe_self(),
    };
    // Count kernel time too, as `perf stat` does; unprivileged users under a
    // strict perf_event_paranoid may only count user space.
    builder.include_kernel();
    match builder.build() {
        Err(e) if e.raw_os_error() == Some(libc::EACCES) => builder.exclude_kernel(true).build(),
        other => other,
    }
}

/// A builder for a perf metric's event.
fn builder(metric: Metric) -> io::Result<Builder<'static>> {
    let cache_miss = |which: CacheId| Cache {
        which,
        operation: CacheOp::READ,
        result: CacheResult::MISS,
    };
    Ok(match metric {
        Metric::TaskClock => Builder::new(Software::TASK_CLOCK),
        Metric::ContextSwitches => Builder::new(Software::CONTEXT_SWITCHES),
        Metric::CpuMigrations => Builder::new(Software::CPU_MIGRATIONS),
        Metric::PageFaults => Builder::new(Software::PAGE_FAULTS),
        Metric::Cycles => Builder::new(Hardware::CPU_CYCLES),
        Metric::HwInstructions => Builder::new(Hardware::INSTRUCTIONS),
        Metric::Branches => Builder::new(Hardware::BRANCH_INSTRUCTIONS),
        Metric::BranchMisses => Builder::new(Hardware::BRANCH_MISSES),
        Metric::CacheReferences => Builder::new(Hardware::CACHE_REFERENCES),
        Metric::CacheMisses => Builder::new(Hardware::CACHE_MISSES),
        Metric::L1dLoadMisses => Builder::new(cache_miss(CacheId::L1D)),
        Metric::LlcLoadMisses => Builder::new(cache_miss(CacheId::LL)),
        Metric::DtlbLoadMisses => Builder::new(cache_miss(CacheId::DTLB)),
        other => {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                format!("{other} is not a perf counter"),
            ))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scaling() {
        assert_eq!(scaled(100, 10, 5), Some(200.0));
        assert_eq!(scaled(100, 10, 0), None);
        assert_eq!(scaled(0, 0, 0), Some(0.0));
    }

    #[test]
    fn software_counters_open() {
        let avail = available();
        assert_eq!(
            avail.get(&Metric::TaskClock),
            Some(&true),
            "task-clock should open everywhere"
        );
    }
}
