//! SSH workers against real `sshd` daemons (scripts/ssh-rig), the real `ssh` client and the real
//! `kiln-worker` binary.
//!
//! Every test starts its own rig (its own port, or its own namespaces) in
//! `$TMPDIR/kiln-ssh-test-<name>`; a [`Rig`] guard runs `ssh-rig down` on drop, so daemons and
//! namespaces go away also when a test fails (a stale rig of a killed run is taken down by the
//! next `up` in the same folder). Where the rig cannot run (not root, no /usr/sbin/sshd, no network
//! namespaces) a test is reported skipped, with the rig's reason.
//!
//! The worker binary is [`crate::common::worker`]'s.
//!
//! Targets are only 127.0.0.x and the link-local addresses of the rig's own namespaces.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use kiln_controller::dispatch::ssh::{
    open_ssh, server_alive_interval, SshConnect, SERVER_ALIVE_COUNT_MAX,
};
use kiln_protocol::config::{HostKeyCheck, SshClient, SshWorker};
use kiln_protocol::frame::{read_frame_async, write_frame_async, MAX_FRAME};
use kiln_protocol::gpu_trace::INJECTION_LIBRARY;
use kiln_protocol::{Request, Response, PROTOCOL_VERSION};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::timeout;

use crate::common::{rig_ctl, rig_down, rig_script, skip, SKIP};

const CONNECT: Duration = Duration::from_secs(8);

/// One daemon of a rig.
#[derive(Debug, Clone)]
struct Host {
    name: String,
    addr: String,
    port: u16,
    netns: Option<String>,
}

/// A running rig; `ssh-rig down` on drop.
struct Rig {
    /// The client every spec of this rig connects with.
    client: SshClient,
    dir: PathBuf,
    hosts: Vec<Host>,
    /// A private copy of kiln-worker (a concurrent `cargo build` may replace the original).
    worker: PathBuf,
}

impl Rig {
    /// Starts `n` daemons (`ssh-rig up`, or `netns-up` with `netns = Some((prefix, octet))`)
    /// for `client`; `None` (the test skipped) where a rig cannot run here. The builtin client's
    /// rigs take ports 50 above, their own namespaces and folders, so both run at once.
    fn up(
        client: SshClient,
        test: &str,
        n: usize,
        port: u16,
        netns: Option<(&str, u8)>,
    ) -> Option<Rig> {
        init_tracing();
        let (test, port, netns) = match client {
            SshClient::System => (
                test.to_string(),
                port,
                netns.map(|(p, o)| (p.to_string(), o)),
            ),
            SshClient::Builtin => (
                format!("{test}-builtin"),
                port + 50,
                netns.map(|(p, o)| (format!("{p}b"), o + 20)),
            ),
        };
        let netns = netns.as_ref().map(|(p, o)| (p.as_str(), *o));
        let dir = std::env::temp_dir().join(format!("kiln-ssh-test-{test}"));
        let mut cmd = Command::new(rig_script());
        cmd.arg(if netns.is_some() { "netns-up" } else { "up" })
            .arg(&dir)
            .arg(n.to_string())
            .env("SSH_RIG_PORT", port.to_string());
        if let Some((prefix, octet)) = netns {
            cmd.env("SSH_RIG_NS_PREFIX", prefix)
                .env("SSH_RIG_NET", octet.to_string());
        }
        let t = Instant::now();
        let out = cmd.output().expect("cannot run scripts/ssh-rig");
        let stderr = String::from_utf8_lossy(&out.stderr);
        if out.status.code() == Some(SKIP) {
            skip(stderr);
            return None;
        }
        // From here on the guard cleans up, whatever happens.
        let worker = dir.join("kiln-worker.local");
        let mut rig = Rig {
            client,
            dir,
            hosts: vec![],
            worker,
        };
        assert!(out.status.success(), "ssh-rig up failed: {stderr}");
        std::fs::copy(crate::common::worker(), &rig.worker).unwrap();
        let hosts = std::fs::read_to_string(rig.dir.join("hosts")).unwrap();
        for line in hosts.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            rig.hosts.push(Host {
                name: f[1].into(),
                addr: f[2].into(),
                port: f[3].parse().unwrap(),
                netns: (f[4] != "-").then(|| f[4].to_string()),
            });
        }
        assert_eq!(rig.hosts.len(), n);
        eprintln!(
            "{test}: rig of {n} up in {:.2} s",
            t.elapsed().as_secs_f64()
        );
        Some(rig)
    }

    /// `ssh-rig VERB DIR K`.
    fn ctl(&self, verb: &str, k: usize) {
        rig_ctl(&self.dir, verb, k);
    }

    fn known_hosts(&self) -> PathBuf {
        self.dir.join("known_hosts")
    }

    /// A strict-checking spec for daemon `k` (1-based) with its own rundir under the rig.
    fn spec(&self, k: usize) -> SshWorker {
        let h = &self.hosts[k - 1];
        SshWorker {
            name: format!("test-{}", h.name),
            host: h.addr.clone(),
            user: Some("root".into()),
            port: h.port,
            identity: Some(self.dir.join("client_key")),
            known_hosts: Some(self.known_hosts()),
            host_key_check: HostKeyCheck::Strict,
            client: self.client,
            rundir: self.dir.join(format!("rundir-{k}")).display().to_string(),
            slots: 1,
            cpus: vec![],
            gpus: Vec::new(),
            worker_binary: None,
        }
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        rig_down(&self.dir);
    }
}

