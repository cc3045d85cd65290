//! Screening's shared builds: several flips measured in one build, each flip's
//! effect read from the instructions of the functions it touches.
//!
//! Flipping an inlining site changes the code of the function the call sits in
//! (the site chain's outermost function), and of every function that code is
//! inlined into in turn (the inliner works bottom-up: a function's body, its
//! own decisions applied, is what its callers inline), and how often its callee
//! runs out of line; callgrind counts the instructions each function executes
//! itself.
//! Flips whose touched functions do not overlap can share a build: each one's
//! effect is the change of its own functions' counts from the start's. What the
//! other functions changed by (the residual) is what no flip claims; where it is
//! more than [`SEPARABLE`] of the start's count, the flips did not act on their
//! own functions alone, and each is measured again, alone.

use std::collections::{BTreeMap, BTreeSet};

use kiln_protocol::{DecisionPoint, DecisionSet, DecisionValue, SiteId};

use super::search::{call_of, chain_of};

/// The residual, relative to the start's count, above which a shared build's
/// estimates are not trusted (0.01 %: the few instructions of the loader's
/// relocations move with the binary, a whole function's do not).
pub const SEPARABLE: f64 = 1e-4;

/// A function's source name, as the caller part of a site id spells it: no
/// scope, parameters or template arguments. Names as compiled (callgrind's,
/// a site's callee) are demangled (Itanium C++, Rust); a C name is itself.
/// Functions of one source name count as one (overloads, methods of several
/// classes): footprints grow, never miss a function.
pub fn source_name(name: &str) -> String {
    let demangled = match rustc_demangle::try_demangle(name) {
        Ok(rust) => format!("{rust:#}"),
        // Only a mangled name: a plain one would read as a builtin type (`b`: bool).
        Err(_) if name.starts_with("_Z") => cpp_demangle::Symbol::new(name.as_bytes())
            .ok()
            .and_then(|symbol| symbol.demangle().ok())
            .unwrap_or_else(|| name.to_string()),
        Err(_) => name.to_string(),
    };
    let plain = without_brackets(before_parameters(&demangled));
    // The last scope's component, after a return type's space (`void f<int>(int)`).
    let unscoped = plain.rsplit("::").next().unwrap_or(&plain);
    unscoped.split_whitespace().last().unwrap_or("").to_string()
}

/// The source name of the function a site's call sits in (the outermost of its chain);
/// `None` for a site of another shape (a knob).
pub fn caller_of(site: &SiteId) -> Option<String> {
    call_of(site).map(|(_, function)| source_name(function))
}

/// `name` up to its parameter list: the first `(` outside template arguments.
fn before_parameters(name: &str) -> &str {
    let mut depth = 0usize;
    for (i, c) in name.char_indices() {
        match c {
            '<' => depth += 1,
            '>' => depth = depth.saturating_sub(1),
            '(' if depth == 0 && i > 0 => return &name[..i],
            _ => {}
        }
    }
    name
}

