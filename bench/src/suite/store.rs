//! §3, the store: persisting one step through the Store API, and exporting
//! synthetic stores of 100 k and 1 M steps (rows/s, peak RSS), each version on
//! a store it reads.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Result};
use kiln_controller::store::layout;

use super::writeup::{Page, Target};
use super::{Suite, Version};
use crate::report::{self, fmt, Table};
use crate::synth;

impl Suite {
    pub(super) fn store(&mut self) -> Result<()> {
        for name in &self.opts.views {
            if !View::ALL.iter().any(|v| v.name() == name) {
                bail!("--views: no view is called {name}");
            }
        }
        self.persist_latency()?;
        // Exports of big stores, built once and kept in the scratch folder.
        for &n in &self.sizes.stores.clone() {
            self.exports(n)?;
        }
        Ok(())
    }

    /// Latency of persisting one step, as the campaign loop does.
    fn persist_latency(&mut self) -> Result<()> {
        let dir = self.work.join("store-latency");
        if dir.exists() {
            fs::remove_dir_all(&dir)?;
        }
        for rep in 0..self.sizes.reps {
            let dir = dir.join(rep.to_string());
            let l = synth::latency(&dir, self.sizes.latency_steps)?;
            let both: Vec<f64> = l
                .put_result
                .iter()
                .zip(&l.decide)
                .map(|(a, b)| a + b)
                .collect();
            for (metric, v) in [
                ("put_result", &l.put_result),
                ("decide", &l.decide),
                ("put_result_and_decide", &both),
            ] {
                for p in [50.0, 99.0] {
                    self.results.add(
                        "store",
                        "persist-step",
                        "store-api",
                        rep,
                        &format!("{metric}_p{p}_ms"),
                        1e3 * report::percentile(v, p),
                    );
                }
            }
            eprintln!(
                "  persist rep {rep}: put_result p50 {:.3} ms p99 {:.3} ms; decide p50 {:.3} ms p99 {:.3} ms",
                1e3 * report::percentile(&l.put_result, 50.0),
                1e3 * report::percentile(&l.put_result, 99.0),
                1e3 * report::percentile(&l.decide, 50.0),
                1e3 * report::percentile(&l.decide, 99.0)
            );
        }
        fs::remove_dir_all(&dir)?;
        Ok(())
    }

    /// The `n`-step store, built once, exported by every version (a kiln that refuses its
    /// layout exports a copy in layout 1), and that copy by the version under test.
    fn exports(&mut self, n: u64) -> Result<()> {
        let sdir = self.work.join(format!("store-{n}"));
        // v3: layout 2, an export row beside every step; v4: chain states keep their course;
        // v5: layout 3, compressed, steps against their start; v9: a campaign that resumes,
        // built by a kiln without the measured-set index; v10: pages at zstd level 3, the
        // status report sealed as a controller that ends seals it; v12: layout 5, steps, rows
        // and chains' sets 16 to a key; v13: layout 6 (a resumed layout-5 store is migrated).
        let want = format!("v13 {n}");
        let marker = self.work.join(format!("store-{n}.built"));
        once(&sdir, &marker, &want, || self.build_store(n, &sdir))?;
        // Kilns older than the store's layout (the baseline) refuse it:
        // they export a copy as they wrote stores, made once.
        let layout1 = self.work.join(format!("store-{n}-layout1"));
        let layout1_marker = self.work.join(format!("store-{n}-layout1.built"));
        let mut reads_current = BTreeMap::new();
        for v in &self.versions {
            reads_current.insert(v.label.clone(), reads_store(v, &sdir)?);
        }
        let want_layout1 = reads_current.values().any(|r| !r);
        if want_layout1 {
            once(&layout1, &layout1_marker, &want, || {
                eprintln!("  copying the store of {n} steps in layout 1, for older kilns");
                synth::copy_as_layout_1(&sdir, &layout1).map(drop)
            })?;
        }
        let size = kiln_controller::store::bytes_under(&sdir);
        // Warm the page cache: the exports measure kiln, not the disk.
        let t = Instant::now();
        read_all(&sdir)?;
        if want_layout1 {
            read_all(&layout1)?;
        }
        let warm_s = t.elapsed().as_secs_f64();
        let mib = size as f64 / 1048576.0;
        let config = format!("export-{n}");
        let res = &mut self.results;
        res.add(
            "store",
            &config,
            "store",
            0,
            "warm_read_mib_per_s",
            mib / warm_s,
        );
        res.add("store", &config, "store", 0, "db_mib", mib);
        res.add(
            "store",
            &config,
            "store",
            0,
            "db_bytes_per_step",
            size as f64 / n as f64,
        );
        let reps = if n >= 1_000_000 {
            self.sizes.reps.min(2)
        } else {
            self.sizes.reps
        };
        // Every version on the store it reads; once more (first repetition),
        // the working tree on the layout-1 copy: how stores written before
        // export rows export now.
        let mut runs = Vec::new();
        for rep in 0..reps {
            for v in self.order(rep) {
                // The baseline's 1 M export takes a minute: once.
                if n >= 1_000_000 && rep > 0 && v.label != self.versions[0].label {
                    continue;
                }
                let store = if reads_current[&v.label] {
                    &sdir
                } else {
                    &layout1
                };
                runs.push((rep, v, store, format!("export-{n}")));
            }
            if rep == 0 && want_layout1 {
                let v = self.versions[0].clone();
                runs.push((rep, v, &layout1, format!("export-{n}-layout1")));
            }
        }
        for (rep, v, store, config) in runs {
            self.export(n, rep, &v, store, &config)?;
        }
        for v in self.versions.clone() {
            let store = if reads_current[&v.label] {
                &sdir
            } else {
                &layout1
            };
            self.views(n, &v, store, store == &sdir)?;
        }
        Ok(())
    }

