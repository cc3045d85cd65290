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
    pub(super) watch: Watch,
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

    /// Keeps the tail, and looks for `watch` in the whole stream.
    pub(super) fn tail(fd: Option<OwnedFd>, watch: &'static [&'static str]) -> Self {
        Sink {
            watch: Watch::new(watch),
            ..Sink::with(SinkMode::Tail, None, fd)
        }
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
            watch: Watch::new(&[]),
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
        self.watch.feed(bytes);
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

/// Strings looked for in the whole of a stream as it is read, not only in the tail kept: a line a
/// program prints as it starts is still seen after megabytes of progress output.
pub(super) struct Watch {
    needles: &'static [&'static str],
    seen: Vec<bool>,
    /// The last bytes read, one fewer than the longest needle has: a needle that two reads
    /// split is found at the second.
    carry: Vec<u8>,
}

impl Watch {
    pub(super) fn new(needles: &'static [&'static str]) -> Watch {
        Watch {
            needles,
            seen: vec![false; needles.len()],
            carry: Vec::new(),
        }
    }

    fn feed(&mut self, bytes: &[u8]) {
        if self.seen.iter().all(|s| *s) {
            return;
        }
        let longest = self.needles.iter().map(|n| n.len()).max().unwrap_or(0);
        let overlap = longest.saturating_sub(1);
        // Where a needle may straddle the previous read and this one.
        let mut seam = std::mem::take(&mut self.carry);
        seam.extend_from_slice(&bytes[..bytes.len().min(overlap)]);
        for (needle, seen) in self.needles.iter().zip(&mut self.seen) {
            *seen =
                *seen || contains(&seam, needle.as_bytes()) || contains(bytes, needle.as_bytes());
        }
        self.carry = if bytes.len() >= overlap {
            bytes[bytes.len() - overlap..].to_vec()
        } else {
            seam.split_off(seam.len() - seam.len().min(overlap))
        };
    }

    /// The needles seen so far, in the order given.
    pub(super) fn seen(&self) -> Vec<&'static str> {
        self.needles
            .iter()
            .zip(&self.seen)
            .filter_map(|(n, seen)| seen.then_some(*n))
            .collect()
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::Watch;

    #[test]
    fn a_needle_split_across_reads_is_found() {
        const NEEDLES: &[&str] = &["CUPTI initialization failed", "absent"];
        let text = b"x: CUPTI initialization failed - more\n";
        // Every way of cutting the text into three reads.
        for i in 0..text.len() {
            for j in i..text.len() {
                let mut w = Watch::new(NEEDLES);
                for part in [&text[..i], &text[i..j], &text[j..]] {
                    w.feed(part);
                }
                assert_eq!(
                    w.seen(),
                    vec!["CUPTI initialization failed"],
                    "cut at {i}, {j}"
                );
            }
        }
        let mut w = Watch::new(NEEDLES);
        w.feed(b"CUPTI initialization");
        w.feed(b" did not fail");
        assert!(w.seen().is_empty());
    }
}