/// `text` without what `<>` and `[]` enclose (template arguments, array bounds).
fn without_brackets(text: &str) -> String {
    let mut depth = 0usize;
    let mut out = String::new();
    for c in text.chars() {
        match c {
            '<' | '[' => depth += 1,
            '>' | ']' => depth = depth.saturating_sub(1),
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

/// Where each function's code runs under a set of decisions: in itself, and in
/// every function it is inlined into, by a decision or by an attribute that
/// forces it, through any depth of inlining; by [`source_name`].
pub struct Footprints {
    hosts: BTreeMap<String, BTreeSet<String>>,
}

impl Footprints {
    /// The hosts of every function of `points` under the decisions `start`, and of the
    /// calls an attribute `forced` inline (discovery's [`Discovery::forced`]).
    ///
    /// [`Discovery::forced`]: kiln_protocol::message::Discovery::forced
    pub fn new(
        points: &[DecisionPoint],
        start: &DecisionSet,
        forced: &BTreeSet<SiteId>,
    ) -> Footprints {
        let decided = points
            .iter()
            .filter(|p| start.get(&p.id).is_some_and(DecisionValue::is_inline))
            .map(|p| &p.id);
        let inlined: Vec<(String, String)> = decided
            .chain(forced)
            .filter_map(call_of)
            .map(|(callee, function)| (source_name(callee), source_name(function)))
            .collect();
        let mut hosts: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (callee, function) in &inlined {
            hosts
                .entry(callee.clone())
                .or_default()
                .insert(function.clone());
        }
        // Each round passes hosts one level up the inlining; a round that adds none ends it
        // (a recursion cannot loop: sets only grow).
        loop {
            let mut grown = false;
            for (callee, function) in &inlined {
                let above: Vec<String> =
                    hosts.get(function).into_iter().flatten().cloned().collect();
                let mine = hosts.entry(callee.clone()).or_default();
                for host in above {
                    grown |= mine.insert(host);
                }
            }
            if !grown {
                return Footprints { hosts };
            }
        }
    }

    /// The functions a flip of `site` changes: its callee, the function its
    /// call's code sits in and every function that one's code runs in;
    /// `None` for a site of another shape (a knob).
    pub fn of(&self, site: &SiteId) -> Option<BTreeSet<String>> {
        let (callee, function) = call_of(site)?;
        let function = source_name(function);
        let mut touched: BTreeSet<String> = BTreeSet::new();
        touched.extend(self.hosts.get(&function).into_iter().flatten().cloned());
        touched.insert(source_name(callee));
        touched.insert(function);
        Some(touched)
    }
}

/// The flips of a build a decision mismatch points at: those whose footprint meets the
/// functions of a site it `named` (the site's callee, every function its call passes through,
/// and where those run). A named flip is one; so is a flip that changed how a function is
/// optimised where a named site of the start, nested in it, was then not taken (bzip2's
/// `default_bzfree @ BZ2_bzCompressInit:34:28 @ BZ2_bzWriteOpen:35:10`, in a random context).
pub fn suspects<'a>(
    named: impl IntoIterator<Item = &'a SiteId>,
    flips: &[SiteId],
    footprints: &Footprints,
) -> BTreeSet<SiteId> {
    let mut functions: BTreeSet<String> = BTreeSet::new();
    for site in named {
        functions.extend(footprints.of(site).into_iter().flatten());
        functions.extend(chain_of(site).flatten().map(source_name));
    }
    let meets = |flip: &SiteId| {
        footprints
            .of(flip)
            .is_some_and(|f| !f.is_disjoint(&functions))
    };
    flips.iter().filter(|f| meets(f)).cloned().collect()
}

/// Counts per function summed by [`source_name`].
fn by_source_name(counts: &BTreeMap<String, u64>) -> BTreeMap<String, i64> {
    let mut out: BTreeMap<String, i64> = BTreeMap::new();
    for (name, n) in counts {
        *out.entry(source_name(name)).or_default() += *n as i64;
    }
    out
}

/// What a shared build measured of its flips.
#[derive(Debug, Clone, PartialEq)]
pub struct Attribution {
    /// Each flip's change of the instruction count (step − start), from its own functions.
    pub changes: BTreeMap<SiteId, i64>,
    /// The change of the functions no flip touches.
    pub residual: i64,
}

impl Attribution {
    /// Whether the residual is small enough, against the start's count `start`, to trust the
    /// changes.
    pub fn separable(&self, start: f64) -> bool {
        (self.residual.unsigned_abs() as f64) <= SEPARABLE * start
    }
}

/// The changes of `flips` from a build whose functions counted `step`, against
/// the start's `start`; `None` where a flip names no functions, two flips'
/// footprints overlap (no change is one flip's alone: a build grouped by other
/// footprints, such as an older kiln's) or either count is missing.
pub fn attribute<'a>(
    flips: impl IntoIterator<Item = &'a SiteId>,
    footprints: &Footprints,
    start: &BTreeMap<String, u64>,
    step: &BTreeMap<String, u64>,
) -> Option<Attribution> {
    if start.is_empty() || step.is_empty() {
        return None;
    }
    let (start, step) = (by_source_name(start), by_source_name(step));
    let delta = |f: &String| -> i64 {
        let count = |m: &BTreeMap<String, i64>| m.get(f).copied().unwrap_or(0);
        count(&step) - count(&start)
    };
    let mut changes = BTreeMap::new();
    let mut claimed: BTreeSet<String> = BTreeSet::new();
    for site in flips {
        let mut change = 0;
        for f in footprints.of(site)? {
            change += delta(&f);
            if !claimed.insert(f) {
                return None;
            }
        }
        changes.insert(site.clone(), change);
    }
    let names: BTreeSet<&String> = start.keys().chain(step.keys()).collect();
    let whole: i64 = names.into_iter().map(delta).sum();
    let residual = whole - changes.values().sum::<i64>();
    Some(Attribution { changes, residual })
}

/// The first `most` groups of the points of `order`, each of at least `least` and at most
/// `per_step` points whose footprints do not overlap: each group takes, in order, every point
/// left that overlaps none of its own, until it is full. A group that would hold fewer than
/// `least` leaves its first point out (its footprint overlaps nearly every other's: a function
/// inlined everywhere), and the rest are grouped again, so one such point does not end a
/// screening whose other points still fill builds. Points that name no functions go alone.
/// Fewer groups where the points run out.
pub fn groups<'a>(
    order: &[&'a DecisionPoint],
    footprints: &Footprints,
    per_step: usize,
    least: usize,
    most: usize,
) -> Vec<Vec<&'a DecisionPoint>> {
    let (touched, functions) = numbered_footprints(order, footprints);
    let mut used = vec![false; functions];
    let mut left: Vec<usize> = (0..order.len()).collect();
    let mut groups = Vec::new();
    while !left.is_empty() && groups.len() < most {
        let group = greedy_group(&touched, &left, per_step, &mut used);
        if group.len() >= least {
            left.retain(|i| group.binary_search(i).is_err());
            groups.push(group.iter().map(|&i| order[i]).collect());
        } else {
            left.retain(|&i| i != group[0]);
        }
    }
    groups
}

