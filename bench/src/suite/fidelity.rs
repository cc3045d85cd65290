//! §2, measurement fidelity: `kiln-worker measure` against hyperfine on the
//! same commands (sleep 50 ms, a 100 ms CPU loop, `true`), interleaved in
//! rounds; medians, per-run overhead by each tool's clock and by the kernel's.

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};

use super::writeup::{Page, Target};
use super::{Suite, Version};
use crate::kspans;
use crate::report::{self, fmt, Results, Table};

/// Start-up measurements per tool (a lone run of `true`), for their median.
const STARTUP_SAMPLES: usize = 7;

/// One run of a measuring tool (hyperfine or `kiln-worker measure`) on a command.
struct ToolRun {
    /// "hyperfine", or the kiln version's label.
    label: String,
    /// The tool's process id (its runs are its children).
    pid: u32,
    /// Median and mean of the measured runs as the tool timed them, s.
    median: f64,
    mean: f64,
    /// Wall time of the whole tool run, s.
    wall: f64,
    /// Sum of every run's time, warm-ups included, s.
    sum_all: f64,
    /// The measured (not warm-up) runs' times, s.
    times: Vec<f64>,
}

/// A tool run of the fidelity rounds, to find its runs in the kernel's record.
struct Invocation {
    case: &'static str,
    label: String,
    rep: usize,
    pid: u32,
    /// The file name of the program its runs exec.
    program: String,
    /// Runs it made, warm-ups included.
    runs: u32,
}

