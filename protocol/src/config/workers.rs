//! The workers part: local, SSH and Slurm workers, their logins and slots.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::{field_record, int, path_sexp, strings};
use crate::decision::name_sexp;
use crate::decode::{self, Record, Src};
use crate::sexp::{Sexp, SexpError};

/// The words of this part of the config language that decoding, the lists of
/// allowed fields and printing share: each spelled once, here.
mod word {
    pub const ACCEPT_NEW: &str = "accept-new";
    pub const CPUS: &str = "cpus";
    pub const CPUS_PER_TASK: &str = "cpus-per-task";
    pub const GPUS: &str = "gpus";
    pub const GPUS_PER_TASK: &str = "gpus-per-task";
    pub const HOST: &str = "host";
    pub const HOST_KEY_CHECK: &str = "host-key-check";
    pub const IDENTITY: &str = "identity";
    pub const KNOWN_HOSTS: &str = "known-hosts";
    pub const LOCAL: &str = "local";
    pub const NAME: &str = "name";
    pub const NODES: &str = "nodes";
    pub const OFF: &str = "off";
    pub const PARTITION: &str = "partition";
    pub const PORT: &str = "port";
    pub const RETRIES: &str = "retries";
    pub const RUNDIR: &str = "rundir";
    pub const SLOTS: &str = "slots";
    pub const SLURM: &str = "slurm";
    pub const SRUN_ARGS: &str = "srun-args";
    pub const SSH: &str = "ssh";
    pub const STRICT: &str = "strict";
    pub const TIME: &str = "time";
    pub const USER: &str = "user";
    pub const VIA_SSH: &str = "via-ssh";
    pub const WORKER_BINARY: &str = "worker-binary";
}

/// A machine that runs steps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum WorkerSpec {
    /// `kiln-worker serve` as a child process of the controller.
    Local {
        /// The worker's name.
        name: String,
        /// Steps run at once.
        slots: u32,
        /// CPUs the slots are pinned to (one or more per slot, split evenly).
        cpus: Vec<u32>,
        /// GPUs the slots run on (split evenly as CPUs are); empty: every GPU.
        gpus: Vec<u32>,
    },
    /// A worker reached over SSH.
    Ssh(SshWorker),
    /// A worker in a Slurm allocation of its own, started by `srun`.
    Slurm(SlurmWorker),
}

/// A worker in a Slurm allocation of its own: `srun` (on the controller's machine or on a
/// login node over SSH) asks for one node and starts `kiln-worker serve` there, speaking the
/// protocol over srun's standard input and output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SlurmWorker {
    /// The worker's name (`NAME-1`..`NAME-N` for an entry of `(nodes N)`).
    pub name: String,
    /// The partition (`srun --partition`); `None`: the cluster's default.
    pub partition: Option<String>,
    /// Steps run at once.
    pub slots: u32,
    /// CPUs Slurm allocates (`srun --cpus-per-task`); `None`: Slurm's default.
    pub cpus_per_task: Option<u32>,
    /// GPUs Slurm allocates (`srun --gpus-per-task`); `None`: none asked for.
    pub gpus_per_task: Option<u32>,
    /// The allocation's time limit in Slurm's format (`srun --time`, e.g. `7-00:00:00`).
    pub time: Option<String>,
    /// More arguments for srun, put before the worker's command.
    pub srun_args: Vec<String>,
    /// Folder for kiln's files, on a filesystem the compute nodes share with the machine
    /// that runs srun: `kiln-worker` is deployed there, and each worker works in
    /// `<rundir>/<name>`.
    pub rundir: String,
    /// A kiln-worker binary built for the nodes' platform, deployed instead of ours.
    pub worker_binary: Option<PathBuf>,
    /// New allocations asked for in a row after one ends or never starts, before the
    /// worker is given up.
    pub retries: u32,
    /// The login node to run srun on (its `rundir`, `slots`, CPUs and GPUs are unused);
    /// `None`: srun runs on the controller's machine.
    pub via_ssh: Option<SshWorker>,
}

impl SlurmWorker {
    /// Default `(retries N)`.
    pub const DEFAULT_RETRIES: u32 = 3;
}

