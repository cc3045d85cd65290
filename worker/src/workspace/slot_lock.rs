//! One step at a time in a slot's folder, across worker processes.
//!
//! When a link to the controller is cut, the `serve` at the far end may not
//! notice for a while and goes on with its step, while the controller
//! reconnects, starts a new `serve` and sends the step again to the same
//! slot. Both would build and run in one folder, on the same CPUs. An
//! exclusive `flock` on the slot's lock file makes the newcomer wait until the
//! old step is over (the lock goes with the process that held it, however it
//! ends). The file also names the session that used the slot last, so that a
//! session whose slot another one used in between does not trust its memory
//! of what the folder holds.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

use crate::launch::CancelToken;

/// How often a waiting step tries the lock again.
const RETRY: Duration = Duration::from_millis(50);

/// A held slot; dropping it releases the slot.
#[derive(Debug)]
pub struct SlotLock {
    _file: File,
    /// Whether another session used the slot since this one last did.
    pub used_by_another: bool,
}

impl SlotLock {
    /// Waits for the slot in `dir` (created if missing); `Ok(None)` if
    /// `cancel` fires first.
    pub fn acquire(dir: &Path, cancel: &CancelToken) -> io::Result<Option<SlotLock>> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(".lock");
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)?;
        let mut told = false;
        loop {
            // SAFETY: flock on a descriptor we own.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
                break;
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::WouldBlock {
                return Err(e);
            }
            if cancel.is_cancelled() {
                return Ok(None);
            }
            if !told {
                tracing::warn!(
                    "{} is busy with a step of another worker session ({}); waiting for it",
                    dir.display(),
                    holder(&mut file)
                );
                told = true;
            }
            std::thread::sleep(RETRY);
        }
        let used_by_another = holder(&mut file) != session();
        file.set_len(0)?;
        file.rewind()?;
        file.write_all(session().as_bytes())?;
        Ok(Some(SlotLock {
            _file: file,
            used_by_another,
        }))
    }
}

/// What the lock file says of the session that used the slot last.
fn holder(file: &mut File) -> String {
    let mut text = String::new();
    let _ = file.rewind().and_then(|_| file.read_to_string(&mut text));
    text
}

/// This process's session: its pid and a start time, so a reused pid differs.
fn session() -> &'static str {
    static SESSION: OnceLock<String> = OnceLock::new();
    SESSION.get_or_init(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        format!("pid {} since {nanos}", std::process::id())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_waits_and_a_cancel_ends_the_wait() {
        let dir = tempfile::tempdir().unwrap();
        let cancel = CancelToken::new().unwrap();
        let first = SlotLock::acquire(dir.path(), &cancel).unwrap().unwrap();
        // flock locks belong to the open file: a second open in this process contends too.
        let waiter = {
            let dir = dir.path().to_path_buf();
            std::thread::spawn(move || {
                let cancel = CancelToken::new().unwrap();
                let lock = SlotLock::acquire(&dir, &cancel).unwrap().unwrap();
                lock.used_by_another
            })
        };
        std::thread::sleep(Duration::from_millis(200));
        assert!(!waiter.is_finished(), "the slot is held");
        drop(first);
        // Same process, same session: the slot was not used by another.
        assert!(!waiter.join().unwrap());

        let _held = SlotLock::acquire(dir.path(), &cancel).unwrap().unwrap();
        let cancelled = CancelToken::new().unwrap();
        cancelled.cancel();
        assert!(SlotLock::acquire(dir.path(), &cancelled).unwrap().is_none());
    }

    #[test]
    fn another_sessions_mark_is_noticed() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(".lock"), "pid 1 since 0").unwrap();
        let cancel = CancelToken::new().unwrap();
        let lock = SlotLock::acquire(dir.path(), &cancel).unwrap().unwrap();
        assert!(lock.used_by_another);
        drop(lock);
        let again = SlotLock::acquire(dir.path(), &cancel).unwrap().unwrap();
        assert!(!again.used_by_another);
    }
}
