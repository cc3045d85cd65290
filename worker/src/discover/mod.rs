//! Discovery: a benchmark's decision points, its stock decisions, and what
//! is known of each point ([`features`]): two builds with inline remarks
//! (stock, then all inlined), the stock decisions replayed as a check, the IR
//! before inlining, callgrind profiles of the stock build and of a build that
//! inlines nothing, and the optimised code of the first two. `left_out` has
//! the probe builds and the sites the search leaves out.
//!
//! `discover/<id>/` under the rundir is a discovery's scratch folder (its work
//! folder, the stock build's IR under `ir/`, its callgrind profile), removed
//! when it ends. It may import [`crate::build`], [`crate::measure`] and below.

pub mod features;
mod left_out;

use std::path::{Path, PathBuf};
use std::time::Duration;

use kiln_protocol::config::benchmark::{BenchmarkKind, BenchmarkSpec, Compiler, ReplayFallback};
use kiln_protocol::decision::{ContentHash, DecisionSet};
use kiln_protocol::message::{missing_bundle, Discovery, StepId};

use crate::build::env::{expand_all, seconds, step_env, DECISIONS_FILE};
use crate::build::wrap;
use crate::build::{
    check_llvm_args_path, fresh_subdir, fresh_work, llvm_inline, Build, INCREMENTAL_DIR,
};
use crate::files::fresh_dir;
use crate::launch::{self, CancelToken, End, Launch, Output};
use crate::measure::{self, callgrind, code};
use crate::workspace::Workspace;

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
    let bundle_dir = ws.cache.get(bundle).ok_or_else(|| missing_bundle(bundle))?;
    seconds(spec.build_timeout_s, "build-timeout-s")?;
    let dir = ws.rundir.join("discover").join(id.0.to_string());
    let result = discover_in(compiler, spec, &bundle_dir, &dir, ws, cancel, progress);
    if let Err(e) = std::fs::remove_dir_all(&dir) {
        tracing::warn!("cannot remove discovery folder {}: {e}", dir.display());
    }
    result
}

/// The two discovery builds of an llvm-inline benchmark in `dir`, the sites
/// left out of the search, and the features of the rest.
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
        replay: Default::default(),
    };
    let ir_dir = dir.join("ir");
    fresh_dir(&ws.rundir, &ir_dir)?;
    let builder = Builder {
        compiler,
        spec,
        bundle_dir,
        work: &work,
        ws,
        build: &build,
    };
    // The stock build first: its profile names the objects whose code both builds' are read
    // from, at the same paths in the work folder.
    let (stock_log, profile) = builder.stock(&ir_dir, dir, cancel, progress)?;
    let stock_remarks = llvm_inline::parse_remarks_in(&stock_log, &work);
    let objects = profile
        .as_ref()
        .map(|p| code::own_objects(p, dir))
        .unwrap_or_default();
    let stock_code = code::Code::read(&objects);
    let all_log = builder.all_inlined(progress)?;
    let all_remarks = llvm_inline::parse_remarks_in(&all_log, &work);
    let inlined_code = code::Code::read(&objects);
    let uninlined = builder.uninlined(dir, cancel, progress);
    let fallbacks = wrap::fallbacks(&all_log);
    let mut discovery = llvm_inline::discovery_from_remarks(&all_remarks, &stock_remarks);
    discovery.fallbacks = fallbacks;
    discovery.forced = llvm_inline::parse_forced_in(&stock_log, &work);
    let program = features::ir::Program::read_dir(&ir_dir)?;
    let missed = llvm_inline::parse_missed_remarks(&llvm_inline::from_work(&stock_log, &work));
    let evidence = features::Evidence {
        discovery: &all_remarks,
        stock: &stock_remarks,
        missed: &missed,
        ir: (!program.is_empty()).then_some(&program),
        profile: profile.as_ref(),
        uninlined: uninlined.as_ref(),
        code: stock_code.as_ref(),
        inlined_code: inlined_code.as_ref(),
    };
    builder.leave_out_untaken(&mut discovery, progress)?;
    left_out::leave_out_lineless(&mut discovery);
    left_out::remove_left_out(&spec.name, &mut discovery);
    discovery.features = features::site_features(&discovery.points, &discovery.baseline, &evidence);
    Ok(discovery)
}

/// Builds of a discovery's sources in its work folder: the two discovery builds here,
/// the probes in `left_out`.
struct Builder<'a> {
    compiler: Compiler,
    spec: &'a BenchmarkSpec,
    bundle_dir: &'a Path,
    work: &'a Path,
    ws: &'a Workspace,
    build: &'a Build<'a>,
}

