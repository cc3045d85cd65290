//! One search chain: proposing, deciding in step order, and its state.
//!
//! A chain keeps `parallel` proposals in flight. Proposals are generated only
//! right after a decision (or at the start), and decisions happen strictly in
//! step order, so the sequence of RNG draws — hence every proposal and
//! verdict — depends only on the measurements, never on when replies arrive.

use std::collections::{BTreeMap, BTreeSet};

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use kiln_protocol::config::{Experiment, HillClimbing, Proposals, RandomSearch, Screening, Search};
use kiln_protocol::message::Race;
use kiln_protocol::{
    ContentHash, DecisionPoint, DecisionSet, Metric, SiteFeatures, SiteId, Summary,
};

use super::step::{self, Repeatability};
use super::{attribution, search};
use crate::store::{
    now_ms, ChainState, Decision, Effect, Flip, Incumbent, ProgressPoint, Proposal, StepKind,
    StepRecord,
};

/// Everything a chain needs besides its state.
pub struct ChainContext<'a> {
    /// The experiment.
    pub experiment: &'a Experiment,
    /// The benchmark's decision points.
    pub points: &'a [DecisionPoint],
    /// The calls an attribute forced inline (where a flip's code also runs).
    pub forced: &'a BTreeSet<SiteId>,
    /// What discovery recorded of each point (its profile ranks screening).
    pub features: &'a BTreeMap<SiteId, SiteFeatures>,
    /// The baseline objective (for relative energy).
    pub baseline_objective: f64,
    /// The instructions each function of the start executed itself (screening in shared
    /// builds reads its flips against them; empty otherwise).
    pub start_functions: &'a BTreeMap<String, u64>,
    /// Points screening does not flip: measured before, in another store.
    pub measured_before: &'a BTreeSet<SiteId>,
    /// Decisions changed per uniform proposal (a guided one moves one).
    pub flips: u32,
    /// The movable points' drawing weights for uniform's moves (`(proposals profile)` or
    /// `(proposals helping)`); `None`: every point alike.
    pub draws: Option<&'a [f64]>,
    /// Whether a repeated decision set can measure differently.
    pub repeatability: Repeatability,
    /// The objective's metric (for a screened flip's interval).
    pub metric: Metric,
    /// The acceptance probability below which proposals are raced out
    /// ([`super::step::race_probability`]); `None`: they are not.
    pub race: Option<f64>,
}

impl ChainContext<'_> {
    fn search(&self) -> &Search {
        &self.experiment.search
    }

    fn steps(&self) -> u32 {
        self.experiment.search.steps()
    }

    fn is_remeasure(&self, step: u32) -> bool {
        let every = self.experiment.remeasure_every;
        every > 0 && (step + 1).is_multiple_of(every) && step >= self.screen_steps()
    }

    /// Steps of the screening phase: a screening search's every step; for
    /// guided proposals, one per movable point, at most a quarter of the
    /// budget (the rest is for the search it guides).
    fn screen_steps(&self) -> u32 {
        if let Search::Screening(Screening { steps, .. }) = self.search() {
            // No point to flip: nothing to screen (the chain proposes nothing).
            return match self.screenable().is_empty() {
                true => 0,
                false => *steps,
            };
        }
        match self.experiment.proposals {
            Proposals::Uniform | Proposals::Profile | Proposals::Helping => 0,
            Proposals::Guided => (search::movable(self.points).len() as u32).min(self.steps() / 4),
        }
    }

    /// The points screening may flip: the movable ones not measured before.
    fn screenable(&self) -> Vec<&DecisionPoint> {
        let mut movable = search::movable(self.points);
        movable.retain(|p| !self.measured_before.contains(&p.id));
        movable
    }

    /// The point screening step `step` flips: every movable point when the
    /// budget allows, else the hottest by the stock build's profile, else
    /// (no profile: knobs, no valgrind) points evenly spaced over them. A
    /// screening search with more steps than points starts over.
    fn screened_point(&self, step: u32) -> &DecisionPoint {
        let movable = self.screenable();
        let screened = (self.screen_steps() as usize).min(movable.len());
        let step = step % screened as u32;
        if screened == movable.len() {
            return movable[step as usize];
        }
        match search::hottest(&movable, self.features) {
            Some(order) => movable[order[step as usize]],
            None => movable[step as usize * movable.len() / screened],
        }
    }
}

