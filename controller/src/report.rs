//! `kiln report`: plots of a campaign as PNG and SVG, tied together by an index.html.
//!
//! Per experiment: the objective against the step per chain (accepted and
//! rejected proposals, failed steps, best so far, the baseline), the
//! temperature, the rolling acceptance rate, the wall time of every measured
//! run, and a CPU/GPU time breakdown per step. For the whole store: each
//! worker's throughput. Text is drawn with a TrueType font read at run time
//! (DejaVu Sans from Debian's `fonts-dejavu-core`, or `$KILN_FONT`), so the
//! report needs no fontconfig.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::{bail, Context, Result};
use plotters::coord::Shift;
use plotters::prelude::*;

use kiln_protocol::{Metric, MetricValue};

use crate::export::{benchmark_of, stored_config};
use crate::manual::manual_benchmark;
use crate::rewards::file_stem;
use crate::status::format_value;
use crate::store::{ExperimentInfo, StepKind, StepRecord, Store};

/// Pixel size of every plot.
const SIZE: (u32, u32) = (1000, 480);

/// Proposals in the trailing window of the acceptance rate.
const ACCEPTANCE_WINDOW: usize = 20;

/// Most bars in a time breakdown; more steps are averaged in consecutive groups.
const MAX_BARS: usize = 150;

/// Fonts tried for the plots' text, after `$KILN_FONT`.
const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu-sans-fonts/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
];

/// The font family every text of the plots uses.
const FAMILY: &str = "sans-serif";

/// Registers a TrueType font for the plots' text, once per process.
fn ensure_font() -> Result<()> {
    static FONT: OnceLock<Result<(), String>> = OnceLock::new();
    FONT.get_or_init(|| {
        let env = std::env::var_os("KILN_FONT").map(PathBuf::from);
        let path = match &env {
            Some(p) => p.clone(),
            None => FONT_PATHS
                .iter()
                .map(PathBuf::from)
                .find(|p| p.exists())
                .ok_or_else(|| {
                    "no font for the report's text: install fonts-dejavu-core (Debian, Ubuntu) \
                     or set KILN_FONT to a .ttf file"
                        .to_string()
                })?,
        };
        let bytes = std::fs::read(&path)
            .map_err(|e| format!("cannot read font {}: {e}", path.display()))?;
        // plotters keeps registered fonts for the whole process: leaking the
        // one font read per process is what its 'static API asks for.
        let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        plotters::style::register_font(FAMILY, FontStyle::Normal, bytes)
            .map_err(|_| format!("{} is not a usable TrueType font", path.display()))
    })
    .clone()
    .map_err(anyhow::Error::msg)
}

/// What the plots need of one step.
struct Point {
    step: u32,
    remeasure: bool,
    /// `None`: the step failed.
    objective: Option<f64>,
    outcome: &'static str,
    accepted: bool,
    temperature: f64,
    /// Whether the measurement was reused from an earlier step.
    cached: bool,
    /// Wall time of every measured run (ns).
    walls: Vec<f64>,
    /// Medians over measured runs (ns): wall, user + system CPU, GPU busy.
    wall: Option<f64>,
    cpu: Option<f64>,
    gpu: Option<f64>,
    worker: String,
    dispatched_ms: u64,
    recorded_ms: u64,
}

impl Point {
    fn of(r: &StepRecord) -> Point {
        let result = &r.result;
        let median = |m: Metric| result.summary.get(&m).map(|s| s.median);
        let cpu = match (median(Metric::UserTime), median(Metric::SystemTime)) {
            (None, None) => None,
            (u, s) => Some(u.unwrap_or(0.0) + s.unwrap_or(0.0)),
        };
        Point {
            step: r.key.step,
            remeasure: r.kind == StepKind::Remeasure,
            objective: r.objective,
            outcome: result.outcome.name(),
            accepted: r.decision.as_ref().is_some_and(|d| d.accepted),
            temperature: r.temperature,
            cached: r.cached_from.is_some(),
            walls: result
                .runs
                .iter()
                .filter(|run| !run.warmup)
                .filter_map(|run| {
                    run.metrics
                        .get(&Metric::WallTime)
                        .and_then(|v| v.measured())
                })
                .collect(),
            wall: median(Metric::WallTime),
            cpu,
            gpu: median(Metric::GpuTime),
            worker: r.worker.clone(),
            dispatched_ms: r.dispatched_ms,
            recorded_ms: r.recorded_ms,
        }
    }
}

