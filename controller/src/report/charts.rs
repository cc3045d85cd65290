//! The plots, drawn with plotters as PNG and SVG.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;

use super::data::{ExperimentData, Point};
use super::font::FAMILY;
use crate::atomic::Staging;
use crate::store::{manual_benchmark, StepKind};
use crate::text::{format_value, TIME_RATIO};

/// Pixel size of every plot.
const SIZE: (u32, u32) = (1200, 500);

/// Width on the right of every plot kept for its legend, so that the legend never hides data.
const LEGEND_WIDTH: u32 = 250;

/// Proposals in the trailing window of the acceptance rate.
pub(super) const ACCEPTANCE_WINDOW: usize = 20;

/// Most bars in a time breakdown; more steps are averaged in consecutive groups.
pub(super) const MAX_BARS: usize = 150;

/// The plots.
pub(super) enum Chart<'a> {
    Objective(&'a ExperimentData),
    Temperature(&'a ExperimentData),
    Acceptance(&'a ExperimentData),
    Runtimes(&'a ExperimentData),
    Breakdown(&'a ExperimentData),
    Throughput(&'a [ExperimentData]),
}

/// Draws a chart as `<stem>.png` and `<stem>.svg` (put in place when `staging`
/// is committed); returns both paths.
pub(super) fn save(
    staging: &mut Staging,
    dir: &Path,
    stem: &str,
    chart: &Chart<'_>,
) -> Result<Vec<PathBuf>> {
    let png = dir.join(format!("{stem}.png"));
    let svg = dir.join(format!("{stem}.svg"));
    {
        let file = staging.create(&png)?;
        let root = BitMapBackend::new(file.path(), SIZE).into_drawing_area();
        chart.draw(&root)?;
        root.present()
            .with_context(|| format!("cannot write {}", png.display()))?;
    }
    {
        let file = staging.create(&svg)?;
        let root = SVGBackend::new(file.path(), SIZE).into_drawing_area();
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

/// A number with an SI suffix, for axis labels; below 1, in three significant digits.
fn si(v: &f64) -> String {
    let a = v.abs();
    if a < 1.0 {
        return sig(v);
    }
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

/// A number in at most three significant digits, so that close ticks stay
/// apart: 0.0015, 0.002, 250, 2.5e-5.
fn sig(v: &f64) -> String {
    let a = v.abs();
    if a == 0.0 || !a.is_finite() {
        return format!("{v}");
    }
    let trim = |t: &str| -> String {
        match t.contains('.') {
            true => t.trim_end_matches('0').trim_end_matches('.').to_string(),
            false => t.to_string(),
        }
    };
    if (1e-3..1e5).contains(&a) {
        let decimals = (2 - a.log10().floor() as i32).max(0) as usize;
        trim(&format!("{v:.decimals$}"))
    } else {
        let text = format!("{v:.2e}");
        let (mantissa, exponent) = text.split_once('e').unwrap_or((&text, "0"));
        format!("{}e{exponent}", trim(mantissa))
    }
}

/// Ticks of a log axis from `lo` to `hi`: powers of ten, or 1-2-5 or every
/// digit within them where the range spans too few decades for plotters'
/// own ticks (none within one decade).
fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    let (first, last) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    let mut ticks = Vec::new();
    for mantissas in [
        &[1.0][..],
        &[1.0, 2.0, 5.0],
        &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0],
    ] {
        ticks = (first..=last)
            .flat_map(|e| mantissas.iter().map(move |m| m * 10f64.powi(e)))
            .filter(|t| (lo..=hi).contains(t))
            .collect();
        if ticks.len() >= 4 {
            break;
        }
    }
    ticks
}

fn step_of(v: &f64) -> String {
    format!("{v:.0}")
}

/// Width of the area of a y axis's tick labels and title.
const Y_LABELS: u32 = 80;

/// A chart's frame in every plot's style: title, margins and the axes' label areas.
fn frame<'a, 'b, DB: DrawingBackend>(
    root: &'a DrawingArea<DB, Shift>,
    title: &str,
) -> ChartBuilder<'a, 'b, DB> {
    let mut builder = ChartBuilder::on(root);
    builder
        .caption(title, title_style())
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(Y_LABELS);
    builder
}

/// How a legend entry shows its series.
#[derive(Clone, Copy)]
enum Mark {
    Line(RGBColor),
    Dashed,
    Dot(RGBColor),
    Ring,
    Triangle,
    Square,
    Cross,
    Block(RGBColor),
}

/// A legend entry: the series' label and mark.
type Entry = (String, Mark);

/// Draws the legend in `area`, the room right of the plot: plotters draws
/// its own legends only inside the plotting area, over the data.
fn draw_legend<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, entries: &[Entry]) -> Result<()>
where
    DB::ErrorType: 'static,
{
    for (i, (label, mark)) in entries.iter().enumerate() {
        // Level with the top of the plotting area, below the title.
        let (x, y) = (8, 52 + 20 * i as i32);
        let drawn = match *mark {
            Mark::Line(c) => area.draw(&PathElement::new(
                vec![(x, y), (x + 18, y)],
                c.stroke_width(2),
            )),
            Mark::Dashed => area
                .draw(&PathElement::new(vec![(x, y), (x + 7, y)], BLACK))
                .and_then(|_| area.draw(&PathElement::new(vec![(x + 11, y), (x + 18, y)], BLACK))),
            Mark::Dot(c) => area.draw(&Circle::new((x + 9, y), 4, c.filled())),
            Mark::Ring => area.draw(&Circle::new((x + 9, y), 4, BLACK.stroke_width(1))),
            Mark::Triangle => area.draw(&TriangleMarker::new((x + 9, y), 5, BLACK.filled())),
            Mark::Square => area.draw(&Rectangle::new(
                [(x + 6, y - 3), (x + 12, y + 3)],
                BLACK.stroke_width(1),
            )),
            Mark::Cross => area.draw(&Cross::new((x + 9, y), 5, RED.stroke_width(2))),
            Mark::Block(c) => area.draw(&Rectangle::new(
                [(x + 2, y - 5), (x + 16, y + 5)],
                c.filled(),
            )),
        };
        drawn.map_err(draw_error)?;
        area.draw(&Text::new(label.as_str(), (x + 26, y - 7), (FAMILY, 13)))
            .map_err(draw_error)?;
    }
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
        let (plot, legend) = root.split_horizontally(SIZE.0 - LEGEND_WIDTH);
        let root = &plot;
        let entries = match self {
            Chart::Objective(e) => objective(root, e),
            Chart::Temperature(e) => {
                let series: Vec<(u32, Vec<(f64, f64)>)> = e
                    .chains
                    .iter()
                    .map(|(c, points)| {
                        (
                            *c,
                            points
                                .iter()
                                .filter(|p| p.temperature > 0.0)
                                .map(|p| (f64::from(p.step), p.temperature))
                                .collect(),
                        )
                    })
                    .collect();
                // Temperatures fall geometrically: a log axis shows every decade.
                let (lo, hi) = positive_range(series.iter().flat_map(|(_, s)| s).map(|p| p.1));
                let y = LogCoord::from((lo..hi).log_scale()).with_key_points(log_ticks(lo, hi));
                lines(
                    root,
                    &format!("{}: temperature", e.name),
                    "temperature (log scale)",
                    y,
                    &sig,
                    series,
                )
            }
            Chart::Acceptance(e) => {
                let series: Vec<_> = e
                    .chains
                    .iter()
                    .map(|(c, points)| (*c, acceptance(points)))
                    .collect();
                lines(
                    root,
                    &format!("{}: acceptance rate", e.name),
                    &format!("accepted fraction of the last {ACCEPTANCE_WINDOW} proposals"),
                    -0.02..1.02,
                    &si,
                    series,
                )
            }
            Chart::Runtimes(e) => runtimes(root, e),
            Chart::Breakdown(e) => breakdown(root, e),
            Chart::Throughput(all) => throughput(root, all),
        }?;
        draw_legend(&legend, &entries)
    }
}

/// A padded range of the positive values, for a log axis (never empty).
fn positive_range(values: impl Iterator<Item = f64>) -> (f64, f64) {
    let (lo, hi) = values
        .filter(|v| v.is_finite() && *v > 0.0)
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    if lo > hi {
        return (0.1, 10.0);
    }
    // Wide enough for at least two ticks (see `log_ticks`).
    (lo / 1.5, hi * 1.5)
}

/// The trailing acceptance rate of a chain's proposals, at each proposal's step
/// (screened flips and re-measurements are never taken, so not among them).
fn acceptance(points: &[Point]) -> Vec<(f64, f64)> {
    let proposals: Vec<&Point> = points.iter().filter(|p| p.kind.can_move()).collect();
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

/// One line per chain against the step, on the y axis `y`.
fn lines<DB, Y>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
    y_desc: &str,
    y: Y,
    y_format: &dyn Fn(&f64) -> String,
    series: Vec<(u32, Vec<(f64, f64)>)>,
) -> Result<Vec<Entry>>
where
    DB: DrawingBackend,
    DB::ErrorType: 'static,
    Y: AsRangedCoord<Value = f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let x_max = series
        .iter()
        .flat_map(|(_, s)| s.iter().map(|p| p.0))
        .fold(0.0, f64::max)
        + 1.0;
    let mut chart = frame(root, title)
        .build_cartesian_2d(0.0..x_max, y)
        .map_err(draw_error)?;
    chart
        .configure_mesh()
        .x_desc("step")
        .y_desc(y_desc)
        .x_label_formatter(&step_of)
        .y_label_formatter(y_format)
        .label_style((FAMILY, 13))
        .draw()
        .map_err(draw_error)?;
    let mut legend = Vec::new();
    for (chain, points) in series {
        let c = color(chain);
        chart
            .draw_series(LineSeries::new(points, c.stroke_width(2)))
            .map_err(draw_error)?;
        legend.push((format!("chain {chain}"), Mark::Line(c)));
    }
    Ok(legend)
}

/// The coordinates of a plot of values against the step.
type StepPlane = Cartesian2d<RangedCoordf64, RangedCoordf64>;

fn objective<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    e: &ExperimentData,
) -> Result<Vec<Entry>>
where
    DB::ErrorType: 'static,
{
    let axis = &e.objective;
    let baseline = e.info.baseline.objective().map(|b| b * axis.scale);
    let measured = |p: &Point| p.objective.map(|o| o * axis.scale);
    let x_max = max_step(e);
    let (y_lo, y_hi) = range(e.points().filter_map(measured).chain(baseline));
    let mut builder = frame(root, &format!("{}: objective per step", e.name));
    if baseline.is_some() {
        builder.right_y_label_area_size(Y_LABELS);
    }
    let mut chart = builder
        .build_cartesian_2d(-0.5..x_max, y_lo..y_hi)
        .map_err(draw_error)?
        // The same heights as time ratios: best against stock at a glance.
        .set_secondary_coord(
            -0.5..x_max,
            baseline.map_or(0.0..1.0, |b| y_lo / b..y_hi / b),
        );
    chart
        .configure_mesh()
        .x_desc("step")
        .y_desc(&axis.label)
        .x_label_formatter(&step_of)
        .y_label_formatter(&si)
        .label_style((FAMILY, 13))
        .draw()
        .map_err(draw_error)?;
    if baseline.is_some() {
        chart
            .configure_secondary_axes()
            .y_desc(format!("{TIME_RATIO} (step / baseline)"))
            .y_label_formatter(&sig)
            .label_style((FAMILY, 13))
            .draw()
            .map_err(draw_error)?;
    }
    let mut legend = objective_baseline(&mut chart, e, baseline, x_max)?;
    for (chain, points) in &e.chains {
        legend.push(objective_chain(
            &mut chart, *chain, points, baseline, axis.scale,
        )?);
    }
    legend.extend(objective_failed(&mut chart, e, y_lo, y_hi)?);
    Ok(legend)
}

/// The baseline's dashed line across the objective plot; the legend's first entries:
/// the baseline, and what each marker means (in black; each chain draws them in its
/// own colour).
fn objective_baseline<DB: DrawingBackend>(
    chart: &mut ChartContext<'_, DB, StepPlane>,
    e: &ExperimentData,
    baseline: Option<f64>,
    x_max: f64,
) -> Result<Vec<Entry>>
where
    DB::ErrorType: 'static,
{
    let mut legend = Vec::new();
    if let Some(b) = baseline {
        chart
            .draw_series(DashedLineSeries::new(
                [(-0.5, b), (x_max, b)],
                8,
                6,
                BLACK.stroke_width(1),
            ))
            .map_err(draw_error)?;
        legend.push((format!("baseline ({TIME_RATIO} 1)"), Mark::Dashed));
    }
    legend.push(("accepted".to_string(), Mark::Dot(BLACK)));
    legend.push(("rejected".to_string(), Mark::Ring));
    if e.points().any(|p| p.kind == StepKind::Remeasure) {
        legend.push(("re-measured incumbent".to_string(), Mark::Triangle));
    }
    if e.points().any(|p| p.kind == StepKind::Screen) {
        legend.push(("screened flip (never taken)".to_string(), Mark::Square));
    }
    Ok(legend)
}

/// One chain on the objective plot, in its colour: its best so far as a line, and
/// each measured step as its kind's marker; its legend entry.
fn objective_chain<DB: DrawingBackend>(
    chart: &mut ChartContext<'_, DB, StepPlane>,
    chain: u32,
    points: &[Point],
    baseline: Option<f64>,
    scale: f64,
) -> Result<Entry>
where
    DB::ErrorType: 'static,
{
    let measured = |p: &Point| p.objective.map(|o| o * scale);
    let c = color(chain);
    // The best so far starts at the baseline: a step only counts below it.
    let mut best = baseline.unwrap_or(f64::INFINITY);
    let best_line: Vec<(f64, f64)> = points
        .iter()
        .filter_map(|p| {
            best = best.min(measured(p)?);
            Some((f64::from(p.step), best))
        })
        .collect();
    chart
        .draw_series(LineSeries::new(best_line, c.stroke_width(2)))
        .map_err(draw_error)?;
    let entry = (format!("chain {chain}: best so far"), Mark::Line(c));
    let measured = points.iter().filter_map(|p| Some((p, measured(p)?)));
    chart
        .draw_series(
            measured
                .clone()
                .filter(|(p, _)| p.kind == StepKind::Remeasure)
                .map(|(p, o)| TriangleMarker::new((f64::from(p.step), o), 5, c.filled())),
        )
        .map_err(draw_error)?;
    chart
        .draw_series(
            measured
                .clone()
                .filter(|(p, _)| p.kind == StepKind::Screen)
                .map(|(p, o)| {
                    EmptyElement::at((f64::from(p.step), o))
                        + Rectangle::new([(-3, -3), (3, 3)], c.stroke_width(1))
                }),
        )
        .map_err(draw_error)?;
    chart
        .draw_series(measured.filter(|(p, _)| p.kind.can_move()).map(|(p, o)| {
            let style = if p.accepted {
                c.filled()
            } else {
                c.stroke_width(1)
            };
            Circle::new((f64::from(p.step), o), 4, style)
        }))
        .map_err(draw_error)?;
    Ok(entry)
}

/// A cross at the foot of the objective plot for each failed step; its legend
/// entry where there is one.
fn objective_failed<DB: DrawingBackend>(
    chart: &mut ChartContext<'_, DB, StepPlane>,
    e: &ExperimentData,
    y_lo: f64,
    y_hi: f64,
) -> Result<Option<Entry>>
where
    DB::ErrorType: 'static,
{
    let failed: Vec<f64> = e
        .points()
        .filter(|p| p.objective.is_none())
        .map(|p| f64::from(p.step))
        .collect();
    if failed.is_empty() {
        return Ok(None);
    }
    let y = y_lo + (y_hi - y_lo) * 0.02;
    chart
        .draw_series(
            failed
                .into_iter()
                .map(|x| Cross::new((x, y), 5, RED.stroke_width(2))),
        )
        .map_err(draw_error)?;
    Ok(Some(("failed".to_string(), Mark::Cross)))
}

fn runtimes<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    e: &ExperimentData,
) -> Result<Vec<Entry>>
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
    let mut chart = frame(root, &format!("{}: wall time of each run", e.name))
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
    let mut legend = Vec::new();
    for chain in e.chains.keys() {
        let c = color(*chain);
        chart
            .draw_series(
                dots.iter()
                    .filter(|d| d.0 == *chain)
                    .map(|d| Circle::new((d.1, d.2), 2, c.filled())),
            )
            .map_err(draw_error)?;
        legend.push((format!("chain {chain}"), Mark::Dot(c)));
    }
    Ok(legend)
}

