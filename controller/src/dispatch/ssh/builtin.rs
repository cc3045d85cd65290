//! kiln's own SSH client (`(client builtin)`): the login, its host key checked against
//! known_hosts, a key login and remote commands, inside the controller's process.
//!
//! Why: OpenSSH's client keeps a master process a worker, about 1.3 MB of private memory each
//! (results/bench/fleet/REPORT.md); here a worker costs one connection's keys and buffers.
//! What it leaves out that `ssh` does: an agent, ssh_config, certificates, `@revoked` and
//! `@cert-authority` lines in known_hosts, passphrase-protected keys.

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use russh::client::{self, Handle, Msg};
use russh::keys::{self, HashAlg, PrivateKeyWithHashAlg, PublicKey, PublicKeyOrCertificate};
use russh::{Channel, ChannelMsg, ChannelReadHalf};
use tokio::io::{AsyncWriteExt as _, SimplexStream, WriteHalf};

use super::command::{Exit, Ran, Spawned};
use super::login::{failure, LoginFailure};
use super::*;

/// Bytes of a remote command's output held between the connection and its reader.
const PIPE_BYTES: usize = 64 * 1024;

/// A logged-in connection.
pub(super) struct Builtin {
    handle: Handle<HostKeys>,
}

/// Checks the server's host key as `spec.host_key_check` says, and keeps why it refused one.
pub(super) struct HostKeys {
    host: String,
    port: u16,
    check: HostKeyCheck,
    /// known_hosts files in the order they are read; `accept-new` records a key in the first.
    files: Vec<PathBuf>,
    refused: Arc<Mutex<Option<(LoginFailure, String)>>>,
}

impl client::Handler for HostKeys {
    type Error = russh::Error;

    async fn check_server_key(
        &mut self,
        offered: &PublicKeyOrCertificate,
    ) -> Result<bool, Self::Error> {
        let judged = match offered {
            PublicKeyOrCertificate::PublicKey { key, .. } => self.judge(key),
            // known_hosts' @cert-authority lines are not read here.
            PublicKeyOrCertificate::Certificate(_) => Err((
                LoginFailure::HostKeyUnknown,
                "the host offered a certificate, which only (client system) checks".into(),
            )),
        };
        match judged {
            Ok(()) => Ok(true),
            Err(why) => {
                *self.refused.lock().expect("not poisoned") = Some(why);
                Ok(false)
            }
        }
    }
}

impl HostKeys {
    fn judge(&self, key: &PublicKey) -> Result<(), (LoginFailure, String)> {
        if self.check == HostKeyCheck::Off {
            return Ok(());
        }
        let (host, port) = (self.host.as_str(), self.port);
        for file in &self.files {
            match keys::check_known_hosts_path(host, port, key, file) {
                Ok(true) => return Ok(()),
                Ok(false) => {}
                Err(keys::Error::KeyChanged { line }) => {
                    let said = format!("the key at {}:{line} differs", file.display());
                    return Err((LoginFailure::HostKeyChanged, said));
                }
                Err(e) => return Err((LoginFailure::Other, format!("{}: {e}", file.display()))),
            }
        }
        let said = format!("no {} host key is known for it", key.algorithm());
        match (self.check, self.files.first()) {
            (HostKeyCheck::AcceptNew, Some(file)) => {
                keys::known_hosts::learn_known_hosts_path(host, port, key, file)
                    .map_err(|e| (LoginFailure::Other, format!("{}: {e}", file.display())))
            }
            _ => Err((LoginFailure::HostKeyUnknown, said)),
        }
    }

    /// Host key algorithms of the keys known for the host, to be asked for first (as `ssh`
    /// does: a host known by its RSA key is not refused for offering Ed25519 first).
    fn known_algorithms(&self) -> Vec<keys::Algorithm> {
        let mut known = Vec::new();
        for file in &self.files {
            let found = keys::known_hosts::known_host_keys_path(&self.host, self.port, file);
            for (_, key) in found.into_iter().flatten() {
                let algorithm = key.algorithm();
                if algorithm.clone().is_rsa() {
                    known.extend(
                        [HashAlg::Sha512, HashAlg::Sha256]
                            .map(|hash| keys::Algorithm::Rsa { hash: Some(hash) }),
                    );
                }
                known.push(algorithm);
            }
        }
        known
    }
}

/// The known_hosts files a worker's keys are checked against: its own file when given, else
/// `ssh`'s (the user's, then the system's).
fn known_hosts_files(spec: &SshWorker) -> Vec<PathBuf> {
    match (&spec.known_hosts, spec.host_key_check) {
        (_, HostKeyCheck::Off) => Vec::new(),
        (Some(file), _) => vec![file.clone()],
        (None, _) => {
            let user = home().map(|h| h.join(".ssh/known_hosts"));
            let system = PathBuf::from("/etc/ssh/ssh_known_hosts");
            user.into_iter().chain([system]).collect()
        }
    }
}

