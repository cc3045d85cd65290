//! Messages between controller and worker.
//!
//! The controller sends [`Request`]s, the worker answers with [`Response`]s.
//! Steps run concurrently on a worker's slots, so replies may come out of
//! order; each step carries its [`StepId`] and its result echoes it.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::bundle::BundlePart;
use crate::config::benchmark::{BenchmarkSpec, Limits, RunPolicy};
use crate::decision::{ContentHash, DecisionSet, SiteId};
use crate::metric::{Metric, Metrics};
use crate::stats::Summary;

mod flat;
mod summarise;

pub use summarise::summarise;

/// Version of the wire protocol; both sides must agree at hello. 3: steps
/// carry a [`Race`] bound and results a [`CutShort`] record. 4: bundles go in
/// resumable parts ([`BundlePart`]) and results carry warnings.
pub const PROTOCOL_VERSION: u32 = 4;

/// Identifies one dispatch of a step, unique within a controller's life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct StepId(pub u64);

impl fmt::Display for StepId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// From controller to worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "type")]
pub enum Request {
    /// Opens the session; the worker checks the version.
    Hello {
        /// The controller's protocol version.
        protocol_version: u32,
        /// The controller's own version, for logs.
        controller_version: String,
    },
    /// One part of a benchmark bundle for the worker's content-addressed
    /// cache: answered `PartStored`, the last one `Prepared` once the whole
    /// bundle is checked against its hash and in place.
    BundlePart(Box<BundlePart>),
    /// Asks whether a bundle is already cached (to skip sending it), and how
    /// many of its parts a transfer cut off earlier left (to skip those).
    HasBundle {
        /// The bundle's content hash.
        hash: ContentHash,
    },
    /// Finds a benchmark's decision points and its stock decisions
    /// (llvm-inline: builds with inline remarks; knobs: from the spec).
    Discover {
        /// Echoed in the answer.
        id: StepId,
        /// The benchmark.
        benchmark: Box<BenchmarkSpec>,
        /// The cached bundle to build from.
        bundle: ContentHash,
    },
    /// Builds, runs and measures one candidate.
    Step(Box<StepRequest>),
    /// Cancels a running step (its result is then `Cancelled`).
    Cancel {
        /// The step to cancel.
        step: StepId,
    },
    /// A heartbeat; the worker answers `Pong` with the same nonce.
    Ping {
        /// Echoed back.
        nonce: u64,
    },
    /// Ends the session once running steps are done.
    Shutdown,
}

/// From worker to controller.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "type")]
pub enum Response {
    /// Accepts the session.
    Hello {
        /// The worker's protocol version.
        protocol_version: u32,
        /// What the worker can do.
        capabilities: Box<Capabilities>,
    },
    /// A bundle is in the cache.
    Prepared {
        /// The bundle's content hash.
        hash: ContentHash,
    },
    /// A part of a bundle (not its last) is stored.
    PartStored {
        /// The bundle's content hash.
        hash: ContentHash,
        /// The part's index.
        index: u32,
    },
    /// Answer to `HasBundle`.
    BundleStatus {
        /// The bundle's content hash.
        hash: ContentHash,
        /// Whether the worker has it.
        present: bool,
        /// Parts of it already stored by a transfer that did not finish: the
        /// next one to send.
        #[serde(default)]
        parts_stored: u32,
        /// Something the controller should log: a cached copy that no longer
        /// matched its hash and was discarded.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        warning: Option<String>,
    },
    /// Answer to `Discover`.
    Discovered {
        /// The request's id.
        id: StepId,
        /// The decision points, or why they could not be found.
        result: Result<Discovery, String>,
    },
    /// A step finished (in any outcome).
    StepDone(Box<StepResult>),
    /// How a long request (a discovery) is getting on: which build, how long
    /// it has run, the units being compiled. Sent every few seconds.
    Progress {
        /// The request's id.
        id: StepId,
        /// One line for the person waiting.
        message: String,
    },
    /// Answer to `Ping`.
    Pong {
        /// The ping's nonce.
        nonce: u64,
    },
    /// A request could not be handled; the session goes on.
    Error {
        /// The step concerned, if any.
        step: Option<StepId>,
        /// What went wrong.
        message: String,
    },
    /// The worker is shutting down.
    Bye,
}

