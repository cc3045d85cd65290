//! The benchmark part: what a worker builds and runs (sources, build and run
//! commands, limits, container, output check, knobs or inlining) and how many
//! runs a measurement takes. The only part the worker reads.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::record::{self as kind, record, Absent, Composite, FieldRow, Kind};
use super::{field_record, path_sexp, strings};
use crate::decision::{name_sexp, DecisionPoint, DecisionValue, SiteId};
use crate::decode::{self, Field, Record, Src};
use crate::sexp::{Sexp, SexpError};

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
    pub const RUNS: &str = "runs";
    pub const SOURCES: &str = "sources";
    pub const STDOUT: &str = "stdout";
    pub const TARGET_REL_CI: &str = "target-rel-ci";
    pub const TIMEOUT_S: &str = "timeout-s";
    pub const WARMUP: &str = "warmup";
}

record! {
    /// How many runs a measurement takes.
    #[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
    pub struct RunPolicy {
        warmup: u32 = word::WARMUP, kind::COUNT, default(1),
            "Unrecorded runs before measuring.";
        min: u32 = word::MIN, kind::POSITIVE, default(3), "Fewest measured runs.";
        max: u32 = word::MAX, kind::POSITIVE, default(10), "Most measured runs.";
        target_rel_ci: f64 = word::TARGET_REL_CI, kind::NUMBER, default(0.01),
            "Stop once the median's 95 % CI half-width relative to it is below this.";
        max_time_s: f64 = word::MAX_TIME_S, kind::POSITIVE_NUMBER, default(60.0),
            "Stop adding runs after this many seconds of measuring.";
    }
}

record! {
    /// A benchmark: how to build and run it, and what decisions it has.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    pub struct BenchmarkSpec {
        name: String = word::NAME, kind::NAME, required, "The benchmark's name.";
        kind: BenchmarkKind = word::KIND, KIND, composite,
            "What kind of decisions it takes, with the fields only that kind takes.";
        sources: PathBuf = word::SOURCES, SOURCES, required,
            "The folder whose files form the benchmark's bundle (sent to workers, cached by hash).";
        build: Vec<String> = word::BUILD, kind::STRINGS, omitted(Vec::new()),
            "The build command (argument list, never a shell string); llvm-inline needs one.";
        run: Vec<String> = word::RUN, kind::STRINGS, required,
            "The run command, run from the build folder.";
        timeout_s: f64 = word::TIMEOUT_S, kind::POSITIVE_NUMBER, default(60.0),
            "Timeout of one run; the process group is killed on timeout.";
        build_timeout_s: f64 = word::BUILD_TIMEOUT_S, kind::POSITIVE_NUMBER, default(300.0),
            "Timeout of the build.";
        #[serde(default = "default_discovery_cpu_s")]
        discovery_cpu_s: f64 = word::DISCOVERY_CPU_S, kind::POSITIVE_NUMBER,
            default(default_discovery_cpu_s()),
            "CPU seconds one compile of the discovery build (every call inlined) may take \
             before it is compiled again with the stock decisions.";
        #[serde(default = "default_build_memory_bytes")]
        build_memory_bytes: u64 = word::BUILD_MEMORY, kind::BYTES,
            default(default_build_memory_bytes(), "8 GiB"),
            "The most resident memory a build's processes may use together, bytes; past it \
             the whole build is killed and the step fails naming the limit.";
        env: Vec<(String, String)> = word::ENV, ENV, omitted(Vec::new()),
            "Extra environment variables for build and runs.";
        #[serde(default)]
        pass_env: Vec<String> = word::PASS_ENV, VARIABLE_NAMES, omitted(Vec::new()),
            "Variables the build takes from the worker's environment, besides the \
             toolchain's own (PATH, HOME, RUSTUP_HOME, CARGO_HOME); runs never see them.";
        #[serde(default)]
        dependency_crates: Vec<String> = word::DEPENDENCY_CRATES, kind::STRINGS,
            omitted(Vec::new()),
            "Dependencies of a cargo build whose crates take decisions too; the workspace's \
             own crates always do.";
        check_output: OutputCheck = word::CHECK_OUTPUT, CHECK_OUTPUT,
            default(OutputCheck::Stdout),
            "How a run's output is checked against the baseline's.";
        #[serde(default)]
        limits: Limits = word::LIMITS, LIMITS, omitted(Limits::default()),
            "CPU and memory limits on the timed runs (cgroup v2, or v1 where v2 lacks the \
             controllers).";
        #[serde(default)]
        container: Option<Container> = word::CONTAINER, CONTAINER, optional,
            "A container image the timed runs run in (built on the worker, run in the image).";
    }
}

