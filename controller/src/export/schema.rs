//! The columns of every table `kiln export` writes, with their types and
//! meanings: the schema `kiln export --schema` prints and
//! docs/export-schema.md reproduces. A change here is a change of the
//! schema: bump [`EXPORT_VERSION`].

use std::collections::BTreeMap;

use serde::Serialize;

use kiln_protocol::{Metric, SiteFeatures};

use super::format::{Column, Type};
use super::Table;

/// The version of the export schema: 1 was CSV only with `unsupported` in
/// numeric columns; 2 typed every column (null for a missing or
/// unsupported value) and added the `support` and `dataset` tables, run
/// kinds and site features; 3 added the `dataset` table's `moot` column; 4
/// measured `effects` from the experiment's start (its context), with the
/// `context`, `estimate`, `residual` and `separable` columns; 5 added the
/// site features of the optimised code (`caller_code_*`, `callee_code_*`,
/// `caller_inlined_code_*`); 6 the `effects` table's caller's code in the
/// start's build and in the flip's (`caller_start_*`, `caller_flipped_*`), and
/// its `separable` rows read the separable builds of a flip only.
pub const EXPORT_VERSION: u32 = 6;

/// A column every store's table has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Col {
    /// Its name.
    pub name: &'static str,
    /// What it holds.
    pub ty: Type,
    /// What it means.
    pub meaning: &'static str,
}

const fn col(name: &'static str, ty: Type, meaning: &'static str) -> Col {
    Col { name, ty, meaning }
}

impl Col {
    /// The column of a table.
    pub fn column(&self) -> Column {
        Column::new(self.name, self.ty, self.meaning)
    }
}

/// The columns of a list.
pub fn columns(cols: &[Col]) -> Vec<Column> {
    cols.iter().map(Col::column).collect()
}

/// The names of a list of columns.
pub fn names(cols: &[Col]) -> Vec<&'static str> {
    cols.iter().map(|c| c.name).collect()
}

use Type::{Bool, Float, Int, Text};

/// The statistics written for each metric in the `steps` table.
pub const STEP_STATISTICS: &[&str] = &["median", "mean", "stddev", "ci_low", "ci_high"];

/// The fixed leading columns of the `steps` table.
pub const STEP_COLUMNS: &[Col] = &[
    col("campaign", Text, "campaign name (from the stored config)"),
    col("experiment", Text, "experiment name"),
    col("benchmark", Text, "the experiment's benchmark"),
    col("chain", Int, "chain index"),
    col("step", Int, "step index within the chain"),
    col("kind", Text, "`proposal`, `remeasure` (the incumbent measured again), `screen` (a screening step: a guided chain's flip, or a step of the `screening` search, one flip or a shared build), `restart` (hill climbing leaving a local optimum) or `manual` (`kiln benchmark --store`, experiment `manual:BENCHMARK`)"),
    col("parent", Int, "the step whose state it was proposed from; null: the baseline"),
    col("changed", Int, "decisions that differ from the parent state"),
    col("worker", Text, "worker that measured it"),
    col("slot", Int, "slot on that worker"),
    col("decision_hash", Text, "content hash of the full decision set"),
    col("cached_from", Text, "`CHAIN/STEP` of the step whose measurement was reused (same decision set); null: measured afresh"),
    col("outcome", Text, "`ok`, `build-failed`, `run-failed`, `timeout`, `wrong-output`, `decision-mismatch`, …"),
    col("failure", Text, "why the step failed, in one line: the outcome and the last line of its stderr or build log; empty for `ok`"),
    col("accepted", Bool, "whether the chain moved to this step's decisions"),
    col("compared_with", Float, "objective it was compared with (the incumbent's; for a manual step, the baseline measured alongside it)"),
    col("temperature", Float, "annealing temperature at the step (0 for manual steps)"),
    col("objective", Float, "the configured statistic of the objective metric; null if the step failed"),
    col("baseline", Float, "the experiment's baseline objective (median of its measurements)"),
    col("time_ratio", Float, "`objective / baseline`: below 1 is faster (the speed convention of every command, file and plot)"),
    col("measured_runs", Int, "runs counted in the statistics (warm-ups excluded)"),
    col("target_met", Bool, "whether the runs reached the configured confidence target"),
    col("cut_short", Bool, "whether racing stopped the step's runs early: its objective comes from `measured_runs` runs, fewer than a full measurement's (see docs/configs.md, racing)"),
    col("build_ns", Int, "build wall time in ns (of the build it reused, where `build_reused`)"),
    col("build_reused", Bool, "whether the step's binary came from the worker's build cache; null without a build"),
    col("text_bytes", Int, "size of the binary's .text section"),
    col("dispatched_ms", Int, "when the controller queued the step for a worker (Unix ms); it may wait there for a free slot, so `recorded_ms` − `dispatched_ms` is not the step's time on its worker (`kiln show --json`'s `started_ms` and `finished_ms` are)"),
    col("recorded_ms", Int, "when the step was stored (Unix ms)"),
    col("decided_ms", Int, "when the chain decided the step (Unix ms)"),
];

