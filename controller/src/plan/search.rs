//! Search moves: proposals, temperature and acceptance.
//!
//! Everything here is a pure function of its inputs and the chain's RNG, so a
//! chain replays exactly from its stored state.

use rand::{Rng, RngExt};

use kiln_protocol::config::Search;
use kiln_protocol::{DecisionPoint, DecisionSet};

/// A proposal: `current` with `flips` distinct decision points moved to another value of their domain.
pub fn propose(
    current: &DecisionSet,
    points: &[DecisionPoint],
    flips: u32,
    rng: &mut impl Rng,
) -> DecisionSet {
    let movable: Vec<&DecisionPoint> = points.iter().filter(|p| p.domain.len() > 1).collect();
    let mut next = current.clone();
    let k = (flips as usize).min(movable.len());
    for index in rand::seq::index::sample(rng, movable.len(), k) {
        let point = movable[index];
        let now = current.get(&point.id);
        let others: Vec<_> = point.domain.iter().filter(|v| Some(*v) != now).collect();
        let pick = others[rng.random_range(0..others.len())].clone();
        next.0.insert(point.id.clone(), pick);
    }
    next
}

/// The temperature of step `k` (zero for a random walk, which accepts everything anyway).
pub fn temperature(search: &Search, k: u32) -> f64 {
    match search {
        Search::SimulatedAnnealing {
            steps,
            t_max,
            t_min,
            schedule,
            ..
        } => schedule.temperature(*t_max, *t_min, k, *steps),
        Search::RandomWalk { .. } => 0.0,
    }
}

/// Whether to move to a candidate: Metropolis on the objective relative to
/// the baseline for simulated annealing; always for a random walk. A failed
/// candidate (`None`) is never accepted. Draws one number from `rng` for
/// every measured candidate, so the RNG stream does not depend on the outcome.
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
    let u: f64 = rng.random();
    match search {
        Search::RandomWalk { .. } => true,
        Search::SimulatedAnnealing { .. } => {
            let delta = (candidate - current) / baseline;
            delta <= 0.0 || u < (-delta / temperature).exp()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_protocol::config::Schedule;
    use kiln_protocol::{DecisionValue, SiteId};
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
    fn proposals_change_exactly_k_points() {
        let pts = points(10);
        let base = all(&pts, DecisionValue::no_inline());
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        for _ in 0..50 {
            let next = propose(&base, &pts, 3, &mut rng);
            assert_eq!(next.diff_from(&base).len(), 3);
            next.check(&pts).unwrap();
        }
    }

    #[test]
    fn proposals_are_reproducible_from_the_seed() {
        let pts = points(10);
        let base = all(&pts, DecisionValue::inline());
        let a = propose(&base, &pts, 2, &mut ChaCha8Rng::seed_from_u64(7));
        let b = propose(&base, &pts, 2, &mut ChaCha8Rng::seed_from_u64(7));
        assert_eq!(a, b);
    }

    #[test]
    fn exponential_schedule_matches_the_formula() {
        let s = Search::SimulatedAnnealing {
            steps: 300,
            t_max: 0.04,
            t_min: 0.001,
            flips: 3,
            schedule: Schedule::Exponential,
        };
        assert!((temperature(&s, 0) - 0.04).abs() < 1e-12);
        assert!((temperature(&s, 300) - 0.001).abs() < 1e-12);
        let mid = 0.04 * (-(40f64).ln() * 0.5).exp();
        assert!((temperature(&s, 150) - mid).abs() < 1e-12);
    }

    #[test]
    fn metropolis_accepts_improvements_and_rejects_failures() {
        let s = Search::SimulatedAnnealing {
            steps: 10,
            t_max: 0.04,
            t_min: 0.001,
            flips: 1,
            schedule: Schedule::Exponential,
        };
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        assert!(accept(&s, 100.0, Some(90.0), 100.0, 0.01, &mut rng));
        assert!(!accept(&s, 100.0, None, 100.0, 0.01, &mut rng));
        // A 50 % regression at T = 0.001 is essentially never accepted.
        assert!(!(0..100).any(|_| accept(&s, 100.0, Some(150.0), 100.0, 0.001, &mut rng)));
    }
}