/// One experiment's steps, per chain in step order.
struct ExperimentData {
    name: String,
    benchmark: Option<String>,
    info: ExperimentInfo,
    chains: BTreeMap<u32, Vec<Point>>,
    /// Whether any run reported gpu-time as measured.
    gpu_measured: bool,
}

impl ExperimentData {
    fn points(&self) -> impl Iterator<Item = &Point> {
        self.chains.values().flatten()
    }
}

/// The files of one figure, for the index.
struct Figure {
    stem: String,
    caption: String,
}

/// `kiln report`: writes every plot and `index.html` into `dir`; returns the files written.
pub fn report(store: &Store, dir: &Path) -> Result<Vec<PathBuf>> {
    ensure_font()?;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let config = stored_config(store)?;
    let mut experiments = Vec::new();
    for item in store.scan::<ExperimentInfo>("exp/") {
        let (key, info) = item?;
        let name = key.trim_start_matches("exp/").to_string();
        let mut data = ExperimentData {
            benchmark: benchmark_of(config.as_ref(), &name),
            info,
            chains: BTreeMap::new(),
            gpu_measured: false,
            name,
        };
        for record in store.steps(Some(&data.name)) {
            let record = record?;
            data.gpu_measured |= record.result.runs.iter().any(|run| {
                matches!(
                    run.metrics.get(&Metric::GpuTime),
                    Some(MetricValue::Measured(_))
                )
            });
            data.chains
                .entry(record.key.chain)
                .or_default()
                .push(Point::of(&record));
        }
        experiments.push(data);
    }
    if experiments.is_empty() {
        bail!(
            "store {} holds no experiments to report on",
            store.dir().display()
        );
    }

    let mut written = Vec::new();
    let mut sections = String::new();
    for e in &experiments {
        let stem = file_stem(&e.name);
        let mut figures = vec![(
            format!("{stem}-objective"),
            objective_caption(e),
            Chart::Objective(e),
        )];
        if manual_benchmark(&e.name).is_none() {
            figures.push((
                format!("{stem}-temperature"),
                "Temperature of each chain at each step.".to_string(),
                Chart::Temperature(e),
            ));
            figures.push((
                format!("{stem}-acceptance"),
                format!(
                    "Acceptance rate of proposals over the trailing {ACCEPTANCE_WINDOW} \
                     proposals of each chain (failed proposals count as rejected)."
                ),
                Chart::Acceptance(e),
            ));
        }
        figures.push((
            format!("{stem}-runtimes"),
            "Wall time of every measured run (warm-ups left out) of each step; \
             reused measurements are not repeated."
                .to_string(),
            Chart::Runtimes(e),
        ));
        figures.push((
            format!("{stem}-time-breakdown"),
            breakdown_caption(e),
            Chart::Breakdown(e),
        ));
        let mut done = Vec::new();
        for (stem, caption, chart) in figures {
            written.extend(save(dir, &stem, &chart)?);
            done.push(Figure { stem, caption });
        }
        sections.push_str(&section(e, &done));
    }
    let workers = Figure {
        stem: "workers-throughput".into(),
        caption: "Steps finished by each worker over the campaign (reused measurements and \
                  manual steps left out): the slope is the worker's throughput, given in the \
                  legend from its first to its last result."
            .into(),
    };
    written.extend(save(dir, &workers.stem, &Chart::Throughput(&experiments))?);

    let campaign = config
        .as_ref()
        .map_or("(no campaign config)", |c| c.name.as_str());
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
        s = escape(&store.dir().display().to_string()),
    );
    html.push_str(&sections);
    let _ = write!(html, "<h2>Workers</h2>\n{}", figure_html(&workers));
    html.push_str("</body>\n</html>\n");
    let index = dir.join("index.html");
    std::fs::write(&index, html).with_context(|| format!("cannot write {}", index.display()))?;
    written.push(index);
    Ok(written)
}

fn objective_caption(e: &ExperimentData) -> String {
    let failed = e.points().filter(|p| p.objective.is_none()).count();
    let mut caption = "Objective of each step per chain: filled dots were accepted, hollow \
                       ones rejected, triangles re-measure the incumbent; the line is the best \
                       so far and the dashed line the baseline."
        .to_string();
    if failed > 0 {
        let _ = write!(
            caption,
            " {failed} failed steps are the red crosses along the bottom."
        );
    }
    caption
}

