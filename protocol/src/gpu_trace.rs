//! The GPU trace files of kiln's CUPTI injection library, and what they add up to.
//!
//! Two programs share this format: `libkiln_cupti.so` (crate `kiln-cupti`), which the CUDA
//! driver loads into the benchmark through `CUDA_INJECTION64_PATH`, writes one file per process
//! into the folder named by [`TRACE_DIR_ENV`]; the worker reads every file of a run and adds
//! them up into that run's metrics. It lives here, in the vocabulary both already share, so that
//! the format is written down once, the worker does not link cudarc, and the injected library
//! links nothing of the worker (a cdylib keeps only the code it reaches).
//!
//! A file is a 16-byte header — [`MAGIC`] (which carries the format version), then the writing
//! process's pid as a little-endian u32, then 4 zero bytes — followed by 24-byte records: a
//! little-endian u32 tag, 4 zero bytes, and two little-endian u64 fields. The library translates
//! CUPTI's records (whose layouts change between CUDA versions) into these, so nothing here
//! depends on CUDA. Records are appended as CUPTI hands buffers back (periodically and at exit),
//! so a process killed with SIGKILL leaves a shorter but well-formed file without [`Record::End`].

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use crate::metric::{Metric, MetricValue, Metrics};

/// File name of the injection library, beside `kiln-worker`.
pub const INJECTION_LIBRARY: &str = "libkiln_cupti.so";
/// The variable naming the folder the injection library writes its files into.
pub const TRACE_DIR_ENV: &str = "KILN_GPU_TRACE_DIR";
/// The variable naming libcupti's file where it is not on the loader's path (the worker passes
/// its own value on to the runs).
pub const LIBCUPTI_ENV: &str = "KILN_LIBCUPTI";
/// How often the library appends buffered records while the program runs: what a process that
/// cannot flush at exit (SIGKILL, `_exit`) loses at most.
pub const FLUSH_PERIOD: Duration = Duration::from_millis(100);
/// First bytes of every trace file; the last byte is the format version.
pub const MAGIC: [u8; 8] = *b"KILNGPU\x01";
/// Length of the header.
pub const HEADER_LEN: usize = 16;
/// Length of one record.
pub const RECORD_LEN: usize = 24;
/// Extension of trace files.
pub const TRACE_EXTENSION: &str = "trace";
/// Extension of the note a process leaves when it could not trace.
pub const NOTE_EXTENSION: &str = "note";

/// One entry of a trace file. Times are CUPTI timestamps in ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Record {
    /// A kernel ran on the GPU from `start` to `end`.
    Kernel {
        /// Start, ns.
        start: u64,
        /// End, ns.
        end: u64,
    },
    /// A memory copy.
    Memcpy {
        /// Start, ns.
        start: u64,
        /// End, ns.
        end: u64,
    },
    /// A memset.
    Memset {
        /// Start, ns.
        start: u64,
        /// End, ns.
        end: u64,
    },
    /// CUPTI dropped this many records (its count is reset each time it is read, so these add up).
    Dropped(u64),
    /// The process flushed everything at exit: the file is complete.
    End,
}

const TAG_KERNEL: u32 = 1;
const TAG_MEMCPY: u32 = 2;
const TAG_MEMSET: u32 = 3;
const TAG_DROPPED: u32 = 4;
const TAG_END: u32 = 5;

impl Record {
    /// The record's bytes in a trace file.
    pub fn encode(&self) -> [u8; RECORD_LEN] {
        let (tag, a, b) = match *self {
            Record::Kernel { start, end } => (TAG_KERNEL, start, end),
            Record::Memcpy { start, end } => (TAG_MEMCPY, start, end),
            Record::Memset { start, end } => (TAG_MEMSET, start, end),
            Record::Dropped(n) => (TAG_DROPPED, n, 0),
            Record::End => (TAG_END, 0, 0),
        };
        let mut out = [0u8; RECORD_LEN];
        out[0..4].copy_from_slice(&tag.to_le_bytes());
        out[8..16].copy_from_slice(&a.to_le_bytes());
        out[16..24].copy_from_slice(&b.to_le_bytes());
        out
    }

    fn decode(bytes: &[u8; RECORD_LEN], offset: usize) -> Result<Record, TraceError> {
        let u64_at = |i: usize| u64::from_le_bytes(bytes[i..i + 8].try_into().expect("8 bytes"));
        let tag = u32::from_le_bytes(bytes[0..4].try_into().expect("4 bytes"));
        let (a, b) = (u64_at(8), u64_at(16));
        Ok(match tag {
            TAG_KERNEL => Record::Kernel { start: a, end: b },
            TAG_MEMCPY => Record::Memcpy { start: a, end: b },
            TAG_MEMSET => Record::Memset { start: a, end: b },
            TAG_DROPPED => Record::Dropped(a),
            TAG_END => Record::End,
            _ => return Err(TraceError::UnknownTag { tag, offset }),
        })
    }
}