/// A command both tools measure: its name, its argv, and the runs and warm-ups of a repetition.
type Case = (&'static str, Vec<String>, u32, u32);

/// Runs a measuring tool, its output captured: its pid, its output, and the wall time of the
/// whole tool run, s; `what` names it should it fail.
fn timed(mut cmd: Command, what: &str) -> Result<(u32, Output, f64)> {
    let t = Instant::now();
    let child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    let pid = child.id();
    let out = child.wait_with_output()?;
    let wall = t.elapsed().as_secs_f64();
    if !out.status.success() {
        bail!("{what} failed: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok((pid, out, wall))
}

/// The file name a command's runs exec (`argv[0]`'s last component).
fn program_name(argv: &[String]) -> String {
    Path::new(&argv[0])
        .file_name()
        .map_or_else(|| argv[0].clone(), |n| n.to_string_lossy().into_owned())
}

impl Suite {
    pub(super) fn fidelity(&mut self) -> Result<()> {
        let dir = self.work.join("fidelity");
        fs::create_dir_all(&dir)?;
        let cpu = self.cpu_loop(&dir)?;
        let cases: Vec<Case> = vec![
            (
                "sleep-50ms",
                vec!["sleep".into(), "0.05".into()],
                self.sizes.fidelity_runs,
                self.sizes.fidelity_warmup,
            ),
            (
                "cpu-100ms",
                vec![cpu, self.cpu_iterations.to_string()],
                self.sizes.fidelity_runs,
                self.sizes.fidelity_warmup,
            ),
            ("true", vec!["true".into()], self.sizes.true_runs, 0),
        ];
        let startup = self.startups(&dir)?;
        self.rounds(&dir, &cases, &startup)
    }

    /// Compiles the CPU-bound program, a C loop, and calibrates it to about 100 ms
    /// (`cpu_iterations`); its path.
    fn cpu_loop(&mut self, dir: &Path) -> Result<String> {
        let src = dir.join("cpuloop.c");
        fs::write(
            &src,
            "#include <stdlib.h>\n\
             int main(int argc, char **argv) {\n\
             \x20   unsigned long n = argc > 1 ? strtoul(argv[1], 0, 10) : 1000000;\n\
             \x20   volatile unsigned long x = 0;\n\
             \x20   for (unsigned long i = 0; i < n; i++) x += i * i;\n\
             \x20   return (int)(x & 0);\n\
             }\n",
        )?;
        let bin = dir.join("cpuloop");
        let st = Command::new("cc")
            .args(["-O2", "-o"])
            .arg(&bin)
            .arg(&src)
            .status()?;
        if !st.success() {
            bail!("cannot compile {}", src.display());
        }
        let probe = 50_000_000u64;
        let mut best = f64::MAX;
        for _ in 0..3 {
            let t = Instant::now();
            Command::new(&bin).arg(probe.to_string()).status()?;
            best = best.min(t.elapsed().as_secs_f64());
        }
        self.cpu_iterations = (probe as f64 * 0.1 / best) as u64;
        Ok(bin.display().to_string())
    }

    /// The measuring tools: hyperfine (`None`), then every kiln version.
    fn tools(&self) -> Vec<Option<Version>> {
        let mut tools: Vec<Option<Version>> = vec![None];
        tools.extend(self.versions.iter().cloned().map(Some));
        tools
    }

    /// `tool` (hyperfine where `None`) on `argv`.
    fn measure_with(
        &self,
        tool: &Option<Version>,
        dir: &Path,
        argv: &[String],
        runs: u32,
        warmup: u32,
    ) -> Result<ToolRun> {
        match tool {
            None => self.hyperfine(dir, argv, runs, warmup),
            Some(v) => self.kiln_measure(dir, v, argv, runs, warmup),
        }
    }

    /// Each tool's one-time start-up (process start, and for kiln the first perf counter,
    /// which makes the kernel patch its text): a run of `true` alone, less that run; seconds
    /// by tool label, the median of `STARTUP_SAMPLES`. Per-run overhead is then also given
    /// without it, as a per-run figure should be.
    fn startups(&mut self, dir: &Path) -> Result<BTreeMap<String, f64>> {
        let argv_true = ["true".to_string()];
        for rep in 0..STARTUP_SAMPLES {
            for tool in self.tools() {
                let run = self.measure_with(&tool, dir, &argv_true, 1, 0)?;
                let ms = 1e3 * (run.wall - run.sum_all);
                self.results
                    .add("fidelity", "startup", &run.label, rep, "startup_ms", ms);
            }
        }
        let mut startup = BTreeMap::new();
        for label in std::iter::once("hyperfine".to_string())
            .chain(self.versions.iter().map(|v| v.label.clone()))
        {
            let ms = self
                .results
                .median("fidelity", "startup", &label, "startup_ms");
            startup.insert(label, ms.unwrap_or(0.0) * 1e-3);
        }
        Ok(startup)
    }

    /// Every case by every tool, interleaved finely against the machine's other load: each
    /// repetition is three rounds of a third of the runs per tool, the tools' order rotating;
    /// medians are over every run a tool measured, and the kernel's record of the runs, where
    /// it can be taken, gives their exit → exec gaps.
    fn rounds(
        &mut self,
        dir: &Path,
        cases: &[Case],
        startup: &BTreeMap<String, f64>,
    ) -> Result<()> {
        let mut pooled: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
        let rounds = 3 * self.sizes.reps;
        let mut invocations = Vec::new();
        let recorder = kspans::Recorder::start()
            .map_err(|e| eprintln!("  no kernel view of the runs (sched trace events): {e:#}"))
            .ok();
        for rep in 0..rounds {
            for (name, argv, runs, warmup) in cases {
                let runs = runs.div_ceil(3).max(3);
                let mut tools = self.tools();
                let n = tools.len();
                tools.rotate_left(rep % n);
                for tool in tools {
                    let run = self.measure_with(&tool, dir, argv, runs, *warmup)?;
                    let startup = startup[&run.label];
                    self.record_tool_run(name, rep, &run, runs + warmup, startup);
                    invocations.push(Invocation {
                        case: name,
                        label: run.label.clone(),
                        rep,
                        pid: run.pid,
                        program: program_name(argv),
                        runs: runs + warmup,
                    });
                    pooled
                        .entry((name.to_string(), run.label))
                        .or_default()
                        .extend(run.times);
                }
            }
        }
        match recorder.map(kspans::Recorder::finish) {
            Some(Ok(events)) => self.record_kernel_gaps(&events, &invocations),
            Some(Err(e)) => eprintln!("  no kernel view of the runs: {e:#}"),
            None => {}
        }
        for ((name, label), times) in pooled {
            let median = report::median(&times);
            let res = &mut self.results;
            res.add(
                "fidelity",
                &name,
                &label,
                0,
                "pooled_median_ms",
                1e3 * median,
            );
            res.add(
                "fidelity",
                &name,
                &label,
                0,
                "pooled_runs",
                times.len() as f64,
            );
        }
        Ok(())
    }

    /// Records a tool run of case `name` in round `rep`, `runs` runs in all: its median and
    /// mean, and its wall time per run, less the time it measured as runs (overhead), and
    /// less its `startup` (s) too.
    fn record_tool_run(&mut self, name: &str, rep: usize, run: &ToolRun, runs: u32, startup: f64) {
        let (label, median, wall, sum_all) = (&run.label, run.median, run.wall, run.sum_all);
        let total = f64::from(runs);
        for (metric, value) in [
            ("median_ms", 1e3 * median),
            ("mean_ms", 1e3 * run.mean),
            ("tool_wall_s", wall),
            ("per_run_ms", 1e3 * wall / total),
            ("overhead_ms_per_run", 1e3 * (wall - sum_all) / total),
            (
                "overhead_ex_startup_ms_per_run",
                1e3 * (wall - sum_all - startup) / total,
            ),
        ] {
            self.results
                .add("fidelity", name, label, rep, metric, value);
        }
        eprintln!(
            "  {name:<10} {label:<10} rep {rep}: median {:.3} ms, tool {:.2} s, {:.3} ms per run, overhead {:.3} ms per run",
            1e3 * median,
            wall,
            1e3 * wall / total,
            1e3 * (wall - sum_all) / total
        );
    }

    /// Per-run overhead from the kernel's record: for each tool run, the
    /// median time from one run's exit to the next run's exec, and every
    /// such gap pooled per tool and command.
    fn record_kernel_gaps(&mut self, events: &[kspans::Event], invocations: &[Invocation]) {
        let mut pooled: BTreeMap<(&str, &str), Vec<f64>> = BTreeMap::new();
        for inv in invocations {
            let runs = kspans::runs_of(events, inv.pid, &inv.program);
            if runs.len() != inv.runs as usize {
                eprintln!(
                    "  kernel view: {} {} rep {} shows {} of its {} runs (perf dropped events?); left out",
                    inv.case,
                    inv.label,
                    inv.rep,
                    runs.len(),
                    inv.runs
                );
                continue;
            }
            let gaps = kspans::gaps(&runs);
            if gaps.is_empty() {
                continue;
            }
            let (case, label, rep) = (inv.case, inv.label.as_str(), inv.rep);
            let ms = 1e3 * report::median(&gaps);
            self.results
                .add("fidelity", case, label, rep, "kernel_gap_ms", ms);
            pooled.entry((case, label)).or_default().extend(gaps);
        }
        for ((case, label), gaps) in &pooled {
            let ms = 1e3 * report::median(gaps);
            self.results
                .add("fidelity", case, label, 0, "pooled_kernel_gap_ms", ms);
            self.results
                .add("fidelity", case, label, 0, "kernel_gaps", gaps.len() as f64);
            let Some(hyperfine) = pooled
                .get(&(case, "hyperfine"))
                .filter(|_| *label != "hyperfine")
            else {
                continue;
            };
            let (d, lo, hi) = report::median_difference(gaps, hyperfine);
            for (metric, v) in [
                ("kernel_gap_vs_hyperfine_ms", d),
                ("kernel_gap_vs_hyperfine_lo_ms", lo),
                ("kernel_gap_vs_hyperfine_hi_ms", hi),
            ] {
                self.results
                    .add("fidelity", case, label, 0, metric, 1e3 * v);
            }
        }
    }

    /// hyperfine on `argv`.
    fn hyperfine(&self, dir: &Path, argv: &[String], runs: u32, warmup: u32) -> Result<ToolRun> {
        let json = dir.join("hyperfine.json");
        let mut cmd = Command::new("hyperfine");
        cmd.args([
            "-N",
            "--style",
            "none",
            "--warmup",
            &warmup.to_string(),
            "--runs",
            &runs.to_string(),
            "--export-json",
        ])
        .arg(&json)
        .arg(argv.join(" "))
        .current_dir(dir);
        let (pid, _, wall) = timed(cmd, "hyperfine")?;
        let v: serde_json::Value = serde_json::from_slice(&fs::read(&json)?)?;
        let r = &v["results"][0];
        let times: Vec<f64> = r["times"]
            .as_array()
            .context("hyperfine times")?
            .iter()
            .filter_map(|t| t.as_f64())
            .collect();
        let median = r["median"].as_f64().context("hyperfine median")?;
        Ok(ToolRun {
            label: "hyperfine".into(),
            pid,
            median,
            mean: r["mean"].as_f64().context("hyperfine mean")?,
            wall,
            // Warm-up runs are not exported: count them at the median.
            sum_all: times.iter().sum::<f64>() + f64::from(warmup) * median,
            times,
        })
    }

    /// `kiln-worker measure` on `argv`, as `hyperfine`.
    fn kiln_measure(
        &self,
        dir: &Path,
        v: &Version,
        argv: &[String],
        runs: u32,
        warmup: u32,
    ) -> Result<ToolRun> {
        let mut cmd = Command::new(v.worker());
        cmd.args([
            "measure",
            "--json",
            "--warmup",
            &warmup.to_string(),
            "--runs",
            &runs.to_string(),
            "--",
        ])
        .args(argv)
        .current_dir(dir)
        .env("KILN_LOG", "warn");
        let (pid, out, wall) = timed(cmd, "kiln-worker measure")?;
        let m: serde_json::Value = serde_json::from_slice(&out.stdout)?;
        let s = &m["summary"]["wall-time"];
        let runs = m["runs"].as_array().context("kiln runs")?;
        let wall_of = |r: &serde_json::Value| r["metrics"]["wall-time"]["measured"].as_f64();
        Ok(ToolRun {
            label: v.label.clone(),
            pid,
            median: s["median"].as_f64().context("kiln median")? * 1e-9,
            mean: s["mean"].as_f64().context("kiln mean")? * 1e-9,
            wall,
            sum_all: runs.iter().filter_map(wall_of).sum::<f64>() * 1e-9,
            times: runs
                .iter()
                .filter(|r| r["warmup"] == false)
                .filter_map(wall_of)
                .map(|t| t * 1e-9)
                .collect(),
        })
    }

    /// §2 of the report: the medians and per-run overhead of each tool, and their targets.
    pub(super) fn write_fidelity(&self, p: &Page<'_>, o: &mut Vec<u8>) -> Result<Vec<Target>> {
        let kernel = p.r.rows.iter().any(|x| x.metric == "pooled_kernel_gap_ms");
        self.fidelity_intro(p.r, kernel, o)?;
        self.fidelity_table(p.r, kernel).write(o)?;
        Ok(fidelity_targets(p, kernel))
    }

    /// What §2 compares and how, with each tool's start-up, and the kernel's clock where
    /// its record of the runs was taken.
    fn fidelity_intro(&self, r: &Results, kernel: bool, o: &mut Vec<u8>) -> Result<()> {
        let fi = "fidelity";
        writeln!(
            o,
            "`kiln-worker measure --json --warmup W --runs R -- CMD` against `hyperfine -N --warmup W \
             --runs R --export-json` on the same command, interleaved in rounds (each tool a third \
             of the runs per round, {} warm-ups per round, the order rotating; medians over every run a \
             tool measured, {} runs in all per tool and command; `true`: {} runs). \
             The CPU-bound program is a C loop (`cc -O2`, {} iterations ≈ 100 ms). Per-run overhead = \
             (wall time of the whole tool run − sum of the run times it measured) / runs; per-run \
             cost = wall of the whole tool run / runs (with `true`, this is the tool's cost per run). \
             The two tools time different spans: kiln's clock starts when the child is about to exec (its clone, perf counters and reaping fall outside a run), hyperfine's before it spawns the child; so the first definition bills kiln's process handling to overhead and hyperfine's to its runs, and it includes each tool's one-time start-up spread over a round's runs (the 'w/o start-up' columns subtract it; see below). The cost with `true` compares the whole work per run. Both are sensitive to other load on the machine (see the load averages above): a delay outside kiln's span counts as its overhead, inside hyperfine's as run time.\n",
            self.sizes.fidelity_warmup,
            self.sizes.fidelity_runs.div_ceil(3).max(3) * 3 * self.sizes.reps as u32,
            self.sizes.true_runs.div_ceil(3).max(3) * 3 * self.sizes.reps as u32,
            self.cpu_iterations
        )?;
        let startups: Vec<String> = std::iter::once("hyperfine".to_string())
            .chain(self.versions.iter().map(|v| v.label.clone()))
            .map(|l| {
                let ms = r.median(fi, "startup", &l, "startup_ms");
                format!("{l} {} ms", fmt(ms))
            })
            .collect();
        writeln!(
            o,
            "Start-up: the wall time of a tool run that measures one run of `true`, less that \
             run (median of {STARTUP_SAMPLES} per tool): {}. kiln-worker's includes opening \
             its first perf counters, for which the kernel patches its text once per process.\n",
            startups.join(", ")
        )?;
        if kernel {
            writeln!(
                o,
                "exit→exec: per-run overhead on the kernel's clock, the same span for both tools:                      the median time from one run's exit (`sched_process_exit`) to the next run's exec                      (`sched_process_exec`), over every pair of consecutive runs, recorded in a tracefs                      instance of the bench's own (ftrace, so no perf events that would change how the                      kernel switches kiln's counted runs). It holds the end of the exit, waking the tool,                      reaping, reading counters, bookkeeping and the next spawn up to the exec; after a                      long run the tool's idle CPU wakes more slowly, for both tools alike. The targets                      use it.\n"
            )?;
        }
        Ok(())
    }

    /// One row per command: each tool's median (kiln's against hyperfine's), then per tool,
    /// hyperfine first, each kind of per-run overhead (exit → exec where the kernel's record
    /// was taken).
    fn fidelity_table(&self, r: &Results, kernel: bool) -> Table {
        let fi = "fidelity";
        // (heading after the tool's name, metric)
        let mut per_tool = vec![
            (" overhead ms/run", "overhead_ms_per_run"),
            (" overhead w/o start-up", "overhead_ex_startup_ms_per_run"),
            (" cost ms/run", "per_run_ms"),
        ];
        if kernel {
            per_tool.push((" exit→exec ms", "pooled_kernel_gap_ms"));
        }
        let mut head = vec!["command".to_string(), "hyperfine median ms".to_string()];
        for v in &self.versions {
            head.push(format!("kiln '{}' median ms", v.label));
            head.push(format!("'{}' vs hyperfine", v.label));
        }
        for (heading, _) in &per_tool {
            head.push(format!("hyperfine{heading}"));
            for v in &self.versions {
                head.push(format!("'{}'{heading}", v.label));
            }
        }
        let hr: Vec<&str> = head.iter().map(String::as_str).collect();
        let mut t = Table::new(&hr);
        for c in ["sleep-50ms", "cpu-100ms", "true"] {
            let h = r.median(fi, c, "hyperfine", "pooled_median_ms");
            if h.is_none() {
                continue;
            }
            let mut row = vec![c.to_string(), fmt(h)];
            for v in &self.versions {
                let k = r.median(fi, c, &v.label, "pooled_median_ms");
                row.push(fmt(k));
                row.push(k.zip(h).map_or("—".into(), |(k, h)| {
                    format!("{:+.2} %", 100.0 * (k / h - 1.0))
                }));
            }
            for (_, metric) in &per_tool {
                row.push(fmt(r.median(fi, c, "hyperfine", metric)));
                for v in &self.versions {
                    row.push(fmt(r.median(fi, c, &v.label, metric)));
                }
            }
            t.row(row);
        }
        t
    }
}

/// §2's targets: kiln's medians within 2 % of hyperfine's, its per-run cost and overhead no
/// more than hyperfine's.
fn fidelity_targets(p: &Page<'_>, kernel: bool) -> Vec<Target> {
    let (r, after) = (p.r, p.after);
    let fi = "fidelity";
    let mut targets = Vec::new();
    for c in ["sleep-50ms", "cpu-100ms"] {
        let h = r.median(fi, c, "hyperfine", "pooled_median_ms");
        let k = r.median(fi, c, after, "pooled_median_ms");
        let d = k.zip(h).map(|(k, h)| 100.0 * (k / h - 1.0));
        targets.push((
            format!("{c}: median within 2 % of hyperfine's"),
            d.map_or("—".into(), |d| format!("{d:+.2} %")),
            format!("kiln {} ms vs hyperfine {} ms", fmt(k), fmt(h)),
            d.map(|d| d.abs() <= 2.0),
        ));
    }
    let ho = r.median(fi, "true", "hyperfine", "per_run_ms");
    let ko = r.median(fi, "true", after, "per_run_ms");
    targets.push((
        "per-run cost with `true` ≤ hyperfine's".into(),
        format!("{} vs {} ms", fmt(ko), fmt(ho)),
        p.pair(fi, "true", "per_run_ms"),
        ko.zip(ho).map(|(k, h)| k <= h),
    ));
    // Per-run overhead by the kernel's clock where it was recorded,
    // else by each tool's own (which bills kiln for what hyperfine times as run).
    let (metric, what) = if kernel {
        (
            "pooled_kernel_gap_ms",
            "per-run overhead (exit → next exec, kernel clock)",
        )
    } else {
        (
            "overhead_ex_startup_ms_per_run",
            "per-run overhead (start-up excluded)",
        )
    };
    for c in ["sleep-50ms", "cpu-100ms", "true"] {
        let ho = r.median(fi, c, "hyperfine", metric);
        let ko = r.median(fi, c, after, metric);
        if !kernel && c == "true" {
            continue;
        }
        // How sure: kiln − hyperfine with its bootstrap interval.
        let diff = |m: &str| r.median(fi, c, after, m);
        let sure = match diff("kernel_gap_vs_hyperfine_ms") {
            Some(d) if kernel => format!(
                "; kiln − hyperfine {} ms (95 % CI {} … {})",
                fmt(Some(d)),
                fmt(diff("kernel_gap_vs_hyperfine_lo_ms")),
                fmt(diff("kernel_gap_vs_hyperfine_hi_ms"))
            ),
            _ => String::new(),
        };
        targets.push((
            format!("{c}: {what} ≤ hyperfine's"),
            format!("{} vs {} ms{sure}", fmt(ko), fmt(ho)),
            p.pair(fi, c, metric),
            ko.zip(ho).map(|(k, h)| k <= h),
        ));
    }
    targets
}
