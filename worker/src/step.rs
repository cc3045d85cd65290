//! One step: a fresh work folder from the cached bundle, the build under the
//! decision set, then the measured runs; and discovery of a benchmark's
//! decision points.
//!
//! Layout under the rundir: `slots/<slot>/work/` is a step's work folder
//! (cleared for every step unless its build is reused), `slots/<slot>/` is
//! the runs' `HOME` and holds the callgrind profile, `gpu-trace/` (the CUPTI
//! traces of the last timed run) and `.lock` (see `slot_lock`),
//! `discover/<id>/` is a discovery's scratch folder (its work folder, the
//! stock build's IR under `ir/`, its callgrind profile). Every path taken from a
//! request is confined.

use std::collections::{BTreeSet, HashMap};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kiln_protocol::config::{BenchmarkKind, BenchmarkSpec, Compiler, OutputCheck, ReplayFallback};
use kiln_protocol::decision::{ContentHash, DecisionFile, DecisionSet, SiteId};
use kiln_protocol::message::{
    is_confined_path, BuildRecord, Discovery, StepId, StepOutcome, StepRequest, StepResult,
};

use crate::build_cache::{BuildCache, Restored};
use crate::bundle_cache::{copy_tree, fresh_dir, BundleCache};
use crate::callgrind;
use crate::checked_output::LineFilter;
use crate::features;
use crate::llvm_inline;
use crate::measure::{self, OutputSpec, Plan};
use crate::object_cache;
use crate::process::{self, CancelToken, End, Launch, Output, TAIL_BYTES};
use crate::slot_lock::SlotLock;
use crate::wrap;

/// How often a discovery build reports how it is getting on.
pub const PROGRESS_EVERY: Duration = Duration::from_secs(10);

/// Name of the decision file written into the work folder.
pub const DECISIONS_FILE: &str = "decisions.sexp";
/// Name of the LLVM inline replay file written into the work folder.
pub const REPLAY_FILE: &str = "replay.txt";

/// The compiler wrapper's folder in the work folder (see [`wrap`]).
const WRAP_DIR: &str = ".kiln-wrap";
/// rustc's incremental folder in the work folder (a fresh one per build).
const INCREMENTAL_DIR: &str = ".kiln-incremental";
/// Most bytes of build output kept (compiler remarks included).
const BUILD_LOG_CAP: usize = 64 << 20;

/// Where a worker keeps its files: the rundir, its bundle cache and its
/// build cache.
#[derive(Debug)]
pub struct Workspace {
    /// The rundir.
    pub rundir: PathBuf,
    /// The bundle cache inside it.
    pub cache: BundleCache,
    /// Successful builds by what identifies them (see `build_key`).
    builds: BuildCache,
}

impl Workspace {
    /// Opens a rundir, creating it and its bundle cache.
    pub fn open(rundir: &Path) -> Result<Self, String> {
        std::fs::create_dir_all(rundir)
            .map_err(|e| format!("cannot create rundir {}: {e}", rundir.display()))?;
        let rundir = rundir
            .canonicalize()
            .map_err(|e| format!("cannot resolve rundir {}: {e}", rundir.display()))?;
        let cache = BundleCache::open(&rundir)?;
        let builds = BuildCache::open(&rundir)?;
        Ok(Workspace {
            rundir,
            cache,
            builds,
        })
    }

    fn slot_dir(&self, slot: u32) -> PathBuf {
        self.rundir.join("slots").join(slot.to_string())
    }
}

/// What a slot remembers between steps: its last successful build.
#[derive(Debug, Default)]
pub struct SlotState {
    last_build: Option<(ContentHash, BuildRecord)>,
}

/// Builds, runs and measures one step in its slot.
pub fn run_step(
    req: &StepRequest,
    ws: &Workspace,
    slot: &mut SlotState,
    cancel: &CancelToken,
) -> StepResult {
    let mut result = StepResult::new(req.id, StepOutcome::Ok);
    let slot_dir = ws.slot_dir(req.slot);
    let outcome = match SlotLock::acquire(&slot_dir, cancel) {
        Ok(Some(lock)) => {
            if lock.used_by_another {
                // Its folder no longer holds what this session built there.
                slot.last_build = None;
            }
            // The step starts once it has the slot (it may have waited for it).
            result.started_ms = unix_ms();
            step_inner(req, ws, slot, cancel, &mut result)
        }
        Ok(None) => Err(StepOutcome::Cancelled),
        Err(e) => Err(StepOutcome::Rejected {
            reason: format!(
                "cannot lock the folder of slot {}, {}: {e}",
                req.slot,
                slot_dir.display()
            ),
        }),
    };
    if let Err(outcome) = outcome {
        result.outcome = outcome;
    }
    result.finished_ms = unix_ms();
    result
}