/// Logs of kiln (`KILN_LOG`, default: ssh at debug) into the test's captured output.
fn init_tracing() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        let filter = tracing_subscriber::EnvFilter::try_from_env("KILN_LOG").unwrap_or_else(|_| {
            tracing_subscriber::EnvFilter::new(
                "kiln_controller::dispatch::ssh=debug,kiln::worker=info",
            )
        });
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_test_writer()
            .with_ansi(false)
            .try_init();
    });
}

/// SHA-256 by coreutils' sha256sum (an implementation independent of ours).
fn file_sha256(p: &Path) -> String {
    let out = Command::new("sha256sum").arg(p).output().unwrap();
    assert!(out.status.success());
    String::from_utf8(out.stdout).unwrap()[..64].to_string()
}

fn same_content(a: &Path, b: &Path) -> bool {
    std::fs::read(a).unwrap() == std::fs::read(b).unwrap()
}

async fn connect(rig: &Rig, spec: &SshWorker) -> anyhow::Result<SshConnect> {
    match timeout(
        Duration::from_secs(60),
        open_ssh(spec, CONNECT, &rig.worker),
    )
    .await
    {
        Ok(r) => r,
        Err(_) => panic!("open_ssh to {} hangs", spec.name),
    }
}

fn err_text<T>(r: anyhow::Result<T>) -> String {
    match r {
        Ok(_) => panic!("expected an error"),
        Err(e) => format!("{e:#}"),
    }
}

async fn deploys_once_then_reuses(client: SshClient) {
    let Some(rig) = Rig::up(client, "deploy", 1, 2301, None) else {
        return;
    };
    let spec = rig.spec(1);
    let local = &rig.worker;
    let remote = Path::new(&spec.rundir).join("kiln-worker");
    assert!(!remote.exists());
    // An injection library beside the local binary travels with it.
    let library = local.with_file_name(INJECTION_LIBRARY);
    std::fs::write(&library, b"stands in for libkiln_cupti.so").unwrap();
    let remote_library = Path::new(&spec.rundir).join(INJECTION_LIBRARY);

    let t = Instant::now();
    let first = connect(&rig, &spec).await.unwrap();
    eprintln!("first connect (upload) {:.2} s", t.elapsed().as_secs_f64());
    assert!(
        first.uploaded,
        "a worker without kiln-worker gets it uploaded"
    );
    assert_eq!(
        first.channel.address,
        format!("root@{}:{}", rig.hosts[0].addr, spec.port)
    );
    // The rig's daemons run on this machine: the remote file is a local file.
    assert!(same_content(&remote, local));
    assert!(same_content(&remote_library, &library));
    assert_eq!(first.worker_sha256, file_sha256(&remote));
    use std::os::unix::fs::PermissionsExt;
    assert_ne!(
        std::fs::metadata(&remote).unwrap().permissions().mode() & 0o111,
        0
    );
    drop(first);

    let t = Instant::now();
    let second = connect(&rig, &spec).await.unwrap();
    eprintln!(
        "second connect (no upload) {:.2} s",
        t.elapsed().as_secs_f64()
    );
    assert!(!second.uploaded, "an up-to-date kiln-worker is reused");
    drop(second);

    // A different file in place is replaced (unlinked first: the old one may still be running).
    std::fs::remove_file(&remote).unwrap();
    std::fs::write(&remote, b"not the worker").unwrap();
    std::fs::write(&remote_library, b"stale").unwrap();
    let third = connect(&rig, &spec).await.unwrap();
    assert!(third.uploaded);
    assert!(same_content(&remote, local));
    assert!(same_content(&remote_library, &library));
    drop(third);

    // No temporary upload files are left behind.
    let leftovers: Vec<_> = std::fs::read_dir(&spec.rundir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n != "kiln-worker")
        .collect();
    assert!(
        leftovers.iter().all(|n| !n.contains("upload")),
        "{leftovers:?}"
    );
}

