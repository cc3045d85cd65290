//! Search moves: proposals, temperature and acceptance.
//!
//! Everything here is a pure function of its inputs and the chain's RNG, so a
//! chain replays exactly from its stored state.

use std::collections::{BTreeMap, BTreeSet};

use rand::{Rng, RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use kiln_protocol::config::{Annealing, Proposals, Search};
use kiln_protocol::message::{Discovery, Race};
use kiln_protocol::{ContentHash, DecisionPoint, DecisionSet, DecisionValue, SiteFeatures, SiteId};

use crate::store::{Effect, Flip};

/// The movable decision points: those with more than one value (as [`crate::store::Coverage`] counts them).
pub fn movable(points: &[DecisionPoint]) -> Vec<&DecisionPoint> {
    points.iter().filter(|p| p.domain.len() > 1).collect()
}

/// An experiment's random start (`(baseline random)`, `(baseline (random (flips K)))`): every
/// movable point drawn uniformly, or the stock set with `flips` points moved, by a generator
/// of its own seeded from the experiment's seed, so that a resumed campaign draws it again.
pub fn random_start(
    stock: &DecisionSet,
    points: &[DecisionPoint],
    flips: Option<u32>,
    seed: u64,
) -> DecisionSet {
    // Apart from the chains' streams (chain_seed), which would otherwise repeat its draws.
    const START_STREAM: u64 = 0x5354_4152_5420_5345;
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ START_STREAM);
    match flips {
        None => uniform_set(stock, points, &mut rng),
        Some(k) => propose(stock, points, k, None, &mut rng),
    }
}

/// A proposal: `current` with `flips` distinct decision points moved to
/// another value of their domain. The points are drawn uniformly, or in
/// proportion to `weights` (one per movable point, in order) where given.
pub fn propose(
    current: &DecisionSet,
    points: &[DecisionPoint],
    flips: u32,
    weights: Option<&[f64]>,
    rng: &mut impl Rng,
) -> DecisionSet {
    let movable = movable(points);
    let k = (flips as usize).min(movable.len());
    let picked = match weights {
        // Uniform draws stay exactly those of earlier versions, so stored chains replay.
        None => rand::seq::index::sample(rng, movable.len(), k).into_vec(),
        Some(weights) => weighted_sample(weights, k, rng),
    };
    let mut next = current.clone();
    for index in picked {
        next.0.insert(
            movable[index].id.clone(),
            other_value(current, movable[index], rng),
        );
    }
    next
}

/// A decision set drawn uniformly over the whole space: every movable point
/// of `start` takes a uniformly drawn value of its domain (its own included).
pub fn uniform_set(
    start: &DecisionSet,
    points: &[DecisionPoint],
    rng: &mut impl Rng,
) -> DecisionSet {
    let mut next = start.clone();
    for point in movable(points) {
        let value = point.domain[rng.random_range(0..point.domain.len())].clone();
        next.0.insert(point.id.clone(), value);
    }
    next
}

/// Every one-flip neighbour of `current` (each movable point to each other
/// value, in the points' order) that is not in `tried`.
pub fn untried_flips(
    current: &DecisionSet,
    points: &[DecisionPoint],
    tried: &BTreeSet<Flip>,
) -> Vec<Flip> {
    movable(points)
        .into_iter()
        .flat_map(|point| {
            let now = current.get(&point.id);
            point
                .domain
                .iter()
                .filter(move |v| Some(*v) != now)
                .map(|value| Flip {
                    point: point.id.clone(),
                    value: value.clone(),
                })
        })
        .filter(|flip| !tried.contains(flip))
        .collect()
}

/// `current` with the one point `point` moved to another value of its domain.
pub fn flip_one(current: &DecisionSet, point: &DecisionPoint, rng: &mut impl Rng) -> DecisionSet {
    let mut next = current.clone();
    next.0
        .insert(point.id.clone(), other_value(current, point, rng));
    next
}

fn other_value(current: &DecisionSet, point: &DecisionPoint, rng: &mut impl Rng) -> DecisionValue {
    let now = current.get(&point.id);
    let others: Vec<_> = point.domain.iter().filter(|v| Some(*v) != now).collect();
    others[rng.random_range(0..others.len())].clone()
}

/// `k` distinct indices drawn without replacement, each in proportion to its weight.
fn weighted_sample(weights: &[f64], k: usize, rng: &mut impl Rng) -> Vec<usize> {
    let mut left: Vec<(usize, f64)> = weights.iter().copied().enumerate().collect();
    let mut picked = Vec::with_capacity(k);
    for _ in 0..k.min(left.len()) {
        let total: f64 = left.iter().map(|(_, w)| w).sum();
        let mut r = rng.random::<f64>() * total;
        // Rounding may leave `r` past the last weight: the last point that can be drawn takes it.
        let mut at = left
            .iter()
            .rposition(|(_, w)| *w > 0.0)
            .unwrap_or(left.len() - 1);
        for (i, (_, w)) in left.iter().enumerate() {
            if r < *w {
                at = i;
                break;
            }
            r -= w;
        }
        picked.push(left.remove(at).0);
    }
    picked
}

/// Share of the mean weight every point gets on top of its own: points with no
/// measured effect alone may still matter together with others, so they keep
/// being drawn (about a fifth of the draws when most have none).
const FLOOR: f64 = 0.25;

/// The least share of its weight a point keeps however harmful its measured
/// flip: effects change as other points move, so none is ruled out for good.
const ACCEPTANCE_FLOOR: f64 = 0.01;