/// Checks a controller's hello against this side's protocol version.
pub fn check_hello(hello: &Request) -> Result<(), String> {
    match hello {
        Request::Hello {
            protocol_version, ..
        } if *protocol_version == PROTOCOL_VERSION => Ok(()),
        Request::Hello {
            protocol_version, ..
        } => Err(format!(
            "protocol version mismatch: controller speaks {protocol_version}, this worker speaks \
             {PROTOCOL_VERSION}; deploy matching kiln and kiln-worker binaries"
        )),
        other => Err(format!(
            "expected hello as the first message, got {}",
            request_name(other)
        )),
    }
}

/// A request's type name, for logs and errors.
pub fn request_name(r: &Request) -> &'static str {
    match r {
        Request::Hello { .. } => "hello",
        Request::BundlePart(_) => "bundle-part",
        Request::HasBundle { .. } => "has-bundle",
        Request::Discover { .. } => "discover",
        Request::Step(_) => "step",
        Request::Cancel { .. } => "cancel",
        Request::Ping { .. } => "ping",
        Request::Shutdown => "shutdown",
    }
}

/// A benchmark's decision points and the stock compiler's own decisions.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Discovery {
    /// Every decision point, in a stable order.
    pub points: Vec<crate::decision::DecisionPoint>,
    /// The stock decisions (llvm-inline) or each knob's first value.
    pub baseline: DecisionSet,
    /// What is known about each point (llvm-inline); points without an entry
    /// have no features (knobs, and stores written before features existed).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub features: BTreeMap<SiteId, crate::features::SiteFeatures>,
    /// The units whose compile with every call inlined passed its limits, so
    /// that their sites are the stock compiler's (`UNIT: why`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fallbacks: Vec<String>,
    /// Sites left out of the search because the compiler does not take one
    /// of their two decisions (it will not replay its own, or will not take
    /// the other), with why: a search there would only lose steps.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub fixed: BTreeMap<SiteId, String>,
    /// Calls of the stock build that an attribute forced inline (`always_inline`): no
    /// decision moves them, but their callee's code runs in their caller, which is where a
    /// flip inside that callee changes the code (discoveries before kiln read them: none).
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub forced: BTreeSet<SiteId>,
}

impl Discovery {
    /// The decision space of a knob benchmark: its knobs, each at its first value.
    pub fn of_knobs(points: &[crate::decision::DecisionPoint]) -> Discovery {
        Discovery {
            baseline: DecisionSet(
                points
                    .iter()
                    .map(|p| (p.id.clone(), p.domain[0].clone()))
                    .collect(),
            ),
            points: points.to_vec(),
            ..Default::default()
        }
    }
}

/// One candidate to build, run and measure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRequest {
    /// Echoed in the result.
    pub id: StepId,
    /// The worker slot to run in (its directory).
    pub slot: u32,
    /// The CPUs this slot's build and runs are pinned to; empty: no pinning.
    #[serde(default)]
    pub cpus: Vec<u32>,
    /// The GPUs this slot's runs see (`CUDA_VISIBLE_DEVICES`); empty: every GPU.
    #[serde(default)]
    pub gpus: Vec<u32>,
    /// How to build and run.
    pub benchmark: BenchmarkSpec,
    /// The cached bundle to build from.
    pub bundle: ContentHash,
    /// The decisions to apply.
    pub decisions: DecisionSet,
    /// How many runs.
    pub runs: RunPolicy,
    /// The metric the adaptive repetition watches.
    pub objective: Metric,
    /// Expected output digest, from the baseline; `None` records without checking.
    pub expected_output: Option<ContentHash>,
    /// Skip the build and reuse this build's binary (for re-measurements).
    pub reuse_build: bool,
    /// Stop repeating runs once the candidate is clearly worse than this
    /// bound allows; `None`: repeat as the run policy says.
    #[serde(default)]
    pub race: Option<Race>,
    /// Also return the instructions each function executed itself
    /// ([`Measurement::function_instructions`]): callgrind runs write a profile
    /// with names as compiled, which screening attributes flips by.
    #[serde(default)]
    pub function_costs: bool,
}

