//! Workers in Slurm allocations: `srun` asks for one node and starts `kiln-worker serve` there;
//! the protocol runs over srun's standard input and output (`--unbuffered`: frames are binary
//! and must not wait in srun's line buffers), as it does over ssh.
//!
//! - srun runs on the controller's machine, or on a login node over SSH (`via-ssh`, deployed
//!   and started by [`super::ssh`]). `kiln-worker` is deployed to `<rundir>/kiln-worker` by
//!   hash, as for SSH workers (locally: copied; `rundir` must be on a filesystem the compute
//!   nodes share), and each worker works in `<rundir>/<name>`.
//! - Every allocation is one worker. A job that ends, is preempted or cancelled ends srun, so
//!   the connection reads EOF and the worker is lost; the pool then asks for a new allocation.
//! - What srun says on its standard error is watched ([`JobWatch`]): the job id and whether it
//!   waits in the queue, and its error lines (a bad partition, a cancelled step), which become
//!   the reason a worker could not start or was lost. Every line also goes to the log.
//! - Hello has no time limit of its own: a job may wait in the queue for hours. srun ends when
//!   the allocation cannot be had, and that ends the wait.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, Result};
use kiln_protocol::config::SlurmWorker;
use kiln_protocol::gpu_trace::INJECTION_LIBRARY;
use serde::{Deserialize, Serialize};
use tokio::io::AsyncBufReadExt;
use tokio::sync::watch;

use super::ssh::{self, Launch, WORKER_FILE};
use super::transport::{Channel, ChannelGuard, ChannelReader};

/// How long a failed srun gets to finish saying why, once its output has ended.
const LAST_WORDS: Duration = Duration::from_secs(2);

/// How many of srun's error lines a reason quotes (the last ones).
const ERROR_LINES: usize = 3;

/// A Slurm worker's current job, as shown in `kiln workers`, `kiln status` and status.json.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlurmJob {
    /// The job id, once Slurm has given one.
    pub id: Option<u64>,
    /// Where the job is.
    pub state: JobState,
}

/// Where a Slurm worker's job is.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobState {
    /// srun has asked for an allocation.
    #[default]
    Requested,
    /// The job waits in the queue.
    Pending,
    /// The worker runs in it.
    Running,
    /// The job ended, was cancelled or never started.
    Ended,
}

impl std::fmt::Display for SlurmJob {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.id {
            Some(id) => write!(f, "{id} ")?,
            None => f.write_str("- ")?,
        }
        f.write_str(match self.state {
            JobState::Requested => "requested",
            JobState::Pending => "pending",
            JobState::Running => "running",
            JobState::Ended => "ended",
        })
    }
}

/// A table cell for a worker's Slurm job: `ID STATE`, or `-` for a worker of another kind.
pub fn job_cell(job: Option<&SlurmJob>) -> String {
    job.map_or_else(|| "-".into(), SlurmJob::to_string)
}

/// What srun has said about a worker's current allocation.
#[derive(Debug, Default)]
pub struct JobWatch {
    state: Mutex<Said>,
    /// The number of the srun whose standard error has ended (each srun has its own).
    ended: watch::Sender<u64>,
}

#[derive(Debug, Default)]
struct Said {
    /// Which srun this is about (one per allocation asked for).
    launch: u64,
    job: SlurmJob,
    errors: Vec<String>,
}

impl JobWatch {
    /// The job as it stands.
    pub fn job(&self) -> SlurmJob {
        self.state.lock().expect("not poisoned").job.clone()
    }

    /// A new allocation is asked for: forgets the last one; the new srun's number.
    fn launch(&self) -> u64 {
        let mut said = self.state.lock().expect("not poisoned");
        said.launch += 1;
        said.job = SlurmJob::default();
        said.errors.clear();
        said.launch
    }

    /// The worker said hello from inside job `id`.
    pub fn running(&self, id: Option<u64>) {
        let mut said = self.state.lock().expect("not poisoned");
        said.job.id = id.or(said.job.id);
        said.job.state = JobState::Running;
    }

    /// Takes in a line srun `launch` wrote to its standard error.
    fn heard(&self, launch: u64, line: &str) {
        let mut said = self.state.lock().expect("not poisoned");
        if said.launch != launch {
            return;
        }
        // srun says these only when the job is not allocated at once.
        let job_id = |rest: &str| rest.split_whitespace().next()?.parse::<u64>().ok();
        if let Some(rest) = line.strip_prefix("srun: job ") {
            if rest.contains("queued and waiting") {
                said.job.id = job_id(rest);
                said.job.state = JobState::Pending;
            } else if rest.contains("has been allocated") {
                said.job.id = job_id(rest);
            }
        }
        if line.starts_with("srun: error:") || line.contains("*** ") {
            said.errors.push(line.trim().to_string());
            let excess = said.errors.len().saturating_sub(ERROR_LINES);
            said.errors.drain(..excess);
        }
    }

