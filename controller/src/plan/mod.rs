//! Plan: what to measure next. The search's moves ([`search`]), a chain's
//! proposals and verdicts in step order ([`chain`]), and what a step asks of
//! a worker and what its result is worth ([`step`]), and screening's shared
//! builds read flip by flip ([`attribution`]).
//!
//! Everything here is a pure function of the stored state, the measurements
//! and the chain's RNG: no I/O, no workers, no clock but the timestamps put
//! into records. It may use the store's record types, nothing above them.

pub mod attribution;
pub mod chain;
mod search;
pub mod step;

pub use search::{draw_weights, random_start};