    /// Every look at the `n`-step store by `v`: a resume only where `v` is of its layout.
    fn views(&mut self, n: u64, v: &Version, store: &Path, of_its_layout: bool) -> Result<()> {
        for view in View::ALL {
            // `kiln rewards` reads every step's JSON three times: past a million steps, an
            // hour (the report says so).
            let left_out = view == View::Resume && !of_its_layout
                || view == View::Rewards && n > REWARDS_MAX
                || !self.opts.views.is_empty() && !self.opts.views.iter().any(|w| w == view.name());
            if !left_out {
                self.view(n, v, store, view)?;
            }
        }
        Ok(())
    }

    /// One look at the `n`-step store by `v`: seconds and peak RSS, recorded as `view-NAME-n`.
    fn view(&mut self, n: u64, v: &Version, store: &Path, view: View) -> Result<()> {
        let run = self.work.join("runs").join(format!("view-{}", v.label));
        fs::create_dir_all(&run)?;
        // A resume writes steps: into a copy of the store, which it ends.
        let copy = self.work.join("resume-copy");
        if view == View::Resume {
            copy_dir(store, &copy)?;
        }
        // As after a controller that crashed: no sealed report (kept aside in `run`).
        let (sealed, hidden) = (layout::sealed_status(store), run.join("status-sealed.json"));
        if view == View::StatusUnsealed && sealed.exists() {
            fs::rename(&sealed, &hidden)?;
        }
        let mut cmd = vec![v.kiln().display().to_string()];
        cmd.extend(view.args(store, n, &run, &copy)?);
        let started_ms = epoch_ms();
        let a = self.accounted(&cmd, &run, &[], 1800.0)?;
        // What a person resuming waits for: the first new step on its way.
        let first_dispatch_s = match view == View::Resume && a.exit == 0 {
            true => first_dispatched_ms(&copy.join("steps.csv"), started_ms)?
                .map(|ms| (ms - started_ms) as f64 / 1e3),
            false => None,
        };
        if hidden.exists() {
            fs::rename(&hidden, &sealed)?;
        }
        if copy.exists() {
            fs::remove_dir_all(&copy)?;
        }
        if a.exit != 0 {
            let said = fs::read_to_string(run.join("stderr.txt")).unwrap_or_default();
            bail!("{} failed on the {n}-step store: {said}", view.label());
        }
        let config = format!("view-{}-{n}", view.name());
        let figures = [
            ("wall_s", Some(a.wall_s)),
            ("max_rss_mib", Some(a.max_rss_kib as f64 / 1024.0)),
            ("first_dispatch_s", first_dispatch_s),
        ];
        for (metric, value) in figures {
            if let Some(value) = value {
                self.results
                    .add("store", &config, &v.label, 0, metric, value);
            }
        }
        eprintln!(
            "  {config:<22} {:<10}: {:.2} s, peak RSS {:.0} MiB",
            v.label,
            a.wall_s,
            a.max_rss_kib as f64 / 1024.0
        );
        fs::remove_dir_all(&run)?;
        Ok(())
    }

