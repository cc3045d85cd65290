//! The benchmark part: what a worker builds and runs (sources, build and run
//! commands, limits, container, output check, knobs or inlining) and how many
//! runs a measurement takes. The only part the worker reads.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{field_record, float, path_sexp, strings};
use crate::decision::{name_sexp, DecisionPoint, DecisionValue, SiteId};
use crate::decode::{self, Field, Record, Src};
use crate::sexp::{Sexp, SexpError, SexpKind};

/// The words of this part of the config language that decoding, the lists of
/// allowed fields and printing share: each spelled once, here.
mod word {
    pub const ALWAYS_INLINE: &str = "always-inline";
    pub const BUILD: &str = "build";
    pub const BUILD_MEMORY: &str = "build-memory";
    pub const BUILD_TIMEOUT_S: &str = "build-timeout-s";
    pub const CHECK_OUTPUT: &str = "check-output";
    pub const CLANG: &str = "clang";
    pub const COMMAND: &str = "command";
    pub const COMPILER: &str = "compiler";
    pub const CONTAINER: &str = "container";
    pub const CPUS: &str = "cpus";
    pub const DEPENDENCY_CRATES: &str = "dependency-crates";
    pub const DISCOVERY_CPU_S: &str = "discovery-cpu-s";
    pub const DOCKER: &str = "docker";
    pub const ENGINE: &str = "engine";
    pub const ENV: &str = "env";
    pub const FALLBACK: &str = "fallback";
    pub const FILE: &str = "file";
    pub const IMAGE: &str = "image";
    pub const KIND: &str = "kind";
    pub const KNOBS: &str = "knobs";
    pub const LIMITS: &str = "limits";
    pub const LINES: &str = "lines";
    pub const LINES_EXCEPT: &str = "lines-except";
    pub const LLVM_INLINE: &str = "llvm-inline";
    pub const MAX: &str = "max";
    pub const MAX_TIME_S: &str = "max-time-s";
    pub const MEMORY: &str = "memory";
    pub const MIN: &str = "min";
    pub const NAME: &str = "name";
    pub const NEVER_INLINE: &str = "never-inline";
    pub const NONE: &str = "none";
    pub const ORIGINAL: &str = "original";
    pub const PASS_ENV: &str = "pass-env";
    pub const PODMAN: &str = "podman";
    pub const RUN: &str = "run";
    pub const RUSTC: &str = "rustc";
    pub const SOURCES: &str = "sources";
    pub const STDOUT: &str = "stdout";
    pub const TARGET_REL_CI: &str = "target-rel-ci";
    pub const TIMEOUT_S: &str = "timeout-s";
    pub const WARMUP: &str = "warmup";
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
            ContainerEngine::Podman => word::PODMAN,
            ContainerEngine::Docker => word::DOCKER,
        }
    }
}

impl Container {
    /// The container as written in a config.
    pub fn to_sexp(&self) -> Sexp {
        let f = Sexp::field;
        let mut fields = vec![
            f(word::ENGINE, vec![Sexp::symbol(self.engine.program())]),
            f(word::IMAGE, vec![Sexp::string(self.image.clone())]),
        ];
        fields.extend(self.limits.fields());
        f(word::CONTAINER, fields)
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
        Sexp::field(word::LIMITS, self.fields())
    }

    /// `(cpus 1.5) (memory 536870912)`, those that are set.
    fn fields(&self) -> Vec<Sexp> {
        let f = Sexp::field;
        let mut fields = Vec::new();
        if let Some(c) = self.cpus {
            fields.push(f(word::CPUS, vec![float(c)]));
        }
        if let Some(m) = self.memory_bytes {
            fields.push(f(word::MEMORY, vec![Sexp::new(SexpKind::Int(m as i64))]));
        }
        fields
    }
}

impl std::fmt::Display for Limits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.to_sexp())
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