/// The race a candidate of an annealing chain runs under a noisy objective
/// (values in the objective metric's unit): the worker stops repeating its
/// runs once the lower end of its median's 95 % interval lies above `bound`,
/// where Metropolis acceptance would take it with probability below `p` even
/// at that lower end.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Race {
    /// The incumbent's objective the candidate will be compared with (the
    /// median of its measurements, as the acceptance compares it).
    pub incumbent: f64,
    /// The incumbent plus the largest increase the chain's temperature
    /// accepts with probability `p` or more.
    pub bound: f64,
    /// The acceptance probability below which a candidate is not worth more runs.
    pub p: f64,
}

/// Why a step's runs stopped before the run policy's end: its interval
/// already lay above its race's bound after `runs` measured runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct CutShort {
    /// The race the step lost.
    pub race: Race,
    /// Measured runs done (at least the policy's minimum).
    pub runs: u32,
    /// The most measured runs the policy allowed.
    pub max_runs: u32,
    /// Lower end of the objective median's 95 % interval at the cut.
    pub ci_low: f64,
    /// Upper end of that interval.
    pub ci_high: f64,
}

impl CutShort {
    /// Measured runs the step did not do: an upper bound on the runs racing
    /// saved (a full measurement might have met its interval target sooner).
    pub fn runs_saved(&self) -> u32 {
        self.max_runs.saturating_sub(self.runs)
    }
}

/// What happened to a step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "outcome")]
pub enum StepOutcome {
    /// Built, ran every run, output matched.
    Ok,
    /// The build failed.
    BuildFailed {
        /// Exit code of the build, if it exited.
        code: Option<i32>,
        /// The tail of the build's output.
        log_tail: String,
    },
    /// A run exited non-zero or was killed by a signal.
    RunFailed {
        /// Exit code, if it exited.
        code: Option<i32>,
        /// Signal number, if killed.
        signal: Option<i32>,
        /// Signal name, if killed.
        signal_name: Option<String>,
        /// The tail of the run's stderr.
        stderr_tail: String,
    },
    /// The build or a run exceeded its timeout; the process group was killed.
    Timeout {
        /// `build` or `run`.
        phase: String,
        /// The limit in seconds.
        limit_s: f64,
    },
    /// The output differed from the baseline's.
    WrongOutput {
        /// Digest expected.
        expected: ContentHash,
        /// Digest found.
        found: ContentHash,
    },
    /// The build did not realise the requested decisions.
    DecisionMismatch {
        /// Sites requested one way but built the other, or missing: a line each, naming its
        /// site first, quoted ([`StepOutcome::mismatched_sites`]).
        mismatched: Vec<String>,
    },
    /// The step's worker was lost every time it ran the step, as many times
    /// as the campaign allows (`step-losses`): the step is taken to end its
    /// worker, and recorded failed (set by the controller).
    WorkerLost {
        /// Times a worker was lost while running the step.
        #[serde(default)]
        times: u32,
        /// Why the worker was taken for lost the last time.
        reason: String,
    },
    /// The controller cancelled the step.
    Cancelled,
    /// The worker could not run the step at all (missing bundle, bad slot).
    Rejected {
        /// Why.
        reason: String,
    },
}

/// How a worker ends its answer to a job it could not run for want of what preparing gives
/// it (its bundle never sent, or its folders removed or replaced since):
/// [`StepOutcome::lacks_bundle`] reads it, and the controller sends the bundle again.
const PREPARE_AGAIN: &str = "send Prepare first";

/// A worker's refusal of a job over `bundle`, which it lacks.
pub fn missing_bundle(bundle: &ContentHash) -> String {
    format!(
        "bundle {} is not in this worker's cache; {PREPARE_AGAIN}",
        bundle.short()
    )
}

/// A worker's answer to a step that failed while `folder`, one of its own, was removed or
/// replaced under it: the environment's doing, not the decisions'.
pub fn folder_changed(folder: &std::path::Path) -> String {
    format!(
        "{} was removed or replaced during the step; {PREPARE_AGAIN}",
        folder.display()
    )
}

impl StepOutcome {
    /// Whether the worker refused the step for lack of its bundle ([`missing_bundle`]), or
    /// its folders changed under it ([`folder_changed`]): it is to be prepared again.
    pub fn lacks_bundle(&self) -> bool {
        matches!(self, StepOutcome::Rejected { reason } if reason.ends_with(PREPARE_AGAIN))
    }

