//! The campaign part: the whole config (its objective, infrastructure timeouts
//! and calibration), its reading and `(include ...)`, and its printing.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::benchmark::{
    decode_benchmark, decode_run_policy, BenchmarkKind, BenchmarkSpec, Limits, RunPolicy,
};
use super::search::{decode_experiment, Experiment};
use super::search::{Search, Start};
use super::workers::{decode_worker, WorkerSpec};
use super::{boolean, field_record, float, int, lexically_normal, path_sexp};
use crate::decision::name_sexp;
use crate::decode::{self, Field, Record, Src};
use crate::metric::Metric;
use crate::sexp::{self, Sexp, SexpError, SexpKind};
use crate::stats::Statistic;

/// The words of this part of the config language that decoding, the lists of
/// allowed fields and printing share: each spelled once, here.
mod word {
    pub const BENCHMARK: &str = "benchmark";
    pub const BENCHMARKS: &str = "benchmarks";
    pub const CALIBRATION: &str = "calibration";
    pub const CAMPAIGN: &str = "campaign";
    pub const CONNECT_S: &str = "connect-s";
    pub const EVERY: &str = "every";
    pub const EXPERIMENTS: &str = "experiments";
    pub const HEARTBEAT_S: &str = "heartbeat-s";
    pub const INCLUDE: &str = "include";
    pub const LOST_AFTER_S: &str = "lost-after-s";
    pub const MAX_DRIFT: &str = "max-drift";
    pub const METRIC: &str = "metric";
    pub const NAME: &str = "name";
    pub const OBJECTIVE: &str = "objective";
    pub const RUNS: &str = "runs";
    pub const STATISTIC: &str = "statistic";
    pub const STEP_LOSSES: &str = "step-losses";
    pub const STORE: &str = "store";
    pub const SUFFIX: &str = "suffix";
    pub const TAKE_OUT_OF_SERVICE: &str = "take-out-of-service";
    pub const TIMEOUTS: &str = "timeouts";
    pub const WORKERS: &str = "workers";
}

/// A whole campaign: what to search, how to measure, where to run and store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CampaignConfig {
    /// The campaign's name.
    pub name: String,
    /// The store's folder (sled database, artifacts, logs).
    pub store: PathBuf,
    /// What the search minimises.
    pub objective: Objective,
    /// How many times each candidate runs.
    pub runs: RunPolicy,
    /// Timeouts of the infrastructure (benchmarks carry their own).
    pub timeouts: Timeouts,
    /// Slot calibration, if configured.
    pub calibration: Option<Calibration>,
    /// The searches to run.
    pub experiments: Vec<Experiment>,
    /// The benchmarks experiments refer to.
    pub benchmarks: Vec<BenchmarkSpec>,
    /// The machines that run steps.
    pub workers: Vec<WorkerSpec>,
}

/// The quantity a search minimises.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Objective {
    /// The metric measured per run.
    pub metric: Metric,
    /// How runs are summarised into one figure.
    pub statistic: Statistic,
}

/// Screening that flips several points a step reads each flip's effect from
/// the instructions of the functions it touches: only inlining sites name
/// those functions, and only callgrind counts instructions per function.
fn attribution_fits(
    src: Src<'_>,
    entry: &Sexp,
    experiment: &Experiment,
    objective: &Objective,
    benchmark: Option<&BenchmarkSpec>,
) -> Result<(), SexpError> {
    let Search::Screening { per_step, .. } = experiment.search else {
        return Ok(());
    };
    let inline = benchmark.is_some_and(|b| matches!(b.kind, BenchmarkKind::LlvmInline { .. }));
    if per_step == 1 || (inline && objective.metric == Metric::Instructions) {
        return Ok(());
    }
    Err(src.error(
        entry.pos,
        format!(
            "experiment '{}': (flips-per-step {per_step}) needs an llvm-inline benchmark and \
             (objective (metric instructions)): each flip's effect is read from callgrind's \
             instructions per function",
            experiment.name
        ),
    ))
}

/// Infrastructure timeouts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Timeouts {
    /// Connecting to (and deploying on) a worker.
    pub connect_s: f64,
    /// Interval of heartbeats to a worker.
    pub heartbeat_s: f64,
    /// A worker that answers nothing for this long is lost.
    pub lost_after_s: f64,
    /// A step whose worker is lost this many times while running it is
    /// recorded failed (the step ends its worker) instead of tried again.
    #[serde(default = "default_step_losses")]
    pub step_losses: u32,
}

fn default_step_losses() -> u32 {
    Timeouts::default().step_losses
}

