//! What a worker can measure, and how a measurement it cannot take is told
//! apart from a zero.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

macro_rules! metrics {
    ($( $variant:ident = $name:literal, $unit:literal, $doc:literal; )*) => {
        /// A quantity measured per run.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        pub enum Metric {
            $( #[doc = $doc] #[serde(rename = $name)] $variant, )*
        }

        impl Metric {
            /// Every metric, in display order.
            pub const ALL: &'static [Metric] = &[$(Metric::$variant),*];

            /// The metric's name in configs, tables and CSV.
            pub fn name(self) -> &'static str {
                match self { $(Metric::$variant => $name,)* }
            }

            /// The unit its values are in.
            pub fn unit(self) -> &'static str {
                match self { $(Metric::$variant => $unit,)* }
            }
        }
    };
}

metrics! {
    WallTime = "wall-time", "ns", "Elapsed monotonic time of the run.";
    UserTime = "user-time", "ns", "User CPU time of the process tree (wait4).";
    SystemTime = "system-time", "ns", "System CPU time of the process tree (wait4).";
    MaxRss = "max-rss", "bytes", "Peak resident set size (wait4).";
    TaskClock = "task-clock", "ns", "perf task-clock: CPU time on the slot's CPUs.";
    ContextSwitches = "context-switches", "count", "perf context switches.";
    CpuMigrations = "cpu-migrations", "count", "perf CPU migrations.";
    PageFaults = "page-faults", "count", "perf page faults.";
    Cycles = "cycles", "count", "Hardware CPU cycles.";
    HwInstructions = "hw-instructions", "count", "Hardware instructions retired (perf).";
    Branches = "branches", "count", "Hardware branch instructions.";
    BranchMisses = "branch-misses", "count", "Hardware branch mispredictions.";
    CacheReferences = "cache-references", "count", "Hardware cache references.";
    CacheMisses = "cache-misses", "count", "Hardware cache misses.";
    L1dLoadMisses = "l1d-load-misses", "count", "L1 data cache load misses.";
    LlcLoadMisses = "llc-load-misses", "count", "Last-level cache load misses.";
    DtlbLoadMisses = "dtlb-load-misses", "count", "Data TLB load misses.";
    Instructions = "instructions", "count", "Exact instruction count under callgrind.";
    CpuPercentAvg = "cpu-percent-avg", "%", "Sampled CPU use of the process tree, average.";
    CpuPercentPeak = "cpu-percent-peak", "%", "Sampled CPU use of the process tree, peak.";
    RssAvg = "rss-avg", "bytes", "Sampled resident memory of the process tree, average.";
    BlockIoBytes = "block-io", "bytes", "Block I/O read and written by the process tree.";
    GpuTime = "gpu-time", "ns", "GPU busy time: union of kernel intervals (CUPTI).";
    GpuKernelSum = "gpu-kernel-sum", "ns", "Sum of kernel durations (CUPTI).";
    GpuMemcpyTime = "gpu-memcpy-time", "ns", "Sum of memcpy and memset durations (CUPTI).";
    GpuKernelCount = "gpu-kernel-count", "count", "Kernels launched (CUPTI).";
    GpuDroppedRecords = "gpu-dropped-records", "count", "CUPTI activity records dropped.";
    Energy = "energy", "mJ", "GPU energy over the run (NVML total-energy counter).";
    PowerAvg = "power-avg", "mW", "GPU average power over the run (NVML).";
    PowerPeak = "power-peak", "mW", "GPU peak sampled power (NVML).";
    SmClock = "sm-clock", "MHz", "GPU SM clock, average of samples (NVML).";
    GpuTemperature = "gpu-temperature", "C", "GPU temperature, peak of samples (NVML).";
    GpuThrottled = "gpu-throttled", "%", "Share of NVML samples with clocks held down by power or heat.";
}

impl fmt::Display for Metric {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Metric {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Metric::ALL
            .iter()
            .copied()
            .find(|m| m.name() == s)
            .ok_or_else(|| {
                let names: Vec<_> = Metric::ALL.iter().map(|m| m.name()).collect();
                format!(
                    "unknown metric '{s}'; expected one of: {}",
                    names.join(", ")
                )
            })
    }
}

impl Metric {
    /// The metrics that come from perf counters, in display order: the kernel's
    /// software events first, then the hardware events a PMU counts.
    pub const PERF: &'static [Metric] = &[
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

    /// Whether the metric needs a hardware PMU (none in most VMs): the perf
    /// metrics past the four software events.
    pub fn needs_pmu(self) -> bool {
        Metric::PERF[4..].contains(&self)
    }

    /// Whether the metric comes from valgrind's callgrind, which needs its own run.
    pub fn needs_callgrind(self) -> bool {
        self == Metric::Instructions
    }

    /// Whether the metric comes from the CUPTI trace of kiln's injection library.
    pub fn needs_cupti(self) -> bool {
        matches!(
            self,
            Metric::GpuTime
                | Metric::GpuKernelSum
                | Metric::GpuMemcpyTime
                | Metric::GpuKernelCount
                | Metric::GpuDroppedRecords
        )
    }

    /// Whether the metric comes from sampling the GPU through NVML.
    pub fn needs_nvml(self) -> bool {
        matches!(
            self,
            Metric::Energy
                | Metric::PowerAvg
                | Metric::PowerPeak
                | Metric::SmClock
                | Metric::GpuTemperature
                | Metric::GpuThrottled
        )
    }

    /// Whether a smaller value is better (true for every time, count and energy).
    pub fn lower_is_better(self) -> bool {
        true
    }
}

/// One metric's value for one run: measured, or not measurable on this machine.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum MetricValue {
    /// A measured value in the metric's unit.
    Measured(f64),
    /// The machine cannot measure this metric (no PMU, no GPU, no valgrind).
    Unsupported,
}

impl MetricValue {
    /// The value if measured.
    pub fn measured(self) -> Option<f64> {
        match self {
            MetricValue::Measured(v) => Some(v),
            MetricValue::Unsupported => None,
        }
    }
}

impl fmt::Display for MetricValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MetricValue::Measured(v) => write!(f, "{v}"),
            MetricValue::Unsupported => f.write_str("unsupported"),
        }
    }
}

/// The metrics of one run.
pub type Metrics = BTreeMap<Metric, MetricValue>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for m in Metric::ALL {
            assert_eq!(m.name().parse::<Metric>().unwrap(), *m);
            let json = serde_json::to_string(m).unwrap();
            assert_eq!(json, format!("\"{}\"", m.name()));
        }
        assert!("stpes".parse::<Metric>().unwrap_err().contains("wall-time"));
    }

    #[test]
    fn unsupported_is_not_zero() {
        let v: MetricValue = serde_json::from_str("\"unsupported\"").unwrap();
        assert_eq!(v.measured(), None);
        let v: MetricValue = serde_json::from_str("{\"measured\":0.0}").unwrap();
        assert_eq!(v.measured(), Some(0.0));
    }
}
