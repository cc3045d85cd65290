//! GPU measurement through the worker: `unsupported` (never 0, never a panic) where nothing can
//! be measured, and on a GPU machine the calibration program's CPU and GPU times within 5 % of
//! the times it is known to spend. Tests needing nvcc, a GPU or the injection library are
//! reported skipped, with the reason.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use kiln_protocol::config::benchmark::RunPolicy;
use kiln_protocol::message::StepOutcome;
use kiln_protocol::metric::{Metric, MetricValue};
use kiln_worker::launch::output_std;
use kiln_worker::measure::{measure, Measurement, Plan};

use crate::common::{self, skip};

/// One warm-up, then `runs` runs on GPU time.
fn plan(argv: &[&str], dir: &Path, runs: u32) -> Plan {
    let base = common::plan(argv, dir, runs);
    Plan {
        timeout: Duration::from_secs(120),
        policy: RunPolicy {
            warmup: 1,
            ..base.policy
        },
        objective: Metric::GpuTime,
        ..base
    }
}

fn worker_measure(args: &[&str]) -> std::process::Output {
    let out = output_std(
        Command::new(env!("CARGO_BIN_EXE_kiln-worker"))
            .arg("measure")
            .args(args),
    )
    .unwrap();
    assert!(
        out.status.success(),
        "kiln-worker measure {args:?} failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn median(m: &Measurement, metric: Metric) -> f64 {
    m.summary
        .get(&metric)
        .unwrap_or_else(|| panic!("no {metric} in {:?}", m.summary.keys()))
        .median
}

#[test]
fn gpu_metrics_of_a_program_without_cuda_are_unsupported() {
    let args = [
        "--runs", "2", "--warmup", "0", "--metric", "gpu-time", "--metric", "energy",
    ];
    let json = worker_measure(&[&args[..], &["--json", "--", "true"]].concat());
    let m: Measurement = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(m.outcome, StepOutcome::Ok);
    let no_gpu = kiln_worker::measure::nvml::gpus().is_empty();
    for run in &m.runs {
        // `true` never initialises CUDA: there is no GPU time to report, here or on a GPU machine.
        for metric in Metric::ALL.iter().filter(|m| m.needs_cupti()) {
            assert_eq!(
                run.metrics.get(metric),
                Some(&MetricValue::Unsupported),
                "{metric}"
            );
        }
        if no_gpu {
            for metric in Metric::ALL.iter().filter(|m| m.needs_nvml()) {
                assert_eq!(
                    run.metrics.get(metric),
                    Some(&MetricValue::Unsupported),
                    "{metric}"
                );
            }
        }
    }
    assert!(!m.summary.contains_key(&Metric::GpuTime));

    let table = worker_measure(&[&args[..], &["--", "true"]].concat());
    let text = String::from_utf8_lossy(&table.stdout);
    let row = |label: &str| {
        text.lines()
            .find(|l| l.trim_start().starts_with(label))
            .unwrap_or_else(|| panic!("no {label} row in:\n{text}"))
            .to_string()
    };
    assert!(row("gpu-time").contains("unsupported"), "{text}");
    assert!(row("gpu busy").contains("unsupported"), "{text}");
    assert!(row("cpu (user+system)").contains('s'), "{text}");
    if no_gpu {
        assert!(row("energy").contains("unsupported"), "{text}");
    }
}

#[test]
fn probe_says_whether_gpu_time_can_be_traced_and_why_not() {
    let out = output_std(Command::new(env!("CARGO_BIN_EXE_kiln-worker")).args(["probe", "--json"]))
        .unwrap();
    let caps: kiln_protocol::message::Capabilities = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        caps.gpu_time.is_ok(),
        kiln_worker::measure::cupti::readiness().is_ok(),
        "probe reports what the tracer would find: {:?}",
        caps.gpu_time
    );
    if let Err(why) = &caps.gpu_time {
        assert!(
            why.contains("libcuda") || why.contains("libkiln_cupti"),
            "{why}"
        );
    }
    let table = output_std(Command::new(env!("CARGO_BIN_EXE_kiln-worker")).arg("probe")).unwrap();
    assert!(String::from_utf8_lossy(&table.stdout).contains("gpu time"));
}

#[test]
fn an_unsupported_gpu_time_objective_stops_at_the_fewest_runs() {
    let dir = tempfile::tempdir().unwrap();
    let mut p = plan(&["true"], dir.path(), 2);
    p.policy.max = 10;
    p.policy.warmup = 0;
    let m = measure(&p, None);
    assert_eq!(m.outcome, StepOutcome::Ok);
    assert_eq!(
        m.runs.len(),
        2,
        "more runs cannot tighten an unsupported objective"
    );
    assert!(!m.target_met);
}