fn home() -> Option<PathBuf> {
    std::env::var_os("HOME").map(PathBuf::from)
}

fn client_config(connect_timeout: Duration, known: Vec<keys::Algorithm>) -> client::Config {
    let mut preferred = russh::Preferred::default();
    let rest = preferred.key.iter().filter(|a| !known.contains(a)).cloned();
    let keys: Vec<_> = known.iter().cloned().chain(rest).collect();
    preferred.key = Cow::Owned(keys);
    client::Config {
        keepalive_interval: Some(server_alive_interval(connect_timeout)),
        keepalive_max: SERVER_ALIVE_COUNT_MAX as usize,
        nodelay: true,
        preferred,
        ..Default::default()
    }
}

/// Connects to `spec`, checks its host key and logs in.
pub(super) async fn connect(
    spec: &SshWorker,
    who: &Who,
    connect_timeout: Duration,
) -> Result<Builtin> {
    let refused = Arc::new(Mutex::new(None));
    let host_keys = HostKeys {
        host: spec.host.clone(),
        port: spec.port,
        check: spec.host_key_check,
        files: known_hosts_files(spec),
        refused: Arc::clone(&refused),
    };
    let config = Arc::new(client_config(connect_timeout, host_keys.known_algorithms()));
    let address = (spec.host.as_str(), spec.port);
    let connecting = client::connect(config, address, host_keys);
    let mut handle = match timeout(connect_timeout, connecting).await {
        Err(_) => return Err(failure(spec, who, LoginFailure::Unreachable, "timed out")),
        Ok(Ok(handle)) => handle,
        Ok(Err(e)) => {
            let (why, said) = (refused.lock().expect("not poisoned").take())
                .unwrap_or_else(|| (unreached(&e), error_chain(&e)));
            return Err(failure(spec, who, why, &said));
        }
    };
    let logged_in = timeout(connect_timeout, log_in(&mut handle, spec, who)).await;
    logged_in
        .unwrap_or_else(|_| Err(who.err("no answer to the login within the connect timeout")))?;
    Ok(Builtin { handle })
}

fn unreached(e: &russh::Error) -> LoginFailure {
    match e {
        russh::Error::IO(_) | russh::Error::Disconnect | russh::Error::HUP => {
            LoginFailure::Unreachable
        }
        _ => LoginFailure::Other,
    }
}

/// Logs in as `spec.user` (else the local user) with `spec.identity` (else the first of
/// `~/.ssh/id_ed25519`, `id_ecdsa`, `id_rsa` the server takes).
async fn log_in(handle: &mut Handle<HostKeys>, spec: &SshWorker, who: &Who) -> Result<()> {
    let user = match &spec.user {
        Some(user) => user.clone(),
        None => local_user().ok_or_else(|| who.err("no user name: give (user NAME)"))?,
    };
    let mut refused = Vec::new();
    for path in identities(spec) {
        let key = match keys::load_secret_key(&path, None) {
            Ok(key) => Arc::new(key),
            Err(e) if spec.identity.is_some() => {
                let hint = match e {
                    keys::Error::KeyIsEncrypted => {
                        " (a key with a passphrase needs its agent: \
                                                    (client system))"
                    }
                    _ => "",
                };
                let path = path.display();
                return Err(who.err(format!("cannot read identity {path}: {e}{hint}")));
            }
            Err(_) => continue,
        };
        let hash = match key.algorithm().is_rsa() {
            true => handle.best_supported_rsa_hash().await?.flatten(),
            false => None,
        };
        let key = PrivateKeyWithHashAlg::new(key, hash);
        if handle.authenticate_publickey(&user, key).await?.success() {
            return Ok(());
        }
        refused.push(path.display().to_string());
    }
    let said = match refused.is_empty() {
        true => "no usable private key".to_string(),
        false => format!("Permission denied for {}", refused.join(", ")),
    };
    Err(failure(spec, who, LoginFailure::Auth, &said))
}

fn identities(spec: &SshWorker) -> Vec<PathBuf> {
    match (&spec.identity, home()) {
        (Some(path), _) => vec![path.clone()],
        (None, Some(home)) => ["id_ed25519", "id_ecdsa", "id_rsa"]
            .map(|name| home.join(".ssh").join(name))
            .into_iter()
            .filter(|path| path.is_file())
            .collect(),
        (None, None) => Vec::new(),
    }
}

