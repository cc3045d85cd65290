//! The comparisons of `scripts/bench`, run side by side and written up.
//!
//! 1. overhead: no-op steps through the local worker and 1, 2, 4 SSH workers
//!    on loopback; peer: a fresh `scp` + `ssh host true` per step.
//! 2. fidelity: `kiln-worker measure` against hyperfine on the same commands.
//! 3. store: persisting one step, exporting 100 k and 1 M steps, peak RSS.
//! 4. scale: 64 local worker slots; controller CPU against worker CPU.
//! 5. slurm: no-op steps through a Slurm worker against the local worker (scripts/slurm-rig),
//!    and the time from `scancel` of a worker's job mid-step to the step's re-dispatch.
//!
//! Every kiln figure is taken for each kiln version given (`--kiln-bin`, and
//! `--baseline-bin` for a before/after table), interleaved within each
//! repetition so drift in the machine's load hits both alike.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};

use crate::procs::{self, Account};

/// Start-up measurements per tool (a lone run of `true`), for their median.
const STARTUP_SAMPLES: usize = 7;
use crate::kspans;
use crate::report::{self, fmt, ratio, Results, Table};
use crate::synth;

/// Options of `kiln-bench suite`.
#[derive(clap::Args, Debug)]
pub struct Options {
    /// Fewer steps and one repetition (a few minutes).
    #[arg(long)]
    quick: bool,
    /// Folder holding the kiln and kiln-worker binaries to measure.
    #[arg(long)]
    kiln_bin: PathBuf,
    /// Their label in the tables.
    #[arg(long, default_value = "after")]
    label: String,
    /// Folder holding a baseline build of kiln and kiln-worker ("before").
    #[arg(long)]
    baseline_bin: Option<PathBuf>,
    /// The baseline's label in the tables.
    #[arg(long, default_value = "before")]
    baseline_label: String,
    /// Where REPORT.md and raw.csv go.
    #[arg(long, default_value = "results/bench")]
    out: PathBuf,
    /// Scratch folder (stores, campaign folders, the SSH rig).
    #[arg(long, default_value = "target/bench-work")]
    work: PathBuf,
    /// Repetitions of every comparison (default 3, 1 with --quick).
    #[arg(long)]
    reps: Option<usize>,
    /// Sections to run.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "overhead,fidelity,store,scale,slurm"
    )]
    sections: Vec<String>,
    /// Port of the loopback sshd rig.
    #[arg(long, default_value_t = 2391)]
    rig_port: u16,
    /// The largest synthetic store exported (default 1 000 000, 100 000 with --quick).
    #[arg(long)]
    max_store: Option<u64>,
    /// The repository root (for scripts/ssh-rig).
    #[arg(long, default_value = ".")]
    repo: PathBuf,
    /// A line about how the binaries were built, for the report.
    #[arg(long, default_value = "")]
    build_note: String,
}

/// One run of a measuring tool (hyperfine or `kiln-worker measure`) on a command.
struct ToolRun {
    /// "hyperfine", or the kiln version's label.
    label: String,
    /// The tool's process id (its runs are its children).
    pid: u32,
    /// Median and mean of the measured runs as the tool timed them, s.
    median: f64,
    mean: f64,
    /// Wall time of the whole tool run, s.
    wall: f64,
    /// Sum of every run's time, warm-ups included, s.
    sum_all: f64,
    /// The measured (not warm-up) runs' times, s.
    times: Vec<f64>,
}

/// A tool run of the fidelity rounds, to find its runs in the kernel's record.
struct Invocation {
    case: &'static str,
    label: String,
    rep: usize,
    pid: u32,
    /// The file name of the program its runs exec.
    program: String,
    /// Runs it made, warm-ups included.
    runs: u32,
}

/// The file name a command's runs exec (`argv[0]`'s last component).
fn program_name(argv: &[String]) -> String {
    Path::new(&argv[0])
        .file_name()
        .map_or_else(|| argv[0].clone(), |n| n.to_string_lossy().into_owned())
}

/// A kiln build under test.
#[derive(Debug, Clone)]
struct Version {
    label: String,
    bin: PathBuf,
}

impl Version {
    fn kiln(&self) -> PathBuf {
        self.bin.join("kiln")
    }
    fn worker(&self) -> PathBuf {
        self.bin.join("kiln-worker")
    }
}

/// Sizes of the workloads.
struct Sizes {
    reps: usize,
    /// Steps per chain of the throughput runs (2 chains).
    throughput_steps: u32,
    /// Steps of the serial runs (1 chain, 1 in flight, 1 slot).
    serial_steps: u32,
    /// Peer steps per repetition.
    peer_steps: u32,
    /// Timed runs and warm-ups of the fidelity comparisons.
    fidelity_runs: u32,
    fidelity_warmup: u32,
    /// Runs of `true` for the per-run overhead.
    true_runs: u32,
    /// Steps persisted one by one.
    latency_steps: u32,
    /// Stores exported.
    stores: Vec<u64>,
    /// Steps per chain at scale (16 chains).
    scale_steps: u32,
}

/// The SSH rig, taken down on drop.
struct Rig {
    script: PathBuf,
    dir: PathBuf,
    port: u16,
    /// Per daemon: address and pid.
    daemons: Vec<(String, i32)>,
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

    fn pids(&self, n: usize) -> Vec<i32> {
        self.daemons.iter().take(n).map(|d| d.1).collect()
    }

