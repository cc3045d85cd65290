//! The no-op campaign that the overhead, scale and slurm sections run: its
//! config, one accounted `kiln run` of it, and the metrics recorded from it.

use std::fs;
use std::path::Path;

use anyhow::{Context, Result};

use super::{Suite, Version};
use crate::procs::{self, Account};
use crate::report;

/// What one `kiln run` of the no-op campaign gave.
pub(super) struct CampaignRun {
    table: StepsRead,
    account: Account,
    /// CPU of the SSH daemons' trees (sshd, kiln-worker, the benchmark), seconds.
    remote_cpu_s: f64,
    /// Busy and total CPU seconds of the machine during the run.
    machine_busy_s: f64,
    machine_total_s: f64,
}

/// The noop benchmark's knobs: 12 knobs of 20 values, so a random walk's
/// proposals rarely repeat (a repeat reuses an earlier measurement).
fn knobs() -> String {
    (0..12)
        .map(|k| {
            let values: Vec<String> = (0..20).map(|v| v.to_string()).collect();
            format!("(k{k} {})", values.join(" "))
        })
        .collect::<Vec<_>>()
        .join("\n            ")
}

/// A campaign of `chains` random walks of `steps` steps over the no-op benchmark, `parallel`
/// in flight each, on `workers`.
pub(super) fn noop_config(steps: u32, chains: u32, parallel: u32, workers: &str) -> String {
    format!(
        r#"(campaign
  (name noop)
  (store "store")
  (objective (metric wall-time) (statistic median))
  (runs (warmup 0) (min 1) (max 1))
  (experiments
    ((benchmark noop) (search (random-walk (steps {steps}))) (chains {chains}) (seed 1) (parallel {parallel})))
  (benchmarks
    ((name noop) (kind knobs)
     (knobs {knobs})
     (sources "noop") (build ()) (run ("true")) (check-output none) (timeout-s 10)))
  (workers
    {workers}))
"#,
        knobs = knobs()
    )
}

/// What a campaign's exported steps table says of it.
struct StepsRead {
    ok: usize,
    cached: usize,
    /// The median run, seconds.
    run_s: f64,
    spans: Spans,
}

/// When a campaign's steps ran.
struct Spans {
    steps: usize,
    /// First dispatch to last decision, seconds.
    span_s: f64,
    /// Workers that ran at least one step.
    workers: usize,
    /// First dispatch to the first step of the last worker to take one, seconds: how long
    /// connecting every worker took while the others ran steps.
    all_running_s: f64,
    /// Steps decided once every worker had taken one, and the seconds from then to the last
    /// decision: the rate a campaign keeps once all its workers are connected.
    sustained: (usize, f64),
}

/// One step's row: its worker, when it was dispatched and decided (ms).
struct StepTimes {
    worker: String,
    dispatched_ms: u64,
    decided_ms: u64,
}

/// Reads a campaign's exported steps table.
fn parse_steps_csv(path: &Path) -> Result<StepsRead> {
    let mut r = csv::Reader::from_path(path)?;
    let head = r.headers()?.clone();
    let col = |name: &str| {
        head.iter()
            .position(|h| h == name)
            .with_context(|| format!("{} has no column {name}", path.display()))
    };
    let (c_disp, c_dec, c_wall, c_out, c_cached, c_worker) = (
        col("dispatched_ms")?,
        col("decided_ms")?,
        col("wall-time.median")?,
        col("outcome")?,
        col("cached_from")?,
        col("worker")?,
    );
    let (mut ok, mut cached) = (0, 0);
    let mut walls = Vec::new();
    let mut times = Vec::new();
    for rec in r.records() {
        let rec = rec?;
        ok += usize::from(&rec[c_out] == "ok");
        cached += usize::from(!rec[c_cached].is_empty());
        if let Ok(w) = rec[c_wall].parse::<f64>() {
            walls.push(w * 1e-9);
        }
        times.push(StepTimes {
            worker: rec[c_worker].to_string(),
            dispatched_ms: rec[c_disp].parse().unwrap_or(u64::MAX),
            decided_ms: rec[c_dec].parse().unwrap_or(0),
        });
    }
    Ok(StepsRead {
        ok,
        cached,
        run_s: report::median(&walls),
        spans: Spans::of(&times),
    })
}

impl Spans {
    fn of(times: &[StepTimes]) -> Spans {
        let first = times.iter().map(|t| t.dispatched_ms).min().unwrap_or(0);
        let last = times.iter().map(|t| t.decided_ms).max().unwrap_or(0);
        let mut first_of = std::collections::HashMap::new();
        for t in times {
            let at = first_of.entry(t.worker.as_str()).or_insert(u64::MAX);
            *at = (*at).min(t.dispatched_ms);
        }
        let all_running = first_of.values().copied().max().unwrap_or(first);
        let seconds = |from: u64, to: u64| to.saturating_sub(from) as f64 / 1e3;
        Spans {
            steps: times.len(),
            span_s: seconds(first, last),
            workers: first_of.len(),
            all_running_s: seconds(first, all_running),
            sustained: (
                times.iter().filter(|t| t.decided_ms > all_running).count(),
                seconds(all_running, last),
            ),
        }
    }
}