/// The fixed leading columns of the `runs` table.
pub const RUN_COLUMNS: &[Col] = &[
    col("experiment", Text, "the step's experiment"),
    col("chain", Int, "the step's chain"),
    col("step", Int, "the step"),
    col("worker", Text, "worker that ran it"),
    col("slot", Int, "slot on that worker"),
    col("outcome", Text, "the step's outcome"),
    col("reused", Bool, "whether the step reused another step's measurement (its runs repeat that step's)"),
    col("run", Int, "index among the step's runs"),
    col("kind", Text, "`warm-up` (left out of the statistics), `timed`, `callgrind` (the run under valgrind that counts `instructions`), or `re-measure` (a timed run of a re-measurement of the incumbent); calibration runs are not stored"),
    col("warmup", Bool, "whether the run was a warm-up"),
    col("exit_code", Int, "the run's exit code; null if it was killed"),
    col("signal", Int, "the signal that killed it; null if it exited"),
];

/// The columns of the long `decisions` table.
pub const DECISION_COLUMNS: &[Col] = &[
    col("experiment", Text, "the step's experiment"),
    col("chain", Int, "the step's chain"),
    col("step", Int, "the step"),
    col(
        "site",
        Text,
        "decision point id (call-site key or knob name)",
    ),
    col(
        "value",
        Text,
        "its value (`inline`, `no-inline`, or a knob value)",
    ),
];

/// The leading columns of the wide `decisions` table (one column per site follows).
pub const WIDE_DECISION_COLUMNS: &[Col] = &[
    col("experiment", Text, "the step's experiment"),
    col("chain", Int, "the step's chain"),
    col("step", Int, "the step"),
];

/// The fixed columns of the `sites` table (the site features follow).
pub const SITE_COLUMNS: &[Col] = &[
    col("experiment", Text, "the experiment whose point it is"),
    col("benchmark", Text, "its benchmark"),
    col("index", Int, "position in discovery order"),
    col("site", Text, "decision point id"),
    col(
        "stock",
        Text,
        "the stock compiler's decision (llvm-inline) or the knob's default",
    ),
    col(
        "domain",
        Text,
        "the values it may take, separated by spaces",
    ),
];

/// The columns of the `support` table.
pub const SUPPORT_COLUMNS: &[Col] = &[
    col("worker", Text, "the worker"),
    col("metric", Text, "a metric present in the store"),
    col("unit", Text, "its unit"),
    col(
        "supported",
        Bool,
        "whether the worker measured it in some step",
    ),
    col(
        "measured_steps",
        Int,
        "steps of the worker with statistics of the metric",
    ),
    col(
        "unsupported_steps",
        Int,
        "steps of the worker in which some run could not measure it (no PMU, no GPU, no valgrind)",
    ),
];

