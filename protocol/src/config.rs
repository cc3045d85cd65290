//! Campaign configs: one s-expression file describes a whole campaign.
//!
//! Decoding checks every field (unknown, duplicate, missing, wrong type) and
//! cross-references (an experiment's benchmark must exist); printing gives the
//! normalized form with every default spelled out, which parses back to the
//! same value. `prod-configs/README.md` documents each field.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::decision::{name_sexp, DecisionPoint, DecisionValue, SiteId};
use crate::decode::{self, Field, Record, Src};
use crate::metric::Metric;
use crate::sexp::{self, Sexp, SexpError, SexpKind};
use crate::stats::Statistic;

/// A whole campaign: what to search, how to measure, where to run and store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CampaignConfig {
    /// The campaign's name.
    pub name: String,
    /// The store's folder (sled database, artifacts, logs).
    pub store: PathBuf,
    /// What the search minimises.
    pub objective: Objective,
    /// How many times each candidate runs.
    pub runs: RunPolicy,
    /// Timeouts of the infrastructure (benchmarks carry their own).
    pub timeouts: Timeouts,
    /// Slot calibration, if configured.
    pub calibration: Option<Calibration>,
    /// The searches to run.
    pub experiments: Vec<Experiment>,
    /// The benchmarks experiments refer to.
    pub benchmarks: Vec<BenchmarkSpec>,
    /// The machines that run steps.
    pub workers: Vec<WorkerSpec>,
}

/// The quantity a search minimises.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Objective {
    /// The metric measured per run.
    pub metric: Metric,
    /// How runs are summarised into one figure.
    pub statistic: Statistic,
}

/// How many runs a measurement takes.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RunPolicy {
    /// Unrecorded runs before measuring.
    pub warmup: u32,
    /// Fewest measured runs.
    pub min: u32,
    /// Most measured runs.
    pub max: u32,
    /// Stop once the median's 95 % CI half-width relative to it is below this.
    pub target_rel_ci: f64,
    /// Stop adding runs after this many seconds of measuring.
    pub max_time_s: f64,
}

/// Infrastructure timeouts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Timeouts {
    /// Connecting to (and deploying on) a worker.
    pub connect_s: f64,
    /// Interval of heartbeats to a worker.
    pub heartbeat_s: f64,
    /// A worker that answers nothing for this long is lost.
    pub lost_after_s: f64,
    /// A step whose worker is lost this many times while running it is
    /// recorded failed (the step ends its worker) instead of tried again.
    #[serde(default = "default_step_losses")]
    pub step_losses: u32,
}

fn default_step_losses() -> u32 {
    Timeouts::default().step_losses
}

/// Slot calibration: a reference benchmark measured on every slot, at connect and every
/// `every` jobs, to catch slots whose speed drifts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// The benchmark (one of the campaign's), measured with its default decisions.
    pub benchmark: String,
    /// Calibrate a slot again after this many jobs on it (0: only at connect).
    pub every: u32,
    /// Largest tolerated relative change from the slot's first figure: |now / first − 1|.
    pub max_drift: f64,
    /// Whether a slot that drifts further gets no jobs until it calibrates within bounds again.
    pub take_out_of_service: bool,
}

impl Calibration {
    /// Defaults of the optional fields.
    pub const DEFAULT_EVERY: u32 = 50;
    /// Default `max-drift`.
    pub const DEFAULT_MAX_DRIFT: f64 = 0.05;
}

/// One search over one benchmark.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Experiment {
    /// The experiment's name (defaults to the benchmark's).
    pub name: String,
    /// The benchmark it searches.
    pub benchmark: String,
    /// The search algorithm.
    pub search: Search,
    /// Independent chains.
    pub chains: u32,
    /// Seed of chain 0; chain i uses a seed derived from it.
    pub seed: u64,
    /// A decision file to start from instead of the stock decisions.
    pub baseline: Option<PathBuf>,
    /// Re-measure the incumbent every this many steps (0: never).
    pub remeasure_every: u32,
    /// Proposals of one chain in flight at once.
    pub parallel: u32,
    /// How proposals pick the decisions they change.
    pub proposals: Proposals,
    /// Racing: a proposal of an annealing chain under a noisy objective stops
    /// being repeated once Metropolis would accept it with probability below
    /// this, even at the lower end of its interval; `None`: never (`(race off)`).
    pub race: Option<f64>,
}

impl Experiment {
    /// The acceptance probability below which a candidate is raced out, unless configured.
    pub const DEFAULT_RACE: f64 = 0.01;
}

/// How a chain's proposals pick the decision points they change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Proposals {
    /// Every movable point equally likely.
    #[default]
    Uniform,
    /// A first phase measures one flip of every movable point away from the
    /// starting set; then points are drawn in proportion to the size and
    /// uncertainty of their measured effect.
    Guided,
}

/// The search algorithm of an experiment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Search {
    /// Simulated annealing with Metropolis acceptance.
    SimulatedAnnealing {
        /// Steps of the chain.
        steps: u32,
        /// Starting temperature.
        t_max: f64,
        /// Final temperature.
        t_min: f64,
        /// Decisions changed per proposal.
        flips: u32,
        /// How temperature falls.
        schedule: Schedule,
    },
    /// A random walk that accepts every proposal.
    RandomWalk {
        /// Steps of the chain.
        steps: u32,
        /// Decisions changed per proposal.
        flips: u32,
    },
    /// Independent random decision sets, drawn without regard to any result.
    RandomSearch {
        /// Steps of the chain.
        steps: u32,
        /// `None`: every point takes a uniformly drawn value of its domain
        /// (uniform over the whole space). `Some(k)`: the starting set with `k`
        /// distinct points moved, the annealers' move without its feedback.
        flips: Option<u32>,
    },
    /// Greedy one-flip hill climbing: one flip of the incumbent at a time,
    /// taken only when it is better; at a local optimum (every flip of the
    /// incumbent tried, none better) it restarts from the best set with
    /// `kick` points moved.
    HillClimbing {
        /// Steps of the chain.
        steps: u32,
        /// Points a restart moves away from the best set.
        kick: u32,
    },
    /// Each step flips one point alone away from the starting set, the
    /// hottest first by the stock build's profile (again from the hottest
    /// once every point is screened): the per-site effects a dataset of
    /// effects wants, with no search after.
    Screening {
        /// Steps of the chain.
        steps: u32,
    },
}

impl Search {
    /// Steps of the chain.
    pub fn steps(&self) -> u32 {
        match self {
            Search::SimulatedAnnealing { steps, .. }
            | Search::RandomWalk { steps, .. }
            | Search::RandomSearch { steps, .. }
            | Search::HillClimbing { steps, .. }
            | Search::Screening { steps } => *steps,
        }
    }

    /// Whether proposals move points drawn by `(proposals ...)` (annealing and
    /// the random walk), rather than by a rule of the search's own.
    pub fn draws_flips(&self) -> bool {
        matches!(
            self,
            Search::SimulatedAnnealing { .. } | Search::RandomWalk { .. }
        )
    }

    /// Decisions changed per proposal (random search over the whole space
    /// draws every point and reads 0 here).
    pub fn flips(&self) -> u32 {
        match self {
            Search::SimulatedAnnealing { flips, .. } | Search::RandomWalk { flips, .. } => *flips,
            Search::RandomSearch { flips, .. } => flips.unwrap_or(0),
            Search::HillClimbing { .. } | Search::Screening { .. } => 1,
        }
    }
}

/// The temperature schedule of simulated annealing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Schedule {
    /// `T(k) = t_max · exp(−ln(t_max/t_min) · k/steps)`.
    Exponential,
    /// `T(k) = t_max − (t_max − t_min) · k/steps`.
    Linear,
}

impl Schedule {
    /// The temperature at step `k` of `steps`.
    pub fn temperature(self, t_max: f64, t_min: f64, k: u32, steps: u32) -> f64 {
        let frac = if steps == 0 {
            1.0
        } else {
            f64::from(k) / f64::from(steps)
        };
        match self {
            Schedule::Exponential => t_max * (-(t_max / t_min).ln() * frac).exp(),
            Schedule::Linear => t_max - (t_max - t_min) * frac,
        }
    }
}