/// Each point's footprint once, its functions numbered, and how many functions there are: a
/// group's scan looks at every point left, and a screening of thousands of points forms
/// thousands of groups.
fn numbered_footprints(
    order: &[&DecisionPoint],
    footprints: &Footprints,
) -> (Vec<Option<Vec<usize>>>, usize) {
    let mut numbers: BTreeMap<String, usize> = BTreeMap::new();
    let mut number = |f: String| {
        let next = numbers.len();
        *numbers.entry(f).or_insert(next)
    };
    let touched = order
        .iter()
        .map(|p| Some(footprints.of(&p.id)?.into_iter().map(&mut number).collect()))
        .collect();
    (touched, numbers.len())
}

/// The positions (ascending) of the group that the points `left` of `touched` form, in
/// order: every point that overlaps none of the group's, up to `per_step`. `used` (a flag a
/// function, all clear) is left clear.
fn greedy_group(
    touched: &[Option<Vec<usize>>],
    left: &[usize],
    per_step: usize,
    used: &mut [bool],
) -> Vec<usize> {
    let mut group = Vec::new();
    for &i in left {
        let fits = match &touched[i] {
            Some(fs) => fs.iter().all(|&f| !used[f]),
            None => group.is_empty(),
        };
        if fits {
            group.push(i);
            match &touched[i] {
                Some(fs) => fs.iter().for_each(|&f| used[f] = true),
                None => break,
            }
            if group.len() >= per_step {
                break;
            }
        }
    }
    for &i in &group {
        touched[i].iter().flatten().for_each(|&f| used[f] = false);
    }
    group
}

