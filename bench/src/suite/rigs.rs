//! The rigs some sections run on, each taken down on drop: the loopback SSH
//! daemons of scripts/ssh-rig and the single-node Slurm of scripts/slurm-rig,
//! with the worker entries that point a campaign at them.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Result};
use kiln_protocol::config::SshClient;

use super::Suite;

/// A rig its script brought up (`SCRIPT up DIR ...`), taken down (`SCRIPT down DIR`) on drop.
pub(super) struct ScriptRig {
    script: PathBuf,
    /// The rig's folder.
    pub(super) dir: PathBuf,
}

impl ScriptRig {
    /// The rig, or why it cannot run here (the script exits 77).
    fn up(
        script: &Path,
        dir: &Path,
        args: &[String],
        env: (&str, String),
    ) -> Result<std::result::Result<ScriptRig, String>> {
        let out = Command::new(script)
            .arg("up")
            .arg(dir)
            .args(args)
            .env(env.0, env.1)
            .stdin(Stdio::null())
            .output()?;
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
        if out.status.code() == Some(77) {
            return Ok(Err(stderr));
        }
        // Made before the check, so a rig that came up in part is taken down.
        let rig = ScriptRig {
            script: script.to_path_buf(),
            dir: dir.canonicalize()?,
        };
        if !out.status.success() {
            let name = script.file_name().unwrap_or_default().to_string_lossy();
            bail!("{name} up failed: {stderr}");
        }
        Ok(Ok(rig))
    }

    /// The single-node Slurm of scripts/slurm-rig, or why it cannot run here.
    pub(super) fn slurm(
        script: &Path,
        dir: &Path,
    ) -> Result<std::result::Result<ScriptRig, String>> {
        ScriptRig::up(script, dir, &[], ("SLURM_RIG_PORT", "6997".into()))
    }
}

impl Drop for ScriptRig {
    fn drop(&mut self) {
        let _ = Command::new(&self.script)
            .arg("down")
            .arg(&self.dir)
            .stdin(Stdio::null())
            .status();
    }
}

/// The SSH rig of scripts/ssh-rig: sshd daemons on loopback.
pub(super) struct Rig {
    rig: ScriptRig,
    pub(super) port: u16,
    /// Per daemon: address and pid.
    pub(super) daemons: Vec<(String, i32)>,
}

impl Rig {
    /// `n` daemons from `port` on, or why they cannot run here.
    pub(super) fn up(
        script: &Path,
        dir: &Path,
        n: usize,
        port: u16,
    ) -> Result<std::result::Result<Rig, String>> {
        let rig = match ScriptRig::up(
            script,
            dir,
            &[n.to_string()],
            ("SSH_RIG_PORT", port.to_string()),
        )? {
            Ok(rig) => rig,
            Err(why) => return Ok(Err(why)),
        };
        let dir = rig.dir.clone();
        let mut rig = Rig {
            rig,
            port,
            daemons: Vec::new(),
        };
        for line in fs::read_to_string(dir.join("hosts"))?.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            let pid: i32 = fs::read_to_string(dir.join(format!("d{}/pid", f[0])))?
                .trim()
                .parse()?;
            rig.daemons.push((f[2].to_string(), pid));
        }
        Ok(Ok(rig))
    }

    pub(super) fn pids(&self, n: usize) -> Vec<i32> {
        self.daemons.iter().take(n).map(|d| d.1).collect()
    }

    /// `(ssh ...)` worker entries for the first `n` daemons, connected with `client`.
    pub(super) fn workers(&self, n: usize, slots: u32, label: &str, client: SshClient) -> String {
        let client = client_word(client);
        let mut s = String::new();
        for (k, (addr, _)) in self.daemons.iter().take(n).enumerate() {
            s.push_str(&format!(
                "(ssh (name w{}) (host \"{addr}\") (port {}) (user \"root\") (identity \"{}\") \
                 (known-hosts \"{}\") (rundir \"{}\") (slots {slots}) (client {client}))\n    ",
                k + 1,
                self.port,
                self.rig.dir.join("client_key").display(),
                self.rig.dir.join("known_hosts").display(),
                self.rundir(k + 1, label).display(),
            ));
        }
        s
    }

    /// The folder worker `k` (from 1) of [`Rig::workers`] works in.
    pub(super) fn rundir(&self, k: usize, label: &str) -> PathBuf {
        self.rig.dir.join(format!("rundir-{k}-{label}"))
    }

    pub(super) fn ssh_args(&self) -> Vec<String> {
        vec![
            "-F".into(),
            "/dev/null".into(),
            "-i".into(),
            self.rig.dir.join("client_key").display().to_string(),
            "-o".into(),
            format!(
                "UserKnownHostsFile={}",
                self.rig.dir.join("known_hosts").display()
            ),
            "-o".into(),
            "StrictHostKeyChecking=yes".into(),
            "-o".into(),
            "BatchMode=yes".into(),
            "-o".into(),
            "ControlMaster=no".into(),
            "-o".into(),
            "ControlPath=none".into(),
        ]
    }
}

/// A `(slurm ...)` entry of `nodes` workers `name-K` (one: `name`) of one CPU each on the
/// rig's partition, working in `rundir`.
pub(super) fn slurm_workers(name: &str, nodes: u32, rundir: &Path) -> String {
    format!(
        "(slurm (name {name}) (nodes {nodes}) (partition \"kiln\") (cpus-per-task 1) \
         (rundir \"{}\"))",
        rundir.display()
    )
}

impl Suite {
    /// Brings the SSH rig up once, or notes why it cannot run here.
    pub(super) fn ensure_rig(&mut self) -> Result<()> {
        if self.rig.is_some() || self.rig_skip.is_some() {
            return Ok(());
        }
        let script = self.opts.repo.join("scripts/ssh-rig");
        let dir = self.work.join("rig");
        match Rig::up(&script, &dir, 4, self.opts.rig_port)? {
            Ok(rig) => {
                eprintln!(
                    "  ssh rig: {} daemons on port {}",
                    rig.daemons.len(),
                    rig.port
                );
                self.rig = Some(rig);
            }
            Err(reason) => {
                eprintln!("  no ssh rig: {reason}");
                self.notes
                    .push(format!("SSH comparisons skipped: {reason}"));
                self.rig_skip = Some(reason);
            }
        }
        Ok(())
    }
}

/// A client as the config's `(client ...)` field spells it.
pub(super) fn client_word(client: SshClient) -> &'static str {
    match client {
        SshClient::System => "system",
        SshClient::Builtin => "builtin",
    }
}
