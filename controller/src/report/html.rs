//! The report's page: captions, per-experiment sections and the index.

use std::fmt::Write as _;

use kiln_protocol::quantity;

use crate::text::{best_cells, format_acceptance, format_measure, TIME_RATIO};

use super::charts::MAX_BARS;
use super::data::{ChainTally, ExperimentData};

/// The files of one figure, for the index.
pub(super) struct Figure {
    pub(super) stem: String,
    pub(super) caption: String,
}

/// The whole `index.html`: a heading naming the campaign and the store, the
/// experiments' sections, and the workers' figure.
pub(super) fn index(campaign: &str, store: &str, sections: &str, workers: &Figure) -> String {
    let mut html = String::new();
    let _ = write!(
        html,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>kiln report: {c}</title>\n<style>\n\
         body {{ font-family: sans-serif; max-width: 1040px; margin: 1em auto; }}\n\
         img {{ max-width: 100%; border: 1px solid #ddd; }}\n\
         table {{ border-collapse: collapse; }} td, th {{ padding: 2px 10px; text-align: right; }}\n\
         figcaption {{ color: #444; margin-bottom: 1.5em; }}\n</style>\n</head>\n<body>\n\
         <h1>kiln report: {c}</h1>\n<p>Store <code>{s}</code>.</p>\n",
        c = escape(campaign),
        s = escape(store),
    );
    html.push_str(sections);
    let _ = write!(html, "<h2>Workers</h2>\n{}", figure_html(workers));
    html.push_str("</body>\n</html>\n");
    html
}

pub(super) fn objective_caption(e: &ExperimentData) -> String {
    let failed: usize = e.failures().values().sum();
    let mut caption = format!(
        "Objective ({}) of each step per chain: filled dots were accepted, hollow ones \
         rejected, triangles re-measure the incumbent, squares are screened flips (measured \
         to rank the points, never taken); the line is the best so far and the \
         dashed line the baseline. The right axis gives the {TIME_RATIO}, step / baseline \
         (below 1 is faster).",
        e.objective.label
    );
    if failed > 0 {
        let _ = write!(
            caption,
            " {} are the red crosses along the bottom.",
            quantity::plural(failed, "failed step")
        );
    }
    if e.stride > 1 {
        let _ = write!(
            caption,
            " Of the steps, one in every {} is drawn, and every new best.",
            e.stride
        );
    }
    caption
}

pub(super) fn runtimes_caption(e: &ExperimentData) -> String {
    let mut caption = "Wall time of every measured run (warm-ups left out) of each step; \
                       reused measurements are not repeated."
        .to_string();
    if e.run_stride > 1 {
        let _ = write!(
            caption,
            " Of the measured steps drawn, the runs of one in every {} are.",
            e.run_stride
        );
    }
    caption
}

pub(super) fn breakdown_caption(e: &ExperimentData) -> String {
    let mut caption = "Median time of a run per successful step, stacked: user + system CPU \
                       time, GPU busy time, and the remainder of the wall time (floored at 0, \
                       as the CPU time of several threads can exceed the wall time)."
        .to_string();
    let steps = e.points().filter(|p| p.wall.is_some() && !p.cached).count();
    if steps > MAX_BARS {
        let _ = write!(
            caption,
            " Each bar averages {} consecutive steps.",
            steps.div_ceil(MAX_BARS)
        );
    }
    if !e.gpu_measured {
        caption.push_str(
            " No run measured gpu-time (absent or unsupported on these workers), so GPU \
             busy time is left out.",
        );
    }
    caption
}

pub(super) fn section(e: &ExperimentData, figures: &[Figure]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "<h2>Experiment {}{}</h2>",
        escape(&e.name),
        e.benchmark
            .as_ref()
            .map(|b| format!(" (benchmark {})", escape(b)))
            .unwrap_or_default()
    );
    let baseline = e.info.baseline.objective();
    let _ = writeln!(
        out,
        "<table>\n<tr><th>chain</th><th>steps</th><th>ok</th><th>failed</th>\
         <th>accepted</th><th>best</th>\
         <th title=\"best / baseline objective; below 1 is faster\">{TIME_RATIO}</th>\
         <th>points varied</th><th>distinct sets</th></tr>",
    );
    for (chain, tally) in &e.tallies {
        out.push_str(&chain_row(e, *chain, tally, baseline));
    }
    out.push_str("</table>\n");
    let failures = e.failures();
    let _ = writeln!(
        out,
        "<p>Objective: {}; baseline {}; the {TIME_RATIO} is best / baseline (below 1 is \
         faster).{}</p>",
        escape(&e.objective.label),
        baseline.map_or("-".into(), |b| format_measure(b, e.objective.unit)),
        if failures.is_empty() {
            String::new()
        } else {
            let list: Vec<String> = failures.iter().map(|(k, v)| format!("{k}: {v}")).collect();
            format!(" Failed steps by outcome: {}.", escape(&list.join(", ")))
        }
    );
    for f in figures {
        out.push_str(&figure_html(f));
    }
    out
}

/// One chain's row of an experiment's table, its best against `baseline`.
fn chain_row(e: &ExperimentData, chain: u32, tally: &ChainTally, baseline: Option<f64>) -> String {
    let ChainTally {
        steps,
        ok,
        accepted,
        proposals,
        best,
        ..
    } = *tally;
    let accepted = format_acceptance(accepted as u32, proposals as u32);
    // As every command says it: a best only where a step beat the baseline.
    let [best, ratio] = best_cells(
        best.unwrap_or(f64::INFINITY),
        baseline.unwrap_or(f64::NAN),
        steps as u32,
        e.objective.unit,
    );
    let (varied, sets) = match e.coverage.get(&chain) {
        Some(c) => (
            format!("{}/{} ({:.0} %)", c.varied, c.movable, 100.0 * c.share()),
            c.sets.to_string(),
        ),
        None => ("-".into(), "-".into()),
    };
    format!(
        "<tr><td>{chain}</td><td>{steps}</td><td>{ok}</td><td>{}</td><td>{accepted}</td>\
         <td>{best}</td><td>{ratio}</td><td>{varied}</td><td>{sets}</td></tr>\n",
        steps - ok,
    )
}

pub(super) fn figure_html(f: &Figure) -> String {
    format!(
        "<figure>\n<img src=\"{s}.png\" alt=\"{s}\">\n<figcaption>{c} \
         (<a href=\"{s}.svg\">SVG</a>)</figcaption>\n</figure>\n",
        s = escape(&f.stem),
        c = escape(&f.caption)
    )
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
