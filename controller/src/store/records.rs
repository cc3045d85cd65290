//! What the store keeps: steps, chain states, experiments and their references.
//! These types are serialized as JSON in the database, so a field added must
//! read back from stores written without it (`#[serde(default)]`).

use std::collections::{BTreeMap, BTreeSet};

use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use kiln_protocol::config::{Experiment, RunPolicy, Start};
use kiln_protocol::message::{Discovery, FunctionCode, Race, StepResult};
use kiln_protocol::{ContentHash, DecisionPoint, DecisionSet, DecisionValue, SiteId, StepOutcome};

use super::progress::ChainProgress;

/// Identifies a step of a chain.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct StepKey {
    /// Experiment name.
    pub experiment: String,
    /// Chain index.
    pub chain: u32,
    /// Step index within the chain.
    pub step: u32,
}

impl std::fmt::Display for StepKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}/chain {}/step {}",
            self.experiment, self.chain, self.step
        )
    }
}

/// Why a step was measured. Export rows store it by position: add variants
/// at the end only.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StepKind {
    /// A search proposal.
    Proposal,
    /// A re-measurement of the incumbent (against the winner's curse).
    Remeasure,
    /// One flip away from the starting set, measured before guided annealing
    /// to learn which points matter.
    Screen,
    /// Hill climbing at a local optimum: the best set with a few points
    /// moved, where the climb starts again (taken whenever it succeeds).
    Restart,
}

impl StepKind {
    /// Whether the chain may move to the step's decisions: a proposal or a
    /// restart. Screened flips and re-measurements are measured in full and
    /// never taken, so an acceptance rate counts neither.
    pub fn can_move(self) -> bool {
        matches!(self, StepKind::Proposal | StepKind::Restart)
    }
}

/// A measured step, as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    /// Which step.
    pub key: StepKey,
    /// Why it was measured.
    pub kind: StepKind,
    /// The full decision set.
    pub decisions: DecisionSet,
    /// Its hash.
    pub decision_hash: ContentHash,
    /// The step whose state it was proposed from (`None`: the baseline).
    pub parent: Option<u32>,
    /// The decisions that differ from the parent state.
    pub diff: DecisionSet,
    /// Temperature at this step.
    pub temperature: f64,
    /// The worker's result (build log and replay file moved to artifacts).
    pub result: StepResult,
    /// The objective, if the step succeeded.
    pub objective: Option<f64>,
    /// Worker that ran it.
    pub worker: String,
    /// Slot on that worker.
    pub slot: u32,
    /// Hash of the worker's capabilities when it ran the step (`fingerprint/<hash>` holds them).
    #[serde(default)]
    pub worker_fingerprint: Option<ContentHash>,
    /// Artifacts (kind → content hash) in the artifacts folder.
    pub artifacts: BTreeMap<String, ContentHash>,
    /// The earlier step whose measurement this one reuses (same decision set).
    pub cached_from: Option<StepKey>,
    /// When the step was handed to the pool (Unix ms).
    pub dispatched_ms: u64,
    /// When its result was stored (Unix ms).
    pub recorded_ms: u64,
    /// Filled in when the chain decides the step.
    pub decision: Option<Decision>,
}

/// The chain's verdict on a step.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// Whether the chain moved to this step's decisions.
    pub accepted: bool,
    /// The incumbent's objective the step was compared with.
    pub compared_with: f64,
    /// When the chain decided (Unix ms).
    pub decided_ms: u64,
}

/// A state of a chain: decisions and their measured objective.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Incumbent {
    /// The decisions.
    pub decisions: DecisionSet,
    /// Every objective measured for them (re-measurements add samples).
    pub samples: Vec<f64>,
    /// The step it came from (`None`: the baseline).
    pub step: Option<u32>,
}

impl Incumbent {
    /// The objective: the median of the samples.
    pub fn objective(&self) -> f64 {
        kiln_protocol::Summary::of(&self.samples).map_or(f64::NAN, |s| s.median)
    }
}

