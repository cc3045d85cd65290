//! Build: a benchmark built under a decision set in its work folder, and
//! everything that makes a build cheaper or checks it.
//!
//! | module | owns |
//! |--------|------|
//! | [`env`] | the environment, decision file and command lines of builds and runs |
//! | [`llvm_inline`] | LLVM inline replay: remarks, replay files, verifying decisions |
//! | [`wrap`] | the compiler wrapper that gives kiln's flags to builds that do not run the compiler themselves |
//! | [`ir`] | the front-end compiles that write a unit's IR before inlining, for discovery |
//! | [`objects`] | per-unit object reuse under the wrapper |
//! | [`split`] | a compile and link in one command split into a unit per source and the link |
//! | [`cache`] | whole builds kept by what they depend on, checked when restored |
//! | [`cargo_target`] | a cargo benchmark's target folder kept between a slot's steps |
//! | [`crates`] | a workspace crate's code kept between a slot's steps while its decisions stay |
//! | [`warm`] | a clang build that starts from the slot's last build's tree |
//!
//! It may import the launcher ([`crate::launch`]) and the workspace's file
//! helpers; nothing above it (discovery, measurement, the step).

pub(crate) mod cache;
pub(crate) mod cargo_target;
pub(crate) mod crates;
pub mod env;
mod ir;
pub mod llvm_inline;
pub(crate) mod objects;
mod split;
pub(crate) mod warm;
pub mod wrap;

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use kiln_protocol::bundle::is_confined_path;
use kiln_protocol::config::benchmark::{BenchmarkKind, BenchmarkSpec, Compiler};
use kiln_protocol::decision::{ContentHash, DecisionSet};
use kiln_protocol::message::{BuildRecord, StepOutcome, StepRequest};

use crate::files::{copy_tree, fresh_dir};
use crate::launch::{self, CancelToken, End, Finished, Launch, Output, TAIL_BYTES};
use env::{build_env, expand_all, knobs_of, seconds, write_decisions, DECISIONS_FILE};

/// Name of the LLVM inline replay file written into the work folder.
pub const REPLAY_FILE: &str = "replay.txt";

/// The compiler wrapper's folder in the work folder (see [`wrap`]).
/// How often a discovery build reports how it is getting on.
pub const PROGRESS_EVERY: Duration = Duration::from_secs(10);

pub(crate) const WRAP_DIR: &str = ".kiln-wrap";

/// rustc's incremental folder in the work folder (a fresh one per build, or
/// the slot's last build's, see [`cargo_target`]).
pub(crate) const INCREMENTAL_DIR: &str = ".kiln-incremental";

/// What a build log says last of a rustc build that kept the slot's
/// incremental folder ([`cargo_target::incremental_folder`]); each crate's
/// line says whether it kept its code or only its front end ([`crates`]).
pub(crate) const KEPT_FRONT_END: &str =
    "\nkiln: rustc's incremental folder kept from the slot's last build\n";

/// Most bytes of build output kept (compiler remarks included).
pub(crate) const BUILD_LOG_CAP: usize = 64 << 20;

/// The warning that a benchmark's units are compiled whole where their kept
/// IR would not compile: given once per benchmark in this worker's life,
/// since every later step of it would say the same.
fn not_from_ir_once(benchmark: &str, line: &str) -> Option<String> {
    static WARNED: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let mut warned = WARNED.lock().unwrap_or_else(|e| e.into_inner());
    if warned.iter().any(|b| b == benchmark) {
        return None;
    }
    warned.push(benchmark.to_string());
    Some(format!(
        "'{benchmark}': units whose kept IR does not compile are compiled whole \
         (the per-unit rebuild; said once): {}",
        line.trim_start_matches("kiln: ")
    ))
}

/// Makes `work` a fresh copy of the bundle with the decision file written.
/// A cargo package without a `[workspace]` of its own gets one when a folder
/// above the copy holds a `Cargo.toml` (a rundir inside a cargo project,
/// kiln's own among them): cargo would take that for its workspace and
/// refuse to build. Elsewhere the copy is left as it is.
pub(crate) fn fresh_work(
    root: &Path,
    bundle_dir: &Path,
    work: &Path,
    spec: &BenchmarkSpec,
    decisions: &DecisionSet,
) -> Result<(), String> {
    fresh_dir(root, work)?;
    copy_tree(bundle_dir, work)?;
    write_decisions(work, spec, decisions)?;
    let manifest = work.join("Cargo.toml");
    let cargo = built_by_cargo(spec);
    let enclosed = || {
        work.ancestors()
            .skip(1)
            .any(|d| d.join("Cargo.toml").is_file())
    };
    if let (true, Ok(text)) = (cargo && enclosed(), std::fs::read_to_string(&manifest)) {
        if !text.lines().any(|l| l.trim() == "[workspace]") {
            let own = format!(
                "{text}\n# Added by kiln: the copy is a workspace of its own.\n[workspace]\n"
            );
            std::fs::write(&manifest, own)
                .map_err(|e| format!("cannot write {}: {e}", manifest.display()))?;
        }
    }
    Ok(())
}