/// The fixed columns of the `dataset` table (the site features follow).
pub const DATASET_COLUMNS: &[Col] = &[
    col("experiment", Text, "the step's experiment"),
    col("benchmark", Text, "its benchmark"),
    col("chain", Int, "the step's chain"),
    col("step", Int, "the step"),
    col("site", Text, "the decision point"),
    col("value", Text, "the step's decision at the site"),
    col("stock", Text, "the stock decision at the site"),
    col("differs", Bool, "whether the step's decision differs from the stock decision"),
    col("moot", Bool, "whether the decision was moot in the step: the site's call did not exist in its build (a function of its chain was not inlined there, or an inner function took the call first; `kiln show` says which), so the value decided nothing; null without a build"),
    col("outcome", Text, "the step's outcome"),
    col("objective", Float, "the step's objective; null if it failed"),
    col("time_ratio", Float, "the step's objective / the stock build's (the baseline): below 1 is faster; null if the step failed"),
];

/// The columns of the `effects` table.
pub const EFFECT_COLUMNS: &[Col] = &[
    col("experiment", Text, "the experiment"),
    col("benchmark", Text, "its benchmark"),
    col("site", Text, "the decision point"),
    col("stock", Text, "the stock decision at the site"),
    col("value", Text, "the value it was flipped to, every other site at its decision in the context"),
    col("effect", Float, "(flipped objective − start objective) / start objective, the start being the context's decisions: below 0 the flip is faster (fewer instructions); the median over its steps"),
    col("exact", Bool, "whether the objective counts exactly (callgrind's instructions), so the effect has no noise"),
    col("std_error", Float, "the effect's standard error where the objective is noisy: over its steps where several measured it, else from the one step's 95 % interval; null where exact"),
    col("steps", Int, "successful steps that measured the flip"),
    col("context", Text, "the decisions the flip was made from: `stock`, or the name of the experiment's `(baseline FILE)` (a searched best set, a random one)"),
    col("estimate", Text, "`alone` (the flip was the step's only one) or `shared-build` (screening's `(flips-per-step K)`: one of several flips whose functions overlap no other's, its change read from the instructions its caller and callee executed themselves)"),
    col("residual", Float, "shared builds: the largest change, relative to the start's count, of the functions no flip of the builds the row reads touched: a bound on what the estimate may have missed; null where alone"),
    col("separable", Bool, "shared builds: whether some build of the flip had its residual within 0.01 % of the start's count, the row then reading those builds only; false where none had, the row reading them all (a build whose residual passed it has its flips built again in two halves, or measured alone, rows of their own, which differ from it by how the flip interacted with its build's other flips); true where alone"),
    col("caller_start_instructions", Int, "the optimised code of the function the call sits in, in the build of the context's decisions: machine instructions (as the site feature `caller_code_instructions` counts them, summed over the function's copies); null where it did not run or its code was not read (screening without shared builds, no objdump, not x86-64)"),
    col("caller_start_vector", Int, "its vector instructions, in the same build"),
    col("caller_start_calls", Int, "its calls left, in the same build"),
    col("caller_start_loops", Int, "its loops, in the same build"),
    col("caller_flipped_instructions", Int, "the same function's machine instructions in the build with the flip (the first step that measured it; in a shared build no other flip touches it); null as above"),
    col("caller_flipped_vector", Int, "its vector instructions, with the flip"),
    col("caller_flipped_calls", Int, "its calls left, with the flip"),
    col("caller_flipped_loops", Int, "its loops, with the flip"),
];

/// The columns of the `rewards` table.
pub const REWARD_TABLE_COLUMNS: &[Col] = &[
    col("experiment", Text, "the experiment"),
    col("site", Text, "the decision point"),
    col("value", Text, "its value"),
    col("status", Text, "`stock` (the reference, reward 0), `fitted`, `never-varied` (the steps never changed the site: no reward) or `too-rare` (the value, or the site's stock value, was seen in fewer than `--min-count` steps: no reward)"),
    col("reward", Float, "the change of benefit (log-speedup by default: higher is better) from taking this value instead of the stock one; null where there is none"),
    col("std_error", Float, "its standard error; null where there is none (no reward, or no residual degrees of freedom)"),
    col("count", Int, "successful steps in which the site took this value"),
];