record! {
    /// Timed runs inside a container, with the slot's work folder mounted at the
    /// same path: a program measured as an edge device would run it.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    pub struct Container {
        engine: ContainerEngine = word::ENGINE, ENGINE, required,
            "The engine that runs it: podman or docker (docker's command line).";
        image: String = word::IMAGE, kind::STRING, required,
            "The image, present on the worker (never pulled by kiln).";
        limits: Limits = word::LIMITS, LIMITS_HERE, composite,
            "The container's --cpus and --memory (swap none beyond it).";
    }
}

const ENGINE: Kind<ContainerEngine> = Kind {
    takes: "podman or docker",
    decode: |f| {
        f.value(|src, node, field| {
            match decode::choice(src, node, field, &[word::PODMAN, word::DOCKER])? {
                word::DOCKER => Ok(ContainerEngine::Docker),
                _ => Ok(ContainerEngine::Podman),
            }
        })
    },
    print: |engine| vec![Sexp::symbol(engine.program())],
};

/// A container's `(cpus ...)` and `(memory ...)`, the fields of a limits record written
/// among its own.
const LIMITS_HERE: Composite<Limits> = Composite {
    words: Limits::words,
    decode: Limits::decode_fields,
    print: Limits::print_fields,
    reference: Limits::reference,
};

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

impl BenchmarkKind {
    /// `(kind ...)` with the fields only this kind takes, as a config writes them.
    fn print_fields(&self) -> Vec<Sexp> {
        let f = Sexp::field;
        match self {
            BenchmarkKind::LlvmInline { compiler, fallback } => {
                let compiler = match compiler {
                    Compiler::Clang => word::CLANG,
                    Compiler::Rustc => word::RUSTC,
                };
                let fallback = match fallback {
                    ReplayFallback::NeverInline => word::NEVER_INLINE,
                    ReplayFallback::AlwaysInline => word::ALWAYS_INLINE,
                    ReplayFallback::Original => word::ORIGINAL,
                };
                vec![
                    f(word::KIND, vec![Sexp::symbol(word::LLVM_INLINE)]),
                    f(word::COMPILER, vec![Sexp::symbol(compiler)]),
                    f(word::FALLBACK, vec![Sexp::symbol(fallback)]),
                ]
            }
            BenchmarkKind::Knobs { points } => {
                let knob = |p: &DecisionPoint| {
                    let mut items = vec![name_sexp(p.id.as_str())];
                    items.extend(p.domain.iter().map(DecisionValue::to_sexp));
                    Sexp::list(items)
                };
                vec![
                    f(word::KIND, vec![Sexp::symbol(word::KNOBS)]),
                    f(word::KNOBS, points.iter().map(knob).collect()),
                ]
            }
        }
    }
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

impl OutputCheck {
    /// The check as a config writes it.
    fn to_sexp(&self) -> Sexp {
        let tagged = |word: &str, arg: Sexp| Sexp::list(vec![Sexp::symbol(word), arg]);
        match self {
            OutputCheck::None => Sexp::symbol(word::NONE),
            OutputCheck::Stdout => Sexp::symbol(word::STDOUT),
            OutputCheck::File(p) => tagged(word::FILE, Sexp::string(p.clone())),
            OutputCheck::Lines(r) => tagged(word::LINES, Sexp::string(r.clone())),
            OutputCheck::LinesExcept(r) => tagged(word::LINES_EXCEPT, Sexp::string(r.clone())),
            OutputCheck::Command(argv) => tagged(word::COMMAND, strings(argv)),
        }
    }
}

record! {
    /// Limits on a benchmark's timed runs, applied through cgroups as `docker run
    /// --cpus --memory` applies them, to measure a program as a smaller machine would run it.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
    pub struct Limits {
        cpus: Option<f64> = word::CPUS, kind::POSITIVE_NUMBER, optional,
            "CPU bandwidth in CPUs: 1.5 allows one and a half CPUs' worth of time per period.";
        memory_bytes: Option<u64> = word::MEMORY, kind::BYTES, optional,
            "The most memory the run's processes may use, bytes (no swap beyond it).";
    }
}

impl Limits {
    /// Whether no limit is set.
    pub fn is_none(&self) -> bool {
        self.cpus.is_none() && self.memory_bytes.is_none()
    }

