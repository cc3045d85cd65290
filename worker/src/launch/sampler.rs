//! Periodic sampling of a running process group's CPU and memory use.
//!
//! A thread reads `/proc/<pid>/stat` of every member of the group (the
//! launched process and whatever it forked, since they share its process
//! group) at a fixed interval. CPU % is the group's CPU time gained between
//! samples over the wall time between them (100 % = one CPU busy); RSS is the
//! sum over members. Opt-in, since the `/proc` scan costs a little CPU.

use std::collections::BTreeMap;
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use kiln_protocol::metric::{Metric, MetricValue, Metrics};

use crate::launch::procfs::{group_members, resident_bytes, stat_field};

/// The default sampling interval.
pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(50);

/// The metrics the sampler produces.
pub const SAMPLED_METRICS: &[Metric] = &[
    Metric::CpuPercentAvg,
    Metric::CpuPercentPeak,
    Metric::RssAvg,
];

/// Aggregates of the samples of one run; `None` when the run ended before the first sample.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SampleStats {
    /// Average CPU use, percent of one CPU.
    pub cpu_percent_avg: Option<f64>,
    /// Highest CPU use between two samples.
    pub cpu_percent_peak: Option<f64>,
    /// Average resident memory of the group, bytes.
    pub rss_avg: Option<f64>,
}

impl SampleStats {
    /// The measured values as metrics (a run too short to sample has none).
    pub fn metrics(&self) -> Metrics {
        [
            (Metric::CpuPercentAvg, self.cpu_percent_avg),
            (Metric::CpuPercentPeak, self.cpu_percent_peak),
            (Metric::RssAvg, self.rss_avg),
        ]
        .into_iter()
        .filter_map(|(m, v)| Some((m, MetricValue::Measured(v?))))
        .collect()
    }
}

/// A running sampler thread.
pub struct Sampler {
    stop: mpsc::Sender<()>,
    thread: JoinHandle<SampleStats>,
}

impl Sampler {
    /// Starts sampling the process group `pgid` every `every`.
    pub fn start(pgid: i32, every: Duration) -> Sampler {
        let (stop, stopped) = mpsc::channel();
        let thread = std::thread::spawn(move || {
            let tick = ticks_per_second();
            let mut prev: Option<(Instant, BTreeMap<i32, u64>)> = None;
            let (mut cpu, mut rss) = (Vec::new(), Vec::new());
            // Each wait is the interval; a message or a dropped sender stops.
            while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(every) {
                let now = Instant::now();
                let mut ticks = BTreeMap::new();
                let mut resident = 0u64;
                for pid in group_members(pgid) {
                    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                        continue;
                    };
                    let (Some(utime), Some(stime), Some(bytes)) = (
                        stat_field(&stat, 14),
                        stat_field(&stat, 15),
                        resident_bytes(&stat),
                    ) else {
                        continue;
                    };
                    ticks.insert(pid, (utime + stime).max(0) as u64);
                    resident += bytes;
                }
                if ticks.is_empty() {
                    continue;
                }
                rss.push(resident as f64);
                if let Some((then, before)) = &prev {
                    // Only members present in both samples: a process that
                    // exited took its CPU time with it.
                    let gained: u64 = ticks
                        .iter()
                        .map(|(pid, t)| t.saturating_sub(*before.get(pid).unwrap_or(&0)))
                        .sum();
                    let dt = now.duration_since(*then).as_secs_f64();
                    if dt > 0.0 {
                        cpu.push(gained as f64 / tick / dt * 100.0);
                    }
                }
                prev = Some((now, ticks));
            }
            let mean = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
            SampleStats {
                cpu_percent_avg: mean(&cpu),
                cpu_percent_peak: cpu.iter().copied().reduce(f64::max),
                rss_avg: mean(&rss),
            }
        });
        Sampler { stop, thread }
    }

    /// Stops sampling and returns the aggregates.
    pub fn finish(self) -> SampleStats {
        drop(self.stop);
        self.thread.join().unwrap_or_default()
    }
}

fn ticks_per_second() -> f64 {
    // SAFETY: sysconf has no memory arguments.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}
