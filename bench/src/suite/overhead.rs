//! §1, orchestration overhead: no-op steps through the local worker and 1, 2, 4
//! SSH workers on loopback, serial and in parallel, against the peer's fresh
//! `scp` + `ssh host true` per step.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Result};
use kiln_protocol::config::SshClient;

use super::campaign::noop_config;
use super::writeup::{Page, Target};
use super::Suite;
use crate::report::{self, fmt, ratio, Table};

impl Suite {
    pub(super) fn overhead(&mut self) -> Result<()> {
        self.ensure_rig()?;
        let s = &self.sizes;
        let (tsteps, ssteps, reps) = (s.throughput_steps, s.serial_steps, s.reps);
        // (name, config per version label, daemons)
        let mut configs: Vec<(String, BTreeMap<String, String>, Vec<i32>)> = Vec::new();
        let local = |slots: u32| format!("(local (slots {slots}))");
        let per_version = |f: &dyn Fn(&str) -> String| -> BTreeMap<String, String> {
            self.versions
                .iter()
                .map(|v| (v.label.clone(), f(&v.label)))
                .collect()
        };
        configs.push((
            "local".into(),
            per_version(&|_| noop_config(tsteps, 2, 4, &local(2))),
            vec![],
        ));
        configs.push((
            "serial-local".into(),
            per_version(&|_| noop_config(ssteps, 1, 1, &local(1))),
            vec![],
        ));
        if let Some(rig) = &self.rig {
            for n in [1usize, 2, 4] {
                configs.push((
                    format!("ssh{n}"),
                    per_version(&|l| {
                        noop_config(tsteps, 2, 4, &rig.workers(n, 2, l, SshClient::System))
                    }),
                    rig.pids(n),
                ));
            }
            configs.push((
                "serial-ssh1".into(),
                per_version(&|l| {
                    noop_config(ssteps, 1, 1, &rig.workers(1, 1, l, SshClient::System))
                }),
                rig.pids(1),
            ));
            // Deploy each version's worker once, so no repetition pays for it.
            for v in &self.versions {
                let dir = self.work.join("runs").join(format!("deploy-{}", v.label));
                fs::create_dir_all(dir.join("noop"))?;
                fs::write(dir.join("noop/README"), "noop\n")?;
                fs::write(
                    dir.join("campaign.sexp"),
                    noop_config(10, 1, 1, &rig.workers(4, 2, &v.label, SshClient::System)),
                )?;
                let out = Command::new(v.kiln())
                    .args(["workers", "campaign.sexp"])
                    .current_dir(&dir)
                    .env("KILN_WORKER", v.worker())
                    .stdin(Stdio::null())
                    .output()?;
                if !out.status.success() {
                    bail!(
                        "kiln workers failed: {}",
                        String::from_utf8_lossy(&out.stderr)
                    );
                }
            }
        }
        for rep in 0..reps {
            for (name, texts, daemons) in &configs {
                for v in self.order(rep) {
                    let r = self.campaign(&v, name, &texts[&v.label], daemons)?;
                    self.record_campaign("overhead", name, &v.label, rep, &r);
                }
            }
            if self.rig.is_some() {
                self.peer(rep)?;
            }
        }
        Ok(())
    }

