//! perf counters of launched processes and their descendants.
//!
//! The counters are opened once, on the thread that launches the runs
//! ([`Inherited`]): disabled, `enable_on_exec` and `inherit`. Each child the
//! thread starts gets its own copy of every counter, which starts counting
//! at its exec and is passed on to the children it forks; when a copy's
//! process exits, its counts fold into the thread's counters. A run's counts
//! are what the totals gained across it. This is what perf does for
//! counters a child opens on itself before exec, without a perf file per
//! counter per run (about 16 µs a run of `true`, a tenth of a launch).
//!
//! A process that escapes its run's process group (`setsid`) and outlives
//! the run keeps its copies. If it counts between two runs, the totals move
//! while no run is going, and the counters are opened afresh, so that it
//! adds nothing to later runs. (One that counts only while a later run runs
//! would add to that run; it would also take CPU from it.)
//!
//! A counter that cannot be opened, as hardware events on a machine without
//! a PMU, is reported `Unsupported`, never 0, and is not tried again by this
//! process.

use std::collections::BTreeMap;
use std::io;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Once;

use kiln_protocol::metric::{Metric, MetricValue, Metrics};
use perf_event::events::{Cache, CacheId, CacheOp, CacheResult, Hardware, Software};
use perf_event::{Builder, CountAndTime, Counter};

/// The metrics that come from perf counters, in display order.
pub const PERF_METRICS: &[Metric] = Metric::PERF;

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
            match build(m, false) {
                // Never enabled, never read: it only holds the key.
                Ok(counter) => std::mem::forget(counter),
                Err(e) => tracing::debug!("cannot keep a {m} counter open: {e}"),
            }
        }
    });
}

/// Counters opened on the calling thread and inherited by every child it
/// starts while they are open. Not `Send`: the counters follow the thread
/// that opened them, and only its children inherit them.
pub struct Inherited {
    open: Vec<(Metric, Option<Counter>)>,
    /// The totals when the last run ended.
    after_last: Option<Vec<Option<CountAndTime>>>,
    /// Whether they were reopened for a left-over process (said once).
    reopened: bool,
    _this_thread: PhantomData<*const ()>,
}

/// The totals before a run, to subtract from those after it.
pub struct Before(Vec<Option<CountAndTime>>);

impl Inherited {
    /// Opens every perf metric not known to be unavailable here on the
    /// calling thread. Children started from now on are counted.
    pub fn open() -> Inherited {
        keep_software_events_enabled();
        let unavailable = UNAVAILABLE.load(Ordering::Relaxed);
        let open = PERF_METRICS
            .iter()
            .enumerate()
            .filter(|(i, _)| unavailable & (1 << i) == 0)
            .map(|(i, &metric)| match build(metric, true) {
                Ok(counter) => (metric, Some(counter)),
                Err(e) => {
                    if is_permanent(&e) {
                        UNAVAILABLE.fetch_or(1 << i, Ordering::Relaxed);
                    }
                    tracing::debug!("perf counter {metric} unavailable: {e}");
                    (metric, None)
                }
            })
            .collect();
        Inherited {
            open,
            after_last: None,
            reopened: false,
            _this_thread: PhantomData,
        }
    }

    /// The totals just before a launch: those the last run ended with, if
    /// nothing has counted since. If task-clock moved (any process that runs
    /// moves it), a process left over from an earlier run (one that escaped
    /// its process group) is still counting into them: the counters are
    /// opened afresh, so that it cannot add to this run's counts.
    pub fn before_launch(&mut self) -> Before {
        if let Some(last) = self.after_last.take() {
            if !self.moved_since(&last) {
                return Before(last);
            }
            if !self.reopened {
                // Once per measurement: a benchmark that daemonizes does it every run.
                tracing::warn!(
                    "a process left over from an earlier run (outside its process group) is \
                     still running; perf counters reopened so that it is not counted"
                );
            }
            *self = Inherited {
                reopened: true,
                ..Inherited::open()
            };
        }
        Before(self.totals())
    }

    /// Whether the totals differ from `last`. Task-clock moves whenever a
    /// counted process runs, so one read of it tells, where it is open.
    fn moved_since(&mut self, last: &[Option<CountAndTime>]) -> bool {
        let key = |c: Option<CountAndTime>| c.map(|c| (c.count, c.time_enabled, c.time_running));
        let task_clock =
            |(m, c): &(Metric, Option<Counter>)| *m == Metric::TaskClock && c.is_some();
        match self.open.iter().position(task_clock) {
            Some(i) => {
                let now = self.open[i]
                    .1
                    .as_mut()
                    .and_then(|c| c.read_count_and_time().ok());
                key(now) != key(last[i])
            }
            None => !self
                .totals()
                .into_iter()
                .map(key)
                .eq(last.iter().copied().map(key)),
        }
    }

    /// A run's counts, once its process and all its descendants have
    /// exited: every perf metric is in the result, `Unsupported` where it
    /// could not be counted.
    pub fn after_exit(&mut self, before: Before) -> Metrics {
        let after = self.totals();
        let mut out: Metrics = PERF_METRICS
            .iter()
            .map(|&m| (m, MetricValue::Unsupported))
            .collect();
        for (((m, _), b), a) in self.open.iter().zip(&before.0).zip(&after) {
            let value = b
                .zip(*a)
                .and_then(|(b, a)| {
                    scaled(
                        a.count.checked_sub(b.count)?,
                        a.time_enabled.checked_sub(b.time_enabled)?,
                        a.time_running.checked_sub(b.time_running)?,
                    )
                })
                .map_or(MetricValue::Unsupported, MetricValue::Measured);
            out.insert(*m, value);
        }
        self.after_last = Some(after);
        out
    }

    fn totals(&mut self) -> Vec<Option<CountAndTime>> {
        self.open
            .iter_mut()
            .map(|(_, c)| c.as_mut()?.read_count_and_time().ok())
            .collect()
    }
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
        .map(|&m| (m, build(m, false).is_ok()))
        .collect()
}

/// A counter of `metric` on the calling thread; `inherited`: disabled until
/// exec and passed on to the children it starts (see [`Inherited`]).
fn build(metric: Metric, inherited: bool) -> io::Result<Counter> {
    let mut builder = builder(metric)?;
    builder.observe_self();
    if inherited {
        builder.inherit(true).enable_on_exec(true);
    }
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