/// The time breakdown's bars: (CPU, GPU, rest of wall) in ms per successful, freshly measured
/// step, in store order, averaged over groups of steps where there are more than
/// [`MAX_BARS`]; and how many steps a bar groups.
fn breakdown_bars(e: &ExperimentData) -> (Vec<[f64; 3]>, usize) {
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
    let bars = steps
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
    (bars, group)
}

fn breakdown<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    e: &ExperimentData,
) -> Result<Vec<Entry>>
where
    DB::ErrorType: 'static,
{
    let (bars, group) = breakdown_bars(e);
    let y_hi = range(bars.iter().map(|b| b.iter().sum::<f64>()).chain([0.0])).1;
    let x_desc = if group > 1 {
        format!("successful steps in store order (groups of {group})")
    } else {
        "successful steps in store order".to_string()
    };
    let mut chart = frame(root, &format!("{}: where a run's time goes", e.name))
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
    let mut legend = Vec::new();
    // A part no run measured is 0 in every bar: it gets no legend entry either.
    let parts: [(&str, RGBColor, bool); 3] = [
        (
            "user + system CPU",
            RGBColor(52, 101, 164),
            e.points().any(|p| p.cpu.is_some()),
        ),
        ("GPU busy", RGBColor(115, 210, 22), e.gpu_measured),
        ("rest of wall time", RGBColor(186, 189, 182), true),
    ];
    for (k, (label, c, _)) in parts.into_iter().enumerate().filter(|(_, p)| p.2) {
        chart
            .draw_series(bars.iter().enumerate().map(|(i, b)| {
                let bottom: f64 = b[..k].iter().sum();
                let x = i as f64;
                Rectangle::new([(x - 0.4, bottom), (x + 0.4, bottom + b[k])], c.filled())
            }))
            .map_err(draw_error)?;
        legend.push((label.to_string(), Mark::Block(c)));
    }
    Ok(legend)
}

