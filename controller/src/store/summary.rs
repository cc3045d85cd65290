//! The summary of a decided step: what happened (its outcome and failure
//! reason, objective, build, timings and every metric's statistics), without
//! the runs and decisions its record holds. It is stored beside the step
//! (`row/...`, in the step's batch) so that readers of many steps (the
//! export's `steps` table, in `export/`) need not decode each step's JSON
//! (about 2.8 KB for a no-op step, most of it runs and decisions). What is
//! shown, and how, is the export's business, not the store's.
//!
//! A stored summary is one format byte ([`FORMAT`]) and then [`StepSummary`] in
//! postcard's encoding (the fields in order; integers as varints, `f64` as 8
//! bytes, strings and lists length-prefixed), about 270 bytes for a no-op
//! step. A metric is stored as a hash of its name ([`MetricKey`]), never by
//! its position in [`Metric::ALL`], which may change; statistics that repeat
//! are stored once ([`Stats`]). Changing [`StepSummary`] or a type in it changes
//! the format: give it a new [`FORMAT`] and keep reading the old one (a test
//! pins the bytes).

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use anyhow::{bail, Result};
use serde::de::{Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize, Serializer};

use kiln_protocol::{ContentHash, Metric, MetricValue, StepOutcome};

use super::{StepKind, StepRecord};

/// The first byte of a stored row: its format. Format 2 is format 1's row
/// followed by the failure reason (a length-prefixed string, empty for `ok`)
/// and whether the build was reused (a byte); rows of format 1 read with no
/// reason, their builds as not reused. Format 3 adds whether racing cut the
/// step short (a byte); rows of formats 1 and 2 read as not cut short.
const FORMAT: u8 = 3;

/// What happened in a decided step, in short (the `steps` table is made from it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepSummary<'a> {
    /// Experiment name.
    #[serde(borrow)]
    pub experiment: Cow<'a, str>,
    /// Chain index.
    pub chain: u32,
    /// Step index within the chain.
    pub step: u32,
    /// Why it was measured.
    pub kind: StepKind,
    /// The step whose state it was proposed from (`None`: the baseline).
    pub parent: Option<u32>,
    /// How many decisions differ from the parent state.
    pub changed: u64,
    /// Worker that ran it.
    #[serde(borrow)]
    pub worker: Cow<'a, str>,
    /// Slot on that worker.
    pub slot: u32,
    /// Content hash of the decision set.
    pub decision_hash: [u8; 32],
    /// `(chain, step)` of the earlier step whose measurement it reuses.
    pub cached_from: Option<(u32, u32)>,
    /// The outcome's name (`ok`, `build-failed`, …).
    #[serde(borrow)]
    pub outcome: Cow<'a, str>,
    /// The chain's verdict, if decided.
    pub decision: Option<SummaryDecision>,
    /// Temperature at this step.
    pub temperature: f64,
    /// The objective, if the step succeeded.
    pub objective: Option<f64>,
    /// Runs counted in the statistics (warm-ups excluded).
    pub measured_runs: u64,
    /// Whether the runs reached the configured confidence target.
    pub target_met: bool,
    /// The build, if one was attempted.
    pub build: Option<SummaryBuild>,
    /// When the step was handed to the pool (Unix ms).
    pub dispatched_ms: u64,
    /// When its result was stored (Unix ms).
    pub recorded_ms: u64,
    /// The statistics of each metric of the summary.
    pub summary: Vec<(MetricKey, Stats)>,
    /// The metrics some run could not measure.
    pub unsupported: Vec<MetricKey>,
    /// Why the step failed, in one line ([`kiln_protocol::StepOutcome::reason`]);
    /// empty for `ok`. Stored after the fields above (format 2).
    #[serde(skip)]
    pub failure: Cow<'a, str>,
    /// Whether the step's build was reused, not run (format 2).
    #[serde(skip)]
    pub build_reused: bool,
    /// Whether racing cut the step's runs short (format 3).
    #[serde(skip)]
    pub cut_short: bool,
}