#[cfg(test)]
mod tests {
    use super::*;

    fn site(id: &str) -> SiteId {
        SiteId(id.to_string())
    }

    fn counts(pairs: &[(&str, u64)]) -> BTreeMap<String, u64> {
        pairs.iter().map(|(f, n)| (f.to_string(), *n)).collect()
    }

    /// Points of `ids`, and the decisions that inline those marked `+`.
    fn program(ids: &[&str]) -> (Vec<DecisionPoint>, DecisionSet) {
        let points: Vec<DecisionPoint> = ids
            .iter()
            .map(|id| DecisionPoint::inline_site(site(id.trim_start_matches('+'))))
            .collect();
        let values = ids.iter().zip(&points).map(|(id, p)| {
            let value = match id.starts_with('+') {
                true => DecisionValue::inline(),
                false => DecisionValue::no_inline(),
            };
            (p.id.clone(), value)
        });
        (points.clone(), DecisionSet(values.collect()))
    }

    #[test]
    fn a_flip_touches_its_callee_and_every_function_its_code_is_inlined_into() {
        // b is inlined into a, a into main: a call in b runs in b, a and main.
        let (points, start) = program(&["+b @ a:1:1", "+a @ main:1:1", "g @ b:2:1", "h @ x:1:1"]);
        let footprints = Footprints::new(&points, &start, &BTreeSet::new());
        let of = |id: &str| -> Vec<String> {
            let s = site(id);
            footprints
                .of(&s)
                .unwrap()
                .iter()
                .map(|f| f.to_string())
                .collect()
        };
        assert_eq!(of("g @ b:2:1"), ["a", "b", "g", "main"]);
        assert_eq!(of("h @ x:1:1"), ["h", "x"]);
        assert!(footprints.of(&site("knob")).is_none());
        // x always inlined into y (no decision moves it), y into main by a decision: h's
        // code runs in y and main too.
        let (points, start) = program(&["h @ x:1:1", "+y @ main:3:1"]);
        let forced = BTreeSet::from([site("x @ y:2:1")]);
        let footprints = Footprints::new(&points, &start, &forced);
        let of: Vec<String> = footprints
            .of(&site("h @ x:1:1"))
            .unwrap()
            .into_iter()
            .collect();
        assert_eq!(of, ["h", "main", "x", "y"]);
    }

    #[test]
    fn names_as_compiled_read_as_the_source_names_of_site_ids() {
        let cases = [
            (
                "_ZN10LZ_encoder20read_match_distancesEv",
                "read_match_distances",
            ),
            ("_ZNK15LZ_encoder_base13price_literalEhh", "price_literal"),
            ("_ZNSt6vectorIiSaIiEE9push_backERKi", "push_back"),
            ("_Z3maxIiET_S0_S0_", "max"),
            (
                "_ZN4core3ptr13drop_in_place17h0123456789abcdefE",
                "drop_in_place",
            ),
            ("deflate_slow", "deflate_slow"),
            ("drop_in_place<alloc::vec::Vec<u8>>", "drop_in_place"),
        ];
        for (name, source) in cases {
            assert_eq!(source_name(name), source, "{name}");
        }
    }

    #[test]
    fn each_flip_takes_the_change_of_its_own_functions_and_the_rest_is_residual() {
        let (points, start_set) = program(&["f @ main:3:4", "g @ c:1:2"]);
        let footprints = Footprints::new(&points, &start_set, &BTreeSet::new());
        let start = counts(&[("main", 1000), ("f", 100), ("c", 50), ("g", 10), ("ld", 7)]);
        let step = counts(&[("main", 990), ("f", 130), ("c", 40), ("ld", 9)]);
        let flips = [site("f @ main:3:4"), site("g @ c:1:2")];
        let a = attribute(&flips, &footprints, &start, &step).unwrap();
        assert_eq!(a.changes[&flips[0]], -10 + 30);
        assert_eq!(a.changes[&flips[1]], -10 - 10);
        assert_eq!(a.residual, 2);
        assert!(a.separable(20_000.0));
        assert!(!a.separable(19_000.0));
        assert_eq!(attribute(&[site("k")], &footprints, &start, &step), None);
        let overlapping = [site("f @ main:3:4"), site("h @ main:9:1")];
        assert_eq!(attribute(&overlapping, &footprints, &start, &step), None);
    }

