//! kiln's controller: reads a campaign config, plans searches, dispatches
//! steps to workers, stores every step and exports datasets.
//!
//! The data flows one way, and the modules are layered the same way: each
//! imports only from the ones listed before it (`scripts/test` checks that
//! no two modules import each other, directly or round a cycle).
//!
//! | module | owns |
//! |--------|------|
//! | [`text`], [`logging`] | number formatting and escaping every output shares; log setup |
//! | [`atomic`] | the files written for a person, whole or not at all |
//! | [`store`] | the sled store: records, step summaries, the time ratio, every key and file name, opening, verification |
//! | [`plan`] | the search: proposals, verdicts in step order, what a step asks and is worth |
//! | [`dispatch`] | workers: the pool, slots, calibration, connections, local, SSH and Slurm channels, bundles |
//! | [`error`] | the exit status of every failure |
//! | [`measure`] | decision sets measured against each other on one slot, outside a campaign |
//! | [`campaign`] | the run loop that owns chain state, its progress display and status report |
//! | [`rewards`] | ridge-regression rewards of decisions |
//! | [`export`] | the tables, as CSV, JSON lines or Parquet |
//! | [`report`] | plots and their page |
//! | [`serve`] | the live view in a browser |
//! | [`cli`], [`commands`] | the command line, and one file per subcommand that runs it |

mod atomic;
pub mod campaign;
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