/// A worker reached over SSH.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SshWorker {
    /// The worker's name.
    pub name: String,
    /// Host name or address.
    pub host: String,
    /// Login user.
    pub user: Option<String>,
    /// SSH port.
    pub port: u16,
    /// Private key file.
    pub identity: Option<PathBuf>,
    /// known_hosts file to check host keys against (default: ssh's own).
    pub known_hosts: Option<PathBuf>,
    /// Host key policy.
    pub host_key_check: HostKeyCheck,
    /// Folder on the worker that holds kiln's files.
    pub rundir: String,
    /// Steps run at once.
    pub slots: u32,
    /// CPUs the slots are pinned to.
    pub cpus: Vec<u32>,
    /// GPUs the slots run on; empty: every GPU.
    pub gpus: Vec<u32>,
    /// A kiln-worker binary built for the worker's platform, uploaded instead of ours.
    pub worker_binary: Option<PathBuf>,
}

/// How strictly host keys are checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum HostKeyCheck {
    /// Only hosts already in known_hosts with the same key.
    Strict,
    /// Unknown hosts are added; changed keys are refused.
    AcceptNew,
    /// No check (test rigs only).
    Off,
}

impl WorkerSpec {
    /// The worker's name.
    pub fn name(&self) -> &str {
        match self {
            WorkerSpec::Local { name, .. } => name,
            WorkerSpec::Ssh(s) => &s.name,
            WorkerSpec::Slurm(s) => &s.name,
        }
    }

    /// Steps the worker runs at once.
    pub fn slots(&self) -> u32 {
        match self {
            WorkerSpec::Local { slots, .. } => *slots,
            WorkerSpec::Ssh(s) => s.slots,
            WorkerSpec::Slurm(s) => s.slots,
        }
    }

    /// CPUs the slots are pinned to.
    pub fn cpus(&self) -> &[u32] {
        match self {
            WorkerSpec::Local { cpus, .. } => cpus,
            WorkerSpec::Ssh(s) => &s.cpus,
            // Slurm picks the CPUs and GPUs of an allocation; its tasks see only those.
            WorkerSpec::Slurm(_) => &[],
        }
    }

    /// GPUs the slots run on (their `CUDA_VISIBLE_DEVICES`); empty: every GPU.
    pub fn gpus(&self) -> &[u32] {
        match self {
            WorkerSpec::Local { gpus, .. } => gpus,
            WorkerSpec::Ssh(s) => &s.gpus,
            WorkerSpec::Slurm(_) => &[],
        }
    }
}

const LOCAL_FIELDS: &[&str] = &[word::NAME, word::SLOTS, word::CPUS, word::GPUS];

const SSH_FIELDS: &[&str] = &[
    word::NAME,
    word::HOST,
    word::USER,
    word::PORT,
    word::IDENTITY,
    word::KNOWN_HOSTS,
    word::HOST_KEY_CHECK,
    word::RUNDIR,
    word::SLOTS,
    word::CPUS,
    word::GPUS,
    word::WORKER_BINARY,
];

