//! Discovery: a benchmark's decision points, its stock decisions, and what
//! is known of each point ([`features`]): two builds with inline remarks (all
//! inlined, then stock), the stock decisions replayed as a check, the IR
//! before inlining and a callgrind profile of the stock build.
//!
//! `discover/<id>/` under the rundir is a discovery's scratch folder (its work
//! folder, the stock build's IR under `ir/`, its callgrind profile), removed
//! when it ends. It may import [`crate::build`], [`crate::measure`] and below.

pub mod features;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use kiln_protocol::config::benchmark::{BenchmarkKind, BenchmarkSpec, Compiler, ReplayFallback};
use kiln_protocol::decision::{ContentHash, DecisionSet, SiteId};
use kiln_protocol::message::{missing_bundle, Discovery, StepId};

use crate::build::env::{expand_all, seconds, step_env, DECISIONS_FILE};
use crate::build::wrap;
use crate::build::{
    check_llvm_args_path, fresh_subdir, fresh_work, llvm_inline, Build, INCREMENTAL_DIR,
    REPLAY_FILE,
};
use crate::files::fresh_dir;
use crate::launch::{self, CancelToken, End, Launch, Output};
use crate::measure::{self, callgrind};
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
        replay: Default::default(),
    };
    let ir_dir = dir.join("ir");
    fresh_dir(&ws.rundir, &ir_dir)?;
    let mut remarks = Vec::new();
    let mut fallbacks = Vec::new();
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
        remarks.push(llvm_inline::parse_remarks_in(&log, &work));
        if what == "discovery" {
            fallbacks = wrap::fallbacks(&log);
        }
        stock_log = log;
    }
    let mut discovery = llvm_inline::discovery_from_remarks(&remarks[0], &remarks[1]);
    discovery.fallbacks = fallbacks;
    let program = features::ir::Program::read_dir(&ir_dir)?;
    let missed = llvm_inline::parse_missed_remarks(&llvm_inline::from_work(&stock_log, &work));
    let evidence = features::Evidence {
        discovery: &remarks[0],
        stock: &remarks[1],
        missed: &missed,
        ir: (!program.is_empty()).then_some(&program),
        profile: profile.as_ref(),
    };

    // Two probes, each a build under a replay file: the stock decisions (a
    // site the compiler cannot replay as it decided it would fail every step,
    // the baseline's first), then every decision flipped from stock (a site
    // whose other decision the compiler will not take: a callee it never
    // inlines, an attribute). Either way the site cannot be searched: it is
    // left out, and the discovery says why.
    let flipped = llvm_inline::flipped(&discovery.baseline);
    let probes = [
        (
            &discovery.baseline,
            "replay check",
            "the compiler does not replay its own decision",
        ),
        (
            &flipped,
            "flip probe",
            "the compiler does not take the other decision",
        ),
    ];
    for (decisions, what, cause) in probes {
        let problems = {
            let probe = Probe {
                compiler,
                spec,
                bundle_dir,
                work: &work,
                ws,
                build: &build,
            };
            probe.problems(decisions, what, progress)?
        };
        for (id, problem) in problems {
            discovery
                .fixed
                .entry(id)
                .or_insert(format!("{cause}: {problem}"));
        }
    }
    // A chain through a call with no line (line 0) cannot be named by a replay
    // line that matches in every build: Lua's `test_then_block @
    // ifstat:4294965622:0 @ statement:9:7` failed 4 of 150 steps as a mismatch.
    for p in &discovery.points {
        let no_line = llvm_inline::site_parts(&p.id)
            .is_some_and(|(_, chain)| chain.iter().any(|e| e.has_no_line()));
        if no_line {
            discovery.fixed.entry(p.id.clone()).or_insert_with(|| {
                "its chain passes a call with no source line (line 0: code the compiler merged \
                 or made), which a replay line does not name reliably"
                    .to_string()
            });
        }
    }
    if !discovery.fixed.is_empty() {
        tracing::info!(
            "{}: {} of {} sites left out, as the compiler does not take one of their decisions",
            spec.name,
            discovery.fixed.len(),
            discovery.points.len()
        );
        let fixed = &discovery.fixed;
        discovery.points.retain(|p| !fixed.contains_key(&p.id));
        discovery.baseline.0.retain(|id, _| !fixed.contains_key(id));
    }
    discovery.features = features::site_features(&discovery.points, &discovery.baseline, &evidence);
    Ok(discovery)
}

/// A build of the discovery's sources under a replay file, to learn which
/// decisions the compiler takes.
struct Probe<'a> {
    compiler: Compiler,
    spec: &'a BenchmarkSpec,
    bundle_dir: &'a Path,
    work: &'a Path,
    ws: &'a Workspace,
    build: &'a Build<'a>,
}

impl Probe<'_> {
    /// The sites of `decisions` that a build under them does not realise,
    /// each with the problem [`llvm_inline::verify`] names.
    fn problems(
        &self,
        decisions: &DecisionSet,
        what: &str,
        progress: &(dyn Fn(String) + Sync),
    ) -> Result<BTreeMap<SiteId, String>, String> {
        let no_decisions = DecisionSet::default();
        fresh_work(
            &self.ws.rundir,
            self.bundle_dir,
            self.work,
            self.spec,
            &no_decisions,
        )?;
        let replay = self.work.join(REPLAY_FILE);
        let text = llvm_inline::replay_file_text(decisions);
        std::fs::write(&replay, llvm_inline::in_work(&text, self.work))
            .map_err(|e| format!("cannot write {}: {e}", replay.display()))?;
        let incremental = fresh_subdir(&self.ws.rundir, self.work, INCREMENTAL_DIR)?;
        let flags = llvm_inline::replay_build_args(
            self.compiler,
            &replay,
            ReplayFallback::NeverInline,
            &incremental,
        );
        let log = self.build.compile(flags, None, None, what, progress)?;
        let remarks = llvm_inline::parse_remarks_in(&log, self.work);
        Ok(llvm_inline::verify(decisions, &remarks)
            .mismatched
            .iter()
            // Each problem names its site first, quoted; sites the fallback
            // decided are no decision of this set.
            .filter_map(|p| p.strip_prefix('\'')?.split_once("': "))
            .map(|(id, problem)| (SiteId::from(id), problem.to_string()))
            .filter(|(id, _)| decisions.0.contains_key(id))
            .collect())
    }
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
        stderr_watch: &[],
    };
    progress(format!(
        "profile run of '{}' under callgrind started",
        spec.name
    ));
    let failed = match launch::run(&launch, None, Some(cancel)) {
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