pub(super) fn decode_run_policy(src: Src<'_>, field: &Field<'_>) -> Result<RunPolicy, SexpError> {
    let rec = field_record(
        src,
        field,
        &[
            word::WARMUP,
            word::MIN,
            word::MAX,
            word::TARGET_REL_CI,
            word::MAX_TIME_S,
        ],
    )?;
    let d = RunPolicy::default();
    let policy = RunPolicy {
        warmup: rec
            .opt_value(word::WARMUP, decode::uint32)?
            .unwrap_or(d.warmup),
        min: rec
            .opt_value(word::MIN, decode::positive32)?
            .unwrap_or(d.min),
        max: rec
            .opt_value(word::MAX, decode::positive32)?
            .unwrap_or(d.max),
        target_rel_ci: rec
            .opt_value(word::TARGET_REL_CI, decode::number)?
            .unwrap_or(d.target_rel_ci),
        max_time_s: rec
            .opt_value(word::MAX_TIME_S, decode::positive_number)?
            .unwrap_or(d.max_time_s),
    };
    if policy.max < policy.min {
        let pos = rec.opt(word::MAX).map_or(field.pos, |f| f.pos);
        return Err(src.error(
            pos,
            format!("runs: max ({}) is below min ({})", policy.max, policy.min),
        ));
    }
    Ok(policy)
}

const BENCHMARK_FIELDS: &[&str] = &[
    word::NAME,
    word::KIND,
    word::SOURCES,
    word::BUILD,
    word::RUN,
    word::TIMEOUT_S,
    word::BUILD_TIMEOUT_S,
    word::DISCOVERY_CPU_S,
    word::BUILD_MEMORY,
    word::ENV,
    word::PASS_ENV,
    word::DEPENDENCY_CRATES,
    word::CHECK_OUTPUT,
    word::COMPILER,
    word::FALLBACK,
    word::KNOBS,
    word::LIMITS,
    word::CONTAINER,
];