/// A benchmark: how to build and run it, and what decisions it has.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BenchmarkSpec {
    /// The benchmark's name.
    pub name: String,
    /// What kind of decisions it takes.
    pub kind: BenchmarkKind,
    /// The folder whose files form the benchmark's bundle.
    pub sources: PathBuf,
    /// The build command (argument list, never a shell string).
    pub build: Vec<String>,
    /// The run command.
    pub run: Vec<String>,
    /// Timeout of one run.
    pub timeout_s: f64,
    /// Timeout of the build.
    pub build_timeout_s: f64,
    /// CPU seconds one compile of the discovery build (every call inlined)
    /// may take before it is compiled again with the stock decisions.
    #[serde(default = "default_discovery_cpu_s")]
    pub discovery_cpu_s: f64,
    /// The most resident memory a build's processes may use together, bytes;
    /// past it the whole build is killed and the step fails naming the limit.
    #[serde(default = "default_build_memory_bytes")]
    pub build_memory_bytes: u64,
    /// Extra environment variables for build and runs.
    pub env: Vec<(String, String)>,
    /// Variables the build takes from the worker's environment, besides the
    /// toolchain's own (`PATH`, `HOME`, `RUSTUP_HOME`, `CARGO_HOME`); runs
    /// never see them.
    #[serde(default)]
    pub pass_env: Vec<String>,
    /// Dependencies of a cargo build whose crates take decisions too; the
    /// workspace's own crates always do.
    #[serde(default)]
    pub dependency_crates: Vec<String>,
    /// How a run's output is checked against the baseline's.
    pub check_output: OutputCheck,
    /// CPU and memory limits on the timed runs (cgroup v2, or v1 where v2 lacks the controllers).
    #[serde(default)]
    pub limits: Limits,
    /// A container image the timed runs run in (built on the worker, run in the image).
    #[serde(default)]
    pub container: Option<Container>,
}

/// Timed runs inside a container, with the slot's work folder mounted at the
/// same path: a program measured as an edge device would run it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Container {
    /// The engine that runs it.
    pub engine: ContainerEngine,
    /// The image, present on the worker (never pulled by kiln).
    pub image: String,
    /// The container's `--cpus` and `--memory` (swap none beyond it).
    pub limits: Limits,
}

/// A container engine with docker's command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ContainerEngine {
    Podman,
    Docker,
}

impl ContainerEngine {
    /// Its program, and its name in a config.
    pub fn program(self) -> &'static str {
        match self {
            ContainerEngine::Podman => "podman",
            ContainerEngine::Docker => "docker",
        }
    }
}

impl Container {
    /// The container as written in a config.
    pub fn to_sexp(&self) -> Sexp {
        let f = Sexp::field;
        let mut fields = vec![
            f("engine", vec![Sexp::symbol(self.engine.program())]),
            f("image", vec![Sexp::string(self.image.clone())]),
        ];
        fields.extend(self.limits.fields());
        f("container", fields)
    }
}

/// The kinds of benchmark.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum BenchmarkKind {
    /// Per-call-site inlining decisions applied with LLVM inline replay.
    LlvmInline {
        /// The compiler family (from the build command unless given).
        compiler: Compiler,
        /// What happens to sites missing from the replay file.
        fallback: ReplayFallback,
    },
    /// Knobs declared in the config, passed to build and run.
    Knobs {
        /// The knobs; the first value of each domain is its default.
        points: Vec<DecisionPoint>,
    },
}

/// Compilers whose inlining kiln can drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Compiler {
    /// clang or clang++ (C, C++).
    Clang,
    /// rustc.
    Rustc,
}

/// `-cgscc-inline-replay-fallback`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReplayFallback {
    /// Sites not in the file are not inlined.
    NeverInline,
    /// Sites not in the file are inlined.
    AlwaysInline,
    /// Sites not in the file follow the compiler's own heuristic.
    Original,
}

impl ReplayFallback {
    /// The LLVM option value.
    pub fn llvm_name(self) -> &'static str {
        match self {
            ReplayFallback::NeverInline => "NeverInline",
            ReplayFallback::AlwaysInline => "AlwaysInline",
            ReplayFallback::Original => "Original",
        }
    }
}

/// How a run's output is compared with the baseline's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum OutputCheck {
    /// No check.
    None,
    /// Standard output must match.
    Stdout,
    /// The named file (relative to the run directory) must match.
    File(String),
    /// The lines of standard output that match the regular expression must
    /// match (a program that also prints its own timings).
    Lines(String),
    /// Every line of standard output but those that match the regular
    /// expression must match.
    LinesExcept(String),
    /// The standard output of this command, run in the work folder after
    /// each run (a checksum of the files the program wrote), must match.
    Command(Vec<String>),
}

/// Limits on a benchmark's timed runs, applied through cgroups as `docker run
/// --cpus --memory` applies them, to measure a program as a smaller machine would run it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Limits {
    /// CPU bandwidth in CPUs: 1.5 allows one and a half CPUs' worth of time per period.
    pub cpus: Option<f64>,
    /// The most memory the run's processes may use, bytes (no swap beyond it).
    pub memory_bytes: Option<u64>,
}

impl Limits {
    /// Whether no limit is set.
    pub fn is_none(&self) -> bool {
        self.cpus.is_none() && self.memory_bytes.is_none()
    }

    /// The limits as they are written in a config: `(limits (cpus 1.5) (memory 536870912))`.
    pub fn to_sexp(&self) -> Sexp {
        Sexp::field("limits", self.fields())
    }

    /// `(cpus 1.5) (memory 536870912)`, those that are set.
    fn fields(&self) -> Vec<Sexp> {
        let f = Sexp::field;
        let mut fields = Vec::new();
        if let Some(c) = self.cpus {
            fields.push(f("cpus", vec![float(c)]));
        }
        if let Some(m) = self.memory_bytes {
            fields.push(f("memory", vec![Sexp::new(SexpKind::Int(m as i64))]));
        }
        fields
    }
}

impl std::fmt::Display for Limits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.to_sexp())
    }
}

/// A machine that runs steps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum WorkerSpec {
    /// `kiln-worker serve` as a child process of the controller.
    Local {
        /// The worker's name.
        name: String,
        /// Steps run at once.
        slots: u32,
        /// CPUs the slots are pinned to (one or more per slot, split evenly).
        cpus: Vec<u32>,
        /// GPUs the slots run on (split evenly as CPUs are); empty: every GPU.
        gpus: Vec<u32>,
    },
    /// A worker reached over SSH.
    Ssh(SshWorker),
    /// A worker in a Slurm allocation of its own, started by `srun`.
    Slurm(SlurmWorker),
}

/// A worker in a Slurm allocation of its own: `srun` (on the controller's machine or on a
/// login node over SSH) asks for one node and starts `kiln-worker serve` there, speaking the
/// protocol over srun's standard input and output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SlurmWorker {
    /// The worker's name (`NAME-1`..`NAME-N` for an entry of `(nodes N)`).
    pub name: String,
    /// The partition (`srun --partition`); `None`: the cluster's default.
    pub partition: Option<String>,
    /// Steps run at once.
    pub slots: u32,
    /// CPUs Slurm allocates (`srun --cpus-per-task`); `None`: Slurm's default.
    pub cpus_per_task: Option<u32>,
    /// GPUs Slurm allocates (`srun --gpus-per-task`); `None`: none asked for.
    pub gpus_per_task: Option<u32>,
    /// The allocation's time limit in Slurm's format (`srun --time`, e.g. `7-00:00:00`).
    pub time: Option<String>,
    /// More arguments for srun, put before the worker's command.
    pub srun_args: Vec<String>,
    /// Folder for kiln's files, on a filesystem the compute nodes share with the machine
    /// that runs srun: `kiln-worker` is deployed there, and each worker works in
    /// `<rundir>/<name>`.
    pub rundir: String,
    /// A kiln-worker binary built for the nodes' platform, deployed instead of ours.
    pub worker_binary: Option<PathBuf>,
    /// New allocations asked for in a row after one ends or never starts, before the
    /// worker is given up.
    pub retries: u32,
    /// The login node to run srun on (its `rundir`, `slots`, CPUs and GPUs are unused);
    /// `None`: srun runs on the controller's machine.
    pub via_ssh: Option<SshWorker>,
}

impl SlurmWorker {
    /// Default `(retries N)`.
    pub const DEFAULT_RETRIES: u32 = 3;
}

/// A worker reached over SSH.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SshWorker {
    /// The worker's name.
    pub name: String,
    /// Host name or address.
    pub host: String,
    /// Login user.
    pub user: Option<String>,
    /// SSH port.
    pub port: u16,
    /// Private key file.
    pub identity: Option<PathBuf>,
    /// known_hosts file to check host keys against (default: ssh's own).
    pub known_hosts: Option<PathBuf>,
    /// Host key policy.
    pub host_key_check: HostKeyCheck,
    /// Folder on the worker that holds kiln's files.
    pub rundir: String,
    /// Steps run at once.
    pub slots: u32,
    /// CPUs the slots are pinned to.
    pub cpus: Vec<u32>,
    /// GPUs the slots run on; empty: every GPU.
    pub gpus: Vec<u32>,
    /// A kiln-worker binary built for the worker's platform, uploaded instead of ours.
    pub worker_binary: Option<PathBuf>,
}

/// How strictly host keys are checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum HostKeyCheck {
    /// Only hosts already in known_hosts with the same key.
    Strict,
    /// Unknown hosts are added; changed keys are refused.
    AcceptNew,
    /// No check (test rigs only).
    Off,
}

impl WorkerSpec {
    /// The worker's name.
    pub fn name(&self) -> &str {
        match self {
            WorkerSpec::Local { name, .. } => name,
            WorkerSpec::Ssh(s) => &s.name,
            WorkerSpec::Slurm(s) => &s.name,
        }
    }