    /// The original design's step: a fresh `scp` of a small file, then a fresh `ssh host true`.
    fn peer(&mut self, rep: usize) -> Result<()> {
        let rig = self.rig.as_ref().expect("rig up");
        let file = self.work.join("peer-payload.bin");
        fs::write(&file, vec![7u8; 4096])?;
        let (addr, _) = &rig.daemons[0];
        let args = rig.ssh_args();
        let mut per_step = Vec::new();
        for _ in 0..self.sizes.peer_steps {
            let t = Instant::now();
            // -O: the classic scp protocol (the rig's daemons have no sftp subsystem).
            let scp = Command::new("scp")
                .args(["-q", "-O"])
                .args(&args)
                .arg("-P")
                .arg(rig.port.to_string())
                .arg(&file)
                .arg(format!("root@{addr}:/tmp/kiln-bench-peer.bin"))
                .stdin(Stdio::null())
                .status()?;
            let ssh = Command::new("ssh")
                .args(&args)
                .arg("-p")
                .arg(rig.port.to_string())
                .arg(format!("root@{addr}"))
                .arg("true")
                .stdin(Stdio::null())
                .status()?;
            if !scp.success() || !ssh.success() {
                bail!("peer step failed (scp {scp}, ssh {ssh})");
            }
            per_step.push(t.elapsed().as_secs_f64());
        }
        let med = report::median(&per_step);
        let total: f64 = per_step.iter().sum();
        let n = per_step.len() as f64;
        self.results.add(
            "overhead",
            "peer-scp-ssh",
            "peer",
            rep,
            "step_ms",
            1e3 * med,
        );
        self.results.add(
            "overhead",
            "peer-scp-ssh",
            "peer",
            rep,
            "steps_per_s",
            n / total,
        );
        eprintln!(
            "  peer (scp + ssh true) rep {rep}: {:.1} ms per step, {:.1} steps/s",
            1e3 * med,
            n / total
        );
        Ok(())
    }

    /// §1 of the report: throughput and serial tables, the peer comparison, and their targets.
    pub(super) fn write_overhead(&self, p: &Page<'_>, o: &mut Vec<u8>) -> Result<Vec<Target>> {
        self.write_overhead_intro(o)?;
        write_throughput_table(p, o)?;
        write_step_counts(p, o)?;
        write_serial_table(p, o)?;
        write_peer_table(p, o)?;
        Ok(overhead_targets(p))
    }

    /// The section's opening paragraph: the no-op benchmark, its runs, and what each column counts.
    fn write_overhead_intro(&self, o: &mut Vec<u8>) -> Result<()> {
        writeln!(
            o,
            "Benchmark `true` as a knobs benchmark (12 knobs × 20 values, random walk, so proposals \
             rarely repeat), `(runs (warmup 0) (min 1) (max 1))`, `check-output none`. Throughput \
             runs: 2 chains × parallel 4, {} steps per chain, 2 slots per worker. Serial runs: 1 chain, \
             parallel 1, 1 slot, {} steps: a step's latency, and its overhead = latency − the measured \
             run of `true`. steps/s counts from the first dispatch to the last decision (the store's \
             timestamps); end to end adds start-up (connecting, probing, 3 baseline runs). Controller \
             CPU = the `kiln` process itself (/proc stat at exit); ctl-side children = ssh clients (SSH) \
             or the local worker and its runs (local); remote = the sshd daemons' trees (sshd, \
             kiln-worker, `true`). Peer: a fresh `scp` of a 4 KiB file then a fresh `ssh host true` \
             per step, sequential, on the same rig.\n",
            self.sizes.throughput_steps, self.sizes.serial_steps
        )?;
        Ok(())
    }
}

/// The results' section of this file's measurements.
const OV: &str = "overhead";

/// The throughput table: steps/s and CPU a step of the local and SSH configurations.
fn write_throughput_table(p: &Page<'_>, o: &mut Vec<u8>) -> Result<()> {
    p.campaign_table(
        "config",
        &[
            ("steps/s", "steps_per_s"),
            ("end-to-end steps/s", "steps_per_s_end_to_end"),
            ("ctl CPU ms/step", "ctl_cpu_ms_per_step"),
            ("ctl-side children CPU ms/step", "children_cpu_ms_per_step"),
            ("remote CPU ms/step", "remote_cpu_ms_per_step"),
            ("ctl cores", "ctl_cores"),
        ],
        &["local", "ssh1", "ssh2", "ssh4"].map(|c| (OV, c, c)),
    )
    .write(o)?;
    Ok(())
}

