//! `kiln workers`: every worker connected (and calibrated), as a table.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

use anyhow::Result;

use kiln_protocol::message::Capabilities;
use kiln_protocol::CampaignConfig;

use crate::cli::WorkersArgs;
use crate::dispatch::calibration::{cells, Calibrator};
use crate::dispatch::pool::{Pool, WorkerState, WorkerStatus};
use crate::dispatch::slurm::job_cell;
use crate::error::Outcome;
use crate::text::table;

pub(super) fn run(args: &WorkersArgs, out: &mut dyn Write) -> Result<Outcome> {
    let config = super::read_config(&args.config)?;
    let board = super::runtime()?.block_on(workers(&config))?;
    let all_ok = config.workers.iter().all(|spec| {
        let s = &board[spec.name()];
        s.state == WorkerState::Ok && s.calibration.iter().all(|c| !c.flagged)
    });
    if args.json {
        serde_json::to_writer_pretty(&mut *out, &workers_json(&config, &board))?;
        writeln!(out)?;
    } else {
        write!(out, "{}", workers_table(&config, &board))?;
    }
    Ok(if all_ok {
        Outcome::Success
    } else {
        Outcome::Failure
    })
}

/// `kiln workers`: connects to every worker (and calibrates every slot when the config asks
/// for calibration); every worker's status once settled.
async fn workers(config: &CampaignConfig) -> Result<BTreeMap<String, WorkerStatus>> {
    let calibrator = Calibrator::from_config(config)?;
    let calibrating = calibrator.is_some();
    let (_scratch, settings) = super::scratch_pool(config, calibrator, config.limits_in_use())?;
    let pool: Pool<()> = Pool::start(&config.workers, settings);
    Ok(settled_board(&pool, config, calibrating).await)
}

/// The pool's board once every worker has connected (and calibrated) or failed to, or at the
/// deadline: connecting, plus running the calibration benchmark when there is one.
async fn settled_board(
    pool: &Pool<()>,
    config: &CampaignConfig,
    calibrating: bool,
) -> BTreeMap<String, WorkerStatus> {
    let mut limit = config.timeouts.connect_s + 5.0;
    if let Some(b) = config
        .calibration
        .as_ref()
        .and_then(|c| config.benchmark(&c.benchmark))
    {
        limit += b.build_timeout_s + b.timeout_s * f64::from(config.runs.warmup + config.runs.max);
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs_f64(limit);
    loop {
        let board = pool.board.lock().expect("not poisoned").clone();
        let settled = board.values().all(|s| match s.state {
            WorkerState::Connecting => false,
            WorkerState::Ok => !calibrating || s.calibration.iter().all(|c| c.count > 0),
            WorkerState::Unreachable(_) | WorkerState::Quarantined(_) | WorkerState::Unfit(_) => {
                true
            }
        });
        if settled || tokio::time::Instant::now() > deadline {
            return board;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What a worker's hello said: CPU, counters that open, GPUs (`-` before any hello).
fn capability_cells(c: Option<&Capabilities>) -> (String, String, String) {
    let Some(c) = c else {
        return ("-".into(), "-".into(), "-".into());
    };
    let on: Vec<_> = c
        .counters
        .iter()
        .filter(|(_, ok)| **ok)
        .map(|(m, _)| m.name())
        .collect();
    let gpus = if c.gpus.is_empty() {
        "none".to_string()
    } else {
        c.gpus
            .iter()
            .map(|g| g.name.clone())
            .collect::<Vec<_>>()
            .join(",")
    };
    (
        format!("{} ({} cores)", c.cpu_model, c.cores),
        on.join(","),
        gpus,
    )
}

/// The `kiln workers` table.
fn workers_table(config: &CampaignConfig, board: &BTreeMap<String, WorkerStatus>) -> String {
    let rows = config.workers.iter().map(|spec| {
        let s = &board[spec.name()];
        let (cpu, counters, gpus) = capability_cells(s.capabilities.as_ref());
        vec![
            spec.name().to_string(),
            s.address.clone(),
            spec.slots().to_string(),
            cpu,
            counters,
            gpus,
            cells(&s.calibration),
            job_cell(s.slurm.as_ref().map(|w| w.job()).as_ref()),
            s.state.to_string(),
        ]
    });
    table(
        &[
            "worker",
            "host",
            "slots",
            "cpu",
            "counters",
            "gpus",
            "calibration ms",
            "slurm job",
            "status",
        ],
        &[2],
        rows,
    )
}

/// The workers as JSON: what the table shows, with the whole hello.
fn workers_json(
    config: &CampaignConfig,
    board: &BTreeMap<String, WorkerStatus>,
) -> serde_json::Value {
    config
        .workers
        .iter()
        .map(|spec| {
            let s = &board[spec.name()];
            serde_json::json!({
                "name": spec.name(),
                "address": s.address,
                "slots": spec.slots(),
                "state": s.state.to_string(),
                "capabilities": s.capabilities,
                "calibration": s.calibration,
                "slurm_job": s.slurm.as_ref().map(|w| w.job()),
            })
        })
        .collect()
}
