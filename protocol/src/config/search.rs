//! The search part: experiments, their search algorithms, schedules and
//! proposals.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::record::{self as kind, record, Kind};
use super::{float, int, path_sexp};
use crate::decode::{self, Record, Src};
use crate::sexp::{Sexp, SexpError, SexpKind};

/// The words of this part of the config language that decoding, the lists of
/// allowed fields and printing share: each spelled once, here.
mod word {
    pub const BASELINE: &str = "baseline";
    pub const BENCHMARK: &str = "benchmark";
    pub const CHAINS: &str = "chains";
    pub const EXPONENTIAL: &str = "exponential";
    pub const FLIPS: &str = "flips";
    pub const FLIPS_PER_STEP: &str = "flips-per-step";
    pub const GUIDED: &str = "guided";
    pub const HILL_CLIMBING: &str = "hill-climbing";
    pub const KICK: &str = "kick";
    pub const HELPING: &str = "helping";
    pub const LINEAR: &str = "linear";
    pub const MIN_FLIPS: &str = "min-flips";
    pub const NAME: &str = "name";
    pub const OFF: &str = "off";
    pub const PARALLEL: &str = "parallel";
    pub const PROFILE: &str = "profile";
    pub const PROPOSALS: &str = "proposals";
    pub const RACE: &str = "race";
    pub const RANDOM: &str = "random";
    pub const RANDOM_SEARCH: &str = "random-search";
    pub const RANDOM_WALK: &str = "random-walk";
    pub const REMEASURE_EVERY: &str = "remeasure-every";
    pub const SCHEDULE: &str = "schedule";
    pub const SCREENING: &str = "screening";
    pub const SEARCH: &str = "search";
    pub const SEED: &str = "seed";
    pub const SIMULATED_ANNEALING: &str = "simulated-annealing";
    pub const SKIP_MEASURED: &str = "skip-measured";
    pub const STEPS: &str = "steps";
    pub const T_MAX: &str = "t-max";
    pub const T_MIN: &str = "t-min";
    pub const UNIFORM: &str = "uniform";
}

record! {
    /// One search over one benchmark.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    pub struct Experiment {
        name: String = word::NAME, kind::NAME, default(String::new(), "the benchmark's name"),
            "The experiment's name.";
        benchmark: String = word::BENCHMARK, kind::NAME, required, "The benchmark it searches.";
        search: Search = word::SEARCH, SEARCH, required, "The search algorithm.";
        chains: u32 = word::CHAINS, kind::POSITIVE, default(1), "Independent chains.";
        seed: u64 = word::SEED, kind::COUNT64, default(0),
            "Seed of chain 0; chain i uses a seed derived from it.";
        baseline: Option<Start> = word::BASELINE, START, optional,
            "The decisions to start from instead of the stock ones: the context of the \
             experiment's effects.";
        remeasure_every: u32 = word::REMEASURE_EVERY, kind::COUNT, default(0),
            "Re-measure the incumbent every this many steps (0: never).";
        parallel: u32 = word::PARALLEL, kind::POSITIVE, default(1),
            "Proposals of one chain in flight at once.";
        proposals: Proposals = word::PROPOSALS, PROPOSALS, default(Proposals::Uniform),
            "How proposals pick the decisions they change.";
        race: Option<f64> = word::RACE, RACE, default(Some(Experiment::DEFAULT_RACE)),
            "Racing: a proposal of an annealing chain under a noisy objective stops being \
             repeated once Metropolis would accept it with probability below this, even at \
             the lower end of its interval; off: never.";
    }
}

const SEARCH: Kind<Search> = Kind {
    takes: "a search (below)",
    decode: |f| f.value(|src, node, _| search(src, node)),
    print: |search| vec![search.to_sexp()],
};

const START: Kind<Start> = Kind {
    takes: "a decision file, random or (random (flips K))",
    decode: |f| f.value(|src, node, _| Start::decode(src, node)),
    print: |start| vec![start.to_sexp()],
};

const PROPOSALS: Kind<Proposals> = Kind {
    takes: "uniform, guided, profile or helping",
    decode: |f| {
        f.value(|src, node, field| {
            let words = [word::UNIFORM, word::GUIDED, word::PROFILE, word::HELPING];
            match decode::choice(src, node, field, &words)? {
                word::GUIDED => Ok(Proposals::Guided),
                word::PROFILE => Ok(Proposals::Profile),
                word::HELPING => Ok(Proposals::Helping),
                _ => Ok(Proposals::Uniform),
            }
        })
    },
    print: |proposals| vec![Sexp::symbol(proposals.word())],
};

const RACE: Kind<Option<f64>> = Kind {
    takes: "off, or a probability in (0, 1)",
    decode: |f| f.value(|src, node, _| race(src, node)),
    print: |race| vec![race.map_or(Sexp::symbol(word::OFF), float)],
};

