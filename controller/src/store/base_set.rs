//! A base set: the decisions a step's are written against (layout 3 on). A
//! step keeps the points whose value differs from its base's; since layout 6
//! it names them by their number in the base (its sorted order) instead of
//! by name, where the base holds every one: a site's name is some thirty
//! bytes that do not compress (`DEREF @ setup_frame:47:4`), its number two or
//! three, and a screening step flips dozens.

use std::collections::{BTreeMap, HashMap};

use anyhow::{Context, Result};

use kiln_protocol::{DecisionSet, SiteId};

/// The decision sets of a stored record that its base rewrites.
#[derive(Default)]
pub(super) struct Sets<'a> {
    /// Whole sets (a step's decisions, a chain's current one): written as their difference.
    pub whole: Vec<&'a mut DecisionSet>,
    /// Differences already (a step's diff from its parent): written as they are.
    pub diffs: Vec<&'a mut DecisionSet>,
}

impl Sets<'_> {
    /// Puts back the sets as they were before [`BaseSet::write`] wrote them.
    pub fn put_back(self, originals: Vec<DecisionSet>) {
        for (set, original) in self.whole.into_iter().chain(self.diffs).zip(originals) {
            *set = original;
        }
    }
}

/// What [`BaseSet::write`] did.
pub(super) struct Written {
    /// Whether it named the points by number.
    pub by_number: bool,
    /// The sets as they were (whole sets, then diffs), for [`Sets::put_back`]: a chain's
    /// state is written in place, not copied with every set it measured.
    pub originals: Vec<DecisionSet>,
}

/// A base set with its points numbered.
#[derive(Debug)]
pub(super) struct BaseSet {
    /// The set.
    pub set: DecisionSet,
    /// Its points in order: a number's point.
    points: Vec<SiteId>,
    /// Each point's number.
    numbers: HashMap<SiteId, usize>,
}

impl BaseSet {
    /// `set`, its points numbered.
    pub fn new(set: DecisionSet) -> BaseSet {
        let points: Vec<SiteId> = set.0.keys().cloned().collect();
        let numbers = points.iter().cloned().zip(0..).collect();
        BaseSet {
            set,
            points,
            numbers,
        }
    }

    /// Whether `set` holds every point of the base.
    pub fn covered_by(&self, set: &DecisionSet) -> bool {
        self.set.0.keys().all(|point| set.0.contains_key(point))
    }

    /// The points of `set` whose value differs from the base's (or that it lacks).
    pub fn difference(&self, set: &DecisionSet) -> DecisionSet {
        DecisionSet(
            set.0
                .iter()
                .filter(|(point, value)| self.set.0.get(*point) != Some(value))
                .map(|(point, value)| (point.clone(), value.clone()))
                .collect(),
        )
    }

    /// The base with the points of `delta` set as it says.
    pub fn apply(&self, delta: DecisionSet) -> DecisionSet {
        let mut set = self.set.clone();
        set.0.extend(delta.0);
        set
    }

    /// `set` with its points named by their numbers; `None` where the base
    /// lacks one of them.
    pub fn numbered(&self, set: &DecisionSet) -> Option<DecisionSet> {
        self.numbered_keys(&set.0).map(DecisionSet)
    }

    /// `map` with its points named by their numbers; `None` where the base lacks one.
    pub fn numbered_keys<V: Clone>(
        &self,
        map: &BTreeMap<SiteId, V>,
    ) -> Option<BTreeMap<SiteId, V>> {
        map.iter()
            .map(|(p, v)| Some((self.number_of(p)?, v.clone())))
            .collect()
    }

    /// The number naming `point` in the base; `None` where the base lacks it.
    pub fn number_of(&self, point: &SiteId) -> Option<SiteId> {
        Some(SiteId(self.numbers.get(point)?.to_string()))
    }

    /// The point a number of [`BaseSet::number_of`] names.
    pub fn point_of(&self, number: &SiteId) -> Result<SiteId> {
        let n = number.0.parse::<usize>().ok();
        (n.and_then(|n| self.points.get(n).cloned()))
            .with_context(|| format!("its base set has no point numbered {:?}", number.0))
    }

    /// Writes `sets` against the base: each whole set as its difference, and every set by
    /// number where the base holds all of their points. `None` (the sets left as they are)
    /// where a whole set lacks a point of the base.
    pub fn write(&self, mut sets: Sets<'_>) -> Option<Written> {
        if !sets.whole.iter().all(|set| self.covered_by(set)) {
            return None;
        }
        let mut originals = Vec::with_capacity(sets.whole.len() + sets.diffs.len());
        for set in sets.whole.iter_mut() {
            let original = std::mem::take(*set);
            **set = self.difference(&original);
            originals.push(original);
        }
        originals.extend(sets.diffs.iter().map(|diff| (**diff).clone()));
        let all = || sets.whole.iter().chain(&sets.diffs);
        let numbered = all()
            .map(|set| self.numbered(set))
            .collect::<Option<Vec<_>>>();
        let by_number = numbered.is_some();
        for (set, numbered) in sets
            .whole
            .into_iter()
            .chain(sets.diffs)
            .zip(numbered.into_iter().flatten())
        {
            *set = numbered;
        }
        Some(Written {
            by_number,
            originals,
        })
    }