fn local_user() -> Option<String> {
    ["USER", "LOGNAME"]
        .into_iter()
        .find_map(|name| std::env::var(name).ok().filter(|v| !v.is_empty()))
}

impl Builtin {
    /// Starts `argv` on the worker (through its login shell, as `ssh` does: each argument
    /// quoted).
    async fn exec(&self, argv: &[&str]) -> Result<Channel<Msg>, russh::Error> {
        let channel = self.handle.channel_open_session().await?;
        channel.exec(true, command_line(argv)).await?;
        Ok(channel)
    }

    /// Runs `argv` to its end with `stdin` as its standard input.
    pub(super) async fn output(&self, argv: &[&str], stdin: &[u8]) -> Result<Ran, russh::Error> {
        let (mut read, write) = self.exec(argv).await?.split();
        // Read while writing: the connection hands the reader its window updates, and stops
        // for all its channels while one's reader is full.
        let send = async {
            if !stdin.is_empty() {
                write.data(stdin).await?;
            }
            write.eof().await
        };
        let (sent, ran) = tokio::join!(send, read_to_end(&mut read));
        let ran = ran?;
        match (sent, ran.exit.success()) {
            (Err(e), true) => Err(e),
            _ => Ok(ran),
        }
    }

    /// Starts `argv` with its standard streams as pipes.
    pub(super) async fn spawn(&self, argv: &[&str]) -> Result<Spawned, russh::Error> {
        let (mut read, write) = self.exec(argv).await?.split();
        let (stdout, mut out) = tokio::io::simplex(PIPE_BYTES);
        let (stderr, mut err) = tokio::io::simplex(PIPE_BYTES);
        let pump = tokio::spawn(async move {
            while let Some(msg) = read.wait().await {
                let (sink, data): (&mut WriteHalf<SimplexStream>, _) = match msg {
                    ChannelMsg::Data { data } => (&mut out, data),
                    ChannelMsg::ExtendedData { data, ext: 1 } => (&mut err, data),
                    _ => continue,
                };
                // A reader gone (the channel dropped) takes no more; the rest is let go.
                let _ = sink.write_all(&data).await;
            }
            // The halves share one pipe: its end is said, not dropped.
            let _ = tokio::join!(out.shutdown(), err.shutdown());
        });
        Ok(Spawned {
            stdin: Box::new(write.make_writer()),
            stdout: Box::new(stdout),
            stderr: Box::new(stderr),
            keep: Box::new((AbortOnDrop(pump), write)),
        })
    }
}

/// A remote command's output and how it ended.
async fn read_to_end(read: &mut ChannelReadHalf) -> Result<Ran, russh::Error> {
    let (mut stdout, mut stderr, mut exit) = (Vec::new(), Vec::new(), None);
    while let Some(msg) = read.wait().await {
        match msg {
            ChannelMsg::Data { data } => stdout.extend_from_slice(&data),
            ChannelMsg::ExtendedData { data, ext: 1 } => stderr.extend_from_slice(&data),
            ChannelMsg::ExitStatus { exit_status } => exit = Some(Exit::Code(exit_status)),
            ChannelMsg::ExitSignal { signal_name, .. } => {
                exit = Some(Exit::Signal(format!("{signal_name:?}")))
            }
            _ => {}
        }
    }
    // No exit status: the connection ended first.
    let exit = exit.ok_or(russh::Error::Disconnect)?;
    Ok(Ran {
        exit,
        stdout,
        stderr,
    })
}

/// A remote command line from arguments, each quoted for a POSIX shell where it needs to be.
pub(super) fn command_line(argv: &[&str]) -> String {
    let quoted: Vec<Cow<str>> = argv.iter().map(|a| quote(a)).collect();
    quoted.join(" ")
}

fn quote(arg: &str) -> Cow<'_, str> {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-./=:,+@%".contains(c);
    if !arg.is_empty() && arg.chars().all(plain) {
        return Cow::Borrowed(arg);
    }
    Cow::Owned(format!("'{}'", arg.replace('\'', r"'\''")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_quoted_for_the_remote_shell_only_where_needed() {
        let line = command_line(&["dd", "of=a b/.x", "it's", "", "$HOME;rm", "--"]);
        assert_eq!(line, r"dd 'of=a b/.x' 'it'\''s' '' '$HOME;rm' --");
        let out = std::process::Command::new("sh")
            .args([
                "-c",
                &format!("printf '%s\\n' {}", command_line(&["a b", "it's", "$x"])),
            ])
            .output()
            .unwrap();
        assert_eq!(String::from_utf8(out.stdout).unwrap(), "a b\nit's\n$x\n");
    }
}
