//! A remote command's ends, whichever SSH client ran it: how it ended, what it wrote, or its
//! pipes while it runs.

use std::fmt;
use std::os::unix::process::ExitStatusExt as _;

use crate::dispatch::transport::{ChannelReader, ChannelWriter};

/// How a remote command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Exit {
    Code(u32),
    Signal(String),
}

impl Exit {
    pub(super) fn success(&self) -> bool {
        *self == Exit::Code(0)
    }

    pub(super) fn of(status: std::process::ExitStatus) -> Exit {
        match (status.code(), status.signal()) {
            (Some(code), _) => Exit::Code(code as u32),
            (None, Some(signal)) => Exit::Signal(signal.to_string()),
            (None, None) => Exit::Signal("unknown".into()),
        }
    }
}

impl fmt::Display for Exit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Exit::Code(code) => write!(f, "exit status: {code}"),
            Exit::Signal(signal) => write!(f, "killed by signal {signal}"),
        }
    }
}

/// A remote command run to its end.
pub(super) struct Ran {
    pub(super) exit: Exit,
    pub(super) stdout: Vec<u8>,
    pub(super) stderr: Vec<u8>,
}

/// A remote command started with pipes.
pub(super) struct Spawned {
    pub(super) stdin: ChannelWriter,
    pub(super) stdout: ChannelReader,
    pub(super) stderr: ChannelReader,
    /// What keeps the command's end of the connection open.
    pub(super) keep: Box<dyn std::any::Any + Send + Sync>,
}