    /// The sites a decision mismatch names, each with its problem; none for another outcome.
    pub fn mismatched_sites(&self) -> Vec<(SiteId, &str)> {
        match self {
            StepOutcome::DecisionMismatch { mismatched } => mismatched
                .iter()
                .filter_map(|line| mismatch_site(line))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Short name for tables and CSV.
    pub fn name(&self) -> &'static str {
        match self {
            StepOutcome::Ok => "ok",
            StepOutcome::BuildFailed { .. } => "build-failed",
            StepOutcome::RunFailed { .. } => "run-failed",
            StepOutcome::Timeout { .. } => "timeout",
            StepOutcome::WrongOutput { .. } => "wrong-output",
            StepOutcome::DecisionMismatch { .. } => "decision-mismatch",
            StepOutcome::WorkerLost { .. } => "worker-lost",
            StepOutcome::Cancelled => "cancelled",
            StepOutcome::Rejected { .. } => "rejected",
        }
    }

    /// The text that explains a failure: the build's output, the run's
    /// stderr, the mismatched sites or the reason given; `None` for `ok`.
    pub fn detail(&self) -> Option<String> {
        match self {
            StepOutcome::Ok | StepOutcome::Cancelled | StepOutcome::Timeout { .. } => None,
            StepOutcome::BuildFailed { log_tail, .. } => Some(log_tail.clone()),
            StepOutcome::RunFailed { stderr_tail, .. } => Some(stderr_tail.clone()),
            StepOutcome::WrongOutput { expected, found } => Some(format!(
                "output digest {} where the baseline's is {}",
                found.short(),
                expected.short()
            )),
            StepOutcome::DecisionMismatch { mismatched } => Some(mismatched.join("\n")),
            StepOutcome::WorkerLost { reason, .. } | StepOutcome::Rejected { reason } => {
                Some(reason.clone())
            }
        }
    }

    /// One line that says why a step failed: the outcome and the last line of
    /// its [`detail`](Self::detail) that says anything (compilers, valgrind
    /// and panics put the cause last); `None` for `ok`.
    pub fn reason(&self) -> Option<String> {
        if *self == StepOutcome::Ok {
            return None;
        }
        const MAX: usize = 240;
        let last = self.detail().and_then(|d| {
            d.lines().map(str::trim).rfind(|l| !l.is_empty()).map(|l| {
                match l.char_indices().nth(MAX) {
                    Some((cut, _)) => format!("{}…", &l[..cut]),
                    None => l.to_string(),
                }
            })
        });
        Some(match last {
            Some(line)
                if !matches!(
                    self,
                    StepOutcome::WorkerLost { .. } | StepOutcome::Rejected { .. }
                ) =>
            {
                format!("{self}: {line}")
            }
            _ => self.to_string(),
        })
    }

    /// Whether the failure belongs to the infrastructure, not the candidate:
    /// such steps are re-dispatched rather than recorded as the candidate's result.
    pub fn is_infrastructure(&self) -> bool {
        matches!(self, StepOutcome::Cancelled | StepOutcome::Rejected { .. })
    }
}

impl fmt::Display for StepOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StepOutcome::Ok => f.write_str("ok"),
            StepOutcome::BuildFailed { code, .. } => match code {
                Some(c) => write!(f, "build failed (exit {c})"),
                None => f.write_str("build failed"),
            },
            StepOutcome::RunFailed {
                code, signal_name, ..
            } => match (code, signal_name) {
                (_, Some(s)) => write!(f, "run failed (killed by {s})"),
                (Some(c), None) => write!(f, "run failed (exit {c})"),
                _ => f.write_str("run failed"),
            },
            StepOutcome::Timeout { phase, limit_s } => {
                write!(f, "{phase} timed out after {limit_s} s")
            }
            StepOutcome::WrongOutput { .. } => f.write_str("wrong output"),
            StepOutcome::DecisionMismatch { mismatched } => {
                write!(f, "decision mismatch at {} site(s)", mismatched.len())
            }
            StepOutcome::WorkerLost { times, reason } => write!(
                f,
                "worker lost while running this step ({times} times; the last: {reason})"
            ),
            StepOutcome::Cancelled => f.write_str("cancelled"),
            StepOutcome::Rejected { reason } => write!(f, "rejected: {reason}"),
        }
    }
}