impl Experiment {
    /// The acceptance probability below which a candidate is raced out, unless configured.
    pub const DEFAULT_RACE: f64 = 0.01;
}

/// The decisions an experiment starts from when not the stock ones: the context its
/// screening measures effects in.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Start {
    /// `(baseline "FILE")`: a decision file (a searched best set, say); sites it leaves
    /// out keep their stock value.
    File(PathBuf),
    /// `(baseline random)`: every movable point's value drawn uniformly from its domain;
    /// `(baseline (random (flips K)))`: the stock set with `K` distinct points moved. Drawn
    /// from the experiment's seed, so a resumed campaign draws the same set.
    Random { flips: Option<u32> },
}

impl Start {
    fn decode(src: Src<'_>, node: &Sexp) -> Result<Start, SexpError> {
        if let SexpKind::Str(path) = &node.kind {
            return Ok(Start::File(PathBuf::from(path)));
        }
        if node.as_symbol() == Some(word::RANDOM) {
            return Ok(Start::Random { flips: None });
        }
        let head = node
            .as_list()
            .and_then(|l| l.first())
            .and_then(Sexp::as_symbol);
        if head == Some(word::RANDOM) {
            let rec = Record::open(src, node, word::RANDOM, Some(word::RANDOM), &[word::FLIPS])?;
            let flips = rec.opt_value(word::FLIPS, decode::positive32)?;
            return Ok(Start::Random { flips });
        }
        Err(src.error(
            node.pos,
            "'baseline' must be a decision file (a double-quoted string), random or \
             (random (flips K))",
        ))
    }

    fn to_sexp(&self) -> Sexp {
        match self {
            Start::File(path) => path_sexp(path),
            Start::Random { flips: None } => Sexp::symbol(word::RANDOM),
            Start::Random { flips: Some(k) } => Sexp::list(vec![
                Sexp::symbol(word::RANDOM),
                Sexp::field(word::FLIPS, vec![int(*k)]),
            ]),
        }
    }
}

/// How a chain's proposals pick the decision points they change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Proposals {
    /// Every movable point equally likely.
    #[default]
    Uniform,
    /// A first phase measures one flip of every movable point away from the
    /// starting set; then points are drawn in proportion to the size and
    /// uncertainty of their measured effect.
    Guided,
    /// As uniform (the search's `flips` points a proposal, no screening), the points drawn
    /// by how hot the stock build's profile found their site: in proportion to the share
    /// of flips of sites that hot which moved a program's count in kiln's dataset.
    Profile,
    /// As profile, the points drawn by their heat and the stock build's decision: in
    /// proportion to the share of such flips that saved some of a program's count in kiln's
    /// dataset (inlining a hot call stock left helped far more often than taking a hot
    /// inlining away).
    Helping,
}

impl Proposals {
    /// The config's word for it.
    pub fn word(self) -> &'static str {
        match self {
            Proposals::Uniform => word::UNIFORM,
            Proposals::Guided => word::GUIDED,
            Proposals::Profile => word::PROFILE,
            Proposals::Helping => word::HELPING,
        }
    }
}

/// The search algorithm of an experiment: each a record of its own, named by its word.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Search {
    SimulatedAnnealing(Annealing),
    RandomWalk(RandomWalk),
    RandomSearch(RandomSearch),
    HillClimbing(HillClimbing),
    Screening(Screening),
}

record! {
    /// Simulated annealing with Metropolis acceptance.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    pub struct Annealing {
        steps: u32 = word::STEPS, kind::POSITIVE, required, "Steps of the chain.";
        t_max: f64 = word::T_MAX, kind::POSITIVE_NUMBER, default(0.04), "Starting temperature.";
        t_min: f64 = word::T_MIN, kind::POSITIVE_NUMBER, default(0.001), "Final temperature.";
        flips: u32 = word::FLIPS, kind::POSITIVE, default(3),
            "Decisions changed per proposal (a knob benchmark moves one).";
        schedule: Schedule = word::SCHEDULE, SCHEDULE, default(Schedule::Exponential),
            "How temperature falls.";
    }
}

record! {
    /// A random walk that accepts every proposal.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    pub struct RandomWalk {
        steps: u32 = word::STEPS, kind::POSITIVE, required, "Steps of the chain.";
        flips: u32 = word::FLIPS, kind::POSITIVE, default(3), "Decisions changed per proposal.";
    }
}

record! {
    /// Independent random decision sets, drawn without regard to any result.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    pub struct RandomSearch {
        steps: u32 = word::STEPS, kind::POSITIVE, required, "Steps of the chain.";
        flips: Option<u32> = word::FLIPS, kind::POSITIVE, optional,
            "None: every point takes a uniformly drawn value of its domain (uniform over the \
             whole space); K: the starting set with K distinct points moved, the annealers' \
             move without its feedback.";
    }
}