    /// Builds the `n`-step store in `dir` through the Store API and records how fast.
    fn build_store(&mut self, n: u64, dir: &Path) -> Result<()> {
        eprintln!("  building a store of {n} steps");
        let b = synth::build(dir, n, 4)?;
        let config = format!("build-{n}");
        let res = &mut self.results;
        for (metric, value) in [
            ("steps_per_s", b.steps as f64 / b.seconds),
            ("record_bytes", b.record_bytes as f64),
            ("row_bytes", b.row_bytes as f64),
        ] {
            res.add("store", &config, "store-api", 0, metric, value);
        }
        eprintln!(
            "  built in {:.1} s ({:.0} steps/s, {} bytes per record, {} per export row)",
            b.seconds,
            b.steps as f64 / b.seconds,
            b.record_bytes,
            b.row_bytes
        );
        Ok(())
    }

    /// `kiln export STORE --table steps` of the `n`-step store by `v`, recorded under `config`.
    fn export(
        &mut self,
        n: u64,
        rep: usize,
        v: &Version,
        store: &Path,
        config: &str,
    ) -> Result<()> {
        let run = self.work.join("runs").join(format!("export-{}", v.label));
        fs::create_dir_all(&run)?;
        let csv = run.join("steps.csv");
        let cmd = vec![
            v.kiln().display().to_string(),
            "export".into(),
            store.display().to_string(),
            "--table".into(),
            "steps".into(),
            "-o".into(),
            csv.display().to_string(),
        ];
        let a = self.accounted(&cmd, &run, &[], 900.0)?;
        let said = fs::read_to_string(run.join("stderr.txt")).unwrap_or_default();
        let rows: f64 = said
            .split_whitespace()
            .nth(1)
            .and_then(|r| r.parse().ok())
            .unwrap_or(f64::NAN);
        if rows as u64 != n {
            bail!("export wrote {rows} rows of {n}: {said}");
        }
        for (metric, value) in [
            ("rows_per_s", rows / a.wall_s),
            ("wall_s", a.wall_s),
            ("cpu_s", a.self_cpu_s()),
            ("max_rss_mib", a.max_rss_kib as f64 / 1024.0),
        ] {
            self.results
                .add("store", config, &v.label, rep, metric, value);
        }
        eprintln!(
            "  {config:<22} {:<10} rep {rep}: {:.1} s, {:.0} rows/s, peak RSS {:.0} MiB",
            v.label,
            a.wall_s,
            rows / a.wall_s,
            a.max_rss_kib as f64 / 1024.0
        );
        fs::remove_dir_all(&run)?;
        Ok(())
    }

    /// §3 of the report: persisting a step, exports, and their targets.
    pub(super) fn write_store(&self, p: &Page<'_>, o: &mut Vec<u8>) -> Result<Vec<Target>> {
        self.write_store_intro(o)?;
        write_persist_table(p, o)?;
        let mut targets = self.write_export_table(p, o)?;
        self.write_layout1_exports(p, o)?;
        targets.extend(self.write_view_table(p, o)?);
        self.write_builds(p, o)?;
        Ok(targets)
    }

    /// The section's opening paragraph: what is persisted, what is exported, and how.
    fn write_store_intro(&self, o: &mut Vec<u8>) -> Result<()> {
        writeln!(
            o,
            "Persisting one step through the Store API into a fresh store, {} steps one at a time: \
             `put_result` (the measured step, inserted and flushed) and `decide` (decided step + chain \
             state in one atomic batch, flushed). The campaign used to do both for every step; it now \
             writes only `decide` for a step decided on arrival, and group-commits (one flush for every \
             result that arrived together). Stores for export: {} chains of random-walk steps like the \
             no-op campaign's (one run, every timed metric, hardware counters unsupported; about 2.8 KB \
             of JSON each, and beside each its export row, about 270 bytes, which the steps table reads \
             instead of the JSON; store layout 5 keeps them 16 steps to a key, each block compressed \
             (zstd), each step's decisions as they differ from its experiment's start), written through the Store API (`Store::import_steps`, atomic batches \
             of 1000, each chain's state once). A kiln that predates the store's layout \
             refuses such a store: it exports a copy in layout 1, as it wrote stores (the same keys, no \
             rows). Export: `kiln export STORE --table steps -o FILE` on a warm page cache (the store \
             is read once before); peak RSS is the larger of wait4's ru_maxrss (what `/usr/bin/time -v` \
             reports) and the sampled VmHWM. The baseline's 1 M export runs once.\n",
            self.sizes.latency_steps, 4
        )?;
        Ok(())
    }

