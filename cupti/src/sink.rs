//! This process's trace file: created when tracing starts, appended to whenever CUPTI hands a
//! buffer back, removed (leaving a note) if tracing fails.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use kiln_protocol::gpu_trace::{header, note_file_name, trace_file_name, Record, RECORD_LEN};

use crate::lock;

/// The open trace file, if tracing started.
static SINK: Mutex<Option<Sink>> = Mutex::new(None);

struct Sink {
    file: File,
    path: PathBuf,
    dir: PathBuf,
    pid: u32,
}

/// Creates this process's trace file in `dir` and writes its header. A pid the kernel reused
/// within one run gets a numbered name instead of appending to another process's file.
pub fn open(dir: &Path) -> Result<(), String> {
    let pid = std::process::id();
    for attempt in 0..1000 {
        let path = dir.join(trace_file_name(pid, attempt));
        match OpenOptions::new().write(true).create_new(true).open(&path) {
            Ok(mut file) => {
                let written = file.write_all(&header(pid));
                if let Err(e) = written {
                    let _ = std::fs::remove_file(&path);
                    return Err(format!("cannot write {}: {e}", path.display()));
                }
                *lock(&SINK) = Some(Sink {
                    file,
                    path,
                    dir: dir.to_path_buf(),
                    pid,
                });
                return Ok(());
            }
            Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(format!("cannot create {}: {e}", path.display())),
        }
    }
    Err(format!(
        "every trace file name for pid {pid} in {} is taken",
        dir.display()
    ))
}

/// Appends records in one write. A failed write (disk full) ends tracing: the damaged file is
/// removed and a note left, so the run's GPU time is unsupported rather than short.
pub fn write(records: &[Record]) {
    if records.is_empty() {
        return;
    }
    let mut guard = lock(&SINK);
    let Some(sink) = guard.as_mut() else { return };
    if sink.pid != std::process::id() {
        // A forked child writes nothing into its parent's file.
        return;
    }
    let mut bytes = Vec::with_capacity(records.len() * RECORD_LEN);
    for r in records {
        bytes.extend_from_slice(&r.encode());
    }
    if let Err(e) = sink.file.write_all(&bytes) {
        let reason = format!("cannot write {}: {e}", sink.path.display());
        let dir = sink.dir.clone();
        drop(guard);
        discard(&dir, &reason);
    }
}

/// Gives tracing up: removes this process's trace file, if any, and leaves a note saying why.
pub fn discard(dir: &Path, reason: &str) {
    if let Some(sink) = lock(&SINK).take() {
        let _ = std::fs::remove_file(&sink.path);
    }
    note(dir, reason);
}

/// Leaves this process's note in `dir`: the worker reports the run's GPU metrics unsupported
/// and logs the reason.
pub fn note(dir: &Path, reason: &str) {
    let path = dir.join(note_file_name(std::process::id()));
    let _ = std::fs::write(path, format!("{}\n", reason.trim()));
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_protocol::gpu_trace::{read_dir, GpuTotals, TraceFile};

    /// One test: the sink is one per process.
    #[test]
    fn writes_a_trace_the_worker_reads_then_discards_it() {
        let dir = std::env::temp_dir().join(format!("kiln-cupti-sink-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let pid = std::process::id();
        // A file of the same name already there (a reused pid) is left alone.
        std::fs::write(dir.join(trace_file_name(pid, 0)), header(pid)).unwrap();
        open(&dir).unwrap();
        write(&[
            Record::Kernel { start: 10, end: 30 },
            Record::Kernel { start: 20, end: 40 },
        ]);
        write(&[]);
        write(&[Record::Dropped(1), Record::End]);
        let bytes = std::fs::read(dir.join(trace_file_name(pid, 1))).unwrap();
        let file = TraceFile::decode(&bytes).unwrap();
        assert_eq!(file.pid, pid);
        assert!(file.complete());
        let totals = read_dir(&dir).unwrap().totals.unwrap();
        assert_eq!(
            totals,
            GpuTotals {
                busy_ns: 30,
                kernel_sum_ns: 40,
                memcpy_ns: 0,
                kernels: 2,
                dropped: 1,
                processes: 2,
                incomplete: 1,
            }
        );

        discard(&dir, "gave up\n");
        assert!(!dir.join(trace_file_name(pid, 1)).exists());
        assert_eq!(
            std::fs::read_to_string(dir.join(note_file_name(pid))).unwrap(),
            "gave up\n"
        );
        write(&[Record::End]);
        assert!(
            !dir.join(trace_file_name(pid, 1)).exists(),
            "closed for good"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