    /// Steps the worker runs at once.
    pub fn slots(&self) -> u32 {
        match self {
            WorkerSpec::Local { slots, .. } => *slots,
            WorkerSpec::Ssh(s) => s.slots,
            WorkerSpec::Slurm(s) => s.slots,
        }
    }

    /// CPUs the slots are pinned to.
    pub fn cpus(&self) -> &[u32] {
        match self {
            WorkerSpec::Local { cpus, .. } => cpus,
            WorkerSpec::Ssh(s) => &s.cpus,
            // Slurm picks the CPUs and GPUs of an allocation; its tasks see only those.
            WorkerSpec::Slurm(_) => &[],
        }
    }

    /// GPUs the slots run on (their `CUDA_VISIBLE_DEVICES`); empty: every GPU.
    pub fn gpus(&self) -> &[u32] {
        match self {
            WorkerSpec::Local { gpus, .. } => gpus,
            WorkerSpec::Ssh(s) => &s.gpus,
            WorkerSpec::Slurm(_) => &[],
        }
    }
}

/// The largest config kiln reads: a config is written by hand, so anything
/// near this is a wrong file given as a config.
pub const CONFIG_MAX_BYTES: u64 = 16 << 20;

/// `path` with `a/..` pairs and `.` removed, as written (no file system access): a config in
/// `prod-configs/` naming `../results` means `results`, which is what messages should say.
fn lexically_normal(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir
                if matches!(out.components().next_back(), Some(Component::Normal(_))) =>
            {
                out.pop();
            }
            other => out.push(other),
        }
    }
    // The current folder, never an empty path (which names no folder at all).
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    out
}

/// The arguments of a `(WORD args...)` form, if `node` is one.
fn form_args<'a>(node: &'a Sexp, word: &str) -> Option<&'a [Sexp]> {
    match node.as_list()? {
        [first, args @ ..] if matches!(&first.kind, SexpKind::Symbol(s) if s == word) => Some(args),
        _ => None,
    }
}

/// The benchmarks an `(include "PATH")` entry of `(benchmarks ...)` names: the
/// one entry of the file PATH, or of each `.sexp` file of the folder PATH in
/// name order, relative to the including config's folder `base`. Errors in
/// an included file name that file; the paths in its entry are relative to
/// its own folder.
fn included_benchmarks(
    src: Src<'_>,
    entry: &Sexp,
    args: &[Sexp],
    base: Option<&Path>,
) -> Result<Vec<BenchmarkSpec>, SexpError> {
    let [target] = args else {
        return Err(src.error(entry.pos, "include takes one path: (include \"corpus\")"));
    };
    let target = decode::string(src, target, "include")?;
    let Some(base) = base else {
        return Err(src.error(
            entry.pos,
            "include needs a config file to start from; config text alone cannot include",
        ));
    };
    let path = lexically_normal(&base.join(&target));
    let cannot =
        |e: std::io::Error| src.error(entry.pos, format!("cannot include {}: {e}", path.display()));
    let files: Vec<PathBuf> = if path.is_dir() {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&path)
            .map_err(cannot)?
            .map(|e| e.map(|e| e.path()))
            .collect::<Result<_, _>>()
            .map_err(cannot)?;
        files.retain(|f| f.extension().is_some_and(|x| x == "sexp"));
        files.sort();
        files
    } else {
        vec![path.clone()]
    };
    if files.is_empty() {
        return Err(src.error(
            entry.pos,
            format!("{} holds no .sexp file to include", path.display()),
        ));
    }
    files
        .iter()
        .map(|file| {
            let node = sexp::parse_file(file, CONFIG_MAX_BYTES)?;
            let name = file.display().to_string();
            let mut b = benchmark(Src(&name), &node)?;
            // Relative to the included file: made absolute, as the config's own
            // relative paths are made relative to its folder later.
            let dir = file
                .parent()
                .unwrap_or(Path::new("."))
                .canonicalize()
                .map_err(cannot)?;
            if b.sources.is_relative() {
                b.sources = lexically_normal(&dir.join(&b.sources));
            }
            Ok(b)
        })
        .collect()
}

impl CampaignConfig {
    /// Reads and checks a config file (a regular file of at most [`CONFIG_MAX_BYTES`]).
    ///
    /// Relative paths in it (store, sources, baseline decision files, SSH keys and known
    /// hosts, a worker binary to deploy) are relative to the config file's folder, so the
    /// config means the same from any folder it is run in.
    pub fn read(path: &Path) -> Result<Self, SexpError> {
        let node = sexp::parse_file(path, CONFIG_MAX_BYTES)?;
        let base = path.parent().unwrap_or(Path::new(""));
        let mut config = Self::from_sexp(Src(&path.display().to_string()), &node, Some(base))?;
        config.resolve_paths(path.parent().unwrap_or(Path::new("")));
        Ok(config)
    }

    /// Makes every relative path of the config relative to `base` (a config
    /// file's folder; empty when it is in the current one).
    fn resolve_paths(&mut self, base: &Path) {
        let resolve = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = lexically_normal(&base.join(&*p));
            }
        };
        resolve(&mut self.store);
        for e in &mut self.experiments {
            e.baseline.iter_mut().for_each(resolve);
        }
        for b in &mut self.benchmarks {
            resolve(&mut b.sources);
        }
        for w in &mut self.workers {
            if let WorkerSpec::Ssh(ssh) = w {
                ssh.identity.iter_mut().for_each(resolve);
                ssh.known_hosts.iter_mut().for_each(resolve);
                ssh.worker_binary.iter_mut().for_each(resolve);
            }
        }
    }

    /// Parses and checks config text; `source_name` labels errors.
    pub fn parse(text: &str, source_name: &str) -> Result<Self, SexpError> {
        let node = sexp::parse_single(text, source_name)?;
        Self::from_sexp(Src(source_name), &node, None)
    }

    /// The run limits some benchmark sets, each at its largest: what every worker
    /// must be able to apply.
    pub fn limits_in_use(&self) -> Limits {
        let largest = |f: fn(&Limits) -> Option<f64>| {
            self.benchmarks
                .iter()
                .filter_map(|b| f(&b.limits))
                .reduce(f64::max)
        };
        Limits {
            cpus: largest(|l| l.cpus),
            memory_bytes: largest(|l| l.memory_bytes.map(|m| m as f64)).map(|m| m as u64),
        }
    }

    /// The benchmark named `name`.
    pub fn benchmark(&self, name: &str) -> Option<&BenchmarkSpec> {
        self.benchmarks.iter().find(|b| b.name == name)
    }

    /// The experiment named `name`.
    pub fn experiment(&self, name: &str) -> Option<&Experiment> {
        self.experiments.iter().find(|e| e.name == name)
    }

    /// The normalized text of the config, every default spelled out.
    pub fn to_text(&self) -> String {
        format!("{}\n", self.to_sexp())
    }

    /// The config in `node`; `base`, the config file's folder, is where
    /// `(include ...)` paths start (none for config text without a file).
    fn from_sexp(src: Src<'_>, node: &Sexp, base: Option<&Path>) -> Result<Self, SexpError> {
        let rec = Record::open(
            src,
            node,
            "campaign",
            Some("campaign"),
            &[
                "name",
                "store",
                "objective",
                "runs",
                "timeouts",
                "calibration",
                "experiments",
                "benchmarks",
                "workers",
            ],
        )?;
        let name = rec.req_value("name", decode::name)?;
        let store = PathBuf::from(rec.req_value("store", decode::string)?);
        let objective = match rec.opt("objective") {
            Some(f) => objective(src, &f)?,
            None => Objective {
                metric: Metric::WallTime,
                statistic: Statistic::Median,
            },
        };
        let runs = match rec.opt("runs") {
            Some(f) => run_policy(src, &f)?,
            None => RunPolicy::default(),
        };
        let timeouts = match rec.opt("timeouts") {
            Some(f) => timeouts(src, &f)?,
            None => Timeouts::default(),
        };
        let benchmarks_field = rec.req("benchmarks")?;
        let mut benchmarks: Vec<BenchmarkSpec> = Vec::new();
        // Names seen so far, in sets: a search of the list for each entry is
        // quadratic in a generated config of many thousand entries.
        let mut benchmark_names = HashSet::new();
        for entry in decode::entries(&benchmarks_field)? {
            let found = match form_args(entry, "include") {
                Some(args) => included_benchmarks(src, entry, args, base)?,
                None => vec![benchmark(src, entry)?],
            };
            for b in found {
                if !benchmark_names.insert(b.name.clone()) {
                    return Err(src.error(
                        entry.pos,
                        format!("benchmark '{}' is defined twice", b.name),
                    ));
                }
                benchmarks.push(b);
            }
        }
        let experiments_field = rec.req("experiments")?;
        let mut experiments: Vec<Experiment> = Vec::new();
        let mut experiment_names = HashSet::new();
        let mut generated: Vec<Sexp> = Vec::new();
        for entry in decode::entries(&experiments_field)? {
            match form_args(entry, "each-benchmark") {
                // One experiment per benchmark, named after it, with the form's fields.
                Some(fields) => generated.extend(benchmarks.iter().map(|b| {
                    let mut items = vec![
                        Sexp::field("name", vec![name_sexp(&b.name)]),
                        Sexp::field("benchmark", vec![name_sexp(&b.name)]),
                    ];
                    items.extend(fields.iter().cloned());
                    Sexp {
                        pos: entry.pos,
                        kind: SexpKind::List(items),
                    }
                })),
                None => generated.push(entry.clone()),
            }
        }
        for entry in &generated {
            let e = experiment(src, entry)?;
            if !benchmark_names.contains(&e.benchmark) {
                let known: Vec<_> = benchmarks.iter().map(|b| b.name.as_str()).collect();
                return Err(src.error(
                    entry.pos,
                    format!(
                        "experiment '{}' names benchmark '{}', which is not defined; defined: {}",
                        e.name,
                        e.benchmark,
                        known.join(", ")
                    ),
                ));
            }
            if !experiment_names.insert(e.name.clone()) {
                return Err(src.error(
                    entry.pos,
                    format!(
                        "two experiments are named '{}'; give one a (name ...)",
                        e.name
                    ),
                ));
            }
            experiments.push(e);
        }
        let workers_field = rec.req("workers")?;
        let mut workers: Vec<WorkerSpec> = Vec::new();
        let mut worker_names = HashSet::new();
        for (i, entry) in decode::entries(&workers_field)?.iter().enumerate() {
            for w in worker(src, entry, i)? {
                if !worker_names.insert(w.name().to_string()) {
                    return Err(src.error(
                        entry.pos,
                        format!(
                            "two workers are named '{}'; give one a (name ...)",
                            w.name()
                        ),
                    ));
                }
                workers.push(w);
            }
        }
        let calibration = match rec.opt("calibration") {
            Some(f) => Some(calibration(src, &f, &benchmarks)?),
            None => None,
        };
        Ok(CampaignConfig {
            name,
            store,
            objective,
            runs,
            timeouts,
            calibration,
            experiments,
            benchmarks,
            workers,
        })
    }

    /// The config as an s-expression, every default spelled out.
    pub fn to_sexp(&self) -> Sexp {
        let f = Sexp::field;
        let o = &self.objective;
        let r = &self.runs;
        let t = &self.timeouts;
        let mut fields = vec![
            Sexp::symbol("campaign"),
            f("name", vec![name_sexp(&self.name)]),
            f("store", vec![path_sexp(&self.store)]),
            f(
                "objective",
                vec![
                    f("metric", vec![Sexp::symbol(o.metric.name())]),
                    f("statistic", vec![Sexp::symbol(o.statistic.name())]),
                ],
            ),
            f(
                "runs",
                vec![
                    f("warmup", vec![int(r.warmup)]),
                    f("min", vec![int(r.min)]),
                    f("max", vec![int(r.max)]),
                    f("target-rel-ci", vec![float(r.target_rel_ci)]),
                    f("max-time-s", vec![float(r.max_time_s)]),
                ],
            ),
            f(
                "timeouts",
                vec![
                    f("connect-s", vec![float(t.connect_s)]),
                    f("heartbeat-s", vec![float(t.heartbeat_s)]),
                    f("lost-after-s", vec![float(t.lost_after_s)]),
                    f("step-losses", vec![int(t.step_losses)]),
                ],
            ),
        ];
        // Printed only when given, so configs without it keep their normalized text.
        if let Some(c) = &self.calibration {
            fields.push(c.to_sexp());
        }
        fields.extend([
            f(
                "experiments",
                self.experiments.iter().map(Experiment::to_sexp).collect(),
            ),
            f(
                "benchmarks",
                self.benchmarks.iter().map(BenchmarkSpec::to_sexp).collect(),
            ),
            f(
                "workers",
                self.workers.iter().map(WorkerSpec::to_sexp).collect(),
            ),
        ]);
        Sexp::list(fields)
    }
}