fn breakdown_caption(e: &ExperimentData) -> String {
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
            " Note: no run measured gpu-time (absent or unsupported on these workers); \
             GPU busy time is shown as 0.",
        );
    }
    caption
}

fn section(e: &ExperimentData, figures: &[Figure]) -> String {
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
    out.push_str(
        "<table>\n<tr><th>chain</th><th>steps</th><th>ok</th><th>failed</th>\
         <th>accepted</th><th>best objective</th><th>speedup</th></tr>\n",
    );
    for (chain, points) in &e.chains {
        let ok = points.iter().filter(|p| p.objective.is_some()).count();
        let accepted = points.iter().filter(|p| p.accepted).count();
        let best = points
            .iter()
            .filter_map(|p| p.objective)
            .min_by(f64::total_cmp);
        let speedup = match (baseline, best) {
            (Some(b), Some(o)) => format!("{:.3}x", b / o),
            _ => "-".into(),
        };
        let _ = writeln!(
            out,
            "<tr><td>{chain}</td><td>{}</td><td>{ok}</td><td>{}</td><td>{accepted}</td>\
             <td>{}</td><td>{speedup}</td></tr>",
            points.len(),
            points.len() - ok,
            best.map_or("-".into(), format_value),
        );
    }
    out.push_str("</table>\n");
    let mut failures: BTreeMap<&str, usize> = BTreeMap::new();
    for p in e.points().filter(|p| p.objective.is_none()) {
        *failures.entry(p.outcome).or_default() += 1;
    }
    let _ = writeln!(
        out,
        "<p>Baseline objective {}.{}</p>",
        baseline.map_or("-".into(), format_value),
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

fn figure_html(f: &Figure) -> String {
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

/// The plots.
enum Chart<'a> {
    Objective(&'a ExperimentData),
    Temperature(&'a ExperimentData),
    Acceptance(&'a ExperimentData),
    Runtimes(&'a ExperimentData),
    Breakdown(&'a ExperimentData),
    Throughput(&'a [ExperimentData]),
}

/// Draws a chart as `<stem>.png` and `<stem>.svg`; returns both paths.
fn save(dir: &Path, stem: &str, chart: &Chart<'_>) -> Result<Vec<PathBuf>> {
    let png = dir.join(format!("{stem}.png"));
    let svg = dir.join(format!("{stem}.svg"));
    {
        let root = BitMapBackend::new(&png, SIZE).into_drawing_area();
        chart.draw(&root)?;
        root.present()
            .with_context(|| format!("cannot write {}", png.display()))?;
    }
    {
        let root = SVGBackend::new(&svg, SIZE).into_drawing_area();
        chart.draw(&root)?;
        root.present()
            .with_context(|| format!("cannot write {}", svg.display()))?;
    }
    Ok(vec![png, svg])
}

/// A chain's colour, the same in every plot.
fn color(chain: u32) -> RGBColor {
    let c = Palette99::pick(chain as usize).to_rgba();
    RGBColor(c.0, c.1, c.2)
}

/// A padded value range that plotters can draw (never empty).
fn range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    if lo > hi {
        return (0.0, 1.0);
    }
    let pad = ((hi - lo) * 0.05)
        .max(hi.abs().max(lo.abs()) * 1e-3)
        .max(1e-9);
    (lo - pad, hi + pad)
}

/// A number with an SI suffix, for axis labels.
fn si(v: &f64) -> String {
    let a = v.abs();
    let (scaled, suffix) = if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e3 {
        (v / 1e3, "k")
    } else {
        (*v, "")
    };
    let text = format!("{scaled:.3}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{text}{suffix}")
}

fn step_of(v: &f64) -> String {
    format!("{v:.0}")
}

/// The legend of a chart's labelled series, in every plot's style.
fn draw_legend<'a, DB, CT>(
    chart: &mut ChartContext<'a, DB, CT>,
    position: SeriesLabelPosition,
) -> Result<()>
where
    DB: DrawingBackend + 'a,
    DB::ErrorType: 'static,
    CT: CoordTranslate,
{
    chart
        .configure_series_labels()
        .position(position)
        .label_font((FAMILY, 13))
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(draw_error)?;
    Ok(())
}

fn draw_error<E: std::error::Error + Send + Sync + 'static>(e: E) -> anyhow::Error {
    anyhow::anyhow!("cannot draw a plot: {e}")
}

impl Chart<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<()>
    where
        DB::ErrorType: 'static,
    {
        root.fill(&WHITE).map_err(draw_error)?;
        match self {
            Chart::Objective(e) => objective(root, e),
            Chart::Temperature(e) => {
                let series = e
                    .chains
                    .iter()
                    .map(|(c, points)| {
                        (
                            *c,
                            points
                                .iter()
                                .map(|p| (f64::from(p.step), p.temperature))
                                .collect(),
                        )
                    })
                    .collect();
                lines(
                    root,
                    &format!("{}: temperature", e.name),
                    "temperature",
                    series,
                )
            }
            Chart::Acceptance(e) => {
                let series = e
                    .chains
                    .iter()
                    .map(|(c, points)| (*c, acceptance(points)))
                    .collect();
                lines(
                    root,
                    &format!("{}: acceptance rate", e.name),
                    "accepted fraction",
                    series,
                )
            }
            Chart::Runtimes(e) => runtimes(root, e),
            Chart::Breakdown(e) => breakdown(root, e),
            Chart::Throughput(all) => throughput(root, all),
        }
    }
}

/// The trailing acceptance rate of a chain's proposals, at each proposal's step.
fn acceptance(points: &[Point]) -> Vec<(f64, f64)> {
    let proposals: Vec<&Point> = points.iter().filter(|p| !p.remeasure).collect();
    proposals
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let window = &proposals[(i + 1).saturating_sub(ACCEPTANCE_WINDOW)..=i];
            let accepted = window.iter().filter(|q| q.accepted).count();
            (f64::from(p.step), accepted as f64 / window.len() as f64)
        })
        .collect()
}

fn max_step(e: &ExperimentData) -> f64 {
    e.points().map(|p| f64::from(p.step)).fold(0.0, f64::max) + 1.0
}

fn title_style() -> TextStyle<'static> {
    (FAMILY, 20).into_font().into()
}

fn lines<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    y_desc: &str,
    series: Vec<(u32, Vec<(f64, f64)>)>,
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let x_max = series
        .iter()
        .flat_map(|(_, s)| s.iter().map(|p| p.0))
        .fold(0.0, f64::max)
        + 1.0;
    let (y_lo, y_hi) = range(series.iter().flat_map(|(_, s)| s.iter().map(|p| p.1)));
    let mut chart = ChartBuilder::on(root)
        .caption(title, title_style())
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x_max, y_lo..y_hi)
        .map_err(draw_error)?;
    chart
        .configure_mesh()
        .x_desc("step")
        .y_desc(y_desc)
        .x_label_formatter(&step_of)
        .y_label_formatter(&si)
        .label_style((FAMILY, 13))
        .draw()
        .map_err(draw_error)?;
    for (chain, points) in series {
        let c = color(chain);
        chart
            .draw_series(LineSeries::new(points, c.stroke_width(2)))
            .map_err(draw_error)?
            .label(format!("chain {chain}"))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2)));
    }
    draw_legend(&mut chart, SeriesLabelPosition::MiddleRight)
}

