//! The worker's integration tests, built as one binary (a link of the crate, not one per file):
//! each file beside this one is a module, and `common` holds what they share.

mod common;

mod features;
mod gpu;
mod limits;
mod llvm_inline;
mod measure;
mod serve;
mod step;
mod timing;
