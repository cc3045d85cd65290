//! Formatting shared by every command's output: numbers, durations, and the
//! word for what a worker cannot measure. Commands format with these, never
//! with their own variants, so one figure reads the same everywhere.

use kiln_protocol::Summary;

/// How a metric the worker cannot measure reads in tables.
pub const UNSUPPORTED: &str = "unsupported";

/// A large count or time in a compact form.
pub fn format_value(v: f64) -> String {
    if !v.is_finite() {
        "-".into()
    } else if v.abs() >= 1e6 {
        format!("{:.4}e6", v / 1e6)
    } else {
        format!("{v:.4}")
    }
}

/// Seconds as `1h02m`, `3m05s` or `12.3s`.
pub fn format_secs(s: f64) -> String {
    if s >= 3600.0 {
        format!(
            "{}h{:02}m",
            (s / 3600.0) as u64,
            ((s % 3600.0) / 60.0) as u64
        )
    } else if s >= 60.0 {
        format!("{}m{:02}s", (s / 60.0) as u64, (s % 60.0) as u64)
    } else {
        format!("{s:.1}s")
    }
}

/// A metric's median and its 95 % interval: `1.2345 [1.2000, 1.3000]`.
pub fn format_summary(s: &Summary) -> String {
    format!(
        "{} [{}, {}]",
        format_value(s.median),
        format_value(s.ci_low),
        format_value(s.ci_high)
    )
}