fn step_inner(
    req: &StepRequest,
    ws: &Workspace,
    slot: &mut SlotState,
    cancel: &CancelToken,
    result: &mut StepResult,
) -> Result<(), StepOutcome> {
    let reject = |reason: String| StepOutcome::Rejected { reason };
    let spec = &req.benchmark;
    let bundle_dir = ws.cache.get(&req.bundle).ok_or_else(|| {
        reject(format!(
            "bundle {} is not in this worker's cache; send Prepare first",
            req.bundle.short()
        ))
    })?;
    check_cpus(&req.cpus).map_err(reject)?;
    // Before building: a worker that cannot apply the limits must not spend a build.
    if !spec.limits.is_none() {
        crate::cgroup::support()
            .check(&spec.limits)
            .map_err(reject)?;
    }
    if let Some(c) = &spec.container {
        crate::container::check(c).map_err(reject)?;
    }
    if let Some(points) = spec.knob_points() {
        req.decisions
            .check(points)
            .map_err(|e| reject(e.to_string()))?;
    }
    let run_timeout = seconds(spec.timeout_s, "timeout-s").map_err(reject)?;
    seconds(spec.build_timeout_s, "build-timeout-s").map_err(reject)?;
    let slot_dir = ws.slot_dir(req.slot);
    let work = slot_dir.join("work");
    let output = output_spec(&spec.check_output, &work).map_err(reject)?;

    let key = build_key(req);
    let reused = match &slot.last_build {
        Some((k, record)) if req.reuse_build && *k == key && work.is_dir() => Some(record.clone()),
        _ => None,
    };
    let reused = reused.filter(|record| match binary_changed(spec, &work, record) {
        None => true,
        Some(why) => {
            warn(result, format!("slot {}: {why}; built afresh", req.slot));
            false
        }
    });
    if let Some(mut record) = reused {
        record.reused = true;
        result.build = Some(record);
    } else {
        slot.last_build = None;
        fresh_work(&ws.rundir, &bundle_dir, &work, spec, &req.decisions).map_err(reject)?;
        let cached = match spec.build.is_empty() {
            true => Restored::Miss,
            false => ws.builds.restore(&key, &work),
        };
        let cached = match cached {
            Restored::Hit(record) => Some(record),
            Restored::Miss => None,
            Restored::Damaged(why) => {
                warn(result, format!("{why}; built afresh"));
                // Some of the entry's files may lie over the sources already.
                fresh_work(&ws.rundir, &bundle_dir, &work, spec, &req.decisions).map_err(reject)?;
                None
            }
        };
        if let Some(mut record) = cached {
            record.reused = true;
            result.build = Some(record);
        } else {
            let objects = ws.rundir.join("objects");
            let build = Build {
                spec,
                decisions: &req.decisions,
                work: &work,
                home: &slot_dir,
                cpus: &req.cpus,
                cancel,
                objects: Some(&objects),
            };
            let (record, built) = build.run(&mut result.warnings);
            result.build = record;
            built?;
            // Kept before any run can write into the work folder.
            if let Some(record) = &result.build {
                let skip = [WRAP_DIR, INCREMENTAL_DIR];
                if let Err(e) = ws.builds.keep(&key, &bundle_dir, &work, &skip, record) {
                    tracing::warn!("cannot keep the build of step {}: {e}", req.id);
                }
            }
        }
        if let Some(record) = &result.build {
            slot.last_build = Some((key, record.clone()));
        }
    }

    let plan = Plan {
        argv: expand_all(
            &spec.run,
            knobs_of(spec, &req.decisions),
            &work.join(DECISIONS_FILE),
        ),
        cwd: work.clone(),
        env: with_gpus(step_env(spec, &req.decisions, &slot_dir), &req.gpus),
        cpus: req.cpus.clone(),
        timeout: run_timeout,
        policy: req.runs,
        objective: req.objective,
        race: req.race,
        extra: Vec::new(),
        output,
        expected_output: req.expected_output,
        callgrind_out: slot_dir.join("callgrind.out"),
        gpu_trace_dir: slot_dir.join("gpu-trace"),
        limits: spec.limits,
        container: spec.container.clone(),
    };
    let m = measure::measure(&plan, Some(cancel));
    result.runs = m.runs;
    result.summary = m.summary;
    result.target_met = m.target_met;
    result.cut_short = m.cut_short;
    result.output_digest = m.output_digest;
    result.checked_output = m.checked_output;
    match m.outcome {
        StepOutcome::Ok => Ok(()),
        failed => Err(failed),
    }
}