    /// The limits as they are written in a config: `(limits (cpus 1.5) (memory 536870912))`.
    pub fn to_sexp(&self) -> Sexp {
        Sexp::field(word::LIMITS, self.print_fields())
    }
}

impl std::fmt::Display for Limits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.to_sexp())
    }
}

impl Default for RunPolicy {
    fn default() -> Self {
        RunPolicy::decode_fields(&kind::no_fields(word::RUNS)).expect("every field has a default")
    }
}

pub(super) fn decode_run_policy(src: Src<'_>, field: &Field<'_>) -> Result<RunPolicy, SexpError> {
    let rec = field_record(src, field, &RunPolicy::words())?;
    let policy = RunPolicy::decode_fields(&rec)?;
    if policy.max < policy.min {
        let pos = rec.opt(word::MAX).map_or(field.pos, |f| f.pos);
        return Err(src.error(
            pos,
            format!("runs: max ({}) is below min ({})", policy.max, policy.min),
        ));
    }
    Ok(policy)
}

pub(super) fn decode_benchmark(src: Src<'_>, node: &Sexp) -> Result<BenchmarkSpec, SexpError> {
    let rec = Record::open(src, node, "benchmark", None, &BenchmarkSpec::words())?;
    let spec = BenchmarkSpec::decode_fields(&rec)?;
    let at = |word: &str| rec.opt(word).map_or(rec.pos(), |f| f.pos);
    if spec.run.is_empty() {
        return Err(src.error(at(word::RUN), "field 'run' needs a command, found ()"));
    }
    let rustc = matches!(
        spec.kind,
        BenchmarkKind::LlvmInline {
            compiler: Compiler::Rustc,
            ..
        }
    );
    if !spec.dependency_crates.is_empty() && !rustc {
        return Err(src.error(
            at(word::DEPENDENCY_CRATES),
            "field 'dependency-crates' applies only to llvm-inline benchmarks built with cargo (compiler rustc)",
        ));
    }
    if spec.container.is_some() && !spec.limits.is_none() {
        return Err(src.error(
            at(word::CONTAINER),
            "a benchmark with (container ...) takes its cpus and memory there, not in (limits ...)",
        ));
    }
    Ok(spec)
}

