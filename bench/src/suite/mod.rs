//! The comparisons of `scripts/bench`, run side by side and written up.
//!
//! 1. overhead: no-op steps through the local worker and 1, 2, 4 SSH workers
//!    on loopback; peer: a fresh `scp` + `ssh host true` per step.
//! 2. fidelity: `kiln-worker measure` against hyperfine on the same commands.
//! 3. store: persisting one step, exporting 100 k and 1 M steps, peak RSS.
//! 4. scale: 64 local worker slots; controller CPU against worker CPU.
//! 5. slurm: no-op steps through a Slurm worker against the local worker (scripts/slurm-rig),
//!    and the time from `scancel` of a worker's job mid-step to the step's re-dispatch.
//! 6. fleet: no-op steps across 10 and 100 SSH workers on loopback (memory and descriptors
//!    per worker), a worker killed or frozen mid-step while 99 are busy, and what that
//!    projects for 1,000 workers.
//!
//! Every kiln figure is taken for each kiln version given (`--kiln-bin`, and
//! `--baseline-bin` for a before/after table), interleaved within each
//! repetition so drift in the machine's load hits both alike.
//!
//! This module owns the options, the versions and workload sizes, `run`, and
//! the harness every section uses (the machine's description, the accounted
//! run of a command). Each section's file holds its measurements and its part
//! of REPORT.md; `campaign` is the no-op campaign three of them run, `rigs` the
//! SSH and Slurm rigs, `writeup` the report's frame.

mod campaign;
mod fidelity;
mod fleet;
mod fleet_report;
mod overhead;
mod rigs;
mod scale;
mod slurm;
mod store;
mod writeup;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};

use crate::procs::Account;
use crate::report::Results;

use rigs::Rig;

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
        default_value = "overhead,fidelity,store,scale,slurm,fleet"
    )]
    sections: Vec<String>,
    /// Port of the loopback sshd rig.
    #[arg(long, default_value_t = 2391)]
    rig_port: u16,
    /// The looks at the big stores to time (status, status-json, status-unsealed, report,
    /// verify, show, rewards, resume; default: every one).
    #[arg(long, value_delimiter = ',')]
    views: Vec<String>,
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

    /// The versions the options name, the one under test first; each must have both binaries.
    fn given(opts: &Options) -> Result<Vec<Version>> {
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
        Ok(versions)
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
    /// Steps per chain across the hundred SSH workers (25 chains).
    fleet_steps: u32,
}

impl Sizes {
    /// The sizes of a full or `--quick` run, with `--reps` and `--max-store` applied.
    fn new(opts: &Options) -> Sizes {
        let quick = opts.quick;
        let reps = opts.reps.unwrap_or(if quick { 1 } else { 3 });
        let mut sizes = if quick {
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
                fleet_steps: 400,
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
                fleet_steps: 1400,
            }
        };
        if let Some(max) = opts.max_store {
            sizes.stores.retain(|s| *s <= max);
            if !sizes.stores.contains(&max) {
                sizes.stores.push(max);
            }
        }
        sizes
    }
}

/// One run of the suite: what it measures with, and what it has measured so far.
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
    let sizes = Sizes::new(&opts);
    let versions = Version::given(&opts)?;
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
            "fleet" => suite.fleet(),
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

/// The first line `cmd` prints (its stdout, else its stderr), or "missing".
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

impl Suite {
    /// Notes the machine, the versions and the mode at the start, and the load at `when`.
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
}
