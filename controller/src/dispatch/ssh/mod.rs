//! Workers reached over SSH: connection, agentless deployment, and the channel to `serve`.
//!
//! [`open_ssh`] connects with the worker's [`SshClient`]: the system `ssh` client through the
//! openssh crate (native multiplexing: one master connection per worker, one mux session per
//! remote command), or kiln's own (`builtin.rs`, russh: the connection inside the controller's
//! process, a tenth of a master's memory); `link.rs` runs remote commands over either. It makes
//! sure `<rundir>/kiln-worker` is the binary we mean to run (by SHA-256, uploading it when it is
//! missing or different) — and likewise `<rundir>/libkiln_cupti.so`, the CUPTI injection library
//! the worker looks for beside itself, when one lies beside the local binary (both hashed by one
//! `sha256sum` on the worker) — starts
//! `<rundir>/kiln-worker serve --rundir <rundir>` and returns its stdin/stdout as a [`Channel`].
//!
//! - The user's `~/.ssh/config` is never read: the system client gets a constant config file of
//!   ours. Control sockets live in a private directory (`$TMPDIR/kiln-ssh-<uid>`, mode 0700).
//! - Host keys are checked per [`HostKeyCheck`] against `SshWorker::known_hosts` when given (and
//!   only against it: the global known_hosts file is ignored then), else against ssh's defaults.
//!   `Off` uses no known_hosts file at all and writes none.
//! - Remote commands are argument lists (each argument shell-quoted by openssh), never shell
//!   strings assembled from config values. They need `sha256sum`, `mkdir`, `dd`, `chmod`, `mv` and
//!   `rm` (coreutils) on the worker.
//! - `rundir` is a path on the worker, absolute or relative to the login directory; a leading
//!   `~/` is taken as "relative to the login directory" (it is not shell-expanded).
//! - Timeouts: `connect_timeout` is ssh's `ConnectTimeout`, bounds the whole login (2× + 2 s; the
//!   builtin client's connection and its login each within it) and each small remote command;
//!   the upload gets `connect_timeout` plus one second per MiB. Once connected, a link that stops
//!   answering is detected by keep-alives (either client's) after
//!   [`server_alive_interval`]`(connect_timeout)` × [`SERVER_ALIVE_COUNT_MAX`]: the connection
//!   ends and reads on the channel end (EOF).
//! - Dropping the channel's guard ends the remote command and the connection (the system
//!   client's mux session and master); the remote `serve` then sees EOF on its stdin. The worker's stderr is forwarded line by line to
//!   `tracing` (target `kiln::worker`, field `worker`).

mod builtin;
mod command;
mod deploy;
mod link;
mod login;

use command::Ran;
pub(super) use deploy::local_binary;
use deploy::*;
use link::{Link, LinkError};
use login::*;
use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::transport::{Channel, ChannelGuard, ChannelReader};
use anyhow::{anyhow, bail, Context, Result};
use kiln_protocol::config::{HostKeyCheck, SshClient, SshWorker};
use openssh::{ControlPersist, KnownHosts, SessionBuilder, Stdio};
use tokio::time::timeout;

/// The worker binary's file name inside the rundir.
pub const WORKER_FILE: &str = "kiln-worker";

/// Keep-alives ssh may miss before it declares the link dead (`ServerAliveCountMax`).
pub const SERVER_ALIVE_COUNT_MAX: u32 = 3;

/// How long the master connection outlives its last session (a crashed controller's master
/// goes away by itself after this).
const CONTROL_PERSIST_S: usize = 60;

/// A connected SSH worker.
pub struct SshConnect {
    /// The byte stream to `kiln-worker serve`; its guard owns the SSH session.
    pub channel: Channel,
    /// Whether the worker binary was uploaded (it was missing or different).
    pub uploaded: bool,
    /// SHA-256 (hex) of the worker binary now in place.
    pub worker_sha256: String,
    /// The binary's path on the worker.
    pub remote_path: String,
}

/// ssh's `ServerAliveInterval` for a given connect timeout: a quarter of it, within 1–5 s.
/// A dead link is noticed after about this times [`SERVER_ALIVE_COUNT_MAX`].
pub fn server_alive_interval(connect_timeout: Duration) -> Duration {
    (connect_timeout / 4).clamp(Duration::from_secs(1), Duration::from_secs(5))
}