/// Whether `spec` is built by cargo.
pub(crate) fn built_by_cargo(spec: &BenchmarkSpec) -> bool {
    spec.build
        .first()
        .is_some_and(|p| Path::new(p).ends_with("cargo"))
}

/// One benchmark's build in its work folder.
pub(crate) struct Build<'a> {
    pub(crate) spec: &'a BenchmarkSpec,
    pub(crate) decisions: &'a DecisionSet,
    pub(crate) work: &'a Path,
    pub(crate) home: &'a Path,
    pub(crate) cpus: &'a [u32],
    pub(crate) cancel: &'a CancelToken,
    /// The per-unit object cache of step builds (see [`objects`]); none in discovery.
    pub(crate) objects: Option<&'a Path>,
    /// The decisions' replay file text, made once (a megabyte on a large
    /// program): a warm start keys the units by it, and the build writes it.
    pub(crate) replay: std::cell::OnceCell<String>,
}

/// What an llvm-inline build adds to its launch ([`Build::write_replay`]):
/// kiln's flags, the replay file's text for the record, and whether rustc's
/// incremental folder was kept from the slot's last build.
#[derive(Default)]
struct Replay {
    flags: Vec<String>,
    text: Option<String>,
    front_end_kept: bool,
}

/// What a build's compiles said, the remarks read from it: `whole` where the
/// compiler wrapper kept each compile's output whole, else the build's log.
struct Said<'a> {
    text: &'a str,
    whole: bool,
}