/// The unit a span of `span_ms` reads best in, and its milliseconds.
fn time_unit(span_ms: u64) -> (&'static str, f64) {
    if span_ms < 120_000 {
        ("s", 1e3)
    } else if span_ms < 7_200_000 {
        ("min", 6e4)
    } else {
        ("h", 3.6e6)
    }
}

/// A worker's throughput from its first to its last result: `times` (when each finished, and
/// how many steps it counts for), `n` steps in all, sorted.
fn rate(times: &[(u64, u32)], n: u64) -> String {
    match (times.first(), times.last()) {
        (Some(first), Some(last)) if n >= 2 && last.0 > first.0 => {
            let after_first = n - u64::from(first.1);
            format!(
                "{} steps/h",
                format_value(after_first as f64 / ((last.0 - first.0) as f64 / 3.6e6))
            )
        }
        _ => "rate unknown".to_string(),
    }
}

fn throughput<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    all: &[ExperimentData],
) -> Result<Vec<Entry>>
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
    let (unit, per_ms) = time_unit(span_ms);
    // A point drawn for several steps (a long chain's) counts them all, for its worker.
    let mut finished: BTreeMap<&str, Vec<(u64, u32)>> = BTreeMap::new();
    for p in measured() {
        finished
            .entry(p.worker.as_str())
            .or_default()
            .push((p.recorded_ms, p.weight));
    }
    let total = |times: &[(u64, u32)]| times.iter().map(|t| u64::from(t.1)).sum::<u64>();
    let x_hi = (span_ms as f64 / per_ms).max(1e-3) * 1.02;
    let y_hi = finished.values().map(|t| total(t)).max().unwrap_or(0) as f64 * 1.05 + 1.0;
    let mut chart = frame(root, "steps finished by each worker")
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
    let mut legend = Vec::new();
    for (k, (worker, mut times)) in finished.into_iter().enumerate() {
        times.sort_unstable();
        let c = color(k as u32);
        let n = total(&times);
        let rate = rate(&times, n);
        let mut so_far = 0u64;
        let line: Vec<(f64, f64)> = std::iter::once((0.0, 0.0))
            .chain(times.iter().map(|(t, weight)| {
                so_far += u64::from(*weight);
                ((t - start) as f64 / per_ms, so_far as f64)
            }))
            .collect();
        chart
            .draw_series(LineSeries::new(line, c.stroke_width(2)))
            .map_err(draw_error)?;
        legend.push((format!("{worker}: {n} steps, {rate}"), Mark::Line(c)));
    }
    Ok(legend)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_ticks_of_temperatures_are_distinct_and_readable() {
        // A cooling chain within one decade: plotters' own ticks would be none.
        let ticks = log_ticks(0.0012, 0.0045);
        let labels: Vec<String> = ticks.iter().map(sig).collect();
        assert_eq!(labels, ["0.002", "0.003", "0.004"]);
        // Over several decades, powers of ten.
        let labels: Vec<String> = log_ticks(2e-6, 30.0).iter().map(sig).collect();
        assert_eq!(labels, ["1e-5", "1e-4", "0.001", "0.01", "0.1", "1", "10"]);
        // Over about two decades, 1-2-5.
        let labels: Vec<String> = log_ticks(0.004, 0.3).iter().map(sig).collect();
        assert_eq!(labels, ["0.005", "0.01", "0.02", "0.05", "0.1", "0.2"]);
    }

    #[test]
    fn small_linear_ticks_keep_their_digits() {
        let labels: Vec<String> = [0.0015, 0.002, 0.0025].iter().map(si).collect();
        assert_eq!(labels, ["0.0015", "0.002", "0.0025"]);
        assert_eq!(si(&2500.0), "2.5k");
        assert_eq!(sig(&2.5e-7), "2.5e-7");
    }
}
