//! Whole campaigns over SSH workers, with the real `kiln` and `kiln-worker` binaries against real
//! `sshd` daemons (scripts/ssh-rig): every worker used, a cut link and a killed worker survived
//! with every step stored once and the worker re-admitted, sixteen workers with one killed
//! mid-step ending as one worker does, `kiln workers` telling a dead daemon
//! apart; and slot calibration on local workers.
//!
//! Every SSH test starts its own rig (own port, own namespaces) in
//! `$TMPDIR/kiln-campaign-test-<name>`; the [`Rig`] guard runs `ssh-rig down` on drop, also when
//! the test fails. Where the rig cannot run here (not root, no sshd, no namespaces) the test is
//! reported skipped, with the rig's reason. Targets are only 127.0.0.x and the rig's own
//! namespace addresses.
//!
//! The tests run one at a time ([`serial`]): they measure wall time and watch timeouts of a few
//! seconds, which two campaigns at once on a small machine would blur.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::common::campaign::*;
use crate::common::*;
use kiln_controller::store::{now_ms, StepRecord};

/// A running rig of sshd daemons; `ssh-rig down` on drop.
struct Rig {
    dir: PathBuf,
    /// Per daemon (1-based order): address and port.
    hosts: Vec<(String, u16)>,
    /// The SSH client the worker entries name (`system` unless a test says otherwise).
    client: &'static str,
}

impl Rig {
    /// Starts `n` daemons on loopback, or in namespaces `<prefix>1..n` with `netns`; `None`
    /// (the test skipped) where a rig cannot run here.
    fn up(test: &str, n: usize, port: u16, netns: Option<(&str, u8)>) -> Option<Rig> {
        let dir = std::env::temp_dir().join(format!("kiln-campaign-test-{test}"));
        let mut cmd = Command::new(rig_script());
        cmd.arg(if netns.is_some() { "netns-up" } else { "up" })
            .arg(&dir)
            .arg(n.to_string())
            .env("SSH_RIG_PORT", port.to_string());
        if let Some((prefix, octet)) = netns {
            cmd.env("SSH_RIG_NS_PREFIX", prefix)
                .env("SSH_RIG_NET", octet.to_string());
        }
        let out = cmd.output().expect("cannot run scripts/ssh-rig");
        let stderr = String::from_utf8_lossy(&out.stderr);
        if out.status.code() == Some(SKIP) {
            skip(stderr);
            return None;
        }
        // From here on the guard cleans up, whatever happens.
        let mut rig = Rig {
            dir,
            hosts: vec![],
            client: "system",
        };
        assert!(out.status.success(), "ssh-rig up failed: {stderr}");
        let hosts = std::fs::read_to_string(rig.dir.join("hosts")).unwrap();
        for line in hosts.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            rig.hosts.push((f[2].to_string(), f[3].parse().unwrap()));
        }
        assert_eq!(rig.hosts.len(), n);
        // A private copy to deploy: a concurrent `cargo build` may replace the original.
        std::fs::copy(worker(), rig.worker()).unwrap();
        Some(rig)
    }

    /// The kiln-worker binary the controller runs and deploys.
    fn worker(&self) -> PathBuf {
        self.dir.join("kiln-worker.local")
    }

    /// `ssh-rig VERB DIR K`.
    fn ctl(&self, verb: &str, k: usize) {
        rig_ctl(&self.dir, verb, k);
    }

    /// Worker `k`'s folder on the "remote" machine (the rig's daemons run on this one).
    fn rundir(&self, k: usize) -> PathBuf {
        self.dir.join(format!("rundir-{k}"))
    }

    /// The `(ssh ...)` entry of worker `k` (1-based), named `wK`.
    fn worker_entry(&self, k: usize) -> String {
        let (host, port) = &self.hosts[k - 1];
        format!(
            "(ssh (name w{k}) (host \"{host}\") (port {port}) (user \"root\") \
             (identity \"{}\") (known-hosts \"{}\") (rundir \"{}\") (slots 1) (client {}))",
            self.dir.join("client_key").display(),
            self.dir.join("known_hosts").display(),
            self.rundir(k).display(),
            self.client
        )
    }

    /// The `(workers ...)` field with every daemon of the rig.
    fn workers_field(&self) -> String {
        let entries: Vec<String> = (1..=self.hosts.len())
            .map(|k| self.worker_entry(k))
            .collect();
        format!("(workers {})", entries.join("\n    "))
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        rig_down(&self.dir);
    }
}