/// Notes a problem the step worked around, in its result and the worker's log.
fn warn(result: &mut StepResult, warning: String) {
    tracing::warn!("step {}: {warning}", result.id);
    result.warnings.push(warning);
}

/// Why the binary a slot's last build left in `work` is not the one built
/// (a run, or anything else, wrote over it); `None` when it is, or when the
/// build recorded no binary.
fn binary_changed(spec: &BenchmarkSpec, work: &Path, record: &BuildRecord) -> Option<String> {
    let kept = record.binary_hash?;
    let binary = resolve_binary(&spec.run, work)?;
    let found = std::fs::read(&binary).map(|bytes| ContentHash::of(&bytes));
    match found {
        Ok(found) if found == kept => None,
        Ok(found) => Some(format!(
            "{} changed since its build (content hash {} where {} was built)",
            binary.display(),
            found.short(),
            kept.short()
        )),
        Err(e) => Some(format!("cannot read {}: {e}", binary.display())),
    }
}

/// Finds a benchmark's decision points and stock decisions; `progress` hears
/// how each of its builds gets on (see [`PROGRESS_EVERY`]).
pub fn discover(
    id: StepId,
    spec: &BenchmarkSpec,
    bundle: &ContentHash,
    ws: &Workspace,
    cancel: &CancelToken,
    progress: &(dyn Fn(String) + Sync),
) -> Result<Discovery, String> {
    let compiler = match &spec.kind {
        BenchmarkKind::Knobs { points } => return Ok(Discovery::of_knobs(points)),
        BenchmarkKind::LlvmInline { compiler, .. } => *compiler,
    };
    let bundle_dir = ws.cache.get(bundle).ok_or_else(|| {
        format!(
            "bundle {} is not in this worker's cache; send Prepare first",
            bundle.short()
        )
    })?;
    seconds(spec.build_timeout_s, "build-timeout-s")?;
    let dir = ws.rundir.join("discover").join(id.0.to_string());
    let result = discover_in(compiler, spec, &bundle_dir, &dir, ws, cancel, progress);
    if let Err(e) = std::fs::remove_dir_all(&dir) {
        tracing::warn!("cannot remove discovery folder {}: {e}", dir.display());
    }
    result
}