/// The header of the trace file of process `pid`.
pub fn header(pid: u32) -> [u8; HEADER_LEN] {
    let mut out = [0u8; HEADER_LEN];
    out[0..8].copy_from_slice(&MAGIC);
    out[8..12].copy_from_slice(&pid.to_le_bytes());
    out
}

/// The file name for process `pid`; `attempt` > 0 when that name was taken (a reused pid).
pub fn trace_file_name(pid: u32, attempt: u32) -> String {
    match attempt {
        0 => format!("gpu-{pid}.{TRACE_EXTENSION}"),
        n => format!("gpu-{pid}-{n}.{TRACE_EXTENSION}"),
    }
}

/// The name of the note process `pid` leaves when it could not trace.
pub fn note_file_name(pid: u32) -> String {
    format!("gpu-{pid}.{NOTE_EXTENSION}")
}

/// Why a trace file cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TraceError {
    /// The file does not start with [`MAGIC`] (not a trace, or another format version).
    #[error("not a kiln GPU trace of this version (bad header)")]
    BadHeader,
    /// The file ends inside its header or a record.
    #[error("truncated: {len} bytes is not a header plus whole {RECORD_LEN}-byte records")]
    Truncated {
        /// The file's length.
        len: usize,
    },
    /// A record has a tag this version does not know.
    #[error("unknown record tag {tag} at byte {offset}")]
    UnknownTag {
        /// The tag.
        tag: u32,
        /// Where the record starts.
        offset: usize,
    },
}

/// One process's trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceFile {
    /// The process that wrote it.
    pub pid: u32,
    /// Its records in file order.
    pub records: Vec<Record>,
}

impl TraceFile {
    /// Decodes a whole file.
    pub fn decode(bytes: &[u8]) -> Result<TraceFile, TraceError> {
        if bytes.len() < HEADER_LEN {
            return Err(if MAGIC.starts_with(bytes) {
                TraceError::Truncated { len: bytes.len() }
            } else {
                TraceError::BadHeader
            });
        }
        if bytes[0..8] != MAGIC {
            return Err(TraceError::BadHeader);
        }
        let pid = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
        let body = &bytes[HEADER_LEN..];
        if !body.len().is_multiple_of(RECORD_LEN) {
            return Err(TraceError::Truncated { len: bytes.len() });
        }
        let records = body
            .chunks_exact(RECORD_LEN)
            .enumerate()
            .map(|(i, chunk)| {
                Record::decode(
                    chunk.try_into().expect("exact chunks"),
                    HEADER_LEN + i * RECORD_LEN,
                )
            })
            .collect::<Result<_, _>>()?;
        Ok(TraceFile { pid, records })
    }

    /// Whether the process flushed at exit (it ended normally).
    pub fn complete(&self) -> bool {
        self.records.last() == Some(&Record::End)
    }
}

/// What the traces of one run add up to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GpuTotals {
    /// Union of kernel intervals over every process: time at least one kernel ran.
    pub busy_ns: u64,
    /// Sum of kernel durations (exceeds `busy_ns` when kernels overlap on streams).
    pub kernel_sum_ns: u64,
    /// Sum of memcpy and memset durations.
    pub memcpy_ns: u64,
    /// Kernels recorded.
    pub kernels: u64,
    /// Records CUPTI dropped.
    pub dropped: u64,
    /// Trace files (processes that traced).
    pub processes: u32,
    /// Processes that did not flush at exit (killed, or `_exit`): their last records may be missing.
    pub incomplete: u32,
}

impl GpuTotals {
    /// Adds up the traces of one run. Records with start == end == 0 are ones CUPTI never
    /// completed and are skipped, as are records ending before they start. The union is taken
    /// across processes (and devices): CUPTI timestamps share one clock.
    pub fn of(files: &[TraceFile]) -> GpuTotals {
        let mut totals = GpuTotals {
            processes: files.len() as u32,
            ..GpuTotals::default()
        };
        let mut kernels = Vec::new();
        for file in files {
            if !file.complete() {
                totals.incomplete += 1;
            }
            for record in &file.records {
                match *record {
                    Record::Kernel { start, end } if valid(start, end) => {
                        totals.kernel_sum_ns += end - start;
                        totals.kernels += 1;
                        kernels.push((start, end));
                    }
                    Record::Memcpy { start, end } | Record::Memset { start, end }
                        if valid(start, end) =>
                    {
                        totals.memcpy_ns += end - start;
                    }
                    Record::Dropped(n) => totals.dropped += n,
                    _ => {}
                }
            }
        }
        totals.busy_ns = union_length(&mut kernels);
        totals
    }

