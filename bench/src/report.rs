//! Raw measurements, their medians, and the CSV they are kept in.

use std::io::Write;
use std::path::Path;

use anyhow::Result;

/// One measured value.
#[derive(Debug, Clone)]
pub struct Row {
    /// `overhead`, `fidelity`, `store`, `scale`.
    pub section: String,
    /// The configuration measured (`local`, `ssh2`, `sleep-50ms`, `export-1000000`, …).
    pub config: String,
    /// Who was measured: a kiln version's label, `hyperfine`, `peer`.
    pub tool: String,
    /// Repetition.
    pub rep: usize,
    /// What.
    pub metric: String,
    /// Its value.
    pub value: f64,
}

/// Every measurement of a suite run.
#[derive(Debug, Default)]
pub struct Results {
    /// The rows, in the order measured.
    pub rows: Vec<Row>,
}

impl Results {
    /// Records a value.
    pub fn add(
        &mut self,
        section: &str,
        config: &str,
        tool: &str,
        rep: usize,
        metric: &str,
        value: f64,
    ) {
        self.rows.push(Row {
            section: section.into(),
            config: config.into(),
            tool: tool.into(),
            rep,
            metric: metric.into(),
            value,
        });
    }

    /// Every value of a (section, config, tool, metric).
    pub fn values(&self, section: &str, config: &str, tool: &str, metric: &str) -> Vec<f64> {
        self.rows
            .iter()
            .filter(|r| {
                r.section == section && r.config == config && r.tool == tool && r.metric == metric
            })
            .map(|r| r.value)
            .filter(|v| v.is_finite())
            .collect()
    }

    /// Their median.
    pub fn median(&self, section: &str, config: &str, tool: &str, metric: &str) -> Option<f64> {
        let v = self.values(section, config, tool, metric);
        (!v.is_empty()).then(|| median(&v))
    }

    /// Writes every row as CSV.
    pub fn write_csv(&self, path: &Path) -> Result<()> {
        let mut w = csv::Writer::from_path(path)?;
        w.write_record(["section", "config", "tool", "rep", "metric", "value"])?;
        for r in &self.rows {
            w.write_record([
                r.section.as_str(),
                &r.config,
                &r.tool,
                &r.rep.to_string(),
                &r.metric,
                &format!("{}", r.value),
            ])?;
        }
        w.flush()?;
        Ok(())
    }
}

/// Median of values (NaN if none).
pub fn median(v: &[f64]) -> f64 {
    percentile(v, 50.0)
}

/// Percentile by linear interpolation between closest ranks (NaN if none).
pub fn percentile(v: &[f64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let rank = p / 100.0 * (s.len() - 1) as f64;
    let lo = rank.floor() as usize;
    let hi = rank.ceil() as usize;
    s[lo] + (s[hi] - s[lo]) * (rank - lo as f64)
}

/// The difference of medians `median(a) − median(b)` and its 95 % percentile
/// bootstrap interval (2000 resamples of each, seeded: the same data give the
/// same interval). NaNs if either is empty.
pub fn median_difference(a: &[f64], b: &[f64]) -> (f64, f64, f64) {
    use rand::{RngExt, SeedableRng};
    if a.is_empty() || b.is_empty() {
        return (f64::NAN, f64::NAN, f64::NAN);
    }
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(9);
    let mut resample = |v: &[f64], buf: &mut Vec<f64>| {
        buf.clear();
        buf.extend((0..v.len()).map(|_| v[rng.random_range(0..v.len())]));
        let mid = buf.len() / 2;
        *buf.select_nth_unstable_by(mid, f64::total_cmp).1
    };
    let (mut ba, mut bb) = (Vec::new(), Vec::new());
    let diffs: Vec<f64> = (0..2000)
        .map(|_| resample(a, &mut ba) - resample(b, &mut bb))
        .collect();
    (
        median(a) - median(b),
        percentile(&diffs, 2.5),
        percentile(&diffs, 97.5),
    )
}

/// A number for a table: `—` where missing, else with sensible digits.
pub fn fmt(v: Option<f64>) -> String {
    match v {
        None => "—".into(),
        Some(x) if !x.is_finite() => "—".into(),
        Some(x) if x.abs() >= 1000.0 => format!("{:.0}", x),
        Some(x) if x.abs() >= 100.0 => format!("{:.1}", x),
        Some(x) if x.abs() >= 10.0 => format!("{:.2}", x),
        Some(x) if x.abs() >= 1.0 => format!("{:.3}", x),
        Some(x) => format!("{:.4}", x),
    }
}

/// A ratio `a / b` for a table, `×` suffixed.
pub fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b != 0.0 && a.is_finite() && b.is_finite() => {
            format!("{}×", fmt(Some(a / b)))
        }
        _ => "—".into(),
    }
}

/// A markdown table writer.
pub struct Table {
    head: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column heads.
    pub fn new(head: &[&str]) -> Table {
        Table {
            head: head.iter().map(|h| h.to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row.
    pub fn row(&mut self, cells: Vec<String>) {
        self.rows.push(cells);
    }

    /// Writes it.
    pub fn write(&self, out: &mut impl Write) -> std::io::Result<()> {
        writeln!(out, "| {} |", self.head.join(" | "))?;
        writeln!(
            out,
            "|{}|",
            self.head
                .iter()
                .map(|_| "---")
                .collect::<Vec<_>>()
                .join("|")
        )?;
        for r in &self.rows {
            writeln!(out, "| {} |", r.join(" | "))?;
        }
        writeln!(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_difference_brackets_a_clear_shift() {
        let a: Vec<f64> = (0..500).map(|i| 10.0 + (i % 7) as f64).collect();
        let b: Vec<f64> = (0..500).map(|i| 12.0 + (i % 7) as f64).collect();
        let (d, lo, hi) = median_difference(&a, &b);
        assert_eq!(d, -2.0);
        assert!(lo <= -2.0 && (-2.0..0.0).contains(&hi), "{lo} … {hi}");
        let (d, lo, hi) = median_difference(&a, &a);
        assert_eq!(d, 0.0);
        assert!(lo <= 0.0 && hi >= 0.0, "{lo} … {hi}");
    }
}
