//! Finding libcupti before cudarc needs it.
//!
//! cudarc loads libcupti by name (`libcupti.so`, `.so.13`, `.so.12`, …) from the loader's path
//! and panics where it finds none, so its presence is checked first. CUDA installs libcupti in
//! `extras/CUPTI/lib64`, which is rarely on that path; but a library already loaded answers to
//! its soname, so loading the file by its full path first — the one [`LIBCUPTI_ENV`] names, or
//! the first found in the usual CUDA folders — lets cudarc find it. Where the program loaded a
//! libcupti itself (PyTorch does), that copy is found by name and used.

use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use kiln_protocol::gpu_trace::LIBCUPTI_ENV;

/// Makes libcupti loadable for cudarc: `explicit` names its file, else it is looked for.
pub fn load(explicit: Option<&Path>) -> Result<(), String> {
    if let Some(path) = explicit {
        open(path)?;
        return if present() {
            Ok(())
        } else {
            Err(format!(
                "{} (from {LIBCUPTI_ENV}) loaded, but not under a soname cudarc looks for \
                 (libcupti.so.11, .12 or .13)",
                path.display()
            ))
        };
    }
    if present() {
        return Ok(());
    }
    let dirs = search_dirs();
    for path in dirs.iter().flat_map(|d| libraries_in(d)) {
        if open(&path).is_ok() && present() {
            return Ok(());
        }
    }
    Err(format!(
        "libcupti is neither on the loader's path nor in {}; set {LIBCUPTI_ENV} on the worker \
         to its file",
        dirs.iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    ))
}

fn present() -> bool {
    // SAFETY: only tries to open candidate names and closes what it opened.
    unsafe { cudarc::cupti::sys::is_culib_present() }
}

/// Loads a library for good: cudarc's handle to it stays in use until the process exits.
fn open(path: &Path) -> Result<(), String> {
    let name = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| format!("{} contains a NUL byte", path.display()))?;
    // SAFETY: a valid C string; the handle is deliberately never closed.
    let handle = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
    if handle.is_null() {
        // SAFETY: dlerror returns a thread-local C string or null.
        let why = unsafe { libc::dlerror() };
        let why = if why.is_null() {
            "unknown error".into()
        } else {
            // SAFETY: non-null, NUL-terminated.
            unsafe { CStr::from_ptr(why) }
                .to_string_lossy()
                .into_owned()
        };
        return Err(format!("cannot load {}: {why}", path.display()));
    }
    Ok(())
}

/// Where CUDA installs libcupti: under `$CUDA_HOME`, `$CUDA_PATH`, `/usr/local/cuda` and the
/// versioned `/usr/local/cuda-*` (newest first).
fn search_dirs() -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = ["CUDA_HOME", "CUDA_PATH"]
        .iter()
        .filter_map(std::env::var_os)
        .map(PathBuf::from)
        .collect();
    roots.push(PathBuf::from("/usr/local/cuda"));
    roots.extend(entries_starting(Path::new("/usr/local"), "cuda-"));
    roots
        .iter()
        .flat_map(|root| {
            ["extras/CUPTI/lib64", "lib64", "targets/x86_64-linux/lib"].map(|sub| root.join(sub))
        })
        .filter(|d| d.is_dir())
        .collect()
}

/// The libcupti files of a folder, versioned names first (their soname is what cudarc asks for).
fn libraries_in(dir: &Path) -> Vec<PathBuf> {
    entries_starting(dir, "libcupti.so")
}

/// The entries of `dir` whose names start with `prefix`, in reverse name order (newest
/// version first).
fn entries_starting(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(prefix))
        })
        .collect();
    found.sort_by(|a, b| b.cmp(a));
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_named_file_that_is_missing_is_an_error_naming_it() {
        let err = load(Some(Path::new("/nonexistent/libcupti.so.12"))).unwrap_err();
        assert!(err.contains("/nonexistent/libcupti.so.12"), "{err}");
    }

    #[test]
    fn a_named_library_that_is_not_libcupti_is_refused() {
        // libc loads fine but is no libcupti: unless a real one is present, this is refused.
        if present() {
            eprintln!("skipped: libcupti is present on this machine");
            return;
        }
        let err = load(Some(Path::new("libc.so.6"))).unwrap_err();
        assert!(err.contains("soname"), "{err}");
    }

    #[test]
    fn finds_versioned_libraries_first() {
        let dir = std::env::temp_dir().join(format!("kiln-libcupti-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for name in ["libcupti.so", "libcupti.so.12", "libcuda.so", "README"] {
            std::fs::write(dir.join(name), "").unwrap();
        }
        assert_eq!(
            libraries_in(&dir),
            vec![dir.join("libcupti.so.12"), dir.join("libcupti.so")]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