    /// The export table, one row per store exported by the version under test, and the
    /// size, rate and memory targets of each.
    fn write_export_table(&self, p: &Page<'_>, o: &mut Vec<u8>) -> Result<Vec<Target>> {
        let r = p.r;
        let mut t = Table::new(&[
            "store",
            "db MiB",
            "db bytes a step",
            &p.both("export rows/s"),
            &p.both("export s"),
            &p.both("peak RSS MiB"),
        ]);
        let mut targets = Vec::new();
        for n in &self.sizes.stores {
            let c = format!("export-{n}");
            if r.median(ST, &c, p.after, "rows_per_s").is_none() {
                continue;
            }
            t.row(vec![
                format!("{n} steps"),
                fmt(r.median(ST, &c, "store", "db_mib")),
                fmt(r.median(ST, &c, "store", "db_bytes_per_step")),
                p.pair(ST, &c, "rows_per_s"),
                p.pair(ST, &c, "wall_s"),
                p.pair(ST, &c, "max_rss_mib"),
            ]);
            targets.extend(export_targets(p, *n));
        }
        t.write(o)?;
        Ok(targets)
    }

    /// A paragraph per store whose layout-1 copy the version under test exported.
    fn write_layout1_exports(&self, p: &Page<'_>, o: &mut Vec<u8>) -> Result<()> {
        let (r, after) = (p.r, p.after);
        for n in &self.sizes.stores {
            let c = format!("export-{n}-layout1");
            if let Some(rate) = r.median(ST, &c, after, "rows_per_s") {
                writeln!(
                    o,
                    "The layout-1 copy of the {n}-step store (a store written before export rows, \
                     read through its steps' JSON until a step is next written into it) exports at \
                     {} rows/s ({after}; peak RSS {} MiB).\n",
                    fmt(Some(rate)),
                    fmt(r.median(ST, &c, after, "max_rss_mib"))
                )?;
            }
        }
        Ok(())
    }

    /// The paragraph and table of the commands that look at a store, and their targets.
    fn write_view_table(&self, p: &Page<'_>, o: &mut Vec<u8>) -> Result<Vec<Target>> {
        let mut t = Table::new(&[
            "look at a store",
            "steps",
            &p.both("s"),
            &p.both("peak RSS MiB"),
        ]);
        let mut targets = Vec::new();
        for &n in &self.sizes.stores {
            for view in View::ALL {
                let c = format!("view-{}-{n}", view.name());
                if p.r.median(ST, &c, p.after, "wall_s").is_none() {
                    continue;
                }
                t.row(vec![
                    view.label().into(),
                    n.to_string(),
                    p.pair(ST, &c, "wall_s"),
                    p.pair(ST, &c, "max_rss_mib"),
                ]);
                if p.r.median(ST, &c, p.after, "first_dispatch_s").is_some() {
                    t.row(vec![
                        "… until its first new step is dispatched".into(),
                        n.to_string(),
                        p.pair(ST, &c, "first_dispatch_s"),
                        "".into(),
                    ]);
                }
            }
            targets.extend(view_targets(p, n));
        }
        writeln!(
            o,
            "Looking at the same stores (each command once per version, warm page cache): \
             `kiln status` and its `--json` (which the live page serves when no controller runs) \
             read the report the store's last writer sealed as it ended, and without it (as after a \
             crash) the database; `kiln report` (every plot) and `kiln store verify` (every step's \
             checksum and row). `kiln rewards` reads every step's JSON three times and is timed on \
             stores of at most {REWARDS_MAX} steps.\n"
        )?;
        t.write(o)?;
        Ok(targets)
    }

    /// A paragraph per store built: how fast, and how big a record and its row.
    fn write_builds(&self, p: &Page<'_>, o: &mut Vec<u8>) -> Result<()> {
        let r = p.r;
        for n in &self.sizes.stores {
            let c = format!("build-{n}");
            if let Some(rate) = r.median(ST, &c, "store-api", "steps_per_s") {
                writeln!(
                    o,
                    "Building the {n}-step store ran at {} steps/s (one record: {} bytes of JSON, its \
                     export row {} bytes).\n",
                    fmt(Some(rate)),
                    fmt(r.median(ST, &c, "store-api", "record_bytes")),
                    fmt(r.median(ST, &c, "store-api", "row_bytes"))
                )?;
            }
        }
        Ok(())
    }
}

