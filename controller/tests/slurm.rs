//! Slurm workers against a real single-node Slurm (scripts/slurm-rig): a campaign on two Slurm
//! workers follows the same trajectory as on two local workers, `scancel` of a worker's job
//! mid-step loses and doubles nothing (the worker comes back in a new allocation), and an
//! allocation that can never start stops the campaign with Slurm's reason.
//!
//! Every test starts its own rig in `$TMPDIR/kiln-slurm-test-<name>` (its own slurmctld port);
//! the [`SlurmRig`] guard runs `slurm-rig down` on drop, also when the test fails. Where the rig
//! cannot run here (not root, Slurm or munge not installed) the test is reported skipped, with the
//! rig's reason.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use crate::common::campaign::*;
use crate::common::*;
use kiln_controller::store::now_ms;

/// A running single-node Slurm; `slurm-rig down` on drop.
struct SlurmRig {
    dir: PathBuf,
}

impl SlurmRig {
    /// Starts the rig with slurmctld on `port`; `None` (the test skipped) where it cannot run
    /// here.
    fn up(test: &str, port: u16) -> Option<SlurmRig> {
        let dir = std::env::temp_dir().join(format!("kiln-slurm-test-{test}"));
        let out = Command::new(repo().join("scripts/slurm-rig"))
            .arg("up")
            .arg(&dir)
            .env("SLURM_RIG_PORT", port.to_string())
            .output()
            .expect("cannot run scripts/slurm-rig");
        let stderr = String::from_utf8_lossy(&out.stderr);
        if out.status.code() == Some(SKIP) {
            skip(stderr);
            return None;
        }
        // From here on the guard cleans up, whatever happens.
        let rig = SlurmRig { dir };
        assert!(out.status.success(), "slurm-rig up failed: {stderr}");
        Some(rig)
    }

    /// `cmd` (kiln, or a Slurm command) pointed at the rig; kiln passes it on to its sbatch,
    /// srun and scancel. Set on each command, not on this process: other modules' tests run in
    /// this process too, and would see it (or race with its setting).
    fn point(&self, mut cmd: Command) -> Command {
        cmd.env("SLURM_CONF", self.dir.join("slurm.conf"));
        cmd
    }

    /// Runs `kiln ARGS` in `dir`, pointed at the rig.
    fn run_kiln(&self, dir: &Path, args: &[&str]) -> Output {
        self.point(kiln_cmd(dir))
            .args(args)
            .output()
            .expect("kiln runs")
    }

    /// The `(workers ...)` field: `nodes` Slurm workers `s-1`.. of one slot and one CPU each,
    /// deploying to a rundir under the rig's folder, plus `extra` fields.
    fn workers_field(&self, nodes: u32, extra: &str) -> String {
        format!(
            "(workers (slurm (name s) (nodes {nodes}) (partition \"kiln\") (cpus-per-task 1) \
             (rundir \"{}\") {extra}))",
            self.rundir().display()
        )
    }

    fn rundir(&self) -> PathBuf {
        self.dir.join("rundir")
    }
}

impl Drop for SlurmRig {
    fn drop(&mut self) {
        let status = Command::new(repo().join("scripts/slurm-rig"))
            .arg("down")
            .arg(&self.dir)
            .status();
        if !matches!(status, Ok(s) if s.success()) {
            eprintln!("slurm-rig down {} failed: {status:?}", self.dir.display());
        }
    }
}

/// Worker `name`'s Slurm job id in the snapshot, once it has one.
fn job_id(dir: &Path, name: &str) -> Option<u64> {
    worker_row(dir, name)?["slurm_job"]["id"].as_u64()
}

