//! kiln's worker: builds a benchmark under a decision set, runs it under
//! control (CPUs, environment, timeouts) and measures every run.
//!
//! The modules are layered as the data flows: each imports only from the
//! ones listed before it (`scripts/test` checks that no two modules import
//! each other, directly or round a cycle).
//!
//! | module | owns |
//! |--------|------|
//! | [`launch`] | one command under control: spawn, output sinks and checks, watching, counters it inherits, sampling, escaped processes, cgroups, containers |
//! | [`files`] | copies and hashes of file trees, temporary folders renamed into place |
//! | [`build`] | a build under a decision set: environment and command lines, LLVM inline replay, the compiler wrapper, object and build caches |
//! | [`measure`] | the measuring engine: warm-ups, adaptive repetition, racing, callgrind, GPU time and energy, the summary `kiln-worker measure` prints |
//! | [`workspace`] | the rundir's folders: bundle cache, build cache, slots and their locks |
//! | [`discover`] | a benchmark's decision points, stock decisions and site features |
//! | [`probe`] | what this machine is and can measure |
//! | [`step`] | one step: work folder, build or cached build, measured runs |
//! | [`serve`] | the protocol with the controller on stdin/stdout |

pub mod build;
pub mod discover;
mod files;
pub mod launch;
pub mod measure;
pub mod probe;
pub mod serve;
pub mod step;
mod workspace;
