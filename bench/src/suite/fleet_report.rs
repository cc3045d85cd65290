//! §6 of the report: the hundred SSH workers' table, the lost worker's, their targets, and
//! what the measurements project for a campaign of 1,000 workers.

use std::io::Write;

use anyhow::Result;

use kiln_protocol::config::SshClient;

use super::fleet::{run_name, Loss, CLIENTS, FEW, FLEET, FLEET_CLIENT, LOST_AFTER_S};
use super::rigs::client_word;
use super::writeup::{Page, Target};
use super::Suite;
use crate::report::{fmt, Table};

const SECTION: &str = "fleet";

/// What one worker more costs the controller, from the runs on `FEW` and `FLEET` workers.
struct PerWorker {
    /// kiln's own peak RSS, MiB.
    ctl_mib: Option<f64>,
    /// Its ssh clients' PSS, MiB.
    ssh_mib: Option<f64>,
    fds: Option<f64>,
    processes: Option<f64>,
}

impl PerWorker {
    fn measured(p: &Page<'_>, client: SshClient) -> PerWorker {
        let slope = |metric: &str| {
            let at = |n: usize| p.r.median(SECTION, &run_name(client, n), p.after, metric);
            at(FLEET)
                .zip(at(FEW))
                .map(|(many, few)| (many - few) / (FLEET - FEW) as f64)
        };
        PerWorker {
            ctl_mib: slope("ctl_max_rss_mib"),
            ssh_mib: slope("helpers_pss_mib"),
            fds: slope("ctl_fds"),
            processes: slope("helpers"),
        }
    }

    fn memory_mib(&self) -> Option<f64> {
        self.ctl_mib.zip(self.ssh_mib).map(|(c, s)| c + s)
    }
}

impl Suite {
    /// §6 of the report.
    pub(super) fn write_fleet(&self, p: &Page<'_>, o: &mut Vec<u8>) -> Result<Vec<Target>> {
        writeln!(
            o,
            "{FLEET} sshd daemons of scripts/ssh-rig on 127.0.0.2–{} (their own port, beside §1's \
             rig), one worker of one slot on each; {} only. The no-op campaign of §1 with 25 \
             chains × parallel 4 ({} steps per chain), on the first {FEW} workers and on all \
             {FLEET}, with each SSH client: `system` (OpenSSH's `ssh`, a master process per \
             worker, its sessions multiplexed over the master's socket) and `builtin` (kiln's \
             own, russh: each connection inside the controller's process). Controller = the \
             `kiln` process; the ssh processes are counted apart, by PSS (shared pages split \
             among them). \
             Descriptors, threads and processes are the most seen at once, sampled every half \
             second. kiln-worker is in every worker's folder before the campaign (a week's \
             campaign deploys once); workers used = those that ran at least one step. Steps/s \
             counts from the first dispatch to the last decision, connections included; \
             \"all running after\" is the time until the last worker took its first step \
             (each connection logs in, checks the deployed files' hashes and starts `serve`, \
             sixteen at once, on the same two cores that run the steps), and \"sustained\" \
             the rate of the steps decided from then on, as a week's campaign runs once \
             connected. Per worker = (figure at {FLEET} − figure at {FEW}) / {}. The targets \
             are judged on the `builtin` client.\n",
            FLEET + 1,
            p.after,
            self.sizes.fleet_steps,
            FLEET - FEW
        )?;
        self.fleet_table(p).write(o)?;
        let per = CLIENTS.map(|client| PerWorker::measured(p, client));
        per_worker_table(&per).write(o)?;
        self.write_losses(p, o)?;
        let fleet = &per[CLIENTS
            .iter()
            .position(|c| *c == FLEET_CLIENT)
            .expect("compared")];
        write_projection(p, fleet, o)?;
        Ok(fleet_targets(p, &per))
    }