/// A proposal generated but not yet decided.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Proposal {
    /// Why it is measured.
    pub kind: StepKind,
    /// The decisions.
    pub decisions: DecisionSet,
    /// The state it was proposed from.
    pub parent: Option<u32>,
    /// Decisions that differ from the parent.
    pub diff: DecisionSet,
    /// Temperature at this step.
    pub temperature: f64,
    /// The race it runs, fixed when proposed so that a step dispatched
    /// again (a lost worker, a resumed campaign) runs the same one.
    #[serde(default)]
    pub race: Option<Race>,
}

/// How many effects a chain measured, and how many of them were faster.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EffectCount {
    /// Effects with a measured change.
    pub measured: u32,
    /// Of them, those that lowered the objective.
    pub faster: u32,
}

/// As every command says them: `12 effects (3 faster)`.
impl std::fmt::Display for EffectCount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} effects ({} faster)", self.measured, self.faster)
    }
}

/// A chain's whole search state: enough to resume exactly.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChainState {
    /// Next step to decide.
    pub next_decide: u32,
    /// Steps generated so far.
    pub generated: u32,
    /// Where the chain is.
    pub current: Incumbent,
    /// The best state seen.
    pub best: Incumbent,
    /// The RNG after the last decision and generation.
    pub rng: ChaCha8Rng,
    /// Proposals generated and not yet decided, by step.
    pub pending: BTreeMap<u32, Proposal>,
    /// Accepted proposals.
    pub accepted: u32,
    /// Steps decided that could move the chain ([`StepKind::can_move`]): what
    /// `accepted` is a share of. `None` in a chain stored before kiln counted
    /// them ([`crate::store::Store::chain`] counts them from the steps).
    #[serde(default)]
    pub proposals: Option<u32>,
    /// Failed steps by outcome name.
    pub failures: BTreeMap<String, u32>,
    /// Why the latest failed step failed (`step N: outcome: last line`).
    #[serde(default)]
    pub last_failure: Option<String>,
    /// How many steps from the first all failed with the latest reason.
    #[serde(default)]
    pub failing_alike: u32,
    /// Why the chain stopped before its budget, if it did.
    #[serde(default)]
    pub stopped: Option<String>,
    /// Why a screening chain ended before its budget as its config told it to (`(min-flips
    /// K)`: its next build would have held fewer flips): not a failure, unlike `stopped`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<String>,
    /// Temperature at the last decided step.
    pub temperature: f64,
    /// When the chain started (Unix ms).
    pub started_ms: u64,
    /// When it last decided a step (Unix ms).
    pub updated_ms: u64,
    /// Points some measured step of the chain changed (its coverage).
    #[serde(default)]
    pub varied: BTreeSet<SiteId>,
    /// Every distinct decision set the chain has measured (its start
    /// included), with the objectives measured for it: a noisy objective
    /// pools a repeated set's measurements. Stored apart, 16 to a key
    /// ([`crate::store::layout::chain_set_entry`]): written inside the state,
    /// which is written whole at every step, it made each step cost more
    /// than the last (180 KB a step after 2,000). A state an older kiln
    /// wrote holds them here.
    /// The state is stored with their count in their place (as `set_count`).
    #[serde(default, rename(serialize = "set_count"), serialize_with = "count_of")]
    pub sets: BTreeMap<ContentHash, Vec<f64>>,
    /// How many sets the stored state counted: a view (`kiln status`, the report)
    /// counts them so, without reading them (millions in a week-long chain). 0 in a
    /// state stored before they were counted.
    #[serde(default, skip_serializing)]
    pub set_count: u32,
    /// Guided proposals: each screened point's effect.
    #[serde(default)]
    pub effects: BTreeMap<SiteId, Effect>,
    /// What racing spared the chain.
    #[serde(default)]
    pub raced: Raced,
    /// Hill climbing: the flips of the incumbent proposed (or known worse)
    /// since it became the incumbent; when every flip is here and decided,
    /// it is a local optimum.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub tried: BTreeSet<Flip>,
    /// Proposals decided since the chain last accepted one (a guided chain
    /// past a few moves two points at once).
    #[serde(default)]
    pub rejected_in_a_row: u32,
    /// The chain's course so far; `None` in a chain stored before kiln kept
    /// it ([`crate::store::Store::chain`] replays it from the steps).
    #[serde(default)]
    pub progress: Option<ChainProgress>,
    /// Screening in shared builds: the builds proposed so far.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub shared: u32,
    /// Screening in shared builds: flips to measure alone next, in order (their
    /// build failed, or its flips' changes did not add up to its whole change).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub alone: Vec<SiteId>,
    /// Screening in shared builds: groups of flips to build together next, in order, after
    /// those to measure alone: the halves of a build whose flips' changes did not add up, so
    /// that a flip acting beyond its own functions spoils its half only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub regroup: Vec<Vec<SiteId>>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// The steps of a chain that racing cut short, and the runs it spared.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Raced {
    /// Steps cut short.
    pub cut_short: u32,
    /// Measured runs those steps did not do, up to the run policy's `max`:
    /// an upper bound on the runs saved.
    pub runs_saved: u64,
}

