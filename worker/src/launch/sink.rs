//! Where a launch's output goes while it runs: hashed as it streams, kept up to
//! a cap, or only its tail kept.

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::Instant;

use kiln_protocol::decision::ContentHash;

use super::checked_output::CheckedDigest;
use super::{Output, REAP_GRACE, TAIL_BYTES};

/// Where a pipe's bytes go.
pub(super) struct Sink {
    pub(super) fd: Option<OwnedFd>,
    pub(super) mode: SinkMode,
    pub(super) kept: Vec<u8>,
    pub(super) truncated: bool,
    pub(super) tail: VecDeque<u8>,
    pub(super) hasher: Option<CheckedDigest>,
}

#[derive(Clone, Copy)]
pub(super) enum SinkMode {
    Hash,
    Keep(usize),
    Tail,
}

impl Sink {
    pub(super) fn new(output: &Output, fd: Option<OwnedFd>) -> Self {
        let (mode, hasher) = match output {
            Output::Discard => (SinkMode::Tail, None),
            Output::HashStdout(filter) => {
                (SinkMode::Hash, Some(CheckedDigest::new(filter.clone())))
            }
            Output::KeepMerged { cap } => (SinkMode::Keep(*cap), None),
        };
        Sink::with(mode, hasher, fd)
    }

    pub(super) fn tail(fd: Option<OwnedFd>) -> Self {
        Sink::with(SinkMode::Tail, None, fd)
    }

    /// `fd`: the read end of a [`pipe`].
    pub(super) fn with(mode: SinkMode, hasher: Option<CheckedDigest>, fd: Option<OwnedFd>) -> Self {
        Sink {
            fd,
            mode,
            kept: Vec::new(),
            truncated: false,
            tail: VecDeque::new(),
            hasher,
        }
    }

    pub(super) fn raw(&self) -> Option<RawFd> {
        self.fd.as_ref().map(AsRawFd::as_raw_fd)
    }

    /// Reads what is available; closes the pipe at EOF.
    pub(super) fn pump(&mut self) {
        let Some(fd) = self.raw() else { return };
        // Not zeroed: read(2) fills what is then looked at.
        let mut buf = [std::mem::MaybeUninit::<u8>::uninit(); 65536];
        loop {
            // SAFETY: reads into a live buffer of the given length.
            let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
            if n > 0 {
                // SAFETY: read(2) initialised the first n bytes.
                let bytes =
                    unsafe { std::slice::from_raw_parts(buf.as_ptr().cast::<u8>(), n as usize) };
                self.take(bytes);
                continue;
            }
            if n == 0 {
                self.fd = None;
            } else {
                let e = io::Error::last_os_error();
                match e.kind() {
                    io::ErrorKind::Interrupted => continue,
                    io::ErrorKind::WouldBlock => {}
                    _ => self.fd = None,
                }
            }
            return;
        }
    }

    pub(super) fn take(&mut self, bytes: &[u8]) {
        match self.mode {
            SinkMode::Hash => {
                if let Some(h) = &mut self.hasher {
                    h.update(bytes);
                }
            }
            SinkMode::Keep(cap) => {
                let room = cap.saturating_sub(self.kept.len());
                self.kept.extend_from_slice(&bytes[..room.min(bytes.len())]);
                self.truncated |= bytes.len() > room;
            }
            SinkMode::Tail => {
                self.tail.extend(bytes);
                let excess = self.tail.len().saturating_sub(TAIL_BYTES);
                self.tail.drain(..excess);
            }
        }
    }

    /// Reads to EOF once the group is gone, waiting at most [`REAP_GRACE`]
    /// (a process that escaped the group may still hold the pipe).
    pub(super) fn drain(&mut self) {
        let deadline = Instant::now() + REAP_GRACE;
        // Usually every writer is gone and the pipe reads to EOF at once: poll only if not.
        self.pump();
        while let Some(fd) = self.raw() {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                tracing::warn!("output pipe still open {REAP_GRACE:?} after the process group ended; giving up on it");
                self.fd = None;
                break;
            }
            let mut p = libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: polls one live pollfd.
            unsafe { libc::poll(&mut p, 1, left.as_millis().min(1000) as i32 + 1) };
            self.pump();
        }
    }

    pub(super) fn digest(&mut self) -> Option<(ContentHash, String)> {
        self.hasher.take().map(CheckedDigest::finish)
    }

    pub(super) fn tail_text(&self) -> String {
        let (a, b) = self.tail.as_slices();
        String::from_utf8_lossy(&[a, b].concat()).into_owned()
    }
}