    fn fleet_table(&self, p: &Page<'_>) -> Table {
        let columns = [
            ("workers used", "workers_used"),
            ("steps/s", "steps_per_s"),
            ("all running after s", "all_running_s"),
            ("steps/s sustained", "steps_per_s_sustained"),
            ("sustained for s", "sustained_s"),
            ("ctl CPU ms/step", "ctl_cpu_ms_per_step"),
            ("ctl cores", "ctl_cores"),
            ("machine busy", "machine_busy"),
            ("ctl peak RSS MiB", "ctl_max_rss_mib"),
            ("ssh clients' PSS MiB", "helpers_pss_mib"),
            ("ctl descriptors", "ctl_fds"),
            ("ctl threads", "ctl_threads"),
            ("ssh processes", "helpers"),
        ];
        let heads = ["client", "workers"]
            .into_iter()
            .chain(columns.iter().map(|c| c.0));
        let mut t = Table::new(&heads.collect::<Vec<_>>());
        for (client, n) in CLIENTS.iter().flat_map(|c| [(*c, FEW), (*c, FLEET)]) {
            let config = run_name(client, n);
            let cells = columns
                .iter()
                .map(|(_, m)| fmt(p.r.median(SECTION, &config, p.after, m)));
            let row = [client_word(client).to_string(), n.to_string()];
            t.row(row.into_iter().chain(cells).collect());
        }
        t
    }

    fn write_losses(&self, p: &Page<'_>, o: &mut Vec<u8>) -> Result<()> {
        writeln!(
            o,
            "A lost worker: a campaign of 2 s steps on all {FLEET} workers (25 chains × parallel \
             4, 8 steps each), `(timeouts (heartbeat-s 1) (lost-after-s {LOST_AFTER_S}))`. Once \
             worker w1 runs a step, its `kiln-worker serve` is killed (SIGKILL: its connection \
             ends) or frozen with what it runs (SIGSTOP: the connection stays open and silent, \
             as a machine that hangs); the time is taken until the controller's log says the \
             step was re-queued. Missing steps = steps asked for − steps the store holds.\n"
        )?;
        let mut t = Table::new(&[
            "worker",
            "re-queued after ms",
            "missing steps",
            "failed steps",
        ]);
        for loss in [Loss::Killed, Loss::Frozen] {
            let config = format!("lose-{}", loss.name());
            let m = |metric: &str| fmt(p.r.median(SECTION, &config, p.after, metric));
            t.row(vec![
                loss.name().into(),
                m("requeue_ms"),
                m("missing_steps"),
                m("failed_steps"),
            ]);
        }
        t.write(o)?;
        Ok(())
    }
}

/// One figure of what a worker costs.
type Figure = fn(&PerWorker) -> Option<f64>;

fn per_worker_table(per: &[PerWorker; 2]) -> Table {
    let heads = ["one worker more costs the controller"]
        .into_iter()
        .chain(CLIENTS.map(client_word));
    let mut t = Table::new(&heads.collect::<Vec<_>>());
    let rows: [(&str, Figure); 5] = [
        ("kiln's own memory, MiB", |w| w.ctl_mib),
        ("its ssh clients' memory (PSS), MiB", |w| w.ssh_mib),
        ("memory together, MiB", PerWorker::memory_mib),
        ("descriptors", |w| w.fds),
        ("processes (ssh clients)", |w| w.processes),
    ];
    for (what, figure) in rows {
        let cells = per.iter().map(|w| fmt(figure(w)));
        t.row(std::iter::once(what.to_string()).chain(cells).collect());
    }
    t
}

