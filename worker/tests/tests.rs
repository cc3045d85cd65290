//! The worker's integration tests, built as one binary (a link of the crate, not one per file):
//! each file beside this one is a module, and `common` holds what they share.
//!
//! The worker's launches and file writes run in this process beside every test, so a test starts
//! its own programs as the worker's helpers do, through `kiln_worker::launch::{spawn_std,
//! output_std}`, and writes an executable under `process::writing`: a program started while an
//! executable is open for writing holds it open until it execs, and running that executable then
//! fails ("Text file busy"). A test's program must also stay in this process group: the worker
//! ends every child of this process outside it as escaped from a launch.

mod common;

mod features;
mod gpu;
mod limits;
mod llvm_inline;
mod measure;
mod serve;
mod step;
mod timing;