/// Drawing weights of the movable points (in order) for a proposal from
/// `current` at `temperature`: how much a point matters (size of its measured
/// effect plus uncertainty, and a floor) times the chance Metropolis takes its
/// flip alone ([`acceptance`]). A point not measured counts as the mean
/// (unknown); a point whose flip failed gets the floor only.
pub fn weights(
    movable: &[&DecisionPoint],
    effects: &BTreeMap<SiteId, Effect>,
    current: &DecisionSet,
    temperature: f64,
) -> Vec<f64> {
    let raw: Vec<Option<f64>> = movable
        .iter()
        .map(|p| {
            effects.get(&p.id).map(|e| match e.change {
                Some(change) => change.abs() + e.uncertainty,
                None => 0.0,
            })
        })
        .collect();
    let known: Vec<f64> = raw.iter().flatten().copied().collect();
    let mean = known.iter().sum::<f64>() / known.len().max(1) as f64;
    if mean.is_nan() || mean <= 0.0 {
        return vec![1.0; movable.len()];
    }
    raw.iter()
        .zip(movable)
        .map(|(r, p)| {
            let relevance = r.unwrap_or(mean) + FLOOR * mean;
            relevance * acceptance(p, effects.get(&p.id), current, temperature)
        })
        .collect()
}

/// The chance Metropolis at `temperature` takes flipping `point` alone from
/// `current`, judged by its measured effect taken optimistically (less its
/// uncertainty), never below [`ACCEPTANCE_FLOOR`]. The effect says what
/// moving the point to its measured value did, so from a set that already
/// holds that value the flip is the move back, with the opposite sign (a
/// flip that helped and was taken is not proposed again and again). 1 where
/// the direction is unknown: no measured value, more than two values, no
/// temperature.
fn acceptance(
    point: &DecisionPoint,
    effect: Option<&Effect>,
    current: &DecisionSet,
    temperature: f64,
) -> f64 {
    let Some(Effect {
        change: Some(change),
        uncertainty,
        value: Some(value),
    }) = effect
    else {
        return 1.0;
    };
    if point.domain.len() != 2 || temperature <= 0.0 {
        return 1.0;
    }
    let expected = if current.get(&point.id) == Some(value) {
        -change
    } else {
        *change
    };
    (-(expected - uncertainty) / temperature)
        .exp()
        .clamp(ACCEPTANCE_FLOOR, 1.0)
}

/// A guided proposal: `current` with one point moved, drawn in proportion to
/// `weights` (one per movable point, in order), passing over a point whose
/// drawn flip leads to a set the chain has already `measured`: with an exact
/// objective such a step only repeats a known count (the move back to where
/// the chain just came from, above all). Only drawn flips are checked, a
/// hash or two per proposal even over thousands of points. Where every
/// point is passed over, the draw is from `weights` as they are.
pub fn guided_flip(
    current: &DecisionSet,
    points: &[DecisionPoint],
    weights: &[f64],
    measured: impl Fn(&ContentHash) -> bool,
    rng: &mut impl Rng,
) -> DecisionSet {
    let movable = movable(points);
    let mut left = weights.to_vec();
    while left.iter().any(|w| *w > 0.0) {
        let at = weighted_sample(&left, 1, rng)[0];
        let next = flip_one(current, movable[at], rng);
        if !measured(&next.hash()) {
            return next;
        }
        left[at] = 0.0;
    }
    propose(current, points, 1, Some(weights), rng)
}

/// Guided proposals rejected in a row after which the chain's one-point moves
/// count as stalled: every flip near it is worse alone, and the next
/// proposals move two points together ([`guided_pair`]) until one is taken.
pub const STALLED_AFTER: u32 = 6;

/// A proposal for a stalled chain: `current` with two points moved, where
/// neither alone helped. The first is drawn by `weights`; the second among
/// the sites related to it ([`related`]: the same callee, or a callee's own
/// calls, or the call into the function it sits in), else uniformly over the
/// others, since a point whose flip alone was harmful may help together with
/// another (the measured weights would keep it from being drawn). A pair
/// leading to a set already `measured` is drawn again, a few times.
pub fn guided_pair(
    current: &DecisionSet,
    points: &[DecisionPoint],
    weights: &[f64],
    measured: impl Fn(&ContentHash) -> bool,
    rng: &mut impl Rng,
) -> DecisionSet {
    let movable = movable(points);
    if movable.len() < 2 {
        return guided_flip(current, points, weights, measured, rng);
    }
    let mut next = current.clone();
    for _ in 0..PAIR_DRAWS {
        let first = weighted_sample(weights, 1, rng)[0];
        let near: Vec<usize> = (0..movable.len())
            .filter(|&i| i != first && related(&movable[first].id, &movable[i].id))
            .collect();
        let second = match near.is_empty() {
            false => near[rng.random_range(0..near.len())],
            true => {
                let other = rng.random_range(0..movable.len() - 1);
                other + usize::from(other >= first)
            }
        };
        next = current.clone();
        for at in [first, second] {
            next.0.insert(
                movable[at].id.clone(),
                other_value(current, movable[at], rng),
            );
        }
        if !measured(&next.hash()) {
            break;
        }
    }
    next
}

/// Draws of a stalled chain's pair before it takes one already measured.
const PAIR_DRAWS: usize = 8;

/// Whether two inlining sites interact by construction: calls of the same
/// callee, or one's callee holds the other's call (inlining one changes what
/// the other inlines). Knobs and other ids relate to nothing.
pub fn related(a: &SiteId, b: &SiteId) -> bool {
    match (call_of(a), call_of(b)) {
        (Some((callee_a, in_a)), Some((callee_b, in_b))) => {
            callee_a == callee_b || callee_a == in_b || callee_b == in_a
        }
        _ => false,
    }
}

/// `start` with every screened flip whose effect was an improvement.
pub fn improving_flips(start: &DecisionSet, effects: &BTreeMap<SiteId, Effect>) -> DecisionSet {
    let mut next = start.clone();
    for (point, effect) in effects {
        if let (Some(change), Some(value)) = (effect.change, &effect.value) {
            if change < 0.0 {
                next.0.insert(point.clone(), value.clone());
            }
        }
    }
    next
}

