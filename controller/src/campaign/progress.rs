//! Progress of a running campaign: bars on a terminal, periodic lines otherwise.

use std::collections::BTreeMap;
use std::io::IsTerminal;

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

use kiln_protocol::CampaignConfig;

use crate::dispatch::pool::{StatusBoard, WorkerState};
use crate::logging::{self, Verbosity};
use crate::store::ChainState;
use crate::text::{best_cells, format_acceptance, format_secs};

use super::status::{best_of, etas, screens};

/// One bar per chain.
type Bars = BTreeMap<(String, u32), ProgressBar>;

/// The progress display of a campaign.
pub struct Progress {
    bars: Option<(MultiProgress, Bars)>,
    /// The campaign's config: budgets, and the slots and `parallel` its ETAs assume.
    config: CampaignConfig,
    /// Per prepared experiment, its baseline's objective.
    baselines: BTreeMap<String, f64>,
    /// The objective's unit.
    unit: &'static str,
}

impl Progress {
    /// Bars when stderr is a terminal, log lines otherwise.
    pub fn new(config: &CampaignConfig) -> Progress {
        let bars = (std::io::stderr().is_terminal() && logging::verbosity() > Verbosity::Quiet)
            .then(|| (MultiProgress::new(), BTreeMap::new()));
        Progress {
            bars,
            config: config.clone(),
            baselines: BTreeMap::new(),
            unit: config.objective.metric.unit(),
        }
    }

    /// Notes the baseline of a prepared experiment: a chain's best is shown against it.
    pub fn baseline(&mut self, experiment: &str, objective: f64) {
        self.baselines.insert(experiment.to_string(), objective);
    }

    /// Updates the bars after a decision.
    pub fn refresh(&mut self, chains: &BTreeMap<(String, u32), ChainState>) {
        let (baselines, unit, config) = (&self.baselines, self.unit, &self.config);
        let Some((multi, bars)) = self.bars.as_mut() else {
            return;
        };
        for (((experiment, chain), state), eta) in chains.iter().zip(etas(config, chains)) {
            let bar = bars.entry((experiment.clone(), *chain)).or_insert_with(|| {
                let bar = multi.add(ProgressBar::new(u64::from(total(config, experiment))));
                bar.set_style(
                    ProgressStyle::with_template("{prefix:<24} [{bar:30}] {pos:>5}/{len:<5} {msg}")
                        .expect("valid template")
                        .progress_chars("=> "),
                );
                bar.set_prefix(format!("{experiment}/chain {chain}"));
                bar
            });
            bar.set_position(u64::from(state.next_decide));
            let screening = screens(config, experiment);
            bar.set_message(summary(
                state,
                baselines.get(experiment),
                unit,
                eta,
                screening,
            ));
        }
    }

    /// A periodic line per chain: in the log always, on stderr when there is no terminal
    /// (the bars say it there).
    pub fn tick(&self, chains: &BTreeMap<(String, u32), ChainState>, board: &StatusBoard) {
        let say = |line: String| match self.bars {
            Some(_) => logging::record(line),
            None => logging::note(line),
        };
        for (((experiment, chain), state), eta) in chains.iter().zip(etas(&self.config, chains)) {
            say(format!(
                "{experiment}/chain {chain}: step {}/{}, {}",
                state.next_decide,
                total(&self.config, experiment),
                summary(
                    state,
                    self.baselines.get(experiment),
                    self.unit,
                    eta,
                    screens(&self.config, experiment)
                )
            ));
        }
        let board = board.lock().expect("not poisoned");
        let mut connecting = Vec::new();
        for (name, s) in board.iter() {
            match &s.state {
                WorkerState::Ok => {}
                WorkerState::Connecting => connecting.push(name.as_str()),
                other => say(format!("worker {name}: {other}")),
            }
        }
        if !connecting.is_empty() {
            say(connecting_line(&connecting));
        }
    }

    /// Ends the display.
    pub fn finish(&mut self) {
        if let Some((multi, bars)) = self.bars.take() {
            // Where each chain got to, also when the campaign was interrupted; nothing
            // draws over the lines printed after them.
            for bar in bars.values() {
                bar.abandon();
            }
            drop(bars);
            drop(multi);
            // indicatif leaves the cursor at the end of the last bar: what follows starts
            // on a line of its own.
            eprintln!();
        }
    }
}

/// Workers still connecting, in one line: a hundred of them would otherwise be a hundred
/// lines every tick.
fn connecting_line(names: &[&str]) -> String {
    const SHOWN: usize = 8;
    let mut line = match names {
        [one] => format!("worker {one}: connecting"),
        _ => format!(
            "{} workers connecting: {}",
            names.len(),
            names[..names.len().min(SHOWN)].join(", ")
        ),
    };
    if names.len() > SHOWN {
        line.push_str(&format!(" and {} more", names.len() - SHOWN));
    }
    line
}

/// An experiment's step budget.
fn total(config: &CampaignConfig, experiment: &str) -> u32 {
    config
        .experiment(experiment)
        .map_or(0, |e| e.search.steps())
}

/// A chain's acceptance, best (against `baseline`) and ETA, each as every command says it;
/// for a screening chain, the effects it measured instead of acceptance and best.
fn summary(
    state: &ChainState,
    baseline: Option<&f64>,
    unit: &str,
    eta: Option<f64>,
    screening: bool,
) -> String {
    if screening {
        let effects = state.effect_count().to_string();
        let eta = eta.map_or_else(|| "-".to_string(), format_secs);
        return format!("{effects}, eta {eta}");
    }
    let baseline = baseline.copied().unwrap_or(f64::NAN);
    let best = match best_cells(best_of(state, baseline), baseline, state.next_decide, unit) {
        [best, ratio] if best != "-" => format!("best {best} ({ratio})"),
        [_, words] => words,
    };
    let accepted = format_acceptance(state.accepted, state.proposals.unwrap_or(0));
    let eta = eta.map_or_else(|| "-".to_string(), format_secs);
    format!("accepted {accepted}, {best}, eta {eta}")
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    use kiln_protocol::DecisionSet;

    use super::{connecting_line, summary};
    use crate::store::{ChainState, Effect};

    #[test]
    fn a_screening_chain_says_the_effects_it_measured() {
        let rng = ChaCha8Rng::seed_from_u64(1);
        let mut state = ChainState::at_start(&DecisionSet::default(), vec![100.0], rng, 0.0, 0);
        for (site, change) in [("a", Some(-0.01)), ("b", Some(0.02)), ("c", None)] {
            let effect = Effect {
                change,
                uncertainty: 0.0,
                value: None,
            };
            state.effects.insert(site.into(), effect);
        }
        let line = summary(&state, Some(&100.0), "instr", Some(90.0), true);
        assert_eq!(line, "2 effects (1 faster), eta 1m30s");
        let line = summary(&state, Some(&100.0), "instr", Some(90.0), false);
        assert!(line.starts_with("accepted "), "{line}");
    }

    #[test]
    fn workers_connecting_are_one_line() {
        assert_eq!(connecting_line(&["w1"]), "worker w1: connecting");
        assert_eq!(
            connecting_line(&["w1", "w2"]),
            "2 workers connecting: w1, w2"
        );
        let names: Vec<String> = (1..=100).map(|k| format!("w{k}")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        assert_eq!(
            connecting_line(&names),
            "100 workers connecting: w1, w2, w3, w4, w5, w6, w7, w8 and 92 more"
        );
    }
}
