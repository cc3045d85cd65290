//! Preparing an experiment (discovery, then its reference measurements) as a
//! state machine driven by the campaign loop's answers, so that every
//! experiment prepares at once across the free slots and its chains start as
//! soon as it is ready. Discoveries and reference measurements are kept in
//! the store as they land ([`kept`]), so a restart does not redo them. An
//! experiment whose sources, discovery or baseline fail stops alone
//! ([`Progress::Failed`]): one broken program of many ends no campaign.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

use anyhow::{bail, Result};

use kiln_protocol::bundle::Bundle;
use kiln_protocol::config::{BenchmarkKind, BenchmarkSpec, Experiment, Screening, Search, Start};
use kiln_protocol::message::{Discovery, StepRequest, StepResult};
use kiln_protocol::{
    CampaignConfig, ContentHash, DecisionFile, DecisionSet, DecisionValue, SiteId, StepOutcome,
};

use super::measured_before;
use super::{reference_of, repeated, spread, Prepared, Spread, Tag, BASELINE_REPEATS};
use crate::dispatch::bundle::BadSources;
use crate::dispatch::pool::{Answer, Job, Work};
use crate::error::BadInput;
use crate::logging;
use crate::plan::{draw_weights, random_start, step};
use crate::store::{context_name, kept, ExperimentInfo, NotPrepared, Reference, Store};

/// An experiment being prepared.
pub(super) struct Preparation {
    experiment: Experiment,
    benchmark: BenchmarkSpec,
    bundle: Arc<Bundle>,
    flips: u32,
    /// Set once the decision points are known.
    measuring: Option<Measuring>,
}

/// The reference measurements of a discovered experiment.
struct Measuring {
    discovery: Discovery,
    /// The sites screening leaves out ([`measured_before`]).
    measured_before: BTreeSet<SiteId>,
    /// Per reference: name, decisions and measurements wanted.
    references: Vec<(String, DecisionSet, u32)>,
    requests: Vec<StepRequest>,
    results: Vec<Vec<StepResult>>,
    outstanding: usize,
}