record! {
    /// Greedy one-flip hill climbing: one flip of the incumbent at a time, taken only when
    /// it is better; at a local optimum (every flip of the incumbent tried, none better) it
    /// restarts from the best set with `kick` points moved.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    pub struct HillClimbing {
        steps: u32 = word::STEPS, kind::POSITIVE, required, "Steps of the chain.";
        kick: u32 = word::KICK, kind::POSITIVE, default(3),
            "Points a restart moves away from the best set.";
    }
}

record! {
    /// Each step flips one point alone away from the starting set, the hottest first by
    /// the stock build's profile (again from the hottest once every point is screened): the
    /// per-site effects a dataset of effects wants, with no search after.
    ///
    /// With `(flips-per-step K)` above 1 (inlining sites, callgrind's instruction count as
    /// the objective), a step flips up to K points whose code does not overlap (no two share
    /// a caller or callee), and each flip's effect is read from the instructions of the
    /// functions it touches; a step whose flips do not add up to its whole change has its
    /// flips built again in two halves (8 flips or more) or measured again, each alone; one
    /// that failed with a decision mismatch has the flips it points at (named, or meeting a
    /// named site's functions) measured alone and the rest built again together.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    pub struct Screening {
        steps: u32 = word::STEPS, kind::POSITIVE, required, "Steps of the chain.";
        per_step: u32 = word::FLIPS_PER_STEP, kind::POSITIVE, default(1),
            "Most points one step flips, whose functions do not overlap (1: each alone).";
        min_flips: u32 = word::MIN_FLIPS, kind::POSITIVE, default(1),
            "With flips-per-step above 1: no build holds fewer flips than this (a build of a \
             few costs nearly what one of many does): a site whose build would, as its \
             functions are shared by too many others, is left out, and the screening ends, \
             its budget unspent, when the sites left fill no such build, or when every build \
             has been proposed once; 1: it goes on to the budget, again from the first build.";
        skip_measured: Option<PathBuf> = word::SKIP_MEASURED, kind::PATH, optional,
            "An effects table (Parquet, as `kiln export --table effects` writes it, or a \
             dataset's): the sites it holds for this experiment (its name, benchmark and \
             context) are not screened, so that a campaign started again in a new store adds \
             to the table instead of measuring its sites again. Read once, when the \
             experiment is prepared.";
    }
}

const SCHEDULE: Kind<Schedule> = Kind {
    takes: "exponential or linear",
    decode: |f| {
        f.value(|src, node, field| {
            match decode::choice(src, node, field, &[word::EXPONENTIAL, word::LINEAR])? {
                word::LINEAR => Ok(Schedule::Linear),
                _ => Ok(Schedule::Exponential),
            }
        })
    },
    print: |schedule| {
        vec![Sexp::symbol(match schedule {
            Schedule::Exponential => word::EXPONENTIAL,
            Schedule::Linear => word::LINEAR,
        })]
    },
};

impl Search {
    /// Steps of the chain.
    pub fn steps(&self) -> u32 {
        match self {
            Search::SimulatedAnnealing(Annealing { steps, .. })
            | Search::RandomWalk(RandomWalk { steps, .. })
            | Search::RandomSearch(RandomSearch { steps, .. })
            | Search::HillClimbing(HillClimbing { steps, .. })
            | Search::Screening(Screening { steps, .. }) => *steps,
        }
    }

    /// The steps of the chain, to change (a budget extended under a stored campaign).
    pub fn steps_mut(&mut self) -> &mut u32 {
        match self {
            Search::SimulatedAnnealing(Annealing { steps, .. })
            | Search::RandomWalk(RandomWalk { steps, .. })
            | Search::RandomSearch(RandomSearch { steps, .. })
            | Search::HillClimbing(HillClimbing { steps, .. })
            | Search::Screening(Screening { steps, .. }) => steps,
        }
    }

    /// Whether it screens: it measures effects and never moves, so what it leaves is its
    /// effects rather than a best.
    pub fn screens(&self) -> bool {
        matches!(self, Search::Screening(_))
    }

    /// Whether proposals move points drawn by `(proposals ...)` (annealing and
    /// the random walk), rather than by a rule of the search's own.
    pub fn draws_flips(&self) -> bool {
        matches!(self, Search::SimulatedAnnealing(_) | Search::RandomWalk(_))
    }

    /// Decisions changed per proposal (random search over the whole space
    /// draws every point and reads 0 here).
    pub fn flips(&self) -> u32 {
        match self {
            Search::SimulatedAnnealing(Annealing { flips, .. })
            | Search::RandomWalk(RandomWalk { flips, .. }) => *flips,
            Search::RandomSearch(RandomSearch { flips, .. }) => flips.unwrap_or(0),
            Search::HillClimbing(_) | Search::Screening(_) => 1,
        }
    }
}