/// Slot calibration: a reference benchmark measured on every slot, at connect and every
/// `every` jobs, to catch slots whose speed drifts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// The benchmark (one of the campaign's), measured with its default decisions.
    pub benchmark: String,
    /// Calibrate a slot again after this many jobs on it (0: only at connect).
    pub every: u32,
    /// Largest tolerated relative change from the slot's first figure: |now / first − 1|.
    pub max_drift: f64,
    /// Whether a slot that drifts further gets no jobs until it calibrates within bounds again.
    pub take_out_of_service: bool,
}

impl Calibration {
    /// Defaults of the optional fields.
    pub const DEFAULT_EVERY: u32 = 50;
    /// Default `max-drift`.
    pub const DEFAULT_MAX_DRIFT: f64 = 0.05;
}

/// The largest config kiln reads: a config is written by hand, so anything
/// near this is a wrong file given as a config.
pub const CONFIG_MAX_BYTES: u64 = 16 << 20;

/// The arguments of a `(WORD args...)` form, if `node` is one.
fn form_args<'a>(node: &'a Sexp, word: &str) -> Option<&'a [Sexp]> {
    match node.as_list()? {
        [first, args @ ..] if matches!(&first.kind, SexpKind::Symbol(s) if s == word) => Some(args),
        _ => None,
    }
}

/// `(suffix S)` among an `each-benchmark` form's fields, and the other fields: its
/// experiments are then named `BENCHMARK-S`, so that one campaign may hold several
/// experiments a benchmark (effects around stock and around a random set, say).
fn split_suffix(src: Src<'_>, fields: &[Sexp]) -> Result<(Option<String>, Vec<Sexp>), SexpError> {
    let mut suffix = None;
    let mut rest = Vec::new();
    for field in fields {
        match form_args(field, word::SUFFIX) {
            Some([value]) if suffix.is_none() => {
                suffix = Some(decode::name(src, value, word::SUFFIX)?);
            }
            Some(_) => {
                return Err(src.error(
                    field.pos,
                    "each-benchmark takes one (suffix NAME), with one name",
                ))
            }
            None => rest.push(field.clone()),
        }
    }
    Ok((suffix, rest))
}

/// The benchmarks an `(include "PATH")` entry of `(benchmarks ...)` names: the
/// one entry of the file PATH, or of each `.sexp` file of the folder PATH in
/// name order, relative to the including config's folder `base`. Errors in
/// an included file name that file; the paths in its entry are relative to
/// its own folder.
fn included_benchmarks(
    src: Src<'_>,
    entry: &Sexp,
    args: &[Sexp],
    base: Option<&Path>,
) -> Result<Vec<BenchmarkSpec>, SexpError> {
    let [target] = args else {
        return Err(src.error(entry.pos, "include takes one path: (include \"corpus\")"));
    };
    let target = decode::string(src, target, word::INCLUDE)?;
    let Some(base) = base else {
        return Err(src.error(
            entry.pos,
            "include needs a config file to start from; config text alone cannot include",
        ));
    };
    let path = lexically_normal(&base.join(&target));
    let cannot =
        |e: std::io::Error| src.error(entry.pos, format!("cannot include {}: {e}", path.display()));
    let files: Vec<PathBuf> = if path.is_dir() {
        let mut files: Vec<PathBuf> = std::fs::read_dir(&path)
            .map_err(cannot)?
            .map(|e| e.map(|e| e.path()))
            .collect::<Result<_, _>>()
            .map_err(cannot)?;
        files.retain(|f| f.extension().is_some_and(|x| x == "sexp"));
        files.sort();
        files
    } else {
        vec![path.clone()]
    };
    if files.is_empty() {
        return Err(src.error(
            entry.pos,
            format!("{} holds no .sexp file to include", path.display()),
        ));
    }
    files
        .iter()
        .map(|file| {
            let node = sexp::parse_file(file, CONFIG_MAX_BYTES)?;
            let name = file.display().to_string();
            let mut b = decode_benchmark(Src(&name), &node)?;
            // Relative to the included file: made absolute, as the config's own
            // relative paths are made relative to its folder later.
            let dir = file
                .parent()
                .unwrap_or(Path::new("."))
                .canonicalize()
                .map_err(cannot)?;
            if b.sources.is_relative() {
                b.sources = lexically_normal(&dir.join(&b.sources));
            }
            Ok(b)
        })
        .collect()
}

