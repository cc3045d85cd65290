//! One step: a work folder from the cached bundle, the build under the
//! decision set (or a cached build, checked), then the measured runs. A
//! benchmark with no build runs in the copy its slot laid out last where its
//! runs changed nothing there.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use kiln_protocol::bundle::is_confined_path;
use kiln_protocol::config::benchmark::{BenchmarkSpec, OutputCheck};
use kiln_protocol::decision::ContentHash;
use kiln_protocol::message::{
    folder_changed, missing_bundle, BuildRecord, StepOutcome, StepRequest, StepResult,
};

use crate::build::cache::Restored;
use crate::build::env::{expand_all, knobs_of, seconds, step_env, write_decisions, DECISIONS_FILE};
use crate::build::{
    build_key, cargo_target, fresh_work, llvm_inline, resolve_binary, warm, Build, INCREMENTAL_DIR,
    WRAP_DIR,
};
pub use crate::discover::discover;
use crate::launch::checked_output::LineFilter;
use crate::launch::{self, CancelToken};
use crate::measure::{self, OutputSpec, Plan};
use crate::workspace::slot_lock::SlotLock;
use crate::workspace::FolderIds;
pub use crate::workspace::Workspace;

/// What a slot remembers between steps: its last successful build, or the sources it laid
/// out for a benchmark with no build.
#[derive(Debug, Default)]
pub struct SlotState {
    last_build: Option<LastBuild>,
    laid_out: Option<LaidOut>,
}

/// A benchmark's sources laid out in the work folder, no build made in it: as they were
/// after the step's decision file was written, before its runs.
#[derive(Debug)]
struct LaidOut {
    benchmark: String,
    bundle: ContentHash,
    tree: warm::TreeStamps,
}

/// The build the slot's work folder holds.
#[derive(Debug)]
struct LastBuild {
    key: ContentHash,
    record: BuildRecord,
    /// Its benchmark and sources: a next build of the same starts from it
    /// ([`cargo_target`], [`warm`]).
    benchmark: String,
    bundle: ContentHash,
    /// The units its build compiled or left alone under the clang wrapper ([`warm`]).
    units: Vec<warm::UnitRecord>,
    /// The work folder as the build left it, where a next build may start in it ([`warm`]).
    tree: Option<warm::TreeStamps>,
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
                // Its folder no longer holds what this session built or laid out there.
                *slot = SlotState::default();
            }
            // The step starts once it has the slot (it may have waited for it).
            result.started_ms = unix_ms();
            let folders = step_folders(ws, req);
            step_inner(req, ws, slot, cancel, &mut result)
                .map_err(|outcome| folders_changed(outcome, &folders))
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
        result.outcome = lost_its_bundle(outcome, req, ws);
    }
    result.finished_ms = unix_ms();
    result
}

/// The worker's folders a step uses: its rundir, slot, build cache and bundle.
fn step_folders(ws: &Workspace, req: &StepRequest) -> FolderIds {
    let mut folders = vec![
        ws.rundir.clone(),
        ws.slot_dir(req.slot),
        ws.rundir.join("builds"),
    ];
    folders.extend(ws.cache.get(&req.bundle));
    FolderIds::of(folders)
}

/// A step that failed while one of the worker's folders was removed or replaced under it
/// failed for the worker's sake, not its decisions': said so, and the controller prepares the
/// worker again before the step runs again.
fn folders_changed(outcome: StepOutcome, folders: &FolderIds) -> StepOutcome {
    match (&outcome, folders.changed()) {
        (StepOutcome::Cancelled | StepOutcome::Ok, _) | (_, None) => outcome,
        (_, Some(folder)) => StepOutcome::Rejected {
            reason: folder_changed(folder),
        },
    }
}