/// Acceptance of a typical uphill screened flip at guided annealing's first
/// temperature (Kirkpatrick's rule for a starting temperature).
const GUIDED_FIRST_ACCEPTANCE: f64 = 0.8;

/// The factor on annealing's temperatures after a guided screening: the
/// schedule scaled so that its first temperature accepts the median uphill
/// screened flip with probability [`GUIDED_FIRST_ACCEPTANCE`], never above
/// the configured one (1 without uphill flips or for other searches). An
/// objective whose flips move it by 0.1 % is then annealed on that scale,
/// not on the t-max meant for any program. The median, because a few flips
/// that wreck a hot loop (+20 %) say nothing of a typical move's size.
pub fn guided_scale(search: &Search, effects: &BTreeMap<SiteId, Effect>) -> f64 {
    let Search::SimulatedAnnealing(Annealing { t_max, .. }) = search else {
        return 1.0;
    };
    let uphill: Vec<f64> = effects
        .values()
        .filter_map(|e| e.change)
        .filter(|c| *c > 0.0)
        .collect();
    let Some(typical) = kiln_protocol::Summary::of(&uphill).map(|s| s.median) else {
        return 1.0;
    };
    let first = typical / (1.0 / GUIDED_FIRST_ACCEPTANCE).ln();
    (first / t_max).min(1.0)
}

/// The temperature of step `k` (zero for the searches without one).
pub fn temperature(search: &Search, k: u32) -> f64 {
    match search {
        Search::SimulatedAnnealing(a) => a.schedule.temperature(a.t_max, a.t_min, k, a.steps),
        Search::RandomWalk(_)
        | Search::RandomSearch(_)
        | Search::HillClimbing(_)
        | Search::Screening(_) => 0.0,
    }
}

/// Whether to move to a candidate: Metropolis on the objective relative to
/// the baseline for simulated annealing; always for a random walk; only when
/// strictly better for hill climbing; never for random search, whose sets
/// are all drawn from the start. A failed candidate (`None`) is never
/// accepted. Annealing and the walk draw one number from `rng` for every
/// measured candidate; the others draw none, so random search's stream does
/// not depend on any outcome.
pub fn accept(
    search: &Search,
    current: f64,
    candidate: Option<f64>,
    baseline: f64,
    temperature: f64,
    rng: &mut impl Rng,
) -> bool {
    let Some(candidate) = candidate else {
        return false;
    };
    match search {
        Search::RandomSearch(_) | Search::Screening(_) => false,
        Search::HillClimbing(_) => candidate < current,
        Search::RandomWalk(_) => {
            let _: f64 = rng.random();
            true
        }
        Search::SimulatedAnnealing(_) => {
            let u: f64 = rng.random();
            let delta = (candidate - current) / baseline;
            delta <= 0.0 || u < (-delta / temperature).exp()
        }
    }
}

/// How hot a site is: how often its call runs, the scale of what flipping it can change (a
/// call's overhead, and what inlining lets the optimiser do, are paid per execution). Its
/// calls in the build that inlines nothing; else (a discovery without that profile) the
/// calls through it where the stock build kept the call, or, for a call the stock build
/// inlined, how many times its caller's body ran (the caller's own instructions over its
/// size); `None` without a profile. Not the instructions the callee ran: that ranks `main`'s
/// one call of the whole program first, whose flip changes one call (the corpus screened such
/// roots, effects of 0, first). Not its caller's heat where the call has a count of its own:
/// libyaml's error calls, inlined into its hot scanner, took that heat and drew most of the
/// heat-weighted proposals.
fn heat(features: &SiteFeatures) -> Option<u64> {
    features
        .uninlined_calls
        .or(features.site_calls)
        .or_else(|| {
            let (cost, size) = (features.caller_self_cost?, features.caller_instructions?);
            (size > 0).then(|| cost / size)
        })
}

/// The callee of an inlining site `CALLEE @ F:LINE:COL[ @ ...]` and the
/// function its code runs in (the chain's outermost element); `None` for ids
/// of another shape (knobs).
pub(super) fn call_of(id: &SiteId) -> Option<(&str, &str)> {
    let (callee, _) = id.as_str().split_once(" @ ")?;
    Some((callee, chain_of(id).last()??))
}

/// The functions of an inlining site's chain (each `F:LINE:COL` after the callee), innermost
/// first; `None` for an element of another shape.
pub(super) fn chain_of(id: &SiteId) -> impl Iterator<Item = Option<&str>> {
    let links = id.as_str().split(" @ ").skip(1);
    links.map(|link| link.rsplitn(3, ':').nth(2))
}

/// Each site's heat ([`heat`]), or, where its profile has none, the heat of
/// the sites that call the function holding it: a function the stock build
/// inlined everywhere has no profile of its own, and its calls run as part
/// of its callers (bzip2's sort, inlined into `BZ2_blockSort`, ran 42 % of
/// the program's instructions and ranked among the coldest without this).
/// The hottest such caller counts, through any depth of inlining.
fn heats(
    movable: &[&DecisionPoint],
    features: &BTreeMap<SiteId, SiteFeatures>,
) -> Vec<Option<u64>> {
    let own: Vec<Option<u64>> = movable
        .iter()
        .map(|p| features.get(&p.id).and_then(heat))
        .collect();
    let calls: Vec<Option<(&str, &str)>> = movable.iter().map(|p| call_of(&p.id)).collect();
    let mut of_function: BTreeMap<&str, u64> = BTreeMap::new();
    let mut heats = own.clone();
    // Each round passes heat one level down the stock build's inlining; a
    // round that changes nothing ends it (and a recursion cannot loop).
    loop {
        for (call, heat) in calls.iter().zip(&heats) {
            if let (Some((callee, _)), Some(heat)) = (call, heat) {
                let known = of_function.entry(callee).or_default();
                *known = (*known).max(*heat);
            }
        }
        let mut changed = false;
        for (i, call) in calls.iter().enumerate() {
            if own[i].is_some() {
                continue;
            }
            let inherited = call.and_then(|(_, function)| of_function.get(function).copied());
            if inherited.is_some() && inherited != heats[i] {
                heats[i] = inherited;
                changed = true;
            }
        }
        if !changed {
            return heats;
        }
    }
}