impl Build<'_> {
    /// The decisions as an LLVM replay file ([`llvm_inline::replay_file_text`]).
    pub(crate) fn replay_text(&self) -> &str {
        self.replay
            .get_or_init(|| llvm_inline::replay_file_text(self.decisions))
    }

    /// Builds under `decisions`: the record (if a build was attempted) and
    /// whether it succeeded and realised the decisions; what the compiler
    /// wrapper found wrong with the object cache goes to `warnings`.
    /// `kept_log` is what the compiles of the units a warm start left alone
    /// said ([`warm::unchanged`]): their remarks count as the build's.
    pub(crate) fn run(
        &self,
        warnings: &mut Vec<String>,
        kept_log: &str,
    ) -> (Option<BuildRecord>, Result<(), StepOutcome>) {
        if self.spec.build.is_empty() {
            return (None, Ok(()));
        }
        let rejected = |reason| (None, Err(StepOutcome::Rejected { reason }));
        let replay = match self.write_replay() {
            Ok(replay) => replay,
            Err(reason) => return rejected(reason),
        };
        let launch = match self.launch(replay.flags, None) {
            Ok(launch) => launch,
            Err(reason) => return rejected(reason),
        };
        let finished = match launch::run(&launch, None, Some(self.cancel)) {
            Ok(f) => f,
            Err(message) => {
                let failed = StepOutcome::BuildFailed {
                    code: None,
                    log_tail: message,
                };
                return (None, Err(failed));
            }
        };
        // The units a warm start left alone say what their compiles said.
        let log = String::from_utf8_lossy(&finished.kept).into_owned() + kept_log;
        // What the compiles said, each line whole, where the wrapper kept it
        // (the log may cut a line): what is read from them is read there.
        let kept_said = self.compilers_said().map(|said| said + kept_log);
        let said = kept_said.as_deref().unwrap_or(&log);
        warnings.extend(self.wrapper_warnings(said));
        let is_llvm = replay.text.is_some();
        let mut record = self.record(&finished, &log, replay.text, replay.front_end_kept);
        let said = Said {
            text: said,
            whole: kept_said.is_some(),
        };
        let outcome = self.outcome(&finished, is_llvm.then_some(said), &mut record);
        (Some(record), outcome)
    }

    /// For an llvm-inline benchmark, writes the decisions' replay file into the
    /// work folder and readies rustc's incremental folder: the flags that give
    /// the compiler the replay file, and what the record keeps of it; nothing
    /// for any other benchmark.
    fn write_replay(&self) -> Result<Replay, String> {
        let BenchmarkKind::LlvmInline { compiler, fallback } = &self.spec.kind else {
            return Ok(Replay::default());
        };
        let text = self.replay_text();
        let replay = self.work.join(REPLAY_FILE);
        let in_work = llvm_inline::in_work(text, self.work);
        check_llvm_args_path(*compiler, &replay)?;
        std::fs::write(&replay, in_work)
            .map_err(|e| format!("cannot write {}: {e}", replay.display()))?;
        let incr = self.work.join(INCREMENTAL_DIR);
        let front_end_kept = cargo_target::incremental_folder(&incr)?;
        Ok(Replay {
            flags: llvm_inline::replay_build_args(*compiler, &replay, *fallback, &incr),
            text: Some(text.to_string()),
            front_end_kept,
        })
    }

    /// The warnings among the lines the wrapper added to what the compiles
    /// `said`: damaged objects in its cache, each, and units compiled whole
    /// where their kept IR would not compile, once per benchmark.
    fn wrapper_warnings(&self, said: &str) -> Vec<String> {
        let mut warnings: Vec<String> = said
            .lines()
            .filter(|l| l.starts_with("kiln: ") && l.contains(objects::DAMAGED))
            .map(str::to_string)
            .collect();
        if let Some(line) = said
            .lines()
            .find(|l| l.starts_with("kiln: ") && l.contains(objects::NOT_FROM_IR))
        {
            warnings.extend(not_from_ir_once(&self.spec.name, line));
        }
        warnings
    }

    /// The record of a build that ran and left `log`: its time, binary and
    /// log's tail (remarks stripped from an llvm-inline build's, which has
    /// `replay_file`); nothing moot yet.
    fn record(
        &self,
        finished: &Finished,
        log: &str,
        replay_file: Option<String>,
        front_end_kept: bool,
    ) -> BuildRecord {
        let mut shown = if replay_file.is_some() {
            llvm_inline::strip_remarks(log)
        } else {
            log.to_string()
        };
        if front_end_kept {
            shown.push_str(KEPT_FRONT_END);
        }
        let binary = resolve_binary(&self.spec.run, self.work);
        BuildRecord {
            wall_ns: finished.wall.as_nanos() as u64,
            text_bytes: binary.as_deref().and_then(llvm_inline::text_size),
            binary_hash: binary
                .and_then(|b| std::fs::read(b).ok())
                .map(|bytes| ContentHash::of(&bytes)),
            log_tail: tail(&shown),
            replay_file,
            reused: false,
            moot: BTreeMap::new(),
        }
    }

    /// How the build ended for the step: a build that failed, timed out or
    /// was cancelled says so; one that succeeded is checked against its
    /// decisions where the compiles' remarks are `said` (llvm-inline).
    fn outcome(
        &self,
        finished: &Finished,
        said: Option<Said<'_>>,
        record: &mut BuildRecord,
    ) -> Result<(), StepOutcome> {
        match finished.end {
            End::Cancelled => Err(StepOutcome::Cancelled),
            End::TimedOut => Err(StepOutcome::Timeout {
                phase: "build".into(),
                limit_s: self.spec.build_timeout_s,
            }),
            End::Signaled(_) => Err(StepOutcome::BuildFailed {
                code: None,
                log_tail: record.log_tail.clone(),
            }),
            End::MemoryExceeded(limit) => Err(StepOutcome::BuildFailed {
                code: None,
                log_tail: format!("{}\n{}", memory_exceeded(limit), record.log_tail),
            }),
            End::Exited(c) if c != 0 => Err(StepOutcome::BuildFailed {
                code: Some(c),
                log_tail: record.log_tail.clone(),
            }),
            End::Exited(_) => match said {
                Some(said) => {
                    if !said.whole && finished.kept_truncated {
                        tracing::warn!(
                            "build output exceeded {BUILD_LOG_CAP} bytes; remarks past it are lost"
                        );
                    }
                    self.verify_decisions(said.text, record)
                }
                None => Ok(()),
            },
        }
    }

    /// Whether the compiles' remarks show every decision realised; the
    /// decisions the compiler had no say in are recorded as moot.
    fn verify_decisions(&self, said: &str, record: &mut BuildRecord) -> Result<(), StepOutcome> {
        let remarks = llvm_inline::parse_remarks_in(said, self.work);
        let verified = llvm_inline::verify(self.decisions, &remarks);
        record.moot = verified.moot;
        if verified.mismatched.is_empty() {
            Ok(())
        } else {
            Err(StepOutcome::DecisionMismatch {
                mismatched: verified.mismatched,
            })
        }
    }

    /// A discovery build with extra arguments: its whole output, or why it
    /// failed. `progress` hears when it starts and, every [`PROGRESS_EVERY`],
    /// how long it has run and the units being compiled.
    pub(crate) fn compile(
        &self,
        flags: Vec<String>,
        fallback: Option<Vec<String>>,
        ir: Option<&Path>,
        what: &str,
        progress: &(dyn Fn(String) + Sync),
    ) -> Result<String, String> {
        let fallback = fallback.as_deref().map(|flags| wrap::Fallback {
            flags,
            cpu_s: self.spec.discovery_cpu_s.ceil() as u64,
        });
        let mut launch = self.launch(flags.clone(), fallback)?;
        let wrapped = self.wrapped();
        if let Some(dir) = ir.filter(|_| wrapped) {
            launch.env.push(wrap::ir_env(dir));
        }
        let wrap_dir = self.work.join(WRAP_DIR);
        let compiling = || match wrap::active_units(&wrap_dir) {
            units if units.is_empty() => String::new(),
            units => format!(" while compiling {}", units.join(", ")),
        };
        let name = &self.spec.name;
        progress(format!("{what} build of '{name}' started"));
        let started = Instant::now();
        let finished = std::thread::scope(|scope| {
            let (done, ended) = mpsc::channel::<()>();
            let compiling = &compiling;
            scope.spawn(move || {
                while let Err(RecvTimeoutError::Timeout) = ended.recv_timeout(PROGRESS_EVERY) {
                    let secs = started.elapsed().as_secs();
                    progress(format!("{what} build of '{name}': {secs} s{}", compiling()));
                }
            });
            let finished = launch::run(&launch, None, Some(self.cancel));
            drop(done);
            finished
        })?;
        let log = String::from_utf8_lossy(&finished.kept).into_owned();
        let failure = match finished.end {
            End::Exited(0) => {
                if let Some(dir) = ir.filter(|_| !wrapped) {
                    self.write_ir(&flags, dir);
                }
                return Ok(self.compilers_said().unwrap_or(log));
            }
            End::Exited(c) => format!("exited with {c}"),
            End::Signaled(s) => format!("was killed by {}", launch::signal_name(s)),
            End::TimedOut => format!("timed out after {} s", self.spec.build_timeout_s),
            End::Cancelled => "was cancelled".into(),
            End::MemoryExceeded(limit) => memory_exceeded(limit),
        };
        Err(format!(
            "the {what} build of '{name}' {failure}{}:\n{}",
            compiling(),
            tail(&llvm_inline::strip_remarks(&log))
        ))
    }

    /// What the compiles of the last build said, each whole, where they ran
    /// through the compiler wrapper ([`wrap::compilers_said`]): what their
    /// remarks are read from, since the build's log may cut them.
    fn compilers_said(&self) -> Option<String> {
        wrap::compilers_said(&self.work.join(WRAP_DIR), BUILD_LOG_CAP)
    }

    /// The wrapper's name for the build command's program, where the build is
    /// one clang command the wrapper can stand in for.
    fn wrapper_name(&self) -> Option<String> {
        let BenchmarkKind::LlvmInline {
            compiler: Compiler::Clang,
            ..
        } = self.spec.kind
        else {
            return None;
        };
        let program = self.spec.build.first()?;
        let name = Path::new(program).file_name()?.to_str()?;
        wrap::answers_to(name).then(|| name.to_string())
    }

    /// Whether kiln's flags reach the compiles through the compiler wrapper:
    /// the build command is no compiler (make, cargo).
    pub(crate) fn wrapped(&self) -> bool {
        matches!(self.spec.kind, BenchmarkKind::LlvmInline { .. })
            && self
                .spec
                .build
                .first()
                .is_some_and(|program| !runs_compiler_itself(program))
    }

    /// Writes the IR of a build that runs clang itself into `dir`, one
    /// front-end compile per source (see [`features::ir`]); a failure only
    /// costs the sites their IR features, so it is logged, not returned.
    pub(crate) fn write_ir(&self, flags: &[String], dir: &Path) {
        let argv = expand_all(&self.spec.build, None, &self.work.join(DECISIONS_FILE));
        let BenchmarkKind::LlvmInline { compiler, .. } = self.spec.kind else {
            return;
        };
        let args: Vec<OsString> = argv[1..].iter().map(OsString::from).collect();
        for ir_args in wrap::ir_commands(compiler, &args, flags, dir, "unit") {
            let mut ir_argv = vec![argv[0].clone()];
            ir_argv.extend(ir_args.iter().map(|a| a.to_string_lossy().into_owned()));
            let launch = Launch {
                argv: ir_argv,
                cwd: self.work.to_path_buf(),
                env: build_env(self.spec, self.decisions, self.home),
                cpus: self.cpus.to_vec(),
                output: Output::KeepMerged { cap: TAIL_BYTES },
                timeout: seconds(self.spec.build_timeout_s, "build-timeout-s")
                    .unwrap_or(Duration::ZERO),
                sample_every: None,
                cgroups: Vec::new(),
                memory_limit: Some(self.spec.build_memory_bytes),
                stderr_watch: &[],
            };
            match launch::run(&launch, None, Some(self.cancel)) {
                Ok(f) if f.end == End::Exited(0) => {}
                Ok(f) => tracing::warn!(
                    "no IR for site features of '{}': {:?}: {}",
                    self.spec.name,
                    f.end,
                    String::from_utf8_lossy(&f.kept).trim()
                ),
                Err(e) => tracing::warn!("no IR for site features of '{}': {e}", self.spec.name),
            }
        }
    }

    /// The compiler whose every compile goes through the wrapper, if any: where kiln has flags
    /// for an inlining build that runs the compiler through the build system, or that is one
    /// clang command with a `bounded` compile (it then runs through the wrapper too, so that
    /// its compile is bounded and falls back as a make build's units do: the wrapper's name is
    /// the second value).
    fn wrapper(&self, flags: &[String], bounded: bool) -> (Option<Compiler>, Option<String>) {
        let bounded_command = bounded
            .then(|| self.wrapper_name())
            .flatten()
            .filter(|_| !self.wrapped());
        let wrapper = match &self.spec.kind {
            BenchmarkKind::LlvmInline { compiler, .. }
                if !flags.is_empty() && (self.wrapped() || bounded_command.is_some()) =>
            {
                Some(*compiler)
            }
            _ => None,
        };
        (wrapper, bounded_command)
    }

    /// The build's launch with kiln's compiler flags: appended to the command
    /// when it runs the compiler itself, else given to every compile through
    /// the compiler wrapper ([`wrap`]), the build's command left as it is.
    pub(crate) fn launch(
        &self,
        flags: Vec<String>,
        fallback: Option<wrap::Fallback<'_>>,
    ) -> Result<Launch, String> {
        let mut argv = expand_all(
            &self.spec.build,
            knobs_of(self.spec, self.decisions),
            &self.work.join(DECISIONS_FILE),
        );
        let mut env = build_env(self.spec, self.decisions, self.home);
        let (wrapper, bounded_command) = self.wrapper(&flags, fallback.is_some());
        let dir = self.work.join(WRAP_DIR);
        wrap::forget_said(&dir);
        let added = match wrapper {
            None => {
                argv.extend(flags);
                Vec::new()
            }
            Some(compiler) => {
                let path = launch::search_path(&env).to_string();
                let crates = &self.spec.dependency_crates;
                if let Some(name) = &bounded_command {
                    argv[0] = dir.join(name).display().to_string();
                }
                wrap::prepare(
                    compiler,
                    &dir,
                    &flags,
                    fallback,
                    &path,
                    crates,
                    self.objects,
                )?
            }
        };
        let program = wrapper
            .filter(|c| *c == Compiler::Clang)
            .and_then(|_| wrap::program_env(&self.spec.run, self.work));
        for (k, v) in added.into_iter().chain(program) {
            env.retain(|(name, _)| *name != k);
            env.push((k, v));
        }
        Ok(Launch {
            argv,
            cwd: self.work.to_path_buf(),
            env,
            cpus: self.cpus.to_vec(),
            output: Output::KeepMerged { cap: BUILD_LOG_CAP },
            // Checked by `seconds` when the step or discovery began.
            timeout: seconds(self.spec.build_timeout_s, "build-timeout-s")
                .unwrap_or(Duration::ZERO),
            sample_every: None,
            cgroups: Vec::new(),
            memory_limit: Some(self.spec.build_memory_bytes),
            stderr_watch: &[],
        })
    }
}

