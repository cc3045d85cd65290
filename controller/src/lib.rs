//! kiln's controller: reads a campaign config, plans searches, dispatches
//! steps to workers, stores every step and exports datasets.

pub mod ssh;
pub mod transport;