/// The targets of issue 54 that this section measures.
fn fleet_targets(p: &Page<'_>, per: &[PerWorker; 2]) -> Vec<Target> {
    let at = |client: SshClient, metric: &str| {
        p.r.median(SECTION, &run_name(client, FLEET), p.after, metric)
    };
    let at_fleet = |metric: &str| at(FLEET_CLIENT, metric);
    let [system, fleet] = per;
    let rate = at_fleet("steps_per_s_sustained");
    // A figure of the large run stands for FLEET workers only where every one of them ran.
    let used = at_fleet("workers_used");
    let all_used = used == Some(FLEET as f64);
    let mut targets = vec![
        (
            format!("≥ 500 no-op steps/s sustained across {FLEET} SSH workers"),
            format!("{} steps/s", fmt(rate)),
            format!(
                "builtin client, once all were running ({} steps/s with connecting; the system \
                 client {} sustained); 25 chains × parallel 4, one slot a worker; {} workers ran \
                 steps",
                fmt(at_fleet("steps_per_s")),
                fmt(at(SshClient::System, "steps_per_s_sustained")),
                fmt(used)
            ),
            rate.map(|r| r >= 500.0 && all_used),
        ),
        (
            "controller memory ≤ 1 MB a worker".into(),
            format!("{} MiB", fmt(fleet.memory_mib())),
            format!(
                "builtin client: kiln {} MiB + ssh processes {} MiB (the system client: {} MiB, \
                 its ssh masters' {} MiB); {} workers ran steps",
                fmt(fleet.ctl_mib),
                fmt(fleet.ssh_mib),
                fmt(system.memory_mib()),
                fmt(system.ssh_mib),
                fmt(used)
            ),
            fleet.memory_mib().map(|m| m * 1.048_576 <= 1.0 && all_used),
        ),
    ];
    for loss in [Loss::Killed, Loss::Frozen] {
        let config = format!("lose-{}", loss.name());
        let ms = p.r.median(SECTION, &config, p.after, "requeue_ms");
        let missing = p.r.median(SECTION, &config, p.after, "missing_steps");
        targets.push((
            format!(
                "a {} worker's step re-queued within lost-after-s + 5 s",
                loss.name()
            ),
            format!("{} ms", fmt(ms)),
            format!(
                "limit {} ms; {} steps missing",
                1e3 * (LOST_AFTER_S + 5.0),
                fmt(missing)
            ),
            ms.zip(missing)
                .map(|(ms, missing)| ms <= 1e3 * (LOST_AFTER_S + 5.0) && missing == 0.0),
        ));
    }
    targets
}

/// What bounds a campaign of 1,000 workers, from this section's measurements (and §3's
/// write of a decided step, where it ran).
fn write_projection(p: &Page<'_>, per: &PerWorker, o: &mut Vec<u8>) -> Result<()> {
    let config = run_name(FLEET_CLIENT, FLEET);
    let cpu_ms = p.r.median(SECTION, &config, p.after, "ctl_cpu_ms_per_step");
    let decide_ms =
        p.r.median("store", "persist-step", "store-api", "decide_p50_ms");
    let at_1000 = |v: Option<f64>| fmt(v.map(|v| v * 1000.0));
    let store = match decide_ms {
        Some(ms) => format!(
            "the store's `decide` takes {} ms a step flushed alone (§3), {} of the time at \
             100 steps/s before group commits",
            fmt(Some(ms)),
            fmt(Some(ms * 100.0 / 1e3))
        ),
        None => "the store's write of a step is §3's (not run with this report)".into(),
    };
    writeln!(
        o,
        "**1,000 workers, projected** (the builtin client). A week of a step every 10 s on \
         each of 1,000 workers is 100 steps/s. Controller CPU: {} ms a step here, so 100 steps/s take {} of a core and \
         one core carries {} no-op steps/s; {store}. Connections: {} descriptors and {} ssh \
         processes a worker make {} descriptors and {} processes at 1,000, against a soft \
         descriptor limit of {} here (kiln does not raise it: a controller of 1,000 workers needs \
         `ulimit -n` above that figure, where many machines' default is 1,024). Memory: {} MiB \
         a worker, {} MiB at 1,000. What would have to change: a worker is a connection \
         inside the controller (its socket, keys and buffers), no process; at 1,000 the \
         descriptor limit and the connecting (each login and its hash check on the workers' \
         side) are what to plan for, sixteen at once.\n",
        fmt(cpu_ms),
        fmt(cpu_ms.map(|c| c * 100.0 / 1e3)),
        fmt(cpu_ms.map(|c| 1e3 / c)),
        fmt(per.fds),
        fmt(per.processes),
        at_1000(per.fds),
        at_1000(per.processes),
        soft_nofile(),
        fmt(per.memory_mib()),
        at_1000(per.memory_mib()),
    )?;
    Ok(())
}

/// This process's soft limit of open descriptors.
fn soft_nofile() -> u64 {
    // SAFETY: rlimit is plain data; getrlimit fills it.
    let mut lim: libc::rlimit = unsafe { std::mem::zeroed() };
    // SAFETY: a live out-pointer.
    unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) };
    lim.rlim_cur
}
