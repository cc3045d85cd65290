//! How kiln ends: every failure is mapped to its exit status here, and only
//! here (README, "Exit status").
//!
//! | status | meaning |
//! |-------:|---------|
//! | 0 | success; also a reader that closed kiln's output early (`kiln export \| head`) |
//! | 1 | failure: a worker, a build, a store that cannot be opened, problems found |
//! | 2 | bad usage or input: flags, a config or decision file, a name the config (or store) lacks, a folder that holds no store, sources that cannot be sent ([`Outcome::BadInput`]) |
//! | 130, 143, 129 | stopped by SIGINT (Ctrl-C), SIGTERM or SIGHUP (128 + the signal, as a shell reports it); what was measured is stored and the same command resumes |
//!
//! Layers report failures as `anyhow` errors; the ones that are not plain
//! failures carry one of the types below somewhere in their chain.

use std::process::ExitCode;

use crate::dispatch::bundle::BadSources;
use crate::store::OpenError;
use crate::text::escape_controls;

/// Bad usage or input, with a message that says where (file:line:col, field or flag).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BadInput(pub String);

/// A signal stopped the command: what it says, and which signal.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Interrupted(pub String, pub Signal);

/// The signals that stop a command cleanly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGINT: Ctrl-C.
    Interrupt,
    /// SIGTERM: `kill`, a scheduler ending the job.
    Terminate,
    /// SIGHUP: the terminal went away.
    Hangup,
}

impl Signal {
    /// What stopped the command, for its message.
    pub fn said(self) -> &'static str {
        match self {
            Signal::Interrupt => "interrupted",
            Signal::Terminate => "terminated (SIGTERM)",
            Signal::Hangup => "hung up (SIGHUP)",
        }
    }

    /// The exit status: 128 + the signal's number.
    fn status(self) -> u8 {
        match self {
            Signal::Interrupt => 130,
            Signal::Terminate => 143,
            Signal::Hangup => 129,
        }
    }
}

/// Waits for SIGINT (Ctrl-C), SIGTERM or SIGHUP and names it. Each ends a
/// command as an interruption; dropping its workers then stops every build
/// and run they started (see `dispatch::transport`).
pub async fn interruption() -> Signal {
    use tokio::signal::unix::{signal, SignalKind};
    let listen = |kind| async move {
        match signal(kind) {
            Ok(mut s) => s.recv().await,
            // Without a handler the signal keeps its default action.
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! {
        _ = listen(SignalKind::interrupt()) => Signal::Interrupt,
        _ = listen(SignalKind::terminate()) => Signal::Terminate,
        _ = listen(SignalKind::hangup()) => Signal::Hangup,
    }
}

/// After a first signal, while kiln stops its workers and stores what it has: a second
/// signal ends it at once, with the status of that signal.
pub fn exit_on_second_signal() {
    tokio::spawn(async {
        let signal = interruption().await;
        eprintln!("kiln: {} again: stopping at once", signal.said());
        std::process::exit(i32::from(signal.status()));
    });
}

/// kiln's exit statuses and what each means, briefly (the README's table says more): the man
/// page's EXIT STATUS section.
pub const EXIT_STATUSES: [(&str, &str); 4] = [
    (
        "0",
        "success; also when the reader of kiln's output went away early",
    ),
    (
        "1",
        "failure: a worker, build or store that failed, an experiment that could not be \
         prepared, a store another controller holds, problems found by store verify, a failed \
         candidate or policy",
    ),
    (
        "2",
        "bad usage or input: an unknown flag, a config or decision file that does not parse \
         (named with file, line and column), a name the config lacks, a path that holds no \
         store, sources kiln cannot send",
    ),
    (
        "130, 143, 129",
        "stopped by SIGINT, SIGTERM or SIGHUP (128 + the signal): what was measured is \
         stored, and the same command resumes",
    ),
];

/// How a command that ran to its end went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// It did what was asked and found nothing wrong.
    Success,
    /// It ran, and what it found is a failure (problems in a store, a failed
    /// candidate, an unreachable worker); its output says which.
    Failure,
    /// It ran as far as the input allowed, and the input is at fault (a
    /// benchmark's sources that cannot be sent); its output says where.
    BadInput,
    /// A signal ended it as such a command ends (`kiln serve`): no error, yet the status
    /// of that signal, as a shell reports it.
    Stopped(Signal),
}

/// The exit status of a command's result; prints the error, if any, first.
pub fn exit(result: anyhow::Result<Outcome>) -> ExitCode {
    match result {
        Ok(Outcome::Success) => ExitCode::SUCCESS,
        Ok(Outcome::Failure) => ExitCode::FAILURE,
        Ok(Outcome::BadInput) => ExitCode::from(2),
        Ok(Outcome::Stopped(signal)) => ExitCode::from(signal.status()),
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            // An error may quote a benchmark's output: shown, never obeyed by the terminal.
            eprintln!("kiln: error: {}", escape_controls(&format!("{e:#}")));
            ExitCode::from(status_of(&e))
        }
    }
}

/// The exit status of an error (see the table above).
pub fn status_of(e: &anyhow::Error) -> u8 {
    for cause in e.chain() {
        if let Some(Interrupted(_, signal)) = cause.downcast_ref() {
            return signal.status();
        }
        if cause.is::<BadInput>()
            || cause.is::<BadSources>()
            || matches!(cause.downcast_ref(), Some(OpenError::NotAStore(_)))
        {
            return 2;
        }
    }
    1
}

/// Whether the error is a write to a reader that has gone (a closed pipe):
/// nothing is wrong then, the reader had enough.
pub fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        let io = cause.downcast_ref::<std::io::Error>().or_else(|| {
            match cause.downcast_ref::<csv::Error>().map(csv::Error::kind) {
                Some(csv::ErrorKind::Io(io)) => Some(io),
                _ => None,
            }
        });
        let json = cause
            .downcast_ref::<serde_json::Error>()
            .and_then(serde_json::Error::io_error_kind);
        io.map(std::io::Error::kind).or(json) == Some(std::io::ErrorKind::BrokenPipe)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    #[test]
    fn each_kind_of_failure_has_its_status() {
        let plain = anyhow::anyhow!("worker lost");
        assert_eq!(status_of(&plain), 1);
        let input = anyhow::Error::new(BadInput("cfg.sexp:1:2: unknown field".into()))
            .context("cannot start the campaign");
        assert_eq!(status_of(&input), 2);
        let store = anyhow::Error::new(OpenError::NotAStore("/tmp/x".into()));
        assert_eq!(status_of(&store), 2);
        let stop = anyhow::Error::new(Interrupted("interrupted".into(), Signal::Interrupt));
        assert_eq!(status_of(&stop), 130);
    }

    #[test]
    fn a_closed_pipe_is_success_however_deep() {
        let pipe = std::io::Error::from(std::io::ErrorKind::BrokenPipe);
        let e = Err::<(), _>(pipe)
            .context("cannot write the CSV")
            .unwrap_err();
        assert!(is_broken_pipe(&e));
        let csv_error = csv::Error::from(std::io::Error::from(std::io::ErrorKind::BrokenPipe));
        assert!(is_broken_pipe(&anyhow::Error::new(csv_error)));
        let other = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        assert!(!is_broken_pipe(&anyhow::Error::new(other)));
    }
}
