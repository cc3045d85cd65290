//! §6, a hundred SSH workers (scripts/ssh-rig on loopback): no-op steps across 10 and 100
//! workers with each SSH client (throughput, controller CPU, memory and descriptors per
//! worker), and the time a worker killed or frozen mid-step takes to be found lost while 99
//! others are busy.

use std::fs;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use kiln_protocol::config::SshClient;
use kiln_protocol::gpu_trace::INJECTION_LIBRARY;

use super::campaign::noop_config;
use super::rigs::Rig;
use super::{Suite, Version};
use crate::procs;

/// Workers of the large rig, and of the smaller run that memory per worker is taken against.
pub(super) const FLEET: usize = 100;
pub(super) const FEW: usize = 10;
/// Chains × in flight each: one step for every worker of the large rig.
const CHAINS: u32 = 25;
const PARALLEL: u32 = 4;
/// The loss test's timeouts: a worker silent this long is lost.
pub(super) const LOST_AFTER_S: f64 = 5.0;
const HEARTBEAT_S: f64 = 1.0;

/// The SSH clients compared; the targets are judged on the last, a fleet's client, which the
/// lost-worker runs use too.
pub(super) const CLIENTS: [SshClient; 2] = [SshClient::System, SshClient::Builtin];
pub(super) const FLEET_CLIENT: SshClient = SshClient::Builtin;

/// The name of the no-op run on `n` workers connected with `client`.
pub(super) fn run_name(client: SshClient, n: usize) -> String {
    match client {
        SshClient::System => format!("ssh-{n}"),
        SshClient::Builtin => format!("builtin-{n}"),
    }
}

/// How a worker is taken away mid-step.
#[derive(Clone, Copy)]
pub(super) enum Loss {
    /// Its `kiln-worker serve` killed: its connection ends at once.
    Killed,
    /// Its `serve` and what it runs stopped (SIGSTOP): the connection stays open and silent,
    /// as a machine that hangs, found only by the heartbeats.
    Frozen,
}

impl Loss {
    pub(super) fn name(self) -> &'static str {
        match self {
            Loss::Killed => "killed",
            Loss::Frozen => "frozen",
        }
    }
}

impl Suite {
    /// Brings up the large rig (its own daemons, beside §1's), then per repetition: the no-op
    /// campaign on `FEW` and on `FLEET` workers with each client, and a worker killed and one
    /// frozen mid-step.
    pub(super) fn fleet(&mut self) -> Result<()> {
        let script = self.opts.repo.join("scripts/ssh-rig");
        let port = self.opts.rig_port + 1;
        let rig = match Rig::up(&script, &self.work.join("fleet-rig"), FLEET, port)? {
            Ok(rig) => rig,
            Err(reason) => {
                eprintln!("  no ssh rig: {reason}");
                self.notes
                    .push(format!("The hundred-worker section skipped: {reason}"));
                return Ok(());
            }
        };
        let v = self.versions[0].clone();
        place_binaries(&v, &rig)?;
        for rep in 0..self.sizes.reps {
            for (client, n) in CLIENTS.iter().flat_map(|c| [(*c, FEW), (*c, FLEET)]) {
                let workers = rig.workers(n, 1, "fleet", client);
                let config = noop_config(self.sizes.fleet_steps, CHAINS, PARALLEL, &workers);
                let name = run_name(client, n);
                let r = self.campaign(&v, &name, &config, &rig.pids(n))?;
                self.record_campaign("fleet", &name, &v.label, rep, &r);
            }
            for loss in [Loss::Killed, Loss::Frozen] {
                let lost = self.lose_a_worker(&v, &rig, loss)?;
                lost.record(&mut self.results, loss, &v.label, rep);
            }
        }
        Ok(())
    }

    /// A campaign of 2 s steps on every worker of the rig; once worker 1 runs one, `loss`
    /// takes it away; how long until the controller re-queues its step, and what the
    /// campaign's steps were at the end.
    fn lose_a_worker(&self, v: &Version, rig: &Rig, loss: Loss) -> Result<Lost> {
        let dir = self.fresh_run_dir(v, &format!("lose-{}", loss.name()))?;
        fs::write(
            dir.join("noop/run.sh"),
            "touch running\nsleep 2\nrm -f running\n",
        )?;
        let steps = 8;
        let workers = rig.workers(FLEET, 1, "fleet", FLEET_CLIENT);
        let config = noop_config(steps, CHAINS, PARALLEL, &workers)
            .replace("(run (\"true\"))", "(run (\"sh\" \"run.sh\"))")
            .replace(
                "(workers",
                &format!(
                    "(timeouts (heartbeat-s {HEARTBEAT_S}) (lost-after-s {LOST_AFTER_S}))\n  (workers"
                ),
            );
        fs::write(dir.join("campaign.sexp"), config)?;
        let rundir = rig.rundir(1, "fleet");
        // A step killed before left its marker behind.
        let _ = fs::remove_file(rundir.join("slots/0/work/running"));
        let child = Command::new(v.kiln())
            .args(["run", "campaign.sexp"])
            .current_dir(&dir)
            .env("KILN_WORKER", v.worker())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(fs::File::create(dir.join("stderr.txt"))?)
            .spawn()?;
        let requeued = take_away(child, &rundir, &dir.join("store/kiln.log"), loss);
        let (done, ok) = finished_steps(v, &dir)?;
        let lost = Lost {
            requeued_s: requeued?,
            expected: (steps * CHAINS) as usize,
            done,
            ok,
        };
        fs::remove_dir_all(&dir)?;
        Ok(lost)
    }
}

