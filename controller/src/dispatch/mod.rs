//! Dispatch: getting steps measured by workers. The [`pool`] keeps every slot
//! of every worker busy from one queue and hands each answer back with its
//! submitter's tag; [`slot`] says where a slot's steps run; [`calibration`]
//! watches slots for drift; [`connection`] speaks the protocol with one
//! worker over a [`transport`] channel (a local child, [`ssh`] or [`slurm`]); [`bundle`]
//! packs a benchmark's sources.
//!
//! Dispatch owns no campaign state and writes nothing to the store: it only
//! runs what it is given and says what came back. Above the protocol it uses
//! only the store's clock and its folder names (where local workers live) and
//! the log (a discovery's progress lines, for the person waiting).

pub mod bundle;
pub(crate) mod calibration;
mod connection;
pub(crate) mod pool;
pub(crate) mod slot;
pub mod slurm;
pub mod ssh;
pub(crate) mod transport;