/// The workers of one entry: one, or `N` for a `(slurm (nodes N) ...)`.
pub(super) fn decode_worker(
    src: Src<'_>,
    node: &Sexp,
    index: usize,
) -> Result<Vec<WorkerSpec>, SexpError> {
    // Accept both `(local ...)` and the wrapped `((local ...))`.
    let node = match node.as_list() {
        Some([inner]) if inner.as_list().is_some() => inner,
        _ => node,
    };
    let head = node
        .as_list()
        .and_then(|l| l.first())
        .and_then(Sexp::as_symbol);
    match head {
        Some(word::LOCAL) => {
            let rec = Record::open(src, node, "local worker", Some(word::LOCAL), LOCAL_FIELDS)?;
            let slots = rec.opt_value(word::SLOTS, decode::positive32)?.unwrap_or(1);
            let (cpus, gpus) = slot_devices(src, &rec, slots)?;
            Ok(vec![WorkerSpec::Local {
                name: rec.opt_value(word::NAME, decode::name)?.unwrap_or_else(|| {
                    if index == 0 {
                        word::LOCAL.into()
                    } else {
                        format!("local-{index}")
                    }
                }),
                slots,
                cpus,
                gpus,
            }])
        }
        Some(word::SSH) => {
            let rec = Record::open(src, node, "ssh worker", Some(word::SSH), SSH_FIELDS)?;
            let login = ssh_login(src, &rec)?;
            let slots = rec.opt_value(word::SLOTS, decode::positive32)?.unwrap_or(1);
            let (cpus, gpus) = slot_devices(src, &rec, slots)?;
            let name = match rec.opt_value(word::NAME, decode::name)? {
                Some(name) => name,
                // The host names the worker only where it can name a folder.
                None => match decode::unsafe_name(&login.host) {
                    Some(why) => {
                        return Err(src.error(
                            rec.req(word::HOST)?.pos,
                            format!(
                                "host '{}' cannot be the worker's name ({why}); give the worker \
                                 a (name ...)",
                                login.host
                            ),
                        ))
                    }
                    None => login.host.clone(),
                },
            };
            Ok(vec![WorkerSpec::Ssh(SshWorker {
                name,
                rundir: rec.req_value(word::RUNDIR, decode::string)?,
                slots,
                cpus,
                gpus,
                worker_binary: rec
                    .opt_value(word::WORKER_BINARY, decode::string)?
                    .map(PathBuf::from),
                ..login
            })])
        }
        Some(word::SLURM) => slurm_workers(src, node, index),
        _ => Err(src.error(
            node.pos,
            format!(
                "expected a worker: (local ...), (ssh ...) or (slurm ...), found `{}`",
                decode::short(node)
            ),
        )),
    }
}

const SLURM_FIELDS: &[&str] = &[
    word::NAME,
    word::PARTITION,
    word::NODES,
    word::SLOTS,
    word::CPUS_PER_TASK,
    word::GPUS_PER_TASK,
    word::TIME,
    word::SRUN_ARGS,
    word::RUNDIR,
    word::WORKER_BINARY,
    word::RETRIES,
    word::VIA_SSH,
];

const VIA_SSH_FIELDS: &[&str] = &[
    word::HOST,
    word::USER,
    word::PORT,
    word::IDENTITY,
    word::KNOWN_HOSTS,
    word::HOST_KEY_CHECK,
];

/// The login fields of an `(ssh ...)` or `(via-ssh ...)` record; the rest as for a worker
/// named after the host, of one slot, with no rundir.
fn ssh_login(src: Src<'_>, rec: &Record<'_>) -> Result<SshWorker, SexpError> {
    let host = rec.req_value(word::HOST, decode::string)?;
    let port = match rec.opt(word::PORT) {
        Some(f) => {
            let node = f.one()?;
            let v = decode::uint(src, node, word::PORT)?;
            u16::try_from(v)
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| src.error(node.pos, format!("port {v} is outside 1..65535")))?
        }
        None => 22,
    };
    let host_key_check = match rec.opt(word::HOST_KEY_CHECK) {
        Some(f) => match decode::choice(
            src,
            f.one()?,
            word::HOST_KEY_CHECK,
            &[word::STRICT, word::ACCEPT_NEW, word::OFF],
        )? {
            word::ACCEPT_NEW => HostKeyCheck::AcceptNew,
            word::OFF => HostKeyCheck::Off,
            _ => HostKeyCheck::Strict,
        },
        None => HostKeyCheck::Strict,
    };
    Ok(SshWorker {
        name: host.clone(),
        user: rec.opt_value(word::USER, decode::text)?,
        port,
        identity: rec
            .opt_value(word::IDENTITY, decode::string)?
            .map(PathBuf::from),
        known_hosts: rec
            .opt_value(word::KNOWN_HOSTS, decode::string)?
            .map(PathBuf::from),
        host_key_check,
        rundir: String::new(),
        slots: 1,
        cpus: Vec::new(),
        gpus: Vec::new(),
        worker_binary: None,
        host,
    })
}

/// A value srun takes as one option argument: non-empty, no whitespace or control characters.
fn srun_value(src: Src<'_>, node: &Sexp, field: &str) -> Result<String, SexpError> {
    let v = decode::text(src, node, field)?;
    if v.is_empty() || v.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(src.error(
            node.pos,
            format!("{field} {v:?} must be a non-empty word without spaces"),
        ));
    }
    Ok(v)
}