/// The movable points, hottest first by [`heats`] (positions in `movable`;
/// ties and points without a profile keep discovery order, coldest last), or
/// `None` where no point has a profile (knobs, no valgrind on the worker).
pub fn hottest(
    movable: &[&DecisionPoint],
    features: &BTreeMap<SiteId, SiteFeatures>,
) -> Option<Vec<usize>> {
    let heats = heats(movable, features);
    if heats.iter().all(Option::is_none) {
        return None;
    }
    let mut order: Vec<usize> = (0..movable.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(heats[i]));
    Some(order)
}

/// How likely a flip of a site moves the program's count by more than 0.1 %, by the site's
/// heat ([`heats`]) as a share of the program's instructions (at least 1e-4, 10^-4.5, 1e-5,
/// 1e-7, less): the share of such flips around stock that did in kiln's dataset
/// (`policy/heat_moves.py` on `dataset/` of c68c7f2: 16,107 effects read apart over 31
/// programs, search.md's evaluation half left out). Hotness says that a flip matters, not
/// which way (results/policy.md); a draw needs only the first. Read with the heat of those
/// discoveries, which had no `uninlined_calls`: a call stock inlined was binned by its
/// caller's heat; no table was read again with today's heat.
const MOVED_BY_HEAT: [(f64, f64); 5] = [
    (1e-4, 0.44),
    (3.16e-5, 0.17),
    (1e-5, 0.065),
    (1e-7, 0.022),
    (0.0, 0.0078),
];

/// [`MOVED_BY_HEAT`] for a site without a profile of its own or its callers'.
const MOVED_WITHOUT_HEAT: f64 = 0.015;

/// How likely a flip of a site saves more than 0.1 % of the program's count, by its heat
/// (the bins of [`MOVED_BY_HEAT`]) and by what the stock build decided: (heat floor, a call
/// stock inlined, a call stock left). The same 16,107 flips (`policy/heat_moves.py
/// --by-direction`): a hot call stock left helped when inlined in half the flips, a hot
/// inlining taken away in one in seven; the sign goes with the direction.
const HELPED_BY_HEAT: [(f64, f64, f64); 5] = [
    (1e-4, 0.14, 0.50),
    (3.16e-5, 0.022, 0.38),
    (1e-5, 0.010, 0.057),
    (1e-7, 0.0011, 0.022),
    (0.0, 0.0002, 0.0026),
];

/// [`HELPED_BY_HEAT`] for a site without a profile: the share over both decisions (4,074
/// flips, all but 14 of them of calls stock inlined).
const HELPED_WITHOUT_HEAT: f64 = 0.0015;

/// The drawing weights of uniform's moves, drawn as `proposals` says, over the movable points of
/// `discovery` (in order): under `(proposals profile)`, how likely a flip of each moves the
/// program's count ([`MOVED_BY_HEAT`]); under `(proposals helping)`, how likely it saves
/// some ([`HELPED_BY_HEAT`]). `None` otherwise, and where no point has a profile (knobs, no
/// valgrind): every point alike.
pub fn draw_weights(proposals: Proposals, discovery: &Discovery) -> Option<Vec<f64>> {
    let movable = movable(&discovery.points);
    let shares = || heat_shares(&movable, &discovery.features);
    match proposals {
        Proposals::Uniform | Proposals::Guided => None,
        Proposals::Profile => Some(shares()?.into_iter().map(moved_weight).collect()),
        Proposals::Helping => {
            let inlined = movable
                .iter()
                .map(|p| discovery.baseline.get(&p.id) == Some(&DecisionValue::inline()));
            Some(
                shares()?
                    .into_iter()
                    .zip(inlined)
                    .map(helped_weight)
                    .collect(),
            )
        }
    }
}

/// Each movable point's heat ([`heats`]) as a share of the program's instructions (those of
/// the most inclusive caller profiled, `main`'s); `None` where no point has a profile.
fn heat_shares(
    movable: &[&DecisionPoint],
    features: &BTreeMap<SiteId, SiteFeatures>,
) -> Option<Vec<Option<f64>>> {
    let heats = heats(movable, features);
    let total = features
        .values()
        .filter_map(|f| f.caller_inclusive_cost)
        .max()?;
    if total == 0 || heats.iter().all(Option::is_none) {
        return None;
    }
    Some(
        heats
            .into_iter()
            .map(|h| h.map(|h| h as f64 / total as f64))
            .collect(),
    )
}

/// [`MOVED_BY_HEAT`]'s weight of a site whose heat is `share`.
fn moved_weight(share: Option<f64>) -> f64 {
    let Some(share) = share else {
        return MOVED_WITHOUT_HEAT;
    };
    let row = MOVED_BY_HEAT.iter().find(|(floor, _)| share >= *floor);
    row.map_or(0.0, |(_, moved)| *moved)
}

/// [`HELPED_BY_HEAT`]'s weight of a site whose heat is `share`, of a call stock inlined or not.
fn helped_weight((share, inlined): (Option<f64>, bool)) -> f64 {
    let Some(share) = share else {
        return HELPED_WITHOUT_HEAT;
    };
    let row = HELPED_BY_HEAT.iter().find(|(floor, ..)| share >= *floor);
    row.map_or(
        0.0,
        |&(_, stock_inlined, stock_left)| {
            if inlined {
                stock_inlined
            } else {
                stock_left
            }
        },
    )
}