/// The temperature schedule of simulated annealing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Schedule {
    /// `T(k) = t_max · exp(−ln(t_max/t_min) · k/steps)`.
    Exponential,
    /// `T(k) = t_max − (t_max − t_min) · k/steps`.
    Linear,
}

impl Schedule {
    /// The temperature at step `k` of `steps`.
    pub fn temperature(self, t_max: f64, t_min: f64, k: u32, steps: u32) -> f64 {
        let frac = if steps == 0 {
            1.0
        } else {
            f64::from(k) / f64::from(steps)
        };
        match self {
            Schedule::Exponential => t_max * (-(t_max / t_min).ln() * frac).exp(),
            Schedule::Linear => t_max - (t_max - t_min) * frac,
        }
    }
}

pub(super) fn decode_experiment(src: Src<'_>, node: &Sexp) -> Result<Experiment, SexpError> {
    let rec = Record::open(src, node, "experiment", None, &Experiment::words())?;
    let mut experiment = Experiment::decode_fields(&rec)?;
    if experiment.name.is_empty() {
        experiment.name = experiment.benchmark.clone();
    }
    if experiment.proposals != Proposals::Uniform && !experiment.search.draws_flips() {
        return Err(src.error(
            rec.req(word::PROPOSALS)?.one()?.pos,
            format!(
                "(proposals {}) applies to simulated-annealing and random-walk \
                 only: random-search and hill-climbing draw their own moves",
                experiment.proposals.word()
            ),
        ));
    }
    Ok(experiment)
}

/// `(race off)` or `(race P)` with `P` strictly between 0 and 1.
fn race(src: Src<'_>, node: &Sexp) -> Result<Option<f64>, SexpError> {
    if node.as_symbol() == Some(word::OFF) {
        return Ok(None);
    }
    let bad = || {
        src.error(
            node.pos,
            "'race' must be off or an acceptance probability between 0 and 1 (exclusive), \
             like 0.01"
                .to_string(),
        )
    };
    let p = decode::number(src, node, word::RACE).map_err(|_| bad())?;
    if p > 0.0 && p < 1.0 {
        Ok(Some(p))
    } else {
        Err(bad())
    }
}

impl Experiment {
    pub(super) fn to_sexp(&self) -> Sexp {
        Sexp::list(self.print_fields())
    }
}

fn search(src: Src<'_>, node: &Sexp) -> Result<Search, SexpError> {
    let head = node
        .as_list()
        .and_then(|l| l.first())
        .and_then(Sexp::as_symbol);
    let open = |word: &str, words: &[&str]| Record::open(src, node, word, Some(word), words);
    match head {
        Some(word::SIMULATED_ANNEALING) => {
            let rec = open(word::SIMULATED_ANNEALING, &Annealing::words())?;
            let annealing = Annealing::decode_fields(&rec)?;
            let (t_max, t_min) = (annealing.t_max, annealing.t_min);
            if t_min > t_max {
                return Err(src.error(
                    rec.pos(),
                    format!("t-min ({t_min}) is above t-max ({t_max})"),
                ));
            }
            Ok(Search::SimulatedAnnealing(annealing))
        }
        Some(word::RANDOM_WALK) => {
            RandomWalk::decode_fields(&open(word::RANDOM_WALK, &RandomWalk::words())?)
                .map(Search::RandomWalk)
        }
        Some(word::RANDOM_SEARCH) => {
            RandomSearch::decode_fields(&open(word::RANDOM_SEARCH, &RandomSearch::words())?)
                .map(Search::RandomSearch)
        }
        Some(word::HILL_CLIMBING) => {
            HillClimbing::decode_fields(&open(word::HILL_CLIMBING, &HillClimbing::words())?)
                .map(Search::HillClimbing)
        }
        Some(word::SCREENING) => {
            Screening::decode_fields(&open(word::SCREENING, &Screening::words())?)
                .map(Search::Screening)
        }
        _ => Err(src.error(
            node.pos,
            format!(
                "expected a search: (simulated-annealing ...), (random-walk ...), \
                 (random-search ...), (hill-climbing ...) or (screening ...), found `{}`",
                decode::short(node)
            ),
        )),
    }
}

impl Search {
    pub(super) fn to_sexp(&self) -> Sexp {
        let (word, fields) = match self {
            Search::SimulatedAnnealing(s) => (word::SIMULATED_ANNEALING, s.print_fields()),
            Search::RandomWalk(s) => (word::RANDOM_WALK, s.print_fields()),
            Search::RandomSearch(s) => (word::RANDOM_SEARCH, s.print_fields()),
            Search::HillClimbing(s) => (word::HILL_CLIMBING, s.print_fields()),
            Search::Screening(s) => (word::SCREENING, s.print_fields()),
        };
        Sexp::field(word, fields)
    }
}
