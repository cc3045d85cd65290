//! The sites a discovery leaves out of the search, each with why: those whose stock or
//! other decision the compiler does not take (found by two probe builds), and those a
//! replay line cannot name.

use std::collections::BTreeMap;

use kiln_protocol::config::benchmark::ReplayFallback;
use kiln_protocol::decision::{DecisionSet, SiteId};
use kiln_protocol::message::{mismatch_site, Discovery};

use crate::build::{fresh_subdir, fresh_work, llvm_inline, INCREMENTAL_DIR, REPLAY_FILE};
use crate::discover::Builder;

impl Builder<'_> {
    /// Leaves out the sites whose stock or flipped decision the compiler does not take.
    ///
    /// Two probes, each a build under a replay file: the stock decisions (a
    /// site the compiler cannot replay as it decided it would fail every step,
    /// the baseline's first), then every decision flipped from stock (a site
    /// whose other decision the compiler will not take: a callee it never
    /// inlines, an attribute). Either way the site cannot be searched: it is
    /// left out, and the discovery says why.
    pub(super) fn leave_out_untaken(
        &self,
        discovery: &mut Discovery,
        progress: &(dyn Fn(String) + Sync),
    ) -> Result<(), String> {
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
            for (id, problem) in self.problems(decisions, what, progress)? {
                discovery
                    .fixed
                    .entry(id)
                    .or_insert(format!("{cause}: {problem}"));
            }
        }
        Ok(())
    }

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
            .filter_map(|line| mismatch_site(line))
            .map(|(id, problem)| (id, problem.to_string()))
            // Sites the fallback decided are no decision of this set.
            .filter(|(id, _)| decisions.0.contains_key(id))
            .collect())
    }
}

/// Leaves out the sites whose chain passes a call with no line (line 0): a replay
/// line that matches in every build cannot name them. Lua's `test_then_block @
/// ifstat:4294965622:0 @ statement:9:7` failed 4 of 150 steps as a mismatch.
pub(super) fn leave_out_lineless(discovery: &mut Discovery) {
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
}

/// Removes the sites left out from the points and the baseline of benchmark `name`'s
/// discovery, and says how many.
pub(super) fn remove_left_out(name: &str, discovery: &mut Discovery) {
    if discovery.fixed.is_empty() {
        return;
    }
    tracing::info!(
        "{}: {} of {} sites left out, as the compiler does not take one of their decisions",
        name,
        discovery.fixed.len(),
        discovery.points.len()
    );
    let fixed = &discovery.fixed;
    discovery.points.retain(|p| !fixed.contains_key(&p.id));
    discovery.baseline.0.retain(|id, _| !fixed.contains_key(id));
}
