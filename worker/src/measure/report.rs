//! The human-readable summary `kiln-worker measure` prints, after hyperfine's.

use std::fmt::Write as _;

use kiln_protocol::breakdown::TimeBreakdown;
use kiln_protocol::message::StepOutcome;
use kiln_protocol::metric::{Metric, MetricValue};
use kiln_protocol::stats::Summary;

use crate::measure::Measurement;

/// The summary of a measurement of `command`, with a line saying whether the median of
/// `objective` (the metric the repetition watched) reached `target_rel_ci`.
pub fn table(command: &str, m: &Measurement, objective: Metric, target_rel_ci: f64) -> String {
    let mut t = String::new();
    let _ = writeln!(t, "Command: {command}");
    if m.outcome != StepOutcome::Ok {
        failure(&mut t, m);
        warnings(&mut t, m);
        return t;
    }
    wall_time(&mut t, m);
    if !m.summary.is_empty() {
        ci_verdict(&mut t, m, objective, target_rel_ci);
    }
    if let Some(d) = &m.output_digest {
        let _ = writeln!(t, "  Output digest:       {d}");
    }
    let _ = writeln!(t);
    metric_rows(&mut t, m);
    breakdown(&mut t, m);
    warnings(&mut t, m);
    t
}

/// A failed measurement's outcome and what it says of its cause.
fn failure(t: &mut String, m: &Measurement) {
    let _ = writeln!(t, "  FAILED: {}", m.outcome);
    let detail = match &m.outcome {
        StepOutcome::RunFailed { stderr_tail, .. } => stderr_tail.trim_end().to_string(),
        StepOutcome::WrongOutput { expected, found } => {
            format!("expected {expected}, found {found}")
        }
        _ => String::new(),
    };
    for line in detail.lines() {
        let _ = writeln!(t, "  | {line}");
    }
}

/// Wall time's mean, median with its CI, and range, as hyperfine shows them, if summarised.
fn wall_time(t: &mut String, m: &Measurement) {
    let Some(w) = m.summary.get(&Metric::WallTime) else {
        return;
    };
    let measured = m.runs.iter().filter(|r| !r.warmup).count();
    let warmups = m.runs.len() - measured;
    let f = |x: f64| value(Metric::WallTime, x);
    let _ = writeln!(t, "  Time (mean ± σ):     {} ± {}", f(w.mean), f(w.stddev));
    let _ = writeln!(
        t,
        "  Time (median):       {}   95% CI [{} … {}]",
        f(w.median),
        f(w.ci_low),
        f(w.ci_high)
    );
    let _ = writeln!(
        t,
        "  Range (min … max):   {} … {}    {} runs, {} warm-up",
        f(w.min),
        f(w.max),
        w.n,
        warmups
    );
}

/// Whether the objective's median CI reached `target_rel_ci`.
fn ci_verdict(t: &mut String, m: &Measurement, objective: Metric, target_rel_ci: f64) {
    // The verdict is the objective's: naming another metric's CI beside it (wall time's,
    // where GPU time was watched) read '± 0.38 % (target 1.00 %): not met'.
    let verdict = if m.target_met { "met" } else { "not met" };
    let of = if objective == Metric::WallTime {
        String::new()
    } else {
        format!(" of {objective}")
    };
    let _ = match m.summary.get(&objective) {
        Some(o) => writeln!(
            t,
            "  Median CI{of} ± {:.2} % (target {:.2} %): {verdict}",
            o.rel_ci_half_width() * 100.0,
            target_rel_ci * 100.0,
        ),
        None => writeln!(
            t,
            "  Median CI{of}: not measured (target {:.2} %): {verdict}",
            target_rel_ci * 100.0,
        ),
    };
}

/// A row for each metric some measured run has: its summary, or why it has none.
fn metric_rows(t: &mut String, m: &Measurement) {
    let _ = writeln!(
        t,
        "  {:<19} {:>12} {:>26} {:>28} {:>4}",
        "metric", "median", "mean ± σ", "min … max", "n"
    );
    for &metric in Metric::ALL {
        let values: Vec<&MetricValue> = m
            .runs
            .iter()
            .filter(|r| !r.warmup)
            .filter_map(|r| r.metrics.get(&metric))
            .collect();
        if values.is_empty() {
            continue;
        }
        let line = match m.summary.get(&metric) {
            Some(s) => summary_row(metric, s),
            None if values.contains(&&MetricValue::Unsupported) => "unsupported".to_string(),
            None => "(no value)".to_string(),
        };
        let _ = writeln!(t, "  {:<19} {line}", metric.name());
    }
}

/// Where the time went, by median, where the runs say.
fn breakdown(t: &mut String, m: &Measurement) {
    let Some(b) = TimeBreakdown::of(&m.summary, &m.runs) else {
        return;
    };
    let _ = writeln!(t, "\n  Time breakdown (medians):");
    for (label, v) in b.rows() {
        let shown = match v {
            MetricValue::Measured(x) => value(Metric::WallTime, x),
            MetricValue::Unsupported => "unsupported".into(),
        };
        let _ = writeln!(t, "  {label:<20} {shown:>12} {:>8}", b.share(v));
    }
}

/// The measurement's warnings, after a blank line.
fn warnings(t: &mut String, m: &Measurement) {
    for w in &m.warnings {
        let _ = write!(t, "\n  Warning: {w}\n");
    }
}