impl Default for RunPolicy {
    fn default() -> Self {
        RunPolicy {
            warmup: 1,
            min: 3,
            max: 10,
            target_rel_ci: 0.01,
            max_time_s: 60.0,
        }
    }
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect_s: 30.0,
            heartbeat_s: 5.0,
            lost_after_s: 30.0,
            step_losses: 3,
        }
    }
}

fn int(v: u32) -> Sexp {
    Sexp::new(SexpKind::Int(i64::from(v)))
}

fn float(v: f64) -> Sexp {
    Sexp::new(SexpKind::Float(v))
}

fn path_sexp(p: &Path) -> Sexp {
    Sexp::string(p.display().to_string())
}

fn strings(items: &[String]) -> Sexp {
    Sexp::list(items.iter().map(|s| Sexp::string(s.clone())).collect())
}

fn objective(src: Src<'_>, field: &Field<'_>) -> Result<Objective, SexpError> {
    let rec = field_record(src, field, &["metric", "statistic"])?;
    let metric = match rec.opt("metric") {
        Some(f) => {
            let node = f.one()?;
            let name = decode::text(src, node, "metric")?;
            name.parse::<Metric>().map_err(|e| src.error(node.pos, e))?
        }
        None => Metric::WallTime,
    };
    let statistic = match rec.opt("statistic") {
        Some(f) => {
            let name = decode::choice(src, f.one()?, "statistic", Statistic::NAMES)?;
            Statistic::from_name(name).expect("choice comes from NAMES")
        }
        None => Statistic::Median,
    };
    Ok(Objective { metric, statistic })
}

/// A record whose fields follow the field's name: `(runs (min 3) (max 10))`.
fn field_record<'a>(
    src: Src<'a>,
    field: &Field<'a>,
    allowed: &[&str],
) -> Result<Record<'a>, SexpError> {
    Record::open_args(src, field.name, field.pos, field.args, allowed)
}

fn run_policy(src: Src<'_>, field: &Field<'_>) -> Result<RunPolicy, SexpError> {
    let rec = field_record(
        src,
        field,
        &["warmup", "min", "max", "target-rel-ci", "max-time-s"],
    )?;
    let d = RunPolicy::default();
    let policy = RunPolicy {
        warmup: rec.opt_value("warmup", decode::uint32)?.unwrap_or(d.warmup),
        min: rec.opt_value("min", decode::positive32)?.unwrap_or(d.min),
        max: rec.opt_value("max", decode::positive32)?.unwrap_or(d.max),
        target_rel_ci: rec
            .opt_value("target-rel-ci", decode::number)?
            .unwrap_or(d.target_rel_ci),
        max_time_s: rec
            .opt_value("max-time-s", decode::positive_number)?
            .unwrap_or(d.max_time_s),
    };
    if policy.max < policy.min {
        let pos = rec.opt("max").map_or(field.pos, |f| f.pos);
        return Err(src.error(
            pos,
            format!("runs: max ({}) is below min ({})", policy.max, policy.min),
        ));
    }
    Ok(policy)
}

fn timeouts(src: Src<'_>, field: &Field<'_>) -> Result<Timeouts, SexpError> {
    let rec = field_record(
        src,
        field,
        &["connect-s", "heartbeat-s", "lost-after-s", "step-losses"],
    )?;
    let d = Timeouts::default();
    Ok(Timeouts {
        connect_s: rec
            .opt_value("connect-s", decode::positive_number)?
            .unwrap_or(d.connect_s),
        heartbeat_s: rec
            .opt_value("heartbeat-s", decode::positive_number)?
            .unwrap_or(d.heartbeat_s),
        lost_after_s: rec
            .opt_value("lost-after-s", decode::positive_number)?
            .unwrap_or(d.lost_after_s),
        step_losses: rec
            .opt_value("step-losses", decode::positive32)?
            .unwrap_or(d.step_losses),
    })
}

fn calibration(
    src: Src<'_>,
    field: &Field<'_>,
    benchmarks: &[BenchmarkSpec],
) -> Result<Calibration, SexpError> {
    let rec = field_record(
        src,
        field,
        &["benchmark", "every", "max-drift", "take-out-of-service"],
    )?;
    let benchmark = rec.req_value("benchmark", decode::text)?;
    if !benchmarks.iter().any(|b| b.name == benchmark) {
        let known: Vec<_> = benchmarks.iter().map(|b| b.name.as_str()).collect();
        return Err(src.error(
            rec.req("benchmark")?.pos,
            format!(
                "calibration names benchmark '{benchmark}', which is not defined; defined: {}",
                known.join(", ")
            ),
        ));
    }
    Ok(Calibration {
        benchmark,
        every: rec
            .opt_value("every", decode::uint32)?
            .unwrap_or(Calibration::DEFAULT_EVERY),
        max_drift: rec
            .opt_value("max-drift", decode::positive_number)?
            .unwrap_or(Calibration::DEFAULT_MAX_DRIFT),
        take_out_of_service: rec
            .opt_value("take-out-of-service", boolean)?
            .unwrap_or(false),
    })
}