async fn hello_over_the_channel(client: SshClient) {
    let Some(rig) = Rig::up(client, "hello", 1, 2302, None) else {
        return;
    };
    let mut c = connect(&rig, &rig.spec(1)).await.unwrap().channel;
    let hello = Request::Hello {
        protocol_version: PROTOCOL_VERSION,
        controller_version: env!("CARGO_PKG_VERSION").into(),
    };
    write_frame_async(&mut c.writer, &hello).await.unwrap();
    let reply: Response = timeout(
        Duration::from_secs(20),
        read_frame_async(&mut c.reader, MAX_FRAME),
    )
    .await
    .expect("no reply to Hello within 20 s")
    .expect("kiln-worker serve answers Hello over SSH");
    match reply {
        Response::Hello {
            protocol_version, ..
        } => assert_eq!(protocol_version, PROTOCOL_VERSION),
        other => panic!("expected Hello, got {other:?}"),
    }
}

async fn changed_host_key_is_refused(client: SshClient) {
    let Some(rig) = Rig::up(client, "hostkey", 1, 2303, None) else {
        return;
    };
    let spec = rig.spec(1);
    drop(
        connect(&rig, &spec)
            .await
            .expect("the recorded key is accepted"),
    );
    let before = std::fs::read_to_string(rig.known_hosts()).unwrap();

    rig.ctl("rekey", 1);
    let t = Instant::now();
    let e = err_text(connect(&rig, &spec).await);
    eprintln!("refused in {:.2} s: {e}", t.elapsed().as_secs_f64());
    assert!(
        e.contains("test-w1") && e.contains("127.0.0.2"),
        "names worker and host: {e}"
    );
    assert!(e.contains("CHANGED"), "says the key changed: {e}");

    // accept-new does not accept a changed key either.
    let mut relaxed = spec.clone();
    relaxed.host_key_check = HostKeyCheck::AcceptNew;
    assert!(err_text(connect(&rig, &relaxed).await).contains("CHANGED"));
    assert_eq!(
        std::fs::read_to_string(rig.known_hosts()).unwrap(),
        before,
        "known_hosts untouched"
    );
}

async fn unknown_host_strict_refused_accept_new_added(client: SshClient) {
    let Some(rig) = Rig::up(client, "unknown", 1, 2304, None) else {
        return;
    };
    let kh = rig.dir.join("known_hosts.new");
    std::fs::write(&kh, "").unwrap();
    let mut spec = rig.spec(1);
    spec.known_hosts = Some(kh.clone());

    let e = err_text(connect(&rig, &spec).await);
    assert!(e.contains("test-w1") && e.contains("127.0.0.2"), "{e}");
    assert!(e.contains("unknown") && e.contains("strict"), "{e}");
    assert_eq!(std::fs::read_to_string(&kh).unwrap(), "");

    spec.host_key_check = HostKeyCheck::AcceptNew;
    drop(
        connect(&rig, &spec)
            .await
            .expect("accept-new accepts an unknown host"),
    );
    let added = std::fs::read_to_string(&kh).unwrap();
    let rig_line = std::fs::read_to_string(rig.known_hosts()).unwrap();
    let key = rig_line.split_whitespace().nth(2).unwrap();
    assert!(
        added.lines().any(|l| {
            l.starts_with(&format!("[127.0.0.2]:{} ssh-ed25519 ", spec.port)) && l.contains(key)
        }),
        "the host's key is added to the given known_hosts: {added:?}"
    );

    spec.host_key_check = HostKeyCheck::Strict;
    drop(
        connect(&rig, &spec)
            .await
            .expect("strict accepts it once recorded"),
    );
}

/// A new Ed25519 key in the rig's folder, protected by `passphrase` unless it is empty.
fn new_key(rig: &Rig, name: &str, passphrase: &str) -> PathBuf {
    let key = rig.dir.join(name);
    let st = Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", passphrase, "-f"])
        .arg(&key)
        .status()
        .unwrap();
    assert!(st.success());
    key
}

