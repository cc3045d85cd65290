//! The plots, drawn with plotters as PNG and SVG.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use plotters::coord::Shift;
use plotters::prelude::*;

use super::data::{ExperimentData, Point};
use super::font::FAMILY;
use crate::store::manual_benchmark;

/// Pixel size of every plot.
const SIZE: (u32, u32) = (1000, 480);

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

/// Draws a chart as `<stem>.png` and `<stem>.svg`; returns both paths.
pub(super) fn save(dir: &Path, stem: &str, chart: &Chart<'_>) -> Result<Vec<PathBuf>> {
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