/// Whether worker `k`'s step is running right now (its run script's marker exists).
fn mid_step(rig: &Rig, k: usize) -> bool {
    rig.rundir(k).join("slots/0/work/running").exists()
}

#[test]
fn campaign_uses_every_ssh_worker_and_stores_each_step_once() {
    let _serial = serial();
    let Some(rig) = Rig::up("all", 3, 2311, None) else {
        return;
    };
    let search = "(simulated-annealing (steps 15) (t-max 0.3) (t-min 0.01))";
    let dir = campaign_dir(&campaign_config(search, 2, 1, &rig.workers_field(), ""));
    let t = Instant::now();
    let child = start_campaign(dir.path(), &rig.worker());
    finish_campaign(child, dir.path(), Duration::from_secs(180));
    eprintln!(
        "30 steps over 3 SSH workers in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let steps = assert_every_step_once(dir.path(), 30);
    for name in ["w1", "w2", "w3"] {
        assert!(
            steps.iter().any(|s| s.worker == name),
            "no step ran on {name}: {:?}",
            steps.iter().map(|s| &s.worker).collect::<Vec<_>>()
        );
    }
}

#[test]
fn cut_link_redispatches_its_step_and_the_worker_comes_back() {
    let _serial = serial();
    let Some(rig) = Rig::up("cut", 3, 2312, Some(("kcb", 212))) else {
        return;
    };
    let search = "(random-walk (steps 40) (flips 1))";
    let dir = campaign_dir(&campaign_config(search, 3, 3, &rig.workers_field(), ""));
    let d = dir.path();
    let child = start_campaign(d, &rig.worker());

    wait_for(
        "5 decided steps and w2 mid-step",
        d,
        Duration::from_secs(90),
        || decided(d) >= 5 && mid_step(&rig, 2),
    );
    rig.ctl("cut", 2);
    let cut = Instant::now();
    // Heal only once the controller has given up on the link: healed sooner, TCP resumes and
    // nothing is lost.
    wait_for("w2 lost", d, Duration::from_secs(30), || {
        worker_row(d, "w2").is_some_and(|w| w["losses"].as_u64() >= Some(1))
    });
    eprintln!("cut noticed after {:.1} s", cut.elapsed().as_secs_f64());
    // ...and has failed to reconnect at least once, so that re-admission goes through retries.
    wait_for(
        "a failed reconnection to w2",
        d,
        Duration::from_secs(40),
        || {
            worker_row(d, "w2").is_some_and(|w| {
                w["state"]
                    .as_str()
                    .unwrap_or("")
                    .contains("ssh worker 'w2'")
            })
        },
    );
    eprintln!(
        "reconnection failed after {:.1} s: {}",
        cut.elapsed().as_secs_f64(),
        worker_row(d, "w2").unwrap()["state"]
    );
    let healed_ms = now_ms();
    rig.ctl("heal", 2);
    let decided_at_heal = decided(d);
    assert!(
        decided_at_heal < 90,
        "{decided_at_heal} of 120 steps decided at heal: too few left to see w2 come back"
    );
    finish_campaign(child, d, Duration::from_secs(180));

    let steps = assert_every_step_once(d, 120);
    assert!(
        requeued_from(d, "w2"),
        "w2's in-flight step was not re-queued\n{}",
        diagnostics(d)
    );
    let after = measured_by_since(&steps, "w2", healed_ms);
    let back_ms = steps
        .iter()
        .filter(|s| s.worker == "w2" && s.result.started_ms >= healed_ms)
        .map(|s| s.result.started_ms - healed_ms)
        .min();
    eprintln!(
        "{decided_at_heal} steps decided at heal; w2 measured {after} steps after it, the first \
         {back_ms:?} ms after the heal"
    );
    assert!(after > 0, "w2 never came back\n{}", diagnostics(d));
}

/// The pid of worker `k`'s `kiln-worker serve`, found by its command line (the rig's rundir is
/// this test's own).
fn serve_pid(rig: &Rig, k: usize) -> Option<u32> {
    let program = rig.rundir(k).join("kiln-worker");
    for entry in std::fs::read_dir("/proc").ok()? {
        let entry = entry.ok()?;
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let mut args = cmdline.split(|b| *b == 0);
        if args.next() == Some(program.as_os_str().as_encoded_bytes())
            && args.next() == Some(b"serve".as_slice())
        {
            return Some(pid);
        }
    }
    None
}

#[test]
fn killed_worker_process_redispatches_its_step_and_comes_back() {
    let _serial = serial();
    let Some(rig) = Rig::up("kill", 3, 2313, None) else {
        return;
    };
    let search = "(random-walk (steps 30) (flips 1))";
    let dir = campaign_dir(&campaign_config(search, 3, 3, &rig.workers_field(), ""));
    let d = dir.path();
    let child = start_campaign(d, &rig.worker());

    wait_for(
        "5 decided steps and w2 mid-step",
        d,
        Duration::from_secs(90),
        || decided(d) >= 5 && mid_step(&rig, 2) && serve_pid(&rig, 2).is_some(),
    );
    let pid = serve_pid(&rig, 2).unwrap();
    let killed_ms = now_ms();
    let st = Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    finish_campaign(child, d, Duration::from_secs(180));

    let steps = assert_every_step_once(d, 90);
    assert!(
        requeued_from(d, "w2"),
        "w2's in-flight step was not re-queued\n{}",
        diagnostics(d)
    );
    let after = measured_by_since(&steps, "w2", killed_ms);
    eprintln!("w2 measured {after} steps after its kiln-worker was killed");
    assert!(after > 0, "w2 never came back\n{}", diagnostics(d));
}

/// Whether process `pid`, or a process below it, runs the synthetic benchmark (`./bench`,
/// under callgrind): a step mid-run, not the probes a worker runs as it starts.
fn runs_the_benchmark(pid: u32) -> bool {
    let runs = |p: u32| {
        std::fs::read(format!("/proc/{p}/cmdline"))
            .is_ok_and(|c| c.split(|b| *b == 0).any(|arg| arg == b"./bench"))
    };
    let children = |p: u32| -> Vec<u32> {
        std::fs::read_dir(format!("/proc/{p}/task"))
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|t| std::fs::read_to_string(t.path().join("children")).ok())
            .flat_map(|c| {
                c.split_whitespace()
                    .filter_map(|p| p.parse().ok())
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        if runs(p) {
            return true;
        }
        todo.extend(children(p));
    }
    false
}

#[test]
fn sixteen_workers_one_killed_mid_step_end_as_one_worker_does() {
    let _serial = serial();
    if !have_valgrind() {
        return skip("valgrind is not installed (callgrind is the deterministic objective)");
    }
    let Some(mut rig) = Rig::up("sixteen", 16, 2317, None) else {
        return;
    };
    let one = sixteen_setup(&format!("(workers {})", rig.worker_entry(1)));
    finish_campaign(
        start_campaign(one.path(), &rig.worker()),
        one.path(),
        Duration::from_secs(300),
    );
    let expected = assert_every_step_once(one.path(), 32);

    // Deployed beforehand (the rig's folders are on this machine): the workers connect in a
    // second, not after 16 uploads, and all take steps.
    for k in 1..=16 {
        std::fs::create_dir_all(rig.rundir(k)).unwrap();
        std::fs::copy(rig.worker(), rig.rundir(k).join("kiln-worker")).unwrap();
    }
    // With each SSH client: OpenSSH's, and kiln's own (a fleet's).
    for client in ["system", "builtin"] {
        rig.client = client;
        let many = sixteen_setup(&rig.workers_field());
        let (name, got) = sixteen_with_one_killed(&rig, many.path());
        let workers: std::collections::BTreeSet<&str> =
            got.iter().map(|s| s.worker.as_str()).collect();
        eprintln!(
            "{client}: {name} killed mid-step; steps ran on {} workers",
            workers.len()
        );
        assert!(
            workers.len() > 8,
            "{client}: the steps ran on {workers:?} only"
        );
        assert_eq!(
            trajectory(&got),
            trajectory(&expected),
            "{client}: 16 workers and one diverged"
        );
    }
}

/// A folder with the synthetic benchmark and a campaign of 4 chains × 4 in flight on
/// `workers` (a step for each of 16; instructions count the same anywhere).
fn sixteen_setup(workers: &str) -> tempfile::TempDir {
    let config = synthetic_config_on(8, 11, 4, workers).replace("(chains 1)", "(chains 4)");
    let dir = tempfile::tempdir().unwrap();
    copy_benchmark("synthetic", dir.path());
    std::fs::write(dir.path().join("campaign.sexp"), config).unwrap();
    dir
}

/// Runs the campaign in `d` on the rig's workers, kills one of w2..w16 mid-step, and returns
/// its name and the steps stored (each once; its step re-queued).
fn sixteen_with_one_killed(rig: &Rig, d: &Path) -> (String, Vec<StepRecord>) {
    let child = start_campaign(d, &rig.worker());
    let mut busy = None;
    wait_for(
        "a worker of w2..w16 mid-step",
        d,
        Duration::from_secs(120),
        || {
            busy = (2..=16).find_map(|k| {
                serve_pid(rig, k)
                    .filter(|p| runs_the_benchmark(*p))
                    .map(|p| (k, p))
            });
            busy.is_some()
        },
    );
    let (k, pid) = busy.unwrap();
    signal(pid, libc::SIGKILL);
    finish_campaign(child, d, Duration::from_secs(300));

    let got = assert_every_step_once(d, 32);
    let name = format!("w{k}");
    let log = std::fs::read_to_string(d.join("store/kiln.log")).unwrap_or_default();
    let said: Vec<&str> = log
        .lines()
        .filter(|l| l.contains(&format!("worker={name}")))
        .collect();
    assert!(
        requeued_from(d, &name),
        "{}: {name}'s step was not re-queued; the log of it:\n{}",
        rig.client,
        said.join("\n")
    );
    (name, got)
}

/// The pid of the `kiln-worker serve` whose rundir is `rundir`, found by its command line.
fn serve_pid_in(rundir: &Path) -> Option<u32> {
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| {
            let pid = entry.file_name().to_string_lossy().parse::<u32>().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
            // A local worker's rundir is relative to the controller's folder, which it shares.
            let cwd = std::fs::read_link(entry.path().join("cwd")).ok()?;
            let serves = args.get(1) == Some(&b"serve".as_slice())
                && args
                    .windows(2)
                    .any(|w| w[0] == b"--rundir" && cwd.join(OsStr::from_bytes(w[1])) == rundir);
            serves.then_some(pid)
        })
}

/// Sends `sig` to `pid`, which may be gone already.
fn signal(pid: u32, sig: libc::c_int) {
    // SAFETY: a plain kill; the pid is a worker's that this test found.
    unsafe { libc::kill(pid as libc::pid_t, sig) };
}

/// Stops worker `name`'s `kiln-worker serve` (whose rundir is `rundir`) with SIGSTOP mid-step:
/// it keeps its connection open and answers nothing. Asserts that the controller declares it
/// lost within `lost-after-s` plus one heartbeat (and the snapshot's refresh), re-queues its
/// step, and, once the worker is continued, uses it again; every step is stored once.
fn frozen_worker_is_lost_and_readmitted(
    dir: &Path,
    worker_binary: &Path,
    name: &str,
    rundir: &Path,
    budget: usize,
) {
    let child = start_campaign(dir, worker_binary);
    wait_for(
        &format!("5 decided steps and {name} mid-step"),
        dir,
        Duration::from_secs(90),
        || {
            decided(dir) >= 5
                && rundir.join("slots/0/work/running").exists()
                && serve_pid_in(rundir).is_some()
        },
    );
    let pid = serve_pid_in(rundir).unwrap();
    signal(pid, libc::SIGSTOP);
    let stopped = Instant::now();
    wait_for(
        &format!("{name} lost"),
        dir,
        Duration::from_secs(30),
        || worker_row(dir, name).is_some_and(|w| w["losses"].as_u64() >= Some(1)),
    );
    let noticed = stopped.elapsed();
    eprintln!(
        "SIGSTOP of {name} noticed after {:.1} s",
        noticed.as_secs_f64()
    );
    // lost-after-s 4, heartbeat-s 1, and 2 s for the snapshot and a busy machine.
    assert!(
        noticed < Duration::from_secs(7),
        "{noticed:?}\n{}",
        diagnostics(dir)
    );
    std::thread::sleep(Duration::from_secs(1));
    let continued_ms = now_ms();
    // A local worker is ended by the controller that declared it lost; a remote one waits.
    signal(pid, libc::SIGCONT);
    finish_campaign(child, dir, Duration::from_secs(180));

    let steps = assert_every_step_once(dir, budget);
    assert!(
        requeued_from(dir, name),
        "{name}'s in-flight step was not re-queued\n{}",
        diagnostics(dir)
    );
    let after = measured_by_since(&steps, name, continued_ms);
    eprintln!("{name} measured {after} steps after SIGCONT");
    assert!(after > 0, "{name} never came back\n{}", diagnostics(dir));
    // The stopped process is gone: its session ended, it ended too once continued.
    wait_for(
        "the stopped serve to end",
        dir,
        Duration::from_secs(10),
        || {
            !Path::new(&format!("/proc/{pid}")).exists()
                || std::fs::read_to_string(format!("/proc/{pid}/stat"))
                    .is_ok_and(|s| s[s.rfind(')').unwrap() + 1..].trim_start().starts_with('Z'))
        },
    );
}

#[test]
fn stopped_ssh_worker_is_lost_its_step_redispatched_and_readmitted_after_sigcont() {
    let _serial = serial();
    let Some(rig) = Rig::up("stop", 3, 2315, None) else {
        return;
    };
    let search = "(random-walk (steps 30) (flips 1))";
    let dir = campaign_dir(&campaign_config(search, 3, 3, &rig.workers_field(), ""));
    frozen_worker_is_lost_and_readmitted(dir.path(), &rig.worker(), "w2", &rig.rundir(2), 90);
}

#[test]
fn stopped_local_worker_is_lost_its_step_redispatched_and_replaced() {
    let _serial = serial();
    let search = "(random-walk (steps 30) (flips 1))";
    let workers = "(workers (local (name l1) (slots 1)) (local (name l2) (slots 1)))";
    let dir = campaign_dir(&campaign_config(search, 2, 3, workers, ""));
    let rundir = dir.path().join("store/workers/l2");
    frozen_worker_is_lost_and_readmitted(dir.path(), &worker(), "l2", &rundir, 60);
}

#[test]
fn the_snapshot_shows_a_lone_worker_down_though_no_step_lands() {
    let _serial = serial();
    let Some(rig) = Rig::up("alldown", 1, 2316, None) else {
        return;
    };
    let search = "(random-walk (steps 30) (flips 1))";
    let dir = campaign_dir(&campaign_config(search, 1, 3, &rig.workers_field(), ""));
    let d = dir.path();
    let mut child = start_campaign(d, &rig.worker());
    wait_for(
        "2 decided steps and w1 mid-step",
        d,
        Duration::from_secs(90),
        || decided(d) >= 2 && mid_step(&rig, 1) && serve_pid(&rig, 1).is_some(),
    );
    // The only worker goes, and cannot come back (its host key changed): no step lands.
    let pid = serve_pid(&rig, 1).unwrap();
    rig.ctl("rekey", 1);
    signal(pid, libc::SIGKILL);
    wait_for(
        "the snapshot to show w1 down",
        d,
        Duration::from_secs(30),
        || worker_row(d, "w1").is_some_and(|w| w["state"].as_str() != Some("ok")),
    );
    let shown = worker_row(d, "w1").unwrap();
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        shown["state"].as_str().unwrap_or("").contains("host key"),
        "{shown}"
    );
}