    /// The run's CUPTI metrics.
    pub fn metrics(&self) -> Metrics {
        [
            (Metric::GpuTime, self.busy_ns),
            (Metric::GpuKernelSum, self.kernel_sum_ns),
            (Metric::GpuMemcpyTime, self.memcpy_ns),
            (Metric::GpuKernelCount, self.kernels),
            (Metric::GpuDroppedRecords, self.dropped),
        ]
        .into_iter()
        .map(|(m, v)| (m, MetricValue::Measured(v as f64)))
        .collect()
    }
}

fn valid(start: u64, end: u64) -> bool {
    !(start == 0 && end == 0) && end >= start
}

/// Total length covered by half-open intervals (sorted in place).
fn union_length(intervals: &mut [(u64, u64)]) -> u64 {
    intervals.sort_unstable();
    let mut total = 0;
    let mut current: Option<(u64, u64)> = None;
    for &(start, end) in intervals.iter() {
        current = match current {
            Some((s, e)) if start <= e => Some((s, e.max(end))),
            Some((s, e)) => {
                total += e - s;
                Some((start, end))
            }
            None => Some((start, end)),
        };
    }
    total + current.map_or(0, |(s, e)| e - s)
}

/// What a run's trace folder holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceDir {
    /// The totals over every trace file; `None` when no process wrote one.
    pub totals: Option<GpuTotals>,
    /// The notes of processes that could not trace (why), by file name.
    pub notes: BTreeMap<String, String>,
}

