//! Timed runs inside a container image (podman or docker), the edge-device
//! case: the benchmark is built on the worker as any other, and each timed run
//! is `ENGINE run --rm` of the image with the slot's work folder mounted at the
//! same path, limited by the engine's `--cpus` and `--memory` (no swap beyond
//! it), measured from the worker.
//!
//! A container killed at its memory limit exits with 137 (128 + SIGKILL), as
//! one killed by anything else does; the engine's record of the OOM kill
//! (an `oom` event) or the kernel's log line naming the container's cgroup
//! tells them apart. (conmon misses OOM kills under cgroup v1 on some hosts:
//! the kernel's log is what tells there.)

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

use kiln_protocol::config::benchmark::Container;

use crate::launch;

/// The exit status of an engine whose container was killed by SIGKILL.
pub const KILLED_STATUS: i32 = 128 + libc::SIGKILL;

/// `Err` naming the engine or the image when this worker cannot run `c`
/// (checked before a build is spent; the image is never pulled).
pub fn check(c: &Container) -> Result<(), String> {
    let engine = c.engine.program();
    let out = launch::output_std(
        Command::new(engine).args(["image", "inspect", "--format", "{{.Id}}", &c.image]),
    )
    .map_err(|e| format!("cannot run container engine '{engine}': {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{engine} has no image '{}' on this worker (kiln never pulls one): {}",
            c.image,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// One timed run's container: where the engine writes its id.
#[derive(Debug)]
pub struct ContainerRun {
    cidfile: PathBuf,
}

impl ContainerRun {
    /// A run with a fresh `--cidfile` path (the engine refuses an existing one).
    pub fn fresh() -> ContainerRun {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let cidfile = std::env::temp_dir().join(format!(
            "kiln-cid-{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_file(&cidfile);
        ContainerRun { cidfile }
    }

    /// The engine's command line that runs `argv` in `c`'s image, in `cwd`
    /// (mounted at the same path), with `env` but for `PATH` (the image's own).
    pub fn argv(
        &self,
        c: &Container,
        argv: &[String],
        cwd: &Path,
        env: &[(String, String)],
    ) -> Vec<String> {
        let cwd = cwd.display().to_string();
        // No network: a run measures the program, not the engine's network
        // setup (which needs helpers the worker's clean PATH may not reach).
        let mut args: Vec<String> = [c.engine.program(), "run", "--rm", "--network", "none"]
            .map(String::from)
            .into();
        args.extend(["--cidfile".into(), self.cidfile.display().to_string()]);
        if let Some(cpus) = c.limits.cpus {
            args.extend(["--cpus".into(), cpus.to_string()]);
        }
        if let Some(bytes) = c.limits.memory_bytes {
            // --memory-swap is memory plus swap: the same value allows no swap.
            args.extend([
                "--memory".into(),
                bytes.to_string(),
                "--memory-swap".into(),
                bytes.to_string(),
            ]);
        }
        args.extend(["--volume".into(), format!("{cwd}:{cwd}")]);
        args.extend(["--workdir".into(), cwd]);
        for (k, v) in env.iter().filter(|(k, _)| k != "PATH") {
            args.extend(["--env".into(), format!("{k}={v}")]);
        }
        args.push(c.image.clone());
        args.extend(argv.iter().cloned());
        args
    }

    /// The container's id, once the engine has written it.
    fn id(&self) -> Option<String> {
        let id = std::fs::read_to_string(&self.cidfile).ok()?;
        let id = id.trim();
        (!id.is_empty()).then(|| id.to_string())
    }

    /// Whether the kernel's OOM killer ended the container.
    pub fn oom_killed(&self, c: &Container) -> bool {
        let Some(id) = self.id() else { return false };
        let events = launch::output_std(
            Command::new(c.engine.program())
                .args(["events", "--stream=false", "--since", "1h"])
                .args(["--filter", &format!("container={id}")])
                .args(["--filter", "event=oom", "--format", "{{.ID}}"]),
        );
        if events.is_ok_and(|o| o.status.success() && !o.stdout.trim_ascii().is_empty()) {
            return true;
        }
        kernel_log_names_oom_of(&id)
    }

    /// Removes the container if it outlived its run (a timeout or cancel
    /// killed the engine's client, not the container).
    pub fn remove(&self, c: &Container) {
        if let Some(id) = self.id() {
            let _ =
                launch::output_std(Command::new(c.engine.program()).args(["rm", "--force", &id]));
        }
    }
}

impl Drop for ContainerRun {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.cidfile);
    }
}

/// Whether the kernel's log has an OOM kill in a memory cgroup named after
/// container `id` (`oom-kill:...,oom_memcg=/libpod_parent/libpod-ID,...`).
/// Unreadable without CAP_SYSLOG where `dmesg_restrict` is set: then `false`.
fn kernel_log_names_oom_of(id: &str) -> bool {
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let Ok(mut kmsg) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open("/dev/kmsg")
    else {
        return false;
    };
    // One record per read; EAGAIN at the end of the buffer.
    let mut record = vec![0u8; 8192];
    while let Ok(n) = kmsg.read(&mut record) {
        if n == 0 {
            break;
        }
        if oom_record_names(&String::from_utf8_lossy(&record[..n]), id) {
            return true;
        }
    }
    false
}

/// Whether a kernel log record is an OOM kill in the memory cgroup of container `id`.
fn oom_record_names(record: &str, id: &str) -> bool {
    record.contains("oom-kill:")
        && record
            .split(',')
            .filter_map(|kv| kv.strip_prefix("oom_memcg="))
            .any(|memcg| memcg.trim_end().contains(id))
}

#[cfg(test)]
mod tests {
    use super::*;
    use kiln_protocol::config::benchmark::{ContainerEngine, Limits};

    #[test]
    fn the_command_line_limits_mounts_and_passes_the_environment() {
        let c = Container {
            engine: ContainerEngine::Podman,
            image: "localhost/edge".into(),
            limits: Limits {
                cpus: Some(0.5),
                memory_bytes: Some(256 << 20),
            },
        };
        let run = ContainerRun::fresh();
        let argv = run.argv(
            &c,
            &["./bench".into(), "a b".into()],
            Path::new("/w/slot0/work"),
            &[("PATH".into(), "/usr/bin".into()), ("N".into(), "3".into())],
        );
        let text = argv.join(" ");
        assert!(text.starts_with("podman run --rm "), "{text}");
        assert!(text.contains(" --cpus 0.5 "), "{text}");
        assert!(
            text.contains(" --memory 268435456 --memory-swap 268435456 "),
            "{text}"
        );
        assert!(text.contains(" --volume /w/slot0/work:/w/slot0/work --workdir /w/slot0/work "));
        assert!(
            text.contains(" --env N=3 ") && !text.contains("PATH"),
            "{text}"
        );
        // The program's arguments stay whole, after the image.
        assert_eq!(argv[argv.len() - 3..], ["localhost/edge", "./bench", "a b"]);
    }

    #[test]
    fn an_oom_record_is_known_by_its_container() {
        let line = "6,1234,1618708473,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),\
                    cpuset=libpod-a0f7,mems_allowed=0,oom_memcg=/libpod_parent/libpod-a0f7,\
                    task_memcg=/libpod_parent/libpod-a0f7,task=grow,pid=4041,uid=0\n";
        assert!(oom_record_names(line, "a0f7"));
        assert!(!oom_record_names(line, "b1e2"));
        assert!(!oom_record_names(
            "6,1,2,-;grow invoked oom-killer: a0f7",
            "a0f7"
        ));
    }
}