/// Puts the binaries a worker deploys in every worker's folder (hard links), as a week's
/// campaign finds them after its first connection to each. A warm-up campaign did not: its
/// few steps ended before most workers connected, and the measured campaign then spent its
/// first minute uploading 63 MB to each of them, 16 at once, while a dozen workers took all
/// its steps.
fn place_binaries(v: &Version, rig: &Rig) -> Result<()> {
    let worker = v.worker();
    let dir = worker.parent().context("the worker binary's folder")?;
    for k in 1..=FLEET {
        let rundir = rig.rundir(k, "fleet");
        fs::create_dir_all(&rundir)?;
        for name in ["kiln-worker", INJECTION_LIBRARY] {
            let (from, to) = (dir.join(name), rundir.join(name));
            if !from.exists() {
                continue;
            }
            let _ = fs::remove_file(&to);
            fs::hard_link(&from, &to)
                .or_else(|_| fs::copy(&from, &to).map(drop))
                .with_context(|| {
                    format!("cannot place {} in {}", from.display(), rundir.display())
                })?;
        }
    }
    Ok(())
}

/// What taking a worker away mid-step gave.
pub(super) struct Lost {
    /// From the signal until the controller's log says the worker's step was re-queued.
    requeued_s: f64,
    /// Steps the campaign asked for, steps it holds (each once), and how many ended ok.
    expected: usize,
    done: usize,
    ok: usize,
}

impl Lost {
    fn record(&self, results: &mut crate::report::Results, loss: Loss, tool: &str, rep: usize) {
        let config = format!("lose-{}", loss.name());
        for (metric, value) in [
            ("requeue_ms", 1e3 * self.requeued_s),
            ("missing_steps", self.expected as f64 - self.done as f64),
            ("failed_steps", (self.done - self.ok) as f64),
        ] {
            results.add("fleet", &config, tool, rep, metric, value);
        }
        eprintln!(
            "  {config:<12} rep {rep}: re-queued after {:.0} ms; {} of {} steps, {} ok",
            1e3 * self.requeued_s,
            self.done,
            self.expected,
            self.ok
        );
    }
}

/// Waits for the worker in `rundir` to run a step, takes it away as `loss` says, and returns
/// the seconds until `log` says its step was re-queued; then lets the campaign finish (what
/// was stopped is killed, so the rig's daemons can end their sessions).
fn take_away(mut child: Child, rundir: &Path, log: &Path, loss: Loss) -> Result<f64> {
    let result = (|| {
        let marker = rundir.join("slots/0/work/running");
        wait_until("worker 1 to run a step", Duration::from_secs(180), || {
            marker.exists() && serve_of(rundir).is_some()
        })?;
        let serve = serve_of(rundir).context("worker 1's kiln-worker serve")?;
        let tree = procs::descendants_and_self(serve);
        let signal = match loss {
            Loss::Killed => libc::SIGKILL,
            Loss::Frozen => libc::SIGSTOP,
        };
        let taken = Instant::now();
        signal_all(&tree, signal);
        wait_until(
            "the lost step to be re-queued",
            Duration::from_secs(60),
            || requeued_from(log, "w1"),
        )?;
        let requeued = taken.elapsed().as_secs_f64();
        signal_all(&tree, libc::SIGKILL);
        Ok(requeued)
    })();
    let status = child.wait()?;
    if result.is_ok() && !status.success() {
        bail!("the campaign that lost a worker ended with {status}");
    }
    result
}

/// Polls `done` every 5 ms until it holds, at most `limit`.
fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) -> Result<()> {
    let until = Instant::now() + limit;
    while !done() {
        if Instant::now() > until {
            bail!("waited {} s for {what}", limit.as_secs());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(())
}

/// Whether the controller's log says a step of `worker` was re-queued.
fn requeued_from(log: &Path, worker: &str) -> bool {
    let needle = format!("worker={worker}");
    fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .any(|l| {
            l.contains("re-queued")
                && l.split(|c: char| c.is_whitespace() || c == ',')
                    .any(|w| w == needle)
        })
}

/// The pid of the `kiln-worker serve` working in `rundir`.
fn serve_of(rundir: &Path) -> Option<i32> {
    let rundir = rundir.as_os_str().as_encoded_bytes();
    fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: i32 = e.file_name().to_str()?.parse().ok()?;
        let cmdline = fs::read(e.path().join("cmdline")).ok()?;
        let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
        let serves = args.contains(&&b"serve"[..]) && args.contains(&rundir);
        serves.then_some(pid)
    })
}

fn signal_all(pids: &[i32], signal: i32) {
    for pid in pids {
        // SAFETY: a signal by pid to a process of the rig's.
        unsafe { libc::kill(*pid, signal) };
    }
}

/// Steps in the campaign's store at its end (one row a step id), and how many ended ok.
fn finished_steps(v: &Version, dir: &Path) -> Result<(usize, usize)> {
    let out = Command::new(v.kiln())
        .args(["export", "store", "--table", "steps"])
        .current_dir(dir)
        .output()?;
    if !out.status.success() {
        bail!("kiln export: {}", String::from_utf8_lossy(&out.stderr));
    }
    let mut r = csv::Reader::from_reader(&out.stdout[..]);
    let outcome = r
        .headers()?
        .iter()
        .position(|h| h == "outcome")
        .context("no outcome column")?;
    let (mut done, mut ok) = (0, 0);
    for rec in r.records() {
        done += 1;
        ok += usize::from(&rec?[outcome] == "ok");
    }
    Ok((done, ok))
}