/// The site a decision-mismatch line is about, and its problem: `'CALLEE @ function:line:column':
/// problem`. `None` for a line about two sites (a key collision) or none.
pub fn mismatch_site(line: &str) -> Option<(SiteId, &str)> {
    let (id, problem) = line.strip_prefix('\'')?.split_once("': ")?;
    Some((SiteId::from(id), problem))
}

/// One run of the benchmark.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// 0-based index among this step's runs (warm-ups included).
    pub index: u32,
    /// Whether it was a warm-up (not counted in statistics).
    pub warmup: bool,
    /// Exit code, if it exited.
    pub exit_code: Option<i32>,
    /// Signal, if killed.
    pub signal: Option<i32>,
    /// Every metric of the run.
    pub metrics: Metrics,
}

/// The build of a step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BuildRecord {
    /// Wall time of the build.
    pub wall_ns: u64,
    /// Size of the binary's .text section, if it could be read.
    pub text_bytes: Option<u64>,
    /// Hash of the produced binary.
    pub binary_hash: Option<ContentHash>,
    /// The build's output (compiler remarks stripped), capped.
    pub log_tail: String,
    /// The replay file given to the compiler, for llvm-inline benchmarks.
    pub replay_file: Option<String>,
    /// Whether the build was reused from an earlier step.
    pub reused: bool,
    /// Moot decisions of an llvm-inline build: sites requested inline whose
    /// call does not exist in this build (their chain's context was not
    /// inlined, or an inner function took the call first), with why.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub moot: BTreeMap<SiteId, String>,
}

/// The result of one step. Read without serde's `flatten` ([`flat`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StepResult {
    /// The step.
    pub id: StepId,
    /// What happened, and what the runs measured. Flattened: the wire and stored JSON keep
    /// their flat shape, so stores and peers written before read as they are.
    #[serde(flatten)]
    pub measurement: Measurement,
    /// The build, if one was attempted.
    pub build: Option<BuildRecord>,
    /// When the worker started the step (Unix ms).
    pub started_ms: u64,
    /// When the worker finished the step (Unix ms).
    pub finished_ms: u64,
}

impl StepResult {
    /// A step the worker could not run at all, stamped now.
    pub fn rejected(id: StepId, reason: String) -> StepResult {
        StepResult::new(id, StepOutcome::Rejected { reason })
    }

    /// A result with `outcome` and nothing measured yet, started and finished now.
    pub fn new(id: StepId, outcome: StepOutcome) -> StepResult {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        StepResult {
            id,
            measurement: Measurement::empty(outcome),
            build: None,
            started_ms: now,
            finished_ms: now,
        }
    }
}

/// The runs of a step (or of `kiln-worker measure`) and what they add up to: a worker
/// measures one, a step's result carries it (`measure --json` prints it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    /// `Ok`, or the first failure (of the build, the runs, or the step as a whole).
    pub outcome: StepOutcome,
    /// Every run, warm-ups and callgrind runs included.
    pub runs: Vec<RunRecord>,
    /// Statistics per metric over the measured runs that have it (metrics measured in
    /// every run); empty unless `Ok`.
    pub summary: BTreeMap<Metric, Summary>,
    /// Whether the objective's relative CI half-width reached the target (the adaptive
    /// repetition met its CI target).
    pub target_met: bool,
    /// Set when the runs stopped early because the candidate lost its race:
    /// a measurement from fewer runs, never a full one. (Absent from results
    /// stored before racing.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut_short: Option<CutShort>,
    /// Digest of the checked output of the first measured run.
    pub output_digest: Option<ContentHash>,
    /// The start of the checked output (lines filtered as the check says): the first
    /// measured run's when no digest was expected (the baseline), the differing run's
    /// when one differed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checked_output: Option<String>,
    /// What was found wrong and worked around without failing, for the log and the step's
    /// record: a CUPTI client of the program's own that clashed with kiln's GPU tracing; in
    /// a step's result also a cached build or object that no longer matched its hash,
    /// discarded and built again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Where the plan or request asked for them: the instructions each function executed
    /// itself (callgrind's self `Ir` of the last callgrind run), by name as compiled;
    /// functions that executed none are left out.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub function_instructions: BTreeMap<String, u64>,
    /// Asked for with [`Self::function_instructions`]: the optimised code of each function
    /// that executed, read from the program's own objects (not the system's libraries);
    /// empty where the code could not be read (no objdump, not x86-64).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub function_code: BTreeMap<String, FunctionCode>,
}