    /// Reads srun `launch`'s standard error to its end: into the log and into this watch.
    fn read_stderr(self: Arc<Self>, worker: String, launch: u64, stderr: ChannelReader) {
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::info!(target: "kiln::worker", worker = %worker, "{line}");
                self.heard(launch, &line);
            }
            self.ended.send_replace(launch);
        });
    }

    /// Why the current allocation ended or never started: `what` happened on the connection,
    /// and srun's last error lines, once srun has said them (within [`LAST_WORDS`]). The job
    /// is marked ended.
    pub async fn why_ended(&self, what: &str) -> String {
        let launch = self.state.lock().expect("not poisoned").launch;
        let mut ended = self.ended.subscribe();
        let _ = tokio::time::timeout(LAST_WORDS, ended.wait_for(|n| *n >= launch)).await;
        let mut said = self.state.lock().expect("not poisoned");
        said.job.state = JobState::Ended;
        let job = match said.job.id {
            Some(id) => format!("Slurm job {id}"),
            None => "the Slurm allocation".into(),
        };
        if said.errors.is_empty() {
            format!("{job} ended: {what}")
        } else {
            format!("{job} ended: srun said: {}", said.errors.join(" / "))
        }
    }
}

/// The worker's address for messages: where srun runs and the partition.
pub fn address(spec: &SlurmWorker) -> String {
    let partition = spec.partition.as_deref().unwrap_or("default partition");
    match &spec.via_ssh {
        Some(login) => format!("slurm {partition} via {}", ssh::address(login)),
        None => format!("slurm {partition}"),
    }
}

/// srun's command line for a worker whose binary is `worker` and whose rundir is `rundir`.
fn srun_argv(spec: &SlurmWorker, worker: &str, rundir: &str) -> Vec<String> {
    let mut argv: Vec<String> = [
        "srun",
        "--unbuffered",
        "--nodes=1",
        "--ntasks=1",
        // Slurm's stdin goes to task 0 only, by default too: said here so it stays so.
        "--input=0",
    ]
    .map(str::to_string)
    .to_vec();
    argv.push(format!("--job-name=kiln-{}", spec.name));
    if let Some(p) = &spec.partition {
        argv.push(format!("--partition={p}"));
    }
    if let Some(c) = spec.cpus_per_task {
        argv.push(format!("--cpus-per-task={c}"));
    }
    if let Some(g) = spec.gpus_per_task {
        argv.push(format!("--gpus-per-task={g}"));
    }
    if let Some(t) = &spec.time {
        argv.push(format!("--time={t}"));
    }
    // Last, so that they can override ours.
    argv.extend(spec.srun_args.iter().cloned());
    argv.extend([worker, "serve", "--rundir", rundir].map(str::to_string));
    argv
}

/// Asks Slurm for an allocation and starts `kiln-worker serve` in it (deploying the binary
/// first); `watch` follows the job. Errors name the worker.
pub async fn open_slurm(
    spec: &SlurmWorker,
    connect_timeout: Duration,
    local_worker_binary: &Path,
    watch: &Arc<JobWatch>,
) -> Result<Channel> {
    let launch = watch.launch();
    let binary = spec.worker_binary.as_deref().unwrap_or(local_worker_binary);
    if let Some(login) = &spec.via_ssh {
        let rundir =
            ssh::remote_rundir(login).with_context(|| format!("slurm worker '{}'", spec.name))?;
        let serve_rundir = format!("{}/{}", rundir.trim_end_matches('/'), spec.name);
        let (argv_spec, watch, name) = (spec.clone(), watch.clone(), spec.name.clone());
        let launch = Launch {
            argv: Box::new(move |worker: &str| srun_argv(&argv_spec, worker, &serve_rundir)),
            stderr: Box::new(move |stderr| {
                watch.read_stderr(name, launch, stderr);
                None
            }),
        };
        let connect = ssh::open_ssh_launching(login, connect_timeout, binary, launch).await?;
        return Ok(connect.channel);
    }
    let who = || format!("slurm worker '{}'", spec.name);
    let rundir = PathBuf::from(&spec.rundir);
    let worker = deploy_local(binary, &rundir, &spec.name)
        .await
        .with_context(who)?;
    let serve_rundir = rundir.join(&spec.name);
    let argv = srun_argv(
        spec,
        &worker.display().to_string(),
        &serve_rundir.display().to_string(),
    );
    let mut child = tokio::process::Command::new(&argv[0])
        .args(&argv[1..])
        // Run inside an allocation, srun would start a step of it rather than ask for one.
        .env_remove("SLURM_JOB_ID")
        .env_remove("SLURM_JOBID")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("{}: cannot start srun (is Slurm installed?)", who()))?;
    watch.clone().read_stderr(
        spec.name.clone(),
        launch,
        Box::new(child.stderr.take().expect("stderr is piped")),
    );
    tracing::info!(worker = %spec.name, "started `{}`", argv.join(" "));
    Ok(Channel {
        reader: Box::new(child.stdout.take().expect("stdout is piped")),
        writer: Box::new(child.stdin.take().expect("stdin is piped")),
        guard: ChannelGuard::Other(Box::new(Srun(child))),
        address: address(spec),
    })
}