/// The results' section of this file's measurements.
const ST: &str = "store";

/// The persist-one-step table: p50 and p99 of each write through the Store API.
fn write_persist_table(p: &Page<'_>, o: &mut Vec<u8>) -> Result<()> {
    let mut t = Table::new(&["persist one step", "p50 ms", "p99 ms"]);
    for m in ["put_result", "decide", "put_result_and_decide"] {
        let ms = |q: &str| {
            fmt(p
                .r
                .median(ST, "persist-step", "store-api", &format!("{m}_{q}_ms")))
        };
        t.row(vec![m.replace('_', " "), ms("p50"), ms("p99")]);
    }
    t.write(o)?;
    Ok(())
}

/// The targets of the `n`-step store's export: bytes a step, rows/s, peak RSS.
fn export_targets(p: &Page<'_>, n: u64) -> [Target; 3] {
    let (r, c) = (p.r, format!("export-{n}"));
    let per_step = r.median(ST, &c, "store", "db_bytes_per_step");
    let rate = r.median(ST, &c, p.after, "rows_per_s");
    let rss = r.median(ST, &c, p.after, "max_rss_mib");
    [
        (
            format!("≤ 1 KB a stored step ({n} steps)"),
            format!("{} bytes", fmt(per_step)),
            "the database's files over its steps".into(),
            per_step.map(|b| b <= 1024.0),
        ),
        (
            format!("export ≥ 200 k rows/s ({n} steps)"),
            fmt(rate),
            p.pair(ST, &c, "rows_per_s"),
            rate.map(|v| v >= 200_000.0),
        ),
        (
            format!("peak RSS < 200 MB exporting {n} steps"),
            format!("{} MiB", fmt(rss)),
            p.pair(ST, &c, "max_rss_mib"),
            rss.map(|v| v * 1.048576 < 200.0),
        ),
    ]
}

/// The targets of the views on the `n`-step store that must not grow with it: status and its
/// JSON under 1 s and 200 MB, the report under 10 s.
fn view_targets(p: &Page<'_>, n: u64) -> Vec<Target> {
    let mut targets = Vec::new();
    for (view, limit_s, what) in [
        (View::Status, 1.0, "under 1 s and 200 MB"),
        (View::StatusJson, 1.0, "under 1 s and 200 MB"),
        (View::Report, 10.0, "under 10 s"),
    ] {
        let c = format!("view-{}-{n}", view.name());
        let (wall, rss) = (
            p.r.median(ST, &c, p.after, "wall_s"),
            p.r.median(ST, &c, p.after, "max_rss_mib"),
        );
        let met = match view {
            View::Report => wall.map(|w| w < limit_s),
            _ => wall
                .zip(rss)
                .map(|(w, m)| w < limit_s && m * 1.048576 < 200.0),
        };
        targets.push((
            format!("{} {what} ({n} steps)", view.label()),
            format!("{} s, {} MiB", fmt(wall), fmt(rss)),
            p.pair(ST, &c, "wall_s"),
            met,
        ));
    }
    targets
}

/// Now, in Unix milliseconds (as the steps table's `dispatched_ms`).
fn epoch_ms() -> u64 {
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    now.map_or(0, |d| d.as_millis() as u64)
}

/// The earliest `dispatched_ms` at or after `since` in a steps table.
fn first_dispatched_ms(csv_path: &Path, since: u64) -> Result<Option<u64>> {
    let mut r = csv::Reader::from_path(csv_path)?;
    let at = r.headers()?.iter().position(|h| h == "dispatched_ms");
    let Some(at) = at else {
        bail!("{} has no column dispatched_ms", csv_path.display());
    };
    let mut first = None;
    for rec in r.records() {
        let dispatched = rec?[at].parse::<u64>().ok().filter(|ms| *ms >= since);
        if let Some(ms) = dispatched {
            first = Some(first.map_or(ms, |f: u64| f.min(ms)));
        }
    }
    Ok(first)
}

/// The largest store `kiln rewards` is timed on.
const REWARDS_MAX: u64 = 1_000_000;

/// The commands that look at a store, timed on the big stores (issue 35: views
/// that do not grow with the store).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum View {
    Status,
    StatusJson,
    StatusUnsealed,
    Report,
    Verify,
    Show,
    Rewards,
    Resume,
}