impl ChainContext<'_> {
    /// The next step of screening in shared builds: the next flip waiting to
    /// be measured alone, else the next group of points that share no
    /// function, hottest first (again from the first once every group is
    /// proposed); `Err` with why the screening ends where its `(min-flips K)`
    /// says so.
    fn shared_screen(&self, state: &mut ChainState) -> Result<DecisionSet, String> {
        let start = &state.current.decisions;
        while !state.alone.is_empty() {
            let site = state.alone.remove(0);
            if let Some(point) = self.points.iter().find(|p| p.id == site) {
                return Ok(search::flip_one(start, point, &mut state.rng));
            }
        }
        while !state.regroup.is_empty() {
            let group = state.regroup.remove(0);
            let points = self.points.iter().filter(|p| group.contains(&p.id));
            let mut set = start.clone();
            for point in points {
                set = search::flip_one(&set, point, &mut state.rng);
            }
            if set != *start {
                return Ok(set);
            }
        }
        let group = self.next_group(state)?;
        state.shared += 1;
        let mut set = start.clone();
        for point in group {
            set = search::flip_one(&set, point, &mut state.rng);
        }
        Ok(set)
    }

    /// The chain's next group of points that share no function, hottest first; `Err` where
    /// `(min-flips K)` ends the screening: the points left fill no group of K (those whose
    /// group would hold fewer are left out, [`attribution::groups`]), or every group has been
    /// proposed (with K = 1 they are proposed again from the first).
    fn next_group(&self, state: &ChainState) -> Result<Vec<&DecisionPoint>, String> {
        let Search::Screening(Screening {
            per_step,
            min_flips,
            ..
        }) = self.search()
        else {
            unreachable!("only screening shares builds")
        };
        let movable = self.screenable();
        let order: Vec<&DecisionPoint> = match search::hottest(&movable, self.features) {
            Some(order) => order.iter().map(|&i| movable[i]).collect(),
            None => movable,
        };
        let footprints =
            attribution::Footprints::new(self.points, &state.current.decisions, self.forced);
        let next = state.shared as usize;
        let (least, most) = (*min_flips as usize, next + 1);
        let mut groups = attribution::groups(&order, &footprints, *per_step as usize, least, most);
        if least > 1 && groups.len() <= next {
            let grouped: usize = groups.iter().map(Vec::len).sum();
            return Err(match order.len() - grouped {
                0 => "every site it screens has been built".to_string(),
                left => format!(
                    "no build of (min-flips {min_flips}) is left (sites not built: {left}, \
                     each sharing functions with too many others)"
                ),
            });
        }
        Ok(groups.swap_remove(next % groups.len()))
    }
}

