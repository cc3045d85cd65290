//! Formatting shared by every command's output: numbers, durations, tables,
//! the speed convention, the word for what a worker cannot measure, and
//! control characters made visible. Commands format with these, never
//! with their own variants, so one figure reads the same everywhere.

use std::borrow::Cow;
use std::fmt::Write as _;

use comfy_table::{presets, CellAlignment, Table};

use kiln_protocol::Summary;

/// The speed convention of every command, file and plot: a step's objective
/// over the baseline's, so below 1 is faster (or smaller).
pub const TIME_RATIO: &str = "time ratio";

/// A time ratio as printed: `0.9731`, or `-` where there is none.
pub fn format_ratio(ratio: f64) -> String {
    if ratio.is_finite() {
        format!("{ratio:.4}")
    } else {
        "-".into()
    }
}

/// Text that came from a program (a benchmark's stderr, a worker's error) as
/// kiln shows it: every control character but newline and tab written as its
/// escape, `\x1b` for ASCII ones (DEL too) and `\u{9b}` for C1 ones, so
/// showing it never drives the viewer's terminal (colours, an OSC 52 write to
/// the clipboard, a bell). Printable text passes unchanged, and so does text
/// escaped once already. The store keeps the bytes as they came.
pub fn escape_controls(text: &str) -> Cow<'_, str> {
    let control = |c: char| c.is_control() && c != '\n' && c != '\t';
    if !text.chars().any(control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match u32::from(c) {
            _ if !control(c) => out.push(c),
            code @ ..=0x7f => {
                let _ = write!(out, "\\x{code:02x}");
            }
            code => {
                let _ = write!(out, "\\u{{{code:x}}}");
            }
        }
    }
    Cow::Owned(out)
}

/// Rows under a header, each column as wide as its widest cell (long names
/// included); the columns in `right` (numbers) aligned right. Cells show
/// control characters escaped ([`escape_controls`]).
pub fn table(
    header: &[&str],
    right: &[usize],
    rows: impl IntoIterator<Item = Vec<String>>,
) -> String {
    let mut t = Table::new();
    t.load_preset(presets::NOTHING);
    t.set_header(header.iter().copied());
    for row in rows {
        t.add_row(row.iter().map(|cell| escape_controls(cell)));
    }
    // Two spaces between columns, none before the first: lines start with their first cell.
    for c in t.column_iter_mut() {
        c.set_padding((0, 2));
    }
    for &i in right {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
    let mut text = t.trim_fmt();
    text.push('\n');
    text
}

/// How a metric the worker cannot measure reads in tables.
pub const UNSUPPORTED: &str = "unsupported";

pub use kiln_protocol::quantity::{count as format_value, measure as format_measure, plural};

/// The best and its time ratio, as every view says them: the lowest
/// objective a step measured, below the baseline; where none was below it,
/// no figure but the words (the baseline is the reference, not a step).
pub fn best_cells(best: f64, baseline: f64, done: u32, unit: &str) -> [String; 2] {
    match done {
        0 => ["-".into(), "no step yet".into()],
        _ if best < baseline => [format_measure(best, unit), format_ratio(best / baseline)],
        _ => ["-".into(), "no step beat stock".into()],
    }
}

/// A chain's acceptance as every view says it: `12 of 40 (30%)`, counting
/// only the steps that could move it (a guided chain's screening is none);
/// `-` before its first such step.
pub fn format_acceptance(accepted: u32, proposals: u32) -> String {
    match proposals {
        0 => "-".into(),
        _ => format!(
            "{accepted} of {proposals} ({:.0}%)",
            100.0 * f64::from(accepted) / f64::from(proposals)
        ),
    }
}

/// A serialized name as the config language spells it: `simulated-annealing`
/// for `SimulatedAnnealing`, `t-max` for `t_max`.
pub fn config_word(key: &str) -> String {
    let mut word = String::new();
    for (i, c) in key.chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            word.push('-');
        }
        word.push(if c == '_' {
            '-'
        } else {
            c.to_ascii_lowercase()
        });
    }
    word
}

/// A serialized config with every name in the config's own words
/// ([`config_word`]), as `kiln check --json` prints it.
pub fn in_config_words(value: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::Object(fields) => Value::Object(
            fields
                .into_iter()
                .map(|(k, v)| (config_word(&k), in_config_words(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(in_config_words).collect()),
        other => other,
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

/// A metric's median and its 95 % interval in its unit: `1.234 ms [1.200 ms, 1.300 ms]`.
pub fn format_summary(s: &Summary, unit: &str) -> String {
    format!(
        "{} [{}, {}]",
        format_measure(s.median, unit),
        format_measure(s.ci_low, unit),
        format_measure(s.ci_high, unit)
    )
}

/// The first `most` of `items`, and how many more there are: `a, b, c, and 5 more`.
pub fn listed<T: std::fmt::Display>(
    items: impl ExactSizeIterator<Item = T>,
    most: usize,
) -> String {
    let n = items.len();
    let mut text: Vec<String> = items.take(most).map(|i| i.to_string()).collect();
    if n > most {
        text.push(format!("and {} more", n - most));
    }
    text.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_show_as_escapes() {
        let raw = "\x1b[31mred\x1b]52;c;aGVsbG8=\x07\r\x7f\u{9b}2J µs\tend\n";
        let shown = escape_controls(raw);
        assert_eq!(
            shown,
            "\\x1b[31mred\\x1b]52;c;aGVsbG8=\\x07\\x0d\\x7f\\u{9b}2J µs\tend\n"
        );
        assert_eq!(
            escape_controls(&shown),
            shown,
            "escaping twice changes nothing"
        );
        assert!(matches!(escape_controls("plain µs\n"), Cow::Borrowed(_)));
    }
}
