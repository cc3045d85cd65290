//! Logging: warnings to stderr, everything (RUST_LOG respected) to a file in the store.

use std::path::Path;
use std::sync::{Mutex, OnceLock};

use anyhow::{Context, Result};
use tracing_subscriber::{fmt, layer::SubscriberExt, util::SubscriberInitExt, EnvFilter, Layer};

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

/// Installs the global subscriber: stderr at `warn` (or RUST_LOG), file at `info` (or RUST_LOG).
pub fn init() {
    let stderr_filter =
        EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("warn"));
    let file_filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let _ = tracing_subscriber::registry()
        .with(
            fmt::layer()
                .with_writer(std::io::stderr)
                .with_filter(stderr_filter),
        )
        .with(
            fmt::layer()
                .with_ansi(false)
                .with_writer(|| FileWriter)
                .with_filter(file_filter),
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
