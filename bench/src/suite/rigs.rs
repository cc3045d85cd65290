//! The rigs some sections run on, each taken down on drop: the loopback SSH
//! daemons of scripts/ssh-rig and the single-node Slurm of scripts/slurm-rig,
//! with the worker entries that point a campaign at them.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, Result};

use super::Suite;

/// The SSH rig, taken down on drop.
pub(super) struct Rig {
    script: PathBuf,
    dir: PathBuf,
    pub(super) port: u16,
    /// Per daemon: address and pid.
    pub(super) daemons: Vec<(String, i32)>,
}

impl Rig {
    fn up(
        script: &Path,
        dir: &Path,
        n: usize,
        port: u16,
    ) -> Result<std::result::Result<Rig, String>> {
        let out = Command::new(script)
            .arg("up")
            .arg(dir)
            .arg(n.to_string())
            .env("SSH_RIG_PORT", port.to_string())
            .stdin(Stdio::null())
            .output()?;
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
        if out.status.code() == Some(77) {
            return Ok(Err(stderr));
        }
        let dir = dir.canonicalize()?;
        let mut rig = Rig {
            script: script.to_path_buf(),
            dir: dir.clone(),
            port,
            daemons: Vec::new(),
        };
        if !out.status.success() {
            bail!("ssh-rig up failed: {stderr}");
        }
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

    /// `(ssh ...)` worker entries for the first `n` daemons.
    pub(super) fn workers(&self, n: usize, slots: u32, label: &str) -> String {
        let mut s = String::new();
        for (k, (addr, _)) in self.daemons.iter().take(n).enumerate() {
            s.push_str(&format!(
                "(ssh (name w{}) (host \"{addr}\") (port {}) (user \"root\") (identity \"{}\") \
                 (known-hosts \"{}\") (rundir \"{}\") (slots {slots}))\n    ",
                k + 1,
                self.port,
                self.dir.join("client_key").display(),
                self.dir.join("known_hosts").display(),
                self.dir.join(format!("rundir-{}-{label}", k + 1)).display(),
            ));
        }
        s
    }

    pub(super) fn ssh_args(&self) -> Vec<String> {
        vec![
            "-F".into(),
            "/dev/null".into(),
            "-i".into(),
            self.dir.join("client_key").display().to_string(),
            "-o".into(),
            format!(
                "UserKnownHostsFile={}",
                self.dir.join("known_hosts").display()
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

impl Drop for Rig {
    fn drop(&mut self) {
        let _ = Command::new(&self.script)
            .arg("down")
            .arg(&self.dir)
            .stdin(Stdio::null())
            .status();
    }
}

/// The single-node Slurm of scripts/slurm-rig, taken down on drop.
pub(super) struct SlurmRig {
    script: PathBuf,
    pub(super) dir: PathBuf,
}

impl SlurmRig {
    /// The rig, or why it cannot run here.
    pub(super) fn up(script: &Path, dir: &Path) -> Result<std::result::Result<SlurmRig, String>> {
        let out = Command::new(script)
            .arg("up")
            .arg(dir)
            .env("SLURM_RIG_PORT", "6997")
            .stdin(Stdio::null())
            .output()?;
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
        if out.status.code() == Some(77) {
            return Ok(Err(stderr));
        }
        let rig = SlurmRig {
            script: script.to_path_buf(),
            dir: dir.canonicalize()?,
        };
        if !out.status.success() {
            bail!("slurm-rig up failed: {stderr}");
        }
        Ok(Ok(rig))
    }
}

impl Drop for SlurmRig {
    fn drop(&mut self) {
        let _ = Command::new(&self.script)
            .arg("down")
            .arg(&self.dir)
            .stdin(Stdio::null())
            .status();
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