/// Why a build killed at its memory limit failed, naming the limit.
pub(crate) fn memory_exceeded(limit: u64) -> String {
    format!(
        "killed: the build's processes used more than {} of memory together (build-memory)",
        kiln_protocol::sexp::byte_size_text(limit)
    )
}

/// Whether a build command is a compiler (clang, clang++-14, rustc), which
/// takes kiln's flags on its command line; any other (make, cargo) gets them
/// through the compiler wrapper.
pub(crate) fn runs_compiler_itself(program: &str) -> bool {
    let base = Path::new(program)
        .file_name()
        .map_or(program.into(), |b| b.to_string_lossy());
    base.starts_with("clang") || base.starts_with("rustc")
}

/// rustc splits `-C llvm-args` at whitespace, so a replay file path (under
/// the rundir) must have none.
pub(crate) fn check_llvm_args_path(compiler: Compiler, path: &Path) -> Result<(), String> {
    if compiler == Compiler::Rustc && path.display().to_string().contains(char::is_whitespace) {
        return Err(format!(
            "{} contains whitespace, which rustc's -C llvm-args cannot carry; use a rundir without spaces",
            path.display()
        ));
    }
    Ok(())
}

/// The run command's program inside the work folder, if it is a path there.
pub(crate) fn resolve_binary(run: &[String], work: &Path) -> Option<PathBuf> {
    let program = run.first()?;
    let relative = program.strip_prefix("./").unwrap_or(program);
    (program.contains('/') && is_confined_path(relative)).then(|| work.join(relative))
}

