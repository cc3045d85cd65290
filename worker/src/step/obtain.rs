//! The step's build in its slot's work folder, obtained the cheapest way that gives the
//! same build: the one the folder holds where the step re-measures it, a kept build of
//! these decisions from the build cache, or a build, warm from the slot's last one where
//! it can ([`cargo_target`], [`warm`]); the slot then remembers it.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use kiln_protocol::config::benchmark::BenchmarkSpec;
use kiln_protocol::decision::ContentHash;
use kiln_protocol::message::{BuildRecord, StepOutcome, StepRequest, StepResult};

use super::{reject, warn, LastBuild, SlotState, Workspace, STARTED_FROM};
use crate::build::cache::Restored;
use crate::build::{
    build_key, cargo_target, fresh_work, llvm_inline, resolve_binary, warm, Build, INCREMENTAL_DIR,
    WRAP_DIR,
};
use crate::launch::CancelToken;

/// What the build's tree stamps and kept builds leave out of the work folder.
const SKIP: [&str; 2] = [WRAP_DIR, INCREMENTAL_DIR];

/// Where and under what key one step's build is obtained.
pub(super) struct BuildAt<'a> {
    req: &'a StepRequest,
    ws: &'a Workspace,
    bundle_dir: &'a Path,
    slot_dir: &'a Path,
    work: PathBuf,
    key: ContentHash,
}

/// One run of the build, and the run before it where that one failed from a warm start.
struct Attempt {
    record: Option<BuildRecord>,
    outcome: Result<(), StepOutcome>,
    /// The units the warm start left as the last build made them, where the build kept it.
    unchanged: Option<warm::Unchanged>,
}

impl<'a> BuildAt<'a> {
    pub(super) fn new(
        req: &'a StepRequest,
        ws: &'a Workspace,
        bundle_dir: &'a Path,
        slot_dir: &'a Path,
    ) -> Self {
        BuildAt {
            req,
            ws,
            bundle_dir,
            slot_dir,
            work: slot_dir.join("work"),
            key: build_key(req),
        }
    }

    /// The step's build in the slot's work folder: the one it holds where the step
    /// re-measures it, a kept build of these decisions, or a build (from the slot's last one
    /// where it can); the slot then remembers it.
    pub(super) fn obtain(
        self,
        slot: &mut SlotState,
        cancel: &CancelToken,
        result: &mut StepResult,
    ) -> Result<(), StepOutcome> {
        let spec = &self.req.benchmark;
        if let Some(mut record) = self.held(slot, result) {
            record.reused = true;
            result.build = Some(record);
            return Ok(());
        }
        let last = slot
            .last_build
            .take()
            .filter(|last| last.benchmark == spec.name && last.bundle == self.req.bundle);
        if cargo_target::applies(spec) && last.is_some() {
            cargo_target::put_aside(self.slot_dir, &self.work, &self.req.bundle);
        }
        let in_place = self.in_place(last.as_ref());
        let units = match self.lay_out(in_place, result)? {
            Some(mut record) => {
                record.reused = true;
                result.build = Some(record);
                Vec::new()
            }
            None => self.build(cancel, last.as_ref(), in_place, result)?,
        };
        self.remember(slot, units, result);
        Ok(())
    }

    /// The slot's last build, where the step re-measures it (the same key) and its binary is
    /// still the one built; a binary written over is a warning, and a build afresh.
    fn held(&self, slot: &SlotState, result: &mut StepResult) -> Option<BuildRecord> {
        let reused = match &slot.last_build {
            Some(last) if self.req.reuse_build && last.key == self.key && self.work.is_dir() => {
                Some(last.record.clone())
            }
            _ => None,
        };
        reused.filter(
            |record| match binary_changed(&self.req.benchmark, &self.work, record) {
                None => true,
                Some(why) => {
                    warn(
                        result,
                        format!("slot {}: {why}; built afresh", self.req.slot),
                    );
                    false
                }
            },
        )
    }

    /// Whether the build starts in the `last` build's tree, untouched by its runs: where no
    /// kept build of these decisions is to be laid over a fresh copy instead.
    fn in_place(&self, last: Option<&LastBuild>) -> bool {
        last.is_some_and(|last| {
            !self.ws.builds.holds(&self.key)
                && last
                    .tree
                    .as_ref()
                    .is_some_and(|t| t.still_in(&self.work, &SKIP))
        })
    }

