//! Per-site features at discovery: owns putting together each decision
//! point's [`SiteFeatures`] from what discovery's builds left behind: the
//! stock build's inline remarks (cost and threshold), the IR of the program
//! before inlining ([`ir`]), a callgrind profile of the stock build, and the
//! optimised code of the stock build and of the all-inlined one ([`crate::measure::code`]).
//!
//! For a nested site `C @ e1 @ ... @ en` (innermost element `e1` in function
//! `F1`, outermost `en` in function `Fn`) the caller is `Fn`, the function the
//! callee ends up in and the one its remark names; the loop depth adds up the
//! depths of the chain's calls, each in its own function; the constant
//! arguments are those of the innermost call, `C`'s call in `F1`, the call
//! that is copied along. The cost is the stock remark's for the site, else
//! the stock remark's for the innermost call, where the stock build never
//! made the nested call (it did not inline `F1` there). A call's count in the
//! profile is that of its source position (the innermost element's line),
//! summed over the functions that hold a copy of it: a call the stock build
//! kept inside a function it then inlined runs in the function's callers.
//! A profile of a build that inlines nothing counts every call, those the
//! stock build inlined too (`uninlined_calls`); a nested site's count is its
//! innermost call's, shared out over `F1`'s callers as their calls of it were.

pub mod ir;

use std::collections::{BTreeMap, HashMap};

use kiln_protocol::decision::{DecisionPoint, DecisionSet, DecisionValue, SiteId};
use kiln_protocol::SiteFeatures;

use crate::build::llvm_inline::{self, InlineCost, InlineRemark, MissedRemark, SiteElement};
use crate::measure::callgrind::Profile;
use crate::measure::code::Code;

/// What discovery found out about a program, to take features from.
pub struct Evidence<'a> {
    /// The remarks of the all-inlined discovery build (function lines).
    pub discovery: &'a [InlineRemark],
    /// The remarks of the stock build: inlined sites with their costs.
    pub stock: &'a [InlineRemark],
    /// The stock build's missed-inlining remarks.
    pub missed: &'a [MissedRemark],
    /// The program's IR before inlining, where it could be had (clang).
    pub ir: Option<&'a ir::Program>,
    /// A callgrind profile of the stock build, where valgrind ran it.
    pub profile: Option<&'a Profile>,
    /// A callgrind profile of the build that inlines nothing, where valgrind ran it.
    pub uninlined: Option<&'a Profile>,
    /// The stock build's optimised code, where it could be read.
    pub code: Option<&'a Code>,
    /// The all-inlined build's optimised code, where it could be read.
    pub inlined_code: Option<&'a Code>,
}

/// The features of each point (points that are no call site get none).
pub fn site_features(
    points: &[DecisionPoint],
    baseline: &DecisionSet,
    evidence: &Evidence<'_>,
) -> BTreeMap<SiteId, SiteFeatures> {
    let index = Index::new(evidence);
    points
        .iter()
        .filter_map(|p| {
            let stock_inline = baseline.get(&p.id) == Some(&DecisionValue::inline());
            Some((p.id.clone(), index.features(&p.id, stock_inline)?))
        })
        .collect()
}

/// A missed remark's key: callee, caller, line and column of the call.
type MissedKey<'a> = (&'a str, &'a str, u32, u32);

/// The evidence, indexed for look-ups by site.
struct Index<'a> {
    evidence: &'a Evidence<'a>,
    /// The cost of each site the stock build inlined (first remark).
    inlined: HashMap<&'a SiteId, InlineCost>,
    /// The cost of each call the stock build left in place (first remark).
    missed: HashMap<MissedKey<'a>, Option<InlineCost>>,
    /// The first line of each function, from remarks (the IR's wins).
    lines: HashMap<&'a str, u32>,
    /// The stock profile's calls.
    stock: Calls<'a>,
    /// The calls of the profile of the build that inlines nothing.
    uninlined: Option<Calls<'a>>,
    /// The name as compiled (the IR's, the profile's, a remark's caller) of each function a
    /// site id names by its source name (C++, Rust: `read_match_distances` for
    /// `_ZN10LZ_encoder20read_match_distancesEv`), from the remarks that name both.
    linkage: HashMap<&'a str, &'a str>,
}