/// The worker's address for messages: `user@host:port` (or `host:port`).
pub fn address(spec: &SshWorker) -> String {
    let host = if spec.host.contains(':') {
        format!("[{}]", spec.host)
    } else {
        spec.host.clone()
    };
    match &spec.user {
        Some(u) => format!("{u}@{host}:{}", spec.port),
        None => format!("{host}:{}", spec.port),
    }
}

/// The rundir as used in remote commands (`~/` stripped: relative paths are relative to the
/// login directory anyway).
pub fn remote_rundir(spec: &SshWorker) -> Result<String> {
    let r = spec.rundir.as_str();
    if r.is_empty() || r.contains('\0') {
        bail!("rundir must be a non-empty path");
    }
    let r = if r == "~" {
        "."
    } else if let Some(rest) = r.strip_prefix("~/") {
        if rest.is_empty() {
            "."
        } else {
            rest
        }
    } else if r.starts_with('~') {
        bail!("rundir '{r}': ~user is not supported; give the path");
    } else {
        r
    };
    Ok(r.to_string())
}

/// `<rundir>/kiln-worker` on the worker.
pub fn remote_worker_path(spec: &SshWorker) -> Result<String> {
    Ok(remote_join(&remote_rundir(spec)?, WORKER_FILE))
}

fn remote_join(dir: &str, name: &str) -> String {
    if dir.ends_with('/') {
        format!("{dir}{name}")
    } else {
        format!("{dir}/{name}")
    }
}

/// Names the worker in every error.
struct Who {
    name: String,
    addr: String,
}

impl Who {
    fn err(&self, what: impl std::fmt::Display) -> anyhow::Error {
        anyhow!("ssh worker '{}' ({}): {what}", self.name, self.addr)
    }

    /// A program deployment needs that the worker lacks.
    fn missing(&self, program: &str) -> anyhow::Error {
        self.err(format!(
            "`{program}` is missing on the worker (needed to deploy kiln-worker)"
        ))
    }
}

/// The remote command (program and arguments) that starts `serve`, given the worker binary's
/// path there.
pub type ServeCommand = Box<dyn FnOnce(&str) -> Vec<String> + Send>;

/// Takes a remote command's standard error (see [`Launch::stderr`]).
pub type StderrReader =
    Box<dyn FnOnce(ChannelReader) -> Option<tokio::task::JoinHandle<()>> + Send>;

/// How the worker's `serve` is started once `kiln-worker` is in place.
pub struct Launch {
    /// The remote command.
    pub argv: ServeCommand,
    /// Takes the remote command's standard error; the task it returns, if any, ends with the
    /// session (`None`: the reader reads on to the end, what a command says as it exits
    /// included).
    pub stderr: StderrReader,
}

/// Connects to an SSH worker, deploys `kiln-worker` if needed, and starts
/// `<rundir>/kiln-worker serve --rundir <rundir>`, its log forwarded.
///
/// `local_worker_binary` is uploaded unless `spec.worker_binary` names another (a build for the
/// worker's platform). Errors name the worker and its address and say what failed: unreachable,
/// host key changed or unknown, authentication, a missing remote tool, an upload whose hash does
/// not match.
pub async fn open_ssh(
    spec: &SshWorker,
    connect_timeout: Duration,
    local_worker_binary: &Path,
) -> Result<SshConnect> {
    let who = Who {
        name: spec.name.clone(),
        addr: address(spec),
    };
    let rundir = remote_rundir(spec).map_err(|e| who.err(e))?;
    let name = spec.name.clone();
    let launch = Launch {
        argv: Box::new(move |worker: &str| {
            [worker, "serve", "--rundir", &rundir]
                .map(str::to_string)
                .to_vec()
        }),
        stderr: Box::new(move |stderr| Some(super::transport::forward_log(name, stderr))),
    };
    open_ssh_launching(spec, connect_timeout, local_worker_binary, launch).await
}

