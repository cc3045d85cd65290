//! The columns of every table `kiln export` writes. README.md, section
//! "Export schema", documents each; a change here is a change of the schema.

pub use crate::rewards::REWARD_COLUMNS;

/// The statistics written for each metric in the `steps` table.
pub const STEP_STATISTICS: &[&str] = &["median", "mean", "stddev", "ci_low", "ci_high"];

/// The fixed leading columns of the `steps` table.
pub const STEP_COLUMNS: &[&str] = &[
    "campaign",
    "experiment",
    "benchmark",
    "chain",
    "step",
    "kind",
    "parent",
    "changed",
    "worker",
    "slot",
    "decision_hash",
    "cached_from",
    "outcome",
    "failure",
    "accepted",
    "compared_with",
    "temperature",
    "objective",
    "baseline",
    "time_ratio",
    "measured_runs",
    "target_met",
    "cut_short",
    "build_ns",
    "build_reused",
    "text_bytes",
    "dispatched_ms",
    "recorded_ms",
    "decided_ms",
];

/// The fixed leading columns of the `runs` table.
pub const RUN_COLUMNS: &[&str] = &[
    "experiment",
    "chain",
    "step",
    "worker",
    "slot",
    "outcome",
    "reused",
    "run",
    "warmup",
    "exit_code",
    "signal",
];

/// The columns of the long `decisions` table.
pub const DECISION_COLUMNS: &[&str] = &["experiment", "chain", "step", "site", "value"];

/// The leading columns of the wide `decisions` table (one column per site follows).
pub const WIDE_DECISION_COLUMNS: &[&str] = &["experiment", "chain", "step"];

/// The columns of the `sites` table.
pub const SITE_COLUMNS: &[&str] = &[
    "experiment",
    "benchmark",
    "index",
    "site",
    "stock",
    "domain",
];