impl Suite {
    /// Runs the no-op campaign `config` with version `v` in a fresh folder.
    pub(super) fn campaign(
        &self,
        v: &Version,
        name: &str,
        config: &str,
        daemons: &[i32],
    ) -> Result<CampaignRun> {
        let dir = self.fresh_run_dir(v, name)?;
        fs::write(
            dir.join("noop/README"),
            "a benchmark that does nothing: `true`\n",
        )?;
        fs::write(dir.join("campaign.sexp"), config)?;
        let remote0: f64 = daemons
            .iter()
            .map(|p| procs::cpu_with_reaped_children(*p))
            .sum();
        let (b0, t0) = procs::machine_jiffies();
        let cmd = vec![
            v.kiln().display().to_string(),
            "run".into(),
            "campaign.sexp".into(),
        ];
        let account = self.accounted(&cmd, &dir, &[("KILN_WORKER", &v.worker())], 600.0)?;
        procs::wait_childless(daemons, std::time::Duration::from_secs(5));
        let remote1: f64 = daemons
            .iter()
            .map(|p| procs::cpu_with_reaped_children(*p))
            .sum();
        let (b1, t1) = procs::machine_jiffies();
        let read = parse_steps_csv(&dir.join("store/steps.csv"))?;
        fs::remove_dir_all(&dir)?;
        Ok(CampaignRun {
            table: read,
            account,
            remote_cpu_s: remote1 - remote0,
            machine_busy_s: procs::jiffies_s(b1 - b0),
            machine_total_s: procs::jiffies_s(t1 - t0),
        })
    }

    /// Records a campaign run's metrics under (section, config, tool, rep).
    pub(super) fn record_campaign(
        &mut self,
        section: &str,
        config: &str,
        tool: &str,
        rep: usize,
        r: &CampaignRun,
    ) {
        let n = r.table.spans.steps as f64;
        let a = &r.account;
        let all = a.tree_cpu_s + r.remote_cpu_s;
        for (metric, value) in [
            ("steps", n),
            ("failed_steps", (r.table.spans.steps - r.table.ok) as f64),
            ("cached_steps", r.table.cached as f64),
            ("workers_used", r.table.spans.workers as f64),
            ("wall_s", a.wall_s),
            ("span_s", r.table.spans.span_s),
            ("steps_per_s", n / r.table.spans.span_s),
            ("all_running_s", r.table.spans.all_running_s),
            (
                "steps_per_s_sustained",
                r.table.spans.sustained.0 as f64 / r.table.spans.sustained.1,
            ),
            ("sustained_s", r.table.spans.sustained.1),
            ("steps_per_s_end_to_end", n / a.wall_s),
            ("step_ms", 1e3 * r.table.spans.span_s / n),
            ("run_ms", 1e3 * r.table.run_s),
            (
                "overhead_ms",
                1e3 * (r.table.spans.span_s / n - r.table.run_s),
            ),
            ("ctl_cpu_ms_per_step", 1e3 * a.self_cpu_s() / n),
            ("ctl_user_ms_per_step", 1e3 * a.self_user_s / n),
            ("ctl_sys_ms_per_step", 1e3 * a.self_sys_s / n),
            (
                "children_cpu_ms_per_step",
                1e3 * (a.tree_cpu_s - a.self_cpu_s()) / n,
            ),
            ("remote_cpu_ms_per_step", 1e3 * r.remote_cpu_s / n),
            ("ctl_cores", a.self_cpu_s() / a.wall_s),
            ("ctl_share_of_cpu", a.self_cpu_s() / all),
            ("tree_cores", all / a.wall_s),
            (
                "machine_busy",
                r.machine_busy_s / r.machine_total_s.max(1e-9),
            ),
            ("ctl_max_rss_mib", a.max_rss_kib as f64 / 1024.0),
            ("ctl_fds", a.peaks.fds as f64),
            ("ctl_threads", a.peaks.threads as f64),
            ("helpers", a.peaks.helpers as f64),
            ("helpers_pss_mib", a.peaks.helpers_pss_kib as f64 / 1024.0),
        ] {
            self.results.add(section, config, tool, rep, metric, value);
        }
        eprintln!(
            "  {config:<10} {tool:<10} rep {rep}: {:>5} steps, {:>7.1} steps/s ({:.1} end to end), step {:.3} ms, run {:.3} ms, controller CPU {:.3} ms/step{}",
            r.table.spans.steps,
            n / r.table.spans.span_s,
            n / a.wall_s,
            1e3 * r.table.spans.span_s / n,
            1e3 * r.table.run_s,
            1e3 * a.self_cpu_s() / n,
            if r.table.spans.steps != r.table.ok { format!(", {} FAILED", r.table.spans.steps - r.table.ok) } else { String::new() }
        );
    }
}