#[test]
fn a_campaign_on_two_slurm_workers_follows_the_same_trajectory_as_on_local_workers() {
    let _serial = serial();
    if !have_valgrind() {
        return skip("valgrind is not installed (callgrind is the deterministic objective)");
    }
    let Some(rig) = SlurmRig::up("trajectory", 6917) else {
        return;
    };
    let run = |workers: &str| {
        let dir = tempfile::tempdir().unwrap();
        copy_benchmark("synthetic", dir.path());
        let config = synthetic_config_on(12, 5, 2, workers);
        std::fs::write(dir.path().join("campaign.sexp"), config).unwrap();
        let out = rig.run_kiln(dir.path(), &["run", "campaign.sexp"]);
        assert!(out.status.success(), "{}", text(&out));
        dir
    };
    let local = run("(workers (local (name l1)) (local (name l2)))");
    let t = Instant::now();
    let slurm = run(&rig.workers_field(2, ""));
    eprintln!(
        "12 steps on 2 Slurm workers in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let steps = assert_every_step_once(slurm.path(), 12);
    assert_eq!(
        trajectory(&steps),
        trajectory(&stored_steps(local.path())),
        "the Slurm campaign diverged"
    );
    for name in ["s-1", "s-2"] {
        assert!(
            steps.iter().any(|s| s.worker == name),
            "no step ran on {name}"
        );
        let row = worker_row(slurm.path(), name).unwrap();
        assert!(row["slurm_job"]["id"].as_u64().is_some(), "{row}");
    }

    // `kiln workers` shows each worker's job, running.
    let table = rig.run_kiln(slurm.path(), &["workers", "campaign.sexp"]);
    let shown = text(&table);
    assert!(table.status.success(), "{shown}");
    for name in ["s-1", "s-2"] {
        let line = shown
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no line for {name}:\n{shown}"));
        let words: Vec<&str> = line.split_whitespace().collect();
        let at = words.iter().position(|w| *w == "running").expect(line);
        assert!(words[at - 1].parse::<u64>().is_ok(), "no job id: {line}");
    }
}

#[test]
fn scancel_of_a_workers_job_mid_step_loses_and_doubles_nothing() {
    let _serial = serial();
    let Some(rig) = SlurmRig::up("scancel", 6927) else {
        return;
    };
    let search = "(random-walk (steps 20) (flips 1))";
    let dir = campaign_dir(&campaign_config(
        search,
        3,
        3,
        &rig.workers_field(2, ""),
        "",
    ));
    let d = dir.path();
    let child = spawn_campaign(rig.point(kiln_cmd(d)), d);
    let marker = rig.rundir().join("s-1/slots/0/work/running");
    wait_for(
        "4 decided steps and s-1 mid-step",
        d,
        Duration::from_secs(90),
        || decided(d) >= 4 && marker.exists() && job_id(d, "s-1").is_some(),
    );
    let job = job_id(d, "s-1").unwrap();
    let cancelled_ms = now_ms();
    let out = rig
        .point(Command::new("scancel"))
        .arg(job.to_string())
        .output()
        .unwrap();
    assert!(out.status.success(), "scancel {job}: {out:?}");
    wait_for("s-1 lost", d, Duration::from_secs(30), || {
        worker_row(d, "s-1").is_some_and(|w| w["losses"].as_u64() >= Some(1))
    });
    wait_for(
        "s-1 in a new allocation",
        d,
        Duration::from_secs(60),
        || job_id(d, "s-1").is_some_and(|id| id != job),
    );
    finish_campaign(child, d, Duration::from_secs(180));

    let steps = assert_every_step_once(d, 60);
    let log = std::fs::read_to_string(d.join("store/kiln.log")).unwrap();
    // s-1's step goes back on the queue: re-queued by the pool when the
    // connection drops first, or redone by the campaign when the worker's
    // answer (cancelled, on the SIGTERM that Slurm sends) arrives first.
    let redone = log
        .lines()
        .any(|l| l.contains("kiln_controller::campaign") && l.ends_with(": cancelled"));
    assert!(
        requeued_from(d, "s-1") || redone,
        "s-1's step was not re-queued\n{}",
        diagnostics(d)
    );
    assert!(
        log.contains(&format!("Slurm job {job} ended")),
        "the loss does not name the job\n{}",
        diagnostics(d)
    );
    let after = measured_by_since(&steps, "s-1", cancelled_ms);
    eprintln!("s-1 measured {after} steps in its new allocation");
}

#[test]
fn an_allocation_that_never_starts_stops_the_campaign_with_slurms_reason() {
    let _serial = serial();
    let Some(rig) = SlurmRig::up("partition", 6937) else {
        return;
    };
    let workers = rig
        .workers_field(1, "(retries 1)")
        .replace("(partition \"kiln\")", "(partition \"nosuch\")");
    let search = "(random-walk (steps 5) (flips 1))";
    let dir = campaign_dir(&campaign_config(search, 1, 1, &workers, ""));
    let t = Instant::now();
    let out = rig.run_kiln(dir.path(), &["run", "campaign.sexp"]);
    let shown = text(&out);
    assert!(!out.status.success(), "{shown}");
    assert!(
        shown.contains("no worker can run this campaign's steps")
            && shown.contains("worker s: gave up after 2 Slurm allocations")
            && shown.contains("Invalid partition name specified"),
        "{shown}"
    );
    assert!(
        t.elapsed() < Duration::from_secs(30),
        "took {:?}",
        t.elapsed()
    );
}
