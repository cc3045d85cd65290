//! kiln's worker: builds a benchmark under a decision set, runs it under
//! control (CPUs, environment, timeouts) and measures every run.

mod build_cache;
mod bundle_cache;
pub mod callgrind;
pub mod cgroup;
pub mod checked_output;
pub mod container;
pub mod counters;
pub mod cupti;
pub mod features;
mod gpu;
pub mod llvm_inline;
pub mod measure;
pub mod nvml;
mod object_cache;
pub mod probe;
pub mod process;
mod procfs;
pub mod report;
mod sampler;
pub mod serve;
mod slot_lock;
pub mod step;
pub mod sweep;
pub mod wrap;
