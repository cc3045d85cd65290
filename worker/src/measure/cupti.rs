//! GPU time through kiln's CUPTI injection library (crate `kiln-cupti`): where the library is,
//! the environment that has the CUDA driver load it into a run, and the run's trace folder read
//! back into metrics (format and arithmetic in `kiln_protocol::gpu_trace`).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use kiln_protocol::gpu_trace::{
    self, FLUSH_PERIOD, INJECTION_LIBRARY, LIBCUPTI_ENV, NOTE_EXTENSION, TRACE_DIR_ENV,
    TRACE_EXTENSION,
};
use kiln_protocol::metric::{Metric, MetricValue, Metrics};

/// The variable naming the injection library's file, overriding the one beside `kiln-worker`.
pub const LIBRARY_ENV: &str = "KILN_CUPTI_LIBRARY";

/// The variable through which the CUDA driver loads an injection library.
pub const INJECTION_ENV: &str = "CUDA_INJECTION64_PATH";

/// The injection library: `$KILN_CUPTI_LIBRARY`, else `libkiln_cupti.so` beside this
/// executable (where cargo and the SSH deployment put it) or one folder up (for test binaries,
/// which run from `target/*/deps`).
pub fn injection_library() -> Result<PathBuf, String> {
    if let Some(path) = std::env::var_os(LIBRARY_ENV) {
        let path = PathBuf::from(path);
        return if path.is_file() {
            Ok(path)
        } else {
            Err(format!("{LIBRARY_ENV}={} is not a file", path.display()))
        };
    }
    let exe = std::env::current_exe().map_err(|e| format!("cannot locate kiln-worker: {e}"))?;
    let dir = exe.parent().unwrap_or(Path::new("/"));
    [dir.join(INJECTION_LIBRARY), dir.join("..").join(INJECTION_LIBRARY)]
        .into_iter()
        .find(|p| p.is_file())
        .ok_or_else(|| {
            format!(
                "{INJECTION_LIBRARY} is not beside {} (build it: cargo build -p kiln-cupti) and {LIBRARY_ENV} is unset",
                exe.display()
            )
        })
}

/// Whether GPU time can be traced here: the injection library, or why not (no CUDA driver,
/// no library).
pub fn readiness() -> Result<PathBuf, String> {
    if !driver_present() {
        return Err("the CUDA driver (libcuda.so.1) is not installed".into());
    }
    injection_library()
}

/// Whether the CUDA driver library loads here (checked once).
fn driver_present() -> bool {
    static PRESENT: OnceLock<bool> = OnceLock::new();
    *PRESENT.get_or_init(|| {
        // SAFETY: a constant C string; the handle is closed right away.
        unsafe {
            let handle = libc::dlopen(c"libcuda.so.1".as_ptr(), libc::RTLD_LAZY | libc::RTLD_LOCAL);
            if handle.is_null() {
                return false;
            }
            libc::dlclose(handle);
            true
        }
    })
}

/// Traces the timed runs of one measurement into one folder.
#[derive(Debug)]
pub struct Tracer {
    library: PathBuf,
    dir: PathBuf,
}

impl Tracer {
    /// A tracer writing into `dir`, or why GPU time cannot be measured here.
    pub fn new(dir: &Path, env: &[(String, String)]) -> Result<Tracer, String> {
        if env.iter().any(|(k, _)| k == INJECTION_ENV) {
            return Err(format!(
                "the benchmark sets {INJECTION_ENV} itself; only one injection library loads"
            ));
        }
        Ok(Tracer {
            library: readiness()?,
            dir: dir.to_path_buf(),
        })
    }

    /// A tracer loading `library` whatever this machine has, for tests.
    #[cfg(test)]
    pub(crate) fn with_library(library: &Path, dir: &Path) -> Tracer {
        Tracer {
            library: library.to_path_buf(),
            dir: dir.to_path_buf(),
        }
    }

    /// Empties the trace folder and adds the variables that load the library into the run.
    pub fn prepare(&self, env: &mut Vec<(String, String)>) -> Result<(), String> {
        std::fs::create_dir_all(&self.dir)
            .map_err(|e| format!("cannot create {}: {e}", self.dir.display()))?;
        let entries = std::fs::read_dir(&self.dir)
            .map_err(|e| format!("cannot list {}: {e}", self.dir.display()))?;
        for path in entries.flatten().map(|e| e.path()) {
            let ours = path
                .extension()
                .is_some_and(|e| e == TRACE_EXTENSION || e == NOTE_EXTENSION);
            if ours {
                std::fs::remove_file(&path)
                    .map_err(|e| format!("cannot remove {}: {e}", path.display()))?;
            }
        }
        let mut set = |name: &str, value: String| {
            // One entry per name: a program's getenv sees the first.
            env.retain(|(k, _)| k != name);
            env.push((name.to_string(), value));
        };
        set(INJECTION_ENV, self.library.display().to_string());
        set(TRACE_DIR_ENV, self.dir.display().to_string());
        if let Some(libcupti) = std::env::var_os(LIBCUPTI_ENV) {
            set(LIBCUPTI_ENV, libcupti.to_string_lossy().into_owned());
        }
        Ok(())
    }