impl CampaignConfig {
    /// Reads and checks a config file (a regular file of at most [`CONFIG_MAX_BYTES`]).
    ///
    /// Relative paths in it (store, sources, baseline decision files, SSH keys and known
    /// hosts, a worker binary to deploy) are relative to the config file's folder, so the
    /// config means the same from any folder it is run in.
    pub fn read(path: &Path) -> Result<Self, SexpError> {
        let node = sexp::parse_file(path, CONFIG_MAX_BYTES)?;
        let base = path.parent().unwrap_or(Path::new(""));
        let mut config = Self::from_sexp(Src(&path.display().to_string()), &node, Some(base))?;
        config.resolve_paths(path.parent().unwrap_or(Path::new("")));
        Ok(config)
    }

    /// Makes every relative path of the config relative to `base` (a config
    /// file's folder; empty when it is in the current one).
    fn resolve_paths(&mut self, base: &Path) {
        let resolve = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = lexically_normal(&base.join(&*p));
            }
        };
        resolve(&mut self.store);
        for e in &mut self.experiments {
            if let Some(Start::File(path)) = &mut e.baseline {
                resolve(path);
            }
        }
        for b in &mut self.benchmarks {
            resolve(&mut b.sources);
        }
        for w in &mut self.workers {
            if let WorkerSpec::Ssh(ssh) = w {
                ssh.identity.iter_mut().for_each(resolve);
                ssh.known_hosts.iter_mut().for_each(resolve);
                ssh.worker_binary.iter_mut().for_each(resolve);
            }
        }
    }

    /// Parses and checks config text; `source_name` labels errors.
    pub fn parse(text: &str, source_name: &str) -> Result<Self, SexpError> {
        let node = sexp::parse_single(text, source_name)?;
        Self::from_sexp(Src(source_name), &node, None)
    }

    /// The run limits some benchmark sets, each at its largest: what every worker
    /// must be able to apply.
    pub fn limits_in_use(&self) -> Limits {
        let largest = |f: fn(&Limits) -> Option<f64>| {
            self.benchmarks
                .iter()
                .filter_map(|b| f(&b.limits))
                .reduce(f64::max)
        };
        Limits {
            cpus: largest(|l| l.cpus),
            memory_bytes: largest(|l| l.memory_bytes.map(|m| m as f64)).map(|m| m as u64),
        }
    }

    /// The benchmark named `name`.
    pub fn benchmark(&self, name: &str) -> Option<&BenchmarkSpec> {
        self.benchmarks.iter().find(|b| b.name == name)
    }

    /// The experiment named `name`.
    pub fn experiment(&self, name: &str) -> Option<&Experiment> {
        self.experiments.iter().find(|e| e.name == name)
    }

    /// The normalized text of the config, every default spelled out.
    pub fn to_text(&self) -> String {
        format!("{}\n", self.to_sexp())
    }

    /// The config in `node`; `base`, the config file's folder, is where
    /// `(include ...)` paths start (none for config text without a file).
    fn from_sexp(src: Src<'_>, node: &Sexp, base: Option<&Path>) -> Result<Self, SexpError> {
        let rec = Record::open(
            src,
            node,
            word::CAMPAIGN,
            Some(word::CAMPAIGN),
            &[
                word::NAME,
                word::STORE,
                word::OBJECTIVE,
                word::RUNS,
                word::TIMEOUTS,
                word::CALIBRATION,
                word::EXPERIMENTS,
                word::BENCHMARKS,
                word::WORKERS,
            ],
        )?;
        let name = rec.req_value(word::NAME, decode::name)?;
        let store = PathBuf::from(rec.req_value(word::STORE, decode::string)?);
        let objective = match rec.opt(word::OBJECTIVE) {
            Some(f) => objective(src, &f)?,
            None => Objective {
                metric: Metric::WallTime,
                statistic: Statistic::Median,
            },
        };
        let runs = match rec.opt(word::RUNS) {
            Some(f) => decode_run_policy(src, &f)?,
            None => RunPolicy::default(),
        };
        let timeouts = match rec.opt(word::TIMEOUTS) {
            Some(f) => timeouts(src, &f)?,
            None => Timeouts::default(),
        };
        let benchmarks_field = rec.req(word::BENCHMARKS)?;
        let mut benchmarks: Vec<BenchmarkSpec> = Vec::new();
        // Names seen so far, in sets: a search of the list for each entry is
        // quadratic in a generated config of many thousand entries.
        let mut benchmark_names = HashSet::new();
        for entry in decode::entries(&benchmarks_field)? {
            let found = match form_args(entry, word::INCLUDE) {
                Some(args) => included_benchmarks(src, entry, args, base)?,
                None => vec![decode_benchmark(src, entry)?],
            };
            for b in found {
                if !benchmark_names.insert(b.name.clone()) {
                    return Err(src.error(
                        entry.pos,
                        format!("benchmark '{}' is defined twice", b.name),
                    ));
                }
                benchmarks.push(b);
            }
        }
        let experiments_field = rec.req(word::EXPERIMENTS)?;
        let mut experiments: Vec<Experiment> = Vec::new();
        let mut experiment_names = HashSet::new();
        let mut generated: Vec<Sexp> = Vec::new();
        for entry in decode::entries(&experiments_field)? {
            match form_args(entry, "each-benchmark") {
                // One experiment per benchmark, named after it, with the form's fields.
                Some(fields) => {
                    let (suffix, fields) = split_suffix(src, fields)?;
                    generated.extend(benchmarks.iter().map(|b| {
                        let name = match &suffix {
                            Some(suffix) => format!("{}-{suffix}", b.name),
                            None => b.name.clone(),
                        };
                        let mut items = vec![
                            Sexp::field(word::NAME, vec![name_sexp(&name)]),
                            Sexp::field(word::BENCHMARK, vec![name_sexp(&b.name)]),
                        ];
                        items.extend(fields.iter().cloned());
                        Sexp {
                            pos: entry.pos,
                            kind: SexpKind::List(items),
                        }
                    }))
                }
                None => generated.push(entry.clone()),
            }
        }
        for entry in &generated {
            let e = decode_experiment(src, entry)?;
            if !benchmark_names.contains(&e.benchmark) {
                let known: Vec<_> = benchmarks.iter().map(|b| b.name.as_str()).collect();
                return Err(src.error(
                    entry.pos,
                    format!(
                        "experiment '{}' names benchmark '{}', which is not defined; defined: {}",
                        e.name,
                        e.benchmark,
                        known.join(", ")
                    ),
                ));
            }
            let benchmark = benchmarks.iter().find(|b| b.name == e.benchmark);
            attribution_fits(src, entry, &e, &objective, benchmark)?;
            if !experiment_names.insert(e.name.clone()) {
                return Err(src.error(
                    entry.pos,
                    format!(
                        "two experiments are named '{}'; give one a (name ...), or an each-benchmark a (suffix ...)",
                        e.name
                    ),
                ));
            }
            experiments.push(e);
        }
        let workers_field = rec.req(word::WORKERS)?;
        let mut workers: Vec<WorkerSpec> = Vec::new();
        let mut worker_names = HashSet::new();
        for (i, entry) in decode::entries(&workers_field)?.iter().enumerate() {
            for w in decode_worker(src, entry, i)? {
                if !worker_names.insert(w.name().to_string()) {
                    return Err(src.error(
                        entry.pos,
                        format!(
                            "two workers are named '{}'; give one a (name ...)",
                            w.name()
                        ),
                    ));
                }
                workers.push(w);
            }
        }
        let calibration = match rec.opt(word::CALIBRATION) {
            Some(f) => Some(calibration(src, &f, &benchmarks)?),
            None => None,
        };
        Ok(CampaignConfig {
            name,
            store,
            objective,
            runs,
            timeouts,
            calibration,
            experiments,
            benchmarks,
            workers,
        })
    }

    /// The config as an s-expression, every default spelled out.
    pub fn to_sexp(&self) -> Sexp {
        let f = Sexp::field;
        let o = &self.objective;
        let r = &self.runs;
        let t = &self.timeouts;
        let mut fields = vec![
            Sexp::symbol(word::CAMPAIGN),
            f(word::NAME, vec![name_sexp(&self.name)]),
            f(word::STORE, vec![path_sexp(&self.store)]),
            f(
                word::OBJECTIVE,
                vec![
                    f(word::METRIC, vec![Sexp::symbol(o.metric.name())]),
                    f(word::STATISTIC, vec![Sexp::symbol(o.statistic.name())]),
                ],
            ),
            f(
                word::RUNS,
                vec![
                    f("warmup", vec![int(r.warmup)]),
                    f("min", vec![int(r.min)]),
                    f("max", vec![int(r.max)]),
                    f("target-rel-ci", vec![float(r.target_rel_ci)]),
                    f("max-time-s", vec![float(r.max_time_s)]),
                ],
            ),
            f(
                word::TIMEOUTS,
                vec![
                    f(word::CONNECT_S, vec![float(t.connect_s)]),
                    f(word::HEARTBEAT_S, vec![float(t.heartbeat_s)]),
                    f(word::LOST_AFTER_S, vec![float(t.lost_after_s)]),
                    f(word::STEP_LOSSES, vec![int(t.step_losses)]),
                ],
            ),
        ];
        // Printed only when given, so configs without it keep their normalized text.
        if let Some(c) = &self.calibration {
            fields.push(c.to_sexp());
        }
        fields.extend([
            f(
                word::EXPERIMENTS,
                self.experiments.iter().map(Experiment::to_sexp).collect(),
            ),
            f(
                word::BENCHMARKS,
                self.benchmarks.iter().map(BenchmarkSpec::to_sexp).collect(),
            ),
            f(
                word::WORKERS,
                self.workers.iter().map(WorkerSpec::to_sexp).collect(),
            ),
        ]);
        Sexp::list(fields)
    }
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            connect_s: 30.0,
            heartbeat_s: 5.0,
            lost_after_s: 30.0,
            step_losses: 3,
        }
    }
}