    /// `sets` as [`BaseSet::write`] wrote them (`by_number` as it returned), read back.
    pub fn read(&self, sets: Sets<'_>, by_number: bool) -> Result<()> {
        let named = |set: &mut DecisionSet| -> Result<DecisionSet> {
            let set = std::mem::take(set);
            if by_number {
                self.named(set)
            } else {
                Ok(set)
            }
        };
        for set in sets.diffs {
            *set = named(set)?;
        }
        for set in sets.whole {
            *set = self.apply(named(set)?);
        }
        Ok(())
    }

    /// `set`, its points named by their numbers, named again.
    pub fn named(&self, set: DecisionSet) -> Result<DecisionSet> {
        self.named_keys(set.0).map(DecisionSet)
    }

    /// `map`, its points named by their numbers, named again.
    pub fn named_keys<V>(&self, map: BTreeMap<SiteId, V>) -> Result<BTreeMap<SiteId, V>> {
        map.into_iter()
            .map(|(number, value)| Ok((self.point_of(&number)?, value)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_protocol::DecisionValue;

    fn set(points: &[(&str, i64)]) -> DecisionSet {
        DecisionSet(
            points
                .iter()
                .map(|(p, v)| (SiteId(p.to_string()), DecisionValue::Int(*v)))
                .collect(),
        )
    }

    #[test]
    fn a_set_is_its_base_with_its_difference_applied() {
        let base = BaseSet::new(set(&[("a", 1), ("b", 0), ("c", 1)]));
        let step = set(&[("a", 1), ("b", 1), ("c", 1), ("d", 0)]);
        assert!(base.covered_by(&step));
        let delta = base.difference(&step);
        assert_eq!(delta, set(&[("b", 1), ("d", 0)]));
        assert_eq!(base.apply(delta), step);
        // A set without a point of the base cannot be written against it.
        assert!(!base.covered_by(&set(&[("a", 1)])));
    }

    #[test]
    fn sets_written_against_the_base_read_back_as_they_were() {
        let base = BaseSet::new(set(&[("a", 1), ("b", 0), ("c", 1)]));
        let (whole, diff) = (set(&[("a", 0), ("b", 0), ("c", 1)]), set(&[("a", 0)]));
        let (mut w, mut d) = (whole.clone(), diff.clone());
        fn sets<'a>(whole: &'a mut DecisionSet, diff: &'a mut DecisionSet) -> Sets<'a> {
            Sets {
                whole: vec![whole],
                diffs: vec![diff],
            }
        }
        let written = base.write(sets(&mut w, &mut d)).unwrap();
        assert!(written.by_number);
        assert_eq!((&w, &d), (&set(&[("0", 0)]), &set(&[("0", 0)])));
        assert_eq!(written.originals, [whole.clone(), diff.clone()]);
        base.read(sets(&mut w, &mut d), true).unwrap();
        assert_eq!((&w, &d), (&whole, &diff));
        // Written in place, and put back.
        base.write(sets(&mut w, &mut d)).unwrap();
        sets(&mut w, &mut d).put_back(written.originals);
        assert_eq!((&w, &d), (&whole, &diff));
        // A point the base lacks: the difference by name.
        let (mut w, mut d) = (set(&[("a", 1), ("b", 0), ("c", 1), ("e", 1)]), diff.clone());
        assert!(!base.write(sets(&mut w, &mut d)).unwrap().by_number);
        assert_eq!(w, set(&[("e", 1)]));
        // A whole set without a point of the base: left whole.
        let (mut w, mut d) = (set(&[("a", 1)]), diff);
        assert!(base.write(sets(&mut w, &mut d)).is_none());
        assert_eq!(w, set(&[("a", 1)]));
    }

    #[test]
    fn points_of_the_base_are_written_by_number_and_read_by_name() {
        let base = BaseSet::new(set(&[("a", 1), ("b", 0), ("c", 1)]));
        let delta = set(&[("b", 1), ("c", 0)]);
        let numbered = base.numbered(&delta).unwrap();
        assert_eq!(numbered, set(&[("1", 1), ("2", 0)]));
        assert_eq!(base.named(numbered).unwrap(), delta);
        // A point the base lacks has no number: the set is written by name.
        assert_eq!(base.numbered(&set(&[("d", 0)])), None);
        let wrong = base.named(set(&[("3", 0)])).unwrap_err();
        assert!(
            format!("{wrong}").contains("no point numbered \"3\""),
            "{wrong}"
        );
    }
}