impl Builder<'_> {
    /// A fresh copy of the sources in the work folder; its fresh incremental folder.
    fn fresh(&self) -> Result<PathBuf, String> {
        // Each build from a fresh copy of the sources: make would otherwise
        // find the first build's objects up to date, compile nothing and
        // print no remark.
        fresh_work(
            &self.ws.rundir,
            self.bundle_dir,
            self.work,
            self.spec,
            &DecisionSet::default(),
        )?;
        fresh_subdir(&self.ws.rundir, self.work, INCREMENTAL_DIR)
    }

    /// The discovery build, everything inlined; its log.
    fn all_inlined(&self, progress: &(dyn Fn(String) + Sync)) -> Result<String, String> {
        let incremental = self.fresh()?;
        let stock = llvm_inline::stock_build_args(self.compiler, &incremental);
        let all =
            llvm_inline::discovery_build_args(self.compiler, &self.empty_replay()?, &incremental);
        // Inlining everything can take a compile past any memory or time
        // (an interpreter's dispatch loop): such a unit is compiled again
        // with the stock flags, and its sites are the stock compiler's.
        self.build
            .compile(all, Some(stock), None, "discovery", progress)
    }

    /// A build that inlines nothing it may leave (`always_inline` still inlines), run once
    /// under callgrind: how often each call runs as a call of its own, which the stock profile
    /// cannot say of a call the stock build inlined. `None` (and a word to `progress`) where
    /// the build or the run fails: the sites' `uninlined_calls` are then null.
    fn uninlined(
        &self,
        home: &Path,
        cancel: &CancelToken,
        progress: &(dyn Fn(String) + Sync),
    ) -> Option<callgrind::Profile> {
        callgrind::version()?;
        let built = self.fresh().and_then(|incremental| {
            let none = llvm_inline::replay_build_args(
                self.compiler,
                &self.empty_replay()?,
                ReplayFallback::NeverInline,
                &incremental,
            );
            self.build.compile(none, None, None, "uninlined", progress)
        });
        if let Err(e) = built {
            let name = &self.spec.name;
            progress(format!(
                "uninlined build of '{name}' failed, its sites get no uninlined_calls: {e}"
            ));
            return None;
        }
        let out = home.join("uninlined.callgrind");
        profile(
            self.spec,
            self.work,
            home,
            &out,
            "uninlined",
            cancel,
            progress,
        )
    }

    /// An empty replay file in the work folder (LLVM fails on a missing one): with a
    /// fallback, every site is the fallback's.
    fn empty_replay(&self) -> Result<PathBuf, String> {
        let empty_replay = self.work.join("replay-empty.txt");
        check_llvm_args_path(self.compiler, &empty_replay)?;
        std::fs::write(&empty_replay, "")
            .map_err(|e| format!("cannot write {}: {e}", empty_replay.display()))?;
        Ok(empty_replay)
    }

    /// The stock build, its log and profile. It also leaves what site features come
    /// from: the costs of the calls it keeps (in its log), the IR before inlining (in
    /// `ir_dir`) and, run once under callgrind, a profile.
    fn stock(
        &self,
        ir_dir: &Path,
        home: &Path,
        cancel: &CancelToken,
        progress: &(dyn Fn(String) + Sync),
    ) -> Result<(String, Option<callgrind::Profile>), String> {
        let incremental = self.fresh()?;
        let flags = llvm_inline::stock_discovery_args(self.compiler, &incremental);
        let log = self
            .build
            .compile(flags, None, Some(ir_dir), "stock", progress)?;
        let profile = callgrind::version().and_then(|_| {
            let out = home.join("profile.callgrind");
            profile(self.spec, self.work, home, &out, "stock", cancel, progress)
        });
        Ok((log, profile))
    }
}

/// One callgrind run of the `what` build in `work` into `out`, for the sites' profile
/// features; `None` (and a word to `progress`) where the run fails: those features are then
/// null.
fn profile(
    spec: &BenchmarkSpec,
    work: &Path,
    home: &Path,
    out: &Path,
    what: &str,
    cancel: &CancelToken,
    progress: &(dyn Fn(String) + Sync),
) -> Option<callgrind::Profile> {
    let no_decisions = DecisionSet::default();
    let argv = expand_all(&spec.run, None, &work.join(DECISIONS_FILE));
    let timeout = seconds(spec.timeout_s, "timeout-s")
        .ok()?
        .checked_mul(measure::CALLGRIND_TIMEOUT_FACTOR)
        .unwrap_or(Duration::MAX);
    let launch = Launch {
        argv: callgrind::wrap_profile(&argv, out),
        cwd: work.to_path_buf(),
        env: step_env(spec, &no_decisions, home),
        cpus: Vec::new(),
        output: Output::Discard,
        timeout,
        sample_every: None,
        cgroups: Vec::new(),
        memory_limit: None,
        stderr_watch: &[],
    };
    let name = &spec.name;
    progress(format!(
        "{what} profile run of '{name}' under callgrind started"
    ));
    let failed = match launch::run(&launch, None, Some(cancel)) {
        Ok(f) if f.end == End::Exited(0) => match std::fs::read_to_string(out) {
            Ok(text) => return Some(callgrind::Profile::parse(&text)),
            Err(e) => format!("cannot read {}: {e}", out.display()),
        },
        Ok(f) => format!("{:?}: {}", f.end, f.stderr_tail.trim()),
        Err(e) => e,
    };
    progress(format!(
        "{what} profile run of '{name}' failed, its sites get no {what} profile features: {failed}"
    ));
    None
}