/// `#t` or `#f`.
fn boolean(src: Src<'_>, node: &Sexp, field: &str) -> Result<bool, SexpError> {
    match node.kind {
        SexpKind::Bool(b) => Ok(b),
        _ => Err(src.error(
            node.pos,
            format!(
                "field '{field}' expects #t or #f, found {} `{}`",
                node.describe(),
                decode::short(node)
            ),
        )),
    }
}

impl Calibration {
    fn to_sexp(&self) -> Sexp {
        let f = Sexp::field;
        f(
            "calibration",
            vec![
                f("benchmark", vec![name_sexp(&self.benchmark)]),
                f("every", vec![int(self.every)]),
                f("max-drift", vec![float(self.max_drift)]),
                f(
                    "take-out-of-service",
                    vec![Sexp::new(SexpKind::Bool(self.take_out_of_service))],
                ),
            ],
        )
    }
}

fn experiment(src: Src<'_>, node: &Sexp) -> Result<Experiment, SexpError> {
    let rec = Record::open(
        src,
        node,
        "experiment",
        None,
        &[
            "name",
            "benchmark",
            "search",
            "chains",
            "seed",
            "baseline",
            "remeasure-every",
            "parallel",
            "proposals",
            "race",
        ],
    )?;
    let benchmark = rec.req_value("benchmark", decode::name)?;
    let search_field = rec.req("search")?;
    let search = search(src, search_field.one()?)?;
    let proposals = match rec.opt("proposals") {
        Some(f) => {
            let node = f.one()?;
            match decode::choice(src, node, "proposals", &["uniform", "guided"])? {
                "guided" => {
                    if !search.draws_flips() {
                        return Err(src.error(
                            node.pos,
                            "(proposals guided) applies to simulated-annealing and random-walk \
                             only: random-search and hill-climbing draw their own moves"
                                .to_string(),
                        ));
                    }
                    Proposals::Guided
                }
                _ => Proposals::Uniform,
            }
        }
        None => Proposals::Uniform,
    };
    Ok(Experiment {
        name: rec
            .opt_value("name", decode::name)?
            .unwrap_or_else(|| benchmark.clone()),
        benchmark,
        search,
        chains: rec.opt_value("chains", decode::positive32)?.unwrap_or(1),
        seed: rec.opt_value("seed", decode::uint)?.unwrap_or(0),
        baseline: rec
            .opt_value("baseline", decode::string)?
            .map(PathBuf::from),
        remeasure_every: rec
            .opt_value("remeasure-every", decode::uint32)?
            .unwrap_or(0),
        parallel: rec.opt_value("parallel", decode::positive32)?.unwrap_or(1),
        proposals,
        race: match rec.opt("race") {
            Some(f) => race(src, f.one()?)?,
            None => Some(Experiment::DEFAULT_RACE),
        },
    })
}

/// `(race off)` or `(race P)` with `P` strictly between 0 and 1.
fn race(src: Src<'_>, node: &Sexp) -> Result<Option<f64>, SexpError> {
    if node.as_symbol() == Some("off") {
        return Ok(None);
    }
    let bad = || {
        src.error(
            node.pos,
            "'race' must be off or an acceptance probability between 0 and 1 (exclusive), \
             like 0.01"
                .to_string(),
        )
    };
    let p = decode::number(src, node, "race").map_err(|_| bad())?;
    if p > 0.0 && p < 1.0 {
        Ok(Some(p))
    } else {
        Err(bad())
    }
}

impl Experiment {
    fn to_sexp(&self) -> Sexp {
        let f = Sexp::field;
        let mut fields = vec![
            f("name", vec![name_sexp(&self.name)]),
            f("benchmark", vec![name_sexp(&self.benchmark)]),
            f("search", vec![self.search.to_sexp()]),
            f("chains", vec![int(self.chains)]),
            f("seed", vec![Sexp::new(SexpKind::Int(self.seed as i64))]),
        ];
        if let Some(b) = &self.baseline {
            fields.push(f("baseline", vec![path_sexp(b)]));
        }
        fields.push(f("remeasure-every", vec![int(self.remeasure_every)]));
        fields.push(f("parallel", vec![int(self.parallel)]));
        if self.proposals == Proposals::Guided {
            // Written only when not the default, so stored configs of earlier versions compare equal.
            fields.push(f("proposals", vec![Sexp::symbol("guided")]));
        }
        // Likewise written only when not the default.
        match self.race {
            Some(p) if p == Experiment::DEFAULT_RACE => {}
            Some(p) => fields.push(f("race", vec![float(p)])),
            None => fields.push(f("race", vec![Sexp::symbol("off")])),
        }
        Sexp::list(fields)
    }
}

fn search(src: Src<'_>, node: &Sexp) -> Result<Search, SexpError> {
    let head = node
        .as_list()
        .and_then(|l| l.first())
        .and_then(Sexp::as_symbol);
    match head {
        Some("simulated-annealing") => {
            let rec = Record::open(
                src,
                node,
                "simulated-annealing",
                Some("simulated-annealing"),
                &["steps", "t-max", "t-min", "flips", "schedule"],
            )?;
            let t_max = rec
                .opt_value("t-max", decode::positive_number)?
                .unwrap_or(0.04);
            let t_min = rec
                .opt_value("t-min", decode::positive_number)?
                .unwrap_or(0.001);
            if t_min > t_max {
                return Err(src.error(
                    rec.pos(),
                    format!("t-min ({t_min}) is above t-max ({t_max})"),
                ));
            }
            let schedule = match rec.opt("schedule") {
                Some(f) => {
                    match decode::choice(src, f.one()?, "schedule", &["exponential", "linear"])? {
                        "linear" => Schedule::Linear,
                        _ => Schedule::Exponential,
                    }
                }
                None => Schedule::Exponential,
            };
            Ok(Search::SimulatedAnnealing {
                steps: rec.req_value("steps", decode::positive32)?,
                t_max,
                t_min,
                flips: rec.opt_value("flips", decode::positive32)?.unwrap_or(3),
                schedule,
            })
        }
        Some("random-walk") => {
            let rec = Record::open(
                src,
                node,
                "random-walk",
                Some("random-walk"),
                &["steps", "flips"],
            )?;
            Ok(Search::RandomWalk {
                steps: rec.req_value("steps", decode::positive32)?,
                flips: rec.opt_value("flips", decode::positive32)?.unwrap_or(3),
            })
        }
        Some("random-search") => {
            let rec = Record::open(
                src,
                node,
                "random-search",
                Some("random-search"),
                &["steps", "flips"],
            )?;
            Ok(Search::RandomSearch {
                steps: rec.req_value("steps", decode::positive32)?,
                flips: rec.opt_value("flips", decode::positive32)?,
            })
        }
        Some("hill-climbing") => {
            let rec = Record::open(
                src,
                node,
                "hill-climbing",
                Some("hill-climbing"),
                &["steps", "kick"],
            )?;
            Ok(Search::HillClimbing {
                steps: rec.req_value("steps", decode::positive32)?,
                kick: rec.opt_value("kick", decode::positive32)?.unwrap_or(3),
            })
        }
        Some("screening") => {
            let rec = Record::open(src, node, "screening", Some("screening"), &["steps"])?;
            Ok(Search::Screening {
                steps: rec.req_value("steps", decode::positive32)?,
            })
        }
        _ => Err(src.error(
            node.pos,
            format!(
                "expected a search: (simulated-annealing ...), (random-walk ...), \
                 (random-search ...), (hill-climbing ...) or (screening ...), found `{}`",
                decode::short(node)
            ),
        )),
    }
}

impl Search {
    fn to_sexp(&self) -> Sexp {
        let f = Sexp::field;
        match self {
            Search::SimulatedAnnealing {
                steps,
                t_max,
                t_min,
                flips,
                schedule,
            } => f(
                "simulated-annealing",
                vec![
                    f("steps", vec![int(*steps)]),
                    f("t-max", vec![float(*t_max)]),
                    f("t-min", vec![float(*t_min)]),
                    f("flips", vec![int(*flips)]),
                    f(
                        "schedule",
                        vec![Sexp::symbol(match schedule {
                            Schedule::Exponential => "exponential",
                            Schedule::Linear => "linear",
                        })],
                    ),
                ],
            ),
            Search::RandomWalk { steps, flips } => f(
                "random-walk",
                vec![f("steps", vec![int(*steps)]), f("flips", vec![int(*flips)])],
            ),
            Search::RandomSearch { steps, flips } => {
                let mut fields = vec![f("steps", vec![int(*steps)])];
                // No `flips`: uniform over the whole space.
                fields.extend(flips.map(|k| f("flips", vec![int(k)])));
                f("random-search", fields)
            }
            Search::HillClimbing { steps, kick } => f(
                "hill-climbing",
                vec![f("steps", vec![int(*steps)]), f("kick", vec![int(*kick)])],
            ),
            Search::Screening { steps } => f("screening", vec![f("steps", vec![int(*steps)])]),
        }
    }
}