/// The two discovery builds of an llvm-inline benchmark in `dir`.
fn discover_in(
    compiler: Compiler,
    spec: &BenchmarkSpec,
    bundle_dir: &Path,
    dir: &Path,
    ws: &Workspace,
    cancel: &CancelToken,
    progress: &(dyn Fn(String) + Sync),
) -> Result<Discovery, String> {
    let work = dir.join("work");
    let no_decisions = DecisionSet::default();
    let build = Build {
        spec,
        decisions: &no_decisions,
        work: &work,
        home: dir,
        cpus: &[],
        cancel,
        objects: None,
    };
    let ir_dir = dir.join("ir");
    fresh_dir(&ws.rundir, &ir_dir)?;
    let mut remarks = Vec::new();
    let mut stock_log = String::new();
    let mut profile = None;
    for what in ["discovery", "stock"] {
        // Each build from a fresh copy of the sources: make would otherwise
        // find the first build's objects up to date, compile nothing and
        // print no remark.
        fresh_work(&ws.rundir, bundle_dir, &work, spec, &no_decisions)?;
        let incremental = fresh_subdir(&ws.rundir, &work, INCREMENTAL_DIR)?;
        let stock = llvm_inline::stock_build_args(compiler, &incremental);
        let log = if what == "discovery" {
            let empty_replay = work.join("replay-empty.txt");
            check_llvm_args_path(compiler, &empty_replay)?;
            std::fs::write(&empty_replay, "")
                .map_err(|e| format!("cannot write {}: {e}", empty_replay.display()))?;
            let all = llvm_inline::discovery_build_args(compiler, &empty_replay, &incremental);
            // Inlining everything can take a compile past any memory or time
            // (an interpreter's dispatch loop): such a unit is compiled again
            // with the stock flags, and its sites are the stock compiler's.
            build.compile(all, Some(stock), None, what, progress)?
        } else {
            // The stock build also leaves what site features come from: the
            // costs of the calls it keeps, the IR before inlining and,
            // run once under callgrind, a profile.
            let flags = llvm_inline::stock_discovery_args(compiler, &incremental);
            let log = build.compile(flags, None, Some(&ir_dir), what, progress)?;
            profile = profile_stock(spec, &work, dir, cancel, progress);
            log
        };
        remarks.push(llvm_inline::parse_remarks(&log));
        stock_log = log;
    }
    let mut discovery = llvm_inline::discovery_from_remarks(&remarks[0], &remarks[1]);
    let program = features::ir::Program::read_dir(&ir_dir)?;
    let missed = llvm_inline::parse_missed_remarks(&stock_log);
    let evidence = features::Evidence {
        discovery: &remarks[0],
        stock: &remarks[1],
        missed: &missed,
        ir: (!program.is_empty()).then_some(&program),
        profile: profile.as_ref(),
    };

    // The stock decisions replayed: a site the compiler cannot replay as it
    // decided it (a real program has a few) would fail every step as a
    // decision mismatch, the baseline's first; such sites are left out.
    fresh_work(&ws.rundir, bundle_dir, &work, spec, &no_decisions)?;
    let replay = work.join(REPLAY_FILE);
    std::fs::write(&replay, llvm_inline::replay_file_text(&discovery.baseline))
        .map_err(|e| format!("cannot write {}: {e}", replay.display()))?;
    let incremental = fresh_subdir(&ws.rundir, &work, INCREMENTAL_DIR)?;
    let flags = llvm_inline::replay_build_args(
        compiler,
        &replay,
        ReplayFallback::NeverInline,
        &incremental,
    );
    let replayed =
        llvm_inline::parse_remarks(&build.compile(flags, None, None, "replay check", progress)?);
    let unreplayable: BTreeSet<SiteId> = llvm_inline::verify(&discovery.baseline, &replayed)
        .iter()
        // Each problem names its site first, quoted.
        .filter_map(|p| p.strip_prefix('\'')?.split_once('\''))
        .map(|(id, _)| SiteId::from(id))
        .collect();
    if !unreplayable.is_empty() {
        tracing::info!(
            "{}: {} of {} sites left out, as the compiler does not replay its own decision there",
            spec.name,
            unreplayable.len(),
            discovery.points.len()
        );
        discovery.points.retain(|p| !unreplayable.contains(&p.id));
        discovery
            .baseline
            .0
            .retain(|id, _| !unreplayable.contains(id));
    }
    discovery.features = features::site_features(&discovery.points, &discovery.baseline, &evidence);
    Ok(discovery)
}

