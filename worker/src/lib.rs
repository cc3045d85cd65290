//! kiln's worker: builds a benchmark under a decision set, runs it under
//! control (CPUs, environment, timeouts) and measures every run.

pub mod llvm_inline;
