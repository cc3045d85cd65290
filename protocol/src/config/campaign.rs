//! The campaign part: the whole config (its objective, infrastructure timeouts
//! and calibration), its reading and `(include ...)`, and its printing.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::benchmark::{
    decode_benchmark, decode_run_policy, BenchmarkKind, BenchmarkSpec, Limits, RunPolicy,
};
use super::record::{self as kind, record, Kind};
use super::search::{decode_experiment, Experiment};
use super::search::{Screening, Search, Start};
use super::workers::{decode_worker, WorkerSpec};
use super::{field_record, lexically_normal, path_sexp};
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

record! {
    /// The quantity a search minimises.
    #[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
    pub struct Objective {
        metric: Metric = word::METRIC, METRIC, default(Metric::WallTime),
            "The metric measured per run.";
        statistic: Statistic = word::STATISTIC, STATISTIC, default(Statistic::Median),
            "How runs are summarised into one figure.";
    }
}

const METRIC: Kind<Metric> = Kind {
    takes: "a metric (see Metrics)",
    decode: |f| {
        f.value(|src, node, field| {
            let name = decode::text(src, node, field)?;
            name.parse::<Metric>().map_err(|e| src.error(node.pos, e))
        })
    },
    print: |metric| vec![Sexp::symbol(metric.name())],
};

const STATISTIC: Kind<Statistic> = Kind {
    takes: "median, mean, min or trimmed-mean",
    decode: |f| {
        f.value(|src, node, field| {
            let name = decode::choice(src, node, field, Statistic::NAMES)?;
            Ok(Statistic::from_name(name).expect("choice comes from NAMES"))
        })
    },
    print: |statistic| vec![Sexp::symbol(statistic.name())],
};

/// Screening that flips several points a step reads each flip's effect from
/// the instructions of the functions it touches: only inlining sites name
/// those functions, and only callgrind counts instructions per function. Its
/// `(min-flips K)` is at most its `(flips-per-step K)`.
fn attribution_fits(
    src: Src<'_>,
    entry: &Sexp,
    experiment: &Experiment,
    objective: &Objective,
    benchmark: Option<&BenchmarkSpec>,
) -> Result<(), SexpError> {
    let Search::Screening(Screening {
        per_step,
        min_flips,
        ..
    }) = experiment.search
    else {
        return Ok(());
    };
    if min_flips > per_step {
        return Err(src.error(
            entry.pos,
            format!(
                "experiment '{}': (min-flips {min_flips}) is more than (flips-per-step \
                 {per_step}): no build could hold that many",
                experiment.name
            ),
        ));
    }
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

record! {
    /// Infrastructure timeouts.
    #[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
    pub struct Timeouts {
        connect_s: f64 = word::CONNECT_S, kind::POSITIVE_NUMBER, default(30.0),
            "Connecting to (and deploying on) a worker; 16 SSH workers connect at once, and \
             the time one waits for its turn is not counted.";
        heartbeat_s: f64 = word::HEARTBEAT_S, kind::POSITIVE_NUMBER, default(5.0),
            "Interval of heartbeats to a worker.";
        lost_after_s: f64 = word::LOST_AFTER_S, kind::POSITIVE_NUMBER, default(30.0),
            "A worker that answers nothing for this long is lost.";
        #[serde(default = "default_step_losses")]
        step_losses: u32 = word::STEP_LOSSES, kind::POSITIVE, default(3),
            "A step whose worker is lost this many times while running it is recorded failed \
             (the step ends its worker) instead of tried again.";
    }
}

impl Default for Objective {
    fn default() -> Self {
        Objective::decode_fields(&kind::no_fields(word::OBJECTIVE))
            .expect("every field has a default")
    }
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts::decode_fields(&kind::no_fields(word::TIMEOUTS))
            .expect("every field has a default")
    }
}

fn default_step_losses() -> u32 {
    Timeouts::default().step_losses
}

record! {
    /// Slot calibration: a reference benchmark measured on every slot, at connect and every
    /// `every` jobs, to catch slots whose speed drifts.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    pub struct Calibration {
        benchmark: String = word::BENCHMARK, kind::TEXT, required,
            "The benchmark (one of the campaign's), measured with its default decisions.";
        every: u32 = word::EVERY, kind::COUNT, default(50),
            "Calibrate a slot again after this many jobs on it (0: only at connect).";
        max_drift: f64 = word::MAX_DRIFT, kind::POSITIVE_NUMBER, default(0.05),
            "Largest tolerated relative change from the slot's first figure: |now / first − 1|.";
        take_out_of_service: bool = word::TAKE_OUT_OF_SERVICE, kind::BOOLEAN, default(false),
            "Whether a slot that drifts further gets no jobs until it calibrates within bounds again.";
    }
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

/// The fields of `(campaign ...)`: each a record of its own, or a list of them.
const TOP_WORDS: &[&str] = &[
    word::NAME,
    word::STORE,
    word::OBJECTIVE,
    word::RUNS,
    word::TIMEOUTS,
    word::CALIBRATION,
    word::EXPERIMENTS,
    word::BENCHMARKS,
    word::WORKERS,
];