/// The chain's verdict on a step, as its row keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SummaryDecision {
    /// Whether the chain moved to the step's decisions.
    pub accepted: bool,
    /// The objective it was compared with.
    pub compared_with: f64,
    /// When the chain decided (Unix ms).
    pub decided_ms: u64,
}

/// A step's build, as its row keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SummaryBuild {
    /// Build wall time (ns).
    pub wall_ns: u64,
    /// Size of the binary's .text section, where known.
    pub text_bytes: Option<u64>,
}

/// A metric as a row names it: the 32-bit FNV-1a hash of its name, as
/// lasting as the name (which the JSON stores), in 4 bytes instead of about
/// 12, and compared without a lookup. A metric this kiln does not know
/// matches none of its metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct MetricKey([u8; 4]);

/// The statistics of a metric that the `steps` table shows: median, mean,
/// stddev, ci_low, ci_high. Stored as bytes: a byte of 2-bit codes, one per
/// statistic after the median (0: stored, 1: the median, 2: zero), then the
/// median and the stored ones as little-endian `f64`. The statistics of a
/// single run, or of a deterministic metric, take 9 bytes instead of 40.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stats(pub [f64; 5]);

impl<'a> StepSummary<'a> {
    /// The row of a step record.
    pub fn of(record: &'a StepRecord) -> StepSummary<'a> {
        let result = &record.result;
        let measured = &result.measurement;
        let unsupported: BTreeSet<Metric> = measured
            .runs
            .iter()
            .flat_map(|run| &run.metrics)
            .filter(|(_, v)| matches!(v, MetricValue::Unsupported))
            .map(|(m, _)| *m)
            .collect();
        StepSummary {
            experiment: Cow::Borrowed(&record.key.experiment),
            chain: record.key.chain,
            step: record.key.step,
            kind: record.kind,
            parent: record.parent,
            changed: record.diff.0.len() as u64,
            worker: Cow::Borrowed(&record.worker),
            slot: record.slot,
            decision_hash: record.decision_hash.0,
            cached_from: record.cached_from.as_ref().map(|k| (k.chain, k.step)),
            outcome: Cow::Borrowed(measured.outcome.name()),
            decision: record.decision.as_ref().map(|d| SummaryDecision {
                accepted: d.accepted,
                compared_with: d.compared_with,
                decided_ms: d.decided_ms,
            }),
            temperature: record.temperature,
            objective: record.objective,
            measured_runs: measured.runs.iter().filter(|r| !r.warmup).count() as u64,
            target_met: measured.target_met,
            build: result.build.as_ref().map(|b| SummaryBuild {
                wall_ns: b.wall_ns,
                text_bytes: b.text_bytes,
            }),
            dispatched_ms: record.dispatched_ms,
            recorded_ms: record.recorded_ms,
            summary: measured
                .summary
                .iter()
                .map(|(m, s)| {
                    let stats = Stats([s.median, s.mean, s.stddev, s.ci_low, s.ci_high]);
                    (MetricKey::from(*m), stats)
                })
                .collect(),
            unsupported: unsupported.into_iter().map(MetricKey::from).collect(),
            failure: measured
                .outcome
                .reason()
                .map(Cow::Owned)
                .unwrap_or_default(),
            build_reused: result.build.as_ref().is_some_and(|b| b.reused),
            cut_short: measured.cut_short.is_some(),
        }
        .canonical()
    }

    /// The row of a step stored as JSON (a store of layout 1), decoding only
    /// what the row holds: strings are borrowed, runs and decisions counted.
    pub fn from_json(json: &'a [u8]) -> Result<StepSummary<'a>> {
        // From a str, serde_json need not check that each string it reads is UTF-8.
        let r: StepView<'a> = serde_json::from_str(std::str::from_utf8(json)?)?;
        Ok(StepSummary {
            experiment: r.key.experiment,
            chain: r.key.chain,
            step: r.key.step,
            kind: r.kind,
            parent: r.parent,
            changed: r.diff.0,
            worker: r.worker,
            slot: r.slot,
            decision_hash: r.decision_hash.0,
            cached_from: r.cached_from.map(|k| (k.chain, k.step)),
            outcome: Cow::Borrowed(r.result.outcome.name()),
            failure: r
                .result
                .outcome
                .reason()
                .map(Cow::Owned)
                .unwrap_or_default(),
            build_reused: r.result.build.as_ref().is_some_and(|b| b.reused),
            cut_short: r.result.cut_short.is_some(),
            decision: r.decision,
            temperature: r.temperature,
            objective: r.objective,
            measured_runs: r.result.runs.measured,
            target_met: r.result.target_met,
            build: r.result.build.as_ref().map(|b| SummaryBuild {
                wall_ns: b.wall_ns,
                text_bytes: b.text_bytes,
            }),
            dispatched_ms: r.dispatched_ms,
            recorded_ms: r.recorded_ms,
            summary: r.result.summary.0,
            unsupported: r
                .result
                .runs
                .unsupported
                .into_iter()
                .map(MetricKey::from)
                .collect(),
        }
        .canonical())
    }

    /// Metrics in key order, so that a row's bytes do not depend on the
    /// order of [`Metric`] when it was written.
    fn canonical(mut self) -> Self {
        self.summary.sort_by_key(|(m, _)| *m);
        self.unsupported.sort();
        self
    }

    /// The stored form.
    pub fn encode(&self) -> Result<Vec<u8>> {
        let tail = (&*self.failure, self.build_reused, self.cut_short);
        Ok(postcard::to_extend(&(self, tail), vec![FORMAT])?)
    }

    /// Reads a stored row.
    pub fn decode(bytes: &'a [u8]) -> Result<StepSummary<'a>> {
        let (mut row, left): (StepSummary<'a>, &[u8]) = match bytes.split_first() {
            Some((&(1..=FORMAT), rest)) => postcard::take_from_bytes(rest)?,
            Some((format, _)) => bail!("row format {format} is unknown to this kiln"),
            None => bail!("the row is empty"),
        };
        let left = match bytes[0] {
            1 => left,
            2 => {
                let ((failure, reused), left): ((&'a str, bool), &[u8]) =
                    postcard::take_from_bytes(left)?;
                row.failure = Cow::Borrowed(failure);
                row.build_reused = reused;
                left
            }
            _ => {
                let ((failure, reused, cut), left): ((&'a str, bool, bool), &[u8]) =
                    postcard::take_from_bytes(left)?;
                row.failure = Cow::Borrowed(failure);
                row.build_reused = reused;
                row.cut_short = cut;
                left
            }
        };
        if !left.is_empty() {
            bail!("{} bytes after the end of the row", left.len());
        }
        Ok(row)
    }
}

impl From<Metric> for MetricKey {
    fn from(metric: Metric) -> MetricKey {
        let hash = metric.name().bytes().fold(0x811c_9dc5u32, |hash, b| {
            (hash ^ u32::from(b)).wrapping_mul(0x0100_0193)
        });
        MetricKey(hash.to_le_bytes())
    }
}

impl Stats {
    /// What code stands for, given the median.
    fn coded(code: u8, median: f64) -> Option<f64> {
        match code {
            1 => Some(median),
            2 => Some(0.0),
            _ => None,
        }
    }
}

impl Serialize for Stats {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        let [median, others @ ..] = self.0;
        let mut bytes = [0u8; 1 + 5 * 8];
        bytes[1..9].copy_from_slice(&median.to_le_bytes());
        let mut len = 9;
        for (i, v) in others.iter().enumerate() {
            // Compared as bits: NaN is itself, -0 is not 0.
            let same = |c| Stats::coded(c, median).is_some_and(|x| x.to_bits() == v.to_bits());
            match [1, 2].into_iter().find(|c| same(*c)) {
                Some(code) => bytes[0] |= code << (2 * i),
                None => {
                    bytes[len..len + 8].copy_from_slice(&v.to_le_bytes());
                    len += 8;
                }
            }
        }
        s.serialize_bytes(&bytes[..len])
    }
}

impl<'de> Deserialize<'de> for Stats {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let bytes = <&[u8]>::deserialize(d)?;
        let malformed = || serde::de::Error::custom("malformed statistics");
        let (&codes, mut rest) = bytes.split_first().ok_or_else(malformed)?;
        let mut next = || -> std::result::Result<f64, D::Error> {
            let (v, tail) = rest.split_first_chunk::<8>().ok_or_else(malformed)?;
            rest = tail;
            Ok(f64::from_le_bytes(*v))
        };
        let median = next()?;
        let mut stats = [median; 5];
        for (i, v) in stats[1..].iter_mut().enumerate() {
            *v = match (codes >> (2 * i)) & 3 {
                0 => next()?,
                code => Stats::coded(code, median).ok_or_else(malformed)?,
            };
        }
        if !rest.is_empty() {
            return Err(malformed());
        }
        Ok(Stats(stats))
    }
}

// A step stored as JSON, as its row reads it: whatever the row does not
// hold (the decisions, the values of the runs) is skipped unparsed.

#[derive(Deserialize)]
struct StepView<'a> {
    #[serde(borrow)]
    key: KeyView<'a>,
    kind: StepKind,
    decision_hash: ContentHash,
    parent: Option<u32>,
    diff: MapLen,
    temperature: f64,
    result: ResultView,
    objective: Option<f64>,
    #[serde(borrow)]
    worker: Cow<'a, str>,
    slot: u32,
    #[serde(borrow)]
    cached_from: Option<KeyView<'a>>,
    dispatched_ms: u64,
    recorded_ms: u64,
    decision: Option<SummaryDecision>,
}

#[derive(Deserialize)]
struct KeyView<'a> {
    #[serde(borrow)]
    experiment: Cow<'a, str>,
    chain: u32,
    step: u32,
}

#[derive(Deserialize)]
struct ResultView {
    outcome: StepOutcome,
    build: Option<BuildView>,
    runs: RunsView,
    summary: SummariesView,
    target_met: bool,
    #[serde(default)]
    cut_short: Option<IgnoredAny>,
}

/// A step's build, as its row reads it.
#[derive(Deserialize)]
struct BuildView {
    wall_ns: u64,
    text_bytes: Option<u64>,
    #[serde(default)]
    reused: bool,
}

/// The statistics of a metric that the row keeps.
#[derive(Deserialize)]
struct StatsView {
    median: f64,
    mean: f64,
    stddev: f64,
    ci_low: f64,
    ci_high: f64,
}

/// A step's summary: per metric, its statistics.
struct SummariesView(Vec<(MetricKey, Stats)>);

impl<'de> Deserialize<'de> for SummariesView {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let map = BTreeMap::<Metric, StatsView>::deserialize(d)?;
        Ok(SummariesView(
            map.into_iter()
                .map(|(m, s)| {
                    let stats = Stats([s.median, s.mean, s.stddev, s.ci_low, s.ci_high]);
                    (MetricKey::from(m), stats)
                })
                .collect(),
        ))
    }
}

/// A step's runs as its row counts them: how many were measured (not
/// warm-ups), and which metrics any run found unsupported.
struct RunsView {
    measured: u64,
    unsupported: BTreeSet<Metric>,
}

#[derive(Deserialize)]
struct RunView {
    warmup: bool,
    metrics: UnsupportedKeys,
}

impl<'de> Deserialize<'de> for RunsView {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RunsView;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of runs")
            }
            fn visit_seq<A: SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> std::result::Result<RunsView, A::Error> {
                let mut out = RunsView {
                    measured: 0,
                    unsupported: BTreeSet::new(),
                };
                while let Some(run) = seq.next_element::<RunView>()? {
                    out.measured += u64::from(!run.warmup);
                    out.unsupported.extend(run.metrics.0);
                }
                Ok(out)
            }
        }
        d.deserialize_seq(V)
    }
}

