//! One step: a work folder from the cached bundle, the build under the
//! decision set (or a cached build, checked), then the measured runs. A
//! benchmark with no build runs in the copy its slot laid out last where its
//! runs changed nothing there.

mod obtain;

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use kiln_protocol::bundle::is_confined_path;
use kiln_protocol::config::benchmark::OutputCheck;
use kiln_protocol::decision::ContentHash;
use kiln_protocol::message::{
    folder_changed, missing_bundle, BuildRecord, StepOutcome, StepRequest, StepResult,
};

use crate::build::env::{expand_all, knobs_of, seconds, step_env, write_decisions, DECISIONS_FILE};
use crate::build::{fresh_work, warm};
pub use crate::discover::discover;
use crate::launch::checked_output::LineFilter;
use crate::launch::{self, CancelToken};
use crate::measure::{self, Measurement, OutputSpec, Plan};
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
    /// ([`crate::build::cargo_target`], [`warm`]).
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
        result.measurement.outcome = lost_its_bundle(outcome, req, ws);
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

/// The step once it holds its slot, stage by stage: the request checked, the build obtained
/// (or, for a benchmark with no build, the sources laid out), the runs measured, and what
/// they measured put in `result`.
fn step_inner(
    req: &StepRequest,
    ws: &Workspace,
    slot: &mut SlotState,
    cancel: &CancelToken,
    result: &mut StepResult,
) -> Result<(), StepOutcome> {
    let checked = check_request(req, ws).map_err(reject)?;
    if req.benchmark.build.is_empty() {
        lay_out(req, ws, slot, &checked.bundle_dir, &checked.work).map_err(reject)?;
    } else {
        let at = obtain::BuildAt::new(req, ws, &checked.bundle_dir, &checked.slot_dir);
        at.obtain(slot, cancel, result)?;
    }
    let plan = run_plan(req, checked);
    let measured = measure::measure(&plan, Some(cancel));
    record_measurement(measured, result)
}

/// A step that cannot run as asked, for the reason given.
fn reject(reason: String) -> StepOutcome {
    StepOutcome::Rejected { reason }
}

/// A request that passed [`check_request`], and what the later stages take from it.
struct Checked {
    /// The bundle's folder in the worker's cache.
    bundle_dir: PathBuf,
    /// The slot's folder, and the work folder in it.
    slot_dir: PathBuf,
    work: PathBuf,
    /// The runs' time limit.
    run_timeout: Duration,
    /// What of the runs' output is checked.
    output: OutputSpec,
}

/// Checks that this worker can run the step as asked before it spends a build on it: the
/// bundle is here, the CPUs, limits and container are this worker's to give, the decisions
/// fit the benchmark, and the time limits and output check make sense.
fn check_request(req: &StepRequest, ws: &Workspace) -> Result<Checked, String> {
    let spec = &req.benchmark;
    let bundle_dir = ws
        .cache
        .get(&req.bundle)
        .ok_or_else(|| missing_bundle(&req.bundle))?;
    check_cpus(&req.cpus)?;
    // Before building: a worker that cannot apply the limits must not spend a build.
    if !spec.limits.is_none() {
        crate::launch::cgroup::support().check(&spec.limits)?;
    }
    if let Some(c) = &spec.container {
        crate::launch::container::check(c)?;
    }
    check_decisions(req)?;
    let run_timeout = seconds(spec.timeout_s, "timeout-s")?;
    seconds(spec.build_timeout_s, "build-timeout-s")?;
    let slot_dir = ws.slot_dir(req.slot);
    let work = slot_dir.join("work");
    let output = output_spec(&spec.check_output, &work)?;
    Ok(Checked {
        bundle_dir,
        slot_dir,
        work,
        run_timeout,
        output,
    })
}

/// Checks the step's decisions against the benchmark's knobs, where it has knobs (the
/// decisions of inlining sites are checked against the build's remarks once it is built).
fn check_decisions(req: &StepRequest) -> Result<(), String> {
    match req.benchmark.knob_points() {
        Some(points) => req.decisions.check(points).map_err(|e| e.to_string()),
        None => Ok(()),
    }
}

/// The measured runs: the run command in the work folder with the step's decisions,
/// environment, CPUs, GPUs and limits.
fn run_plan(req: &StepRequest, checked: Checked) -> Plan {
    let spec = &req.benchmark;
    let Checked {
        slot_dir,
        work,
        run_timeout,
        output,
        ..
    } = checked;
    Plan {
        argv: expand_all(
            &spec.run,
            knobs_of(spec, &req.decisions),
            &work.join(DECISIONS_FILE),
        ),
        cwd: work,
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
    }
}

/// What the runs measured, put in the step's result after the warnings the step gave
/// before them; the step fails as they did.
fn record_measurement(m: Measurement, result: &mut StepResult) -> Result<(), StepOutcome> {
    // The step's own warnings (a discarded cache entry) stay first; the measurement's
    // are logged by the measurement already.
    let earlier = std::mem::take(&mut result.measurement.warnings);
    result.measurement = m;
    result.measurement.warnings.splice(0..0, earlier);
    match &result.measurement.outcome {
        StepOutcome::Ok => Ok(()),
        failed => Err(failed.clone()),
    }
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

/// What the build log says of a build that started warm, and from what.
pub const STARTED_FROM: &str = "the build started from";

/// Notes a problem the step worked around, in its result and the worker's log.
fn warn(result: &mut StepResult, warning: String) {
    tracing::warn!("step {}: {warning}", result.id);
    result.measurement.warnings.push(warning);
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