/// The entries of `(benchmarks ...)`, includes read, each name once.
fn benchmarks(
    src: Src<'_>,
    field: &Field<'_>,
    base: Option<&Path>,
) -> Result<Vec<BenchmarkSpec>, SexpError> {
    let mut benchmarks: Vec<BenchmarkSpec> = Vec::new();
    // Names seen so far, in a set: a search of the list for each entry is
    // quadratic in a generated config of many thousand entries.
    let mut names = HashSet::new();
    for entry in decode::entries(field)? {
        let found = match form_args(entry, word::INCLUDE) {
            Some(args) => included_benchmarks(src, entry, args, base)?,
            None => vec![decode_benchmark(src, entry)?],
        };
        for b in found {
            if !names.insert(b.name.clone()) {
                return Err(src.error(
                    entry.pos,
                    format!("benchmark '{}' is defined twice", b.name),
                ));
            }
            benchmarks.push(b);
        }
    }
    Ok(benchmarks)
}

/// The entries of `(experiments ...)` with each `(each-benchmark ...)` written out as
/// one experiment per benchmark, named after it (and its suffix).
fn expand_each_benchmark(
    src: Src<'_>,
    field: &Field<'_>,
    benchmarks: &[BenchmarkSpec],
) -> Result<Vec<Sexp>, SexpError> {
    let mut entries = Vec::new();
    for entry in decode::entries(field)? {
        let Some(fields) = form_args(entry, "each-benchmark") else {
            entries.push(entry.clone());
            continue;
        };
        let (suffix, fields) = split_suffix(src, fields)?;
        entries.extend(benchmarks.iter().map(|b| {
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
        }));
    }
    Ok(entries)
}

/// The experiments, each over a defined benchmark, each name once.
fn experiments(
    src: Src<'_>,
    field: &Field<'_>,
    benchmarks: &[BenchmarkSpec],
    objective: &Objective,
) -> Result<Vec<Experiment>, SexpError> {
    let mut experiments: Vec<Experiment> = Vec::new();
    let mut names = HashSet::new();
    for entry in &expand_each_benchmark(src, field, benchmarks)? {
        let e = decode_experiment(src, entry)?;
        let Some(benchmark) = benchmarks.iter().find(|b| b.name == e.benchmark) else {
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
        };
        attribution_fits(src, entry, &e, objective, Some(benchmark))?;
        if !names.insert(e.name.clone()) {
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
    Ok(experiments)
}

/// The workers of `(workers ...)`, a slurm entry's nodes each a worker, each name once.
fn workers(src: Src<'_>, field: &Field<'_>) -> Result<Vec<WorkerSpec>, SexpError> {
    let mut workers: Vec<WorkerSpec> = Vec::new();
    let mut names = HashSet::new();
    for (i, entry) in decode::entries(field)?.iter().enumerate() {
        for w in decode_worker(src, entry, i)? {
            if !names.insert(w.name().to_string()) {
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
    Ok(workers)
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
            if let Search::Screening(s) = &mut e.search {
                s.skip_measured.iter_mut().for_each(resolve);
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
        let rec = Record::open(src, node, word::CAMPAIGN, Some(word::CAMPAIGN), TOP_WORDS)?;
        let name = rec.req_value(word::NAME, decode::name)?;
        let store = PathBuf::from(rec.req_value(word::STORE, decode::string)?);
        let objective = match rec.opt(word::OBJECTIVE) {
            Some(f) => objective(src, &f)?,
            None => Objective::default(),
        };
        let runs = match rec.opt(word::RUNS) {
            Some(f) => decode_run_policy(src, &f)?,
            None => RunPolicy::default(),
        };
        let timeouts = match rec.opt(word::TIMEOUTS) {
            Some(f) => timeouts(src, &f)?,
            None => Timeouts::default(),
        };
        let benchmarks = benchmarks(src, &rec.req(word::BENCHMARKS)?, base)?;
        let experiments = experiments(src, &rec.req(word::EXPERIMENTS)?, &benchmarks, &objective)?;
        let workers = workers(src, &rec.req(word::WORKERS)?)?;
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
        let mut fields = vec![
            Sexp::symbol(word::CAMPAIGN),
            f(word::NAME, vec![name_sexp(&self.name)]),
            f(word::STORE, vec![path_sexp(&self.store)]),
            f(word::OBJECTIVE, self.objective.print_fields()),
            f(word::RUNS, self.runs.print_fields()),
            f(word::TIMEOUTS, self.timeouts.print_fields()),
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

fn objective(src: Src<'_>, field: &Field<'_>) -> Result<Objective, SexpError> {
    Objective::decode_fields(&field_record(src, field, &Objective::words())?)
}

fn timeouts(src: Src<'_>, field: &Field<'_>) -> Result<Timeouts, SexpError> {
    Timeouts::decode_fields(&field_record(src, field, &Timeouts::words())?)
}

fn calibration(
    src: Src<'_>,
    field: &Field<'_>,
    benchmarks: &[BenchmarkSpec],
) -> Result<Calibration, SexpError> {
    let rec = field_record(src, field, &Calibration::words())?;
    let calibration = Calibration::decode_fields(&rec)?;
    let benchmark = &calibration.benchmark;
    if !benchmarks.iter().any(|b| &b.name == benchmark) {
        let known: Vec<_> = benchmarks.iter().map(|b| b.name.as_str()).collect();
        return Err(src.error(
            rec.req(word::BENCHMARK)?.pos,
            format!(
                "calibration names benchmark '{benchmark}', which is not defined; defined: {}",
                known.join(", ")
            ),
        ));
    }
    Ok(calibration)
}

impl Calibration {
    fn to_sexp(&self) -> Sexp {
        Sexp::field(word::CALIBRATION, self.print_fields())
    }
}