/// What identifies a build: the benchmark, its bundle, the decisions, and
/// the toolchain: the environment builds get from the worker, the build
/// program's file and, for llvm-inline benchmarks, the compiler's version.
pub(crate) fn build_key(req: &StepRequest) -> ContentHash {
    let spec = &req.benchmark;
    let mut bytes = serde_json::to_vec(spec).unwrap_or_default();
    bytes.extend_from_slice(&req.bundle.0);
    bytes.extend_from_slice(&req.decisions.hash().0);
    let env = build_env(spec, &req.decisions, Path::new("/"));
    for (k, v) in &env {
        bytes.extend(format!("{k}={v}\0").into_bytes());
    }
    if let Some(program) = spec.build.first() {
        let found = launch::exec_candidates(program, &env)
            .into_iter()
            .find_map(|p| {
                let m = std::fs::metadata(&p).ok()?;
                Some(format!(
                    "{}:{}:{:?}",
                    p.display(),
                    m.len(),
                    m.modified().ok()
                ))
            });
        bytes.extend(found.unwrap_or_default().into_bytes());
    }
    if let BenchmarkKind::LlvmInline { compiler, .. } = &spec.kind {
        bytes.extend(compiler_version(*compiler).into_bytes());
    }
    ContentHash::of(&bytes)
}