impl<'a> Index<'a> {
    fn new(evidence: &'a Evidence<'a>) -> Self {
        let mut inlined = HashMap::new();
        for remark in evidence.stock.iter().filter(|r| r.inlined) {
            if let Some(cost) = remark.cost {
                inlined.entry(&remark.site).or_insert(cost);
            }
        }
        let mut missed = HashMap::new();
        for m in evidence.missed {
            let key = (m.callee.as_str(), m.caller.as_str(), m.line, m.column);
            missed.entry(key).or_insert(m.cost);
        }
        let mut lines = HashMap::new();
        let mut linkage = HashMap::new();
        for remark in evidence.discovery.iter().chain(evidence.stock) {
            let parts = llvm_inline::site_parts(&remark.site);
            if let Some(outer) = parts.as_ref().and_then(|(_, elements)| elements.last()) {
                linkage
                    .entry(outer.function)
                    .or_insert(remark.caller.as_str());
            }
            if let (Some(line), Some((_, elements))) = (remark.line, parts) {
                let inner = elements[0];
                // Checked: an id's offset can be any i64.
                let first = i64::from(line).checked_sub(inner.offset);
                if let Some(first) = first.and_then(|f| u32::try_from(f).ok()) {
                    lines.entry(inner.function).or_insert(first);
                }
            }
        }
        Index {
            evidence,
            inlined,
            missed,
            lines,
            stock: evidence.profile.map(Calls::new).unwrap_or_default(),
            uninlined: evidence.uninlined.map(Calls::new),
            linkage,
        }
    }

    /// The name as compiled of a function a site id names (itself where no remark told).
    fn compiled<'s>(&'s self, function: &'s str) -> &'s str {
        self.linkage.get(function).copied().unwrap_or(function)
    }

    /// The absolute line of a chain element.
    fn line_of(&self, element: SiteElement<'_>) -> Option<u32> {
        let ir_line = self
            .evidence
            .ir
            .and_then(|p| p.functions.get(self.compiled(element.function))?.line);
        let first = ir_line.or_else(|| self.lines.get(element.function).copied())?;
        u32::try_from(i64::from(first).checked_add(element.offset)?).ok()
    }

    fn features(&self, id: &SiteId, stock_inline: bool) -> Option<SiteFeatures> {
        let (callee, elements) = llvm_inline::site_parts(id)?;
        let inner = elements[0];
        let caller = self.compiled(elements.last()?.function);
        let line = self.line_of(inner);
        let missed = |holder: &str| {
            let line = line?;
            *self.missed.get(&(callee, holder, line, inner.column))?
        };
        let innermost = SiteId(format!("{callee} @ {inner}"));
        let cost = self
            .inlined
            .get(id)
            .copied()
            .or_else(|| missed(caller))
            .or_else(|| self.inlined.get(&innermost).copied())
            .or_else(|| missed(self.compiled(inner.function)));
        let mut f = SiteFeatures {
            chain_length: Some(elements.len() as u32),
            inline_cost: cost.map(|c| c.cost),
            inline_threshold: cost.map(|c| c.threshold),
            ..SiteFeatures::default()
        };
        self.ir_features(&mut f, (caller, callee), &elements, &innermost);
        self.profile_features(&mut f, (caller, callee), stock_inline, line);
        f.uninlined_calls = self.uninlined_calls(callee, &elements);
        self.code_features(&mut f, caller, callee);
        Some(f)
    }