/// What a preparation does: discover its benchmark, or measure its experiment's baselines.
pub(super) enum Doing<'a> {
    Discovering(&'a str),
    Measuring(&'a str),
}

/// Where a preparation stands after a move.
pub(super) enum Progress {
    /// Prepared: its chains may start.
    Ready(Box<Prepared>),
    /// Waiting for the answers to the jobs it submitted.
    Waiting(Box<Preparation>),
    /// The experiment cannot be prepared (its sources, discovery or baseline
    /// failed), and why: it stops, the campaign's other experiments go on.
    Failed(NotPrepared),
}

impl Progress {
    /// A failure that is not the user's input's fault.
    fn failed(why: String) -> Self {
        Self::Failed(NotPrepared {
            why,
            bad_input: false,
        })
    }
}

/// A discovery: of a benchmark (by name), of its sources (by the bundle's hash).
pub(super) type Discovering = (String, ContentHash);

impl Preparation {
    /// Starts preparing `experiment`: ready at once if the store holds it,
    /// else the jobs it needs go to `outbox`.
    /// A discovery already in flight for the same benchmark and sources (another experiment's,
    /// in `discovering`) is waited for rather than run twice: [`Preparation::on_discovered`].
    pub(super) fn start(
        config: &CampaignConfig,
        experiment: &Experiment,
        store: &Store,
        discovering: &mut HashSet<Discovering>,
        outbox: &mut Vec<Job<Tag>>,
    ) -> Result<Progress> {
        let benchmark = config
            .benchmark(&experiment.benchmark)
            .expect("config checks benchmark references")
            .clone();
        let bundle = match crate::dispatch::bundle::pack(&benchmark.sources) {
            Ok(bundle) => Arc::new(bundle),
            Err(e) => {
                return Ok(Progress::Failed(NotPrepared {
                    why: format!("{e:#}"),
                    bad_input: e.chain().any(|cause| cause.is::<BadSources>()),
                }))
            }
        };
        let stored = store.experiment(&experiment.name)?;
        if let Some(why) = stored
            .as_ref()
            .and_then(|info| sources_changed(info, &bundle, &benchmark, experiment))
        {
            return Ok(Progress::failed(why));
        }
        let flips = match benchmark.kind {
            // Knob benchmarks move one knob at a time (guided proposals always move one).
            BenchmarkKind::Knobs { .. } => 1,
            BenchmarkKind::LlvmInline { .. } => experiment.search.flips(),
        };
        let preparation = Preparation {
            experiment: experiment.clone(),
            benchmark,
            bundle,
            flips,
            measuring: None,
        };
        if let Some(info) = stored {
            return Ok(Progress::Ready(Box::new(preparation.into_prepared(info))));
        }
        logging::note(format_args!(
            "preparing experiment {} (benchmark {})",
            experiment.name, preparation.benchmark.name
        ));
        if let Some(discovery) = preparation.known_discovery(store) {
            return preparation.measure(config, store, discovery, outbox);
        }
        if discovering.insert(preparation.discovering()) {
            outbox.push(Job {
                tag: Tag::Discover(experiment.name.clone()),
                bundle: preparation.bundle.clone(),
                work: Work::Discover(Box::new(preparation.benchmark.clone())),
            });
        }
        Ok(Progress::Waiting(Box::new(preparation)))
    }

    /// The decision points known without a discovery: a knob benchmark's, or a discovery of
    /// the same sources and benchmark kept beside the store.
    fn known_discovery(&self, store: &Store) -> Option<Discovery> {
        let benchmark = &self.benchmark;
        match &benchmark.kind {
            BenchmarkKind::Knobs { points } => Some(Discovery::of_knobs(points)),
            BenchmarkKind::LlvmInline { .. } => {
                let (kept, path) = kept::load_discovery(store.dir(), &self.bundle.hash, benchmark)?;
                logging::note(format_args!(
                    "decision points of {} from {} (an earlier discovery)",
                    benchmark.name,
                    path.display()
                ));
                Some(kept)
            }
        }
    }

    /// Takes an answer to one of its jobs.
    pub(super) fn on_answer(
        mut self,
        config: &CampaignConfig,
        store: &Store,
        tag: Tag,
        answer: Answer,
        outbox: &mut Vec<Job<Tag>>,
    ) -> Result<Progress> {
        let benchmark = &self.benchmark;
        match (tag, answer, self.measuring.as_mut()) {
            (Tag::Discover(_), Answer::Discovered(Ok(found)), None) => {
                kept::save_discovery(store.dir(), &self.bundle.hash, benchmark, &found)?;
                self.measure(config, store, found, outbox)
            }
            (Tag::Discover(_), Answer::Discovered(Err(e)), None) => Ok(Progress::failed(format!(
                "cannot find the decision points of benchmark {}: {e}",
                benchmark.name
            ))),
            (Tag::Reference(_, name), Answer::Step(result), Some(m)) => {
                // A step's are logged as it arrives; a reference measurement is no step.
                for warning in &result.measurement.warnings {
                    tracing::warn!(
                        "experiment {}, {name} measurement: {warning}",
                        self.experiment.name
                    );
                }
                let i = m
                    .references
                    .iter()
                    .position(|r| r.0 == name)
                    .expect("known reference");
                m.results[i].push(*result);
                // A failed measurement is not kept: a restart measures it again.
                let ok: Vec<StepResult> = m.results[i]
                    .iter()
                    .filter(|r| r.measurement.outcome == StepOutcome::Ok)
                    .cloned()
                    .collect();
                let experiment = &self.experiment.name;
                kept::save_references(store.dir(), experiment, &m.requests[i], &ok)?;
                m.outstanding -= 1;
                self.finish_if_measured(config, store)
            }
            _ => bail!(
                "unexpected answer while preparing experiment {}",
                self.experiment.name
            ),
        }
    }

    /// With the decision points known: submits the reference measurements not kept from an
    /// earlier start.
    fn measure(
        mut self,
        config: &CampaignConfig,
        store: &Store,
        discovery: Discovery,
        outbox: &mut Vec<Job<Tag>>,
    ) -> Result<Progress> {
        let (experiment, benchmark, bundle) = (&self.experiment, &self.benchmark, &self.bundle);
        let baseline_set = start_set(experiment, &discovery)?;
        // Read before anything is measured: a table that cannot be read stops the experiment.
        let measured_before = match measured_before(experiment, &baseline_set, &discovery) {
            Ok(sites) => sites,
            Err(e) => return Ok(Progress::failed(format!("{e:#}"))),
        };
        announce(config, experiment, &discovery);
        let references = references(experiment, benchmark, &discovery, baseline_set);
        // Measurements kept from an earlier start count; only the rest is measured.
        // The start of screening in shared builds is counted per function, as its steps are.
        let requests: Vec<StepRequest> = references
            .iter()
            .map(|(name, set, _)| StepRequest {
                function_costs: name == "baseline" && step::shares_builds(experiment),
                ..step::request(config, benchmark, bundle, set, config.runs, None, None)
            })
            .collect();
        let mut results: Vec<Vec<StepResult>> = requests
            .iter()
            .map(|r| kept::load_references(store.dir(), &experiment.name, r))
            .collect();
        let mut outstanding = 0;
        for (i, (name, _, repeats)) in references.iter().enumerate() {
            results[i].truncate(*repeats as usize);
            if !results[i].is_empty() {
                logging::note(format_args!(
                    "{}: {} of {repeats} measurements of the {name} kept from an earlier start",
                    experiment.name,
                    results[i].len()
                ));
            }
            for _ in results[i].len()..*repeats as usize {
                outbox.push(Job {
                    tag: Tag::Reference(experiment.name.clone(), name.clone()),
                    bundle: bundle.clone(),
                    work: Work::Step(Box::new(requests[i].clone())),
                });
                outstanding += 1;
            }
        }
        self.measuring = Some(Measuring {
            discovery,
            measured_before,
            references,
            requests,
            results,
            outstanding,
        });
        self.finish_if_measured(config, store)
    }

    /// Once every reference is measured: stores the experiment's info.
    fn finish_if_measured(mut self, config: &CampaignConfig, store: &Store) -> Result<Progress> {
        if self.measuring.as_ref().expect("measuring").outstanding > 0 {
            return Ok(Progress::Waiting(Box::new(self)));
        }
        let m = self.measuring.take().expect("measuring");
        let name = &self.experiment.name;
        let mut measured: BTreeMap<String, Reference> = m
            .references
            .iter()
            .zip(&m.results)
            .map(|((name, set, _), results)| (name.clone(), reference_of(config, set, results)))
            .collect();
        let baseline = measured.remove("baseline").expect("baseline measured");
        if baseline.objective().is_none() {
            // A baseline that ran fine but measured no objective says which metric is missing.
            let why = baseline.outcome.reason().unwrap_or_else(|| {
                format!(
                    "it ran, but no run measured {}: the worker reports it unsupported for this \
                     run command, or measured nothing",
                    config.objective.metric
                )
            });
            return Ok(Progress::failed(format!(
                "the baseline failed: {why}; the experiment needs a working baseline"
            )));
        }
        let runs = match spread(config, &baseline.samples) {
            Spread::Negligible(note) => {
                if let Some(note) = note {
                    logging::note(format_args!("experiment {name}: {note}"));
                }
                None
            }
            Spread::Uneven(note) => {
                logging::note(format_args!("experiment {name}: {note}"));
                Some(repeated(config.runs))
            }
        };
        let info = ExperimentInfo {
            discovery: m.discovery,
            bundle: self.bundle.hash,
            baseline,
            references: measured,
            runs,
            measured_before: m.measured_before,
        };
        store.put_experiment(name, &info)?;
        Ok(Progress::Ready(Box::new(self.into_prepared(info))))
    }

    /// What it is doing, for the status.
    /// The discovery this preparation needs: its benchmark's, of its sources.
    pub(super) fn discovering(&self) -> Discovering {
        (self.benchmark.name.clone(), self.bundle.hash)
    }

    /// Whether it waits for its decision points (another experiment's discovery, maybe).
    pub(super) fn waits_for(&self, discovery: &Discovering) -> bool {
        self.measuring.is_none() && self.discovering() == *discovery
    }

    /// The decision points another experiment's discovery found for this one's benchmark (kept
    /// beside the store), or why there are none: its reference measurements go out.
    pub(super) fn on_discovered(
        self,
        config: &CampaignConfig,
        store: &Store,
        failed: Option<&str>,
        outbox: &mut Vec<Job<Tag>>,
    ) -> Result<Progress> {
        match kept::load_discovery(store.dir(), &self.bundle.hash, &self.benchmark) {
            Some((found, _)) if failed.is_none() => self.measure(config, store, found, outbox),
            _ => Ok(Progress::failed(failed.map_or_else(
                || {
                    format!(
                        "the decision points of benchmark {} were not kept",
                        self.benchmark.name
                    )
                },
                str::to_string,
            ))),
        }
    }

    pub(super) fn doing(&self) -> Doing<'_> {
        match self.measuring {
            None => Doing::Discovering(&self.benchmark.name),
            Some(_) => Doing::Measuring(&self.experiment.name),
        }
    }

    fn into_prepared(self, info: ExperimentInfo) -> Prepared {
        let draws = draw_weights(self.experiment.proposals, &info.discovery);
        Prepared {
            experiment: self.experiment,
            benchmark: self.benchmark,
            bundle: self.bundle,
            info,
            flips: self.flips,
            draws,
        }
    }
}