/// What a statistic of [`STEP_STATISTICS`] is, over a step's measured runs.
fn statistic(s: &str) -> &'static str {
    match s {
        "median" => "median",
        "mean" => "mean",
        "stddev" => "standard deviation",
        "ci_low" => "low bound of the 95 % confidence interval of the median",
        "ci_high" => "high bound of the 95 % confidence interval of the median",
        _ => "statistic",
    }
}

/// The columns of the `steps` table's statistics of a metric.
pub fn step_metric_columns(m: Metric) -> impl Iterator<Item = Column> {
    STEP_STATISTICS.iter().map(move |s| {
        Column::new(
            format!("{}.{s}", m.name()),
            Float,
            format!(
                "the {} of `{}` over the measured runs, {}",
                statistic(s),
                m.name(),
                m.unit()
            ),
        )
    })
}

/// The `runs` table's column of a metric.
pub fn run_metric_column(m: Metric) -> Column {
    Column::new(
        m.name(),
        Float,
        format!("the run's `{}`, {}", m.name(), m.unit()),
    )
}

/// One feature of a site, a field of [`SiteFeatures`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Feature {
    /// The field's name in [`SiteFeatures`]' serialized form.
    pub key: String,
    /// The column.
    pub column: Column,
}

/// Every field of [`SiteFeatures`], in declaration order, as a typed
/// column: found through serde, so a field added there is exported
/// without a change here. The type is the first JSON value the field reads
/// (`true`: bool; `0.5`: float; `-1` or `1`: int; else text); the meaning
/// is [`FEATURE_MEANINGS`]'s, where it has one.
pub fn features() -> Vec<Feature> {
    let text = serde_json::to_string(&SiteFeatures::default()).expect("features serialize");
    let Keys(keys) = serde_json::from_str(&text).expect("features serialize as a map");
    let probes = [
        (serde_json::json!(true), Bool),
        (serde_json::json!(0.5), Float),
        (serde_json::json!(-1), Int),
        (serde_json::json!(1), Int),
    ];
    keys.iter()
        .map(|key| {
            let ty = probes
                .iter()
                .find(|(v, _)| {
                    let one = serde_json::json!({ key.as_str(): v });
                    serde_json::from_value::<SiteFeatures>(one).is_ok()
                })
                .map_or(Text, |(_, t)| *t);
            let name = key.replace('-', "_");
            let meaning = FEATURE_MEANINGS
                .iter()
                .find(|(k, _)| *k == name)
                .map_or("a site feature (see protocol/src/features.rs)", |(_, m)| m);
            Feature {
                key: key.clone(),
                column: Column::new(name, ty, meaning),
            }
        })
        .collect()
}

/// The keys of a JSON object, in its order.
struct Keys(Vec<String>);

impl<'de> serde::Deserialize<'de> for Keys {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Keys, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = Keys;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a map")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Keys, A::Error> {
                let mut keys = Vec::new();
                while let Some((key, serde::de::IgnoredAny)) = map.next_entry()? {
                    keys.push(key);
                }
                Ok(Keys(keys))
            }
        }
        d.deserialize_map(Visit)
    }
}