const BENCHMARK_FIELDS: &[&str] = &[
    "name",
    "kind",
    "sources",
    "build",
    "run",
    "timeout-s",
    "build-timeout-s",
    "discovery-cpu-s",
    "build-memory",
    "env",
    "pass-env",
    "dependency-crates",
    "check-output",
    "compiler",
    "fallback",
    "knobs",
    "limits",
    "container",
];

fn benchmark(src: Src<'_>, node: &Sexp) -> Result<BenchmarkSpec, SexpError> {
    let rec = Record::open(src, node, "benchmark", None, BENCHMARK_FIELDS)?;
    let name = rec.req_value("name", decode::name)?;
    let build = rec
        .opt_value("build", decode::string_list)?
        .unwrap_or_default();
    let run = rec.req_value("run", decode::string_list)?;
    if run.is_empty() {
        return Err(src.error(rec.req("run")?.pos, "field 'run' needs a command, found ()"));
    }
    let kind_field = rec.req("kind")?;
    let kind_name = decode::choice(src, kind_field.one()?, "kind", &["llvm-inline", "knobs"])?;
    let only_for = |field: &str, kind: &str| -> Result<(), SexpError> {
        match rec.opt(field) {
            Some(f) => Err(src.error(
                f.pos,
                format!("field '{field}' applies only to benchmarks of kind {kind}"),
            )),
            None => Ok(()),
        }
    };
    let kind = if kind_name == "llvm-inline" {
        only_for("knobs", "knobs")?;
        if build.is_empty() {
            return Err(src.error(
                rec.pos(),
                format!("benchmark '{name}' of kind llvm-inline needs a (build (...)) command"),
            ));
        }
        let compiler = match rec.opt("compiler") {
            Some(f) => match decode::choice(src, f.one()?, "compiler", &["clang", "rustc"])? {
                "rustc" => Compiler::Rustc,
                _ => Compiler::Clang,
            },
            None => infer_compiler(&build[0]).ok_or_else(|| {
                src.error(
                    rec.req("build").map_or(rec.pos(), |f| f.pos),
                    format!(
                        "cannot tell the compiler from '{}'; add (compiler clang) or (compiler rustc)",
                        build[0]
                    ),
                )
            })?,
        };
        let fallback = match rec.opt("fallback") {
            Some(f) => match decode::choice(
                src,
                f.one()?,
                "fallback",
                &["never-inline", "always-inline", "original"],
            )? {
                "always-inline" => ReplayFallback::AlwaysInline,
                "original" => ReplayFallback::Original,
                _ => ReplayFallback::NeverInline,
            },
            None => ReplayFallback::NeverInline,
        };
        BenchmarkKind::LlvmInline { compiler, fallback }
    } else {
        only_for("compiler", "llvm-inline")?;
        only_for("fallback", "llvm-inline")?;
        let knobs = rec.req("knobs")?;
        BenchmarkKind::Knobs {
            points: knob_points(src, &knobs)?,
        }
    };
    let env = match rec.opt("env") {
        Some(f) => env_pairs(src, &f)?,
        None => Vec::new(),
    };
    let dependency_crates = match rec.opt("dependency-crates") {
        Some(f) if matches!(kind, BenchmarkKind::LlvmInline { compiler: Compiler::Rustc, .. }) => {
            decode::string_list(src, f.one()?, "dependency-crates")?
        }
        Some(f) => {
            return Err(src.error(
                f.pos,
                "field 'dependency-crates' applies only to llvm-inline benchmarks built with cargo (compiler rustc)",
            ))
        }
        None => Vec::new(),
    };
    let pass_env = match rec.opt("pass-env") {
        Some(f) => variable_names(src, &f)?,
        None => Vec::new(),
    };
    let check_output = match rec.opt("check-output") {
        Some(f) => output_check(src, f.one()?)?,
        None => OutputCheck::Stdout,
    };
    let limits = match rec.opt("limits") {
        Some(f) => limits(src, &f)?,
        None => Limits::default(),
    };
    let container = match rec.opt("container") {
        Some(f) if !limits.is_none() => return Err(src.error(
            f.pos,
            "a benchmark with (container ...) takes its cpus and memory there, not in (limits ...)",
        )),
        Some(f) => Some(container(src, &f)?),
        None => None,
    };
    Ok(BenchmarkSpec {
        sources: PathBuf::from(rec.req_value("sources", decode::string)?),
        timeout_s: rec
            .opt_value("timeout-s", decode::positive_number)?
            .unwrap_or(60.0),
        build_timeout_s: rec
            .opt_value("build-timeout-s", decode::positive_number)?
            .unwrap_or(300.0),
        discovery_cpu_s: rec
            .opt_value("discovery-cpu-s", decode::positive_number)?
            .unwrap_or_else(default_discovery_cpu_s),
        build_memory_bytes: rec
            .opt_value("build-memory", decode::byte_size)?
            .unwrap_or_else(default_build_memory_bytes),
        name,
        kind,
        build,
        run,
        env,
        pass_env,
        dependency_crates,
        check_output,
        limits,
        container,
    })
}

fn container(src: Src<'_>, field: &Field<'_>) -> Result<Container, SexpError> {
    let rec = field_record(src, field, &["engine", "image", "cpus", "memory"])?;
    let engine = match decode::choice(
        src,
        rec.req("engine")?.one()?,
        "engine",
        &["podman", "docker"],
    )? {
        "docker" => ContainerEngine::Docker,
        _ => ContainerEngine::Podman,
    };
    Ok(Container {
        engine,
        image: rec.req_value("image", decode::string)?,
        limits: limit_fields(&rec)?,
    })
}

fn limits(src: Src<'_>, field: &Field<'_>) -> Result<Limits, SexpError> {
    limit_fields(&field_record(src, field, &["cpus", "memory"])?)
}

/// The `(cpus ...)` and `(memory ...)` of a record.
fn limit_fields(rec: &Record<'_>) -> Result<Limits, SexpError> {
    Ok(Limits {
        cpus: rec.opt_value("cpus", decode::positive_number)?,
        memory_bytes: rec.opt_value("memory", decode::byte_size)?,
    })
}

fn default_discovery_cpu_s() -> f64 {
    60.0
}

/// 8 GiB: two compiles of discovery (`make -j2`) at their 4 GiB each.
fn default_build_memory_bytes() -> u64 {
    8 << 30
}

/// The compiler family from a build command's program name (cargo runs rustc).
pub fn infer_compiler(program: &str) -> Option<Compiler> {
    let base = Path::new(program).file_name()?.to_str()?;
    if base.starts_with("clang") {
        Some(Compiler::Clang)
    } else if base.starts_with("rustc") || base == "cargo" {
        Some(Compiler::Rustc)
    } else {
        None
    }
}

fn knob_points(src: Src<'_>, field: &Field<'_>) -> Result<Vec<DecisionPoint>, SexpError> {
    let mut points: Vec<DecisionPoint> = Vec::new();
    let mut ids = HashSet::new();
    for entry in decode::entries(field)? {
        let (id, values) = match entry.as_list() {
            Some([id, values @ ..]) if !values.is_empty() => (id, values),
            _ => {
                return Err(src.error(
                    entry.pos,
                    format!(
                        "expected a knob like (tile 8 16 32), found `{}`",
                        decode::short(entry)
                    ),
                ))
            }
        };
        let id = SiteId(decode::text(src, id, "knobs")?);
        let mut domain: Vec<DecisionValue> = Vec::new();
        let mut seen = HashSet::new();
        for v in values {
            let value = DecisionValue::from_sexp(src, v, id.as_str())?;
            if !seen.insert(value.clone()) {
                return Err(src.error(v.pos, format!("knob '{id}' lists value '{value}' twice")));
            }
            domain.push(value);
        }
        if !ids.insert(id.clone()) {
            return Err(src.error(entry.pos, format!("knob '{id}' is declared twice")));
        }
        points.push(DecisionPoint { id, domain });
    }
    Ok(points)
}

fn env_pairs(src: Src<'_>, field: &Field<'_>) -> Result<Vec<(String, String)>, SexpError> {
    field
        .args
        .iter()
        .map(|entry| match entry.as_list() {
            Some([k, v]) => Ok((
                decode::string(src, k, "env")?,
                decode::string(src, v, "env")?,
            )),
            _ => Err(src.error(
                entry.pos,
                format!(
                    "expected (\"NAME\" \"value\") in env, found `{}`",
                    decode::short(entry)
                ),
            )),
        })
        .collect()
}

/// `(pass-env ("NAME" ...))`: names of environment variables.
fn variable_names(src: Src<'_>, field: &Field<'_>) -> Result<Vec<String>, SexpError> {
    let node = field.one()?;
    let names = decode::string_list(src, node, "pass-env")?;
    if let Some(bad) = names
        .iter()
        .find(|n| n.is_empty() || n.contains('=') || n.contains('\0'))
    {
        return Err(src.error(
            node.pos,
            format!("'{bad}' is no environment variable name (pass-env)"),
        ));
    }
    Ok(names)
}

