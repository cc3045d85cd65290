//! perf counters of one launched process and its descendants.
//!
//! Counters are opened on the child's pid while it waits at the start gate,
//! with `enable_on_exec` (counting starts at exec, not at fork) and `inherit`
//! (children it forks are counted too; their counts fold into ours when they
//! exit). A counter that cannot be opened, as hardware events on a machine
//! without a PMU, is reported `Unsupported`, never 0.

use std::collections::BTreeMap;
use std::io;

use kiln_protocol::metric::{Metric, MetricValue, Metrics};
use perf_event::events::{Cache, CacheId, CacheOp, CacheResult, Hardware, Software};
use perf_event::{Builder, Counter};

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

/// Counters opened on one process (those that could not be opened are `None`).
pub struct Counters {
    open: Vec<(Metric, Option<Counter>)>,
}

impl Counters {
    /// Opens every perf metric on `pid`, disabled until it execs.
    pub fn open(pid: i32) -> Counters {
        let open = PERF_METRICS
            .iter()
            .map(|&m| {
                let counter = build(m, Some(pid))
                    .map_err(|e| tracing::debug!("perf counter {m} unavailable: {e}"))
                    .ok();
                (m, counter)
            })
            .collect();
        Counters { open }
    }

    /// Reads the totals, once the process and its children have exited.
    pub fn read(self) -> Metrics {
        self.open
            .into_iter()
            .map(|(m, counter)| {
                let value = counter
                    .and_then(|mut c| c.read_count_and_time().ok())
                    .and_then(|ct| scaled(ct.count, ct.time_enabled, ct.time_running))
                    .map_or(MetricValue::Unsupported, MetricValue::Measured);
                (m, value)
            })
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
        .map(|&m| (m, build(m, None).is_ok()))
        .collect()
}

fn build(metric: Metric, pid: Option<i32>) -> io::Result<Counter> {
    let cache_miss = |which: CacheId| Cache {
        which,
        operation: CacheOp::READ,
        result: CacheResult::MISS,
    };
    let mut builder = match metric {
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
    };
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