/// The metrics of a run whose value is `unsupported`; measured values are skipped unparsed.
struct UnsupportedKeys(Vec<Metric>);

impl<'de> Deserialize<'de> for UnsupportedKeys {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = UnsupportedKeys;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of metric values")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<UnsupportedKeys, A::Error> {
                let mut out = Vec::new();
                while let Some(m) = map.next_key::<Metric>()? {
                    if map.next_value::<IsUnsupported>()?.0 {
                        out.push(m);
                    }
                }
                Ok(UnsupportedKeys(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// Whether a [`MetricValue`] is `unsupported` (a measured value is skipped unparsed).
struct IsUnsupported(bool);

impl<'de> Deserialize<'de> for IsUnsupported {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = IsUnsupported;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a metric value")
            }
            fn visit_str<E: serde::de::Error>(
                self,
                s: &str,
            ) -> std::result::Result<IsUnsupported, E> {
                Ok(IsUnsupported(s == "unsupported"))
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<IsUnsupported, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(IsUnsupported(false))
            }
        }
        d.deserialize_any(V)
    }
}

/// The number of entries of a map, its contents skipped.
struct MapLen(u64);

impl<'de> Deserialize<'de> for MapLen {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = MapLen;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map")
            }
            fn visit_map<A: MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<MapLen, A::Error> {
                let mut n = 0;
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {
                    n += 1;
                }
                Ok(MapLen(n))
            }
        }
        d.deserialize_map(V)
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;

    use kiln_protocol::Metric;

    use super::{MetricKey, Stats, StepSummary, SummaryBuild, SummaryDecision};
    use crate::store::StepKind;

    fn sample() -> StepSummary<'static> {
        StepSummary {
            experiment: Cow::Borrowed("walk"),
            chain: 1,
            step: 300,
            kind: StepKind::Remeasure,
            parent: Some(299),
            changed: 2,
            worker: Cow::Borrowed("w0"),
            slot: 3,
            decision_hash: [0xab; 32],
            cached_from: Some((0, 7)),
            outcome: Cow::Borrowed("ok"),
            decision: Some(SummaryDecision {
                accepted: true,
                compared_with: 1.5,
                decided_ms: 1000,
            }),
            temperature: 0.25,
            objective: Some(2.0),
            measured_runs: 3,
            target_met: false,
            build: Some(SummaryBuild {
                wall_ns: 5,
                text_bytes: None,
            }),
            dispatched_ms: 998,
            recorded_ms: 999,
            summary: vec![(
                MetricKey::from(Metric::WallTime),
                Stats([2.0, 2.0, 0.0, 1.0, 2.0]),
            )],
            unsupported: vec![MetricKey::from(Metric::Cycles)],
            failure: Cow::Borrowed(""),
            build_reused: false,
            cut_short: false,
        }
    }

    #[test]
    fn the_row_format_is_pinned() {
        // A change here is a change of the stored format: give it a new
        // FORMAT and keep reading rows of this one.
        let hash = "ab".repeat(32);
        let fields = [
            ("format", "03"),
            ("experiment", concat!("04", "77616c6b")),
            ("chain, step", concat!("01", "ac02")),
            ("kind", "01"),
            ("parent", concat!("01", "ab02")),
            ("changed", "02"),
            ("worker", concat!("02", "7730")),
            ("slot", "03"),
            ("decision_hash", &hash),
            ("cached_from", concat!("01", "00", "07")),
            ("outcome", concat!("02", "6f6b")),
            ("decision", concat!("01", "01", "000000000000f83f", "e807")),
            ("temperature", "000000000000d03f"),
            ("objective", concat!("01", "0000000000000040")),
            ("measured_runs, target_met", concat!("03", "00")),
            ("build", concat!("01", "05", "00")),
            ("dispatched_ms, recorded_ms", concat!("e607", "e707")),
            // wall-time (FNV-1a of its name); 17 bytes: codes, median, ci_low.
            (
                "summary",
                concat!(
                    "01",
                    "e1cc5eea",
                    "11",
                    "49",
                    "0000000000000040",
                    "000000000000f03f"
                ),
            ),
            // cycles
            ("unsupported", concat!("01", "a6854a75")),
            ("failure", concat!("03", "626164")),
            ("build_reused", "01"),
            ("cut_short", "01"),
        ];
        let failed = StepSummary {
            failure: Cow::Borrowed("bad"),
            build_reused: true,
            cut_short: true,
            ..sample()
        };
        let bytes = failed.encode().unwrap();
        let mut hex = bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
        for (field, expected) in fields {
            let rest = hex.split_off(expected.len().min(hex.len()));
            assert_eq!(hex, expected, "{field}");
            hex = rest;
        }
        assert_eq!(hex, "", "bytes after the row");
        assert_eq!(StepSummary::decode(&bytes).unwrap(), failed);
        // Format 2: the same row without whether it was cut short.
        let mut second = bytes[..bytes.len() - 1].to_vec();
        second[0] = 2;
        let not_cut = StepSummary {
            cut_short: false,
            ..failed.clone()
        };
        assert_eq!(StepSummary::decode(&second).unwrap(), not_cut);
        // Format 1: the same row without the reason.
        let mut first = bytes[..bytes.len() - 6].to_vec();
        first[0] = 1;
        assert_eq!(StepSummary::decode(&first).unwrap(), sample());
    }

    #[test]
    fn rows_of_another_format_or_cut_short_are_refused() {
        let bytes = sample().encode().unwrap();
        let mut other = bytes.clone();
        other[0] = 4;
        let e = StepSummary::decode(&other).unwrap_err().to_string();
        assert!(e.contains("row format 4 is unknown"), "{e}");
        assert!(StepSummary::decode(&bytes[..bytes.len() - 1]).is_err());
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(StepSummary::decode(&longer).is_err());
        assert!(StepSummary::decode(&[]).is_err());
    }

    #[test]
    fn every_metric_has_its_own_key() {
        let mut keys: Vec<MetricKey> = Metric::ALL.iter().map(|m| MetricKey::from(*m)).collect();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), Metric::ALL.len());
    }

    #[test]
    fn statistics_read_back_bit_for_bit_and_repeats_take_no_room() {
        let cases: &[([f64; 5], usize)] = &[
            ([7.0, 7.0, 0.0, 7.0, 7.0], 9),
            ([7.0, 7.5, 0.5, 6.0, 8.0], 41),
            ([0.0, 0.0, 0.0, 0.0, 0.0], 9),
            ([-0.0, 0.0, -0.0, 0.0, -0.0], 9),
            ([f64::NAN, f64::NAN, 0.0, f64::INFINITY, f64::NAN], 17),
            ([1.0, 0.0, 1.0, 0.0, 2.0], 17),
        ];
        for (stats, len) in cases {
            let bytes = postcard::to_stdvec(&Stats(*stats)).unwrap();
            assert_eq!(bytes.len(), 1 + len, "{stats:?}");
            let back: Stats = postcard::from_bytes(&bytes).unwrap();
            let bits = |s: &[f64; 5]| s.map(f64::to_bits);
            assert_eq!(bits(&back.0), bits(stats), "{stats:?}");
        }
        // A code that means nothing, or values missing: refused.
        for bad in [&[9u8, 3, 0, 0, 0, 0, 0, 0, 0, 0][..], &[4, 0, 0]] {
            assert!(postcard::from_bytes::<Stats>(bad).is_err(), "{bad:?}");
        }
    }
}
