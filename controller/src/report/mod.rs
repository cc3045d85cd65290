//! `kiln report`: plots of a campaign as PNG and SVG, tied together by an index.html.
//!
//! Per experiment: the objective against the step per chain (accepted and
//! rejected proposals, failed steps, best so far, the baseline, and the time
//! ratio to it), the temperature, the rolling acceptance rate, the wall time
//! of every measured run, and a CPU/GPU time breakdown per step; panels of
//! what no step measured are left out. For the whole store: each
//! worker's throughput. Text is drawn with a TrueType font read at run time
//! (DejaVu Sans from Debian's `fonts-dejavu-core`, or `$KILN_FONT`), so the
//! report needs no fontconfig.
//!
//! [`data`] reads the store (through its API only), [`charts`] draws,
//! [`html`] writes the page; this module ties them together.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::atomic::Staging;
use crate::store::{layout::file_stem, manual_benchmark, Store};

mod charts;
mod data;
mod font;
mod html;

use charts::{Chart, ACCEPTANCE_WINDOW};
use data::ExperimentData;
pub use data::ObjectiveAxis;
use html::Figure;

/// An experiment's figures, each with its file stem and caption: only panels of something
/// the campaign measured.
fn figures(e: &ExperimentData) -> Vec<(String, String, Chart<'_>)> {
    let stem = file_stem(&e.name);
    let mut figures = vec![(
        format!("{stem}-objective"),
        html::objective_caption(e),
        Chart::Objective(e),
    )];
    // A search without a temperature (or a manual experiment) has no temperature panel,
    // steps without a wall time no run-time panels.
    let searched = manual_benchmark(&e.name).is_none();
    if searched && e.points().any(|p| p.temperature > 0.0) {
        figures.push((
            format!("{stem}-temperature"),
            "Temperature of each chain at each step, on a log scale.".to_string(),
            Chart::Temperature(e),
        ));
    }
    if searched {
        figures.push((
            format!("{stem}-acceptance"),
            format!(
                "Acceptance rate of proposals over the trailing {ACCEPTANCE_WINDOW} \
                 proposals of each chain (failed proposals count as rejected)."
            ),
            Chart::Acceptance(e),
        ));
    }
    if e.points().any(|p| !p.walls.is_empty()) {
        figures.push((
            format!("{stem}-runtimes"),
            html::runtimes_caption(e),
            Chart::Runtimes(e),
        ));
    }
    if e.points().any(|p| p.wall.is_some()) {
        figures.push((
            format!("{stem}-time-breakdown"),
            html::breakdown_caption(e),
            Chart::Breakdown(e),
        ));
    }
    figures
}

/// `kiln report`: writes every plot and `index.html` into `dir`, all put in
/// place once every one is drawn; returns the files written.
pub fn report(store: &Store, dir: &Path) -> Result<Vec<PathBuf>> {
    font::ensure_font()?;
    let (config, experiments) = data::load(store)?;
    if experiments.is_empty() {
        bail!(
            "store {} holds no experiments to report on",
            store.dir().display()
        );
    }

    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut staging = Staging::default();
    let mut written = Vec::new();
    let mut sections = String::new();
    for e in &experiments {
        let mut done = Vec::new();
        for (stem, caption, chart) in figures(e) {
            written.extend(charts::save(&mut staging, dir, &stem, &chart)?);
            done.push(Figure { stem, caption });
        }
        sections.push_str(&html::section(e, &done));
    }
    let workers = Figure {
        stem: "workers-throughput".into(),
        caption: "Steps finished by each worker over the campaign (reused measurements and \
                  manual steps left out): the slope is the worker's throughput, given in the \
                  legend from its first to its last result."
            .into(),
    };
    written.extend(charts::save(
        &mut staging,
        dir,
        &workers.stem,
        &Chart::Throughput(&experiments),
    )?);

    let campaign = config
        .as_ref()
        .map_or("(no campaign config)", |c| c.name.as_str());
    let page = html::index(
        campaign,
        &store.dir().display().to_string(),
        &sections,
        &workers,
    );
    let index = dir.join("index.html");
    staging.write(&index, page)?;
    staging.commit()?;
    written.push(index);
    Ok(written)
}
