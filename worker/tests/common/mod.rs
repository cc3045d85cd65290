//! What the worker's integration tests share.

use std::path::Path;
use std::time::Duration;

use kiln_protocol::config::benchmark::{Limits, RunPolicy};
use kiln_protocol::metric::Metric;
use kiln_worker::launch::{clean_env, output_std};
use kiln_worker::measure::{OutputSpec, Plan};

#[path = "../../../test-support/skip.rs"]
mod skip;

pub use skip::skip;

/// The worker's workspace in `dir`, with compilers wrapped by the kiln-worker binary: this test
/// binary cannot stand in for a compiler as kiln-worker does.
pub fn workspace(dir: &Path) -> kiln_worker::step::Workspace {
    kiln_worker::build::wrap::use_executable(env!("CARGO_BIN_EXE_kiln-worker").into());
    kiln_worker::step::Workspace::open(dir).unwrap()
}

/// Whether `program --version` runs.
pub fn have(program: &str) -> bool {
    output_std(std::process::Command::new(program).arg("--version"))
        .is_ok_and(|o| o.status.success())
}

/// A plan for `runs` timed runs of `argv` in `dir` (no warm-up), on wall time, stdout hashed.
pub fn plan(argv: &[&str], dir: &Path, runs: u32) -> Plan {
    Plan {
        argv: argv.iter().map(|s| s.to_string()).collect(),
        cwd: dir.to_path_buf(),
        env: clean_env(dir, &[]),
        cpus: Vec::new(),
        timeout: Duration::from_secs(20),
        policy: RunPolicy {
            warmup: 0,
            min: runs,
            max: runs,
            target_rel_ci: 0.01,
            max_time_s: 600.0,
        },
        objective: Metric::WallTime,
        race: None,
        extra: Vec::new(),
        output: OutputSpec::Stdout(kiln_worker::launch::checked_output::LineFilter::All),
        expected_output: None,
        callgrind_out: dir.join("callgrind.out"),
        function_costs: false,
        gpu_trace_dir: dir.join("gpu-trace"),
        limits: Limits::default(),
        container: None,
    }
}