pub(super) fn decode_benchmark(src: Src<'_>, node: &Sexp) -> Result<BenchmarkSpec, SexpError> {
    let rec = Record::open(src, node, "benchmark", None, BENCHMARK_FIELDS)?;
    let name = rec.req_value(word::NAME, decode::name)?;
    let build = rec
        .opt_value(word::BUILD, decode::string_list)?
        .unwrap_or_default();
    let run = rec.req_value(word::RUN, decode::string_list)?;
    if run.is_empty() {
        return Err(src.error(
            rec.req(word::RUN)?.pos,
            "field 'run' needs a command, found ()",
        ));
    }
    let kind_field = rec.req(word::KIND)?;
    let kind_name = decode::choice(
        src,
        kind_field.one()?,
        word::KIND,
        &[word::LLVM_INLINE, word::KNOBS],
    )?;
    let only_for = |field: &str, kind: &str| -> Result<(), SexpError> {
        match rec.opt(field) {
            Some(f) => Err(src.error(
                f.pos,
                format!("field '{field}' applies only to benchmarks of kind {kind}"),
            )),
            None => Ok(()),
        }
    };
    let kind = if kind_name == word::LLVM_INLINE {
        only_for(word::KNOBS, word::KNOBS)?;
        if build.is_empty() {
            return Err(src.error(
                rec.pos(),
                format!("benchmark '{name}' of kind llvm-inline needs a (build (...)) command"),
            ));
        }
        let compiler = match rec.opt(word::COMPILER) {
            Some(f) => match decode::choice(src, f.one()?, word::COMPILER, &[word::CLANG, word::RUSTC])? {
                word::RUSTC => Compiler::Rustc,
                _ => Compiler::Clang,
            },
            None => infer_compiler(&build[0]).ok_or_else(|| {
                src.error(
                    rec.req(word::BUILD).map_or(rec.pos(), |f| f.pos),
                    format!(
                        "cannot tell the compiler from '{}'; add (compiler clang) or (compiler rustc)",
                        build[0]
                    ),
                )
            })?,
        };
        let fallback = match rec.opt(word::FALLBACK) {
            Some(f) => match decode::choice(
                src,
                f.one()?,
                word::FALLBACK,
                &[word::NEVER_INLINE, word::ALWAYS_INLINE, word::ORIGINAL],
            )? {
                word::ALWAYS_INLINE => ReplayFallback::AlwaysInline,
                word::ORIGINAL => ReplayFallback::Original,
                _ => ReplayFallback::NeverInline,
            },
            None => ReplayFallback::NeverInline,
        };
        BenchmarkKind::LlvmInline { compiler, fallback }
    } else {
        only_for(word::COMPILER, word::LLVM_INLINE)?;
        only_for(word::FALLBACK, word::LLVM_INLINE)?;
        let knobs = rec.req(word::KNOBS)?;
        BenchmarkKind::Knobs {
            points: knob_points(src, &knobs)?,
        }
    };
    let env = match rec.opt(word::ENV) {
        Some(f) => env_pairs(src, &f)?,
        None => Vec::new(),
    };
    let dependency_crates = match rec.opt(word::DEPENDENCY_CRATES) {
        Some(f) if matches!(kind, BenchmarkKind::LlvmInline { compiler: Compiler::Rustc, .. }) => {
            decode::string_list(src, f.one()?, word::DEPENDENCY_CRATES)?
        }
        Some(f) => {
            return Err(src.error(
                f.pos,
                "field 'dependency-crates' applies only to llvm-inline benchmarks built with cargo (compiler rustc)",
            ))
        }
        None => Vec::new(),
    };
    let pass_env = match rec.opt(word::PASS_ENV) {
        Some(f) => variable_names(src, &f)?,
        None => Vec::new(),
    };
    let check_output = match rec.opt(word::CHECK_OUTPUT) {
        Some(f) => output_check(src, f.one()?)?,
        None => OutputCheck::Stdout,
    };
    let limits = match rec.opt(word::LIMITS) {
        Some(f) => limits(src, &f)?,
        None => Limits::default(),
    };
    let container = match rec.opt(word::CONTAINER) {
        Some(f) if !limits.is_none() => return Err(src.error(
            f.pos,
            "a benchmark with (container ...) takes its cpus and memory there, not in (limits ...)",
        )),
        Some(f) => Some(container(src, &f)?),
        None => None,
    };
    Ok(BenchmarkSpec {
        sources: PathBuf::from(rec.req_value(word::SOURCES, decode::string)?),
        timeout_s: rec
            .opt_value(word::TIMEOUT_S, decode::positive_number)?
            .unwrap_or(60.0),
        build_timeout_s: rec
            .opt_value(word::BUILD_TIMEOUT_S, decode::positive_number)?
            .unwrap_or(300.0),
        discovery_cpu_s: rec
            .opt_value(word::DISCOVERY_CPU_S, decode::positive_number)?
            .unwrap_or_else(default_discovery_cpu_s),
        build_memory_bytes: rec
            .opt_value(word::BUILD_MEMORY, decode::byte_size)?
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
    let rec = field_record(
        src,
        field,
        &[word::ENGINE, word::IMAGE, word::CPUS, word::MEMORY],
    )?;
    let engine = match decode::choice(
        src,
        rec.req(word::ENGINE)?.one()?,
        word::ENGINE,
        &[word::PODMAN, word::DOCKER],
    )? {
        word::DOCKER => ContainerEngine::Docker,
        _ => ContainerEngine::Podman,
    };
    Ok(Container {
        engine,
        image: rec.req_value(word::IMAGE, decode::string)?,
        limits: limit_fields(&rec)?,
    })
}

fn limits(src: Src<'_>, field: &Field<'_>) -> Result<Limits, SexpError> {
    limit_fields(&field_record(src, field, &[word::CPUS, word::MEMORY])?)
}

/// The `(cpus ...)` and `(memory ...)` of a record.
fn limit_fields(rec: &Record<'_>) -> Result<Limits, SexpError> {
    Ok(Limits {
        cpus: rec.opt_value(word::CPUS, decode::positive_number)?,
        memory_bytes: rec.opt_value(word::MEMORY, decode::byte_size)?,
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
    if base.starts_with(word::CLANG) {
        Some(Compiler::Clang)
    } else if base.starts_with(word::RUSTC) || base == "cargo" {
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
        let id = SiteId(decode::text(src, id, word::KNOBS)?);
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
                decode::string(src, k, word::ENV)?,
                decode::string(src, v, word::ENV)?,
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
    let names = decode::string_list(src, node, word::PASS_ENV)?;
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
        let text = || decode::string(src, arg, word::CHECK_OUTPUT);
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
            Some(word::FILE) => return Ok(OutputCheck::File(text()?)),
            Some(word::LINES) => return Ok(OutputCheck::Lines(pattern()?)),
            Some(word::LINES_EXCEPT) => return Ok(OutputCheck::LinesExcept(pattern()?)),
            Some(word::COMMAND) => {
                let argv = decode::string_list(src, arg, word::CHECK_OUTPUT)?;
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
        word::CHECK_OUTPUT,
        &[
            word::NONE,
            word::STDOUT,
            "(file \"PATH\")",
            "(lines \"REGEX\")",
            "(lines-except \"REGEX\")",
            "(command (\"PROGRAM\" \"ARG\" ...))",
        ],
    )? {
        word::NONE => Ok(OutputCheck::None),
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

    pub(super) fn to_sexp(&self) -> Sexp {
        let f = Sexp::field;
        let mut fields = vec![f(word::NAME, vec![name_sexp(&self.name)])];
        match &self.kind {
            BenchmarkKind::LlvmInline { compiler, fallback } => {
                fields.push(f(word::KIND, vec![Sexp::symbol(word::LLVM_INLINE)]));
                fields.push(f(
                    word::COMPILER,
                    vec![Sexp::symbol(match compiler {
                        Compiler::Clang => word::CLANG,
                        Compiler::Rustc => word::RUSTC,
                    })],
                ));
                fields.push(f(
                    word::FALLBACK,
                    vec![Sexp::symbol(match fallback {
                        ReplayFallback::NeverInline => word::NEVER_INLINE,
                        ReplayFallback::AlwaysInline => word::ALWAYS_INLINE,
                        ReplayFallback::Original => word::ORIGINAL,
                    })],
                ));
            }
            BenchmarkKind::Knobs { points } => {
                fields.push(f(word::KIND, vec![Sexp::symbol(word::KNOBS)]));
                let knobs = points
                    .iter()
                    .map(|p| {
                        let mut items = vec![name_sexp(p.id.as_str())];
                        items.extend(p.domain.iter().map(DecisionValue::to_sexp));
                        Sexp::list(items)
                    })
                    .collect();
                fields.push(f(word::KNOBS, knobs));
            }
        }
        fields.push(f(word::SOURCES, vec![path_sexp(&self.sources)]));
        if !self.build.is_empty() {
            fields.push(f(word::BUILD, vec![strings(&self.build)]));
        }
        fields.push(f(word::RUN, vec![strings(&self.run)]));
        fields.push(f(word::TIMEOUT_S, vec![float(self.timeout_s)]));
        fields.push(f(word::BUILD_TIMEOUT_S, vec![float(self.build_timeout_s)]));
        fields.push(f(word::DISCOVERY_CPU_S, vec![float(self.discovery_cpu_s)]));
        fields.push(f(
            word::BUILD_MEMORY,
            vec![Sexp::new(SexpKind::Int(self.build_memory_bytes as i64))],
        ));
        if !self.env.is_empty() {
            let pairs = self
                .env
                .iter()
                .map(|(k, v)| Sexp::list(vec![Sexp::string(k.clone()), Sexp::string(v.clone())]))
                .collect();
            fields.push(f(word::ENV, pairs));
        }
        if !self.dependency_crates.is_empty() {
            fields.push(f(
                word::DEPENDENCY_CRATES,
                vec![strings(&self.dependency_crates)],
            ));
        }
        if !self.pass_env.is_empty() {
            fields.push(f(word::PASS_ENV, vec![strings(&self.pass_env)]));
        }
        let check = match &self.check_output {
            OutputCheck::None => Sexp::symbol(word::NONE),
            OutputCheck::Stdout => Sexp::symbol(word::STDOUT),
            OutputCheck::File(p) => {
                Sexp::list(vec![Sexp::symbol(word::FILE), Sexp::string(p.clone())])
            }
            OutputCheck::Lines(r) => {
                Sexp::list(vec![Sexp::symbol(word::LINES), Sexp::string(r.clone())])
            }
            OutputCheck::LinesExcept(r) => Sexp::list(vec![
                Sexp::symbol(word::LINES_EXCEPT),
                Sexp::string(r.clone()),
            ]),
            OutputCheck::Command(argv) => {
                Sexp::list(vec![Sexp::symbol(word::COMMAND), strings(argv)])
            }
        };
        fields.push(f(word::CHECK_OUTPUT, vec![check]));
        if !self.limits.is_none() {
            fields.push(self.limits.to_sexp());
        }
        if let Some(c) = &self.container {
            fields.push(c.to_sexp());
        }
        Sexp::list(fields)
    }
}
