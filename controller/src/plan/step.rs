//! A step as the search sees it: the request for one decision set, and the
//! objective of its result.

use kiln_protocol::bundle::Bundle;
use kiln_protocol::config::{BenchmarkSpec, Experiment, RunPolicy, Screening, Search};
use kiln_protocol::message::{Race, StepResult};
use kiln_protocol::{
    CampaignConfig, ContentHash, DecisionSet, Statistic, StepId, StepOutcome, StepRequest,
};

/// A step request for `decisions` measured under `runs`, racing `race` if
/// given (id, slot and CPUs are set at dispatch).
pub fn request(
    config: &CampaignConfig,
    benchmark: &BenchmarkSpec,
    bundle: &Bundle,
    decisions: &DecisionSet,
    runs: RunPolicy,
    race: Option<Race>,
    expected_output: Option<ContentHash>,
) -> StepRequest {
    StepRequest {
        id: StepId(0),
        slot: 0,
        cpus: Vec::new(),
        gpus: Vec::new(),
        benchmark: benchmark.clone(),
        bundle: bundle.hash,
        decisions: decisions.clone(),
        runs,
        objective: config.objective.metric,
        expected_output,
        reuse_build: false,
        function_costs: false,
        race,
    }
}

/// Whether the experiment's steps flip several points a build, each flip's
/// effect read from the instructions per function ([`super::attribution`]).
pub fn shares_builds(experiment: &Experiment) -> bool {
    matches!(experiment.search, Search::Screening(Screening { per_step, .. }) if per_step > 1)
}

/// The objective of a result: the configured statistic of the metric, if the step succeeded.
pub fn objective_of(config: &CampaignConfig, result: &StepResult) -> Option<f64> {
    let m = &result.measurement;
    if m.outcome != StepOutcome::Ok {
        return None;
    }
    m.summary
        .get(&config.objective.metric)
        .map(|s| config.objective.statistic.of(s))
}

/// Whether measuring a decision set again can give another figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Repeatability {
    /// It cannot (callgrind's counts of a deterministic program): a repeated set reuses the earlier result.
    Exact,
    /// It can (times, or counts the baseline showed uneven): a repeated set is measured again
    /// and its measurements pooled.
    Noisy,
}

/// The repeatability of the config's objective, where `uneven_runs` is the
/// experiment's run policy set because its baseline's counts differed.
pub fn repeatability(config: &CampaignConfig, uneven_runs: Option<RunPolicy>) -> Repeatability {
    if config.objective.metric.needs_callgrind() && uneven_runs.is_none() {
        Repeatability::Exact
    } else {
        Repeatability::Noisy
    }
}

/// The acceptance probability below which `experiment`'s proposals are raced
/// out, where they race at all: under a noisy objective summarised by its
/// median, the statistic whose interval the worker knows. An exact count has
/// nothing to race (one run is the measurement), and the minimum of more runs
/// can only fall, so its first runs bound nothing.
pub fn race_probability(
    config: &CampaignConfig,
    experiment: &Experiment,
    repeatability: Repeatability,
) -> Option<f64> {
    let median = config.objective.statistic == Statistic::Median;
    experiment
        .race
        .filter(|_| median && repeatability == Repeatability::Noisy)
}