/// A paragraph of the steps over every run of the section: how many, cached, failed.
fn write_step_counts(p: &Page<'_>, o: &mut Vec<u8>) -> Result<()> {
    let (mut steps, mut cached, mut failed) = (0.0, 0.0, 0.0);
    for row in p.r.rows.iter().filter(|x| x.section == OV) {
        match row.metric.as_str() {
            "steps" => steps += row.value,
            "cached_steps" => cached += row.value,
            "failed_steps" => failed += row.value,
            _ => {}
        }
    }
    writeln!(
        o,
        "Over every run of this section: {steps:.0} steps, {cached:.0} of them reusing an \
         earlier measurement of the same decisions ({:.2} %), {failed:.0} failed.\n",
        100.0 * cached / steps.max(1.0)
    )?;
    Ok(())
}

/// The serial table: a step's latency and overhead, one step in flight.
fn write_serial_table(p: &Page<'_>, o: &mut Vec<u8>) -> Result<()> {
    p.campaign_table(
        "serial config",
        &[
            ("step latency ms", "step_ms"),
            ("run of `true` ms", "run_ms"),
            ("overhead ms/step", "overhead_ms"),
            ("ctl CPU ms/step", "ctl_cpu_ms_per_step"),
        ],
        &["serial-local", "serial-ssh1"].map(|c| (OV, c, c)),
    )
    .write(o)?;
    Ok(())
}

/// The table against the peer's `scp` + `ssh host true`, when the peer ran.
fn write_peer_table(p: &Page<'_>, o: &mut Vec<u8>) -> Result<()> {
    let (r, after) = (p.r, p.after);
    let peer_ms = r.median(OV, "peer-scp-ssh", "peer", "step_ms");
    let peer_rate = r.median(OV, "peer-scp-ssh", "peer", "steps_per_s");
    if peer_ms.is_none() {
        return Ok(());
    }
    let mut t = Table::new(&[
        "vs peer (scp + ssh true per step)",
        "peer",
        "kiln",
        "kiln / peer",
    ]);
    t.row(vec![
        "per-step time, serial, 1 SSH worker (ms)".into(),
        fmt(peer_ms),
        fmt(r.median(OV, "serial-ssh1", after, "step_ms")),
        ratio(peer_ms, r.median(OV, "serial-ssh1", after, "step_ms")).replace('×', "× faster"),
    ]);
    for c in ["ssh1", "ssh2", "ssh4"] {
        t.row(vec![
            format!("throughput, {c} (steps/s)"),
            fmt(peer_rate),
            fmt(r.median(OV, c, after, "steps_per_s")),
            ratio(r.median(OV, c, after, "steps_per_s"), peer_rate),
        ]);
    }
    t.write(o)?;
    Ok(())
}

/// The section's targets: local throughput, SSH overhead a step, and throughput against the peer.
fn overhead_targets(p: &Page<'_>) -> Vec<Target> {
    let (r, after) = (p.r, p.after);
    let local = r.median(OV, "local", after, "steps_per_s");
    let ssh_over = r.median(OV, "serial-ssh1", after, "overhead_ms");
    let ssh1 = r.median(OV, "ssh1", after, "steps_per_s");
    let peer_rate = r.median(OV, "peer-scp-ssh", "peer", "steps_per_s");
    let x = ssh1.zip(peer_rate).map(|(a, b)| a / b);
    vec![
        (
            "≥ 500 no-op steps/s through the local worker".into(),
            fmt(local),
            p.pair(OV, "local", "steps_per_s"),
            local.map(|v| v >= 500.0),
        ),
        (
            "< 5 ms orchestration overhead per step over SSH".into(),
            fmt(ssh_over),
            p.pair(OV, "serial-ssh1", "overhead_ms"),
            ssh_over.map(|v| v < 5.0),
        ),
        (
            "≥ 50 × the peer's per-step throughput (1 SSH worker)".into(),
            x.map_or("—".into(), |x| format!("{x:.0}×")),
            format!("kiln {} steps/s vs peer {}", fmt(ssh1), fmt(peer_rate)),
            x.map(|v| v >= 50.0),
        ),
    ]
}