/// The version line of a compiler, asked once per worker process.
pub(crate) fn compiler_version(compiler: Compiler) -> String {
    static VERSIONS: OnceLock<Mutex<HashMap<&'static str, String>>> = OnceLock::new();
    let name = match compiler {
        Compiler::Clang => "clang",
        Compiler::Rustc => "rustc",
    };
    let mut versions = VERSIONS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    versions
        .entry(name)
        .or_insert_with(|| launch::compiler_version(name).unwrap_or_default())
        .clone()
}

pub(crate) fn fresh_subdir(root: &Path, parent: &Path, name: &str) -> Result<PathBuf, String> {
    let dir = parent.join(name);
    fresh_dir(root, &dir)?;
    Ok(dir)
}

pub(crate) fn tail(text: &str) -> String {
    let mut start = text.len().saturating_sub(TAIL_BYTES);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    text[start..].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn binaries_resolve_inside_work_only() {
        let w = Path::new("/r/slots/0/work");
        assert_eq!(
            resolve_binary(&["./bench".into()], w),
            Some(w.join("bench"))
        );
        assert_eq!(
            resolve_binary(&["bin/bench".into()], w),
            Some(w.join("bin/bench"))
        );
        assert_eq!(resolve_binary(&["sh".into()], w), None);
        assert_eq!(resolve_binary(&["/usr/bin/sh".into()], w), None);
        assert_eq!(resolve_binary(&["../x".into()], w), None);
    }
}