/// [`open_ssh`], starting the worker with `launch` (through `srun` on a Slurm login node).
pub async fn open_ssh_launching(
    spec: &SshWorker,
    connect_timeout: Duration,
    local_worker_binary: &Path,
    launch: Launch,
) -> Result<SshConnect> {
    let who = Who {
        name: spec.name.clone(),
        addr: address(spec),
    };
    let rundir = remote_rundir(spec).map_err(|e| who.err(e))?;
    let remote_path = remote_join(&rundir, WORKER_FILE);

    // The local binary and its hash (read before connecting: a missing file is our problem).
    let binary = spec
        .worker_binary
        .as_deref()
        .unwrap_or(local_worker_binary)
        .to_path_buf();
    let cant_read =
        |e: anyhow::Error| who.err(format!("cannot read the worker binary to deploy: {e:#}"));
    let started = std::time::Instant::now();
    let (_, mut local_hash) = local_binary(&binary, false).await.map_err(cant_read)?;
    let hashed = started.elapsed();

    let link = connect(spec, &who, connect_timeout).await?;
    let logged_in = started.elapsed();

    let target = Deploy {
        link: &link,
        who: &who,
        rundir: &rundir,
        limit: connect_timeout,
    };
    let uploaded = target.worker(&binary, &mut local_hash).await?;

    let channel = start_serve(link, &who, launch, &remote_path).await?;
    tracing::debug!(
        worker = %spec.name,
        uploaded,
        "open_ssh took {:.2} s (local hash {:.2} s, login {:.2} s)",
        started.elapsed().as_secs_f64(),
        hashed.as_secs_f64(),
        (logged_in - hashed).as_secs_f64()
    );
    Ok(SshConnect {
        channel,
        uploaded,
        worker_sha256: local_hash,
        remote_path,
    })
}

async fn connect(spec: &SshWorker, who: &Who, connect_timeout: Duration) -> Result<Link> {
    if spec.host.is_empty()
        || spec.host.starts_with('-')
        || spec
            .host
            .chars()
            .any(|c| c.is_whitespace() || c.is_control())
    {
        return Err(who.err(format!("invalid host name {:?}", spec.host)));
    }
    match spec.client {
        SshClient::System => connect_system(spec, who, connect_timeout).await,
        SshClient::Builtin => {
            (builtin::connect(spec, who, connect_timeout).await).map(Link::Builtin)
        }
    }
}

/// Logs in with OpenSSH's client: a master connection and a check that it answers.
async fn connect_system(spec: &SshWorker, who: &Who, connect_timeout: Duration) -> Result<Link> {
    let own_known_hosts = spec.known_hosts.is_some() || spec.host_key_check == HostKeyCheck::Off;
    let dir = private_dir().map_err(|e| who.err(format!("{e:#}")))?;
    let config = client_config(&dir, own_known_hosts).map_err(|e| who.err(format!("{e:#}")))?;

    let b = session_builder(spec, &config, &dir, connect_timeout);
    let login_bound = connect_timeout * 2 + Duration::from_secs(2);
    let session = match timeout(login_bound, b.connect_mux(&spec.host)).await {
        Err(_) => {
            return Err(who.err(format!(
                "unreachable: no SSH login within {:.0} s",
                login_bound.as_secs_f64()
            )))
        }
        Ok(Ok(s)) => s,
        Ok(Err(e)) => return Err(login_error(spec, who, &e)),
    };
    match timeout(connect_timeout, session.check()).await {
        Ok(Ok(())) => Ok(Link::System(Arc::new(session))),
        Ok(Err(e)) => Err(who.err(format!(
            "the SSH connection died right after login: {}",
            error_chain(&e)
        ))),
        Err(_) => Err(who.err("the SSH connection does not answer right after login")),
    }
}