/// The most workers one `(slurm (nodes N) ...)` entry expands into.
pub const MAX_SLURM_NODES: u32 = 1024;

/// The workers of a `(slurm ...)` entry: one per node, named `NAME-1`..`NAME-N` when
/// `(nodes N)` is more than 1.
fn slurm_workers(src: Src<'_>, node: &Sexp, index: usize) -> Result<Vec<WorkerSpec>, SexpError> {
    let rec = Record::open(src, node, "slurm worker", Some(word::SLURM), SLURM_FIELDS)?;
    let name = rec
        .opt_value(word::NAME, decode::name)?
        .unwrap_or_else(|| format!("slurm-{index}"));
    let nodes = rec.opt_value(word::NODES, decode::positive32)?.unwrap_or(1);
    if nodes > 1 {
        let pos = rec.opt(word::NODES).map_or(rec.pos(), |f| f.pos);
        if nodes > MAX_SLURM_NODES {
            return Err(src.error(
                pos,
                format!(
                    "(nodes {nodes}) is more than {MAX_SLURM_NODES} workers: each is an srun and an \
                     allocation of its own"
                ),
            ));
        }
        // The last node's name is the longest.
        let last = format!("{name}-{nodes}");
        if let Some(why) = decode::unsafe_name(&last) {
            return Err(src.error(pos, format!("'{last}' cannot be a worker name: {why}")));
        }
    }
    let rundir = rec.req_value(word::RUNDIR, decode::string)?;
    let worker_binary = rec
        .opt_value(word::WORKER_BINARY, decode::string)?
        .map(PathBuf::from);
    let via_ssh = match rec.opt(word::VIA_SSH) {
        Some(f) => Some(SshWorker {
            name: name.clone(),
            rundir: rundir.clone(),
            worker_binary: worker_binary.clone(),
            ..ssh_login(src, &field_record(src, &f, VIA_SSH_FIELDS)?)?
        }),
        None => None,
    };
    let worker = SlurmWorker {
        name: name.clone(),
        partition: rec.opt_value(word::PARTITION, srun_value)?,
        slots: rec.opt_value(word::SLOTS, decode::positive32)?.unwrap_or(1),
        cpus_per_task: rec.opt_value(word::CPUS_PER_TASK, decode::positive32)?,
        gpus_per_task: rec.opt_value(word::GPUS_PER_TASK, decode::positive32)?,
        time: rec.opt_value(word::TIME, srun_value)?,
        srun_args: rec
            .opt_value(word::SRUN_ARGS, decode::string_list)?
            .unwrap_or_default(),
        rundir,
        worker_binary,
        retries: rec
            .opt_value(word::RETRIES, decode::uint32)?
            .unwrap_or(SlurmWorker::DEFAULT_RETRIES),
        via_ssh,
    };
    if nodes == 1 {
        return Ok(vec![WorkerSpec::Slurm(worker)]);
    }
    Ok((1..=nodes)
        .map(|k| {
            let mut w = worker.clone();
            w.name = format!("{name}-{k}");
            if let Some(login) = &mut w.via_ssh {
                login.name.clone_from(&w.name);
            }
            WorkerSpec::Slurm(w)
        })
        .collect())
}

/// A worker's `(cpus ...)` and `(gpus ...)`: each, where given, has one or more per slot.
fn slot_devices(
    src: Src<'_>,
    rec: &Record<'_>,
    slots: u32,
) -> Result<(Vec<u32>, Vec<u32>), SexpError> {
    let list = |field: &str, what: &str| -> Result<Vec<u32>, SexpError> {
        let list = rec.opt_value(field, decode::uint_list)?.unwrap_or_default();
        if !list.is_empty() && (list.len() as u32) < slots {
            let pos = rec.opt(field).map_or(rec.pos(), |f| f.pos);
            return Err(src.error(
                pos,
                format!(
                    "{slots} slots need at least {slots} {what} in ({field} ...), found {}",
                    list.len()
                ),
            ));
        }
        Ok(list)
    };
    Ok((list(word::CPUS, "CPUs")?, list(word::GPUS, "GPUs")?))
}