/// What one function's optimised code holds, by kind of instruction. Stored as the array
/// `[instructions, vector, calls, loops]`: a step holds one for each function it ran.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "[u64; 4]", into = "[u64; 4]")]
pub struct FunctionCode {
    /// Machine instructions, padding (`nop`, `int3`) left out.
    pub instructions: u64,
    /// Instructions that work on several elements of a vector register.
    pub vector: u64,
    /// Calls left in it (`call`; a tail call's `jmp` is not counted).
    pub calls: u64,
    /// Loops: addresses in it that a later instruction of it branches back to.
    pub loops: u64,
}

impl From<[u64; 4]> for FunctionCode {
    fn from([instructions, vector, calls, loops]: [u64; 4]) -> FunctionCode {
        FunctionCode {
            instructions,
            vector,
            calls,
            loops,
        }
    }
}

impl From<FunctionCode> for [u64; 4] {
    fn from(f: FunctionCode) -> [u64; 4] {
        [f.instructions, f.vector, f.calls, f.loops]
    }
}

impl Measurement {
    /// `outcome` with nothing measured: no runs, no summary, no output (a step refused or
    /// failed before its runs, or a result whose measurement is still to come).
    pub fn empty(outcome: StepOutcome) -> Measurement {
        Measurement {
            outcome,
            runs: Vec::new(),
            summary: BTreeMap::new(),
            target_met: false,
            cut_short: None,
            output_digest: None,
            checked_output: None,
            warnings: Vec::new(),
            function_instructions: BTreeMap::new(),
            function_code: BTreeMap::new(),
        }
    }
}

/// What a worker is and can do: its capabilities and environment fingerprint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Capabilities {
    /// kiln-worker's version.
    pub worker_version: String,
    /// Host name.
    pub hostname: String,
    /// Kernel release.
    pub kernel: String,
    /// CPU model name.
    pub cpu_model: String,
    /// Notable CPU flags (avx2, avx512f, …).
    pub cpu_flags: Vec<String>,
    /// Online CPUs.
    pub cores: u32,
    /// cpufreq governor of CPU 0, if exposed.
    pub governor: Option<String>,
    /// `/proc/sys/kernel/randomize_va_space`.
    pub aslr: Option<String>,
    /// Which perf counters open on this machine.
    pub counters: BTreeMap<Metric, bool>,
    /// valgrind's version, if installed.
    pub valgrind: Option<String>,
    /// GPUs found.
    pub gpus: Vec<GpuInfo>,
    /// Whether GPU time (CUPTI) can be measured: the injection library's path, or why not.
    #[serde(default = "not_reported")]
    pub gpu_time: Result<String, String>,
    /// Which run limits the worker can apply.
    #[serde(default)]
    pub limits: LimitSupport,
    /// Versions of compilers asked about (`clang`, `rustc`, …).
    pub compilers: BTreeMap<String, String>,
    /// How a step builds with each of those compilers: what it redoes when
    /// a decision changes, or why it cannot do less.
    #[serde(default)]
    pub build_modes: BTreeMap<String, String>,
    /// The Slurm job the worker runs in (`SLURM_JOB_ID`), if any.
    #[serde(default)]
    pub slurm_job: Option<u64>,
}

fn not_reported() -> Result<String, String> {
    Err("not reported by this worker".into())
}

/// Which run limits a worker can apply: the cgroup controllers it may use.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LimitSupport {
    /// CPU bandwidth (`cpu.max` on v2, `cpu.cfs_quota_us` on v1).
    pub cpu: bool,
    /// Memory (`memory.max` on v2, `memory.limit_in_bytes` on v1).
    pub memory: bool,
    /// Why a limit cannot be applied; empty when both can.
    pub detail: String,
    /// The cgroup version the limits go through; `None` where neither has a controller.
    /// (Absent from workers older than cgroup v1 support, which used v2 only.)
    #[serde(default)]
    pub cgroup: Option<CgroupVersion>,
}

/// A cgroup interface: the unified hierarchy, or the one-hierarchy-per-controller v1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CgroupVersion {
    V1,
    V2,
}

