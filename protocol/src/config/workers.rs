//! The workers part: local, SSH and Slurm workers, their logins and slots.

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use super::record::{self as kind, record, Kind};
use super::{field_record, int};
use crate::decode::{self, Record, Src};
use crate::sexp::{Sexp, SexpError};

/// The words of this part of the config language that decoding, the lists of
/// allowed fields and printing share: each spelled once, here.
mod word {
    pub const ACCEPT_NEW: &str = "accept-new";
    pub const BUILTIN: &str = "builtin";
    pub const CLIENT: &str = "client";
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
    pub const SYSTEM: &str = "system";
    pub const TIME: &str = "time";
    pub const USER: &str = "user";
    pub const VIA_SSH: &str = "via-ssh";
    pub const WORKER_BINARY: &str = "worker-binary";
}

/// A machine that runs steps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum WorkerSpec {
    /// `kiln-worker serve` as a child process of the controller.
    Local(LocalWorker),
    /// A worker reached over SSH.
    Ssh(SshWorker),
    /// A worker in a Slurm allocation of its own, started by `srun`.
    Slurm(SlurmWorker),
}

record! {
    /// `kiln-worker serve` as a child process of the controller.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    pub struct LocalWorker {
        name: String = word::NAME, kind::NAME,
            default(String::new(), "local, local-N for the entry at index N"),
            "The worker's name.";
        slots: u32 = word::SLOTS, kind::POSITIVE, default(1), "Steps run at once.";
        cpus: Vec<u32> = word::CPUS, kind::INTEGERS, default(Vec::new()),
            "CPUs the slots are pinned to (one or more per slot, split evenly); none: unpinned.";
        gpus: Vec<u32> = word::GPUS, kind::INTEGERS, omitted(Vec::new()),
            "GPUs the slots run on (split evenly as CPUs are); none: every GPU.";
    }
}

record! {
    /// A worker in a Slurm allocation of its own: `srun` (on the controller's machine or on a
    /// login node over SSH) asks for one node and starts `kiln-worker serve` there, speaking the
    /// protocol over srun's standard input and output.
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    pub struct SlurmWorker {
        name: String = word::NAME, kind::NAME,
            default(String::new(), "slurm-N for the entry at index N"),
            "The worker's name (NAME-1 .. NAME-N for an entry of (nodes N)).";
        partition: Option<String> = word::PARTITION, SRUN_WORD, optional,
            "The partition (srun --partition); none: the cluster's default.";
        slots: u32 = word::SLOTS, kind::POSITIVE, default(1), "Steps run at once.";
        cpus_per_task: Option<u32> = word::CPUS_PER_TASK, kind::POSITIVE, optional,
            "CPUs Slurm allocates (srun --cpus-per-task); none: Slurm's default.";
        gpus_per_task: Option<u32> = word::GPUS_PER_TASK, kind::POSITIVE, optional,
            "GPUs Slurm allocates (srun --gpus-per-task); none: none asked for.";
        time: Option<String> = word::TIME, SRUN_WORD, optional,
            "The allocation's time limit in Slurm's format (srun --time, e.g. 7-00:00:00).";
        srun_args: Vec<String> = word::SRUN_ARGS, kind::STRINGS, omitted(Vec::new()),
            "More arguments for srun, put before the worker's command.";
        rundir: String = word::RUNDIR, kind::STRING, required,
            "Folder for kiln's files on a filesystem the compute nodes share with the machine \
             that runs srun: kiln-worker is deployed there, each worker works in RUNDIR/NAME.";
        worker_binary: Option<PathBuf> = word::WORKER_BINARY, kind::PATH, optional,
            "A kiln-worker binary built for the nodes' platform, deployed instead of ours.";
        retries: u32 = word::RETRIES, kind::COUNT, default(3),
            "New allocations asked for in a row after one ends or never starts, before the \
             worker is given up.";
        via_ssh: Option<SshWorker> = word::VIA_SSH, VIA_SSH, optional,
            "The login node to run srun on (the login fields of an ssh worker); none: srun runs \
             on the controller's machine.";
    }
}

