//! The caller's optimised code around each row of the `effects` table: in the
//! build of the context's decisions (the start) and in the build with the flip,
//! from the code of the functions each step ran (`function_code`, read where
//! screening asked for each function's instructions).
//!
//! A flip changes the code of its footprint's functions only (the function its
//! call sits in, the functions that one is inlined into, the callee's copy), so
//! in a shared build each flip's caller holds that flip alone, and every
//! function no flip of a step touched holds the start's code: where the start's
//! own measurement did not read the code (an experiment prepared by an older
//! kiln), it is taken from such a step.

use std::collections::BTreeMap;

use kiln_protocol::message::FunctionCode;
use kiln_protocol::SiteId;

use crate::plan::attribution::{caller_of, source_name, Footprints};

/// Code summed by [`source_name`], the names site ids and footprints use (overloads and
/// one function's copies in several units count as one, as in the attribution).
fn by_source_name(code: &BTreeMap<String, FunctionCode>) -> BTreeMap<String, FunctionCode> {
    let mut out: BTreeMap<String, FunctionCode> = BTreeMap::new();
    for (name, f) in code {
        let sum = out.entry(source_name(name)).or_default();
        sum.instructions += f.instructions;
        sum.vector += f.vector;
        sum.calls += f.calls;
        sum.loops += f.loops;
    }
    out
}

/// One step's code by source name, for the callers of its flips.
pub(super) struct StepCode(BTreeMap<String, FunctionCode>);

impl StepCode {
    pub(super) fn new(code: &BTreeMap<String, FunctionCode>) -> StepCode {
        StepCode(by_source_name(code))
    }

    /// The code of `site`'s caller in this step's build; `None` where it did not run.
    pub(super) fn caller(&self, site: &SiteId) -> Option<FunctionCode> {
        self.0.get(&caller_of(site)?).copied()
    }
}

/// The start's code of each function by source name, as far as it is known.
pub(super) struct StartCode {
    functions: BTreeMap<String, FunctionCode>,
    /// Whether it is the start's own measurement's (then nothing is learnt from steps).
    measured: bool,
}

impl StartCode {
    /// The code the start's own measurement read, if it read any.
    pub(super) fn new(start: &BTreeMap<String, FunctionCode>) -> StartCode {
        StartCode {
            functions: by_source_name(start),
            measured: !start.is_empty(),
        }
    }

    /// Learns, from a step that flipped `flips` away from the start, the code of the
    /// functions none of them touched; nothing where a flip names no functions (a knob).
    pub(super) fn learn<'a>(
        &mut self,
        footprints: &Footprints,
        flips: impl IntoIterator<Item = &'a SiteId>,
        step: &StepCode,
    ) {
        if self.measured || step.0.is_empty() {
            return;
        }
        let mut touched = std::collections::BTreeSet::new();
        for site in flips {
            let Some(functions) = footprints.of(site) else {
                return;
            };
            touched.extend(functions);
        }
        for (name, code) in &step.0 {
            if !touched.contains(name) {
                self.functions.entry(name.clone()).or_insert(*code);
            }
        }
    }

    /// The start's code of `site`'s caller, where it is known.
    pub(super) fn caller(&self, site: &SiteId) -> Option<FunctionCode> {
        self.functions.get(&caller_of(site)?).copied()
    }
}

/// The effects table's cells of a caller's code: instructions, vector instructions, calls,
/// loops; null where unknown.
pub(super) fn counts(code: Option<FunctionCode>) -> [Option<u64>; 4] {
    [
        code.map(|c| c.instructions),
        code.map(|c| c.vector),
        code.map(|c| c.calls),
        code.map(|c| c.loops),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_protocol::{DecisionPoint, DecisionSet, DecisionValue};
    use std::collections::BTreeSet;

    fn code(instructions: u64) -> FunctionCode {
        FunctionCode {
            instructions,
            vector: 1,
            calls: 2,
            loops: 3,
        }
    }

    fn map(pairs: &[(&str, u64)]) -> BTreeMap<String, FunctionCode> {
        pairs
            .iter()
            .map(|(f, n)| (f.to_string(), code(*n)))
            .collect()
    }

    #[test]
    fn the_start_is_learnt_from_functions_no_flip_touched() {
        let flip = SiteId("leaf @ mid:3:1".into());
        let points = [DecisionPoint::inline_site(flip.clone())];
        let start = DecisionSet([(flip.clone(), DecisionValue::no_inline())].into());
        let footprints = Footprints::new(&points, &start, &BTreeSet::new());
        let mut known = StartCode::new(&BTreeMap::new());
        // mid holds the flip: its code is the flipped one, not the start's.
        let step = StepCode::new(&map(&[("mid", 50), ("other", 7), ("leaf", 9)]));
        known.learn(&footprints, [&flip], &step);
        assert_eq!(step.caller(&flip), Some(code(50)));
        assert_eq!(known.caller(&flip), None);
        assert_eq!(known.functions.get("other"), Some(&code(7)));
        // A step that flipped nothing of mid's shows its start.
        known.learn(&footprints, [], &StepCode::new(&map(&[("mid", 40)])));
        assert_eq!(known.caller(&flip), Some(code(40)));
        // The start's own measurement wins over anything learnt.
        let mut measured = StartCode::new(&map(&[("_Z3midv", 41)]));
        measured.learn(&footprints, [], &StepCode::new(&map(&[("mid", 40)])));
        assert_eq!(measured.caller(&flip), Some(code(41)));
    }
}