fn objective<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, e: &ExperimentData) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let baseline = e.info.baseline.objective();
    let x_max = max_step(e);
    let (y_lo, y_hi) = range(e.points().filter_map(|p| p.objective).chain(baseline));
    let mut chart = ChartBuilder::on(root)
        .caption(format!("{}: objective per step", e.name), title_style())
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(-0.5..x_max, y_lo..y_hi)
        .map_err(draw_error)?;
    chart
        .configure_mesh()
        .x_desc("step")
        .y_desc("objective")
        .x_label_formatter(&step_of)
        .y_label_formatter(&si)
        .label_style((FAMILY, 13))
        .draw()
        .map_err(draw_error)?;
    if let Some(b) = baseline {
        chart
            .draw_series(DashedLineSeries::new(
                [(-0.5, b), (x_max, b)],
                8,
                6,
                BLACK.stroke_width(1),
            ))
            .map_err(draw_error)?
            .label("baseline")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLACK));
    }
    // Marker meanings, in black; each chain draws them in its own colour.
    chart
        .draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())
        .map_err(draw_error)?
        .label("accepted")
        .legend(|(x, y)| Circle::new((x + 9, y), 4, BLACK.filled()));
    chart
        .draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())
        .map_err(draw_error)?
        .label("rejected")
        .legend(|(x, y)| Circle::new((x + 9, y), 4, BLACK.stroke_width(1)));
    if e.points().any(|p| p.remeasure) {
        chart
            .draw_series(std::iter::empty::<Circle<(f64, f64), i32>>())
            .map_err(draw_error)?
            .label("re-measured incumbent")
            .legend(|(x, y)| TriangleMarker::new((x + 9, y), 5, BLACK.filled()));
    }
    for (chain, points) in &e.chains {
        let c = color(*chain);
        let mut best = f64::INFINITY;
        let best_line: Vec<(f64, f64)> = points
            .iter()
            .filter_map(|p| {
                best = best.min(p.objective?);
                Some((f64::from(p.step), best))
            })
            .collect();
        chart
            .draw_series(LineSeries::new(best_line, c.stroke_width(2)))
            .map_err(draw_error)?
            .label(format!("chain {chain}: best so far"))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2)));
        let measured = points.iter().filter_map(|p| Some((p, p.objective?)));
        chart
            .draw_series(
                measured
                    .clone()
                    .filter(|(p, _)| p.remeasure)
                    .map(|(p, o)| TriangleMarker::new((f64::from(p.step), o), 5, c.filled())),
            )
            .map_err(draw_error)?;
        chart
            .draw_series(measured.filter(|(p, _)| !p.remeasure).map(|(p, o)| {
                let style = if p.accepted {
                    c.filled()
                } else {
                    c.stroke_width(1)
                };
                Circle::new((f64::from(p.step), o), 4, style)
            }))
            .map_err(draw_error)?;
    }
    let failed: Vec<f64> = e
        .points()
        .filter(|p| p.objective.is_none())
        .map(|p| f64::from(p.step))
        .collect();
    if !failed.is_empty() {
        let y = y_lo + (y_hi - y_lo) * 0.02;
        chart
            .draw_series(
                failed
                    .into_iter()
                    .map(|x| Cross::new((x, y), 5, RED.stroke_width(2))),
            )
            .map_err(draw_error)?
            .label("failed")
            .legend(|(x, y)| Cross::new((x + 9, y), 5, RED.stroke_width(2)));
    }
    draw_legend(&mut chart, SeriesLabelPosition::MiddleRight)
}