/// The `kiln workers` line of worker `name`.
fn table_line<'a>(table: &'a str, name: &str) -> &'a str {
    table
        .lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no line for {name} in:\n{table}"))
}

/// The calibration figures (ms) of a `kiln workers` line: its numbers with a decimal point.
fn figures(line: &str) -> Vec<f64> {
    line.split_whitespace()
        .filter(|t| t.contains('.'))
        .filter_map(|t| t.parse().ok())
        .collect()
}

#[test]
fn workers_table_shows_calibration_and_a_dead_daemon() {
    let _serial = serial();
    let Some(rig) = Rig::up("workers", 2, 2314, None) else {
        return;
    };
    let search = "(random-walk (steps 1))";
    let calibration = "(calibration (benchmark cal))";
    let dir = campaign_dir(&campaign_config(
        search,
        1,
        1,
        &rig.workers_field(),
        calibration,
    ));
    let d = dir.path();
    let workers = |d: &Path| {
        kiln_cmd(d)
            .env("KILN_WORKER", rig.worker())
            .args(["workers", "campaign.sexp"])
            .output()
            .unwrap()
    };

    let t = Instant::now();
    let out = workers(d);
    eprintln!(
        "kiln workers (2 ok) took {:.1} s",
        t.elapsed().as_secs_f64()
    );
    assert!(out.status.success(), "{}", text(&out));
    let table = String::from_utf8_lossy(&out.stdout).to_string();
    eprintln!("{table}");
    assert!(table.contains("calibration ms"), "{table}");
    for name in ["w1", "w2"] {
        let line = table_line(&table, name);
        assert!(line.trim_end().ends_with(" ok"), "{table}");
        let figures = figures(line);
        assert!(
            figures.len() == 1 && (90.0..1000.0).contains(&figures[0]),
            "{name}: calibration of a 0.1 s sleep, in ms: {figures:?}\n{table}"
        );
    }

    // Daemon 2 goes down (the rig started it; its pid is in the rig's folder).
    let pid = std::fs::read_to_string(rig.dir.join("d2/pid")).unwrap();
    let st = Command::new("kill")
        .args(["-TERM", pid.trim()])
        .status()
        .unwrap();
    assert!(st.success());
    let (host, port) = rig.hosts[1].clone();
    wait_for("daemon 2 gone", d, Duration::from_secs(20), || {
        std::net::TcpStream::connect((host.as_str(), port)).is_err()
    });

    let t = Instant::now();
    let out = workers(d);
    eprintln!(
        "kiln workers (1 down) took {:.1} s",
        t.elapsed().as_secs_f64()
    );
    assert!(!out.status.success(), "{}", text(&out));
    let table = String::from_utf8_lossy(&out.stdout).to_string();
    eprintln!("{table}");
    assert!(
        table_line(&table, "w1").trim_end().ends_with(" ok"),
        "{table}"
    );
    let dead = table_line(&table, "w2");
    assert!(
        dead.contains("unreachable") && dead.contains("Connection refused"),
        "the reason is given: {table}"
    );
}