    /// The features of the caller's and callee's IR before inlining, and of the site's calls
    /// (`elements`, innermost first, `innermost` the innermost call's id).
    fn ir_features(
        &self,
        f: &mut SiteFeatures,
        (caller, callee): (&str, &str),
        elements: &[SiteElement<'_>],
        innermost: &SiteId,
    ) {
        let Some(program) = self.evidence.ir else {
            return;
        };
        let caller_ir = program.functions.get(caller);
        let callee_ir = program.functions.get(callee);
        f.caller_instructions = caller_ir.map(|c| c.instructions);
        f.caller_blocks = caller_ir.map(|c| c.blocks);
        f.callee_instructions = callee_ir.map(|c| c.instructions);
        f.callee_blocks = callee_ir.map(|c| c.blocks);
        f.callee_recursive = callee_ir.map(|c| c.recursive);
        f.callee_external = callee_ir.map(|c| c.external);
        f.callee_call_sites = program.call_sites.get(callee).copied();
        // Each element is a call of the next inner function (of the callee
        // for the innermost), held by the element's function.
        let callees = std::iter::once(callee).chain(elements.iter().map(|e| e.function));
        let calls: Option<Vec<&ir::Call>> = elements
            .iter()
            .zip(callees)
            .map(|(e, called)| program.calls.get(&format!("{called} @ {e}")))
            .collect();
        f.loop_depth = calls
            .as_ref()
            .map(|calls| calls.iter().map(|c| c.loop_depth).sum());
        f.constant_arguments = program
            .calls
            .get(innermost.as_str())
            .map(|c| c.constant_arguments);
    }

    /// The features of the stock build's profile: the caller's and callee's costs, how often
    /// the caller was entered, and (a call the stock build kept, at `line`) how often it ran.
    fn profile_features(
        &self,
        f: &mut SiteFeatures,
        (caller, callee): (&str, &str),
        stock_inline: bool,
        line: Option<u32>,
    ) {
        let Some(profile) = self.evidence.profile else {
            return;
        };
        let caller_cost = profile.functions.get(caller);
        let callee_cost = profile.functions.get(callee);
        f.caller_self_cost = caller_cost.map(|c| c.self_ir);
        f.caller_inclusive_cost = caller_cost.map(|c| c.inclusive_ir);
        f.caller_calls = Some(self.stock.entries(caller));
        f.callee_self_cost = callee_cost.map(|c| c.self_ir);
        f.callee_inclusive_cost = callee_cost.map(|c| c.inclusive_ir);
        // The call keeps its line wherever its function was inlined.
        f.site_calls = match (stock_inline, line) {
            (false, Some(line)) => Some(self.stock.at(callee, line)),
            _ => None,
        };
    }

    /// How often the site's call ran in the build that inlines nothing: its innermost call's
    /// count, times the share of each inlined function's entries that came through the next
    /// call of the chain (a copy of `F` inlined into `G` runs `F`'s calls as often as `G`'s
    /// call of `F` runs, in proportion).
    fn uninlined_calls(&self, callee: &str, elements: &[SiteElement<'_>]) -> Option<u64> {
        let counts = self.uninlined.as_ref()?;
        let mut runs = counts.at(callee, self.line_of(elements[0])?) as f64;
        for pair in elements.windows(2) {
            let inlined = self.compiled(pair[0].function);
            let through = counts.at(inlined, self.line_of(pair[1])?) as f64;
            let entries = counts.entries(inlined) as f64;
            runs = if entries > 0.0 {
                runs * through / entries
            } else {
                0.0
            };
        }
        Some(runs.round() as u64)
    }

    /// The features of the caller's and callee's optimised code.
    fn code_features(&self, f: &mut SiteFeatures, caller: &str, callee: &str) {
        if let Some(code) = self.evidence.code {
            [
                f.caller_code_instructions,
                f.caller_code_vector,
                f.caller_code_calls,
                f.caller_code_loops,
            ] = code.counts(caller);
            [
                f.callee_code_instructions,
                f.callee_code_vector,
                f.callee_code_calls,
                f.callee_code_loops,
            ] = code.counts(callee);
            f.callee_code_kept = Some(code.functions.contains_key(callee));
        }
        if let Some(code) = self.evidence.inlined_code {
            [
                f.caller_inlined_code_instructions,
                f.caller_inlined_code_vector,
                f.caller_inlined_code_calls,
                f.caller_inlined_code_loops,
            ] = code.counts(caller);
        }
    }
}

/// A profile's calls, indexed for look-ups by site.
#[derive(Default)]
struct Calls<'a> {
    /// Calls by callee and line, whatever function held them.
    at: HashMap<(&'a str, u32), u64>,
    /// Calls of each function, from anywhere: its entries.
    entries: HashMap<&'a str, u64>,
}

impl<'a> Calls<'a> {
    fn new(profile: &'a Profile) -> Self {
        let mut calls = Calls::default();
        for (key, count) in &profile.calls {
            let sum = calls.at.entry((key.callee.as_str(), key.line)).or_default();
            *sum = sum.saturating_add(*count);
            let sum = calls.entries.entry(key.callee.as_str()).or_default();
            *sum = sum.saturating_add(*count);
        }
        calls
    }

    /// The calls of `callee` at `line` (0 where none ran).
    fn at(&self, callee: &str, line: u32) -> u64 {
        self.at.get(&(callee, line)).copied().unwrap_or(0)
    }

    /// The calls of `function` from anywhere (0 where none ran).
    fn entries(&self, function: &str) -> u64 {
        self.entries.get(function).copied().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The features of every site of `remarks` (stock and discovery's alike), from them and
    /// the profiles alone.
    fn features_of(
        remarks: &[InlineRemark],
        profile: Option<&Profile>,
        uninlined: Option<&Profile>,
    ) -> BTreeMap<SiteId, SiteFeatures> {
        let points: Vec<DecisionPoint> = remarks
            .iter()
            .map(|r| DecisionPoint::inline_site(r.site.clone()))
            .collect();
        let evidence = Evidence {
            discovery: remarks,
            stock: remarks,
            missed: &[],
            ir: None,
            profile,
            uninlined,
            code: None,
            inlined_code: None,
        };
        site_features(&points, &DecisionSet::default(), &evidence)
    }

    #[test]
    fn offsets_far_outside_the_lines_give_no_line() {
        // Offsets near i64's ends overflowed (found reading the code while
        // writing the remarks fuzz target).
        let remarks = llvm_inline::parse_remarks(
            "a.c:5:3: remark: 'f' inlined into 'g' with (cost=1, threshold=2) at callsite \
             g:-9223372036854775808:3; [-Rpass=inline]\n\
             x: 'h' inlined into 'g' at callsite g:9223372036854775807:1;\n\
             a.c:5:3: remark: 'k' inlined into 'g' with (cost=1, threshold=2) at callsite \
             g:0:3; [-Rpass=inline]\n",
        );
        assert_eq!(remarks.len(), 3);
        let features = features_of(&remarks, None, None);
        assert_eq!(features.len(), 3);
        assert_eq!(features[&remarks[0].site].inline_cost, Some(1));
    }

    /// In the build that inlines nothing, `f` (line 10) is entered 10 times, 4 of them from
    /// `g`'s line 21, and calls `c` 50 times at line 12: the copy of `f` inlined into `g` makes
    /// 4 of 10 of those calls, 20.
    #[test]
    fn a_nested_call_gets_its_share_of_the_uninlined_count() {
        let remarks = llvm_inline::parse_remarks(
            "a.c:12:3: remark: 'c' inlined into 'g' with (cost=1, threshold=2) at callsite \
             f:2:3 @ g:1:5; [-Rpass=inline]\n\
             a.c:21:5: remark: 'f' inlined into 'g' with (cost=1, threshold=2) at callsite \
             g:1:5; [-Rpass=inline]\n",
        );
        let uninlined = Profile::parse(
            "events: Ir\nfn=f\ncfn=c\ncalls=50 0\n12 100\nfn=g\ncfn=f\ncalls=4 0\n21 40\n\
             fn=h\ncfn=f\ncalls=6 0\n31 60\n",
        );
        let features = features_of(&remarks, None, Some(&uninlined));
        let count = |site: &SiteId| features[site].uninlined_calls;
        assert_eq!(count(&remarks[0].site), Some(20), "{:?}", remarks[0].site);
        assert_eq!(count(&remarks[1].site), Some(4), "{:?}", remarks[1].site);
    }

    /// A C++ site id names its caller by source name (`g`), the profile by the name as
    /// compiled (`_ZN1B1gEv`, the remark's caller): the caller's costs are read all the same.
    #[test]
    fn a_caller_named_by_its_source_name_has_its_profile_costs() {
        let remarks = llvm_inline::parse_remarks(
            "a.cc:5:3: remark: '_ZN1A1fEv' inlined into '_ZN1B1gEv' with (cost=1, \
             threshold=2) at callsite g:1:3; [-Rpass=inline]\n",
        );
        let profile = Profile::parse("events: Ir\nfn=_ZN1B1gEv\n3 40\nfn=_ZN1A1fEv\n7 2\n");
        let features = features_of(&remarks, Some(&profile), None);
        let f = &features[&remarks[0].site];
        assert_eq!(
            (f.caller_self_cost, f.callee_self_cost),
            (Some(40), Some(2))
        );
    }
}