fn summary_row(metric: Metric, s: &Summary) -> String {
    let f = |x: f64| value(metric, x);
    format!(
        "{:>12} {:>26} {:>28} {:>4}",
        f(s.median),
        format!("{} ± {}", f(s.mean), f(s.stddev)),
        format!("{} … {}", f(s.min), f(s.max)),
        s.n
    )
}

/// A value in its metric's unit, scaled for reading as every kiln command
/// prints it (`201.3 ms`, `12.00 MiB`).
pub fn value(metric: Metric, x: f64) -> String {
    kiln_protocol::quantity::measure(x, metric.unit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpu_runs_get_a_time_breakdown() {
        use kiln_protocol::message::RunRecord;
        let m = MetricValue::Measured;
        let run = RunRecord {
            index: 0,
            warmup: false,
            exit_code: Some(0),
            signal: None,
            metrics: [
                (Metric::WallTime, m(2e9)),
                (Metric::UserTime, m(5e8)),
                (Metric::SystemTime, m(0.0)),
                (Metric::GpuTime, MetricValue::Unsupported),
            ]
            .into(),
        };
        let runs = vec![run];
        let measurement = Measurement {
            outcome: StepOutcome::Ok,
            summary: crate::measure::summarise(&runs),
            runs,
            target_met: true,
            cut_short: None,
            output_digest: None,
            checked_output: None,
            warnings: Vec::new(),
            function_instructions: Default::default(),
            function_code: Default::default(),
        };
        let text = table("prog", &measurement, Metric::WallTime, 0.01);
        assert!(text.contains("Time breakdown"), "{text}");
        let line = |label: &str| {
            text.lines()
                .find(|l| l.trim_start().starts_with(label))
                .unwrap_or_else(|| panic!("no {label} in {text}"))
                .to_string()
        };
        assert!(line("cpu (user+system)").contains("500.0 ms"));
        assert!(line("cpu (user+system)").contains("25.0 %"));
        assert!(line("gpu busy").contains("unsupported"));
        assert!(line("cpu-side").contains("unsupported"));
        assert!(line("gpu-time").contains("unsupported"));
    }

    #[test]
    fn the_ci_line_is_the_objectives() {
        use kiln_protocol::message::RunRecord;
        // Steady wall times, GPU times spread by 3 %: watched on GPU time, the target is not
        // met, and the line gives GPU time's CI, not wall time's.
        let runs: Vec<RunRecord> = [(2.147e9, 8.10e8), (2.157e9, 8.32e8), (2.163e9, 8.09e8)]
            .into_iter()
            .enumerate()
            .map(|(index, (wall, gpu))| RunRecord {
                index: index as u32,
                warmup: false,
                exit_code: Some(0),
                signal: None,
                metrics: [
                    (Metric::WallTime, MetricValue::Measured(wall)),
                    (Metric::GpuTime, MetricValue::Measured(gpu)),
                ]
                .into(),
            })
            .collect();
        let summary = crate::measure::summarise(&runs);
        let gpu_ci = summary[&Metric::GpuTime].rel_ci_half_width() * 100.0;
        let wall_ci = summary[&Metric::WallTime].rel_ci_half_width() * 100.0;
        assert!(gpu_ci > 1.0 && wall_ci < 1.0, "{gpu_ci} {wall_ci}");
        let measurement = Measurement {
            outcome: StepOutcome::Ok,
            summary,
            runs,
            target_met: false,
            cut_short: None,
            output_digest: None,
            checked_output: None,
            warnings: Vec::new(),
            function_instructions: Default::default(),
            function_code: Default::default(),
        };
        let ci_line = |objective| {
            table("prog", &measurement, objective, 0.01)
                .lines()
                .find(|l| l.contains("Median CI"))
                .unwrap()
                .to_string()
        };
        assert_eq!(
            ci_line(Metric::GpuTime),
            format!("  Median CI of gpu-time ± {gpu_ci:.2} % (target 1.00 %): not met")
        );
        assert_eq!(
            ci_line(Metric::WallTime),
            format!("  Median CI ± {wall_ci:.2} % (target 1.00 %): not met")
        );
        assert!(ci_line(Metric::Energy).contains("of energy: not measured"));
    }

    #[test]
    fn warnings_follow_the_table() {
        let measurement = Measurement {
            outcome: StepOutcome::Ok,
            runs: Vec::new(),
            summary: Default::default(),
            target_met: false,
            cut_short: None,
            output_digest: None,
            checked_output: None,
            warnings: vec!["the program's own CUPTI client could not start".into()],
            function_instructions: Default::default(),
            function_code: Default::default(),
        };
        let text = table("prog", &measurement, Metric::WallTime, 0.01);
        assert!(
            text.ends_with("\n  Warning: the program's own CUPTI client could not start\n"),
            "{text}"
        );
    }

    #[test]
    fn units_scale() {
        // As every kiln command prints them (kiln_protocol::quantity).
        assert_eq!(value(Metric::WallTime, 201_300_000.0), "201.3 ms");
        assert_eq!(value(Metric::MaxRss, 3.0 * 1048576.0), "3.000 MiB");
        assert_eq!(value(Metric::Instructions, 1234.0), "1.234 k");
        assert_eq!(value(Metric::ContextSwitches, 2.5), "2.500");
        assert_eq!(value(Metric::CpuPercentAvg, 99.5), "99.50 %");
    }
}