    /// The run's CUPTI metrics, or why it has none: no process traced (the program never
    /// initialised CUDA, or the library could not start), a process left a note, or a file is
    /// damaged. A run some of whose processes could not trace has no GPU time rather than a short one.
    pub fn collect(&self) -> Result<Metrics, String> {
        let found = gpu_trace::read_dir(&self.dir)?;
        if !found.notes.is_empty() {
            let notes: Vec<String> = found
                .notes
                .iter()
                .map(|(file, note)| format!("{file}: {note}"))
                .collect();
            return Err(format!(
                "a process of the run could not trace: {}",
                notes.join("; ")
            ));
        }
        let totals = found.totals.ok_or_else(|| {
            format!(
                "no process of the run traced into {} (did it initialise CUDA?)",
                self.dir.display()
            )
        })?;
        if totals.incomplete > 0 {
            tracing::warn!(
                "{} of {} traced processes did not flush at exit (killed or _exit): up to {} ms of their GPU records may be missing",
                totals.incomplete,
                totals.processes,
                FLUSH_PERIOD.as_millis()
            );
        }
        if totals.dropped > 0 {
            tracing::warn!("CUPTI dropped {} activity records", totals.dropped);
        }
        Ok(totals.metrics())
    }
}

/// What a program prints on stderr when a CUPTI client of its own could not start. CUPTI serves
/// one client per process, and while kiln's injection library traces a run it is that client,
/// started at CUDA's initialisation before the program's code can ask (PyTorch's profiler then
/// reads no kernel at all, as was reported from a GPU worker). The program's subscription fails
/// with `CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED` inside the program, where the library
/// cannot see it: the program says so itself, or nothing does. Looked for only in runs the
/// library traced (elsewhere such a line is the program's own business):
///
/// - `CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED`, CUPTI's name for the clash, printed
///   through `cuptiGetResultString` by PyTorch's profiler (Kineto's `CUPTI_CALL`: "function
///   cbapi->getCuptiStatus() failed with error CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED
///   (39)") and by TensorFlow's and JAX's (XLA's `cupti_tracer.cc`: "function ... failed with
///   error CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"), and named in JAX's warning of an
///   empty profile;
/// - `CUPTI initialization failed`, Kineto's warning ("CUPTI initialization failed - CUDA
///   profiler activities will be missing"), which PyTorch prints for any failed subscription: in
///   a traced run the clash is the likely cause, though not the only one (a subscription refused
///   for too few privileges reads the same).
///
/// Not looked for: `CUPTI_ERROR_NOT_INITIALIZED` and the like, which name no clash, and messages
/// a program writes to stdout or to a file. A program that prints nothing when its profiler
/// fails (a client of its own that ignores the error) goes unnoticed.
pub const CLIENT_FAILED: &[&str] = &[
    "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED",
    "CUPTI initialization failed",
];

/// Every CUPTI metric, unsupported.
pub fn unsupported() -> Metrics {
    Metric::ALL
        .iter()
        .filter(|m| m.needs_cupti())
        .map(|m| (*m, MetricValue::Unsupported))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_protocol::gpu_trace::{header, note_file_name, trace_file_name, Record};

    fn tracer(dir: &Path) -> Tracer {
        Tracer::with_library(Path::new("/lib/libkiln_cupti.so"), dir)
    }

    #[test]
    fn prepare_clears_old_traces_and_sets_the_variables() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("gpu-trace");
        let t = tracer(&dir);
        let mut env = vec![
            ("PATH".to_string(), "/bin".to_string()),
            (TRACE_DIR_ENV.to_string(), "/elsewhere".to_string()),
        ];
        t.prepare(&mut env).unwrap();
        assert_eq!(env.iter().filter(|(k, _)| k == TRACE_DIR_ENV).count(), 1);
        assert!(env.contains(&(INJECTION_ENV.into(), "/lib/libkiln_cupti.so".into())));
        assert!(env.contains(&(TRACE_DIR_ENV.into(), dir.display().to_string())));
        std::fs::write(dir.join(trace_file_name(5, 0)), header(5)).unwrap();
        std::fs::write(dir.join(note_file_name(6)), "x").unwrap();
        std::fs::write(dir.join("keep.txt"), "x").unwrap();
        t.prepare(&mut Vec::new()).unwrap();
        let left: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, vec!["keep.txt"]);
    }

    #[test]
    fn collect_reads_traces_and_refuses_partial_runs() {
        let tmp = tempfile::tempdir().unwrap();
        let t = tracer(tmp.path());
        let err = t.collect().unwrap_err();
        assert!(err.contains("did it initialise CUDA"), "{err}");

        let mut bytes = header(9).to_vec();
        for r in [Record::Kernel { start: 0, end: 40 }, Record::End] {
            bytes.extend_from_slice(&r.encode());
        }
        std::fs::write(tmp.path().join(trace_file_name(9, 0)), bytes).unwrap();
        let m = t.collect().unwrap();
        assert_eq!(m[&Metric::GpuTime], MetricValue::Measured(40.0));
        assert_eq!(m.len(), unsupported().len());

        std::fs::write(tmp.path().join(note_file_name(10)), "libcupti missing\n").unwrap();
        let err = t.collect().unwrap_err();
        assert!(err.contains("libcupti missing"), "{err}");
    }

    #[test]
    fn a_benchmark_with_its_own_injection_library_is_not_traced() {
        let env = vec![(INJECTION_ENV.to_string(), "/x.so".to_string())];
        let err = Tracer::new(Path::new("/tmp/x"), &env).unwrap_err();
        assert!(err.contains(INJECTION_ENV), "{err}");
    }
}
