//! What this machine is and can measure: the worker's capabilities and
//! environment fingerprint, sent at hello and printed by `kiln-worker probe`.

use std::fmt::Write as _;

use kiln_protocol::message::{Capabilities, GpuInfo};

use crate::build::{objects, wrap};
use crate::launch::{self, cgroup, counters};
use crate::measure::callgrind;

/// CPU flags worth recording: the ones that change what compiled code can use.
const NOTABLE_FLAGS: &[&str] = &[
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "bmi2",
    "avx512f",
    "avx512dq",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "amx_tile",
    "amx_bf16",
    "sha_ni",
    "aes",
    "vaes",
    "asimd",
    "sve",
    "sve2",
];

/// The compilers probed when none are named.
pub const DEFAULT_COMPILERS: &[&str] = &["clang", "rustc"];

/// Probes the machine; compilers are looked up on the `PATH` builds use.
pub fn capabilities(compilers: &[String]) -> Capabilities {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    Capabilities {
        worker_version: env!("CARGO_PKG_VERSION").to_string(),
        hostname: read_trimmed("/proc/sys/kernel/hostname").unwrap_or_else(|| "unknown".into()),
        kernel: read_trimmed("/proc/sys/kernel/osrelease").unwrap_or_else(|| "unknown".into()),
        cpu_model: cpu_model(&cpuinfo),
        cpu_flags: cpu_flags(&cpuinfo),
        cores: online_cores(),
        governor: read_trimmed("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
        aslr: read_trimmed("/proc/sys/kernel/randomize_va_space"),
        counters: counters::available(),
        valgrind: callgrind::version(),
        gpus: gpus(),
        gpu_time: crate::measure::cupti::readiness().map(|p| p.display().to_string()),
        limits: cgroup::support(),
        compilers: compilers
            .iter()
            .filter_map(|c| Some((c.clone(), launch::compiler_version(c)?)))
            .collect(),
        build_modes: compilers
            .iter()
            .filter_map(|c| Some((c.clone(), build_mode(c)?)))
            .collect(),
        // Slurm sets it in every task; the controller shows which job a worker is.
        slurm_job: std::env::var("SLURM_JOB_ID")
            .ok()
            .and_then(|id| id.parse().ok()),
    }
}

/// What a step's build redoes with `compiler` when a decision changes, or
/// why it cannot do less; none for a compiler kiln has no mode for.
fn build_mode(compiler: &str) -> Option<String> {
    let path = std::env::var_os("PATH").unwrap_or_else(|| launch::CLEAN_PATH.into());
    let found = wrap::find(compiler, &path);
    match compiler {
        "clang" | "clang++" => Some(match found {
            None => format!("{compiler} is not on PATH"),
            Some(clang) => match objects::from_ir_works(&clang) {
                Ok(()) => "front end once: a changed unit is optimised from its kept IR, \
                           the others' objects reused"
                    .to_string(),
                Err(why) => format!("per-unit rebuild (a changed unit compiled whole): {why}"),
            },
        }),
        "rustc" => Some(match found {
            None => "rustc is not on PATH".to_string(),
            Some(_) => "front end once under cargo (rustc's incremental folder kept per slot), \
                        code generated again only for the crates whose decisions changed"
                .to_string(),
        }),
        _ => None,
    }
}

/// The GPUs of this machine as NVML lists them (none without an NVIDIA driver).
pub fn gpus() -> Vec<GpuInfo> {
    crate::measure::nvml::gpus()
}

/// A human-readable table of capabilities.
pub fn table(c: &Capabilities) -> String {
    let mut t = String::new();
    let mut row = |k: &str, v: &str| {
        let _ = writeln!(t, "{k:<16} {v}");
    };
    row("worker", &c.worker_version);
    row("hostname", &c.hostname);
    row("kernel", &c.kernel);
    row("cpu", &c.cpu_model);
    row("cpu flags", &c.cpu_flags.join(" "));
    row("cores", &c.cores.to_string());
    row("governor", c.governor.as_deref().unwrap_or("(not exposed)"));
    row("aslr", c.aslr.as_deref().unwrap_or("(unknown)"));
    let (yes, no): (Vec<_>, Vec<_>) = c.counters.iter().partition(|(_, ok)| **ok);
    let names = |v: &[(&kiln_protocol::Metric, &bool)]| {
        v.iter()
            .map(|(m, _)| m.name())
            .collect::<Vec<_>>()
            .join(" ")
    };
    row("counters", &names(&yes));
    row("unsupported", &names(&no));
    row(
        "valgrind",
        c.valgrind.as_deref().unwrap_or("(not installed)"),
    );
    let limits = match (c.limits.cpu, c.limits.memory) {
        (true, true) => match c.limits.cgroup {
            Some(version) => format!("cpu memory ({version})"),
            None => "cpu memory".to_string(),
        },
        (true, false) => format!("cpu only: {}", c.limits.detail),
        (false, true) => format!("memory only: {}", c.limits.detail),
        (false, false) => format!("none: {}", c.limits.detail),
    };
    row("run limits", &limits);
    if c.gpus.is_empty() {
        row("gpus", "(none)");
    }
    for g in &c.gpus {
        row(
            &format!("gpu {}", g.index),
            &format!(
                "{} ({} MiB, driver {})",
                g.name,
                g.memory_bytes >> 20,
                g.driver
            ),
        );
    }
    match &c.gpu_time {
        Ok(library) => row("gpu time", &format!("traced with {library}")),
        Err(why) => row("gpu time", &format!("unsupported: {why}")),
    }
    for (name, version) in &c.compilers {
        row(name, version);
        if let Some(mode) = c.build_modes.get(name) {
            row(&format!("{name} steps"), mode);
        }
    }
    t
}

fn read_trimmed(path: &str) -> Option<String> {
    let s = std::fs::read_to_string(path).ok()?.trim().to_string();
    (!s.is_empty()).then_some(s)
}

fn cpuinfo_value<'a>(cpuinfo: &'a str, key: &str) -> Option<&'a str> {
    cpuinfo.lines().find_map(|line| {
        let (k, v) = line.split_once(':')?;
        (k.trim() == key).then(|| v.trim())
    })
}

fn cpu_model(cpuinfo: &str) -> String {
    // x86 says "model name"; some ARM kernels only give "CPU part"/"Hardware".
    ["model name", "Hardware", "CPU part"]
        .iter()
        .find_map(|k| cpuinfo_value(cpuinfo, k))
        .unwrap_or("unknown")
        .to_string()
}

fn cpu_flags(cpuinfo: &str) -> Vec<String> {
    let all: Vec<&str> = cpuinfo_value(cpuinfo, "flags")
        .or_else(|| cpuinfo_value(cpuinfo, "Features"))
        .unwrap_or("")
        .split_whitespace()
        .collect();
    NOTABLE_FLAGS
        .iter()
        .filter(|f| all.contains(f))
        .map(|f| f.to_string())
        .collect()
}

fn online_cores() -> u32 {
    // SAFETY: sysconf has no memory arguments.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
    u32::try_from(n).unwrap_or(1).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_cpuinfo() {
        let info =
            "processor\t: 0\nmodel name\t: AMD EPYC\nflags\t\t: fpu sse4_2 avx avx2 avx512f\n";
        assert_eq!(cpu_model(info), "AMD EPYC");
        assert_eq!(cpu_flags(info), ["sse4_2", "avx", "avx2", "avx512f"]);
    }
}