async fn auth_failure_unreachable_and_check_off(client: SshClient) {
    let Some(rig) = Rig::up(client, "auth", 1, 2305, None) else {
        return;
    };
    let mut spec = rig.spec(1);
    spec.identity = Some(new_key(&rig, "other_key", ""));
    let e = err_text(connect(&rig, &spec).await);
    assert!(
        e.contains("test-w1") && e.contains("127.0.0.2") && e.contains("authentication failed"),
        "{e}"
    );

    // kiln's own client reads no agent: a key with a passphrase is refused, saying so.
    if client == SshClient::Builtin {
        let mut spec = rig.spec(1);
        spec.identity = Some(new_key(&rig, "locked_key", "a passphrase"));
        let e = err_text(connect(&rig, &spec).await);
        assert!(e.contains("locked_key") && e.contains("passphrase"), "{e}");
    }

    // Nothing listens on this port.
    let mut spec = rig.spec(1);
    spec.port = 2399;
    let t = Instant::now();
    let e = err_text(connect(&rig, &spec).await);
    assert!(e.contains("unreachable") && e.contains("127.0.0.2"), "{e}");
    assert!(t.elapsed() < CONNECT * 2, "refused quickly");

    // host-key-check off: no known_hosts needed, none written.
    let kh = rig.dir.join("known_hosts.off");
    std::fs::write(&kh, "").unwrap();
    let mut spec = rig.spec(1);
    spec.known_hosts = Some(kh.clone());
    spec.host_key_check = HostKeyCheck::Off;
    drop(
        connect(&rig, &spec)
            .await
            .expect("off connects to an unknown host"),
    );
    assert_eq!(std::fs::read_to_string(&kh).unwrap(), "");
}

async fn cut_link_ends_the_channel_and_reconnect_works(client: SshClient) {
    let Some(rig) = Rig::up(client, "netns", 1, 2306, Some(("ks6w", 206))) else {
        return;
    };
    assert!(rig.hosts[0].netns.is_some());
    // An echo "worker" (uploaded as SshWorker::worker_binary, which is what another platform's
    // build would use) so that the channel stays open and quiet whatever `serve` does.
    let echo = rig.dir.join("echo-worker");
    std::fs::write(&echo, "#!/bin/sh\nexec cat\n").unwrap();
    let mut spec = rig.spec(1);
    spec.worker_binary = Some(echo.clone());

    let mut c = connect(&rig, &spec).await.unwrap().channel;
    c.writer.write_all(b"ping\n").await.unwrap();
    c.writer.flush().await.unwrap();
    let mut buf = [0u8; 5];
    timeout(Duration::from_secs(10), c.reader.read_exact(&mut buf))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&buf, b"ping\n");

    rig.ctl("cut", 1);
    let t = Instant::now();
    let mut one = [0u8; 1];
    let read = timeout(Duration::from_secs(30), c.reader.read(&mut one)).await;
    let waited = t.elapsed();
    let bound =
        server_alive_interval(CONNECT) * (SERVER_ALIVE_COUNT_MAX + 1) + Duration::from_secs(3);
    eprintln!(
        "read after cut ended after {:.2} s ({read:?}); bound {:.0} s",
        waited.as_secs_f64(),
        bound.as_secs_f64()
    );
    match read {
        Ok(Ok(0)) | Ok(Err(_)) => {}
        Ok(Ok(n)) => panic!("read {n} bytes from a cut link"),
        Err(_) => panic!("read on a cut link still pending after 30 s"),
    }
    assert!(
        waited < bound.min(Duration::from_secs(15)),
        "cut noticed in {waited:?}"
    );
    drop(c);

    // While cut, a new connection is refused as unreachable.
    let t = Instant::now();
    let e = err_text(connect(&rig, &spec).await);
    eprintln!(
        "connect while cut failed after {:.2} s: {e}",
        t.elapsed().as_secs_f64()
    );
    assert!(e.contains("unreachable"), "{e}");

    rig.ctl("heal", 1);
    let t = Instant::now();
    let again = connect(&rig, &spec)
        .await
        .expect("reconnects once the link is back");
    eprintln!("reconnect after heal {:.2} s", t.elapsed().as_secs_f64());
    assert!(!again.uploaded);
    let mut c = again.channel;
    c.writer.write_all(b"pong\n").await.unwrap();
    c.writer.flush().await.unwrap();
    timeout(Duration::from_secs(10), c.reader.read_exact(&mut buf))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&buf, b"pong\n");
}

/// Every test above, once with each SSH client.
macro_rules! with_each_client {
    ($($test:ident),* $(,)?) => {
        mod system {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $test() {
                super::$test(super::SshClient::System).await
            })*
        }
        mod builtin {
            $(#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $test() {
                super::$test(super::SshClient::Builtin).await
            })*
        }
    };
}

with_each_client!(
    deploys_once_then_reuses,
    hello_over_the_channel,
    changed_host_key_is_refused,
    unknown_host_strict_refused_accept_new_added,
    auth_failure_unreachable_and_check_off,
    cut_link_ends_the_channel_and_reconnect_works,
);