/// What each feature means (the doc comments of [`SiteFeatures`]).
const FEATURE_MEANINGS: &[(&str, &str)] = &[
    ("chain_length", "elements in the site's call-site chain: 1 for a call written in its caller, 2 for one that reached it through one inlining, …"),
    ("inline_cost", "the inliner's cost estimate for the site (stock build's remarks)"),
    ("inline_threshold", "the inliner's threshold for the site: it inlines when the cost is below"),
    ("caller_instructions", "IR instructions of the caller before inlining"),
    ("caller_blocks", "basic blocks of the caller before inlining"),
    ("callee_instructions", "IR instructions of the callee before inlining"),
    ("callee_blocks", "basic blocks of the callee before inlining"),
    ("loop_depth", "loops around the call in its caller (0: not in a loop)"),
    ("callee_call_sites", "direct call sites of the callee in the whole program"),
    ("callee_recursive", "whether the callee calls itself, directly"),
    ("callee_external", "whether the callee has external linkage: other units may call it, so inlining every call of its own unit does not delete it"),
    ("constant_arguments", "arguments of the call that are constants"),
    ("caller_self_cost", "instructions executed in the caller itself (callgrind Ir, stock build)"),
    ("caller_inclusive_cost", "instructions executed in the caller and everything it called"),
    ("caller_calls", "times the caller was entered in the stock build's profile (calls of it from anywhere); site_calls over it is the call's block frequency"),
    ("callee_self_cost", "instructions executed in the callee itself"),
    ("callee_inclusive_cost", "instructions executed in the callee and everything it called"),
    ("site_calls", "times the callee was called from the caller in the stock build's profile; null where the stock build inlined the site"),
    ("uninlined_calls", "times the call ran in a build that inlines nothing (callgrind): a count also for calls the stock build inlined; through a chain of inlined calls, the innermost call's count times each inlined function's share of entries from the chain's calls"),
    ("caller_code_instructions", "machine instructions of the caller in the stock build's optimised code (padding left out); null where the stock build kept no copy of it"),
    ("caller_code_vector", "of those, instructions on several elements of a vector register (vectorised code)"),
    ("caller_code_calls", "calls left in the caller's optimised code"),
    ("caller_code_loops", "loops in the caller's optimised code (addresses a later branch of it goes back to)"),
    ("callee_code_kept", "whether the stock build keeps a copy of the callee of its own (false: inlined everywhere, or removed)"),
    ("callee_code_instructions", "machine instructions of the callee's own copy in the stock build"),
    ("callee_code_vector", "of those, vector instructions"),
    ("callee_code_calls", "calls left in the callee's own copy"),
    ("callee_code_loops", "loops in the callee's own copy"),
    ("caller_inlined_code_instructions", "machine instructions of the caller in the build that inlines every call it can (discovery's)"),
    ("caller_inlined_code_vector", "of those, vector instructions"),
    ("caller_inlined_code_calls", "calls left in the caller when everything is inlined"),
    ("caller_inlined_code_loops", "loops in the caller when everything is inlined"),
];

/// A table's documented schema.
#[derive(Debug, Clone, Serialize)]
pub struct TableSchema {
    /// The table's name.
    pub table: &'static str,
    /// What one row is.
    pub rows: &'static str,
    /// Its columns; a name in capitals (`METRIC.median`, `METRIC`, `SITE`)
    /// stands for one column per metric or site.
    pub columns: Vec<Column>,
}

/// The whole export schema.
#[derive(Debug, Clone, Serialize)]
pub struct Schema {
    /// [`EXPORT_VERSION`].
    pub version: u32,
    /// Every table.
    pub tables: Vec<TableSchema>,
}

