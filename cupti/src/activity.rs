//! CUPTI's activity API: the buffers it fills, and its records translated into trace records.
//!
//! Record layouts change between CUDA versions, but the fields read here do not: for kernel,
//! memcpy and memset records the kind is a u32 at byte 0 and start and end are u64 ns at bytes
//! 16 and 24. Reading only those keeps the library independent of the installed CUDA version.

use std::alloc::{alloc, dealloc, Layout};
use std::panic::{catch_unwind, AssertUnwindSafe};

use cudarc::cupti::result::activity;
use cudarc::cupti::sys::{CUpti_ActivityFlag, CUpti_ActivityKind};
use cudarc::driver::sys::CUcontext;
use kiln_protocol::gpu_trace::Record;

use crate::sink;

/// Size of each buffer handed to CUPTI: room for tens of thousands of records per flush period.
const BUFFER_SIZE: usize = 4 << 20;
/// CUPTI's required buffer alignment.
const BUFFER_ALIGN: usize = 8;

/// Concurrent kernels, not `KERNEL`: that kind serialises every kernel launch.
const KINDS: [CUpti_ActivityKind; 3] = [
    CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
    CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMCPY,
    CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMSET,
];

/// Registers the buffer callbacks and enables the kinds recorded; on error nothing stays enabled.
pub fn enable() -> Result<(), String> {
    activity::register_callbacks(Some(buffer_requested), Some(buffer_completed))
        .map_err(|e| format!("cuptiActivityRegisterCallbacks: {:?}", e.0))?;
    for kind in KINDS {
        if let Err(e) = activity::enable(kind) {
            disable();
            return Err(format!("cuptiActivityEnable({kind:?}): {:?}", e.0));
        }
    }
    Ok(())
}

/// Disables every kind recorded.
pub fn disable() {
    for kind in KINDS {
        let _ = activity::disable(kind);
    }
}

/// Has CUPTI hand back its buffers: those whose records are all complete, or with `forced`
/// every buffer (records still in flight then read start = end = 0 and are skipped).
pub fn flush(forced: bool) {
    let flag = if forced {
        CUpti_ActivityFlag::CUPTI_ACTIVITY_FLAG_FLUSH_FORCED as u32
    } else {
        0
    };
    let _ = activity::flush_all(flag);
}

fn layout(size: usize) -> Option<Layout> {
    Layout::from_size_align(size, BUFFER_ALIGN).ok()
}

/// CUPTI asks for an empty buffer. A failed allocation hands back none, and CUPTI counts the
/// records it then cannot keep as dropped.
unsafe extern "C" fn buffer_requested(
    buffer: *mut *mut u8,
    size: *mut usize,
    max_num_records: *mut usize,
) {
    let ptr = catch_unwind(|| {
        // SAFETY: the layout has a non-zero size; the buffer is freed in buffer_completed.
        layout(BUFFER_SIZE).map_or(std::ptr::null_mut(), |l| unsafe { alloc(l) })
    })
    .unwrap_or(std::ptr::null_mut());
    // SAFETY: CUPTI passes valid out-pointers.
    unsafe {
        *buffer = ptr;
        *size = if ptr.is_null() { 0 } else { BUFFER_SIZE };
        // 0: as many records as fit.
        *max_num_records = 0;
    }
}

/// CUPTI hands a buffer back: its records go to the trace file, then the buffer is freed.
unsafe extern "C" fn buffer_completed(
    context: CUcontext,
    stream_id: u32,
    buffer: *mut u8,
    size: usize,
    valid_size: usize,
) {
    if buffer.is_null() {
        return;
    }
    let _ = catch_unwind(AssertUnwindSafe(|| {
        // SAFETY: CUPTI filled `valid_size` bytes of this buffer with records.
        let mut records = unsafe { read_buffer(buffer, valid_size) };
        let mut dropped = 0usize;
        // SAFETY: the context and stream are the ones CUPTI names; `dropped` is ours. The count
        // is reset by each call, so the counts written add up.
        if unsafe { activity::get_num_dropped_records(context, stream_id, &mut dropped) }.is_ok()
            && dropped > 0
        {
            records.push(Record::Dropped(dropped as u64));
        }
        sink::write(&records);
    }));
    if let Some(l) = layout(size) {
        // SAFETY: allocated in buffer_requested with this size (CUPTI returns it unchanged).
        unsafe { dealloc(buffer, l) };
    }
}