#[test]
fn drifting_slot_is_flagged_and_taken_out_of_service() {
    let _serial = serial();
    let workers = "(workers (local (name steady) (slots 1)) (local (name drifting) (slots 1)))";
    let calibration =
        "(calibration (benchmark cal) (every 2) (max-drift 0.5) (take-out-of-service #t))";
    let search = "(random-walk (steps 20) (flips 1))";
    let dir = campaign_dir(&campaign_config(search, 2, 1, workers, calibration));
    let d = dir.path();
    let child = start_campaign(d, &worker());

    wait_for("4 decided steps", d, Duration::from_secs(60), || {
        decided(d) >= 4
    });
    // The drifting worker's machine gets 4 times slower at the calibration benchmark.
    std::fs::write(d.join("delays/drifting"), "0.4").unwrap();
    finish_campaign(child, d, Duration::from_secs(120));
    let steps = assert_every_step_once(d, 40);

    let row = worker_row(d, "drifting").expect("drifting in the snapshot");
    let cal = &row["calibration"][0];
    eprintln!("drifting: {cal}");
    assert_eq!(cal["flagged"], true, "{row}");
    assert_eq!(cal["out_of_service"], true, "{row}");
    let reference = cal["reference_ms"].as_f64().unwrap();
    let last = cal["last_ms"].as_f64().unwrap();
    assert!(reference < 200.0 && last > 300.0, "{row}");
    let flagged_ms = cal["flagged_ms"].as_u64().unwrap();
    assert_eq!(
        measured_by_since(&steps, "drifting", flagged_ms),
        0,
        "a slot out of service gets no jobs"
    );
    assert!(
        steps.iter().any(|s| s.worker == "drifting"),
        "drifting worked before it drifted"
    );

    let steady = worker_row(d, "steady").unwrap();
    let cal = &steady["calibration"][0];
    assert_eq!(cal["flagged"], false, "{steady}");
    assert!(cal["count"].as_u64().unwrap() >= 2, "{steady}");
}