/// Why a stored experiment cannot go on: its benchmark's sources are no longer those it
/// measured (`bundle`, packed now).
fn sources_changed(
    info: &ExperimentInfo,
    bundle: &Bundle,
    benchmark: &BenchmarkSpec,
    experiment: &Experiment,
) -> Option<String> {
    (info.bundle != bundle.hash).then(|| {
        format!(
            "the sources of benchmark {} ({}) changed since experiment {} started; \
             restore them or run with --force-new",
            benchmark.name,
            benchmark.sources.display(),
            experiment.name
        )
    })
}

/// The reference measurements of an experiment, each named, with its decisions and how often
/// it is measured: its start (the baseline); for an inlining search, every call left out too
/// (what its best is also compared with). Screening searches for no best: its experiments
/// measure no such build, which costs a build and a run as slow as the program gets.
fn references(
    experiment: &Experiment,
    benchmark: &BenchmarkSpec,
    discovery: &Discovery,
    baseline: DecisionSet,
) -> Vec<(String, DecisionSet, u32)> {
    let mut references = vec![("baseline".to_string(), baseline, BASELINE_REPEATS)];
    let screening = experiment.search.screens();
    if matches!(benchmark.kind, BenchmarkKind::LlvmInline { .. }) && !screening {
        let none = discovery
            .points
            .iter()
            .map(|p| (p.id.clone(), DecisionValue::no_inline()))
            .collect();
        references.push(("no-inline".to_string(), DecisionSet(none), 1));
    }
    references
}

