//! Layout 6 keeps a step's instructions and code per function as they differ
//! from its experiment's reference profile (the baseline's), as layout 3 keeps
//! its decisions against its start: a screening step of gawk names 625
//! functions, and its flips change a few dozen of them (21 KB of JSON a step
//! before). The reference is stored once under its content hash
//! (`profile/<hash>`), so a step reads back the same whatever later runs make
//! of its experiment.

use std::collections::BTreeMap;
use std::sync::Arc;

use anyhow::Result;
use serde::{Deserialize, Serialize};

use kiln_protocol::message::FunctionCode;
use kiln_protocol::ContentHash;

use super::{ExperimentInfo, StepRecord};

/// What an experiment's reference build executed and held, function by function.
#[derive(Debug, Default, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct Profile {
    /// Instructions each function executed itself.
    #[serde(default)]
    pub instructions: BTreeMap<String, u64>,
    /// Each function's optimised code.
    #[serde(default)]
    pub code: BTreeMap<String, FunctionCode>,
}

/// A reference profile: its hash and itself.
pub(super) type ProfileBase = (ContentHash, Arc<Profile>);

/// What a step's header says of its profile: the reference it is written
/// against and the reference's functions the step lacks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct ProfileDelta {
    /// The reference's hash.
    pub of: ContentHash,
    /// Functions of the reference that executed nothing in the step.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gone: Vec<String>,
    /// Functions of the reference whose code the step does not hold.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub code_gone: Vec<String>,
}

impl Profile {
    /// `info`'s reference profile, with the bytes it is stored as; `None` where
    /// its baseline holds none.
    pub fn of(info: &ExperimentInfo) -> Result<Option<(ProfileBase, Vec<u8>)>> {
        let baseline = &info.baseline;
        if baseline.function_instructions.is_empty() && baseline.function_code.is_empty() {
            return Ok(None);
        }
        let profile = Profile {
            instructions: baseline.function_instructions.clone(),
            code: baseline.function_code.clone(),
        };
        let bytes = serde_json::to_vec(&profile)?;
        Ok(Some(((ContentHash::of(&bytes), Arc::new(profile)), bytes)))
    }
}

/// Writes `record`'s functions as they differ from `base`, and says how; leaves
/// a record that holds no function as it is.
pub(super) fn subtract(
    record: &mut StepRecord,
    (hash, base): &ProfileBase,
) -> Option<ProfileDelta> {
    let m = &mut record.result.measurement;
    if m.function_instructions.is_empty() && m.function_code.is_empty() {
        return None;
    }
    Some(ProfileDelta {
        of: *hash,
        gone: difference(&mut m.function_instructions, &base.instructions),
        code_gone: difference(&mut m.function_code, &base.code),
    })
}

/// `record`'s functions made whole again from `base` and what its header said.
pub(super) fn add(record: &mut StepRecord, base: &Profile, delta: ProfileDelta) {
    let m = &mut record.result.measurement;
    apply(
        &mut m.function_instructions,
        &base.instructions,
        &delta.gone,
    );
    apply(&mut m.function_code, &base.code, &delta.code_gone);
}

/// Leaves in `map` the entries whose value differs from `base`'s (or that
/// `base` lacks); returns the names of `base` that `map` lacked.
fn difference<V: PartialEq>(
    map: &mut BTreeMap<String, V>,
    base: &BTreeMap<String, V>,
) -> Vec<String> {
    let gone = base
        .keys()
        .filter(|name| !map.contains_key(*name))
        .cloned()
        .collect();
    map.retain(|name, value| base.get(name) != Some(value));
    gone
}

/// `map` (a difference) made whole: `base`'s entries, those `gone` left out,
/// under it.
fn apply<V: Clone>(map: &mut BTreeMap<String, V>, base: &BTreeMap<String, V>, gone: &[String]) {
    for (name, value) in base {
        if !map.contains_key(name) && gone.binary_search(name).is_err() {
            map.insert(name.clone(), value.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(entries: &[(&str, u64)]) -> BTreeMap<String, u64> {
        entries.iter().map(|(n, v)| (n.to_string(), *v)).collect()
    }

    #[test]
    fn functions_are_their_reference_with_their_difference_applied() {
        let base = map(&[("a", 10), ("b", 20), ("c", 30)]);
        let step = map(&[("a", 10), ("b", 21), ("d", 5)]);
        let mut written = step.clone();
        let gone = difference(&mut written, &base);
        assert_eq!(written, map(&[("b", 21), ("d", 5)]));
        assert_eq!(gone, ["c"]);
        apply(&mut written, &base, &gone);
        assert_eq!(written, step);
    }
}