fn output_check(src: Src<'_>, node: &Sexp) -> Result<OutputCheck, SexpError> {
    if let Some([head, arg]) = node.as_list() {
        let text = || decode::string(src, arg, "check-output");
        let pattern = || {
            let p = text()?;
            regex::Regex::new(&p).map_err(|e| {
                src.error(
                    arg.pos,
                    format!("not a regular expression (check-output): {e}"),
                )
            })?;
            Ok(p)
        };
        match head.as_symbol() {
            Some("file") => return Ok(OutputCheck::File(text()?)),
            Some("lines") => return Ok(OutputCheck::Lines(pattern()?)),
            Some("lines-except") => return Ok(OutputCheck::LinesExcept(pattern()?)),
            Some("command") => {
                let argv = decode::string_list(src, arg, "check-output")?;
                if argv.is_empty() {
                    return Err(src.error(
                        arg.pos,
                        "check-output (command ...) needs a command, found ()",
                    ));
                }
                return Ok(OutputCheck::Command(argv));
            }
            _ => {}
        }
    }
    match decode::choice(
        src,
        node,
        "check-output",
        &[
            "none",
            "stdout",
            "(file \"PATH\")",
            "(lines \"REGEX\")",
            "(lines-except \"REGEX\")",
            "(command (\"PROGRAM\" \"ARG\" ...))",
        ],
    )? {
        "none" => Ok(OutputCheck::None),
        _ => Ok(OutputCheck::Stdout),
    }
}

impl BenchmarkSpec {
    /// The knob decision points, for a `knobs` benchmark.
    pub fn knob_points(&self) -> Option<&[DecisionPoint]> {
        match &self.kind {
            BenchmarkKind::Knobs { points } => Some(points),
            BenchmarkKind::LlvmInline { .. } => None,
        }
    }

    fn to_sexp(&self) -> Sexp {
        let f = Sexp::field;
        let mut fields = vec![f("name", vec![name_sexp(&self.name)])];
        match &self.kind {
            BenchmarkKind::LlvmInline { compiler, fallback } => {
                fields.push(f("kind", vec![Sexp::symbol("llvm-inline")]));
                fields.push(f(
                    "compiler",
                    vec![Sexp::symbol(match compiler {
                        Compiler::Clang => "clang",
                        Compiler::Rustc => "rustc",
                    })],
                ));
                fields.push(f(
                    "fallback",
                    vec![Sexp::symbol(match fallback {
                        ReplayFallback::NeverInline => "never-inline",
                        ReplayFallback::AlwaysInline => "always-inline",
                        ReplayFallback::Original => "original",
                    })],
                ));
            }
            BenchmarkKind::Knobs { points } => {
                fields.push(f("kind", vec![Sexp::symbol("knobs")]));
                let knobs = points
                    .iter()
                    .map(|p| {
                        let mut items = vec![name_sexp(p.id.as_str())];
                        items.extend(p.domain.iter().map(DecisionValue::to_sexp));
                        Sexp::list(items)
                    })
                    .collect();
                fields.push(f("knobs", knobs));
            }
        }
        fields.push(f("sources", vec![path_sexp(&self.sources)]));
        if !self.build.is_empty() {
            fields.push(f("build", vec![strings(&self.build)]));
        }
        fields.push(f("run", vec![strings(&self.run)]));
        fields.push(f("timeout-s", vec![float(self.timeout_s)]));
        fields.push(f("build-timeout-s", vec![float(self.build_timeout_s)]));
        fields.push(f("discovery-cpu-s", vec![float(self.discovery_cpu_s)]));
        fields.push(f(
            "build-memory",
            vec![Sexp::new(SexpKind::Int(self.build_memory_bytes as i64))],
        ));
        if !self.env.is_empty() {
            let pairs = self
                .env
                .iter()
                .map(|(k, v)| Sexp::list(vec![Sexp::string(k.clone()), Sexp::string(v.clone())]))
                .collect();
            fields.push(f("env", pairs));
        }
        if !self.dependency_crates.is_empty() {
            fields.push(f(
                "dependency-crates",
                vec![strings(&self.dependency_crates)],
            ));
        }
        if !self.pass_env.is_empty() {
            fields.push(f("pass-env", vec![strings(&self.pass_env)]));
        }
        let check = match &self.check_output {
            OutputCheck::None => Sexp::symbol("none"),
            OutputCheck::Stdout => Sexp::symbol("stdout"),
            OutputCheck::File(p) => Sexp::list(vec![Sexp::symbol("file"), Sexp::string(p.clone())]),
            OutputCheck::Lines(r) => {
                Sexp::list(vec![Sexp::symbol("lines"), Sexp::string(r.clone())])
            }
            OutputCheck::LinesExcept(r) => {
                Sexp::list(vec![Sexp::symbol("lines-except"), Sexp::string(r.clone())])
            }
            OutputCheck::Command(argv) => Sexp::list(vec![Sexp::symbol("command"), strings(argv)]),
        };
        fields.push(f("check-output", vec![check]));
        if !self.limits.is_none() {
            fields.push(self.limits.to_sexp());
        }
        if let Some(c) = &self.container {
            fields.push(c.to_sexp());
        }
        Sexp::list(fields)
    }
}

const LOCAL_FIELDS: &[&str] = &["name", "slots", "cpus", "gpus"];
const SSH_FIELDS: &[&str] = &[
    "name",
    "host",
    "user",
    "port",
    "identity",
    "known-hosts",
    "host-key-check",
    "rundir",
    "slots",
    "cpus",
    "gpus",
    "worker-binary",
];

/// The workers of one entry: one, or `N` for a `(slurm (nodes N) ...)`.
fn worker(src: Src<'_>, node: &Sexp, index: usize) -> Result<Vec<WorkerSpec>, SexpError> {
    // Accept both `(local ...)` and the wrapped `((local ...))`.
    let node = match node.as_list() {
        Some([inner]) if inner.as_list().is_some() => inner,
        _ => node,
    };
    let head = node
        .as_list()
        .and_then(|l| l.first())
        .and_then(Sexp::as_symbol);
    match head {
        Some("local") => {
            let rec = Record::open(src, node, "local worker", Some("local"), LOCAL_FIELDS)?;
            let slots = rec.opt_value("slots", decode::positive32)?.unwrap_or(1);
            let (cpus, gpus) = slot_devices(src, &rec, slots)?;
            Ok(vec![WorkerSpec::Local {
                name: rec.opt_value("name", decode::name)?.unwrap_or_else(|| {
                    if index == 0 {
                        "local".into()
                    } else {
                        format!("local-{index}")
                    }
                }),
                slots,
                cpus,
                gpus,
            }])
        }
        Some("ssh") => {
            let rec = Record::open(src, node, "ssh worker", Some("ssh"), SSH_FIELDS)?;
            let login = ssh_login(src, &rec)?;
            let slots = rec.opt_value("slots", decode::positive32)?.unwrap_or(1);
            let (cpus, gpus) = slot_devices(src, &rec, slots)?;
            let name = match rec.opt_value("name", decode::name)? {
                Some(name) => name,
                // The host names the worker only where it can name a folder.
                None => match decode::unsafe_name(&login.host) {
                    Some(why) => {
                        return Err(src.error(
                            rec.req("host")?.pos,
                            format!(
                                "host '{}' cannot be the worker's name ({why}); give the worker \
                                 a (name ...)",
                                login.host
                            ),
                        ))
                    }
                    None => login.host.clone(),
                },
            };
            Ok(vec![WorkerSpec::Ssh(SshWorker {
                name,
                rundir: rec.req_value("rundir", decode::string)?,
                slots,
                cpus,
                gpus,
                worker_binary: rec
                    .opt_value("worker-binary", decode::string)?
                    .map(PathBuf::from),
                ..login
            })])
        }
        Some("slurm") => slurm_workers(src, node, index),
        _ => Err(src.error(
            node.pos,
            format!(
                "expected a worker: (local ...), (ssh ...) or (slurm ...), found `{}`",
                decode::short(node)
            ),
        )),
    }
}

const SLURM_FIELDS: &[&str] = &[
    "name",
    "partition",
    "nodes",
    "slots",
    "cpus-per-task",
    "gpus-per-task",
    "time",
    "srun-args",
    "rundir",
    "worker-binary",
    "retries",
    "via-ssh",
];
const VIA_SSH_FIELDS: &[&str] = &[
    "host",
    "user",
    "port",
    "identity",
    "known-hosts",
    "host-key-check",
];