impl fmt::Display for CgroupVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CgroupVersion::V1 => "cgroup v1",
            CgroupVersion::V2 => "cgroup v2",
        })
    }
}

impl LimitSupport {
    /// `Err` naming what is missing when `limits` cannot be applied here.
    pub fn check(&self, limits: &Limits) -> Result<(), String> {
        let missing: Vec<&str> = [
            (limits.cpus.is_some() && !self.cpu, "cpu"),
            (limits.memory_bytes.is_some() && !self.memory, "memory"),
        ]
        .into_iter()
        .filter_map(|(missing, name)| missing.then_some(name))
        .collect();
        if missing.is_empty() {
            return Ok(());
        }
        Err(format!(
            "cannot apply {limits}: no cgroup {} controller available to this worker ({})",
            missing.join(" or "),
            self.detail
        ))
    }
}

/// A GPU as NVML reports it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuInfo {
    /// Device index.
    pub index: u32,
    /// Product name.
    pub name: String,
    /// Memory in bytes.
    pub memory_bytes: u64,
    /// Driver version.
    pub driver: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decision_mismatch_names_the_sites_its_lines_are_about() {
        let outcome = StepOutcome::DecisionMismatch {
            mismatched: vec![
                "'f @ main:1:2': requested no-inline but inlined".into(),
                "'g @ h:3:4' (inline) and 'g @ h:3:4x' (no-inline): key collision".into(),
                "'k @ main:9:1': inlined but not in the decision set".into(),
            ],
        };
        let named: Vec<(String, &str)> = outcome
            .mismatched_sites()
            .into_iter()
            .map(|(site, problem)| (site.0, problem))
            .collect();
        assert_eq!(
            named,
            [
                ("f @ main:1:2".into(), "requested no-inline but inlined"),
                ("k @ main:9:1".into(), "inlined but not in the decision set"),
            ]
        );
        assert!(StepOutcome::Ok.mismatched_sites().is_empty());
    }

    #[test]
    fn floats_cross_the_wire_exactly() {
        // serde_json's default float reader can be an ulp off (5e-75 read back as
        // 5.000000000000001e-75); found by the config fuzz target.
        let race = Race {
            incumbent: 5e-75,
            bound: 0.1 + 0.2,
            p: 0.01,
        };
        let back: Race = crate::frame::decode(&serde_json::to_vec(&race).unwrap()).unwrap();
        assert_eq!(back, race);
    }

    #[test]
    fn a_result_keeps_its_flat_shape() {
        // As results were written before the measurement was a field of its own.
        let old = r#"{"id":7,"outcome":{"outcome":"ok"},"build":null,
            "runs":[{"index":0,"warmup":false,"exit_code":0,"signal":null,
                     "metrics":{"wall-time":{"measured":5e-75}}}],
            "summary":{},"target_met":true,"output_digest":null,
            "started_ms":1,"finished_ms":2,"warnings":["a cached build was discarded"],
            "function_instructions":{"main":12}}"#;
        let r: StepResult = crate::frame::decode(old.as_bytes()).unwrap();
        let m = &r.measurement;
        assert_eq!((r.id, r.started_ms, r.finished_ms), (StepId(7), 1, 2));
        assert_eq!((&m.outcome, m.target_met), (&StepOutcome::Ok, true));
        assert_eq!(
            m.runs[0].metrics[&Metric::WallTime],
            crate::metric::MetricValue::Measured(5e-75)
        );
        assert_eq!(m.warnings, ["a cached build was discarded"]);
        assert_eq!(m.function_instructions["main"], 12);

        assert!(m.function_code.is_empty());

        let mut r = r;
        r.measurement.function_code.insert(
            "main".into(),
            FunctionCode {
                instructions: 10,
                vector: 2,
                calls: 1,
                loops: 3,
            },
        );
        let json: serde_json::Value = serde_json::to_value(&r).unwrap();
        assert!(json.get("measurement").is_none());
        assert_eq!(json["runs"][0]["index"], 0);
        assert_eq!(
            json["function_code"]["main"],
            serde_json::json!([10, 2, 1, 3])
        );
        let back: StepResult = crate::frame::decode(&serde_json::to_vec(&r).unwrap()).unwrap();
        assert_eq!(back, r);
    }
}