fn runtimes<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, e: &ExperimentData) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let chains = e.chains.len().max(1) as f64;
    // Chains side by side within a step, so that their strips do not overlap.
    let dots: Vec<(u32, f64, f64)> = e
        .chains
        .iter()
        .enumerate()
        .flat_map(|(k, (chain, points))| {
            let shift = 0.6 * k as f64 / chains - 0.3 * (chains - 1.0) / chains;
            points.iter().filter(|p| !p.cached).flat_map(move |p| {
                p.walls
                    .iter()
                    .map(move |w| (*chain, f64::from(p.step) + shift, w / 1e6))
            })
        })
        .collect();
    let (y_lo, y_hi) = range(dots.iter().map(|d| d.2));
    let mut chart = ChartBuilder::on(root)
        .caption(format!("{}: wall time of each run", e.name), title_style())
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(-0.5..max_step(e), y_lo.max(0.0)..y_hi)
        .map_err(draw_error)?;
    chart
        .configure_mesh()
        .x_desc("step")
        .y_desc("wall time (ms)")
        .x_label_formatter(&step_of)
        .y_label_formatter(&si)
        .label_style((FAMILY, 13))
        .draw()
        .map_err(draw_error)?;
    for chain in e.chains.keys() {
        let c = color(*chain);
        chart
            .draw_series(
                dots.iter()
                    .filter(|d| d.0 == *chain)
                    .map(|d| Circle::new((d.1, d.2), 2, c.filled())),
            )
            .map_err(draw_error)?
            .label(format!("chain {chain}"))
            .legend(move |(x, y)| Circle::new((x + 9, y), 3, c.filled()));
    }
    draw_legend(&mut chart, SeriesLabelPosition::MiddleRight)
}

