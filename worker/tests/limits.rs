//! Run limits through cgroup v2: a CPU limit stretches a CPU-bound run, a
//! memory limit ends a run that outgrows it; where the controllers are missing
//! the measurement is rejected with an error naming them.

mod common;

use std::path::Path;
use std::time::Duration;

use kiln_protocol::config::Limits;
use kiln_protocol::message::StepOutcome;
use kiln_protocol::metric::Metric;
use kiln_worker::measure::{measure, Measurement, OutputSpec, Plan};

/// One run under `limits`, output unchecked.
fn plan(argv: &[&str], dir: &Path, limits: Limits) -> Plan {
    Plan {
        timeout: Duration::from_secs(30),
        output: OutputSpec::None,
        limits,
        ..common::plan(argv, dir, 1)
    }
}

/// `true` if the limits were applied; otherwise checks that the rejection says
/// why (the missing controller, or the cgroup that could not be set up) and
/// prints the reason the rest of the test is skipped.
fn applied(m: &Measurement, controller: &str) -> bool {
    match &m.outcome {
        StepOutcome::Rejected { reason } => {
            assert!(
                reason.contains("cannot apply (limits") && reason.contains("cgroup"),
                "a rejection must name the limits and the cgroup: {reason}"
            );
            assert!(
                m.runs.is_empty(),
                "nothing runs unlimited when limits cannot be applied"
            );
            let support = kiln_worker::cgroup::support();
            let has = match controller {
                "cpu" => support.cpu,
                _ => support.memory,
            };
            if !has {
                assert!(
                    reason.contains(&format!("{controller} controller")),
                    "{reason}"
                );
            }
            eprintln!("skipped: run limits cannot be applied on this machine: {reason}");
            false
        }
        _ => true,
    }
}

fn compile(dir: &Path, name: &str, source: &str) {
    std::fs::write(dir.join(format!("{name}.c")), source).unwrap();
    let status = std::process::Command::new("cc")
        .args(["-O1", "-o", name, &format!("{name}.c")])
        .current_dir(dir)
        .status()
        .expect("cc runs");
    assert!(status.success());
}

#[test]
fn a_cpu_limit_stretches_a_cpu_bound_run() {
    let dir = tempfile::tempdir().unwrap();
    compile(
        dir.path(),
        "spin",
        "#include <time.h>\nint main(void){struct timespec t;volatile unsigned long n=0;\
         do{for(int i=0;i<100000;i++)n++;clock_gettime(CLOCK_PROCESS_CPUTIME_ID,&t);}\
         while(t.tv_sec*1000000000L+t.tv_nsec<300000000L);return 0;}\n",
    );
    let limits = Limits {
        cpus: Some(0.25),
        memory_bytes: None,
    };
    let m = measure(&plan(&["./spin"], dir.path(), limits), None);
    if !applied(&m, "cpu") {
        return;
    }
    assert_eq!(m.outcome, StepOutcome::Ok);
    let wall = m.summary[&Metric::WallTime].median;
    let cpu = m.summary[&Metric::UserTime].median + m.summary[&Metric::SystemTime].median;
    // 0.3 s of CPU at a quarter of a CPU takes about 1.2 s.
    assert!(
        wall > 2.5 * cpu,
        "a quarter CPU should stretch the run: wall {wall} ns, cpu {cpu} ns"
    );
}

#[test]
fn a_memory_limit_ends_a_run_that_outgrows_it() {
    let dir = tempfile::tempdir().unwrap();
    compile(
        dir.path(),
        "grow",
        "#include <stdlib.h>\n#include <string.h>\nint main(void){for(int i=0;i<64;i++)\
         {char*p=malloc(8<<20);if(!p)return 2;memset(p,1,8<<20);}return 0;}\n",
    );
    let limits = Limits {
        cpus: None,
        memory_bytes: Some(64 << 20),
    };
    let m = measure(&plan(&["./grow"], dir.path(), limits), None);
    if !applied(&m, "memory") {
        return;
    }
    match &m.outcome {
        StepOutcome::RunFailed {
            signal_name,
            stderr_tail,
            ..
        } => {
            assert_eq!(signal_name.as_deref(), Some("SIGKILL"));
            assert!(stderr_tail.contains("OOM killer"), "{stderr_tail}");
            assert!(stderr_tail.contains("(memory 67108864)"), "{stderr_tail}");
        }
        other => panic!("512 MiB under a 64 MiB limit must fail, got {other:?}"),
    }
}
