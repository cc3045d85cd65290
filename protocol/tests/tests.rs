//! The protocol's integration tests, built as one binary (a link of the crate, not one per
//! file): each file beside this one is a module.

mod config;
mod frame;
mod large_files;