fn objective(src: Src<'_>, field: &Field<'_>) -> Result<Objective, SexpError> {
    let rec = field_record(src, field, &[word::METRIC, word::STATISTIC])?;
    let metric = match rec.opt(word::METRIC) {
        Some(f) => {
            let node = f.one()?;
            let name = decode::text(src, node, word::METRIC)?;
            name.parse::<Metric>().map_err(|e| src.error(node.pos, e))?
        }
        None => Metric::WallTime,
    };
    let statistic = match rec.opt(word::STATISTIC) {
        Some(f) => {
            let name = decode::choice(src, f.one()?, word::STATISTIC, Statistic::NAMES)?;
            Statistic::from_name(name).expect("choice comes from NAMES")
        }
        None => Statistic::Median,
    };
    Ok(Objective { metric, statistic })
}

fn timeouts(src: Src<'_>, field: &Field<'_>) -> Result<Timeouts, SexpError> {
    let rec = field_record(
        src,
        field,
        &[
            word::CONNECT_S,
            word::HEARTBEAT_S,
            word::LOST_AFTER_S,
            word::STEP_LOSSES,
        ],
    )?;
    let d = Timeouts::default();
    Ok(Timeouts {
        connect_s: rec
            .opt_value(word::CONNECT_S, decode::positive_number)?
            .unwrap_or(d.connect_s),
        heartbeat_s: rec
            .opt_value(word::HEARTBEAT_S, decode::positive_number)?
            .unwrap_or(d.heartbeat_s),
        lost_after_s: rec
            .opt_value(word::LOST_AFTER_S, decode::positive_number)?
            .unwrap_or(d.lost_after_s),
        step_losses: rec
            .opt_value(word::STEP_LOSSES, decode::positive32)?
            .unwrap_or(d.step_losses),
    })
}