record! {
    /// A worker reached over SSH (or, as a Slurm worker's `via-ssh`, the login node srun runs on).
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    pub struct SshWorker {
        name: String = word::NAME, kind::NAME, default(String::new(), "the host"),
            "The worker's name.";
        host: String = word::HOST, kind::STRING, required, "Host name or address.";
        user: Option<String> = word::USER, kind::TEXT, optional, "Login user; none: ssh's own.";
        port: u16 = word::PORT, PORT, default(22), "SSH port.";
        identity: Option<PathBuf> = word::IDENTITY, kind::PATH, optional, "Private key file.";
        known_hosts: Option<PathBuf> = word::KNOWN_HOSTS, kind::PATH, optional,
            "known_hosts file to check host keys against; none: ssh's own.";
        host_key_check: HostKeyCheck = word::HOST_KEY_CHECK, HOST_KEY_CHECK,
            default(HostKeyCheck::Strict), "Host key policy.";
        #[serde(default)]
        client: SshClient = word::CLIENT, SSH_CLIENT, default(SshClient::System),
            "The SSH client: system (OpenSSH's ssh, a master process a worker, ~/.ssh/config \
             unread) or builtin (kiln's own, inside the controller: 0.14 MiB a worker instead \
             of 1.4; keys from identity or ~/.ssh/id_*, no agent, no passphrase).";
        rundir: String = word::RUNDIR, kind::STRING,
            default(String::new(), "required for an ssh worker; a login node takes the slurm entry's"),
            "Folder on the worker that holds kiln's files (kiln-worker is deployed there).";
        slots: u32 = word::SLOTS, kind::POSITIVE, default(1), "Steps run at once.";
        cpus: Vec<u32> = word::CPUS, kind::INTEGERS, default(Vec::new()),
            "CPUs the slots are pinned to; none: unpinned.";
        gpus: Vec<u32> = word::GPUS, kind::INTEGERS, omitted(Vec::new()),
            "GPUs the slots run on; none: every GPU.";
        worker_binary: Option<PathBuf> = word::WORKER_BINARY, kind::PATH, optional,
            "A kiln-worker binary built for the worker's platform, uploaded instead of ours.";
    }
}

/// The fields of an ssh worker a Slurm worker's `(via-ssh ...)` login node takes.
const LOGIN_WORDS: &[&str] = &[
    word::HOST,
    word::USER,
    word::PORT,
    word::IDENTITY,
    word::KNOWN_HOSTS,
    word::HOST_KEY_CHECK,
    word::CLIENT,
];

const PORT: Kind<u16> = Kind {
    takes: "a port, 1 to 65535",
    decode: |f| {
        f.value(|src, node, field| {
            let v = decode::uint(src, node, field)?;
            u16::try_from(v)
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| src.error(node.pos, format!("port {v} is outside 1..65535")))
        })
    },
    print: |port| vec![int(u32::from(*port))],
};

const HOST_KEY_CHECK: Kind<HostKeyCheck> = Kind {
    takes: "strict, accept-new or off",
    decode: |f| {
        f.value(|src, node, field| {
            let choices = [word::STRICT, word::ACCEPT_NEW, word::OFF];
            Ok(match decode::choice(src, node, field, &choices)? {
                word::ACCEPT_NEW => HostKeyCheck::AcceptNew,
                word::OFF => HostKeyCheck::Off,
                _ => HostKeyCheck::Strict,
            })
        })
    },
    print: |check| {
        vec![Sexp::symbol(match check {
            HostKeyCheck::Strict => word::STRICT,
            HostKeyCheck::AcceptNew => word::ACCEPT_NEW,
            HostKeyCheck::Off => word::OFF,
        })]
    },
};

const SSH_CLIENT: Kind<SshClient> = Kind {
    takes: "system or builtin",
    decode: |f| {
        f.value(|src, node, field| {
            let choices = [word::SYSTEM, word::BUILTIN];
            Ok(match decode::choice(src, node, field, &choices)? {
                word::BUILTIN => SshClient::Builtin,
                _ => SshClient::System,
            })
        })
    },
    print: |client| {
        vec![Sexp::symbol(match client {
            SshClient::System => word::SYSTEM,
            SshClient::Builtin => word::BUILTIN,
        })]
    },
};

/// A value srun takes as one option argument.
const SRUN_WORD: Kind<String> = Kind {
    takes: "a word without spaces",
    decode: |f| f.value(srun_value),
    print: |v| vec![Sexp::string(v.clone())],
};

const VIA_SSH: Kind<SshWorker> = Kind {
    takes: "(host H) (user U) (port P) (identity F) (known-hosts F) (host-key-check C) (client C)",
    decode: |f| SshWorker::decode_fields(&field_record(f.src(), f, LOGIN_WORDS)?),
    print: |login| {
        let is_login = |field: &Sexp| {
            let head = field
                .as_list()
                .and_then(|l| l.first())
                .and_then(Sexp::as_symbol);
            head.is_some_and(|w| LOGIN_WORDS.contains(&w))
        };
        login.print_fields().into_iter().filter(is_login).collect()
    },
};

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

/// Which SSH client connects to a worker.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum SshClient {
    /// OpenSSH's `ssh`: one master process a worker, its options and algorithms.
    #[default]
    System,
    /// kiln's own client (russh) inside the controller's process.
    Builtin,
}

impl WorkerSpec {
    /// The worker's name.
    pub fn name(&self) -> &str {
        match self {
            WorkerSpec::Local(l) => &l.name,
            WorkerSpec::Ssh(s) => &s.name,
            WorkerSpec::Slurm(s) => &s.name,
        }
    }

