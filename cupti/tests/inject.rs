//! The built library as the CUDA driver sees it: a shared object exporting
//! `InitializeInjection`, which never fails its host. Where CUPTI cannot start it leaves a note
//! and no trace file; where it starts, the process's trace file is there.

use std::ffi::c_int;
use std::path::PathBuf;

use kiln_protocol::gpu_trace::{
    note_file_name, trace_file_name, TraceFile, INJECTION_LIBRARY, TRACE_DIR_ENV,
};

/// The library cargo built for this test: beside it in `target/<profile>/deps` (the copy in
/// `target/<profile>` is only refreshed by `cargo build`).
fn library() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().unwrap().join(INJECTION_LIBRARY)
}

#[test]
fn initialize_injection_traces_or_leaves_a_note() {
    let lib = library();
    assert!(lib.is_file(), "{} is not built", lib.display());
    let dir = std::env::temp_dir().join(format!("kiln-cupti-inject-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // The only test in this binary: nothing else reads the environment meanwhile.
    std::env::set_var(TRACE_DIR_ENV, &dir);

    let name = std::ffi::CString::new(lib.to_str().unwrap()).unwrap();
    // SAFETY: loading our own library, which has no initialisers with preconditions.
    let handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    assert!(!handle.is_null(), "cannot load {}", lib.display());
    // SAFETY: a valid handle and a NUL-terminated name.
    let symbol = unsafe { libc::dlsym(handle, c"InitializeInjection".as_ptr()) };
    assert!(!symbol.is_null(), "InitializeInjection is not exported");
    // SAFETY: the symbol is `extern "C" fn() -> c_int`.
    let init: extern "C" fn() -> c_int = unsafe { std::mem::transmute(symbol) };

    let pid = std::process::id();
    match init() {
        0 => {
            let note = std::fs::read_to_string(dir.join(note_file_name(pid))).unwrap();
            assert!(note.contains("libcupti"), "{note}");
            assert!(!dir.join(trace_file_name(pid, 0)).exists());
        }
        1 => {
            // CUPTI started (a CUDA machine): the file exists from the start, header first.
            let bytes = std::fs::read(dir.join(trace_file_name(pid, 0))).unwrap();
            assert_eq!(TraceFile::decode(&bytes).unwrap().pid, pid);
        }
        other => panic!("InitializeInjection returned {other}"),
    }
    assert_eq!(init(), 1, "a second call is a no-op");
    std::fs::remove_dir_all(&dir).unwrap();
}