/// One decision point moved to one value.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Flip {
    /// The point.
    pub point: SiteId,
    /// Its new value.
    pub value: DecisionValue,
}

impl Flip {
    /// `set` with this flip applied.
    pub fn apply(&self, set: &DecisionSet) -> DecisionSet {
        let mut next = set.clone();
        next.0.insert(self.point.clone(), self.value.clone());
        next
    }
}

/// A map stored as its length.
fn count_of<K, V, S: serde::Serializer>(map: &BTreeMap<K, V>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(map.len() as u64)
}

/// How much of its decision space a chain has explored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Coverage {
    /// Points some measured step changed.
    pub varied: u32,
    /// Points that can change (more than one value).
    pub movable: u32,
    /// Distinct decision sets measured, the start included.
    pub sets: u32,
}

impl Coverage {
    /// The share of movable points varied at least once (0 to 1).
    pub fn share(&self) -> f64 {
        f64::from(self.varied) / f64::from(self.movable.max(1))
    }
}

impl ChainState {
    /// The effects it measured: [`ChainState::effects`] with a change.
    pub fn effect_count(&self) -> EffectCount {
        let changes = self.effects.values().filter_map(|e| e.change);
        changes.fold(EffectCount::default(), |n, change| EffectCount {
            measured: n.measured + 1,
            faster: n.faster + u32::from(change < 0.0),
        })
    }

    /// A chain at its start: at `decisions`, measured `samples` times, with
    /// nothing proposed or decided yet, its RNG `rng`, at `temperature`,
    /// started at `now_ms`.
    pub fn at_start(
        decisions: &DecisionSet,
        samples: Vec<f64>,
        rng: ChaCha8Rng,
        temperature: f64,
        now_ms: u64,
    ) -> ChainState {
        let start = Incumbent {
            decisions: decisions.clone(),
            samples: samples.clone(),
            step: None,
        };
        ChainState {
            next_decide: 0,
            generated: 0,
            current: start.clone(),
            best: start,
            rng,
            pending: BTreeMap::new(),
            accepted: 0,
            proposals: Some(0),
            failures: BTreeMap::new(),
            last_failure: None,
            failing_alike: 0,
            stopped: None,
            ended: None,
            temperature,
            started_ms: now_ms,
            updated_ms: now_ms,
            varied: BTreeSet::new(),
            sets: [(decisions.hash(), samples)].into(),
            set_count: 0,
            effects: BTreeMap::new(),
            raced: Raced::default(),
            tried: BTreeSet::new(),
            rejected_in_a_row: 0,
            progress: Some(ChainProgress::default()),
            shared: 0,
            alone: Vec::new(),
            regroup: Vec::new(),
        }
    }

    /// The chain's coverage of `points`.
    pub fn coverage(&self, points: &[DecisionPoint]) -> Coverage {
        Coverage {
            varied: self.varied.len() as u32,
            movable: points.iter().filter(|p| p.domain.len() > 1).count() as u32,
            sets: self.set_count.max(self.sets.len() as u32),
        }
    }
}