    /// Steps the worker runs at once.
    pub fn slots(&self) -> u32 {
        match self {
            WorkerSpec::Local(l) => l.slots,
            WorkerSpec::Ssh(s) => s.slots,
            WorkerSpec::Slurm(s) => s.slots,
        }
    }

    /// CPUs the slots are pinned to.
    pub fn cpus(&self) -> &[u32] {
        match self {
            WorkerSpec::Local(l) => &l.cpus,
            WorkerSpec::Ssh(s) => &s.cpus,
            // Slurm picks the CPUs and GPUs of an allocation; its tasks see only those.
            WorkerSpec::Slurm(_) => &[],
        }
    }

    /// GPUs the slots run on (their `CUDA_VISIBLE_DEVICES`); empty: every GPU.
    pub fn gpus(&self) -> &[u32] {
        match self {
            WorkerSpec::Local(l) => &l.gpus,
            WorkerSpec::Ssh(s) => &s.gpus,
            WorkerSpec::Slurm(_) => &[],
        }
    }
}

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
        Some(word::LOCAL) => Ok(vec![WorkerSpec::Local(local_worker(src, node, index)?)]),
        Some(word::SSH) => Ok(vec![WorkerSpec::Ssh(ssh_worker(src, node)?)]),
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

fn local_worker(src: Src<'_>, node: &Sexp, index: usize) -> Result<LocalWorker, SexpError> {
    let words = LocalWorker::words();
    let rec = Record::open(src, node, "local worker", Some(word::LOCAL), &words)?;
    let mut local = LocalWorker::decode_fields(&rec)?;
    slot_devices(src, &rec, local.slots, &local.cpus, &local.gpus)?;
    if local.name.is_empty() {
        local.name = match index {
            0 => word::LOCAL.into(),
            _ => format!("local-{index}"),
        };
    }
    Ok(local)
}

fn ssh_worker(src: Src<'_>, node: &Sexp) -> Result<SshWorker, SexpError> {
    let words = SshWorker::words();
    let rec = Record::open(src, node, "ssh worker", Some(word::SSH), &words)?;
    let mut ssh = SshWorker::decode_fields(&rec)?;
    rec.req(word::RUNDIR)?;
    slot_devices(src, &rec, ssh.slots, &ssh.cpus, &ssh.gpus)?;
    if ssh.name.is_empty() {
        // The host names the worker only where it can name a folder.
        if let Some(why) = decode::unsafe_name(&ssh.host) {
            return Err(src.error(
                rec.req(word::HOST)?.pos,
                format!(
                    "host '{}' cannot be the worker's name ({why}); give the worker a (name ...)",
                    ssh.host
                ),
            ));
        }
        ssh.name.clone_from(&ssh.host);
    }
    Ok(ssh)
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
    let mut words = SlurmWorker::words();
    words.push(word::NODES);
    let rec = Record::open(src, node, "slurm worker", Some(word::SLURM), &words)?;
    let mut worker = SlurmWorker::decode_fields(&rec)?;
    if worker.name.is_empty() {
        worker.name = format!("slurm-{index}");
    }
    if let Some(login) = &mut worker.via_ssh {
        login.name.clone_from(&worker.name);
        login.rundir.clone_from(&worker.rundir);
        login.worker_binary.clone_from(&worker.worker_binary);
    }
    let nodes = slurm_nodes(src, &rec, &worker.name)?;
    if nodes == 1 {
        return Ok(vec![WorkerSpec::Slurm(worker)]);
    }
    Ok((1..=nodes)
        .map(|k| {
            let mut w = worker.clone();
            w.name = format!("{}-{k}", worker.name);
            if let Some(login) = &mut w.via_ssh {
                login.name.clone_from(&w.name);
            }
            WorkerSpec::Slurm(w)
        })
        .collect())
}

/// `(nodes N)`: how many workers a slurm entry stands for, each named NAME-K.
fn slurm_nodes(src: Src<'_>, rec: &Record<'_>, name: &str) -> Result<u32, SexpError> {
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
    Ok(nodes)
}

/// A worker's `(cpus ...)` and `(gpus ...)`: each, where given, has one or more per slot.
fn slot_devices(
    src: Src<'_>,
    rec: &Record<'_>,
    slots: u32,
    cpus: &[u32],
    gpus: &[u32],
) -> Result<(), SexpError> {
    for (field, what, list) in [(word::CPUS, "CPUs", cpus), (word::GPUS, "GPUs", gpus)] {
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
    }
    Ok(())
}

impl WorkerSpec {
    pub(super) fn to_sexp(&self) -> Sexp {
        match self {
            WorkerSpec::Local(l) => Sexp::field(word::LOCAL, l.print_fields()),
            WorkerSpec::Ssh(s) => Sexp::field(word::SSH, s.print_fields()),
            WorkerSpec::Slurm(s) => Sexp::field(word::SLURM, s.print_fields()),
        }
    }
}