/// nvcc on the PATH or in the CUDA toolkit's usual place.
fn nvcc() -> Option<PathBuf> {
    ["nvcc", "/usr/local/cuda/bin/nvcc"]
        .into_iter()
        .map(PathBuf::from)
        .find(|p| output_std(Command::new(p).arg("--version")).is_ok_and(|o| o.status.success()))
}

fn within(found: f64, expected: f64, tolerance: f64) -> bool {
    (found - expected).abs() <= tolerance * expected
}

#[test]
fn calibration_cpu_and_gpu_times_are_within_5_percent() {
    let Some(nvcc) = nvcc() else {
        return skip("nvcc is not installed (looked on PATH and in /usr/local/cuda/bin)");
    };
    if kiln_worker::measure::nvml::gpus().is_empty() {
        return skip("NVML finds no GPU");
    }
    if let Err(e) = kiln_worker::measure::cupti::injection_library() {
        return skip(e);
    }
    let dir = tempfile::tempdir().unwrap();
    let source =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../bench-programs/gpu-calibrate/calibrate.cu");
    let built = output_std(
        Command::new(&nvcc)
            // Built for this GPU: no PTX compiled at load time, in one run and not the other.
            .args(["-O2", "-arch=native", "-o", "calibrate"])
            .arg(&source)
            .current_dir(dir.path()),
    )
    .unwrap();
    assert!(
        built.status.success(),
        "nvcc failed:\n{}",
        String::from_utf8_lossy(&built.stderr)
    );

    const CPU_MS: f64 = 1000.0;
    const GPU_MS: f64 = 800.0;
    const STREAMS: f64 = 2.0;
    let run = |argv: &[&str]| {
        let m = measure(&plan(argv, dir.path(), 3), None);
        assert_eq!(m.outcome, StepOutcome::Ok, "{argv:?}");
        m
    };
    // CUDA's start-up costs CPU time of its own: a run without work measures it.
    let idle = run(&["./calibrate", "0", "0"]);
    let busy = run(&["./calibrate", "1000", "800", "2"]);
    let cpu = |m: &Measurement| median(m, Metric::UserTime) + median(m, Metric::SystemTime);
    let ms = 1e6;
    let cpu_ms = (cpu(&busy) - cpu(&idle)) / ms;
    let gpu_ms = median(&busy, Metric::GpuTime) / ms;
    let sum_ms = median(&busy, Metric::GpuKernelSum) / ms;
    let wall_ms = (median(&busy, Metric::WallTime) - median(&idle, Metric::WallTime)) / ms;
    eprintln!(
        "calibration (known: cpu {CPU_MS} ms, gpu {GPU_MS} ms on {STREAMS} streams):\n  \
         cpu {cpu_ms:.1} ms (start-up {:.1} ms taken out), gpu busy {gpu_ms:.1} ms, \
         kernel sum {sum_ms:.1} ms, kernels {}, dropped records {}, wall {wall_ms:.1} ms more \
         than an idle run, energy {:?} mJ, power {:.1} W on average, {:.1} W at peak",
        cpu(&idle) / ms,
        median(&busy, Metric::GpuKernelCount),
        median(&busy, Metric::GpuDroppedRecords),
        busy.summary.get(&Metric::Energy).map(|s| s.median),
        median(&busy, Metric::PowerAvg) / 1e3,
        median(&busy, Metric::PowerPeak) / 1e3,
    );
    assert!(within(cpu_ms, CPU_MS, 0.05), "CPU time {cpu_ms:.1} ms");
    assert!(within(gpu_ms, GPU_MS, 0.05), "GPU busy time {gpu_ms:.1} ms");
    assert!(
        within(sum_ms, STREAMS * GPU_MS, 0.05),
        "kernel sum {sum_ms:.1} ms"
    );
    assert_eq!(median(&busy, Metric::GpuDroppedRecords), 0.0);
    assert!(median(&idle, Metric::GpuTime) < 0.01 * GPU_MS * ms);
    // Power in the right unit and from the GPU the run used: the peak of the instantaneous
    // samples is not far below the energy counter's mean. It can be a little below where the
    // power hardly varies (this program draws about the same while its CPU and its GPU work:
    // 131.4 W peak against 131.7 W mean in one H100 run); a lagging one-second average reads
    // further below on a program whose power varies (427 W against an instantaneous 723 W).
    for run in &busy.runs {
        let get = |m: Metric| run.metrics.get(&m).and_then(|v| v.measured());
        if let (Some(avg), Some(peak)) = (get(Metric::PowerAvg), get(Metric::PowerPeak)) {
            assert!(
                peak >= 0.95 * avg && peak < 5.0 * avg,
                "power peak {peak} mW against an average of {avg} mW"
            );
        }
    }
}