/// Reads every trace file and note in `dir`. A file that cannot be read or decoded is an error
/// naming it: a run whose trace is damaged has no GPU time, rather than a wrong one.
pub fn read_dir(dir: &Path) -> Result<TraceDir, String> {
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
    let mut files = Vec::new();
    let mut notes = BTreeMap::new();
    for entry in entries {
        let path = entry
            .map_err(|e| format!("cannot list {}: {e}", dir.display()))?
            .path();
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        match path.extension().and_then(|e| e.to_str()) {
            Some(TRACE_EXTENSION) => {
                let bytes = std::fs::read(&path)
                    .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
                files.push(
                    TraceFile::decode(&bytes).map_err(|e| format!("{}: {e}", path.display()))?,
                );
            }
            Some(NOTE_EXTENSION) => {
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                notes.insert(name, text.trim().to_string());
            }
            _ => {}
        }
    }
    Ok(TraceDir {
        totals: (!files.is_empty()).then(|| GpuTotals::of(&files)),
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(start: u64, end: u64) -> Record {
        Record::Kernel { start, end }
    }

    fn file(pid: u32, records: &[Record]) -> TraceFile {
        TraceFile {
            pid,
            records: records.to_vec(),
        }
    }

    fn bytes(pid: u32, records: &[Record]) -> Vec<u8> {
        let mut out = header(pid).to_vec();
        for r in records {
            out.extend_from_slice(&r.encode());
        }
        out
    }

    #[test]
    fn records_round_trip_through_bytes() {
        let records = [
            kernel(10, 20),
            Record::Memcpy { start: 1, end: 2 },
            Record::Memset {
                start: u64::MAX - 1,
                end: u64::MAX,
            },
            Record::Dropped(7),
            Record::End,
        ];
        let decoded = TraceFile::decode(&bytes(4242, &records)).unwrap();
        assert_eq!(decoded, file(4242, &records));
        assert!(decoded.complete());
    }

    #[test]
    fn disjoint_kernels_sum_and_union_alike() {
        let t = GpuTotals::of(&[file(1, &[kernel(0, 10), kernel(20, 25), Record::End])]);
        assert_eq!(t.busy_ns, 15);
        assert_eq!(t.kernel_sum_ns, 15);
        assert_eq!(t.kernels, 2);
        assert_eq!(t.incomplete, 0);
    }

    #[test]
    fn overlapping_streams_count_once_in_the_union() {
        // Two streams: [100, 200) and [150, 300) overlap by 50; [300, 310) touches the end.
        let t = GpuTotals::of(&[file(
            1,
            &[kernel(150, 300), kernel(100, 200), kernel(300, 310)],
        )]);
        assert_eq!(t.kernel_sum_ns, 100 + 150 + 10);
        assert_eq!(t.busy_ns, 210);
        assert!(t.busy_ns <= t.kernel_sum_ns);
    }

    #[test]
    fn nested_kernels_add_nothing_to_the_union() {
        let t = GpuTotals::of(&[file(
            1,
            &[kernel(0, 1000), kernel(10, 20), kernel(500, 999)],
        )]);
        assert_eq!(t.busy_ns, 1000);
        assert_eq!(t.kernel_sum_ns, 1000 + 10 + 499);
    }

    #[test]
    fn uncompleted_and_backwards_records_are_skipped() {
        let t = GpuTotals::of(&[file(
            1,
            &[
                kernel(0, 0),
                kernel(50, 40),
                Record::Memcpy { start: 0, end: 0 },
                kernel(5, 5),
                kernel(7, 9),
            ],
        )]);
        assert_eq!(
            t.kernels, 2,
            "a zero-length kernel at a real time still ran"
        );
        assert_eq!(t.kernel_sum_ns, 2);
        assert_eq!(t.busy_ns, 2);
        assert_eq!(t.memcpy_ns, 0);
        assert_eq!(t.incomplete, 1, "no End record");
    }

    #[test]
    fn processes_add_up_and_their_kernels_share_one_timeline() {
        let parent = file(
            10,
            &[
                kernel(0, 100),
                Record::Memcpy {
                    start: 100,
                    end: 130,
                },
                Record::Dropped(2),
                Record::End,
            ],
        );
        let child = file(
            11,
            &[
                kernel(50, 150),
                Record::Memset { start: 0, end: 5 },
                Record::Dropped(3),
                Record::End,
            ],
        );
        let t = GpuTotals::of(&[parent, child]);
        assert_eq!(t.processes, 2);
        assert_eq!(t.kernels, 2);
        assert_eq!(t.kernel_sum_ns, 200);
        assert_eq!(t.busy_ns, 150);
        assert_eq!(t.memcpy_ns, 35);
        assert_eq!(t.dropped, 5);
        let m = t.metrics();
        assert_eq!(m[&Metric::GpuTime], MetricValue::Measured(150.0));
        assert_eq!(m[&Metric::GpuDroppedRecords], MetricValue::Measured(5.0));
        assert!(m.keys().all(|k| k.needs_cupti()));
        assert_eq!(
            m.len(),
            Metric::ALL.iter().filter(|k| k.needs_cupti()).count()
        );
    }

    #[test]
    fn no_records_is_zero_not_missing() {
        let t = GpuTotals::of(&[file(1, &[Record::End])]);
        assert_eq!(t.metrics()[&Metric::GpuTime], MetricValue::Measured(0.0));
    }

    #[test]
    fn damaged_files_are_errors() {
        let good = bytes(1, &[kernel(1, 2), Record::End]);
        assert_eq!(
            TraceFile::decode(&good[..good.len() - 3]),
            Err(TraceError::Truncated {
                len: good.len() - 3
            })
        );
        assert_eq!(
            TraceFile::decode(&good[..5]),
            Err(TraceError::Truncated { len: 5 })
        );
        assert_eq!(
            TraceFile::decode(b"not a trace at all"),
            Err(TraceError::BadHeader)
        );
        assert_eq!(
            TraceFile::decode(b""),
            Err(TraceError::Truncated { len: 0 })
        );
        let mut unknown = good.clone();
        unknown[HEADER_LEN] = 99;
        assert_eq!(
            TraceFile::decode(&unknown),
            Err(TraceError::UnknownTag {
                tag: 99,
                offset: HEADER_LEN
            })
        );
    }

    #[test]
    fn a_folder_adds_every_trace_and_keeps_the_notes() {
        let dir = std::env::temp_dir().join(format!("kiln-gpu-trace-test-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let empty = read_dir(&dir).unwrap();
        assert_eq!(empty.totals, None, "no file: nothing traced, not zero");
        std::fs::write(
            dir.join(trace_file_name(7, 0)),
            bytes(7, &[kernel(0, 10), Record::End]),
        )
        .unwrap();
        std::fs::write(
            dir.join(trace_file_name(7, 1)),
            bytes(7, &[kernel(5, 20), Record::End]),
        )
        .unwrap();
        std::fs::write(dir.join(note_file_name(8)), "libcupti not found\n").unwrap();
        std::fs::write(dir.join("unrelated.txt"), "x").unwrap();
        let found = read_dir(&dir).unwrap();
        let totals = found.totals.unwrap();
        assert_eq!((totals.processes, totals.busy_ns), (2, 20));
        assert_eq!(found.notes["gpu-8.note"], "libcupti not found");

        std::fs::write(dir.join(trace_file_name(9, 0)), &MAGIC[..4]).unwrap();
        let err = read_dir(&dir).unwrap_err();
        assert!(
            err.contains("gpu-9.trace") && err.contains("truncated"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