/// A step that failed while the worker's bundle went away under it (its folder removed: a
/// cleaner, a reimage) failed for the worker's sake, not its decisions': said as the missing
/// bundle, which the controller sends again before the step runs again.
fn lost_its_bundle(outcome: StepOutcome, req: &StepRequest, ws: &Workspace) -> StepOutcome {
    let ours = !matches!(outcome, StepOutcome::Cancelled | StepOutcome::Ok);
    match ours && ws.cache.get(&req.bundle).is_none() {
        true => StepOutcome::Rejected {
            reason: missing_bundle(&req.bundle),
        },
        false => outcome,
    }
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
    let bundle_dir = ws
        .cache
        .get(&req.bundle)
        .ok_or_else(|| reject(missing_bundle(&req.bundle)))?;
    check_cpus(&req.cpus).map_err(reject)?;
    // Before building: a worker that cannot apply the limits must not spend a build.
    if !spec.limits.is_none() {
        crate::launch::cgroup::support()
            .check(&spec.limits)
            .map_err(reject)?;
    }
    if let Some(c) = &spec.container {
        crate::launch::container::check(c).map_err(reject)?;
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

    if spec.build.is_empty() {
        lay_out(req, ws, slot, &bundle_dir, &work).map_err(reject)?;
    } else {
        build(req, ws, slot, cancel, result, &bundle_dir, &slot_dir)?;
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
        function_costs: req.function_costs,
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
    result.function_instructions = m.function_instructions;
    // Logged by the measurement already.
    result.warnings.extend(m.warnings);
    match m.outcome {
        StepOutcome::Ok => Ok(()),
        failed => Err(failed),
    }
}

/// The step's build in the slot's work folder: the one it holds where the step re-measures
/// it, a kept build of these decisions, or a build (from the slot's last one where it can);
/// the slot then remembers it.
fn build(
    req: &StepRequest,
    ws: &Workspace,
    slot: &mut SlotState,
    cancel: &CancelToken,
    result: &mut StepResult,
    bundle_dir: &Path,
    slot_dir: &Path,
) -> Result<(), StepOutcome> {
    let reject = |reason: String| StepOutcome::Rejected { reason };
    let spec = &req.benchmark;
    let work = slot_dir.join("work");
    let key = build_key(req);
    let reused = match &slot.last_build {
        Some(last) if req.reuse_build && last.key == key && work.is_dir() => {
            Some(last.record.clone())
        }
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
        let last = slot
            .last_build
            .take()
            .filter(|last| last.benchmark == spec.name && last.bundle == req.bundle);
        let mut units = Vec::new();
        if cargo_target::applies(spec) && last.is_some() {
            cargo_target::put_aside(slot_dir, &work, &req.bundle);
        }
        let fresh = || fresh_work(&ws.rundir, bundle_dir, &work, spec, &req.decisions);
        let skip = [WRAP_DIR, INCREMENTAL_DIR];
        // The last build's tree, untouched by its runs, where no kept build
        // of these decisions is to be laid over a fresh copy instead.
        let in_place = last.as_ref().is_some_and(|last| {
            !ws.builds.holds(&key) && last.tree.as_ref().is_some_and(|t| t.still_in(&work, &skip))
        });
        let cached = if in_place {
            warm::reopen(&work, &skip, spec, &req.decisions).map_err(reject)?;
            Restored::Miss
        } else {
            fresh().map_err(reject)?;
            match spec.build.is_empty() {
                true => Restored::Miss,
                false => ws.builds.restore(&key, &work),
            }
        };
        let cached = match cached {
            Restored::Hit(record) => Some(record),
            Restored::Miss => None,
            Restored::Damaged(why) => {
                warn(result, format!("{why}; built afresh"));
                // Some of the entry's files may lie over the sources already.
                fresh().map_err(reject)?;
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
                home: slot_dir,
                cpus: &req.cpus,
                cancel,
                objects: Some(&objects),
                replay: Default::default(),
            };
            let started_warm = start_warm(&build, req, ws, last.as_ref(), in_place, result);
            if started_warm.is_none() {
                fresh().map_err(reject)?;
            }
            let (from, mut unchanged) = started_warm.flatten().unzip();
            let kept_log = match (from, &unchanged) {
                (Some(from), Some(u)) => format!("kiln: {STARTED_FROM} {from}\n{}", u.log),
                _ => String::new(),
            };
            let (mut record, mut built) = build.run(&mut result.warnings, &kept_log);
            // A build that fails from a warm start is done again from the
            // bare sources: the failure is the step's own only if that fails too.
            if let (Err(failed), Some(from)) = (&built, from) {
                // Said with the warning: the fresh build's log replaces the failed one's.
                let said = failed.reason().unwrap_or_default();
                fresh().map_err(reject)?;
                unchanged = None;
                (record, built) = build.run(&mut result.warnings, "");
                if built.is_ok() {
                    let why = format!(
                        "the build from {from} failed ({said}), and from a fresh copy it did not"
                    );
                    warn(result, why);
                }
            }
            units = warm::read_units(&work.join(WRAP_DIR).join(warm::UNITS_FILE));
            units.extend(unchanged.map(|u| u.units).unwrap_or_default());
            result.build = record;
            built?;
            // Kept before any run can write into the work folder.
            if let Some(record) = &result.build {
                if let Err(e) = ws.builds.keep(&key, bundle_dir, &work, &skip, record) {
                    tracing::warn!("cannot keep the build of step {}: {e}", req.id);
                }
            }
        }
        if let Some(record) = &result.build {
            slot.last_build = Some(LastBuild {
                key,
                record: record.clone(),
                benchmark: spec.name.clone(),
                bundle: req.bundle,
                units,
                tree: warm::applies(spec)
                    .then(|| warm::TreeStamps::of(&work, &skip).ok())
                    .flatten(),
            });
        }
    }

    Ok(())
}

/// The sources of a benchmark with no build laid out in the slot's work folder with the
/// step's decision file: the copy the last step laid out where its runs left every file as
/// they found it (the same stamps the build cache checks), else a fresh one. A folder of
/// 50,000 files is then copied once, not once a step; a benchmark whose runs write into their
/// folder gets a fresh copy each step.
fn lay_out(
    req: &StepRequest,
    ws: &Workspace,
    slot: &mut SlotState,
    bundle_dir: &Path,
    work: &Path,
) -> Result<(), String> {
    let spec = &req.benchmark;
    let kept = slot.laid_out.take().filter(|laid| {
        laid.benchmark == spec.name && laid.bundle == req.bundle && laid.tree.still_in(work, &[])
    });
    let tree = match kept {
        Some(laid) => {
            write_decisions(work, spec, &req.decisions)?;
            laid.tree.restamp(&work.join(DECISIONS_FILE))?
        }
        None => {
            fresh_work(&ws.rundir, bundle_dir, work, spec, &req.decisions)?;
            warm::TreeStamps::of(work, &[])?
        }
    };
    slot.laid_out = Some(LaidOut {
        benchmark: spec.name.clone(),
        bundle: req.bundle,
        tree,
    });
    Ok(())
}

/// Starts the build in `work`, a fresh copy of the sources (or, `in_place`,
/// the last build's tree as it left it), from the slot's
/// `last` build of the same benchmark and sources where it can: cargo's
/// kept target folder ([`cargo_target`]), or the last build's tree
/// ([`warm`]). `Some(Some((what, unchanged)))` where it did (`unchanged`:
/// the units it left as that build made them), `Some(None)` where there was
/// none to start from, and `None` where `work` must be copied afresh (what
/// went wrong is a warning).
fn start_warm(
    build: &Build,
    req: &StepRequest,
    ws: &Workspace,
    last: Option<&LastBuild>,
    in_place: bool,
    result: &mut StepResult,
) -> Option<Option<(&'static str, warm::Unchanged)>> {
    let (spec, work) = (build.spec, build.work);
    if cargo_target::applies(spec) {
        let crates = &spec.dependency_crates;
        return match cargo_target::take(build.home, work, &req.bundle, &spec.build[0], crates) {
            Ok(took) => Some(took.then(|| ("cargo's kept target folder", Default::default()))),
            Err(why) => {
                warn(result, why);
                Some(None)
            }
        };
    }
    let Some(last) = last.filter(|_| warm::applies(spec)) else {
        return Some(None);
    };
    let laid = if in_place {
        Ok("the last build's tree, in place")
    } else {
        match ws.builds.restore_built_here(&last.key, work) {
            Restored::Hit(_) => Ok("the last build's tree"),
            Restored::Miss => return Some(None),
            Restored::Damaged(why) => Err(why),
        }
    };
    let laid = laid.and_then(|from| {
        let replay = llvm_inline::in_work(build.replay_text(), work);
        let objects = build.objects.unwrap_or(work);
        let unchanged = warm::unchanged(&last.units, work, objects, &replay);
        let skip = [WRAP_DIR, INCREMENTAL_DIR];
        warm::touch_sources(work, &skip, &unchanged.sources, SystemTime::now())
            .map(|()| (from, unchanged))
    });
    match laid {
        Ok(started) => Some(Some(started)),
        Err(why) => {
            warn(result, format!("{why}; built from a fresh copy"));
            None
        }
    }
}

/// What the build log says of a build that started warm, and from what.
pub const STARTED_FROM: &str = "the build started from";

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

/// A check-output pattern (the controller checked it when it read the config).
fn line_regex(pattern: &str) -> Result<regex::bytes::Regex, String> {
    regex::bytes::Regex::new(pattern)
        .map_err(|e| format!("check-output pattern '{pattern}' is no regular expression: {e}"))
}

fn check_cpus(cpus: &[u32]) -> Result<(), String> {
    let allowed = launch::allowed_cpus();
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

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
