//! Summary statistics of repeated measurements.
//!
//! The median's 95 % confidence interval is distribution-free (order
//! statistics of a binomial(n, 1/2)), since run times are skewed and rarely
//! normal. The trimmed mean drops samples beyond three standard deviations,
//! as the operator-profiling seed does.

use serde::{Deserialize, Serialize};

/// Statistics of one metric over the measured (non-warm-up) runs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Number of samples.
    pub n: usize,
    /// Smallest sample.
    pub min: f64,
    /// Largest sample.
    pub max: f64,
    /// Arithmetic mean.
    pub mean: f64,
    /// Median.
    pub median: f64,
    /// Sample standard deviation (n − 1).
    pub stddev: f64,
    /// Median absolute deviation (unscaled).
    pub mad: f64,
    /// Interquartile range.
    pub iqr: f64,
    /// Mean of the samples within three standard deviations of the mean.
    pub trimmed_mean: f64,
    /// Lower end of the 95 % confidence interval of the median.
    pub ci_low: f64,
    /// Upper end of the 95 % confidence interval of the median.
    pub ci_high: f64,
}

/// Which summary statistic an objective uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Statistic {
    /// The median.
    Median,
    /// The arithmetic mean.
    Mean,
    /// The minimum.
    Min,
    /// The 3-sigma-trimmed mean.
    TrimmedMean,
}

impl Statistic {
    /// Every statistic by its config name.
    pub const NAMES: &'static [&'static str] = &["median", "mean", "min", "trimmed-mean"];

    /// The config name.
    pub fn name(self) -> &'static str {
        match self {
            Statistic::Median => "median",
            Statistic::Mean => "mean",
            Statistic::Min => "min",
            Statistic::TrimmedMean => "trimmed-mean",
        }
    }

    /// Parses a config name.
    pub fn from_name(s: &str) -> Option<Self> {
        match s {
            "median" => Some(Statistic::Median),
            "mean" => Some(Statistic::Mean),
            "min" => Some(Statistic::Min),
            "trimmed-mean" => Some(Statistic::TrimmedMean),
            _ => None,
        }
    }

    /// Picks this statistic out of a summary.
    pub fn of(self, s: &Summary) -> f64 {
        match self {
            Statistic::Median => s.median,
            Statistic::Mean => s.mean,
            Statistic::Min => s.min,
            Statistic::TrimmedMean => s.trimmed_mean,
        }
    }
}

impl Summary {
    /// Summarises samples; `None` when there are none.
    pub fn of(samples: &[f64]) -> Option<Summary> {
        if samples.is_empty() {
            return None;
        }
        let mut sorted = samples.to_vec();
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len();
        let mean = sorted.iter().sum::<f64>() / n as f64;
        let stddev = if n > 1 {
            (sorted.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
        } else {
            0.0
        };
        let median = quantile(&sorted, 0.5);
        let mut deviations: Vec<f64> = sorted.iter().map(|x| (x - median).abs()).collect();
        deviations.sort_by(f64::total_cmp);
        let kept: Vec<f64> = sorted
            .iter()
            .copied()
            .filter(|x| (x - mean).abs() <= 3.0 * stddev)
            .collect();
        let trimmed_mean = if kept.is_empty() {
            mean
        } else {
            kept.iter().sum::<f64>() / kept.len() as f64
        };
        let (lo, hi) = median_ci_ranks(n);
        Some(Summary {
            n,
            min: sorted[0],
            max: sorted[n - 1],
            mean,
            median,
            stddev,
            mad: quantile(&deviations, 0.5),
            iqr: quantile(&sorted, 0.75) - quantile(&sorted, 0.25),
            trimmed_mean,
            ci_low: sorted[lo],
            ci_high: sorted[hi],
        })
    }

    /// Half the width of the median's confidence interval, relative to the median.
    pub fn rel_ci_half_width(&self) -> f64 {
        if self.median == 0.0 {
            if self.ci_high == self.ci_low {
                0.0
            } else {
                f64::INFINITY
            }
        } else {
            (self.ci_high - self.ci_low) / 2.0 / self.median.abs()
        }
    }
}

/// Linear-interpolated quantile of sorted samples.
fn quantile(sorted: &[f64], q: f64) -> f64 {
    let pos = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

/// 0-based ranks bounding a ≥95 % confidence interval of the median: the
/// widest symmetric pair of order statistics whose binomial(n, ½) coverage
/// reaches 0.95 (the whole range when n is too small to reach it).
fn median_ci_ranks(n: usize) -> (usize, usize) {
    // P(X < j) for X ~ Binomial(n, 1/2), accumulated exactly in log space.
    let ln_half_n = -(n as f64) * std::f64::consts::LN_2;
    let mut ln_choose = 0.0f64; // ln C(n, 0)
    let mut below = 0.0f64; // P(X <= k)
    let mut best = 0usize;
    for k in 0..n {
        below += (ln_choose + ln_half_n).exp();
        // Coverage of [x_(k+1), x_(n-k)] (1-based) is 1 − 2·P(X ≤ k).
        if 1.0 - 2.0 * below >= 0.95 {
            best = k;
        } else {
            break;
        }
        ln_choose += ((n - k) as f64).ln() - ((k + 1) as f64).ln();
    }
    (best, n - 1 - best)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_statistics() {
        let s = Summary::of(&[1.0, 2.0, 3.0, 4.0, 100.0]).unwrap();
        assert_eq!(s.n, 5);
        assert_eq!(s.median, 3.0);
        assert_eq!(s.min, 1.0);
        assert_eq!(s.max, 100.0);
        assert_eq!(s.mean, 22.0);
        assert_eq!(s.mad, 1.0);
        assert_eq!(s.iqr, 2.0);
        // Too few samples for a 95 % interval narrower than the range.
        assert_eq!((s.ci_low, s.ci_high), (1.0, 100.0));
    }

    #[test]
    fn median_interval_matches_tables() {
        // Standard tables: n = 10 → ranks 2..9 (1-based); n = 20 → 6..15.
        assert_eq!(median_ci_ranks(10), (1, 8));
        assert_eq!(median_ci_ranks(20), (5, 14));
        assert_eq!(median_ci_ranks(5), (0, 4));
    }

    #[test]
    fn trimmed_mean_drops_far_outliers() {
        let mut v = vec![10.0; 30];
        v.push(1000.0);
        let s = Summary::of(&v).unwrap();
        assert_eq!(s.trimmed_mean, 10.0);
        assert!(s.mean > 10.0);
    }

    #[test]
    fn empty_has_no_summary() {
        assert!(Summary::of(&[]).is_none());
    }
}