/// The login fields of an `(ssh ...)` or `(via-ssh ...)` record; the rest as for a worker
/// named after the host, of one slot, with no rundir.
fn ssh_login(src: Src<'_>, rec: &Record<'_>) -> Result<SshWorker, SexpError> {
    let host = rec.req_value("host", decode::string)?;
    let port = match rec.opt("port") {
        Some(f) => {
            let node = f.one()?;
            let v = decode::uint(src, node, "port")?;
            u16::try_from(v)
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| src.error(node.pos, format!("port {v} is outside 1..65535")))?
        }
        None => 22,
    };
    let host_key_check = match rec.opt("host-key-check") {
        Some(f) => match decode::choice(
            src,
            f.one()?,
            "host-key-check",
            &["strict", "accept-new", "off"],
        )? {
            "accept-new" => HostKeyCheck::AcceptNew,
            "off" => HostKeyCheck::Off,
            _ => HostKeyCheck::Strict,
        },
        None => HostKeyCheck::Strict,
    };
    Ok(SshWorker {
        name: host.clone(),
        user: rec.opt_value("user", decode::text)?,
        port,
        identity: rec
            .opt_value("identity", decode::string)?
            .map(PathBuf::from),
        known_hosts: rec
            .opt_value("known-hosts", decode::string)?
            .map(PathBuf::from),
        host_key_check,
        rundir: String::new(),
        slots: 1,
        cpus: Vec::new(),
        gpus: Vec::new(),
        worker_binary: None,
        host,
    })
}

/// A value srun takes as one option argument: non-empty, no whitespace or control characters.
fn srun_value(src: Src<'_>, node: &Sexp, field: &str) -> Result<String, SexpError> {
    let v = decode::text(src, node, field)?;
    if v.is_empty() || v.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(src.error(
            node.pos,
            format!("{field} {v:?} must be a non-empty word without spaces"),
        ));
    }
    Ok(v)
}

/// The most workers one `(slurm (nodes N) ...)` entry expands into.
pub const MAX_SLURM_NODES: u32 = 1024;

/// The workers of a `(slurm ...)` entry: one per node, named `NAME-1`..`NAME-N` when
/// `(nodes N)` is more than 1.
fn slurm_workers(src: Src<'_>, node: &Sexp, index: usize) -> Result<Vec<WorkerSpec>, SexpError> {
    let rec = Record::open(src, node, "slurm worker", Some("slurm"), SLURM_FIELDS)?;
    let name = rec
        .opt_value("name", decode::name)?
        .unwrap_or_else(|| format!("slurm-{index}"));
    let nodes = rec.opt_value("nodes", decode::positive32)?.unwrap_or(1);
    if nodes > 1 {
        let pos = rec.opt("nodes").map_or(rec.pos(), |f| f.pos);
        if nodes > MAX_SLURM_NODES {
            return Err(src.error(
                pos,
                format!(
                    "(nodes {nodes}) is more than {MAX_SLURM_NODES} workers: each is an srun and an \
                     allocation of its own"
                ),
            ));
        }
        // The last node's name is the longest.
        let last = format!("{name}-{nodes}");
        if let Some(why) = decode::unsafe_name(&last) {
            return Err(src.error(pos, format!("'{last}' cannot be a worker name: {why}")));
        }
    }
    let rundir = rec.req_value("rundir", decode::string)?;
    let worker_binary = rec
        .opt_value("worker-binary", decode::string)?
        .map(PathBuf::from);
    let via_ssh = match rec.opt("via-ssh") {
        Some(f) => Some(SshWorker {
            name: name.clone(),
            rundir: rundir.clone(),
            worker_binary: worker_binary.clone(),
            ..ssh_login(src, &field_record(src, &f, VIA_SSH_FIELDS)?)?
        }),
        None => None,
    };
    let worker = SlurmWorker {
        name: name.clone(),
        partition: rec.opt_value("partition", srun_value)?,
        slots: rec.opt_value("slots", decode::positive32)?.unwrap_or(1),
        cpus_per_task: rec.opt_value("cpus-per-task", decode::positive32)?,
        gpus_per_task: rec.opt_value("gpus-per-task", decode::positive32)?,
        time: rec.opt_value("time", srun_value)?,
        srun_args: rec
            .opt_value("srun-args", decode::string_list)?
            .unwrap_or_default(),
        rundir,
        worker_binary,
        retries: rec
            .opt_value("retries", decode::uint32)?
            .unwrap_or(SlurmWorker::DEFAULT_RETRIES),
        via_ssh,
    };
    if nodes == 1 {
        return Ok(vec![WorkerSpec::Slurm(worker)]);
    }
    Ok((1..=nodes)
        .map(|k| {
            let mut w = worker.clone();
            w.name = format!("{name}-{k}");
            if let Some(login) = &mut w.via_ssh {
                login.name.clone_from(&w.name);
            }
            WorkerSpec::Slurm(w)
        })
        .collect())
}

/// A worker's `(cpus ...)` and `(gpus ...)`: each, where given, has one or more per slot.
fn slot_devices(
    src: Src<'_>,
    rec: &Record<'_>,
    slots: u32,
) -> Result<(Vec<u32>, Vec<u32>), SexpError> {
    let list = |field: &str, what: &str| -> Result<Vec<u32>, SexpError> {
        let list = rec.opt_value(field, decode::uint_list)?.unwrap_or_default();
        if !list.is_empty() && (list.len() as u32) < slots {
            let pos = rec.opt(field).map_or(rec.pos(), |f| f.pos);
            return Err(src.error(
                pos,
                format!(
                    "{slots} slots need at least {slots} {what} in ({field} ...), found {}",
                    list.len()
                ),
            ));
        }
        Ok(list)
    };
    Ok((list("cpus", "CPUs")?, list("gpus", "GPUs")?))
}

impl WorkerSpec {
    fn to_sexp(&self) -> Sexp {
        let f = Sexp::field;
        let cpu_list = |ids: &[u32]| Sexp::list(ids.iter().map(|c| int(*c)).collect());
        match self {
            WorkerSpec::Local {
                name,
                slots,
                cpus,
                gpus,
            } => {
                let mut fields = vec![
                    f("name", vec![name_sexp(name)]),
                    f("slots", vec![int(*slots)]),
                    f("cpus", vec![cpu_list(cpus)]),
                ];
                if !gpus.is_empty() {
                    fields.push(f("gpus", vec![cpu_list(gpus)]));
                }
                f("local", fields)
            }
            WorkerSpec::Ssh(s) => {
                let mut fields = vec![f("name", vec![name_sexp(&s.name)])];
                fields.extend(ssh_login_sexp(s));
                fields.push(f("rundir", vec![Sexp::string(s.rundir.clone())]));
                fields.push(f("slots", vec![int(s.slots)]));
                fields.push(f("cpus", vec![cpu_list(&s.cpus)]));
                if !s.gpus.is_empty() {
                    fields.push(f("gpus", vec![cpu_list(&s.gpus)]));
                }
                if let Some(b) = &s.worker_binary {
                    fields.push(f("worker-binary", vec![path_sexp(b)]));
                }
                f("ssh", fields)
            }
            WorkerSpec::Slurm(s) => {
                let word = |v: &str| Sexp::string(v.to_string());
                let mut fields = vec![f("name", vec![name_sexp(&s.name)])];
                if let Some(p) = &s.partition {
                    fields.push(f("partition", vec![word(p)]));
                }
                fields.push(f("slots", vec![int(s.slots)]));
                if let Some(c) = s.cpus_per_task {
                    fields.push(f("cpus-per-task", vec![int(c)]));
                }
                if let Some(g) = s.gpus_per_task {
                    fields.push(f("gpus-per-task", vec![int(g)]));
                }
                if let Some(t) = &s.time {
                    fields.push(f("time", vec![word(t)]));
                }
                if !s.srun_args.is_empty() {
                    fields.push(f("srun-args", vec![strings(&s.srun_args)]));
                }
                fields.push(f("rundir", vec![word(&s.rundir)]));
                if let Some(b) = &s.worker_binary {
                    fields.push(f("worker-binary", vec![path_sexp(b)]));
                }
                fields.push(f("retries", vec![int(s.retries)]));
                if let Some(login) = &s.via_ssh {
                    fields.push(f("via-ssh", ssh_login_sexp(login)));
                }
                f("slurm", fields)
            }
        }
    }
}

/// The login fields of an SSH worker or a Slurm worker's login node.
fn ssh_login_sexp(s: &SshWorker) -> Vec<Sexp> {
    let f = Sexp::field;
    let mut fields = vec![f("host", vec![Sexp::string(s.host.clone())])];
    if let Some(u) = &s.user {
        fields.push(f("user", vec![name_sexp(u)]));
    }
    fields.push(f("port", vec![int(u32::from(s.port))]));
    if let Some(i) = &s.identity {
        fields.push(f("identity", vec![path_sexp(i)]));
    }
    if let Some(k) = &s.known_hosts {
        fields.push(f("known-hosts", vec![path_sexp(k)]));
    }
    fields.push(f(
        "host-key-check",
        vec![Sexp::symbol(match s.host_key_check {
            HostKeyCheck::Strict => "strict",
            HostKeyCheck::AcceptNew => "accept-new",
            HostKeyCheck::Off => "off",
        })],
    ));
    fields
}