/// One callgrind run of the stock build in `work`, for the sites' profile
/// features; `None` (and a word to `progress`) where valgrind is missing or
/// the run fails: those features are then null.
fn profile_stock(
    spec: &BenchmarkSpec,
    work: &Path,
    home: &Path,
    cancel: &CancelToken,
    progress: &(dyn Fn(String) + Sync),
) -> Option<callgrind::Profile> {
    callgrind::version()?;
    let no_decisions = DecisionSet::default();
    let out = home.join("profile.callgrind");
    let argv = expand_all(&spec.run, None, &work.join(DECISIONS_FILE));
    let timeout = seconds(spec.timeout_s, "timeout-s")
        .ok()?
        .checked_mul(measure::CALLGRIND_TIMEOUT_FACTOR)
        .unwrap_or(Duration::MAX);
    let launch = Launch {
        argv: callgrind::wrap_profile(&argv, &out),
        cwd: work.to_path_buf(),
        env: step_env(spec, &no_decisions, home),
        cpus: Vec::new(),
        output: Output::Discard,
        timeout,
        sample_every: None,
        cgroups: Vec::new(),
        memory_limit: None,
    };
    progress(format!(
        "profile run of '{}' under callgrind started",
        spec.name
    ));
    let failed = match process::run(&launch, None, Some(cancel)) {
        Ok(f) if f.end == End::Exited(0) => match std::fs::read_to_string(&out) {
            Ok(text) => return Some(callgrind::Profile::parse(&text)),
            Err(e) => format!("cannot read {}: {e}", out.display()),
        },
        Ok(f) => format!("{:?}: {}", f.end, f.stderr_tail.trim()),
        Err(e) => e,
    };
    progress(format!(
        "profile run of '{}' failed, its sites get no profile features: {failed}",
        spec.name
    ));
    None
}

/// Makes `work` a fresh copy of the bundle with the decision file written.
/// A cargo package without a `[workspace]` of its own gets one when a folder
/// above the copy holds a `Cargo.toml` (a rundir inside a cargo project,
/// kiln's own among them): cargo would take that for its workspace and
/// refuse to build. Elsewhere the copy is left as it is.
fn fresh_work(
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
    let cargo = spec
        .build
        .first()
        .is_some_and(|p| Path::new(p).ends_with("cargo"));
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

/// One benchmark's build in its work folder.
struct Build<'a> {
    spec: &'a BenchmarkSpec,
    decisions: &'a DecisionSet,
    work: &'a Path,
    home: &'a Path,
    cpus: &'a [u32],
    cancel: &'a CancelToken,
    /// The per-unit object cache of step builds (see `object_cache`); none in discovery.
    objects: Option<&'a Path>,
}

