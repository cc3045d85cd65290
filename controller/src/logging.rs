//! What kiln says while it works, and where: notes and warnings to stderr (as
//! much as `-q`/`-v`/`-vv` ask), everything to `kiln.log` in the store, one
//! timestamp per line. Dependencies' logs stay at warnings unless `RUST_LOG`
//! asks for more; colours only on a terminal.

use std::io::IsTerminal;
use std::path::Path;
use std::sync::{Mutex, OnceLock};

use anyhow::{Context, Result};
use tracing_subscriber::{fmt, layer::SubscriberExt, util::SubscriberInitExt, EnvFilter, Layer};

use crate::text::escape_controls;

/// How much kiln says on stderr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Verbosity {
    /// Errors only: no notes, no progress (`-q`).
    Quiet,
    /// Notes, progress and warnings.
    Normal,
    /// Also what kiln does, as its log says it (`-v`).
    Verbose,
    /// Also kiln's debug log (`-vv`).
    Debug,
}

static VERBOSITY: OnceLock<Verbosity> = OnceLock::new();

/// The verbosity asked for (normal until [`init`]).
pub fn verbosity() -> Verbosity {
    VERBOSITY.get().copied().unwrap_or(Verbosity::Normal)
}

/// Says `message` to the person at stderr (`kiln: ...`) unless `-q`, and records it in the log.
/// A note may quote a benchmark's output: its control characters are shown escaped.
pub fn note(message: impl std::fmt::Display) {
    if verbosity() > Verbosity::Quiet {
        eprintln!("kiln: {}", escape_controls(&message.to_string()));
    }
    tracing::info!(target: "kiln::note", "{message}");
}

/// Records `message` in the log only, as a note: what a person at a terminal sees otherwise
/// (progress bars, a summary printed on stdout).
pub fn record(message: impl std::fmt::Display) {
    tracing::info!(target: "kiln::note", "{message}");
}

/// The log file of the current campaign, swapped in once its store is known.
static LOG_FILE: OnceLock<Mutex<Option<std::fs::File>>> = OnceLock::new();

struct FileWriter;

impl std::io::Write for FileWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match LOG_FILE.get().and_then(|m| m.lock().ok()) {
            Some(mut guard) => match guard.as_mut() {
                Some(f) => f.write(buf),
                None => Ok(buf.len()),
            },
            None => Ok(buf.len()),
        }
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// kiln's own log targets at `level`, its dependencies' at warnings; `RUST_LOG` overrides.
fn filter(level: &str) -> EnvFilter {
    EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| EnvFilter::new(format!("warn,kiln={level},kiln_controller={level}")))
}

/// Installs the global subscriber for `verbosity`.
pub fn init(verbosity: Verbosity) {
    let _ = VERBOSITY.set(verbosity);
    // Notes reach stderr by [`note`] itself; the log's copy of them is for the file.
    let stderr_level = match verbosity {
        Verbosity::Quiet => "error",
        Verbosity::Normal => "warn",
        Verbosity::Verbose => "info",
        Verbosity::Debug => "debug",
    };
    let file_level = if verbosity == Verbosity::Debug {
        "debug"
    } else {
        "info"
    };
    let _ = tracing_subscriber::registry()
        .with(
            fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(std::io::stderr().is_terminal())
                .with_filter(
                    filter(stderr_level)
                        .add_directive("kiln::note=off".parse().expect("a valid directive")),
                ),
        )
        .with(
            fmt::layer()
                .with_ansi(false)
                .with_writer(|| FileWriter)
                .with_filter(filter(file_level)),
        )
        .try_init();
}

/// Sends the file log to `path` (appending) until the guard is dropped.
pub fn to_file(path: &Path) -> Result<LogGuard> {
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("cannot open the log {}", path.display()))?;
    let slot = LOG_FILE.get_or_init(|| Mutex::new(None));
    *slot.lock().expect("not poisoned") = Some(file);
    Ok(LogGuard)
}

/// Stops file logging when dropped.
pub struct LogGuard;

impl Drop for LogGuard {
    fn drop(&mut self) {
        if let Some(slot) = LOG_FILE.get() {
            if let Ok(mut g) = slot.lock() {
                *g = None;
            }
        }
    }
}
