//! Why an SSH login failed, in words a person can act on: a changed or
//! unknown host key, a refused key, an unreachable host, told apart from
//! what ssh printed.

use std::error::Error as StdError;
use std::fmt::Write as _;

use kiln_protocol::config::SshWorker;

use super::*;

/// Why a login failed, from ssh's own log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum LoginFailure {
    HostKeyChanged,
    HostKeyUnknown,
    Auth,
    Unreachable,
    Other,
}

pub(super) fn classify(log: &str) -> LoginFailure {
    if log.contains("REMOTE HOST IDENTIFICATION HAS CHANGED")
        || log.contains("has changed and you have requested strict checking")
    {
        LoginFailure::HostKeyChanged
    } else if log.contains("Host key verification failed") || log.contains("host key is known for")
    {
        LoginFailure::HostKeyUnknown
    } else if log.contains("Permission denied") || log.contains("Too many authentication failures")
    {
        LoginFailure::Auth
    } else if [
        "Connection refused",
        "timed out",
        "No route to host",
        "Network is unreachable",
        "Could not resolve",
        "Name or service not known",
        "Connection closed by",
        "Connection reset",
        "kex_exchange_identification",
    ]
    .iter()
    .any(|p| log.contains(p))
    {
        LoginFailure::Unreachable
    } else {
        LoginFailure::Other
    }
}

/// The last two meaningful lines of ssh's log.
pub(super) fn ssh_said(log: &str) -> String {
    let lines: Vec<&str> = log
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('@'))
        .collect();
    let tail = &lines[lines.len().saturating_sub(2)..];
    tail.join(" / ")
}

pub(super) fn error_chain(e: &dyn StdError) -> String {
    let mut s = e.to_string();
    let mut src = e.source();
    while let Some(inner) = src {
        let _ = write!(s, ": {inner}");
        src = inner.source();
    }
    s
}

pub(super) fn login_error(spec: &SshWorker, who: &Who, e: &openssh::Error) -> anyhow::Error {
    // openssh puts ssh's log into the innermost error.
    let log = match e {
        openssh::Error::Connect(inner) => inner.to_string(),
        other => error_chain(other),
    };
    failure(spec, who, classify(&log), &ssh_said(&log))
}

/// A failed login's error: what failed, what to do about it, and what the client said.
pub(super) fn failure(spec: &SshWorker, who: &Who, why: LoginFailure, said: &str) -> anyhow::Error {
    let known_hosts = spec
        .known_hosts
        .as_ref()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|| "~/.ssh/known_hosts".into());
    let key_name = if spec.port == 22 {
        spec.host.clone()
    } else {
        format!("[{}]:{}", spec.host, spec.port)
    };
    let what = match why {
        LoginFailure::HostKeyChanged => format!(
            "host key of {} CHANGED: it differs from the one recorded in {known_hosts}; refusing to \
             connect (a man-in-the-middle, or a reinstalled host: if expected, run ssh-keygen -R \
             '{key_name}' -f {known_hosts} and connect again)",
            spec.host
        ),
        LoginFailure::HostKeyUnknown => format!(
            "host key of {} is unknown: it is not in {known_hosts} and host-key-check is strict \
             (add it, e.g. ssh-keyscan -p {} {} >> {known_hosts}, or use (host-key-check accept-new))",
            spec.host, spec.port, spec.host
        ),
        LoginFailure::Auth => format!(
            "authentication failed as {} with {}",
            spec.user.as_deref().unwrap_or("the local user name"),
            spec.identity
                .as_ref()
                .map(|p| format!("identity {}", p.display()))
                .unwrap_or_else(|| "ssh's default identities".into())
        ),
        LoginFailure::Unreachable => format!("unreachable ({}:{})", spec.host, spec.port),
        LoginFailure::Other => "SSH login failed".into(),
    };
    who.err(format!("{what}; ssh said: {said}"))
}