/// The seed of chain `chain`: distinct per chain, reproducible from the experiment seed.
pub fn chain_seed(seed: u64, chain: u32) -> u64 {
    seed ^ (u64::from(chain)).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// A new chain at the baseline, with its first proposals generated.
pub fn start(
    ctx: &ChainContext<'_>,
    chain: u32,
    baseline: &DecisionSet,
    samples: Vec<f64>,
) -> ChainState {
    let mut state = ChainState::at_start(
        baseline,
        samples,
        ChaCha8Rng::seed_from_u64(chain_seed(ctx.experiment.seed, chain)),
        search::temperature(ctx.search(), 0),
        now_ms(),
    );
    refill(ctx, &mut state);
    state
}

/// A stored chain as it resumes: its proposals in flight as stored, or
/// generated now where it holds fewer than `parallel` short of its budget
/// (a chain imported in bulk, as the store bench writes them; a config whose
/// `parallel` grew). Deterministic: the chain's RNG is stored with it.
pub fn resume(ctx: &ChainContext<'_>, mut state: ChainState) -> ChainState {
    refill(ctx, &mut state);
    state
}

/// A chain whose first this many steps all fail with the same reason stops:
/// the benchmark is broken for every candidate, and the rest of its budget
/// would only repeat the failure.
pub const STOP_AFTER_ALIKE_FAILURES: u32 = 5;

/// Whether the experiment's `(steps N)` is only its chains' budget: what each step
/// proposes does not depend on it, so the budget may grow or shrink under a stored
/// campaign and the chain goes on as one of the new length would. Not so for annealing
/// (its temperature falls over the steps), guided proposals (their screening phase is a
/// quarter of them) and one-flip screening (which sites it screens).
pub fn steps_only_budget(experiment: &Experiment) -> bool {
    match &experiment.search {
        Search::SimulatedAnnealing(_) => false,
        Search::Screening(screening) => screening.per_step > 1,
        Search::RandomWalk(_) | Search::RandomSearch(_) | Search::HillClimbing(_) => {
            experiment.proposals != Proposals::Guided
        }
    }
}

/// Whether every step of the chain is decided, or it stopped or ended early.
pub fn finished(ctx: &ChainContext<'_>, state: &ChainState) -> bool {
    state.stopped.is_some() || state.ended.is_some() || state.next_decide >= ctx.steps()
}

/// Stops a chain (nothing more is proposed; results still in flight are dropped).
pub fn stop(state: &mut ChainState, why: String) {
    state.pending.clear();
    state.stopped = Some(why);
}

/// Whether no step of the chain has succeeded so far.
pub fn nothing_succeeded(state: &ChainState) -> bool {
    state.failing_alike == state.next_decide
}

/// Generates proposals until `parallel` are pending or the budget is reached.
/// Guided annealing waits for the whole screening phase to be decided, since
/// its draws depend on every screened effect.
fn refill(ctx: &ChainContext<'_>, state: &mut ChainState) {
    let screen = ctx.screen_steps();
    while state.generated < ctx.steps() && state.pending.len() < ctx.experiment.parallel as usize {
        let step = state.generated;
        if step >= screen && state.next_decide < screen {
            break;
        }
        // A restart's set is where the climb goes on: nothing is proposed until it is measured.
        if state.pending.values().any(|p| p.kind == StepKind::Restart) {
            break;
        }
        let temperature = proposal_temperature(ctx, state, step, screen);
        let Some((kind, decisions)) = next_move(ctx, state, step, screen, temperature) else {
            break;
        };
        let race = race_of(ctx, state, kind, temperature);
        let proposal = Proposal {
            kind,
            diff: decisions.diff_from(&state.current.decisions),
            decisions,
            parent: state.current.step,
            temperature,
            race,
        };
        state.pending.insert(step, proposal);
        state.generated += 1;
    }
}

/// The temperature step `step` is proposed at: the schedule's, scaled by what
/// screening found where proposals are guided.
fn proposal_temperature(ctx: &ChainContext<'_>, state: &ChainState, step: u32, screen: u32) -> f64 {
    let mut temperature = search::temperature(ctx.search(), step);
    if ctx.experiment.proposals == Proposals::Guided && step >= screen {
        temperature *= search::guided_scale(ctx.search(), &state.effects);
    }
    temperature
}

/// What step `step` measures, and as what kind of step; `None` where nothing
/// is proposed yet (a climb at a local optimum while flips are in flight).
fn next_move(
    ctx: &ChainContext<'_>,
    state: &mut ChainState,
    step: u32,
    screen: u32,
    temperature: f64,
) -> Option<(StepKind, DecisionSet)> {
    let improving = (step == screen && screen > 0)
        .then(|| search::improving_flips(&state.current.decisions, &state.effects))
        .filter(|set| *set != state.current.decisions);
    if step < screen && step::shares_builds(ctx.experiment) {
        match ctx.shared_screen(state) {
            Ok(set) => Some((StepKind::Screen, set)),
            Err(why) => {
                // A result in flight may still send flips to be measured again.
                if state.pending.is_empty() {
                    state.ended = Some(why);
                }
                None
            }
        }
    } else if step < screen {
        let point = ctx.screened_point(step);
        let decisions = search::flip_one(&state.current.decisions, point, &mut state.rng);
        Some((StepKind::Screen, decisions))
    } else if let Some(decisions) = improving {
        // The first guided proposal takes every screened flip that helped at once.
        Some((StepKind::Proposal, decisions))
    } else if ctx.is_remeasure(step) {
        Some((StepKind::Remeasure, state.current.decisions.clone()))
    } else {
        search_move(ctx, state, temperature)
    }
}

/// The move the chain's search proposes from where the chain is.
fn search_move(
    ctx: &ChainContext<'_>,
    state: &mut ChainState,
    temperature: f64,
) -> Option<(StepKind, DecisionSet)> {
    match ctx.search() {
        Search::RandomSearch(RandomSearch { flips: None, .. }) => Some((
            StepKind::Proposal,
            search::uniform_set(&state.current.decisions, ctx.points, &mut state.rng),
        )),
        Search::HillClimbing(HillClimbing { kick, .. }) => climb_move(ctx, state, *kick),
        // Annealing, the walk and random search near the start (which never moves).
        _ => Some((StepKind::Proposal, nearby_move(ctx, state, temperature))),
    }
}

/// Hill climbing's next move: an untried flip, else a restart `kick` points
/// away from the best set; `None` while a flip in flight may yet improve.
fn climb_move(
    ctx: &ChainContext<'_>,
    state: &mut ChainState,
    kick: u32,
) -> Option<(StepKind, DecisionSet)> {
    let untried = search::untried_flips(&state.current.decisions, ctx.points, &state.tried);
    if untried.is_empty() {
        // A flip still in flight may yet improve; else this is a local optimum.
        if !state.pending.is_empty() {
            return None;
        }
        let decisions = search::propose(
            &state.best.decisions,
            ctx.points,
            kick,
            None,
            &mut state.rng,
        );
        return Some((StepKind::Restart, decisions));
    }
    let flip = untried[state.rng.random_range(0..untried.len())].clone();
    let decisions = flip.apply(&state.current.decisions);
    state.tried.insert(flip);
    Some((StepKind::Proposal, decisions))
}

/// A proposal near the current set: guided by the points' effects, or `flips`
/// points drawn uniformly or by their weights ([`ChainContext::draws`]).
fn nearby_move(ctx: &ChainContext<'_>, state: &mut ChainState, temperature: f64) -> DecisionSet {
    if ctx.experiment.proposals != Proposals::Guided {
        return search::propose(
            &state.current.decisions,
            ctx.points,
            ctx.flips,
            ctx.draws,
            &mut state.rng,
        );
    }
    let current = &state.current.decisions;
    let weights = search::weights(
        &search::movable(ctx.points),
        &state.effects,
        current,
        temperature,
    );
    let exact = ctx.repeatability == Repeatability::Exact;
    let sets = &state.sets;
    let measured = |hash: &ContentHash| exact && sets.contains_key(hash);
    match state.rejected_in_a_row >= search::STALLED_AFTER {
        // One-point moves stall: two points move together.
        true => search::guided_pair(current, ctx.points, &weights, measured, &mut state.rng),
        false => search::guided_flip(current, ctx.points, &weights, measured, &mut state.rng),
    }
}

/// The race a proposal runs at `temperature`: only a proposal faces Metropolis;
/// screened flips and re-measurements are measured in full.
fn race_of(
    ctx: &ChainContext<'_>,
    state: &ChainState,
    kind: StepKind,
    temperature: f64,
) -> Option<Race> {
    ctx.race
        .filter(|_| kind == StepKind::Proposal)
        .and_then(|p| {
            search::race(
                ctx.search(),
                state.current.objective(),
                ctx.baseline_objective,
                temperature,
                p,
            )
        })
}

/// Notes a measured step in the chain's coverage, and the objective the chain
/// judges it by: its own measurement, or with a noisy objective the median of
/// every full measurement the chain has of the same decisions.
fn note_measured(
    ctx: &ChainContext<'_>,
    state: &mut ChainState,
    record: &StepRecord,
) -> Option<f64> {
    state.varied.extend(record.diff.0.keys().cloned());
    let samples = state.sets.entry(record.decision_hash).or_default();
    let objective = record.objective?;
    if record.result.measurement.cut_short.is_some() {
        // Its few runs judge its own step only: pooled, they would pass for a full measurement.
        return Some(objective);
    }
    match ctx.repeatability {
        // A repeat reuses the earlier result: one sample stands for the set.
        Repeatability::Exact if !samples.is_empty() => {}
        _ => samples.push(objective),
    }
    Summary::of(samples).map(|s| s.median)
}

/// The effect of a screened flip, relative to the baseline.
fn effect(ctx: &ChainContext<'_>, start: f64, judged: Option<f64>, record: &StepRecord) -> Effect {
    let half_width = match ctx.repeatability {
        Repeatability::Exact => 0.0,
        Repeatability::Noisy => record
            .result
            .measurement
            .summary
            .get(&ctx.metric)
            .map_or(0.0, |s| (s.ci_high - s.ci_low) / 2.0),
    };
    Effect {
        change: judged.map(|o| (o - start) / ctx.baseline_objective),
        uncertainty: half_width / ctx.baseline_objective,
        value: record.diff.0.values().next().cloned(),
    }
}

/// Keeps the effect of a step that moved one point (a screened flip, a guided
/// proposal) as that point's, replacing what was known of it.
fn note_effect(
    ctx: &ChainContext<'_>,
    state: &mut ChainState,
    start: f64,
    judged: Option<f64>,
    record: &StepRecord,
) {
    if let (Some(site), 1) = (record.diff.0.keys().next(), record.diff.len()) {
        state
            .effects
            .insert(site.clone(), effect(ctx, start, judged, record));
    }
}

/// The fewest flips of a shared build that could not be read which are built again in two
/// halves rather than one a step: with one flip to blame, halving 32 flips down to groups
/// under 8 takes 6 builds and 4 alone where one a step takes 32.
const SPLIT_FROM: usize = 8;

/// Queues the flips of a shared build that could not be read (it failed, or its flips'
/// changes did not add up) to be measured again ([`again`]).
fn measure_again(
    ctx: &ChainContext<'_>,
    state: &mut ChainState,
    record: &StepRecord,
    footprints: &attribution::Footprints,
) {
    let flips: Vec<SiteId> = record.diff.0.keys().cloned().collect();
    let named = record.result.measurement.outcome.mismatched_sites();
    let suspects = attribution::suspects(named.iter().map(|(site, _)| site), &flips, footprints);
    let exact = ctx.repeatability == Repeatability::Exact;
    let (alone, regroup) = again(flips, &suspects, exact);
    state.alone.extend(alone);
    state.regroup.extend(regroup);
}

/// How the flips of a shared build that could not be read are measured again: those to
/// measure alone, and the groups to build again. A build that failed with a decision mismatch
/// pointing at some of its flips (`suspects`, [`attribution::suspects`]) has those measured
/// alone and the rest built again at once (halving would build a culprit again beside half the
/// others); else, where there are enough flips and the objective counts exactly, two halves;
/// else each alone. A program whose counts vary from run to run spoils every build, halves too.
fn again(
    flips: Vec<SiteId>,
    suspects: &BTreeSet<SiteId>,
    exact: bool,
) -> (Vec<SiteId>, Vec<Vec<SiteId>>) {
    let (blamed, rest): (Vec<SiteId>, Vec<SiteId>) =
        flips.iter().cloned().partition(|f| suspects.contains(f));
    if !blamed.is_empty() && !rest.is_empty() {
        return (blamed, vec![rest]);
    }
    if exact && flips.len() >= SPLIT_FROM {
        let (first, second) = flips.split_at(flips.len() / 2);
        return (Vec::new(), vec![first.to_vec(), second.to_vec()]);
    }
    (flips, Vec::new())
}

/// Keeps the effect of each flip of a shared build where its flips' changes
/// add up to the build's ([`attribution`]); queues them to be measured again
/// ([`measure_again`]) where they do not, or the build failed.
fn note_shared(ctx: &ChainContext<'_>, state: &mut ChainState, record: &StepRecord) {
    let start = ctx.baseline_objective;
    let footprints = attribution::Footprints::new(ctx.points, &state.current.decisions, ctx.forced);
    let attributed = record
        .objective
        .and_then(|_| {
            attribution::attribute(
                record.diff.0.keys(),
                &footprints,
                ctx.start_functions,
                &record.result.measurement.function_instructions,
            )
        })
        .filter(|a| a.separable(start));
    let Some(a) = attributed else {
        measure_again(ctx, state, record, &footprints);
        return;
    };
    let uncertainty = a.residual.unsigned_abs() as f64 / start;
    for (site, change) in a.changes {
        let value = record.diff.0.get(&site).cloned();
        let effect = Effect {
            change: Some(change as f64 / start),
            uncertainty,
            value,
        };
        state.effects.insert(site, effect);
    }
}

/// Hill climbing moves to `next`: no flip of it is tried yet, except the one
/// back to where it came from when it is one flip away (measured, and worse).
fn note_climb(state: &mut ChainState, next: &DecisionSet) {
    let mut back = state.current.decisions.diff_from(next).0.into_iter();
    state.tried.clear();
    if let (Some((point, value)), None) = (back.next(), back.next()) {
        state.tried.insert(Flip { point, value });
    }
}

/// Decides the chain's next step from its measured record: moves the chain,
/// fills in the record's decision, and generates the next proposals.
pub fn decide(ctx: &ChainContext<'_>, state: &mut ChainState, record: &mut StepRecord) {
    let step = state.next_decide;
    debug_assert_eq!(record.key.step, step);
    state.pending.remove(&step);
    let compared_with = state.current.objective();
    let judged = note_measured(ctx, state, record);
    let accepted = verdict(ctx, state, record, compared_with, judged);
    move_chain(ctx, state, record, step, judged, accepted);
    note_failure(state, record, step);
    note_decided(ctx, state, record, step, accepted, compared_with);
    if nothing_succeeded(state) && state.failing_alike >= STOP_AFTER_ALIKE_FAILURES {
        let why = state
            .last_failure
            .as_deref()
            .and_then(|l| l.split_once(": "));
        let why = format!(
            "its first {} steps all failed alike ({})",
            state.failing_alike,
            why.map_or("", |(_, r)| r)
        );
        stop(state, why);
    } else {
        refill(ctx, state);
    }
}

/// Whether the chain moves to the record's set, having noted what its kind of
/// step measures besides (a re-measured incumbent's sample, a screened effect).
fn verdict(
    ctx: &ChainContext<'_>,
    state: &mut ChainState,
    record: &StepRecord,
    compared_with: f64,
    judged: Option<f64>,
) -> bool {
    match record.kind {
        StepKind::Remeasure => {
            if let Some(objective) = record.objective {
                for incumbent in [&mut state.current, &mut state.best] {
                    if incumbent.decisions == record.decisions {
                        incumbent.samples.push(objective);
                    }
                }
            }
            false
        }
        StepKind::Screen if record.diff.len() > 1 => {
            note_shared(ctx, state, record);
            false
        }
        StepKind::Screen => {
            note_effect(ctx, state, compared_with, judged, record);
            // Screening measures neighbours of the start and stays there.
            false
        }
        // The climb goes on from the restart's set whatever it measured.
        StepKind::Restart => judged.is_some(),
        StepKind::Proposal => judge_proposal(ctx, state, record, compared_with, judged),
    }
}

/// Whether a proposal is taken: Metropolis's draw, unless it lost its race.
fn judge_proposal(
    ctx: &ChainContext<'_>,
    state: &mut ChainState,
    record: &StepRecord,
    compared_with: f64,
    judged: Option<f64>,
) -> bool {
    // A guided chain's one-flip proposal from the set it is still at measures
    // that point's effect afresh: where the chain is now, not where it screened.
    if ctx.experiment.proposals == Proposals::Guided && record.parent == state.current.step {
        note_effect(ctx, state, compared_with, judged, record);
    }
    let accepted = search::accept(
        ctx.search(),
        compared_with,
        judged,
        ctx.baseline_objective,
        record.temperature,
        &mut state.rng,
    );
    // A candidate cut short lost its race: clearly worse than the incumbent it was
    // proposed from, and measured by fewer runs than a full measurement. It is never
    // taken (the draw above still keeps the RNG stream that of a full measurement).
    if let Some(cut) = &record.result.measurement.cut_short {
        state.raced.cut_short += 1;
        state.raced.runs_saved += u64::from(cut.runs_saved());
    }
    accepted && record.result.measurement.cut_short.is_none()
}

/// Moves the chain by the verdict on step `step`: its best, its current set,
/// and its counts of proposals and of rejections in a row.
fn move_chain(
    ctx: &ChainContext<'_>,
    state: &mut ChainState,
    record: &StepRecord,
    step: u32,
    judged: Option<f64>,
    accepted: bool,
) {
    let measured = Incumbent {
        decisions: record.decisions.clone(),
        samples: state.sets[&record.decision_hash].clone(),
        step: Some(step),
    };
    // A set better than the best counts even where the chain does not move
    // to it (screening, random search).
    if record.kind != StepKind::Remeasure && judged.is_some_and(|o| o < state.best.objective()) {
        state.best = measured.clone();
    }
    if accepted {
        if matches!(ctx.search(), Search::HillClimbing(_)) {
            note_climb(state, &measured.decisions);
        }
        state.current = measured;
        state.accepted += 1;
    }
    if record.kind.can_move() {
        // A chain read from its store has its count ([`crate::store::Store::chain`]).
        *state.proposals.get_or_insert(0) += 1;
    }
    if record.kind == StepKind::Proposal {
        state.rejected_in_a_row = if accepted {
            0
        } else {
            state.rejected_in_a_row + 1
        };
    }
    if state.current.objective() < state.best.objective() {
        state.best = state.current.clone();
    }
}

/// Counts a failed step `step` by its outcome, and among the chain's first
/// failures alike while nothing has succeeded.
fn note_failure(state: &mut ChainState, record: &StepRecord, step: u32) {
    let outcome = &record.result.measurement.outcome;
    let Some(reason) = outcome.reason() else {
        return;
    };
    *state
        .failures
        .entry(outcome.name().to_string())
        .or_default() += 1;
    let previous = state
        .last_failure
        .as_deref()
        .and_then(|l| l.split_once(": "));
    if nothing_succeeded(state) && previous.is_none_or(|(_, r)| r == reason) {
        state.failing_alike += 1;
    }
    state.last_failure = Some(format!("step {step}: {reason}"));
}

/// Marks step `step` decided: the chain's clock and temperature, the record's
/// decision, and the chain's course.
fn note_decided(
    ctx: &ChainContext<'_>,
    state: &mut ChainState,
    record: &mut StepRecord,
    step: u32,
    accepted: bool,
    compared_with: f64,
) {
    state.temperature = record.temperature;
    state.next_decide += 1;
    state.updated_ms = now_ms();
    record.decision = Some(Decision {
        accepted,
        compared_with,
        decided_ms: state.updated_ms,
    });
    let point = ProgressPoint {
        steps: state.next_decide,
        at_ms: state.updated_ms,
        best: None,
        accepted: state.accepted,
        proposals: state.proposals.unwrap_or(0),
        failures: state.failures.clone(),
        temperature: state.temperature,
    };
    let measured_by = record.cached_from.is_none().then_some(&*record.worker);
    // A chain stored before kiln kept its course had it replayed when read.
    if let Some(progress) = &mut state.progress {
        progress.note(
            step,
            measured_by,
            record.objective,
            ctx.baseline_objective,
            point,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sites(ids: &[&str]) -> Vec<SiteId> {
        ids.iter().map(|&id| SiteId::from(id)).collect()
    }

    #[test]
    fn a_build_whose_mismatch_points_at_flips_measures_them_alone_and_builds_the_rest_again_at_once(
    ) {
        let flips = sites(&["a @ f:1:1", "b @ g:1:1", "c @ h:1:1", "d @ i:1:1"]);
        let suspects = BTreeSet::from([SiteId::from("c @ h:1:1")]);
        let (alone, regroup) = again(flips.clone(), &suspects, true);
        assert_eq!(alone, sites(&["c @ h:1:1"]));
        assert_eq!(regroup, [sites(&["a @ f:1:1", "b @ g:1:1", "d @ i:1:1"])]);
        // A failure that points at no flip, or at every one, tells nothing: the few flips go
        // alone, and 8 or more in halves where the count is exact.
        let (alone, regroup) = again(flips.clone(), &BTreeSet::new(), true);
        assert_eq!((alone, regroup.len()), (flips, 0));
        let eight: Vec<SiteId> = (0..8).map(|i| SiteId(format!("f{i} @ m{i}:1:1"))).collect();
        let (alone, regroup) = again(eight.clone(), &BTreeSet::new(), true);
        assert_eq!(
            (alone.len(), regroup),
            (0, vec![eight[..4].to_vec(), eight[4..].to_vec()])
        );
        let (alone, regroup) = again(eight.clone(), &BTreeSet::new(), false);
        assert_eq!((alone, regroup.len()), (eight, 0));
    }
}