/// The sites screening leaves out: those its `(skip-measured FILE)` holds for it.
fn measured_before(
    experiment: &Experiment,
    start: &DecisionSet,
    discovery: &Discovery,
) -> Result<BTreeSet<SiteId>> {
    let Search::Screening(Screening {
        skip_measured: Some(path),
        ..
    }) = &experiment.search
    else {
        return Ok(BTreeSet::new());
    };
    let context = context_name(start, &discovery.baseline, Some(experiment));
    let rows = measured_before::Rows {
        experiment: &experiment.name,
        benchmark: &experiment.benchmark,
        context: &context,
    };
    let sites = measured_before::sites(path, &rows)?;
    logging::note(format_args!(
        "experiment {}: {} sites measured before in {} ({context}) are not screened",
        experiment.name,
        sites.len(),
        path.display()
    ));
    Ok(sites)
}

/// The decisions an experiment starts from: the stock ones, a decision file's (the sites it
/// leaves out at their stock value) or a random set.
fn start_set(experiment: &Experiment, discovery: &Discovery) -> Result<DecisionSet> {
    Ok(match &experiment.baseline {
        None => discovery.baseline.clone(),
        Some(Start::File(path)) => {
            let text = DecisionFile::read_text(path).map_err(|e| BadInput(e.to_string()))?;
            DecisionFile::parse_checked(&text, &path.display().to_string(), &discovery.points)
                .map_err(|e| BadInput(e.to_string()))?
                .set
                .completed_from(&discovery.baseline)
        }
        Some(Start::Random { flips }) => random_start(
            &discovery.baseline,
            &discovery.points,
            *flips,
            experiment.seed,
        ),
    })
}

/// Says what preparing `experiment` measures, and which of its sites are left out or kept at
/// stock.
fn announce(config: &CampaignConfig, experiment: &Experiment, discovery: &Discovery) {
    let runs = match (config.runs.min, config.runs.max) {
        (1, 1) => "one run".to_string(),
        (min, max) if min == max => format!("{min} runs"),
        (min, max) => format!("{min} to {max} runs"),
    };
    // Three builds and measurements of the start, whatever the runs a step takes: how much
    // they differ is the noise every step is judged against.
    logging::note(format_args!(
        "{}: {} decision points; measuring the baseline {BASELINE_REPEATS} times, \
             {runs} each, to see how much it varies",
        experiment.name,
        discovery.points.len()
    ));
    if !discovery.fixed.is_empty() {
        logging::note(format_args!(
            "{}: {} site(s) left out, as the compiler does not take one of their decisions \
                 (kiln sites lists them with why)",
            experiment.name,
            discovery.fixed.len()
        ));
    }
    if let Some(first) = discovery.fallbacks.first() {
        // One line, not one a unit: a program of many units said it every start.
        let units: Vec<&str> = discovery.fallbacks.iter().map(|u| unit_name(u)).collect();
        let why = first.split_once(": ").map_or("", |(_, why)| why);
        logging::note(format_args!(
            "{}: sites of the stock decisions only in {} unit(s), whose compile with every call \
             inlined passed its limits ({why}): {}",
            experiment.name,
            units.len(),
            units.join(", ")
        ));
    }
}

/// `json_reader.cpp` of a discovery's fallback `/…/src/lib_json/json_reader.cpp: failed (…)`.
fn unit_name(fallback: &str) -> &str {
    let unit = fallback.split_once(": ").map_or(fallback, |(unit, _)| unit);
    unit.rsplit('/').next().unwrap_or(unit)
}