impl Build<'_> {
    /// Builds under `decisions`: the record (if a build was attempted) and
    /// whether it succeeded and realised the decisions; what the compiler
    /// wrapper found wrong with the object cache goes to `warnings`.
    fn run(&self, warnings: &mut Vec<String>) -> (Option<BuildRecord>, Result<(), StepOutcome>) {
        let (spec, decisions) = (self.spec, self.decisions);
        if spec.build.is_empty() {
            return (None, Ok(()));
        }
        let mut flags = Vec::new();
        let mut replay_text = None;
        if let BenchmarkKind::LlvmInline { compiler, fallback } = &spec.kind {
            let text = llvm_inline::replay_file_text(decisions);
            let replay = self.work.join(REPLAY_FILE);
            if let Err(reason) = check_llvm_args_path(*compiler, &replay) {
                return (None, Err(StepOutcome::Rejected { reason }));
            }
            if let Err(e) = std::fs::write(&replay, &text) {
                let reason = format!("cannot write {}: {e}", replay.display());
                return (None, Err(StepOutcome::Rejected { reason }));
            }
            let incr = match fresh_subdir(self.work, self.work, INCREMENTAL_DIR) {
                Ok(dir) => dir,
                Err(reason) => return (None, Err(StepOutcome::Rejected { reason })),
            };
            flags = llvm_inline::replay_build_args(*compiler, &replay, *fallback, &incr);
            replay_text = Some(text);
        }
        let launch = match self.launch(flags, None) {
            Ok(launch) => launch,
            Err(reason) => return (None, Err(StepOutcome::Rejected { reason })),
        };
        let finished = match process::run(&launch, None, Some(self.cancel)) {
            Ok(f) => f,
            Err(message) => {
                let failed = StepOutcome::BuildFailed {
                    code: None,
                    log_tail: message,
                };
                return (None, Err(failed));
            }
        };
        let log = String::from_utf8_lossy(&finished.kept).into_owned();
        warnings.extend(
            log.lines()
                .filter(|l| l.starts_with("kiln: ") && l.contains(object_cache::DAMAGED))
                .map(str::to_string),
        );
        let is_llvm = replay_text.is_some();
        let shown = if is_llvm {
            llvm_inline::strip_remarks(&log)
        } else {
            log.clone()
        };
        let binary = resolve_binary(&spec.run, self.work);
        let record = BuildRecord {
            wall_ns: finished.wall.as_nanos() as u64,
            text_bytes: binary.as_deref().and_then(llvm_inline::text_size),
            binary_hash: binary
                .and_then(|b| std::fs::read(b).ok())
                .map(|bytes| ContentHash::of(&bytes)),
            log_tail: tail(&shown),
            replay_file: replay_text,
            reused: false,
        };
        let outcome = match finished.end {
            End::Cancelled => Err(StepOutcome::Cancelled),
            End::TimedOut => Err(StepOutcome::Timeout {
                phase: "build".into(),
                limit_s: spec.build_timeout_s,
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
            End::Exited(_) if is_llvm => {
                if finished.kept_truncated {
                    tracing::warn!(
                        "build output exceeded {BUILD_LOG_CAP} bytes; remarks past it are lost"
                    );
                }
                let mismatched = llvm_inline::verify(decisions, &llvm_inline::parse_remarks(&log));
                if mismatched.is_empty() {
                    Ok(())
                } else {
                    Err(StepOutcome::DecisionMismatch { mismatched })
                }
            }
            End::Exited(_) => Ok(()),
        };
        (Some(record), outcome)
    }

    /// A discovery build with extra arguments: its whole output, or why it
    /// failed. `progress` hears when it starts and, every [`PROGRESS_EVERY`],
    /// how long it has run and the units being compiled.
    fn compile(
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
            let finished = process::run(&launch, None, Some(self.cancel));
            drop(done);
            finished
        })?;
        let log = String::from_utf8_lossy(&finished.kept).into_owned();
        let failure = match finished.end {
            End::Exited(0) => {
                if let Some(dir) = ir.filter(|_| !wrapped) {
                    self.write_ir(&flags, dir);
                }
                return Ok(log);
            }
            End::Exited(c) => format!("exited with {c}"),
            End::Signaled(s) => format!("was killed by {}", process::signal_name(s)),
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

    /// Whether kiln's flags reach the compiles through the compiler wrapper:
    /// the build command is no compiler (make, cargo).
    fn wrapped(&self) -> bool {
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
    fn write_ir(&self, flags: &[String], dir: &Path) {
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
            };
            match process::run(&launch, None, Some(self.cancel)) {
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

    /// The build's launch with kiln's compiler flags: appended to the command
    /// when it runs the compiler itself, else given to every compile through
    /// the compiler wrapper ([`wrap`]), the build's command left as it is.
    fn launch(
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
        let wrapper = match &self.spec.kind {
            BenchmarkKind::LlvmInline { compiler, .. } if !flags.is_empty() && self.wrapped() => {
                Some(*compiler)
            }
            _ => None,
        };
        let added = match wrapper {
            None => {
                argv.extend(flags);
                Vec::new()
            }
            Some(compiler) => {
                let path = process::search_path(&env).to_string();
                let dir = self.work.join(WRAP_DIR);
                let crates = &self.spec.dependency_crates;
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
        for (k, v) in added {
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
        })
    }
}

/// Why a build killed at its memory limit failed, naming the limit.
fn memory_exceeded(limit: u64) -> String {
    format!(
        "killed: the build's processes used more than {} of memory together (build-memory)",
        kiln_protocol::sexp::byte_size_text(limit)
    )
}

/// The environment of builds and runs: the clean base, the benchmark's own
/// variables, and for knobs one `KILN_KNOB_<ID>` per decision.
fn step_env(spec: &BenchmarkSpec, decisions: &DecisionSet, home: &Path) -> Vec<(String, String)> {
    let mut extra = spec.env.clone();
    if spec.knob_points().is_some() {
        extra.extend(
            decisions
                .0
                .iter()
                .map(|(id, v)| (knob_env_name(id.as_str()), v.to_string())),
        );
    }
    process::clean_env(home, &extra)
}

/// The environment of builds: the runs' clean one with [`process::TOOLCHAIN_ENV`] and
/// the benchmark's `pass-env` taken from the worker's environment where set
/// there. The benchmark's own `env` still wins. Runs never get these: what
/// they measure must not depend on who started the worker.
fn build_env(spec: &BenchmarkSpec, decisions: &DecisionSet, home: &Path) -> Vec<(String, String)> {
    let mut env = step_env(spec, decisions, home);
    let passed = process::TOOLCHAIN_ENV
        .iter()
        .copied()
        .chain(spec.pass_env.iter().map(String::as_str));
    for name in passed {
        if spec.env.iter().any(|(k, _)| k == name) {
            continue;
        }
        let Some(value) = std::env::var_os(name) else {
            continue;
        };
        env.retain(|(k, _)| k != name);
        env.push((name.to_string(), value.to_string_lossy().into_owned()));
    }
    env
}

/// A run's environment with the slot's GPUs: `CUDA_VISIBLE_DEVICES` shows the run only
/// those (and is what NVML samples), numbered in PCI bus order as NVML numbers them.
fn with_gpus(mut env: Vec<(String, String)>, gpus: &[u32]) -> Vec<(String, String)> {
    if gpus.is_empty() {
        return env;
    }
    let list: Vec<String> = gpus.iter().map(u32::to_string).collect();
    for (name, value) in [
        ("CUDA_DEVICE_ORDER", "PCI_BUS_ID".to_string()),
        ("CUDA_VISIBLE_DEVICES", list.join(",")),
    ] {
        env.retain(|(k, _)| k != name);
        env.push((name.to_string(), value));
    }
    env
}

/// `KILN_KNOB_` and the id uppercased, other characters than letters and digits as `_`.
pub fn knob_env_name(id: &str) -> String {
    let suffix: String = id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_uppercase()
            } else {
                '_'
            }
        })
        .collect();
    format!("KILN_KNOB_{suffix}")
}

fn knobs_of<'a>(spec: &BenchmarkSpec, decisions: &'a DecisionSet) -> Option<&'a DecisionSet> {
    spec.knob_points().is_some().then_some(decisions)
}

