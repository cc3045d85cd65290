//! kiln's controller: reads a campaign config, plans searches, dispatches
//! steps to workers, stores every step and exports datasets.
//!
//! The data flows one way, and the modules are layered the same way: each
//! imports only from the ones listed before it (`scripts/test` checks that
//! no two modules import each other, directly or round a cycle).
//!
//! | module | owns |
//! |--------|------|
//! | [`text`], [`logging`] | number formatting every output shares; log setup |
//! | [`atomic`] | the files written for a person, whole or not at all |
//! | [`store`] | the sled store: records, every key and file name, opening, verification |
//! | [`error`] | the exit status of every failure |
//! | [`plan`] | the search: proposals, verdicts in step order, what a step asks and is worth |
//! | [`dispatch`] | workers: the pool, slots, calibration, connections, local and SSH channels, bundles |
//! | [`campaign`] | the run loop that owns chain state, its progress display and status report |
//! | [`rewards`] | ridge-regression rewards of decisions |
//! | [`export`] | the CSV tables |
//! | [`report`] | plots and their page |
//! | [`cli`], [`commands`] | the command line, and one file per subcommand that runs it |

mod atomic;
mod campaign;
pub mod cli;
pub mod commands;
pub mod dispatch;
pub mod error;
pub mod export;
pub mod logging;
mod measure;
mod plan;
pub mod report;
pub mod rewards;
pub mod serve;
pub mod store;
mod text;