/// A point's measured effect: one flip away from the starting set, relative to the baseline.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Effect {
    /// (flipped − start) / baseline; `None` if the flipped set failed.
    pub change: Option<f64>,
    /// Half the width of the flipped set's confidence interval / baseline (0 for exact counts).
    pub uncertainty: f64,
    /// The value the point was flipped to (absent in chains stored before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<DecisionValue>,
}

/// A reference measurement of an experiment (the baseline, inlining nothing).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reference {
    /// The decisions.
    pub decisions: DecisionSet,
    /// Objectives measured (several for the baseline).
    pub samples: Vec<f64>,
    /// The outcome of the last measurement.
    pub outcome: StepOutcome,
    /// The output digest of the first successful measurement.
    pub output_digest: Option<ContentHash>,
    /// The start of that measurement's checked output, to show beside a
    /// step whose output differs.
    #[serde(default)]
    pub checked_output: Option<String>,
    /// .text size of the build, where known.
    pub text_bytes: Option<u64>,
    /// The instructions each function executed itself, where screening in
    /// shared builds asked for them (the start its flips are read against).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub function_instructions: BTreeMap<String, u64>,
    /// The optimised code of each function that executed, where it was asked for with
    /// `function_instructions` and could be read (the code a flip's caller had before it).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub function_code: BTreeMap<String, FunctionCode>,
}

impl Reference {
    /// The median objective, if any measurement succeeded.
    pub fn objective(&self) -> Option<f64> {
        kiln_protocol::Summary::of(&self.samples).map(|s| s.median)
    }
}

/// The name of the decisions an experiment's flips are made from, `start`: `stock` where they
/// are `stock`'s, else its baseline file's name, `random` or `random K flips` (`start` where
/// its config is not at hand).
pub fn context_name(
    start: &DecisionSet,
    stock: &DecisionSet,
    experiment: Option<&Experiment>,
) -> String {
    if start == stock {
        return "stock".into();
    }
    let named = experiment.and_then(|e| {
        Some(match e.baseline.as_ref()? {
            Start::File(path) => path.file_name()?.to_string_lossy().into_owned(),
            Start::Random { flips: None } => "random".into(),
            Start::Random { flips: Some(k) } => format!("random {k} flips"),
        })
    });
    named.unwrap_or_else(|| "start".into())
}

/// A step's time ratio, the one speed convention of every command, file and
/// plot: its objective over the baseline's, below 1 faster (or fewer
/// instructions); NaN where either is missing.
pub fn time_ratio(objective: f64, baseline: f64) -> f64 {
    objective / baseline
}

impl ExperimentInfo {
    /// The decisions its flips are made from, as the effects table names them
    /// ([`context_name`]).
    pub fn context(&self, experiment: Option<&Experiment>) -> String {
        context_name(
            &self.baseline.decisions,
            &self.discovery.baseline,
            experiment,
        )
    }

    /// The time ratio of `objective` against this experiment's baseline;
    /// `None` where the baseline measured nothing.
    pub fn time_ratio(&self, objective: f64) -> Option<f64> {
        self.baseline.objective().map(|b| time_ratio(objective, b))
    }
}

/// What the store knows of an experiment before its chains run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExperimentInfo {
    /// The benchmark's decision points and stock decisions.
    pub discovery: Discovery,
    /// The bundle the benchmark was discovered from.
    pub bundle: ContentHash,
    /// The starting decisions (stock, or the config's baseline file).
    pub baseline: Reference,
    /// Named extra references (`no-inline` for inlining benchmarks).
    pub references: BTreeMap<String, Reference>,
    /// How its steps are measured when not as the config's `runs` say: more
    /// runs, where the baseline's counts showed the program is not deterministic.
    #[serde(default)]
    pub runs: Option<RunPolicy>,
    /// Sites screening does not flip: those its `(skip-measured FILE)` held for it when it
    /// was prepared.
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub measured_before: BTreeSet<SiteId>,
}
