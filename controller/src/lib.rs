//! kiln's controller: reads a campaign config, plans searches, dispatches
//! steps to workers, stores every step and exports datasets.
//!
//! Data flows one way: config → plan ([`chain`], [`search`]) → dispatch
//! ([`pool`], [`connection`], [`transport`], [`ssh`]) → measure (the worker) →
//! store ([`store`]) → report ([`status`]).

pub mod bundle;
pub mod calibration;
pub mod campaign;
pub mod chain;
pub mod commands;
pub mod connection;
pub mod export;
pub mod logging;
pub mod manual;
pub mod pool;
pub mod progress;
pub mod report;
pub mod rewards;
pub mod search;
pub mod ssh;
pub mod status;
pub mod store;
pub mod transport;
