//! The controller's integration tests, built as one binary (a link of the crate, not one per
//! file): each file beside this one is a module, and `common` holds what they share.

mod common;

mod campaign;
mod container;
mod conventions;
mod corpus;
mod datasets;
mod effects;
mod exit_status;
mod exports;
mod inline;
mod inputs;
mod manual;
mod outputs;
mod policy;
mod racing;
mod repository;
mod rewards;
mod serve;
mod slurm;
mod ssh;
mod ssh_campaign;
mod store_format;
mod store_verify;
mod trust;