fn calibration(
    src: Src<'_>,
    field: &Field<'_>,
    benchmarks: &[BenchmarkSpec],
) -> Result<Calibration, SexpError> {
    let rec = field_record(
        src,
        field,
        &[
            word::BENCHMARK,
            word::EVERY,
            word::MAX_DRIFT,
            word::TAKE_OUT_OF_SERVICE,
        ],
    )?;
    let benchmark = rec.req_value(word::BENCHMARK, decode::text)?;
    if !benchmarks.iter().any(|b| b.name == benchmark) {
        let known: Vec<_> = benchmarks.iter().map(|b| b.name.as_str()).collect();
        return Err(src.error(
            rec.req(word::BENCHMARK)?.pos,
            format!(
                "calibration names benchmark '{benchmark}', which is not defined; defined: {}",
                known.join(", ")
            ),
        ));
    }
    Ok(Calibration {
        benchmark,
        every: rec
            .opt_value(word::EVERY, decode::uint32)?
            .unwrap_or(Calibration::DEFAULT_EVERY),
        max_drift: rec
            .opt_value(word::MAX_DRIFT, decode::positive_number)?
            .unwrap_or(Calibration::DEFAULT_MAX_DRIFT),
        take_out_of_service: rec
            .opt_value(word::TAKE_OUT_OF_SERVICE, boolean)?
            .unwrap_or(false),
    })
}

impl Calibration {
    fn to_sexp(&self) -> Sexp {
        let f = Sexp::field;
        f(
            word::CALIBRATION,
            vec![
                f(word::BENCHMARK, vec![name_sexp(&self.benchmark)]),
                f(word::EVERY, vec![int(self.every)]),
                f(word::MAX_DRIFT, vec![float(self.max_drift)]),
                f(
                    word::TAKE_OUT_OF_SERVICE,
                    vec![Sexp::new(SexpKind::Bool(self.take_out_of_service))],
                ),
            ],
        )
    }
}