    fn ids(groups: Vec<Vec<&DecisionPoint>>) -> Vec<Vec<String>> {
        groups
            .iter()
            .map(|g| g.iter().map(|p| p.id.as_str().to_string()).collect())
            .collect()
    }

    #[test]
    fn a_point_whose_group_would_hold_too_few_is_left_out_and_the_rest_still_fill_builds() {
        // k is inlined into main, so m's call in k runs in k, m and main: it overlaps each of
        // the three after it, which overlap none of each other.
        let (points, start) = program(&[
            "m @ k:1:1",
            "m @ p:1:1",
            "s @ main:2:1",
            "k @ q:1:1",
            "+k @ main:9:1",
        ]);
        let footprints = Footprints::new(&points, &start, &BTreeSet::new());
        let order: Vec<&DecisionPoint> = points[..4].iter().collect();
        let rest = ["m @ p:1:1", "s @ main:2:1", "k @ q:1:1"];
        assert_eq!(
            ids(groups(&order, &footprints, 8, 1, usize::MAX)),
            [vec!["m @ k:1:1"], rest.to_vec()]
        );
        assert_eq!(ids(groups(&order, &footprints, 8, 2, usize::MAX)), [rest]);
        assert!(groups(&order, &footprints, 8, 4, usize::MAX).is_empty());
    }

    #[test]
    fn a_mismatch_points_at_the_flips_that_meet_the_functions_of_the_sites_it_names() {
        // `free @ init:3:1 @ open:5:2` (init inlined into open) is a site of the start; the
        // flip in open and the one of free's own calls meet it, the one in x does not.
        let (points, start) = program(&[
            "+init @ open:5:2",
            "free @ init:3:1 @ open:5:2",
            "g @ open:9:1",
            "h @ x:1:1",
            "k @ free:2:1",
        ]);
        let footprints = Footprints::new(&points, &start, &BTreeSet::new());
        let flips = [
            site("g @ open:9:1"),
            site("h @ x:1:1"),
            site("k @ free:2:1"),
        ];
        let named = [site("free @ init:3:1 @ open:5:2")];
        let ids: Vec<SiteId> = suspects(&named, &flips, &footprints).into_iter().collect();
        assert_eq!(ids, [site("g @ open:9:1"), site("k @ free:2:1")]);
        // A named flip points at itself.
        let named = [site("h @ x:1:1")];
        let ids: Vec<SiteId> = suspects(&named, &flips, &footprints).into_iter().collect();
        assert_eq!(ids, [site("h @ x:1:1")]);
        assert!(suspects(&[], &flips, &footprints).is_empty());
    }

    #[test]
    fn groups_never_share_a_function_and_keep_the_order() {
        let (points, start) = program(&[
            "f @ main:1:1",
            "g @ main:2:1", // shares main with the first
            "h @ a:1:1",
            "f @ b:1:1", // shares f with the first
            "x @ y:1:1",
        ]);
        let footprints = Footprints::new(&points, &start, &BTreeSet::new());
        let order: Vec<&DecisionPoint> = points.iter().collect();
        assert_eq!(
            ids(groups(&order, &footprints, 8, 1, usize::MAX)),
            vec![
                vec!["f @ main:1:1", "h @ a:1:1", "x @ y:1:1"],
                vec!["g @ main:2:1", "f @ b:1:1"],
            ]
        );
        assert_eq!(
            ids(groups(&order, &footprints, 2, 1, 1))[0],
            vec!["f @ main:1:1", "h @ a:1:1"]
        );
    }
}