/// The schema of every table.
pub fn schema() -> Schema {
    let feature_columns = || features().into_iter().map(|f| f.column);
    let metric = Column::new("METRIC", Float, "one column per metric present in the store, named as the metric (`wall-time`, …): the run's value in the metric's unit; null where the worker could not measure it or the run has no value");
    let mut steps = columns(STEP_COLUMNS);
    steps.extend(STEP_STATISTICS.iter().map(|s| {
        Column::new(
            format!("METRIC.{s}"),
            Float,
            format!("for every metric in the store, in `kiln-worker probe`'s order: its {} over the measured runs; null where not measured", statistic(s)),
        )
    }));
    let mut runs = columns(RUN_COLUMNS);
    runs.push(metric);
    let mut wide = columns(WIDE_DECISION_COLUMNS);
    wide.push(Column::new("SITE", Text, "with `--wide`: one column per decision point, named by its id, in discovery order: the step's value; null for a point of another experiment"));
    let mut sites = columns(SITE_COLUMNS);
    sites.extend(feature_columns());
    let mut dataset = columns(DATASET_COLUMNS);
    dataset.extend(feature_columns());
    let mut effects = columns(EFFECT_COLUMNS);
    effects.extend(feature_columns());
    let table = |t: Table, rows, columns| TableSchema {
        table: t.name(),
        rows,
        columns,
    };
    Schema {
        version: EXPORT_VERSION,
        tables: vec![
            table(Table::Steps, "one per decided step, in store order (experiment, chain, step)", steps),
            table(Table::Runs, "one per run of every step, warm-ups included", runs),
            table(Table::Decisions, "one per (step, site): the full decision set of every step", columns(DECISION_COLUMNS)),
            TableSchema {
                table: "decisions --wide",
                rows: "one per step",
                columns: wide,
            },
            table(Table::Sites, "one per decision point of every experiment, with its features (null where a feature could not be had)", sites),
            table(Table::Support, "one per (worker, metric present in the store)", columns(SUPPORT_COLUMNS)),
            table(Table::Dataset, "one per (step, decision point of its experiment): ready for training", dataset),
            table(Table::Effects, "one per (site, value, estimate) of every experiment that some successful step measured away from the experiment's start (the stock decisions or its baseline file): one flip alone (a screening step, or any step that happens to be one), or several in one of screening's shared builds; a flip that was moot in its build is left out: the site's own effect in that context, with its features", effects),
            table(Table::Rewards, "one per (site, value) of every experiment, from `kiln rewards` with its defaults (target `log-speedup`, λ = 1, `--min-count 3`); the export measures nothing and writes no file", columns(REWARD_TABLE_COLUMNS)),
        ],
    }
}

impl Schema {
    /// The schema as markdown, as docs/export-schema.md shows it.
    pub fn markdown(&self) -> String {
        let mut out = format!("Export schema version {}.\n", self.version);
        for t in &self.tables {
            out.push_str(&format!("\n`{}`: {}.\n\n", t.table, t.rows));
            out.push_str("| column | type | meaning |\n|---|---|---|\n");
            for c in &t.columns {
                out.push_str(&format!(
                    "| `{}` | {} | {} |\n",
                    c.name,
                    c.ty.name(),
                    c.meaning.replace('|', "\\|")
                ));
            }
        }
        out
    }
}

/// Each feature's cells for one site: null where it is absent.
pub fn feature_values(features: &[Feature], site: Option<&SiteFeatures>) -> Vec<serde_json::Value> {
    let Some(site) = site else {
        return vec![serde_json::Value::Null; features.len()];
    };
    let mut map: BTreeMap<String, serde_json::Value> =
        match serde_json::to_value(site).expect("features serialize") {
            serde_json::Value::Object(m) => m.into_iter().collect(),
            _ => BTreeMap::new(),
        };
    features
        .iter()
        .map(|f| map.remove(&f.key).unwrap_or(serde_json::Value::Null))
        .collect()
}

/// The rows of the `sites` table for one benchmark's discovery, as JSON
/// objects keyed by column name (what its JSON-lines export holds), with
/// `experiment` naming the experiment (or, outside a campaign, the benchmark).
pub fn site_records(
    experiment: &str,
    benchmark: &str,
    discovery: &kiln_protocol::message::Discovery,
) -> Vec<serde_json::Map<String, serde_json::Value>> {
    use serde_json::Value;
    let features = features();
    discovery
        .points
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let domain: Vec<String> = p.domain.iter().map(ToString::to_string).collect();
            let fixed = [
                Value::from(experiment),
                Value::from(benchmark),
                Value::from(i as u64),
                Value::from(p.id.as_str()),
                discovery
                    .baseline
                    .get(&p.id)
                    .map_or(Value::Null, |v| Value::from(v.to_string())),
                Value::from(domain.join(" ")),
            ];
            let names = SITE_COLUMNS.iter().map(|c| c.name.to_string());
            let values = fixed.into_iter();
            let feature_names = features.iter().map(|f| f.column.name.clone());
            let feature_values = feature_values(&features, discovery.features.get(&p.id));
            names
                .zip(values)
                .chain(feature_names.zip(feature_values))
                .collect()
        })
        .collect()
}