/// The SSH options of a connection to `spec`: kiln's client config in `dir`, its control
/// socket there, the timeouts, user, key and host-key checking.
fn session_builder(
    spec: &SshWorker,
    config: &Path,
    dir: &Path,
    connect_timeout: Duration,
) -> SessionBuilder {
    let mut b = SessionBuilder::default();
    b.config_file(config)
        .control_directory(dir)
        .control_persist(ControlPersist::IdleFor(
            CONTROL_PERSIST_S.try_into().expect("nonzero"),
        ))
        .connect_timeout(connect_timeout.max(Duration::from_secs(1)))
        .server_alive_interval(server_alive_interval(connect_timeout))
        .port(spec.port);
    if let Some(user) = &spec.user {
        b.user(user.clone());
    }
    if let Some(identity) = &spec.identity {
        b.keyfile(identity);
    }
    match spec.host_key_check {
        HostKeyCheck::Strict => b.known_hosts_check(KnownHosts::Strict),
        HostKeyCheck::AcceptNew => b.known_hosts_check(KnownHosts::Add),
        HostKeyCheck::Off => b.known_hosts_check(KnownHosts::Accept),
    };
    match (&spec.known_hosts, spec.host_key_check) {
        (_, HostKeyCheck::Off) => {
            b.user_known_hosts_file("/dev/null");
        }
        (Some(kh), _) => {
            b.user_known_hosts_file(kh);
        }
        (None, _) => {}
    }
    b
}

/// `$TMPDIR/kiln-ssh-<uid>` (or `/tmp/...` when TMPDIR is too long for socket paths), mode 0700,
/// ours.
fn private_dir() -> Result<PathBuf> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let uid = unsafe { libc::geteuid() };
    let name = format!("kiln-ssh-{uid}");
    let mut dir = std::env::temp_dir().join(&name);
    // Control sockets go to DIR/.ssh-connectionXXXXXX/master.XXXXXXXXXXXXXXXX (ssh binds a
    // temporary name first); sun_path holds 107 bytes.
    if dir.as_os_str().len() > 60 {
        dir = Path::new("/tmp").join(&name);
    }
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e).with_context(|| format!("cannot create {}", dir.display())),
    }
    let md = std::fs::symlink_metadata(&dir).with_context(|| format!("{}", dir.display()))?;
    if !md.is_dir() || md.uid() != uid || md.mode() & 0o077 != 0 {
        bail!(
            "{} is not a private directory of ours (owner {}, mode {:o}); remove it",
            dir.display(),
            md.uid(),
            md.mode() & 0o7777
        );
    }
    Ok(dir)
}

const CLIENT_CONFIG: &str = "\
# Written by kiln (controller/src/ssh.rs) for its ssh client; constant, no per-worker values.
HashKnownHosts no
UpdateHostKeys no
PasswordAuthentication no
KbdInteractiveAuthentication no
ForwardAgent no
ForwardX11 no
";

/// Writes (atomically, when missing or stale) one of our two constant ssh configs and returns its
/// path. With `own_known_hosts` the global known_hosts file is ignored too.
fn client_config(dir: &Path, own_known_hosts: bool) -> Result<PathBuf> {
    let mut text = format!("{CLIENT_CONFIG}ServerAliveCountMax {SERVER_ALIVE_COUNT_MAX}\n");
    let name = if own_known_hosts {
        text.push_str("GlobalKnownHostsFile /dev/null\n");
        "ssh_config_own_known_hosts"
    } else {
        "ssh_config"
    };
    let path = dir.join(name);
    if std::fs::read_to_string(&path).ok().as_deref() == Some(text.as_str()) {
        return Ok(path);
    }
    let tmp = dir.join(format!("{name}.{}.{}", std::process::id(), nanos()));
    let res = (|| -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        std::fs::rename(&tmp, &path)
    })();
    if let Err(e) = res {
        let _ = std::fs::remove_file(&tmp);
        return Err(e).with_context(|| format!("cannot write {}", path.display()));
    }
    Ok(path)
}

fn nanos() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

/// Runs a small remote command (argument list) to completion; its output.
async fn remote_output(
    link: &Link,
    who: &Who,
    program: &str,
    args: &[&str],
    limit: Duration,
) -> Result<Ran> {
    let argv: Vec<&str> = std::iter::once(program)
        .chain(args.iter().copied())
        .collect();
    let shown = || format!("`{}`", argv.join(" "));
    match timeout(limit, link.output(&argv, &[])).await {
        Err(_) => Err(who.err(format!(
            "remote command {} did not finish within {:.0} s",
            shown(),
            limit.as_secs_f64()
        ))),
        Ok(Err(LinkError::Missing)) => Err(who.missing(program)),
        Ok(Err(LinkError::Broken(e))) => {
            Err(who.err(format!("remote command {} failed: {e}", shown())))
        }
        Ok(Ok(out)) => Ok(out),
    }
}