/// A stand-in for a program with a CUPTI client of its own (PyTorch under `torch.profiler`): it
/// says on stderr, in Kineto's words, that its client could not start, then prints more than the
/// stderr tail a worker keeps, and exits 0. On stdout it says whether kiln's injection library
/// was set to load into it.
pub const OWN_PROFILER: &str = "echo \"injection=${CUDA_INJECTION64_PATH:-none}\"; \
    echo 'function cbapi->getCuptiStatus() failed with error \
    CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED (39)' >&2; \
    echo 'CUPTI initialization failed - CUDA profiler activities will be missing' >&2; \
    head -c 65536 /dev/zero | tr '\\0' . >&2";

/// The environment in which a kiln-worker started by a test traces GPU time without a GPU: a
/// stand-in `libcuda.so.1` (an empty library built by cc into `dir`) first on its loader's path
/// is all the worker asks of the CUDA driver before it sets a run to load kiln's library, which
/// is named. A program that never initialises CUDA, as [`OWN_PROFILER`], loads nothing.
/// `Err`: why it cannot be had here.
pub fn tracing_env(dir: &Path) -> Result<Vec<(&'static str, PathBuf)>, String> {
    let library = kiln_worker::measure::cupti::injection_library()?;
    if !crate::common::have("cc") {
        return Err("no C compiler (cc) to build a stand-in libcuda.so.1".into());
    }
    let stub = dir.join("libcuda.so.1");
    if !stub.exists() {
        std::fs::write(dir.join("stub.c"), "int kiln_stand_in_for_libcuda;\n").unwrap();
        let built = output_std(
            Command::new("cc")
                .args(["-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o"])
                .arg(&stub)
                .arg(dir.join("stub.c")),
        )
        .unwrap();
        assert!(
            built.status.success(),
            "cc failed:\n{}",
            String::from_utf8_lossy(&built.stderr)
        );
    }
    Ok(vec![
        ("LD_LIBRARY_PATH", dir.to_path_buf()),
        (kiln_worker::measure::cupti::LIBRARY_ENV, library),
    ])
}

/// `kiln-worker measure ARGS -- sh -c OWN_PROFILER` in [`tracing_env`].
fn measure_as_a_tracing_worker(dir: &Path, args: &[&str]) -> Result<Measurement, String> {
    let env = tracing_env(dir)?;
    let out = output_std(
        Command::new(env!("CARGO_BIN_EXE_kiln-worker"))
            .arg("measure")
            .args(["--runs", "2", "--warmup", "0", "--json"])
            .args(args)
            .args(["--", "sh", "-c", OWN_PROFILER])
            .current_dir(dir)
            .envs(env)
            .env("KILN_LOG", "error"),
    )
    .unwrap();
    assert!(
        out.status.success(),
        "kiln-worker measure failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let m: Measurement = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(m.outcome, StepOutcome::Ok, "{m:?}");
    Ok(m)
}

#[test]
fn a_program_whose_own_cupti_client_failed_under_tracing_gets_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let traced = match measure_as_a_tracing_worker(dir.path(), &["--metric", "gpu-time"]) {
        Ok(m) => m,
        Err(why) => return skip(why),
    };
    let library = kiln_worker::measure::cupti::injection_library().unwrap();
    let stdout = traced.checked_output.clone().unwrap_or_default();
    assert_eq!(
        stdout.trim_end(),
        format!("injection={}", library.display()),
        "the run was set to load kiln's library"
    );
    // Once per measurement, with the messages seen (the first before 64 KiB of other output),
    // and what to do.
    assert_eq!(traced.warnings.len(), 1, "{:?}", traced.warnings);
    let note = &traced.warnings[0];
    for needle in [
        "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED",
        "CUPTI initialization failed",
        "gpu-time",
        "energy or wall-time",
    ] {
        assert!(note.contains(needle), "{needle:?} in {note}");
    }

    // Energy and wall time need no CUPTI: the run loads no library of kiln's, its profiler is
    // left CUPTI, and what it prints is its own business.
    let untraced = measure_as_a_tracing_worker(dir.path(), &["--metric", "energy"]).unwrap();
    let stdout = untraced.checked_output.clone().unwrap_or_default();
    assert_eq!(stdout.trim_end(), "injection=none");
    assert!(untraced.warnings.is_empty(), "{:?}", untraced.warnings);
    assert!(untraced.summary.contains_key(&Metric::WallTime));
    assert!(untraced
        .runs
        .iter()
        .all(|r| r.metrics.contains_key(&Metric::Energy)));
}
