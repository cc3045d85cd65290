//! kiln's CUPTI injection library, `libkiln_cupti.so`: GPU time of unmodified CUDA programs.
//!
//! The CUDA driver loads the library named by `CUDA_INJECTION64_PATH` into every process that
//! initialises CUDA (children too: they inherit the variable) and calls its
//! [`InitializeInjection`]. The worker sets that variable, and `KILN_GPU_TRACE_DIR`, for the
//! timed runs of a plan that wants a CUPTI metric. The library then has CUPTI's activity API
//! record every kernel, memcpy and memset ([`activity`]) and appends them to one trace file per
//! process in that folder ([`sink`], format in `kiln_protocol::gpu_trace`), whenever CUPTI hands
//! a buffer back: every `FLUSH_PERIOD` from a thread of ours (so a process killed or ended with
//! `_exit` still leaves most of its records) and, forced, at exit.
//!
//! It runs inside someone else's program, so no panic crosses the FFI boundary (every entry
//! point catches unwinds), nothing aborts and nothing prints on the program's streams. When
//! anything fails the process leaves no trace file, only a one-line note of why, and the worker
//! reports the GPU metrics of the run as unsupported.

use std::ffi::c_int;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::Mutex;
use std::thread::JoinHandle;

use kiln_protocol::gpu_trace::{Record, FLUSH_PERIOD, LIBCUPTI_ENV, TRACE_DIR_ENV};

mod activity;
mod libcupti;
mod sink;

/// The process that initialised tracing: a forked child inherits our `atexit` handler but
/// neither our flush thread nor our trace file, and must leave both alone.
static TRACED_PID: AtomicU32 = AtomicU32::new(0);

/// The flush thread and the sender whose drop stops it.
static FLUSHER: Mutex<Option<(Sender<()>, JoinHandle<()>)>> = Mutex::new(None);

/// The message of the last panic caught in this library, for the note.
static LAST_PANIC: Mutex<Option<String>> = Mutex::new(None);

/// Called by the CUDA driver once it has loaded the library. Returns 1 when tracing started and
/// 0 when it did not; either way the program runs on unharmed.
#[no_mangle]
pub extern "C" fn InitializeInjection() -> c_int {
    static CALLED: AtomicBool = AtomicBool::new(false);
    if CALLED.swap(true, Ordering::SeqCst) {
        return 1;
    }
    let Some(dir) = std::env::var_os(TRACE_DIR_ENV).map(PathBuf::from) else {
        // Loaded without kiln's worker: nowhere to write, nothing to do.
        return 0;
    };
    let libcupti = std::env::var_os(LIBCUPTI_ENV).map(PathBuf::from);
    match guarded(|| start(&dir, libcupti.as_deref())) {
        Ok(()) => 1,
        Err(reason) => {
            sink::discard(&dir, &reason);
            0
        }
    }
}

/// Starts tracing into `dir`; `libcupti` names the CUPTI library when it is not on the
/// loader's path. On error nothing keeps running.
fn start(dir: &std::path::Path, libcupti: Option<&std::path::Path>) -> Result<(), String> {
    libcupti::load(libcupti)?;
    sink::open(dir)?;
    activity::enable()?;
    // Only once it is certain that the file will be completed at exit and flushed meanwhile.
    let running = start_flusher().and_then(|()| {
        // SAFETY: at_exit is an extern "C" fn without arguments that never unwinds.
        match unsafe { libc::atexit(at_exit) } {
            0 => Ok(()),
            _ => Err("atexit refused the exit handler".to_string()),
        }
    });
    match running {
        Ok(()) => {
            TRACED_PID.store(std::process::id(), Ordering::SeqCst);
            Ok(())
        }
        Err(e) => {
            activity::disable();
            stop_flusher();
            Err(e)
        }
    }
}

/// Stops the flush thread, if it runs, and waits for it.
fn stop_flusher() {
    if let Some((stop, thread)) = lock(&FLUSHER).take() {
        drop(stop);
        let _ = thread.join();
    }
}

fn start_flusher() -> Result<(), String> {
    let (stop, stopped) = mpsc::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("kiln-cupti-flush".into())
        .spawn(move || {
            // A message or the sender's drop stops it.
            while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(FLUSH_PERIOD) {
                // Completed buffers only: records still in flight stay for the next flush.
                let _ = guarded(|| {
                    activity::flush(false);
                    Ok(())
                });
            }
        })
        .map_err(|e| format!("cannot start the flush thread: {e}"))?;
    *lock(&FLUSHER) = Some((stop, thread));
    Ok(())
}

/// At exit: stop the flush thread, force out every buffer, and mark the file complete.
extern "C" fn at_exit() {
    if TRACED_PID.load(Ordering::SeqCst) != std::process::id() {
        return;
    }
    let _ = guarded(|| {
        stop_flusher();
        activity::flush(true);
        sink::write(&[Record::End]);
        Ok(())
    });
}

/// Runs `f`, turning a panic into an error carrying its message.
fn guarded(f: impl FnOnce() -> Result<(), String>) -> Result<(), String> {
    static HOOK: std::sync::Once = std::sync::Once::new();
    // This library's own copy of std has its own hook: the host's is untouched, and a panic
    // here is recorded in the note instead of printed on the program's stderr.
    HOOK.call_once(|| {
        #[cfg(test)]
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            *lock(&LAST_PANIC) = Some(info.to_string());
            // The test harness still shows failed assertions.
            #[cfg(test)]
            previous(info);
        }))
    });
    catch_unwind(AssertUnwindSafe(f)).unwrap_or_else(|_| {
        Err(format!(
            "panicked: {}",
            lock(&LAST_PANIC).take().unwrap_or_default()
        ))
    })
}

/// A lock that a panic elsewhere cannot make unusable.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panics_become_errors_with_their_message() {
        let err = guarded(|| panic!("boom {}", 42)).unwrap_err();
        assert!(err.contains("boom 42"), "{err}");
        assert_eq!(guarded(|| Ok(())), Ok(()));
    }

    #[test]
    fn a_libcupti_that_cannot_load_leaves_a_note_and_no_trace() {
        let dir = std::env::temp_dir().join(format!("kiln-cupti-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let missing = dir.join("no-libcupti.so");
        let err = guarded(|| start(&dir, Some(&missing))).unwrap_err();
        assert!(err.contains("no-libcupti.so"), "{err}");
        sink::note(&dir, &err);
        let found = kiln_protocol::gpu_trace::read_dir(&dir).unwrap();
        assert_eq!(found.totals, None, "no trace file");
        let note = &found.notes[&kiln_protocol::gpu_trace::note_file_name(std::process::id())];
        assert!(note.contains("no-libcupti.so"), "{note}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