    /// `(ssh ...)` worker entries for the first `n` daemons.
    fn workers(&self, n: usize, slots: u32, label: &str) -> String {
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

    fn ssh_args(&self) -> Vec<String> {
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
struct SlurmRig {
    script: PathBuf,
    dir: PathBuf,
}

impl SlurmRig {
    /// The rig, or why it cannot run here.
    fn up(script: &Path, dir: &Path) -> Result<std::result::Result<SlurmRig, String>> {
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
fn slurm_workers(name: &str, nodes: u32, rundir: &Path) -> String {
    format!(
        "(slurm (name {name}) (nodes {nodes}) (partition \"kiln\") (cpus-per-task 1) \
         (rundir \"{}\"))",
        rundir.display()
    )
}

/// What one `kiln run` of the no-op campaign gave.
struct CampaignRun {
    steps: usize,
    ok: usize,
    cached: usize,
    /// First dispatch to last decision, seconds.
    span_s: f64,
    /// Median measured wall time of a run of the benchmark, seconds.
    run_s: f64,
    account: Account,
    /// CPU of the SSH daemons' trees (sshd, kiln-worker, the benchmark), seconds.
    remote_cpu_s: f64,
    /// Busy and total CPU seconds of the machine during the run.
    machine_busy_s: f64,
    machine_total_s: f64,
}

struct Suite {
    opts: Options,
    sizes: Sizes,
    versions: Vec<Version>,
    work: PathBuf,
    out: PathBuf,
    exe: PathBuf,
    results: Results,
    notes: Vec<String>,
    machine: Vec<(String, String)>,
    started: Instant,
    rig: Option<Rig>,
    rig_skip: Option<String>,
    cpu_iterations: u64,
}

/// Runs the suite.
pub fn run(opts: Options) -> Result<()> {
    let quick = opts.quick;
    let reps = opts.reps.unwrap_or(if quick { 1 } else { 3 });
    let sizes = if quick {
        Sizes {
            reps,
            throughput_steps: 400,
            serial_steps: 150,
            peer_steps: 10,
            fidelity_runs: 10,
            fidelity_warmup: 1,
            true_runs: 300,
            latency_steps: 500,
            stores: vec![100_000],
            scale_steps: 100,
        }
    } else {
        Sizes {
            reps,
            throughput_steps: 1500,
            serial_steps: 400,
            peer_steps: 15,
            fidelity_runs: 33,
            fidelity_warmup: 1,
            true_runs: 999,
            latency_steps: 2000,
            stores: vec![100_000, 1_000_000],
            scale_steps: 250,
        }
    };
    let mut sizes = sizes;
    if let Some(max) = opts.max_store {
        sizes.stores.retain(|s| *s <= max);
        if !sizes.stores.contains(&max) {
            sizes.stores.push(max);
        }
    }
    let mut versions = vec![Version {
        label: opts.label.clone(),
        bin: opts.kiln_bin.canonicalize().context("--kiln-bin")?,
    }];
    if let Some(b) = &opts.baseline_bin {
        versions.push(Version {
            label: opts.baseline_label.clone(),
            bin: b.canonicalize().context("--baseline-bin")?,
        });
    }
    for v in &versions {
        for b in [v.kiln(), v.worker()] {
            if !b.is_file() {
                bail!("{} is missing", b.display());
            }
        }
    }
    fs::create_dir_all(&opts.work)?;
    fs::create_dir_all(&opts.out)?;
    let mut suite = Suite {
        work: opts.work.canonicalize()?,
        out: opts.out.canonicalize()?,
        exe: std::env::current_exe()?,
        sizes,
        versions,
        results: Results::default(),
        notes: Vec::new(),
        machine: Vec::new(),
        started: Instant::now(),
        rig: None,
        rig_skip: None,
        cpu_iterations: 0,
        opts,
    };
    suite.describe_machine("start");
    let sections = suite.opts.sections.clone();
    let mut failed = Vec::new();
    for s in &sections {
        let t = Instant::now();
        eprintln!("== {s}");
        let r = match s.as_str() {
            "overhead" => suite.overhead(),
            "fidelity" => suite.fidelity(),
            "store" => suite.store(),
            "scale" => suite.scale(),
            "slurm" => suite.slurm(),
            other => Err(anyhow::anyhow!("unknown section {other}")),
        };
        if let Err(e) = r {
            eprintln!("kiln-bench: section {s} failed: {e:#}");
            suite.notes.push(format!("Section {s} failed: {e:#}"));
            failed.push(s.clone());
        }
        eprintln!("== {s} took {:.0} s", t.elapsed().as_secs_f64());
        suite.results.write_csv(&suite.out.join("raw.csv"))?;
    }
    suite.rig = None;
    suite.describe_machine("end");
    suite.write_report()?;
    eprintln!(
        "kiln-bench: {} and {} written in {:.0} s",
        suite.out.join("REPORT.md").display(),
        suite.out.join("raw.csv").display(),
        suite.started.elapsed().as_secs_f64()
    );
    if failed.is_empty() {
        Ok(())
    } else {
        bail!("sections failed: {}", failed.join(", "))
    }
}

fn first_line(cmd: &str, args: &[&str]) -> String {
    Command::new(cmd)
        .args(args)
        .output()
        .ok()
        .map(|o| {
            let text = if o.stdout.is_empty() {
                o.stderr
            } else {
                o.stdout
            };
            String::from_utf8_lossy(&text)
                .lines()
                .next()
                .unwrap_or("")
                .trim()
                .to_string()
        })
        .unwrap_or_else(|| "missing".into())
}

/// The noop benchmark's knobs: 12 knobs of 20 values, so a random walk's
/// proposals rarely repeat (a repeat reuses an earlier measurement).
fn knobs() -> String {
    (0..12)
        .map(|k| {
            let values: Vec<String> = (0..20).map(|v| v.to_string()).collect();
            format!("(k{k} {})", values.join(" "))
        })
        .collect::<Vec<_>>()
        .join("\n            ")
}

fn noop_config(steps: u32, chains: u32, parallel: u32, workers: &str) -> String {
    format!(
        r#"(campaign
  (name noop)
  (store "store")
  (objective (metric wall-time) (statistic median))
  (runs (warmup 0) (min 1) (max 1))
  (experiments
    ((benchmark noop) (search (random-walk (steps {steps}))) (chains {chains}) (seed 1) (parallel {parallel})))
  (benchmarks
    ((name noop) (kind knobs)
     (knobs {knobs})
     (sources "noop") (build ()) (run ("true")) (check-output none) (timeout-s 10)))
  (workers
    {workers}))
"#,
        knobs = knobs()
    )
}

fn parse_steps_csv(path: &Path) -> Result<(usize, usize, usize, f64, f64)> {
    let mut r = csv::Reader::from_path(path)?;
    let head = r.headers()?.clone();
    let col = |name: &str| {
        head.iter()
            .position(|h| h == name)
            .with_context(|| format!("{} has no column {name}", path.display()))
    };
    let (c_disp, c_dec, c_wall, c_out, c_cached) = (
        col("dispatched_ms")?,
        col("decided_ms")?,
        col("wall-time.median")?,
        col("outcome")?,
        col("cached_from")?,
    );
    let (mut first, mut last) = (u64::MAX, 0u64);
    let (mut steps, mut ok, mut cached) = (0, 0, 0);
    let mut walls = Vec::new();
    for rec in r.records() {
        let rec = rec?;
        steps += 1;
        if &rec[c_out] == "ok" {
            ok += 1;
        }
        if !rec[c_cached].is_empty() {
            cached += 1;
        }
        first = first.min(rec[c_disp].parse().unwrap_or(u64::MAX));
        last = last.max(rec[c_dec].parse().unwrap_or(0));
        if let Ok(w) = rec[c_wall].parse::<f64>() {
            walls.push(w * 1e-9);
        }
    }
    let span = last.saturating_sub(first) as f64 / 1e3;
    Ok((steps, ok, cached, span, report::median(&walls)))
}

impl Suite {
    fn describe_machine(&mut self, when: &str) {
        let load = fs::read_to_string("/proc/loadavg").unwrap_or_default();
        let load: Vec<&str> = load.split_whitespace().take(3).collect();
        if when == "start" {
            let cpuinfo = fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
            let model = cpuinfo
                .lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .unwrap_or("unknown")
                .trim()
                .to_string();
            let mem = fs::read_to_string("/proc/meminfo")
                .unwrap_or_default()
                .lines()
                .next()
                .unwrap_or("")
                .split_whitespace()
                .nth(1)
                .and_then(|k| k.parse::<f64>().ok())
                .map_or("unknown".into(), |k| format!("{:.1} GiB", k / 1048576.0));
            let nproc = std::thread::available_parallelism().map_or(0, |n| n.get());
            self.machine.push(("nproc".into(), nproc.to_string()));
            self.machine.push(("CPU".into(), model));
            self.machine.push((
                "kernel".into(),
                fs::read_to_string("/proc/sys/kernel/osrelease")
                    .unwrap_or_default()
                    .trim()
                    .to_string(),
            ));
            self.machine.push(("memory".into(), mem));
            self.machine
                .push(("hyperfine".into(), first_line("hyperfine", &["--version"])));
            self.machine
                .push(("ssh".into(), first_line("ssh", &["-V"])));
            let rev = first_line(
                "git",
                &[
                    "-C",
                    &self.opts.repo.display().to_string(),
                    "describe",
                    "--always",
                    "--dirty",
                ],
            );
            self.machine.push(("kiln source".into(), rev));
            for v in &self.versions {
                self.machine
                    .push((format!("kiln '{}'", v.label), v.bin.display().to_string()));
            }
            if !self.opts.build_note.is_empty() {
                self.machine
                    .push(("build".into(), self.opts.build_note.clone()));
            }
            self.machine.push((
                "mode".into(),
                format!(
                    "{}, {} repetition(s), medians over repetitions",
                    if self.opts.quick { "--quick" } else { "full" },
                    self.sizes.reps
                ),
            ));
        }
        self.machine.push((
            format!("load average at {when} (1/5/15 min)"),
            load.join(" "),
        ));
    }

    fn nproc(&self) -> f64 {
        std::thread::available_parallelism().map_or(1, |n| n.get()) as f64
    }

    /// Versions in the order of repetition `rep` (alternating, against drift).
    fn order(&self, rep: usize) -> Vec<Version> {
        let mut v = self.versions.clone();
        if rep % 2 == 1 {
            v.reverse();
        }
        v
    }

    fn accounted(
        &self,
        cmd: &[String],
        cwd: &Path,
        env: &[(&str, &Path)],
        timeout: f64,
    ) -> Result<Account> {
        let mut c = Command::new(&self.exe);
        c.arg("account")
            .arg("--timeout")
            .arg(timeout.to_string())
            .arg("--stdout")
            .arg(cwd.join("stdout.txt"))
            .arg("--stderr")
            .arg(cwd.join("stderr.txt"))
            .arg("--")
            .args(cmd)
            .current_dir(cwd)
            .stdin(Stdio::null());
        for (k, v) in env {
            c.env(k, v);
        }
        let out = c.output()?;
        if !out.status.success() {
            bail!(
                "kiln-bench account failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let a: Account = serde_json::from_slice(&out.stdout)?;
        if a.exit != 0 {
            let err = fs::read_to_string(cwd.join("stderr.txt")).unwrap_or_default();
            let tail: String = err
                .lines()
                .rev()
                .take(15)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect::<Vec<_>>()
                .join("\n");
            bail!(
                "{:?} exited with {} in {}:\n{tail}",
                cmd,
                a.exit,
                cwd.display()
            );
        }
        if a.left_behind > 0 {
            eprintln!(
                "  note: {:?} left {} process(es) behind",
                cmd[0], a.left_behind
            );
        }
        Ok(a)
    }
    /// An empty campaign folder `runs/NAME-VERSION` with its `noop` benchmark folder.
    fn fresh_run_dir(&self, v: &Version, name: &str) -> Result<PathBuf> {
        let dir = self.work.join("runs").join(format!("{name}-{}", v.label));
        if dir.exists() {
            fs::remove_dir_all(&dir)?;
        }
        fs::create_dir_all(dir.join("noop"))?;
        Ok(dir)
    }

    /// Runs the no-op campaign `config` with version `v` in a fresh folder.
    fn campaign(
        &self,
        v: &Version,
        name: &str,
        config: &str,
        daemons: &[i32],
    ) -> Result<CampaignRun> {
        let dir = self.fresh_run_dir(v, name)?;
        fs::write(
            dir.join("noop/README"),
            "a benchmark that does nothing: `true`\n",
        )?;
        fs::write(dir.join("campaign.sexp"), config)?;
        let remote0: f64 = daemons
            .iter()
            .map(|p| procs::cpu_with_reaped_children(*p))
            .sum();
        let (b0, t0) = procs::machine_jiffies();
        let cmd = vec![
            v.kiln().display().to_string(),
            "run".into(),
            "campaign.sexp".into(),
        ];
        let account = self.accounted(&cmd, &dir, &[("KILN_WORKER", &v.worker())], 600.0)?;
        procs::wait_childless(daemons, std::time::Duration::from_secs(5));
        let remote1: f64 = daemons
            .iter()
            .map(|p| procs::cpu_with_reaped_children(*p))
            .sum();
        let (b1, t1) = procs::machine_jiffies();
        let (steps, ok, cached, span_s, run_s) = parse_steps_csv(&dir.join("store/steps.csv"))?;
        fs::remove_dir_all(&dir)?;
        Ok(CampaignRun {
            steps,
            ok,
            cached,
            span_s,
            run_s,
            account,
            remote_cpu_s: remote1 - remote0,
            machine_busy_s: procs::jiffies_s(b1 - b0),
            machine_total_s: procs::jiffies_s(t1 - t0),
        })
    }

    fn record_campaign(
        &mut self,
        section: &str,
        config: &str,
        tool: &str,
        rep: usize,
        r: &CampaignRun,
    ) {
        let n = r.steps as f64;
        let a = &r.account;
        let res = &mut self.results;
        res.add(section, config, tool, rep, "steps", n);
        res.add(
            section,
            config,
            tool,
            rep,
            "failed_steps",
            (r.steps - r.ok) as f64,
        );
        res.add(section, config, tool, rep, "cached_steps", r.cached as f64);
        res.add(section, config, tool, rep, "wall_s", a.wall_s);
        res.add(section, config, tool, rep, "span_s", r.span_s);
        res.add(section, config, tool, rep, "steps_per_s", n / r.span_s);
        res.add(
            section,
            config,
            tool,
            rep,
            "steps_per_s_end_to_end",
            n / a.wall_s,
        );
        res.add(section, config, tool, rep, "step_ms", 1e3 * r.span_s / n);
        res.add(section, config, tool, rep, "run_ms", 1e3 * r.run_s);
        res.add(
            section,
            config,
            tool,
            rep,
            "overhead_ms",
            1e3 * (r.span_s / n - r.run_s),
        );
        res.add(
            section,
            config,
            tool,
            rep,
            "ctl_cpu_ms_per_step",
            1e3 * a.self_cpu_s() / n,
        );
        res.add(
            section,
            config,
            tool,
            rep,
            "ctl_user_ms_per_step",
            1e3 * a.self_user_s / n,
        );
        res.add(
            section,
            config,
            tool,
            rep,
            "ctl_sys_ms_per_step",
            1e3 * a.self_sys_s / n,
        );
        res.add(
            section,
            config,
            tool,
            rep,
            "children_cpu_ms_per_step",
            1e3 * (a.tree_cpu_s - a.self_cpu_s()) / n,
        );
        res.add(
            section,
            config,
            tool,
            rep,
            "remote_cpu_ms_per_step",
            1e3 * r.remote_cpu_s / n,
        );
        res.add(
            section,
            config,
            tool,
            rep,
            "ctl_cores",
            a.self_cpu_s() / a.wall_s,
        );
        let all = a.tree_cpu_s + r.remote_cpu_s;
        res.add(
            section,
            config,
            tool,
            rep,
            "ctl_share_of_cpu",
            a.self_cpu_s() / all,
        );
        res.add(section, config, tool, rep, "tree_cores", all / a.wall_s);
        res.add(
            section,
            config,
            tool,
            rep,
            "machine_busy",
            r.machine_busy_s / r.machine_total_s.max(1e-9),
        );
        res.add(
            section,
            config,
            tool,
            rep,
            "ctl_max_rss_mib",
            a.max_rss_kib as f64 / 1024.0,
        );
        eprintln!(
            "  {config:<10} {tool:<10} rep {rep}: {:>5} steps, {:>7.1} steps/s ({:.1} end to end), step {:.3} ms, run {:.3} ms, controller CPU {:.3} ms/step{}",
            r.steps,
            n / r.span_s,
            n / a.wall_s,
            1e3 * r.span_s / n,
            1e3 * r.run_s,
            1e3 * a.self_cpu_s() / n,
            if r.steps != r.ok { format!(", {} FAILED", r.steps - r.ok) } else { String::new() }
        );
    }

    fn ensure_rig(&mut self) -> Result<()> {
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

    fn overhead(&mut self) -> Result<()> {
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
                    per_version(&|l| noop_config(tsteps, 2, 4, &rig.workers(n, 2, l))),
                    rig.pids(n),
                ));
            }
            configs.push((
                "serial-ssh1".into(),
                per_version(&|l| noop_config(ssteps, 1, 1, &rig.workers(1, 1, l))),
                rig.pids(1),
            ));
            // Deploy each version's worker once, so no repetition pays for it.
            for v in &self.versions {
                let dir = self.work.join("runs").join(format!("deploy-{}", v.label));
                fs::create_dir_all(dir.join("noop"))?;
                fs::write(dir.join("noop/README"), "noop\n")?;
                fs::write(
                    dir.join("campaign.sexp"),
                    noop_config(10, 1, 1, &rig.workers(4, 2, &v.label)),
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

    /// Slurm workers (the version under test only: older builds have none) on a single-node
    /// Slurm (scripts/slurm-rig): serial no-op steps through one Slurm worker and through the
    /// local worker, interleaved; then, per repetition, `scancel` of a worker's job mid-step
    /// and the time until the controller re-queues the step and another worker runs it.
    fn slurm(&mut self) -> Result<()> {
        let dir = self.work.join("slurm-rig");
        let script = self.opts.repo.join("scripts/slurm-rig");
        let rig = SlurmRig::up(&script, &dir)?;
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

    fn fidelity(&mut self) -> Result<()> {
        let dir = self.work.join("fidelity");
        fs::create_dir_all(&dir)?;
        let src = dir.join("cpuloop.c");
        fs::write(
            &src,
            "#include <stdlib.h>\n\
             int main(int argc, char **argv) {\n\
             \x20   unsigned long n = argc > 1 ? strtoul(argv[1], 0, 10) : 1000000;\n\
             \x20   volatile unsigned long x = 0;\n\
             \x20   for (unsigned long i = 0; i < n; i++) x += i * i;\n\
             \x20   return (int)(x & 0);\n\
             }\n",
        )?;
        let bin = dir.join("cpuloop");
        let st = Command::new("cc")
            .args(["-O2", "-o"])
            .arg(&bin)
            .arg(&src)
            .status()?;
        if !st.success() {
            bail!("cannot compile {}", src.display());
        }
        // Calibrate to about 100 ms.
        let probe = 50_000_000u64;
        let mut best = f64::MAX;
        for _ in 0..3 {
            let t = Instant::now();
            Command::new(&bin).arg(probe.to_string()).status()?;
            best = best.min(t.elapsed().as_secs_f64());
        }
        self.cpu_iterations = (probe as f64 * 0.1 / best) as u64;
        let cpu = bin.display().to_string();
        let cases: Vec<(&str, Vec<String>, u32, u32)> = vec![
            (
                "sleep-50ms",
                vec!["sleep".into(), "0.05".into()],
                self.sizes.fidelity_runs,
                self.sizes.fidelity_warmup,
            ),
            (
                "cpu-100ms",
                vec![cpu, self.cpu_iterations.to_string()],
                self.sizes.fidelity_runs,
                self.sizes.fidelity_warmup,
            ),
            ("true", vec!["true".into()], self.sizes.true_runs, 0),
        ];
        // Each tool's one-time start-up (process start, and for kiln the first perf counter,
        // which makes the kernel patch its text): a run of `true` alone, less that run.
        // Per-run overhead is then also given without it, as a per-run figure should be.
        let mut startup: BTreeMap<String, f64> = BTreeMap::new();
        let argv_true = ["true".to_string()];
        for rep in 0..STARTUP_SAMPLES {
            let mut tools: Vec<Option<Version>> = vec![None];
            tools.extend(self.versions.iter().cloned().map(Some));
            for tool in tools {
                let run = match &tool {
                    None => self.hyperfine(&dir, &argv_true, 1, 0)?,
                    Some(v) => self.kiln_measure(&dir, v, &argv_true, 1, 0)?,
                };
                let ms = 1e3 * (run.wall - run.sum_all);
                self.results
                    .add("fidelity", "startup", &run.label, rep, "startup_ms", ms);
            }
        }
        for label in std::iter::once("hyperfine".to_string())
            .chain(self.versions.iter().map(|v| v.label.clone()))
        {
            let ms = self
                .results
                .median("fidelity", "startup", &label, "startup_ms");
            startup.insert(label, ms.unwrap_or(0.0) * 1e-3);
        }
        // Fine-grained interleaving against the machine's other load: each
        // repetition is three rounds of a third of the runs per tool, the
        // tools' order rotating; medians are over every run a tool measured.
        let mut pooled: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
        let rounds = 3 * self.sizes.reps;
        let mut invocations = Vec::new();
        let recorder = kspans::Recorder::start()
            .map_err(|e| eprintln!("  no kernel view of the runs (sched trace events): {e:#}"))
            .ok();
        for rep in 0..rounds {
            for (name, argv, runs, warmup) in &cases {
                let runs = &runs.div_ceil(3).max(3);
                let mut tools: Vec<Option<Version>> = vec![None];
                tools.extend(self.versions.iter().cloned().map(Some));
                let n = tools.len();
                tools.rotate_left(rep % n);
                for tool in tools {
                    let ToolRun {
                        label,
                        pid,
                        median,
                        mean,
                        wall,
                        sum_all,
                        times,
                    } = match &tool {
                        None => self.hyperfine(&dir, argv, *runs, *warmup)?,
                        Some(v) => self.kiln_measure(&dir, v, argv, *runs, *warmup)?,
                    };
                    pooled
                        .entry((name.to_string(), label.clone()))
                        .or_default()
                        .extend(times);
                    invocations.push(Invocation {
                        case: name,
                        label: label.clone(),
                        rep,
                        pid,
                        program: program_name(argv),
                        runs: runs + warmup,
                    });
                    let total = f64::from(runs + warmup);
                    let res = &mut self.results;
                    res.add("fidelity", name, &label, rep, "median_ms", 1e3 * median);
                    res.add("fidelity", name, &label, rep, "mean_ms", 1e3 * mean);
                    res.add("fidelity", name, &label, rep, "tool_wall_s", wall);
                    res.add(
                        "fidelity",
                        name,
                        &label,
                        rep,
                        "per_run_ms",
                        1e3 * wall / total,
                    );
                    res.add(
                        "fidelity",
                        name,
                        &label,
                        rep,
                        "overhead_ms_per_run",
                        1e3 * (wall - sum_all) / total,
                    );
                    res.add(
                        "fidelity",
                        name,
                        &label,
                        rep,
                        "overhead_ex_startup_ms_per_run",
                        1e3 * (wall - sum_all - startup[&label]) / total,
                    );
                    eprintln!(
                        "  {name:<10} {label:<10} rep {rep}: median {:.3} ms, tool {:.2} s, {:.3} ms per run, overhead {:.3} ms per run",
                        1e3 * median,
                        wall,
                        1e3 * wall / total,
                        1e3 * (wall - sum_all) / total
                    );
                }
            }
        }
        match recorder.map(kspans::Recorder::finish) {
            Some(Ok(events)) => self.record_kernel_gaps(&events, &invocations),
            Some(Err(e)) => eprintln!("  no kernel view of the runs: {e:#}"),
            None => {}
        }
        for ((name, label), times) in pooled {
            let median = report::median(&times);
            self.results.add(
                "fidelity",
                &name,
                &label,
                0,
                "pooled_median_ms",
                1e3 * median,
            );
            self.results.add(
                "fidelity",
                &name,
                &label,
                0,
                "pooled_runs",
                times.len() as f64,
            );
        }
        Ok(())
    }

    /// Per-run overhead from the kernel's record: for each tool run, the
    /// median time from one run's exit to the next run's exec, and every
    /// such gap pooled per tool and command.
    fn record_kernel_gaps(&mut self, events: &[kspans::Event], invocations: &[Invocation]) {
        let mut pooled: BTreeMap<(&str, &str), Vec<f64>> = BTreeMap::new();
        for inv in invocations {
            let runs = kspans::runs_of(events, inv.pid, &inv.program);
            if runs.len() != inv.runs as usize {
                eprintln!(
                    "  kernel view: {} {} rep {} shows {} of its {} runs (perf dropped events?); left out",
                    inv.case,
                    inv.label,
                    inv.rep,
                    runs.len(),
                    inv.runs
                );
                continue;
            }
            let gaps = kspans::gaps(&runs);
            if gaps.is_empty() {
                continue;
            }
            let (case, label, rep) = (inv.case, inv.label.as_str(), inv.rep);
            let ms = 1e3 * report::median(&gaps);
            self.results
                .add("fidelity", case, label, rep, "kernel_gap_ms", ms);
            pooled.entry((case, label)).or_default().extend(gaps);
        }
        for ((case, label), gaps) in &pooled {
            let ms = 1e3 * report::median(gaps);
            self.results
                .add("fidelity", case, label, 0, "pooled_kernel_gap_ms", ms);
            self.results
                .add("fidelity", case, label, 0, "kernel_gaps", gaps.len() as f64);
            let Some(hyperfine) = pooled
                .get(&(case, "hyperfine"))
                .filter(|_| *label != "hyperfine")
            else {
                continue;
            };
            let (d, lo, hi) = report::median_difference(gaps, hyperfine);
            for (metric, v) in [
                ("kernel_gap_vs_hyperfine_ms", d),
                ("kernel_gap_vs_hyperfine_lo_ms", lo),
                ("kernel_gap_vs_hyperfine_hi_ms", hi),
            ] {
                self.results
                    .add("fidelity", case, label, 0, metric, 1e3 * v);
            }
        }
    }

    /// hyperfine on `argv`.
    fn hyperfine(&self, dir: &Path, argv: &[String], runs: u32, warmup: u32) -> Result<ToolRun> {
        let json = dir.join("hyperfine.json");
        let t = Instant::now();
        let child = Command::new("hyperfine")
            .args([
                "-N",
                "--style",
                "none",
                "--warmup",
                &warmup.to_string(),
                "--runs",
                &runs.to_string(),
                "--export-json",
            ])
            .arg(&json)
            .arg(argv.join(" "))
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let pid = child.id();
        let out = child.wait_with_output()?;
        let wall = t.elapsed().as_secs_f64();
        if !out.status.success() {
            bail!("hyperfine failed: {}", String::from_utf8_lossy(&out.stderr));
        }
        let v: serde_json::Value = serde_json::from_slice(&fs::read(&json)?)?;
        let r = &v["results"][0];
        let times: Vec<f64> = r["times"]
            .as_array()
            .context("hyperfine times")?
            .iter()
            .filter_map(|t| t.as_f64())
            .collect();
        let median = r["median"].as_f64().context("hyperfine median")?;
        Ok(ToolRun {
            label: "hyperfine".into(),
            pid,
            median,
            mean: r["mean"].as_f64().context("hyperfine mean")?,
            wall,
            // Warm-up runs are not exported: count them at the median.
            sum_all: times.iter().sum::<f64>() + f64::from(warmup) * median,
            times,
        })
    }

    /// `kiln-worker measure` on `argv`, as `hyperfine`.
    fn kiln_measure(
        &self,
        dir: &Path,
        v: &Version,
        argv: &[String],
        runs: u32,
        warmup: u32,
    ) -> Result<ToolRun> {
        let t = Instant::now();
        let child = Command::new(v.worker())
            .args([
                "measure",
                "--json",
                "--warmup",
                &warmup.to_string(),
                "--runs",
                &runs.to_string(),
                "--",
            ])
            .args(argv)
            .current_dir(dir)
            .env("KILN_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()?;
        let pid = child.id();
        let out = child.wait_with_output()?;
        let wall = t.elapsed().as_secs_f64();
        if !out.status.success() {
            bail!(
                "kiln-worker measure failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let m: serde_json::Value = serde_json::from_slice(&out.stdout)?;
        let s = &m["summary"]["wall-time"];
        let runs = m["runs"].as_array().context("kiln runs")?;
        let wall_of = |r: &serde_json::Value| r["metrics"]["wall-time"]["measured"].as_f64();
        Ok(ToolRun {
            label: v.label.clone(),
            pid,
            median: s["median"].as_f64().context("kiln median")? * 1e-9,
            mean: s["mean"].as_f64().context("kiln mean")? * 1e-9,
            wall,
            sum_all: runs.iter().filter_map(wall_of).sum::<f64>() * 1e-9,
            times: runs
                .iter()
                .filter(|r| r["warmup"] == false)
                .filter_map(wall_of)
                .map(|t| t * 1e-9)
                .collect(),
        })
    }

    fn store(&mut self) -> Result<()> {
        // Latency of persisting one step, as the campaign loop does.
        let dir = self.work.join("store-latency");
        if dir.exists() {
            fs::remove_dir_all(&dir)?;
        }
        for rep in 0..self.sizes.reps {
            let dir = dir.join(rep.to_string());
            let l = synth::latency(&dir, self.sizes.latency_steps)?;
            let both: Vec<f64> = l
                .put_result
                .iter()
                .zip(&l.decide)
                .map(|(a, b)| a + b)
                .collect();
            for (metric, v) in [
                ("put_result", &l.put_result),
                ("decide", &l.decide),
                ("put_result_and_decide", &both),
            ] {
                for p in [50.0, 99.0] {
                    self.results.add(
                        "store",
                        "persist-step",
                        "store-api",
                        rep,
                        &format!("{metric}_p{p}_ms"),
                        1e3 * report::percentile(v, p),
                    );
                }
            }
            eprintln!(
                "  persist rep {rep}: put_result p50 {:.3} ms p99 {:.3} ms; decide p50 {:.3} ms p99 {:.3} ms",
                1e3 * report::percentile(&l.put_result, 50.0),
                1e3 * report::percentile(&l.put_result, 99.0),
                1e3 * report::percentile(&l.decide, 50.0),
                1e3 * report::percentile(&l.decide, 99.0)
            );
        }
        fs::remove_dir_all(&dir)?;
        // Exports of big stores, built once and kept in the scratch folder.
        for &n in &self.sizes.stores.clone() {
            let sdir = self.work.join(format!("store-{n}"));
            let marker = self.work.join(format!("store-{n}.built"));
            // v3: layout 2, an export row beside every step.
            let want = format!("v3 {n}");
            if fs::read_to_string(&marker).ok().as_deref() != Some(want.as_str()) {
                if sdir.exists() {
                    fs::remove_dir_all(&sdir)?;
                }
                eprintln!("  building a store of {n} steps");
                let b = synth::build(&sdir, n, 4)?;
                self.results.add(
                    "store",
                    &format!("build-{n}"),
                    "store-api",
                    0,
                    "steps_per_s",
                    b.steps as f64 / b.seconds,
                );
                for (metric, bytes) in
                    [("record_bytes", b.record_bytes), ("row_bytes", b.row_bytes)]
                {
                    let config = format!("build-{n}");
                    let res = &mut self.results;
                    res.add("store", &config, "store-api", 0, metric, bytes as f64);
                }
                eprintln!(
                    "  built in {:.1} s ({:.0} steps/s, {} bytes per record, {} per export row)",
                    b.seconds,
                    b.steps as f64 / b.seconds,
                    b.record_bytes,
                    b.row_bytes
                );
                fs::write(&marker, &want)?;
            }
            // Kilns older than the store's layout (the baseline) refuse it:
            // they export a copy as they wrote stores, made once.
            let layout1 = self.work.join(format!("store-{n}-layout1"));
            let layout1_marker = self.work.join(format!("store-{n}-layout1.built"));
            let mut reads_current = BTreeMap::new();
            for v in &self.versions {
                reads_current.insert(v.label.clone(), reads_store(v, &sdir)?);
            }
            let want_layout1 = reads_current.values().any(|r| !r);
            if want_layout1
                && fs::read_to_string(&layout1_marker).ok().as_deref() != Some(want.as_str())
            {
                if layout1.exists() {
                    fs::remove_dir_all(&layout1)?;
                }
                eprintln!("  copying the store of {n} steps in layout 1, for older kilns");
                synth::copy_as_layout_1(&sdir, &layout1)?;
                fs::write(&layout1_marker, &want)?;
            }
            let size = dir_size(&sdir);
            // Warm the page cache: the exports measure kiln, not the disk.
            let t = Instant::now();
            read_all(&sdir)?;
            if want_layout1 {
                read_all(&layout1)?;
            }
            let warm_s = t.elapsed().as_secs_f64();
            self.results.add(
                "store",
                &format!("export-{n}"),
                "store",
                0,
                "warm_read_mib_per_s",
                size as f64 / 1048576.0 / warm_s,
            );
            self.results.add(
                "store",
                &format!("export-{n}"),
                "store",
                0,
                "db_mib",
                size as f64 / 1048576.0,
            );
            let reps = if n >= 1_000_000 {
                self.sizes.reps.min(2)
            } else {
                self.sizes.reps
            };
            // Every version on the store it reads; once more (first repetition),
            // the working tree on the layout-1 copy: how stores written before
            // export rows export now.
            let mut runs = Vec::new();
            for rep in 0..reps {
                for v in self.order(rep) {
                    // The baseline's 1 M export takes a minute: once.
                    if n >= 1_000_000 && rep > 0 && v.label != self.versions[0].label {
                        continue;
                    }
                    let store = if reads_current[&v.label] {
                        &sdir
                    } else {
                        &layout1
                    };
                    runs.push((rep, v, store, format!("export-{n}")));
                }
                if rep == 0 && want_layout1 {
                    let v = self.versions[0].clone();
                    runs.push((rep, v, &layout1, format!("export-{n}-layout1")));
                }
            }
            for (rep, v, store, config) in runs {
                let run = self.work.join("runs").join(format!("export-{}", v.label));
                fs::create_dir_all(&run)?;
                let csv = run.join("steps.csv");
                let cmd = vec![
                    v.kiln().display().to_string(),
                    "export".into(),
                    store.display().to_string(),
                    "--table".into(),
                    "steps".into(),
                    "-o".into(),
                    csv.display().to_string(),
                ];
                let a = self.accounted(&cmd, &run, &[], 900.0)?;
                let said = fs::read_to_string(run.join("stderr.txt")).unwrap_or_default();
                let rows: f64 = said
                    .split_whitespace()
                    .nth(1)
                    .and_then(|r| r.parse().ok())
                    .unwrap_or(f64::NAN);
                if rows as u64 != n {
                    bail!("export wrote {rows} rows of {n}: {said}");
                }
                let res = &mut self.results;
                res.add(
                    "store",
                    &config,
                    &v.label,
                    rep,
                    "rows_per_s",
                    rows / a.wall_s,
                );
                res.add("store", &config, &v.label, rep, "wall_s", a.wall_s);
                res.add("store", &config, &v.label, rep, "cpu_s", a.self_cpu_s());
                res.add(
                    "store",
                    &config,
                    &v.label,
                    rep,
                    "max_rss_mib",
                    a.max_rss_kib as f64 / 1024.0,
                );
                eprintln!(
                    "  {config:<22} {:<10} rep {rep}: {:.1} s, {:.0} rows/s, peak RSS {:.0} MiB",
                    v.label,
                    a.wall_s,
                    rows / a.wall_s,
                    a.max_rss_kib as f64 / 1024.0
                );
                fs::remove_dir_all(&run)?;
            }
        }
        Ok(())
    }

    fn scale(&mut self) -> Result<()> {
        let workers: Vec<String> = (1..=8)
            .map(|k| format!("(local (name l{k}) (slots 8))"))
            .collect();
        let config = noop_config(self.sizes.scale_steps, 16, 4, &workers.join("\n    "));
        for rep in 0..self.sizes.reps {
            for v in self.order(rep) {
                let r = self.campaign(&v, "local-64", &config, &[])?;
                self.record_campaign("scale", "local-64", &v.label, rep, &r);
            }
        }
        Ok(())
    }

    fn write_report(&self) -> Result<()> {
        let mut o = Vec::new();
        self.report_into(&mut o)?;
        fs::write(self.out.join("REPORT.md"), o)?;
        Ok(())
    }

    fn report_into(&self, o: &mut Vec<u8>) -> Result<()> {
        let r = &self.results;
        let after = &self.versions[0].label;
        let before = self.versions.get(1).map(|v| v.label.clone());
        let both = |label: &str| -> String {
            match &before {
                Some(b) => format!("{label} ({b} → {after})"),
                None => label.to_string(),
            }
        };
        let pair = |section: &str, config: &str, metric: &str| -> String {
            let a = r.median(section, config, after, metric);
            match &before {
                Some(b) => format!(
                    "{} → **{}**",
                    fmt(r.median(section, config, b, metric)),
                    fmt(a)
                ),
                None => fmt(a),
            }
        };
        // A before → after table of campaign runs: one column per (heading, metric), one row
        // per (section, config, row name); configs that did not run are left out.
        let campaign_table =
            |first: &str, columns: &[(&str, &str)], rows: &[(&str, &str, &str)]| {
                let head: Vec<String> = std::iter::once(first.to_string())
                    .chain(columns.iter().map(|(h, _)| both(h)))
                    .collect();
                let mut t = Table::new(&head.iter().map(String::as_str).collect::<Vec<_>>());
                for &(sec, c, name) in rows {
                    if r.median(sec, c, after, "steps").is_some() {
                        t.row(
                            std::iter::once(name.to_string())
                                .chain(columns.iter().map(|(_, m)| pair(sec, c, m)))
                                .collect(),
                        );
                    }
                }
                t
            };
        writeln!(o, "# kiln benchmark report\n")?;
        writeln!(
            o,
            "Written by `scripts/bench` ({} s). Every figure is the median over repetitions; raw values \
             are in `raw.csv` (section, config, tool, rep, metric, value). Where two kiln builds are \
             compared, cells read `before → **after**`.\n",
            self.started.elapsed().as_secs()
        )?;
        let mut t = Table::new(&["machine", ""]);
        for (k, v) in &self.machine {
            t.row(vec![k.clone(), v.clone()]);
        }
        t.write(o)?;
        let mut targets: Vec<(String, String, String, Option<bool>)> = Vec::new();

        // 1. Overhead
        let ov = "overhead";
        if r.rows.iter().any(|x| x.section == ov) {
            writeln!(o, "## 1. Orchestration overhead (no-op steps)\n")?;
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
            campaign_table(
                "config",
                &[
                    ("steps/s", "steps_per_s"),
                    ("end-to-end steps/s", "steps_per_s_end_to_end"),
                    ("ctl CPU ms/step", "ctl_cpu_ms_per_step"),
                    ("ctl-side children CPU ms/step", "children_cpu_ms_per_step"),
                    ("remote CPU ms/step", "remote_cpu_ms_per_step"),
                    ("ctl cores", "ctl_cores"),
                ],
                &["local", "ssh1", "ssh2", "ssh4"].map(|c| (ov, c, c)),
            )
            .write(o)?;
            let (mut steps, mut cached, mut failed) = (0.0, 0.0, 0.0);
            for row in r.rows.iter().filter(|x| x.section == ov) {
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
            campaign_table(
                "serial config",
                &[
                    ("step latency ms", "step_ms"),
                    ("run of `true` ms", "run_ms"),
                    ("overhead ms/step", "overhead_ms"),
                    ("ctl CPU ms/step", "ctl_cpu_ms_per_step"),
                ],
                &["serial-local", "serial-ssh1"].map(|c| (ov, c, c)),
            )
            .write(o)?;
            let peer_ms = r.median(ov, "peer-scp-ssh", "peer", "step_ms");
            let peer_rate = r.median(ov, "peer-scp-ssh", "peer", "steps_per_s");
            if peer_ms.is_some() {
                let mut t = Table::new(&[
                    "vs peer (scp + ssh true per step)",
                    "peer",
                    "kiln",
                    "kiln / peer",
                ]);
                t.row(vec![
                    "per-step time, serial, 1 SSH worker (ms)".into(),
                    fmt(peer_ms),
                    fmt(r.median(ov, "serial-ssh1", after, "step_ms")),
                    ratio(peer_ms, r.median(ov, "serial-ssh1", after, "step_ms"))
                        .replace('×', "× faster"),
                ]);
                for c in ["ssh1", "ssh2", "ssh4"] {
                    t.row(vec![
                        format!("throughput, {c} (steps/s)"),
                        fmt(peer_rate),
                        fmt(r.median(ov, c, after, "steps_per_s")),
                        ratio(r.median(ov, c, after, "steps_per_s"), peer_rate),
                    ]);
                }
                t.write(o)?;
            }
            let local = r.median(ov, "local", after, "steps_per_s");
            targets.push((
                "≥ 500 no-op steps/s through the local worker".into(),
                fmt(local),
                pair(ov, "local", "steps_per_s"),
                local.map(|v| v >= 500.0),
            ));
            let ssh_over = r.median(ov, "serial-ssh1", after, "overhead_ms");
            targets.push((
                "< 5 ms orchestration overhead per step over SSH".into(),
                fmt(ssh_over),
                pair(ov, "serial-ssh1", "overhead_ms"),
                ssh_over.map(|v| v < 5.0),
            ));
            let ssh1 = r.median(ov, "ssh1", after, "steps_per_s");
            let x = ssh1.zip(peer_rate).map(|(a, b)| a / b);
            targets.push((
                "≥ 50 × the peer's per-step throughput (1 SSH worker)".into(),
                x.map_or("—".into(), |x| format!("{x:.0}×")),
                format!("kiln {} steps/s vs peer {}", fmt(ssh1), fmt(peer_rate)),
                x.map(|v| v >= 50.0),
            ));
        }

        // 2. Fidelity
        let fi = "fidelity";
        if r.rows.iter().any(|x| x.section == fi) {
            writeln!(
                o,
                "## 2. Measurement fidelity and overhead against hyperfine\n"
            )?;
            writeln!(
                o,
                "`kiln-worker measure --json --warmup W --runs R -- CMD` against `hyperfine -N --warmup W \
                 --runs R --export-json` on the same command, interleaved in rounds (each tool a third \
                 of the runs per round, {} warm-ups per round, the order rotating; medians over every run a \
                 tool measured, {} runs in all per tool and command; `true`: {} runs). \
                 The CPU-bound program is a C loop (`cc -O2`, {} iterations ≈ 100 ms). Per-run overhead = \
                 (wall time of the whole tool run − sum of the run times it measured) / runs; per-run \
                 cost = wall of the whole tool run / runs (with `true`, this is the tool's cost per run). \
                 The two tools time different spans: kiln's clock starts when the child is about to exec (its clone, perf counters and reaping fall outside a run), hyperfine's before it spawns the child; so the first definition bills kiln's process handling to overhead and hyperfine's to its runs, and it includes each tool's one-time start-up spread over a round's runs (the 'w/o start-up' columns subtract it; see below). The cost with `true` compares the whole work per run. Both are sensitive to other load on the machine (see the load averages above): a delay outside kiln's span counts as its overhead, inside hyperfine's as run time.\n",
                self.sizes.fidelity_warmup,
                self.sizes.fidelity_runs.div_ceil(3).max(3) * 3 * self.sizes.reps as u32,
                self.sizes.true_runs.div_ceil(3).max(3) * 3 * self.sizes.reps as u32,
                self.cpu_iterations
            )?;
            let startups: Vec<String> = std::iter::once("hyperfine".to_string())
                .chain(self.versions.iter().map(|v| v.label.clone()))
                .map(|l| {
                    let ms = r.median(fi, "startup", &l, "startup_ms");
                    format!("{l} {} ms", fmt(ms))
                })
                .collect();
            writeln!(
                o,
                "Start-up: the wall time of a tool run that measures one run of `true`, less that \
                 run (median of {STARTUP_SAMPLES} per tool): {}. kiln-worker's includes opening \
                 its first perf counters, for which the kernel patches its text once per process.\n",
                startups.join(", ")
            )?;
            if r.rows.iter().any(|x| x.metric == "pooled_kernel_gap_ms") {
                writeln!(
                    o,
                    "exit→exec: per-run overhead on the kernel's clock, the same span for both tools:                      the median time from one run's exit (`sched_process_exit`) to the next run's exec                      (`sched_process_exec`), over every pair of consecutive runs, recorded in a tracefs                      instance of the bench's own (ftrace, so no perf events that would change how the                      kernel switches kiln's counted runs). It holds the end of the exit, waking the tool,                      reaping, reading counters, bookkeeping and the next spawn up to the exec; after a                      long run the tool's idle CPU wakes more slowly, for both tools alike. The targets                      use it.\n"
                )?;
            }
            let mut head = vec!["command".to_string(), "hyperfine median ms".to_string()];
            for v in &self.versions {
                head.push(format!("kiln '{}' median ms", v.label));
                head.push(format!("'{}' vs hyperfine", v.label));
            }
            head.push("hyperfine overhead ms/run".into());
            for v in &self.versions {
                head.push(format!("'{}' overhead ms/run", v.label));
            }
            head.push("hyperfine overhead w/o start-up".into());
            for v in &self.versions {
                head.push(format!("'{}' overhead w/o start-up", v.label));
            }
            head.push("hyperfine cost ms/run".into());
            for v in &self.versions {
                head.push(format!("'{}' cost ms/run", v.label));
            }
            let kernel = r.rows.iter().any(|x| x.metric == "pooled_kernel_gap_ms");
            if kernel {
                head.push("hyperfine exit→exec ms".into());
                for v in &self.versions {
                    head.push(format!("'{}' exit→exec ms", v.label));
                }
            }
            let hr: Vec<&str> = head.iter().map(String::as_str).collect();
            let mut t = Table::new(&hr);
            for c in ["sleep-50ms", "cpu-100ms", "true"] {
                let h = r.median(fi, c, "hyperfine", "pooled_median_ms");
                if h.is_none() {
                    continue;
                }
                let mut row = vec![c.to_string(), fmt(h)];
                for v in &self.versions {
                    let k = r.median(fi, c, &v.label, "pooled_median_ms");
                    row.push(fmt(k));
                    row.push(k.zip(h).map_or("—".into(), |(k, h)| {
                        format!("{:+.2} %", 100.0 * (k / h - 1.0))
                    }));
                }
                row.push(fmt(r.median(fi, c, "hyperfine", "overhead_ms_per_run")));
                for v in &self.versions {
                    row.push(fmt(r.median(fi, c, &v.label, "overhead_ms_per_run")));
                }
                let ex = "overhead_ex_startup_ms_per_run";
                row.push(fmt(r.median(fi, c, "hyperfine", ex)));
                for v in &self.versions {
                    row.push(fmt(r.median(fi, c, &v.label, ex)));
                }
                row.push(fmt(r.median(fi, c, "hyperfine", "per_run_ms")));
                for v in &self.versions {
                    row.push(fmt(r.median(fi, c, &v.label, "per_run_ms")));
                }
                if kernel {
                    row.push(fmt(r.median(fi, c, "hyperfine", "pooled_kernel_gap_ms")));
                    for v in &self.versions {
                        row.push(fmt(r.median(fi, c, &v.label, "pooled_kernel_gap_ms")));
                    }
                }
                t.row(row);
            }
            t.write(o)?;
            for c in ["sleep-50ms", "cpu-100ms"] {
                let h = r.median(fi, c, "hyperfine", "pooled_median_ms");
                let k = r.median(fi, c, after, "pooled_median_ms");
                let d = k.zip(h).map(|(k, h)| 100.0 * (k / h - 1.0));
                targets.push((
                    format!("{c}: median within 2 % of hyperfine's"),
                    d.map_or("—".into(), |d| format!("{d:+.2} %")),
                    format!("kiln {} ms vs hyperfine {} ms", fmt(k), fmt(h)),
                    d.map(|d| d.abs() <= 2.0),
                ));
            }
            let ho = r.median(fi, "true", "hyperfine", "per_run_ms");
            let ko = r.median(fi, "true", after, "per_run_ms");
            targets.push((
                "per-run cost with `true` ≤ hyperfine's".into(),
                format!("{} vs {} ms", fmt(ko), fmt(ho)),
                pair(fi, "true", "per_run_ms"),
                ko.zip(ho).map(|(k, h)| k <= h),
            ));
            // Per-run overhead by the kernel's clock where it was recorded,
            // else by each tool's own (which bills kiln for what hyperfine times as run).
            let (metric, what) = if kernel {
                (
                    "pooled_kernel_gap_ms",
                    "per-run overhead (exit → next exec, kernel clock)",
                )
            } else {
                (
                    "overhead_ex_startup_ms_per_run",
                    "per-run overhead (start-up excluded)",
                )
            };
            for c in ["sleep-50ms", "cpu-100ms", "true"] {
                let ho = r.median(fi, c, "hyperfine", metric);
                let ko = r.median(fi, c, after, metric);
                if !kernel && c == "true" {
                    continue;
                }
                // How sure: kiln − hyperfine with its bootstrap interval.
                let diff = |m: &str| r.median(fi, c, after, m);
                let sure = match diff("kernel_gap_vs_hyperfine_ms") {
                    Some(d) if kernel => format!(
                        "; kiln − hyperfine {} ms (95 % CI {} … {})",
                        fmt(Some(d)),
                        fmt(diff("kernel_gap_vs_hyperfine_lo_ms")),
                        fmt(diff("kernel_gap_vs_hyperfine_hi_ms"))
                    ),
                    _ => String::new(),
                };
                targets.push((
                    format!("{c}: {what} ≤ hyperfine's"),
                    format!("{} vs {} ms{sure}", fmt(ko), fmt(ho)),
                    pair(fi, c, metric),
                    ko.zip(ho).map(|(k, h)| k <= h),
                ));
            }
        }

        // 3. Store
        let st = "store";
        if r.rows.iter().any(|x| x.section == st) {
            writeln!(o, "## 3. The store\n")?;
            writeln!(
                o,
                "Persisting one step through the Store API into a fresh store, {} steps one at a time: \
                 `put_result` (the measured step, inserted and flushed) and `decide` (decided step + chain \
                 state in one atomic batch, flushed). The campaign used to do both for every step; it now \
                 writes only `decide` for a step decided on arrival, and group-commits (one flush for every \
                 result that arrived together). Stores for export: {} chains of random-walk steps like the \
                 no-op campaign's (one run, every timed metric, hardware counters unsupported; about 2.8 KB \
                 of JSON each, and beside each its export row, about 270 bytes, which the steps table reads \
                 instead of the JSON), written through the Store API (`Store::import_steps`, atomic batches \
                 of 1000, each chain's state once). A kiln that predates export rows (store layout 2) \
                 refuses such a store: it exports a copy in layout 1, as it wrote stores (the same keys, no \
                 rows). Export: `kiln export STORE --table steps -o FILE` on a warm page cache (the store \
                 is read once before); peak RSS is the larger of wait4's ru_maxrss (what `/usr/bin/time -v` \
                 reports) and the sampled VmHWM. The baseline's 1 M export runs once.\n",
                self.sizes.latency_steps, 4
            )?;
            let mut t = Table::new(&["persist one step", "p50 ms", "p99 ms"]);
            for m in ["put_result", "decide", "put_result_and_decide"] {
                t.row(vec![
                    m.replace('_', " "),
                    fmt(r.median(st, "persist-step", "store-api", &format!("{m}_p50_ms"))),
                    fmt(r.median(st, "persist-step", "store-api", &format!("{m}_p99_ms"))),
                ]);
            }
            t.write(o)?;
            let mut t = Table::new(&[
                "store",
                "db MiB",
                &both("export rows/s"),
                &both("export s"),
                &both("peak RSS MiB"),
            ]);
            for n in &self.sizes.stores {
                let c = format!("export-{n}");
                if r.median(st, &c, after, "rows_per_s").is_none() {
                    continue;
                }
                t.row(vec![
                    format!("{n} steps"),
                    fmt(r.median(st, &c, "store", "db_mib")),
                    pair(st, &c, "rows_per_s"),
                    pair(st, &c, "wall_s"),
                    pair(st, &c, "max_rss_mib"),
                ]);
                let rate = r.median(st, &c, after, "rows_per_s");
                targets.push((
                    format!("export ≥ 200 k rows/s ({n} steps)"),
                    fmt(rate),
                    pair(st, &c, "rows_per_s"),
                    rate.map(|v| v >= 200_000.0),
                ));
                let rss = r.median(st, &c, after, "max_rss_mib");
                targets.push((
                    format!("peak RSS < 200 MB exporting {n} steps"),
                    format!("{} MiB", fmt(rss)),
                    pair(st, &c, "max_rss_mib"),
                    rss.map(|v| v * 1.048576 < 200.0),
                ));
            }
            t.write(o)?;
            for n in &self.sizes.stores {
                let c = format!("export-{n}-layout1");
                if let Some(rate) = r.median(st, &c, after, "rows_per_s") {
                    writeln!(
                        o,
                        "The layout-1 copy of the {n}-step store (a store written before export rows, \
                         read through its steps' JSON until a step is next written into it) exports at \
                         {} rows/s ({after}; peak RSS {} MiB).\n",
                        fmt(Some(rate)),
                        fmt(r.median(st, &c, after, "max_rss_mib"))
                    )?;
                }
            }
            for n in &self.sizes.stores {
                let c = format!("build-{n}");
                if let Some(rate) = r.median(st, &c, "store-api", "steps_per_s") {
                    writeln!(
                        o,
                        "Building the {n}-step store ran at {} steps/s (one record: {} bytes of JSON, its \
                         export row {} bytes).\n",
                        fmt(Some(rate)),
                        fmt(r.median(st, &c, "store-api", "record_bytes")),
                        fmt(r.median(st, &c, "store-api", "row_bytes"))
                    )?;
                }
            }
        }

        // 4. Scale
        let sc = "scale";
        if r.rows.iter().any(|x| x.section == sc) {
            writeln!(o, "## 4. Scale: 64 worker slots\n")?;
            writeln!(
                o,
                "8 local workers × 8 slots, the no-op benchmark, 16 chains × parallel 4 ({} steps per chain). \
                 ctl share = the controller's CPU / all CPU of the run (controller, workers, `true`); \
                 all-CPU cores = that total / wall; machine busy = /proc/stat busy share over the run \
                 (everything on the machine; {} cores).\n",
                self.sizes.scale_steps,
                self.nproc()
            )?;
            campaign_table(
                "config",
                &[
                    ("steps/s", "steps_per_s"),
                    ("ctl CPU ms/step", "ctl_cpu_ms_per_step"),
                    ("workers CPU ms/step", "children_cpu_ms_per_step"),
                    ("ctl share", "ctl_share_of_cpu"),
                    ("ctl cores", "ctl_cores"),
                    ("all-CPU cores", "tree_cores"),
                    ("machine busy", "machine_busy"),
                ],
                &[
                    (ov, "local", "local, 2 slots (§1)"),
                    (sc, "local-64", "local, 8 × 8 slots"),
                ],
            )
            .write(o)?;
            let share = r.median(sc, "local-64", after, "ctl_share_of_cpu");
            let busy = r.median(sc, "local-64", after, "machine_busy");
            let cores = r.median(sc, "local-64", after, "ctl_cores");
            targets.push((
                "64 slots: cores saturated before the controller is".into(),
                format!(
                    "ctl {} of a core, {} of all CPU; machine {} busy",
                    fmt(cores),
                    fmt(share),
                    fmt(busy)
                ),
                pair(sc, "local-64", "steps_per_s") + " steps/s",
                cores.zip(busy).map(|(c, b)| c < 0.5 && b > 0.9),
            ));
        }

        // 5. Slurm
        let sl = "slurm";
        if r.rows.iter().any(|x| x.section == sl) {
            writeln!(o, "## 5. Slurm workers\n")?;
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
        }

        writeln!(o, "## Targets\n")?;
        let mut t = Table::new(&["target", "measured", "detail", "met"]);
        for (name, value, detail, ok) in &targets {
            t.row(vec![
                name.clone(),
                value.clone(),
                detail.clone(),
                match ok {
                    Some(true) => "yes".into(),
                    Some(false) => "**no**".into(),
                    None => "—".into(),
                },
            ]);
        }
        t.write(o)?;
        if !self.notes.is_empty() {
            writeln!(o, "## Notes\n")?;
            for n in &self.notes {
                writeln!(o, "- {n}")?;
            }
            writeln!(o)?;
        }
        Ok(())
    }
}

/// Reads every file under `dir` (into the page cache).
/// Whether kiln `v` reads the store in `dir`: false if it refuses the
/// store's layout as newer than its own.
fn reads_store(v: &Version, dir: &Path) -> Result<bool> {
    let out = Command::new(v.kiln())
        .arg("export")
        .arg(dir)
        .args(["--table", "sites", "-o", "/dev/null"])
        .stdin(Stdio::null())
        .output()?;
    let said = String::from_utf8_lossy(&out.stderr);
    match out.status.success() {
        true => Ok(true),
        false if said.contains("schema version") => Ok(false),
        false => bail!(
            "{} cannot read {}: {said}",
            v.kiln().display(),
            dir.display()
        ),
    }
}

fn read_all(dir: &Path) -> Result<()> {
    let mut buf = vec![0u8; 1 << 20];
    for e in fs::read_dir(dir)?.flatten() {
        let path = e.path();
        if e.file_type()?.is_dir() {
            read_all(&path)?;
        } else {
            let mut f = fs::File::open(&path)?;
            while std::io::Read::read(&mut f, &mut buf)? > 0 {}
        }
    }
    Ok(())
}

fn dir_size(dir: &Path) -> u64 {
    let mut total = 0;
    if let Ok(entries) = fs::read_dir(dir) {
        for e in entries.flatten() {
            match e.metadata() {
                Ok(m) if m.is_dir() => total += dir_size(&e.path()),
                Ok(m) => total += m.len(),
                Err(_) => {}
            }
        }
    }
    total
}