/// A local srun. Dropped while it runs, it gets SIGTERM, which it passes on to the worker
/// (which cancels its steps and exits) before it gives the allocation back; a pending srun
/// withdraws its job.
struct Srun(tokio::process::Child);

impl Drop for Srun {
    fn drop(&mut self) {
        if let (Some(pid), Ok(None)) = (self.0.id(), self.0.try_wait()) {
            // SAFETY: signals our own child, which is not reaped yet (try_wait said so).
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGTERM);
            }
        }
    }
}

/// Makes `<rundir>/kiln-worker` (and the CUPTI library, when one lies beside `binary`) copies
/// of the local files for worker `worker`, copying only what differs; the binary's path.
async fn deploy_local(binary: &Path, rundir: &Path, worker: &str) -> Result<PathBuf> {
    tokio::fs::create_dir_all(rundir)
        .await
        .with_context(|| format!("cannot create {}", rundir.display()))?;
    let library = binary.with_file_name(INJECTION_LIBRARY);
    let mut files = vec![(binary.to_path_buf(), WORKER_FILE)];
    if library.is_file() {
        files.push((library, INJECTION_LIBRARY));
    }
    for (file, name) in files {
        let target = rundir.join(name);
        let (_, want) = ssh::local_binary(&file, false)
            .await
            .with_context(|| format!("cannot read {} to deploy", file.display()))?;
        if target.is_file()
            && ssh::local_binary(&target, false).await.ok().map(|h| h.1) == Some(want.clone())
        {
            continue;
        }
        // Copied under a name of its own, then renamed: a worker starting meanwhile sees the
        // old file or the new one, never half of one.
        // Named after the worker too: the workers of one controller deploy at once.
        let tmp = rundir.join(format!(".{name}.deploy-{}-{worker}", std::process::id()));
        tokio::fs::copy(&file, &tmp)
            .await
            .and(tokio::fs::rename(&tmp, &target).await)
            .with_context(|| format!("cannot deploy {} to {}", file.display(), target.display()))?;
        tracing::info!("deployed {} to {}", file.display(), target.display());
    }
    Ok(rundir.join(WORKER_FILE))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> SlurmWorker {
        SlurmWorker {
            name: "s-2".into(),
            partition: Some("gpu".into()),
            slots: 1,
            cpus_per_task: Some(4),
            gpus_per_task: None,
            time: Some("1:00:00".into()),
            srun_args: vec!["--exclusive".into()],
            rundir: "/shared/kiln".into(),
            worker_binary: None,
            retries: 3,
            via_ssh: None,
        }
    }

    #[test]
    fn srun_asks_for_one_unbuffered_task_and_lets_srun_args_override() {
        assert_eq!(
            srun_argv(&spec(), "/shared/kiln/kiln-worker", "/shared/kiln/s-2").join(" "),
            "srun --unbuffered --nodes=1 --ntasks=1 --input=0 --job-name=kiln-s-2 \
             --partition=gpu --cpus-per-task=4 --time=1:00:00 --exclusive \
             /shared/kiln/kiln-worker serve --rundir /shared/kiln/s-2"
        );
    }

    #[test]
    fn the_watch_takes_job_ids_and_errors_from_srun_and_ignores_an_old_srun() {
        let watch = JobWatch::default();
        let first = watch.launch();
        watch.heard(first, "srun: job 41 queued and waiting for resources");
        assert_eq!(watch.job().to_string(), "41 pending");
        let second = watch.launch();
        assert_eq!(watch.job().to_string(), "- requested");
        watch.heard(first, "srun: error: from the srun before");
        watch.heard(second, "srun: job 42 has been allocated resources");
        watch.heard(second, "2024-01-01 INFO a worker's own log line");
        watch.heard(
            second,
            "slurmstepd-vm: error: *** STEP 42.0 ON vm CANCELLED AT 2026-11-25T14:55:41 ***",
        );
        watch.running(None);
        assert_eq!(watch.job().to_string(), "42 running");
        watch.ended.send_replace(second);
        let why = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap()
            .block_on(watch.why_ended("connection closed"));
        assert_eq!(
            why,
            "Slurm job 42 ended: srun said: slurmstepd-vm: error: *** STEP 42.0 ON vm CANCELLED \
             AT 2026-11-25T14:55:41 ***"
        );
        assert_eq!(watch.job().state, JobState::Ended);
    }
}