/// The race of a candidate compared with an incumbent of objective
/// `incumbent` at `temperature`. Metropolis accepts a relative increase
/// Δ = (candidate − incumbent) / baseline with probability exp(−Δ/T), below
/// `p` once Δ > T·ln(1/p): the bound is the incumbent plus that many
/// baselines. Hill climbing takes only a better candidate, so its bound is
/// the incumbent itself (its temperature is zero). It is the incumbent's
/// estimate, not its interval, that the bound starts from, because the
/// verdict compares with that estimate; the candidate's uncertainty is the
/// worker's to weigh (the lower end of its interval must pass the bound).
/// `None` for a random walk, which accepts every candidate, for random
/// search, which never moves, and where the incumbent has no estimate.
pub fn race(
    search: &Search,
    incumbent: f64,
    baseline: f64,
    temperature: f64,
    p: f64,
) -> Option<Race> {
    match search {
        Search::RandomWalk(_) | Search::RandomSearch(_) | Search::Screening(_) => None,
        Search::SimulatedAnnealing(_) | Search::HillClimbing(_) => {
            incumbent.is_finite().then(|| Race {
                incumbent,
                bound: incumbent + temperature * (1.0 / p).ln() * baseline,
                p,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_protocol::config::{HillClimbing, RandomSearch, RandomWalk, Schedule};
    use kiln_protocol::{ContentHash, DecisionValue, SiteId};
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn points(n: usize) -> Vec<DecisionPoint> {
        (0..n)
            .map(|i| DecisionPoint::inline_site(SiteId(format!("s{i}"))))
            .collect()
    }

    fn all(points: &[DecisionPoint], v: DecisionValue) -> DecisionSet {
        DecisionSet(points.iter().map(|p| (p.id.clone(), v.clone())).collect())
    }

    #[test]
    fn sites_relate_through_their_callee_and_knobs_to_nothing() {
        let id = |s: &str| SiteId(s.to_string());
        // The same callee; a callee's own call; the call into the function a site sits in.
        assert!(related(&id("f @ main:3:5"), &id("f @ g:4:2")));
        assert!(related(&id("g @ main:2:1"), &id("f @ g:4:2")));
        assert!(related(&id("f @ g:4:2"), &id("g @ main:2:1")));
        assert!(!related(&id("h @ k:1:1 @ main:3:5"), &id("j @ main:4:5")));
        assert!(!related(&id("f @ main:3:5"), &id("h @ g:4:2")));
        assert!(!related(&id("x0"), &id("x1")));
    }

    #[test]
    fn a_stalled_pair_moves_two_points_and_prefers_a_related_one() {
        let pts: Vec<DecisionPoint> = ["f @ main:3:5", "f @ g:4:2", "h @ k:1:1", "j @ m:2:2"]
            .iter()
            .map(|s| DecisionPoint::inline_site(SiteId(s.to_string())))
            .collect();
        let base = all(&pts, DecisionValue::no_inline());
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        // Only the first point is drawn by weight: its partner is the other call of `f`.
        let weights = [1.0, 0.0, 0.0, 0.0];
        for _ in 0..20 {
            let next = guided_pair(&base, &pts, &weights, |_| false, &mut rng);
            let moved: Vec<String> = next
                .diff_from(&base)
                .0
                .keys()
                .map(|s| s.0.clone())
                .collect();
            assert_eq!(moved, ["f @ g:4:2", "f @ main:3:5"], "{moved:?}");
        }
    }

    #[test]
    fn proposals_change_exactly_k_points() {
        let pts = points(10);
        let base = all(&pts, DecisionValue::no_inline());
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        for _ in 0..50 {
            let next = propose(&base, &pts, 3, None, &mut rng);
            assert_eq!(next.diff_from(&base).len(), 3);
            next.check(&pts).unwrap();
        }
    }

    #[test]
    fn proposals_are_reproducible_from_the_seed() {
        let pts = points(10);
        let base = all(&pts, DecisionValue::inline());
        let a = propose(&base, &pts, 2, None, &mut ChaCha8Rng::seed_from_u64(7));
        let b = propose(&base, &pts, 2, None, &mut ChaCha8Rng::seed_from_u64(7));
        assert_eq!(a, b);
    }

    #[test]
    fn weighted_proposals_favour_points_with_large_effects() {
        let pts = points(10);
        let movable = movable(&pts);
        let base = all(&pts, DecisionValue::inline());
        // Point 3 has a large effect, point 7 an uncertain one, the rest none.
        let mut effects = BTreeMap::new();
        for p in &pts {
            effects.insert(
                p.id.clone(),
                Effect {
                    change: Some(0.0),
                    uncertainty: 0.0,
                    value: None,
                },
            );
        }
        effects.insert(
            pts[3].id.clone(),
            Effect {
                change: Some(-0.1),
                uncertainty: 0.0,
                value: None,
            },
        );
        effects.insert(
            pts[7].id.clone(),
            Effect {
                change: Some(0.0),
                uncertainty: 0.1,
                value: None,
            },
        );
        let w = weights(&movable, &effects, &base, 0.01);
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        let mut drawn = [0u32; 10];
        for _ in 0..1000 {
            let next = propose(&base, &pts, 1, Some(&w), &mut rng);
            let diff = next.diff_from(&base);
            assert_eq!(diff.len(), 1);
            let i = pts.iter().position(|p| diff.0.contains_key(&p.id)).unwrap();
            drawn[i] += 1;
        }
        assert!(drawn[3] > 300 && drawn[7] > 300, "{drawn:?}");
        // The floor keeps every other point in play.
        assert!(drawn.iter().all(|&d| d > 0), "{drawn:?}");
        // Several flips are distinct points.
        for _ in 0..50 {
            assert_eq!(
                propose(&base, &pts, 3, Some(&w), &mut rng)
                    .diff_from(&base)
                    .len(),
                3
            );
        }
    }

    #[test]
    fn no_measured_effect_weighs_every_point_alike() {
        let pts = points(4);
        let start = all(&pts, DecisionValue::inline());
        assert_eq!(
            weights(&movable(&pts), &BTreeMap::new(), &start, 0.01),
            vec![1.0; 4]
        );
    }

    #[test]
    fn weights_favour_flips_metropolis_would_take_from_where_the_chain_is() {
        let pts = points(3);
        let movable = movable(&pts);
        let start = all(&pts, DecisionValue::inline());
        // Each point's flip to no-inline measured: s0 helped by 0.02, s1 hurt by 0.02,
        // s2 hurt by 0.02 give or take 0.02.
        let effect = |change, uncertainty| Effect {
            change: Some(change),
            uncertainty,
            value: Some(DecisionValue::no_inline()),
        };
        let effects: BTreeMap<SiteId, Effect> = [
            (pts[0].id.clone(), effect(-0.02, 0.0)),
            (pts[1].id.clone(), effect(0.02, 0.0)),
            (pts[2].id.clone(), effect(0.02, 0.02)),
        ]
        .into();
        let t = 0.01;
        let w = weights(&movable, &effects, &start, t);
        // Same size: the helpful flip weighs fully, the harmful one by its Metropolis
        // chance e^(-2), the uncertain one (optimistically no worse) fully, plus its uncertainty.
        let relevance = |size: f64| size + FLOOR * (0.02 + 0.02 + 0.04) / 3.0;
        assert!((w[0] - relevance(0.02)).abs() < 1e-12, "{w:?}");
        assert!(
            (w[1] - relevance(0.02) * (-2.0f64).exp()).abs() < 1e-12,
            "{w:?}"
        );
        assert!((w[2] - relevance(0.04)).abs() < 1e-12, "{w:?}");
        // Once the helpful flip is taken, flipping s0 is the move back: it weighs as harmful.
        let mut moved = start.clone();
        moved
            .0
            .insert(pts[0].id.clone(), DecisionValue::no_inline());
        let back = weights(&movable, &effects, &moved, t);
        assert!((back[0] - w[1]).abs() < 1e-12, "{back:?}");
        // And a cold chain all but stops proposing it, never entirely.
        let cold = weights(&movable, &effects, &moved, 1e-6);
        assert_eq!(cold[0], relevance(0.02) * ACCEPTANCE_FLOOR);
    }

    #[test]
    fn guided_flips_pass_over_sets_already_measured_while_others_remain() {
        let pts = points(3);
        let start = all(&pts, DecisionValue::inline());
        let mut here = start.clone();
        here.0.insert(pts[1].id.clone(), DecisionValue::no_inline());
        // The chain came to `here` from `start`: flipping s1 again is the move back,
        // however heavily it weighs.
        let measured: BTreeSet<ContentHash> = [start.hash(), here.hash()].into();
        let weights = [1.0, 100.0, 1.0];
        let mut rng = ChaCha8Rng::seed_from_u64(4);
        let mut moved = BTreeSet::new();
        for _ in 0..200 {
            let next = guided_flip(&here, &pts, &weights, |h| measured.contains(h), &mut rng);
            let diff = next.diff_from(&here);
            assert_eq!(diff.len(), 1);
            moved.extend(diff.0.into_keys());
        }
        assert_eq!(moved, [pts[0].id.clone(), pts[2].id.clone()].into());
        // Every neighbour measured: the draws go on by the weights rather than stall.
        let mut everything = measured.clone();
        everything.extend(pts.iter().map(|p| flip_one(&here, p, &mut rng).hash()));
        let back = (0..50)
            .filter(|_| {
                let next = guided_flip(&here, &pts, &weights, |h| everything.contains(h), &mut rng);
                next == start
            })
            .count();
        assert!(back > 40, "{back}");
    }

    #[test]
    fn hill_climbing_takes_only_better_sets_and_random_search_never_moves() {
        let climb = Search::HillClimbing(HillClimbing { steps: 10, kick: 3 });
        let random = Search::RandomSearch(RandomSearch {
            steps: 10,
            flips: None,
        });
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        let before = rng.clone();
        assert!(accept(&climb, 100.0, Some(99.0), 100.0, 0.0, &mut rng));
        assert!(!accept(&climb, 100.0, Some(100.0), 100.0, 0.0, &mut rng));
        assert!(!accept(&climb, 100.0, Some(100.5), 100.0, 0.0, &mut rng));
        assert!(!accept(&climb, 100.0, None, 100.0, 0.0, &mut rng));
        assert!(!accept(&random, 100.0, Some(1.0), 100.0, 0.0, &mut rng));
        // Neither draws from the RNG: what they propose next does not depend on a result.
        assert_eq!(rng, before);
    }

    #[test]
    fn untried_flips_are_every_other_value_not_yet_tried() {
        let mut pts = points(3);
        pts.push(DecisionPoint {
            id: SiteId("tile".into()),
            domain: vec![
                DecisionValue::Int(8),
                DecisionValue::Int(16),
                DecisionValue::Int(32),
            ],
        });
        pts.push(DecisionPoint {
            id: SiteId("fixed".into()),
            domain: vec![DecisionValue::Int(1)],
        });
        let mut current = all(&pts[..3], DecisionValue::inline());
        current
            .0
            .insert(SiteId("tile".into()), DecisionValue::Int(16));
        current
            .0
            .insert(SiteId("fixed".into()), DecisionValue::Int(1));
        let every = untried_flips(&current, &pts, &BTreeSet::new());
        // One per binary point, two for the tile, none for the fixed point.
        assert_eq!(every.len(), 5);
        assert!(every
            .iter()
            .all(|f| current.get(&f.point) != Some(&f.value)));
        let tried: BTreeSet<Flip> = every[..4].iter().cloned().collect();
        assert_eq!(untried_flips(&current, &pts, &tried), every[4..].to_vec());
    }

    #[test]
    fn uniform_sets_cover_the_space_from_the_seed_alone() {
        let pts = points(4);
        let start = all(&pts, DecisionValue::no_inline());
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let sets: BTreeSet<ContentHash> = (0..400)
            .map(|_| uniform_set(&start, &pts, &mut rng).hash())
            .collect();
        assert_eq!(sets.len(), 16, "every one of the 16 sets is drawn");
        let again = uniform_set(&start, &pts, &mut ChaCha8Rng::seed_from_u64(9));
        assert_eq!(
            again,
            uniform_set(&start, &pts, &mut ChaCha8Rng::seed_from_u64(9))
        );
    }

    /// Annealing over 300 steps from 0.04 to 0.001, exponentially.
    fn annealing_300() -> Search {
        Search::SimulatedAnnealing(Annealing {
            steps: 300,
            t_max: 0.04,
            t_min: 0.001,
            flips: 3,
            schedule: Schedule::Exponential,
        })
    }

    #[test]
    fn guided_temperatures_scale_down_to_the_screened_uphill_flips() {
        let s = annealing_300();
        let effect = |change| Effect {
            change: Some(change),
            uncertainty: 0.0,
            value: None,
        };
        let effects: BTreeMap<SiteId, Effect> =
            [(-0.01, "a"), (0.001, "b"), (0.003, "c"), (0.0, "d")]
                .into_iter()
                .map(|(c, id)| (SiteId(id.into()), effect(c)))
                .collect();
        // Median uphill 0.002: the first temperature accepts it with probability 0.8.
        let first = 0.04 * guided_scale(&s, &effects);
        assert!(((-0.002 / first).exp() - 0.8).abs() < 1e-9, "{first}");
        // A few disastrous flips do not set the scale of a typical move.
        let mut with_disasters = effects.clone();
        for (id, change) in [("x", 0.3), ("y", 0.0015), ("z", 0.002)] {
            with_disasters.insert(SiteId(id.into()), effect(change));
        }
        assert_eq!(
            guided_scale(&s, &with_disasters),
            guided_scale(&s, &effects)
        );
        // Large effects keep the configured temperatures.
        let large = [(SiteId("a".into()), effect(0.5))].into();
        assert_eq!(guided_scale(&s, &large), 1.0);
        assert_eq!(guided_scale(&s, &BTreeMap::new()), 1.0);
    }

    /// A site's profile: the calls through it (where the stock build kept
    /// the call), and its caller's own instructions and size.
    fn profile(calls: Option<u64>, caller: Option<(u64, u64)>) -> SiteFeatures {
        SiteFeatures {
            site_calls: calls,
            caller_self_cost: caller.map(|(cost, _)| cost),
            caller_instructions: caller.map(|(_, size)| size),
            // A callee's inclusive cost is no measure of a site: main's one
            // call of the whole program would come first.
            callee_inclusive_cost: Some(1 << 40),
            ..Default::default()
        }
    }

    #[test]
    fn screening_ranks_sites_by_how_often_they_ran_and_needs_a_profile() {
        let points = points(5);
        let movable = movable(&points);
        let mut features = BTreeMap::new();
        assert_eq!(hottest(&movable, &features), None, "no profile, no ranking");
        features.insert(
            points[0].id.clone(),
            profile(Some(10), Some((1_000_000, 10))),
        );
        features.insert(points[1].id.clone(), profile(None, Some((50_000, 100))));
        features.insert(points[3].id.clone(), profile(Some(900), None));
        let error_call = SiteFeatures {
            uninlined_calls: Some(2),
            ..profile(None, Some((1_000_000, 10)))
        };
        features.insert(points[4].id.clone(), error_call);
        // s3 was called 900 times, s1 (inlined) ran as often as its caller's body, about
        // 500 times, s0 was called 10 times (its caller's figures are not its own); s4,
        // inlined into a hot caller, ran twice when nothing was inlined; s2 has no profile
        // and comes last.
        assert_eq!(hottest(&movable, &features), Some(vec![3, 1, 0, 4, 2]));
    }

    /// A discovery of `points` with `features`, stock inlining every call but `left`.
    fn discovery(
        points: &[DecisionPoint],
        features: BTreeMap<SiteId, SiteFeatures>,
        left: &[usize],
    ) -> Discovery {
        let mut baseline = all(points, DecisionValue::inline());
        for &i in left {
            baseline
                .0
                .insert(points[i].id.clone(), DecisionValue::no_inline());
        }
        Discovery {
            points: points.to_vec(),
            baseline,
            features,
            ..Discovery::default()
        }
    }

    /// A program of 10 M instructions (main's inclusive cost): s0 ran a million
    /// times (share 0.1), s1 fifty (5e-6), s2 never; s3 has no profile.
    fn four_heats(points: &[DecisionPoint]) -> BTreeMap<SiteId, SiteFeatures> {
        let main = SiteFeatures {
            caller_inclusive_cost: Some(10_000_000),
            ..profile(Some(1_000_000), None)
        };
        [
            (points[0].id.clone(), main),
            (points[1].id.clone(), profile(Some(50), None)),
            (points[2].id.clone(), profile(Some(0), None)),
        ]
        .into()
    }

    #[test]
    fn profile_proposals_draw_sites_by_how_often_a_flip_that_hot_moved_a_count() {
        let points = points(4);
        let without = discovery(&points, BTreeMap::new(), &[]);
        assert_eq!(
            draw_weights(Proposals::Profile, &without),
            None,
            "no profile: uniform"
        );
        let with = discovery(&points, four_heats(&points), &[]);
        let weights = draw_weights(Proposals::Profile, &with).unwrap();
        assert_eq!(weights, vec![0.44, 0.022, 0.0078, MOVED_WITHOUT_HEAT]);
        assert_eq!(draw_weights(Proposals::Uniform, &with), None);
        // Drawn in proportion: one-point proposals move the hot site 91 % of the time.
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let start = all(&points, DecisionValue::inline());
        let moved_hot = (0..1000)
            .filter(|_| {
                let next = propose(&start, &points, 1, Some(&weights), &mut rng);
                next.get(&points[0].id) != start.get(&points[0].id)
            })
            .count();
        assert!(
            (860..=950).contains(&moved_hot),
            "{moved_hot} of 1000 (0.91 expected)"
        );
    }

    #[test]
    fn helping_proposals_draw_a_hot_call_stock_left_before_a_hot_inlining() {
        let points = points(5);
        let mut features = four_heats(&points);
        // s4 ran as often as s0, but stock left it a call.
        features.insert(points[4].id.clone(), profile(Some(1_000_000), None));
        let weights =
            draw_weights(Proposals::Helping, &discovery(&points, features, &[4])).unwrap();
        assert_eq!(
            weights,
            vec![0.14, 0.0011, 0.0002, HELPED_WITHOUT_HEAT, 0.50]
        );
        let without = discovery(&points, BTreeMap::new(), &[4]);
        assert_eq!(
            draw_weights(Proposals::Helping, &without),
            None,
            "no profile: uniform"
        );
    }

    #[test]
    fn a_site_in_a_function_inlined_everywhere_is_as_hot_as_the_function_it_runs_in() {
        // bzip2's shape: mainSort is inlined into BZ2_blockSort, mainQSort3 into mainSort;
        // their sites have no profile of their own.
        let ids = [
            "cold @ other:1:1",
            "mmed3 @ mainQSort3:36:13",
            "mainQSort3 @ mainSort:146:19",
            "orphan @ nowhere:2:2",
            "mainSort @ BZ2_blockSort:37:7",
            "inner @ mainQSort3:40:5 @ elsewhere:3:3",
        ];
        let points: Vec<DecisionPoint> = ids
            .iter()
            .map(|id| DecisionPoint::inline_site(SiteId(id.to_string())))
            .collect();
        let movable = movable(&points);
        let mut features = BTreeMap::new();
        features.insert(points[0].id.clone(), profile(Some(10), None));
        features.insert(
            points[4].id.clone(),
            profile(None, Some((16_000_000, 1_000))),
        );
        // The sort's sites, two levels down, run in BZ2_blockSort: discovery order among
        // equals. A chain's code runs in its outermost function ('elsewhere': no profile),
        // so 'inner' and 'orphan' stay unranked, last.
        assert_eq!(hottest(&movable, &features), Some(vec![1, 2, 4, 0, 3, 5]));
        assert_eq!(call_of(&points[5].id), Some(("inner", "elsewhere")));
        assert_eq!(call_of(&SiteId("tile".into())), None);
    }

    #[test]
    fn exponential_schedule_matches_the_formula() {
        let s = annealing_300();
        assert!((temperature(&s, 0) - 0.04).abs() < 1e-12);
        assert!((temperature(&s, 300) - 0.001).abs() < 1e-12);
        let mid = 0.04 * (-(40f64).ln() * 0.5).exp();
        assert!((temperature(&s, 150) - mid).abs() < 1e-12);
    }

    /// Ten steps of annealing from T = 0.04 down to 0.001.
    fn annealing() -> Search {
        Search::SimulatedAnnealing(Annealing {
            steps: 10,
            t_max: 0.04,
            t_min: 0.001,
            flips: 1,
            schedule: Schedule::Exponential,
        })
    }

    #[test]
    fn a_candidate_at_the_race_bound_is_accepted_with_probability_p() {
        let s = annealing();
        // Incumbent 110 ms, baseline 100 ms, T = 0.04, p = 0.01: the bound is
        // 110 + 0.04 · ln 100 · 100 = 128.42 ms.
        let warm = race(&s, 110.0, 100.0, 0.04, 0.01).unwrap();
        assert_eq!(warm.incumbent, 110.0);
        assert!(
            (warm.bound - (110.0 + 4.0 * 100f64.ln())).abs() < 1e-9,
            "{warm:?}"
        );
        let delta = (warm.bound - 110.0) / 100.0;
        assert!(((-delta / 0.04).exp() - 0.01).abs() < 1e-12);
        // Metropolis itself agrees: at the bound it accepts about 1 % (200 ± 14 of 20 000).
        let mut rng = ChaCha8Rng::seed_from_u64(9);
        let accepted = (0..20_000)
            .filter(|_| accept(&s, 110.0, Some(warm.bound), 100.0, 0.04, &mut rng))
            .count();
        assert!((140..260).contains(&accepted), "{accepted}");
        // A colder chain races closer to the incumbent.
        assert!(race(&s, 110.0, 100.0, 0.001, 0.01).unwrap().bound < warm.bound);
        // A random walk accepts everything, and an incumbent without an estimate bounds nothing.
        let walk = Search::RandomWalk(RandomWalk {
            steps: 10,
            flips: 1,
        });
        assert_eq!(race(&walk, 110.0, 100.0, 0.04, 0.01), None);
        assert_eq!(race(&s, f64::NAN, 100.0, 0.04, 0.01), None);
    }

    #[test]
    fn metropolis_accepts_improvements_and_rejects_failures() {
        let s = annealing();
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        assert!(accept(&s, 100.0, Some(90.0), 100.0, 0.01, &mut rng));
        assert!(!accept(&s, 100.0, None, 100.0, 0.01, &mut rng));
        // A 50 % regression at T = 0.001 is essentially never accepted.
        assert!(!(0..100).any(|_| accept(&s, 100.0, Some(150.0), 100.0, 0.001, &mut rng)));
    }
}