const KIND: Composite<BenchmarkKind> = Composite {
    words: || vec![word::KIND, word::COMPILER, word::FALLBACK, word::KNOBS],
    decode: benchmark_kind,
    print: BenchmarkKind::print_fields,
    reference: || {
        let row = |word, takes, default, doc| FieldRow {
            word,
            takes,
            default,
            doc,
        };
        vec![
            row(
                word::KIND,
                "llvm-inline or knobs",
                Absent::Required,
                "What kind of decisions it takes.",
            ),
            row(
                word::COMPILER,
                "clang or rustc",
                Absent::Said("from the build command's program"),
                "llvm-inline only: the compiler family whose inlining is driven.",
            ),
            row(
                word::FALLBACK,
                "never-inline, always-inline or original",
                Absent::Value(word::NEVER_INLINE.to_string()),
                "llvm-inline only: what happens to sites missing from the replay file.",
            ),
            row(
                word::KNOBS,
                "(NAME VALUE ...) entries",
                Absent::Said("required for knobs"),
                "knobs only: each knob and its values; the first value is the default.",
            ),
        ]
    },
};

/// The benchmark's kind with the fields only it takes, refusing the other kind's.
fn benchmark_kind(rec: &Record<'_>) -> Result<BenchmarkKind, SexpError> {
    let src = rec.src();
    let kind_name = decode::choice(
        src,
        rec.req(word::KIND)?.one()?,
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
    if kind_name == word::KNOBS {
        only_for(word::COMPILER, word::LLVM_INLINE)?;
        only_for(word::FALLBACK, word::LLVM_INLINE)?;
        let points = knob_points(src, &rec.req(word::KNOBS)?)?;
        return Ok(BenchmarkKind::Knobs { points });
    }
    only_for(word::KNOBS, word::KNOBS)?;
    let build = rec
        .opt_value(word::BUILD, decode::string_list)?
        .unwrap_or_default();
    let Some(program) = build.first() else {
        let name = rec.req_value(word::NAME, decode::name)?;
        return Err(src.error(
            rec.pos(),
            format!("benchmark '{name}' of kind llvm-inline needs a (build (...)) command"),
        ));
    };
    let compiler = match rec.opt(word::COMPILER) {
        Some(f) => match decode::choice(src, f.one()?, word::COMPILER, &[word::CLANG, word::RUSTC])? {
            word::RUSTC => Compiler::Rustc,
            _ => Compiler::Clang,
        },
        None => infer_compiler(program).ok_or_else(|| {
            src.error(
                rec.req(word::BUILD).map_or(rec.pos(), |f| f.pos),
                format!(
                    "cannot tell the compiler from '{program}'; add (compiler clang) or (compiler rustc)"
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
    Ok(BenchmarkKind::LlvmInline { compiler, fallback })
}

const SOURCES: Kind<PathBuf> = Kind {
    takes: "a folder (string)",
    decode: |f| f.value(decode::string).map(PathBuf::from),
    print: |path| vec![path_sexp(path)],
};

const ENV: Kind<Vec<(String, String)>> = Kind {
    takes: "(\"NAME\" \"value\") pairs",
    decode: |f| env_pairs(f.src(), f),
    print: |pairs| {
        let pair = |(k, v): &(String, String)| {
            Sexp::list(vec![Sexp::string(k.clone()), Sexp::string(v.clone())])
        };
        pairs.iter().map(pair).collect()
    },
};

const VARIABLE_NAMES: Kind<Vec<String>> = Kind {
    takes: "a list of variable names",
    decode: |f| variable_names(f.src(), f),
    print: |names| vec![strings(names)],
};

const CHECK_OUTPUT: Kind<OutputCheck> = Kind {
    takes: "stdout, none, (file P), (lines RE), (lines-except RE) or (command (...))",
    decode: |f| output_check(f.src(), f.one()?),
    print: |check| vec![check.to_sexp()],
};

const LIMITS: Kind<Limits> = Kind {
    takes: "(cpus N) (memory BYTES)",
    decode: |f| Limits::decode_fields(&field_record(f.src(), f, &Limits::words())?),
    print: Limits::print_fields,
};

const CONTAINER: Kind<Container> = Kind {
    takes: "(engine E) (image I) (cpus N) (memory BYTES)",
    decode: |f| Container::decode_fields(&field_record(f.src(), f, &Container::words())?),
    print: Container::print_fields,
};

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
        Sexp::list(self.print_fields())
    }
}