fn breakdown<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, e: &ExperimentData) -> Result<()>
where
    DB::ErrorType: 'static,
{
    // (CPU, GPU, rest of wall) in ms per successful, freshly measured step, in store order.
    let steps: Vec<[f64; 3]> = e
        .points()
        .filter(|p| !p.cached)
        .filter_map(|p| {
            let wall = p.wall?;
            let cpu = p.cpu.unwrap_or(0.0);
            let gpu = p.gpu.unwrap_or(0.0);
            Some([cpu / 1e6, gpu / 1e6, (wall - cpu - gpu).max(0.0) / 1e6])
        })
        .collect();
    let group = steps.len().div_ceil(MAX_BARS).max(1);
    let bars: Vec<[f64; 3]> = steps
        .chunks(group)
        .map(|chunk| {
            let n = chunk.len() as f64;
            let mut sum = [0.0; 3];
            for s in chunk {
                for (acc, v) in sum.iter_mut().zip(s) {
                    *acc += v / n;
                }
            }
            sum
        })
        .collect();
    let y_hi = range(bars.iter().map(|b| b.iter().sum::<f64>()).chain([0.0])).1;
    let x_desc = if group > 1 {
        format!("successful steps in store order (groups of {group})")
    } else {
        "successful steps in store order".to_string()
    };
    let mut chart = ChartBuilder::on(root)
        .caption(
            format!("{}: where a run's time goes", e.name),
            title_style(),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(-0.5..(bars.len().max(1) as f64 - 0.5), 0.0..y_hi)
        .map_err(draw_error)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc("median per run (ms)")
        .x_label_formatter(&step_of)
        .y_label_formatter(&si)
        .label_style((FAMILY, 13))
        .disable_x_mesh()
        .draw()
        .map_err(draw_error)?;
    let parts: [(&str, RGBColor); 3] = [
        ("user + system CPU", RGBColor(52, 101, 164)),
        ("GPU busy", RGBColor(115, 210, 22)),
        ("rest of wall time", RGBColor(186, 189, 182)),
    ];
    for (k, (label, c)) in parts.into_iter().enumerate() {
        chart
            .draw_series(bars.iter().enumerate().map(|(i, b)| {
                let bottom: f64 = b[..k].iter().sum();
                let x = i as f64;
                Rectangle::new([(x - 0.4, bottom), (x + 0.4, bottom + b[k])], c.filled())
            }))
            .map_err(draw_error)?
            .label(label)
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 14, y + 5)], c.filled()));
    }
    draw_legend(&mut chart, SeriesLabelPosition::MiddleRight)
}

fn throughput<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    all: &[ExperimentData],
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    // Manual steps are measured by hand, at any time: they say nothing of a
    // worker's throughput in a campaign.
    let measured = || {
        all.iter()
            .filter(|e| manual_benchmark(&e.name).is_none())
            .flat_map(|e| e.points())
            .filter(|p| !p.cached)
    };
    let start = measured().map(|p| p.dispatched_ms).min().unwrap_or(0);
    let span_ms = measured()
        .map(|p| p.recorded_ms.saturating_sub(start))
        .max()
        .unwrap_or(0);
    let (unit, per_ms) = if span_ms < 120_000 {
        ("s", 1e3)
    } else if span_ms < 7_200_000 {
        ("min", 6e4)
    } else {
        ("h", 3.6e6)
    };
    let mut finished: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for p in measured() {
        finished
            .entry(p.worker.as_str())
            .or_default()
            .push(p.recorded_ms);
    }
    let x_hi = (span_ms as f64 / per_ms).max(1e-3) * 1.02;
    let y_hi = finished.values().map(Vec::len).max().unwrap_or(0) as f64 * 1.05 + 1.0;
    let mut chart = ChartBuilder::on(root)
        .caption("steps finished by each worker", title_style())
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..x_hi, 0.0..y_hi)
        .map_err(draw_error)?;
    chart
        .configure_mesh()
        .x_desc(format!("time since the first dispatch ({unit})"))
        .y_desc("steps finished")
        .x_label_formatter(&si)
        .y_label_formatter(&step_of)
        .label_style((FAMILY, 13))
        .draw()
        .map_err(draw_error)?;
    for (k, (worker, mut times)) in finished.into_iter().enumerate() {
        times.sort_unstable();
        let c = color(k as u32);
        let n = times.len();
        let rate = match (times.first(), times.last()) {
            (Some(first), Some(last)) if n >= 2 && last > first => {
                format!(
                    "{:.1} steps/h",
                    (n - 1) as f64 / ((last - first) as f64 / 3.6e6)
                )
            }
            _ => "rate unknown".to_string(),
        };
        let line: Vec<(f64, f64)> = std::iter::once((0.0, 0.0))
            .chain(
                times
                    .iter()
                    .enumerate()
                    .map(|(i, t)| ((t - start) as f64 / per_ms, (i + 1) as f64)),
            )
            .collect();
        chart
            .draw_series(LineSeries::new(line, c.stroke_width(2)))
            .map_err(draw_error)?
            .label(format!("{worker}: {n} steps, {rate}"))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2)));
    }
    draw_legend(&mut chart, SeriesLabelPosition::UpperLeft)
}