fn expand_all(
    templates: &[String],
    knobs: Option<&DecisionSet>,
    decisions_file: &Path,
) -> Vec<String> {
    templates
        .iter()
        .map(|t| expand(t, knobs, decisions_file))
        .collect()
}

/// Replaces `{decisions}` by the decision file's path and, for knobs, `{id}`
/// by the knob's value; other braces are left alone (shell `${VAR}` included
/// unless VAR is a knob).
pub fn expand(template: &str, knobs: Option<&DecisionSet>, decisions_file: &Path) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else {
            rest = &rest[open..];
            break;
        };
        let name = &after[..close];
        let value = if name == "decisions" {
            Some(decisions_file.display().to_string())
        } else {
            knobs
                .and_then(|k| k.get(&name.into()))
                .map(ToString::to_string)
        };
        match value {
            Some(v) => {
                out.push_str(&v);
                rest = &after[close + 1..];
            }
            None => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

fn write_decisions(work: &Path, spec: &BenchmarkSpec, set: &DecisionSet) -> Result<(), String> {
    let file = DecisionFile {
        benchmark: Some(spec.name.clone()),
        set: set.clone(),
    };
    let path = work.join(DECISIONS_FILE);
    std::fs::write(&path, file.to_text())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// A timeout from a request: finite and positive (anything else would be a
/// controller bug, refused rather than panicking on).
fn seconds(value: f64, field: &str) -> Result<Duration, String> {
    Duration::try_from_secs_f64(value)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| format!("{field} must be a positive number of seconds, found {value}"))
}

fn output_spec(check: &OutputCheck, work: &Path) -> Result<OutputSpec, String> {
    Ok(match check {
        OutputCheck::None => OutputSpec::None,
        OutputCheck::Stdout => OutputSpec::Stdout(LineFilter::All),
        OutputCheck::Lines(re) => OutputSpec::Stdout(LineFilter::Keep(line_regex(re)?)),
        OutputCheck::LinesExcept(re) => OutputSpec::Stdout(LineFilter::Drop(line_regex(re)?)),
        OutputCheck::File(p) if is_confined_path(p) => OutputSpec::File(work.join(p)),
        OutputCheck::Command(argv) => OutputSpec::Command(argv.clone()),
        OutputCheck::File(p) => {
            return Err(format!(
                "checked output file '{p}' is not inside the work folder"
            ))
        }
    })
}

/// Whether a build command is a compiler (clang, clang++-14, rustc), which
/// takes kiln's flags on its command line; any other (make, cargo) gets them
/// through the compiler wrapper.
fn runs_compiler_itself(program: &str) -> bool {
    let base = Path::new(program)
        .file_name()
        .map_or(program.into(), |b| b.to_string_lossy());
    base.starts_with("clang") || base.starts_with("rustc")
}

/// A check-output pattern (the controller checked it when it read the config).
fn line_regex(pattern: &str) -> Result<regex::bytes::Regex, String> {
    regex::bytes::Regex::new(pattern)
        .map_err(|e| format!("check-output pattern '{pattern}' is no regular expression: {e}"))
}

fn check_cpus(cpus: &[u32]) -> Result<(), String> {
    let allowed = process::allowed_cpus();
    match cpus.iter().find(|c| !allowed.contains(c)) {
        Some(c) => Err(format!(
            "CPU {c} is not available to this worker (available: {})",
            allowed
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(",")
        )),
        None => Ok(()),
    }
}

/// rustc splits `-C llvm-args` at whitespace, so a replay file path (under
/// the rundir) must have none.
fn check_llvm_args_path(compiler: Compiler, path: &Path) -> Result<(), String> {
    if compiler == Compiler::Rustc && path.display().to_string().contains(char::is_whitespace) {
        return Err(format!(
            "{} contains whitespace, which rustc's -C llvm-args cannot carry; use a rundir without spaces",
            path.display()
        ));
    }
    Ok(())
}

/// The run command's program inside the work folder, if it is a path there.
fn resolve_binary(run: &[String], work: &Path) -> Option<PathBuf> {
    let program = run.first()?;
    let relative = program.strip_prefix("./").unwrap_or(program);
    (program.contains('/') && is_confined_path(relative)).then(|| work.join(relative))
}

/// What identifies a build: the benchmark, its bundle, the decisions, and
/// the toolchain: the environment builds get from the worker, the build
/// program's file and, for llvm-inline benchmarks, the compiler's version.
fn build_key(req: &StepRequest) -> ContentHash {
    let spec = &req.benchmark;
    let mut bytes = serde_json::to_vec(spec).unwrap_or_default();
    bytes.extend_from_slice(&req.bundle.0);
    bytes.extend_from_slice(&req.decisions.hash().0);
    let env = build_env(spec, &req.decisions, Path::new("/"));
    for (k, v) in &env {
        bytes.extend(format!("{k}={v}\0").into_bytes());
    }
    if let Some(program) = spec.build.first() {
        let found = process::exec_candidates(program, &env)
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
fn compiler_version(compiler: Compiler) -> String {
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
        .or_insert_with(|| crate::probe::compiler_version(name).unwrap_or_default())
        .clone()
}

fn fresh_subdir(root: &Path, parent: &Path, name: &str) -> Result<PathBuf, String> {
    let dir = parent.join(name);
    fresh_dir(root, &dir)?;
    Ok(dir)
}

fn tail(text: &str) -> String {
    let mut start = text.len().saturating_sub(TAIL_BYTES);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    text[start..].to_string()
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_protocol::decision::{DecisionValue, SiteId};

    #[test]
    fn expands_knobs_and_decisions() {
        let set = DecisionSet(
            [
                (SiteId::from("tile"), DecisionValue::Int(64)),
                (SiteId::from("algo"), DecisionValue::Name("fast".into())),
            ]
            .into(),
        );
        let d = Path::new("/w/decisions.sexp");
        assert_eq!(expand("-DTILE={tile}", Some(&set), d), "-DTILE=64");
        assert_eq!(expand("{algo}-{tile}", Some(&set), d), "fast-64");
        assert_eq!(
            expand("--file={decisions}", None, d),
            "--file=/w/decisions.sexp"
        );
        assert_eq!(
            expand("echo ${HOME} {x} {", Some(&set), d),
            "echo ${HOME} {x} {"
        );
        assert_eq!(
            expand("{tile}", None, d),
            "{tile}",
            "llvm-inline sites are not knobs"
        );
    }

    #[test]
    fn knob_env_names() {
        assert_eq!(knob_env_name("tile"), "KILN_KNOB_TILE");
        assert_eq!(knob_env_name("block-size.x"), "KILN_KNOB_BLOCK_SIZE_X");
    }

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