impl View {
    const ALL: [View; 8] = [
        View::Status,
        View::StatusJson,
        View::StatusUnsealed,
        View::Report,
        View::Verify,
        View::Show,
        View::Rewards,
        View::Resume,
    ];

    fn name(self) -> &'static str {
        match self {
            View::Status => "status",
            View::StatusJson => "status-json",
            View::StatusUnsealed => "status-unsealed",
            View::Report => "report",
            View::Verify => "verify",
            View::Show => "show",
            View::Rewards => "rewards",
            View::Resume => "resume",
        }
    }

    /// The command's arguments on the `n`-step store in `built`, its outputs in `run`,
    /// a resume's copy of the store in `copy`.
    fn args(self, built: &Path, n: u64, run: &Path, copy: &Path) -> Result<Vec<String>> {
        let store = built.display().to_string();
        let out = |name: &str| run.join(name).display().to_string();
        let args: Vec<String> = match self {
            View::Status | View::StatusUnsealed => vec!["status".into(), store],
            View::StatusJson => vec!["status".into(), store, "--json".into()],
            View::Report => vec!["report".into(), store, "-o".into(), out("report")],
            View::Verify => vec!["store".into(), "verify".into(), store],
            // A step in the middle of a chain.
            View::Show => vec!["show".into(), store, format!("noop/1/{}", n / 8)],
            View::Rewards => vec![
                "rewards".into(),
                store,
                "--experiment".into(),
                "noop".into(),
                "--no-verify".into(),
                "-o".into(),
                out("rewards"),
            ],
            View::Resume => {
                let config = synth::resume_config(n, built, copy, run)?;
                vec!["run".into(), config.display().to_string()]
            }
        };
        Ok(args)
    }

    /// What the report's table calls it.
    fn label(self) -> &'static str {
        match self {
            View::Status => "`kiln status`",
            View::StatusJson => "`kiln status --json`",
            View::StatusUnsealed => "`kiln status` without the sealed report (after a crash)",
            View::Report => "`kiln report`",
            View::Verify => "`kiln store verify`",
            View::Show => "`kiln show` of one step",
            View::Rewards => "`kiln rewards` of the experiment (no verification)",
            View::Resume => "`kiln run` resumed: one more step a chain",
        }
    }
}

/// Makes `dir` with `make` unless its `marker` says `want` (what is made once and kept in the
/// scratch folder), first clearing what a make of another kind left there.
fn once(dir: &Path, marker: &Path, want: &str, make: impl FnOnce() -> Result<()>) -> Result<()> {
    if fs::read_to_string(marker).ok().as_deref() == Some(want) {
        return Ok(());
    }
    if dir.exists() {
        fs::remove_dir_all(dir)?;
    }
    make()?;
    fs::write(marker, want)?;
    Ok(())
}

/// Whether kiln `v` reads the store in `dir`: false if it refuses the
/// store's layout as newer than its own.
fn reads_store(v: &Version, dir: &Path) -> Result<bool> {
    let out = Command::new(v.kiln())
        .arg("export")
        .arg(dir)
        .args(["--table", "sites", "-o", "/dev/null"])
        .stdin(Stdio::null())
        .output()?;
    let said = String::from_utf8_lossy(&out.stderr);
    match out.status.success() {
        true => Ok(true),
        false if said.contains("schema version") => Ok(false),
        false => bail!(
            "{} cannot read {}: {said}",
            v.kiln().display(),
            dir.display()
        ),
    }
}

/// Reads every file under `dir` (into the page cache).
fn read_all(dir: &Path) -> Result<()> {
    let mut buf = vec![0u8; 1 << 20];
    for e in fs::read_dir(dir)?.flatten() {
        let path = e.path();
        if e.file_type()?.is_dir() {
            read_all(&path)?;
        } else {
            let mut f = fs::File::open(&path)?;
            while std::io::Read::read(&mut f, &mut buf)? > 0 {}
        }
    }
    Ok(())
}

/// Copies the folder `from` to `to` (which must not exist), as it is.
fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    if to.exists() {
        fs::remove_dir_all(to)?;
    }
    let status = Command::new("cp").arg("-a").arg(from).arg(to).status()?;
    if !status.success() {
        bail!("cp -a {} {} failed", from.display(), to.display());
    }
    Ok(())
}