/// Runs a small remote command that must succeed.
async fn remote_run(
    link: &Link,
    who: &Who,
    program: &str,
    args: &[&str],
    limit: Duration,
) -> Result<()> {
    let out = remote_output(link, who, program, args, limit).await?;
    if out.exit.success() {
        Ok(())
    } else {
        Err(who.err(format!(
            "remote command `{program} {}` failed ({}): {}",
            args.join(" "),
            out.exit,
            String::from_utf8_lossy(&out.stderr).trim()
        )))
    }
}

/// Ends a task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// What keeps a remote `serve` alive, dropped in this order: the stderr forwarder, the remote
/// command, and the connection (last: its drop ends it).
struct SshGuard {
    _stderr_forwarder: Option<AbortOnDrop>,
    _command: Box<dyn std::any::Any + Send + Sync>,
    _link: Link,
}

async fn start_serve(link: Link, who: &Who, launch: Launch, remote_path: &str) -> Result<Channel> {
    let argv = (launch.argv)(remote_path);
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let shown = argv.join(" ");
    let spawned = link.spawn(&argv).await.map_err(|e| match e {
        LinkError::Missing => who.err(format!("cannot start `{shown}`: no such program")),
        LinkError::Broken(e) => who.err(format!("cannot start `{shown}`: {e}")),
    })?;
    let forwarder = (launch.stderr)(spawned.stderr);
    tracing::info!(worker = %who.name, "started `{shown}` on {}", who.addr);
    let guard = SshGuard {
        _stderr_forwarder: forwarder.map(AbortOnDrop),
        _command: spawned.keep,
        _link: link,
    };
    Ok(Channel {
        reader: spawned.stdout,
        writer: spawned.stdin,
        guard: ChannelGuard::Other(Box::new(guard)),
        address: who.addr.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(rundir: &str) -> SshWorker {
        SshWorker {
            name: "w".into(),
            host: "127.0.0.2".into(),
            user: Some("root".into()),
            port: 2222,
            identity: None,
            known_hosts: None,
            host_key_check: HostKeyCheck::Strict,
            client: SshClient::System,
            rundir: rundir.into(),
            slots: 1,
            cpus: vec![],
            gpus: Vec::new(),
            worker_binary: None,
        }
    }

    #[test]
    fn rundir_and_paths() {
        assert_eq!(
            remote_worker_path(&spec("/srv/kiln")).unwrap(),
            "/srv/kiln/kiln-worker"
        );
        assert_eq!(
            remote_worker_path(&spec("/srv/kiln/")).unwrap(),
            "/srv/kiln/kiln-worker"
        );
        assert_eq!(
            remote_worker_path(&spec("~/kiln")).unwrap(),
            "kiln/kiln-worker"
        );
        assert_eq!(remote_worker_path(&spec("~")).unwrap(), "./kiln-worker");
        assert!(remote_rundir(&spec("")).is_err());
        assert!(remote_rundir(&spec("~bob/x")).is_err());
        assert_eq!(address(&spec("/x")), "root@127.0.0.2:2222");
    }

    #[test]
    fn classifies_ssh_logs() {
        assert_eq!(
            classify("Host key for [127.0.0.2]:2222 has changed and you have requested strict checking.\nHost key verification failed."),
            LoginFailure::HostKeyChanged
        );
        assert_eq!(
            classify("No ED25519 host key is known for [127.0.0.2]:2222 and you have requested strict checking.\nHost key verification failed."),
            LoginFailure::HostKeyUnknown
        );
        assert_eq!(
            classify("root@127.0.0.2: Permission denied (publickey)."),
            LoginFailure::Auth
        );
        assert_eq!(
            classify("ssh: connect to host 127.0.0.9 port 2222: Connection refused"),
            LoginFailure::Unreachable
        );
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