    /// Readies the work folder: the last build's tree reopened `in_place`, else a fresh copy
    /// with the kept build of these decisions laid over it, whose record it returns. A kept
    /// build found damaged is a warning, and a fresh copy again.
    fn lay_out(
        &self,
        in_place: bool,
        result: &mut StepResult,
    ) -> Result<Option<BuildRecord>, StepOutcome> {
        let spec = &self.req.benchmark;
        let cached = if in_place {
            warm::reopen(&self.work, &SKIP, spec, &self.req.decisions).map_err(reject)?;
            Restored::Miss
        } else {
            self.fresh()?;
            match spec.build.is_empty() {
                true => Restored::Miss,
                false => self.ws.builds.restore(&self.key, &self.work),
            }
        };
        match cached {
            Restored::Hit(record) => Ok(Some(record)),
            Restored::Miss => Ok(None),
            Restored::Damaged(why) => {
                warn(result, format!("{why}; built afresh"));
                // Some of the entry's files may lie over the sources already.
                self.fresh()?;
                Ok(None)
            }
        }
    }

    /// Builds in the work folder, from the slot's `last` build where it can, and keeps the
    /// build; the units its compiles left, for the next build to start from.
    fn build(
        &self,
        cancel: &CancelToken,
        last: Option<&LastBuild>,
        in_place: bool,
        result: &mut StepResult,
    ) -> Result<Vec<warm::UnitRecord>, StepOutcome> {
        let req = self.req;
        let objects = self.ws.rundir.join("objects");
        let build = Build {
            spec: &req.benchmark,
            decisions: &req.decisions,
            work: &self.work,
            home: self.slot_dir,
            cpus: &req.cpus,
            cancel,
            objects: Some(&objects),
            replay: Default::default(),
        };
        let started_warm = start_warm(&build, req, self.ws, last, in_place, result);
        if started_warm.is_none() {
            self.fresh()?;
        }
        let (from, unchanged) = started_warm.flatten().unzip();
        let attempt = self.run(&build, from, unchanged, result)?;
        let mut units = warm::read_units(&self.work.join(WRAP_DIR).join(warm::UNITS_FILE));
        units.extend(attempt.unchanged.map(|u| u.units).unwrap_or_default());
        result.build = attempt.record;
        attempt.outcome?;
        // Kept before any run can write into the work folder.
        self.keep(result);
        Ok(units)
    }

    /// Runs the build, started warm `from` a build whose `unchanged` units it left alone, or
    /// from a fresh copy. A build that fails from a warm start is done again from the bare
    /// sources: the failure is the step's own only if that fails too.
    fn run(
        &self,
        build: &Build,
        from: Option<&'static str>,
        unchanged: Option<warm::Unchanged>,
        result: &mut StepResult,
    ) -> Result<Attempt, StepOutcome> {
        let kept_log = match (from, &unchanged) {
            (Some(from), Some(u)) => format!("kiln: {STARTED_FROM} {from}\n{}", u.log),
            _ => String::new(),
        };
        let (record, outcome) = build.run(&mut result.measurement.warnings, &kept_log);
        let (Err(failed), Some(from)) = (&outcome, from) else {
            return Ok(Attempt {
                record,
                outcome,
                unchanged,
            });
        };
        // Said with the warning: the fresh build's log replaces the failed one's.
        let said = failed.reason().unwrap_or_default();
        self.fresh()?;
        let (record, outcome) = build.run(&mut result.measurement.warnings, "");
        if outcome.is_ok() {
            let why =
                format!("the build from {from} failed ({said}), and from a fresh copy it did not");
            warn(result, why);
        }
        Ok(Attempt {
            record,
            outcome,
            unchanged: None,
        })
    }

    /// Keeps the step's build in the worker's build cache; one that cannot be kept is only
    /// logged.
    fn keep(&self, result: &StepResult) {
        let Some(record) = &result.build else {
            return;
        };
        let (key, work) = (&self.key, &self.work);
        if let Err(e) = self
            .ws
            .builds
            .keep(key, self.bundle_dir, work, &SKIP, record)
        {
            tracing::warn!("cannot keep the build of step {}: {e}", self.req.id);
        }
    }

    /// The slot remembers the step's build, and its `units`, for the next step.
    fn remember(self, slot: &mut SlotState, units: Vec<warm::UnitRecord>, result: &StepResult) {
        let Some(record) = &result.build else {
            return;
        };
        let spec = &self.req.benchmark;
        slot.last_build = Some(LastBuild {
            key: self.key,
            record: record.clone(),
            benchmark: spec.name.clone(),
            bundle: self.req.bundle,
            units,
            tree: warm::applies(spec)
                .then(|| warm::TreeStamps::of(&self.work, &SKIP).ok())
                .flatten(),
        });
    }

    /// Makes the work folder a fresh copy of the sources with the step's decision file.
    fn fresh(&self) -> Result<(), StepOutcome> {
        let (spec, decisions) = (&self.req.benchmark, &self.req.decisions);
        fresh_work(
            &self.ws.rundir,
            self.bundle_dir,
            &self.work,
            spec,
            decisions,
        )
        .map_err(reject)
    }
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
        warm::touch_sources(work, &SKIP, &unchanged.sources, SystemTime::now())
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