impl WorkerSpec {
    pub(super) fn to_sexp(&self) -> Sexp {
        let f = Sexp::field;
        let cpu_list = |ids: &[u32]| Sexp::list(ids.iter().map(|c| int(*c)).collect());
        match self {
            WorkerSpec::Local {
                name,
                slots,
                cpus,
                gpus,
            } => {
                let mut fields = vec![
                    f(word::NAME, vec![name_sexp(name)]),
                    f(word::SLOTS, vec![int(*slots)]),
                    f(word::CPUS, vec![cpu_list(cpus)]),
                ];
                if !gpus.is_empty() {
                    fields.push(f(word::GPUS, vec![cpu_list(gpus)]));
                }
                f(word::LOCAL, fields)
            }
            WorkerSpec::Ssh(s) => {
                let mut fields = vec![f(word::NAME, vec![name_sexp(&s.name)])];
                fields.extend(ssh_login_sexp(s));
                fields.push(f(word::RUNDIR, vec![Sexp::string(s.rundir.clone())]));
                fields.push(f(word::SLOTS, vec![int(s.slots)]));
                fields.push(f(word::CPUS, vec![cpu_list(&s.cpus)]));
                if !s.gpus.is_empty() {
                    fields.push(f(word::GPUS, vec![cpu_list(&s.gpus)]));
                }
                if let Some(b) = &s.worker_binary {
                    fields.push(f(word::WORKER_BINARY, vec![path_sexp(b)]));
                }
                f(word::SSH, fields)
            }
            WorkerSpec::Slurm(s) => {
                let word = |v: &str| Sexp::string(v.to_string());
                let mut fields = vec![f(word::NAME, vec![name_sexp(&s.name)])];
                if let Some(p) = &s.partition {
                    fields.push(f(word::PARTITION, vec![word(p)]));
                }
                fields.push(f(word::SLOTS, vec![int(s.slots)]));
                if let Some(c) = s.cpus_per_task {
                    fields.push(f(word::CPUS_PER_TASK, vec![int(c)]));
                }
                if let Some(g) = s.gpus_per_task {
                    fields.push(f(word::GPUS_PER_TASK, vec![int(g)]));
                }
                if let Some(t) = &s.time {
                    fields.push(f(word::TIME, vec![word(t)]));
                }
                if !s.srun_args.is_empty() {
                    fields.push(f(word::SRUN_ARGS, vec![strings(&s.srun_args)]));
                }
                fields.push(f(word::RUNDIR, vec![word(&s.rundir)]));
                if let Some(b) = &s.worker_binary {
                    fields.push(f(word::WORKER_BINARY, vec![path_sexp(b)]));
                }
                fields.push(f(word::RETRIES, vec![int(s.retries)]));
                if let Some(login) = &s.via_ssh {
                    fields.push(f(word::VIA_SSH, ssh_login_sexp(login)));
                }
                f(word::SLURM, fields)
            }
        }
    }
}

/// The login fields of an SSH worker or a Slurm worker's login node.
fn ssh_login_sexp(s: &SshWorker) -> Vec<Sexp> {
    let f = Sexp::field;
    let mut fields = vec![f(word::HOST, vec![Sexp::string(s.host.clone())])];
    if let Some(u) = &s.user {
        fields.push(f(word::USER, vec![name_sexp(u)]));
    }
    fields.push(f(word::PORT, vec![int(u32::from(s.port))]));
    if let Some(i) = &s.identity {
        fields.push(f(word::IDENTITY, vec![path_sexp(i)]));
    }
    if let Some(k) = &s.known_hosts {
        fields.push(f(word::KNOWN_HOSTS, vec![path_sexp(k)]));
    }
    fields.push(f(
        word::HOST_KEY_CHECK,
        vec![Sexp::symbol(match s.host_key_check {
            HostKeyCheck::Strict => word::STRICT,
            HostKeyCheck::AcceptNew => word::ACCEPT_NEW,
            HostKeyCheck::Off => word::OFF,
        })],
    ));
    fields
}
