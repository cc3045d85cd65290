//! §5, Slurm workers (scripts/slurm-rig): no-op steps through a Slurm worker
//! against the local worker, and the time from `scancel` of a worker's job
//! mid-step to the step's re-dispatch.

use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Result};

use super::campaign::noop_config;
use super::rigs::{slurm_workers, ScriptRig};
use super::writeup::{Page, Target};
use super::{first_line, Suite, Version};
use crate::report::{fmt, Table};

impl Suite {
    /// Slurm workers (the version under test only: older builds have none) on a single-node
    /// Slurm (scripts/slurm-rig): serial no-op steps through one Slurm worker and through the
    /// local worker, interleaved; then, per repetition, `scancel` of a worker's job mid-step
    /// and the time until the controller re-queues the step and another worker runs it.
    pub(super) fn slurm(&mut self) -> Result<()> {
        let dir = self.work.join("slurm-rig");
        let script = self.opts.repo.join("scripts/slurm-rig");
        let rig = ScriptRig::slurm(&script, &dir)?;
        let Ok(rig) = rig else {
            let reason = rig.err().unwrap_or_default();
            eprintln!("  no slurm rig: {reason}");
            self.notes
                .push(format!("Slurm comparisons skipped: {reason}"));
            return Ok(());
        };
        // kiln and its srun find the rig through it.
        std::env::set_var("SLURM_CONF", rig.dir.join("slurm.conf"));
        let v = self.versions[0].clone();
        let rundir = rig.dir.join("rundir");
        let steps = self.sizes.serial_steps;
        for rep in 0..self.sizes.reps {
            for (name, workers) in [
                ("serial-local", "(local (slots 1))".to_string()),
                ("serial-slurm", slurm_workers("s", 1, &rundir)),
            ] {
                let r = self.campaign(&v, name, &noop_config(steps, 1, 1, &workers), &[])?;
                self.record_campaign("slurm", name, &v.label, rep, &r);
            }
            let (requeue, rerun) = self.scancel_mid_step(&v, &rundir)?;
            eprintln!(
                "  scancel rep {rep}: re-queued after {:.0} ms, running again after {:.0} ms",
                1e3 * requeue,
                1e3 * rerun
            );
            let res = &mut self.results;
            res.add(
                "slurm",
                "scancel",
                &v.label,
                rep,
                "requeue_ms",
                1e3 * requeue,
            );
            res.add("slurm", "scancel", &v.label, rep, "rerun_ms", 1e3 * rerun);
        }
        Ok(())
    }

    /// A campaign of 2 s steps, one at a time, on two Slurm workers `c-1`, `c-2` working in
    /// `rundir`: cancels the job of the worker running the first step; seconds from the
    /// `scancel` until the controller's log says the step was re-queued, and until the other
    /// worker runs it.
    fn scancel_mid_step(&self, v: &Version, rundir: &Path) -> Result<(f64, f64)> {
        let dir = self.fresh_run_dir(v, "scancel")?;
        fs::write(
            dir.join("noop/run.sh"),
            "touch running\nsleep 2\nrm -f running\n",
        )?;
        let config = noop_config(3, 1, 1, &slurm_workers("c", 2, rundir))
            .replace("(run (\"true\"))", "(run (\"sh\" \"run.sh\"))");
        fs::write(dir.join("campaign.sexp"), config)?;
        let mut child = Command::new(v.kiln())
            .args(["run", "campaign.sexp"])
            .current_dir(&dir)
            .env("KILN_WORKER", v.worker())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let result = (|| {
            let marker = |k: u32| rundir.join(format!("c-{k}/slots/0/work/running"));
            let deadline = Instant::now() + std::time::Duration::from_secs(120);
            // The baseline's 3 runs come first: wait for a step (any run after them).
            let busy = loop {
                if let Some(k) = (1..=2).find(|k| marker(*k).exists()) {
                    break k;
                }
                if Instant::now() > deadline {
                    bail!("no Slurm worker started a step within 120 s");
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            };
            let job = first_line(
                "squeue",
                &["-h", "-n", &format!("kiln-c-{busy}"), "-o", "%i"],
            );
            let cancelled = Instant::now();
            let status = Command::new("scancel").arg(&job).status()?;
            if !status.success() {
                bail!("scancel {job} failed: {status}");
            }
            let log = dir.join("store/kiln.log");
            let needle = format!("worker=c-{busy}");
            let (mut requeue, other) = (None, marker(3 - busy));
            loop {
                if requeue.is_none()
                    && fs::read_to_string(&log)
                        .unwrap_or_default()
                        .lines()
                        .any(|l| l.contains("re-queued") && l.contains(&needle))
                {
                    requeue = Some(cancelled.elapsed().as_secs_f64());
                }
                if let (Some(q), true) = (requeue, other.exists()) {
                    return Ok((q, cancelled.elapsed().as_secs_f64()));
                }
                if Instant::now() > deadline {
                    bail!("the cancelled step was not run again within 120 s");
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        })();
        let _ = child.wait();
        result
    }

    /// §5 of the report: a Slurm worker's overhead and the re-dispatch after `scancel`.
    pub(super) fn write_slurm(&self, p: &Page<'_>, o: &mut Vec<u8>) -> Result<Vec<Target>> {
        let (r, after) = (p.r, p.after);
        let sl = "slurm";
        writeln!(
            o,
            "A single-node Slurm (scripts/slurm-rig) on this machine, {after} only. Serial no-op \
             runs as in §1 ({} steps, 1 chain, 1 slot) through one Slurm worker (`srun` on this \
             machine, one CPU) and through the local worker, interleaved; overhead = step latency \
             − the measured run of `true`. scancel: a campaign of 2 s steps on two Slurm workers, \
             one step at a time; the job of the worker running a step is cancelled, and the time \
             is taken until the controller's log says the step was re-queued, and until the other \
             worker runs it.\n",
            self.sizes.serial_steps
        )?;
        let mut t = Table::new(&[
            "serial config",
            "step latency ms",
            "run of `true` ms",
            "overhead ms/step",
            "ctl CPU ms/step",
        ]);
        for c in ["serial-local", "serial-slurm"] {
            let m = |metric: &str| fmt(r.median(sl, c, after, metric));
            t.row(vec![
                c.into(),
                m("step_ms"),
                m("run_ms"),
                m("overhead_ms"),
                m("ctl_cpu_ms_per_step"),
            ]);
        }
        t.write(o)?;
        let over = |c: &str| r.median(sl, c, after, "overhead_ms");
        let extra = over("serial-slurm")
            .zip(over("serial-local"))
            .map(|(s, l)| s - l);
        let mut t = Table::new(&["Slurm worker", "ms"]);
        t.row(vec![
            "overhead per step over the local worker's".into(),
            fmt(extra),
        ]);
        t.row(vec![
            "scancel → step re-queued".into(),
            fmt(r.median(sl, "scancel", after, "requeue_ms")),
        ]);
        t.row(vec![
            "scancel → step running on the other worker".into(),
            fmt(r.median(sl, "scancel", after, "rerun_ms")),
        ]);
        t.write(o)?;
        Ok(Vec::new())
    }
}