/// The trace records among a buffer's CUPTI records.
///
/// # Safety
/// `buffer` must hold `valid_size` bytes of CUPTI activity records.
unsafe fn read_buffer(buffer: *mut u8, valid_size: usize) -> Vec<Record> {
    let mut records = Vec::new();
    let mut record = std::ptr::null_mut();
    loop {
        // SAFETY: as promised by the caller; CUPTI walks its own records.
        // MAX_LIMIT_REACHED marks the end of the buffer; any other error ends it too.
        if unsafe { activity::get_next_record(buffer, valid_size, &mut record) }.is_err() {
            break;
        }
        let raw = record.cast::<u8>().cast_const();
        // SAFETY: every record starts with its 4-byte kind.
        let kind = unsafe { raw.cast::<u32>().read_unaligned() };
        if is_interval(kind) {
            // SAFETY: records of these kinds are longer than 32 bytes.
            let head = unsafe { std::slice::from_raw_parts(raw, 32) };
            records.extend(translate(head));
        }
    }
    records
}

fn is_interval(kind: u32) -> bool {
    [
        CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_KERNEL as u32,
        CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL as u32,
        CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMCPY as u32,
        CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMSET as u32,
    ]
    .contains(&kind)
}

/// The trace record of a CUPTI record's first 32 bytes; `None` for other kinds and for records
/// CUPTI never completed (start = end = 0).
pub fn translate(head: &[u8]) -> Option<Record> {
    let u32_at = |i: usize| Some(u32::from_ne_bytes(head.get(i..i + 4)?.try_into().ok()?));
    let u64_at = |i: usize| Some(u64::from_ne_bytes(head.get(i..i + 8)?.try_into().ok()?));
    let kind = u32_at(0)?;
    let (start, end) = (u64_at(16)?, u64_at(24)?);
    if start == 0 && end == 0 {
        return None;
    }
    match kind {
        k if k == CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_KERNEL as u32
            || k == CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL as u32 =>
        {
            Some(Record::Kernel { start, end })
        }
        k if k == CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMCPY as u32 => {
            Some(Record::Memcpy { start, end })
        }
        k if k == CUpti_ActivityKind::CUPTI_ACTIVITY_KIND_MEMSET as u32 => {
            Some(Record::Memset { start, end })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first 32 bytes of a CUPTI record of `kind` with these timestamps, other fields noise.
    fn head(kind: u32, start: u64, end: u64) -> [u8; 32] {
        let mut b = [0xA5u8; 32];
        b[0..4].copy_from_slice(&kind.to_ne_bytes());
        b[16..24].copy_from_slice(&start.to_ne_bytes());
        b[24..32].copy_from_slice(&end.to_ne_bytes());
        b
    }

    #[test]
    fn reads_kind_and_timestamps_at_their_stable_offsets() {
        // CUPTI's kind numbers, fixed in its ABI.
        assert_eq!(
            translate(&head(10, 100, 250)),
            Some(Record::Kernel {
                start: 100,
                end: 250
            })
        );
        assert_eq!(
            translate(&head(3, 1, 2)),
            Some(Record::Kernel { start: 1, end: 2 })
        );
        assert_eq!(
            translate(&head(1, 5, 9)),
            Some(Record::Memcpy { start: 5, end: 9 })
        );
        assert_eq!(
            translate(&head(2, 5, 6)),
            Some(Record::Memset { start: 5, end: 6 })
        );
    }

    #[test]
    fn the_offsets_read_match_cuptis_record_layouts() {
        use cudarc::cupti::sys::{
            CUpti_ActivityKernel9, CUpti_ActivityMemcpy6, CUpti_ActivityMemset4,
        };
        use std::mem::offset_of;
        assert_eq!(offset_of!(CUpti_ActivityKernel9, kind), 0);
        assert_eq!(offset_of!(CUpti_ActivityKernel9, start), 16);
        assert_eq!(offset_of!(CUpti_ActivityKernel9, end), 24);
        assert_eq!(offset_of!(CUpti_ActivityMemcpy6, start), 16);
        assert_eq!(offset_of!(CUpti_ActivityMemcpy6, end), 24);
        assert_eq!(offset_of!(CUpti_ActivityMemset4, start), 16);
        assert_eq!(offset_of!(CUpti_ActivityMemset4, end), 24);
    }

    #[test]
    fn skips_other_kinds_incomplete_records_and_short_input() {
        assert_eq!(translate(&head(4, 1, 2)), None, "driver API records");
        assert_eq!(translate(&head(10, 0, 0)), None, "never completed");
        assert_eq!(translate(&head(10, 1, 2)[..31]), None);
        assert!(is_interval(10) && is_interval(1) && !is_interval(4));
    }
}
