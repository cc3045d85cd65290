//! Run limits through cgroups (v2, or v1 where v2 lacks the controllers): a
//! CPU limit holds a CPU-bound run to its share, a memory limit ends a run that
//! outgrows it naming the OOM killer; where the controllers are missing the
//! measurement is rejected with an error naming them. Each cgroup version the
//! host offers is checked on its own as well.

use std::path::Path;
use std::time::Duration;

use kiln_protocol::config::benchmark::Limits;
use kiln_protocol::message::StepOutcome;
use kiln_protocol::metric::Metric;
use kiln_worker::launch::cgroup::{self, RunCgroup};
use kiln_worker::launch::{self, End, Launch, Output};
use kiln_worker::measure::{measure, Measurement, OutputSpec, Plan};

use crate::common::{self, skip};

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
/// reports the test skipped for that reason (the rest of it cannot run here).
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
            let support = kiln_worker::launch::cgroup::support();
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
            skip(format!(
                "run limits cannot be applied on this machine: {reason}"
            ));
            false
        }
        _ => true,
    }
}

fn compile(dir: &Path, name: &str, source: &str) {
    std::fs::write(dir.join(format!("{name}.c")), source).unwrap();
    let cc = launch::output_std(
        std::process::Command::new("cc")
            .args(["-O1", "-o", name, &format!("{name}.c")])
            .current_dir(dir),
    )
    .expect("cc runs");
    assert!(
        cc.status.success(),
        "{}",
        String::from_utf8_lossy(&cc.stderr)
    );
}

/// Spins until it has used a second of CPU time.
const SPIN: &str =
    "#include <time.h>\nint main(void){struct timespec t;volatile unsigned long n=0;\
     do{for(int i=0;i<100000;i++)n++;clock_gettime(CLOCK_PROCESS_CPUTIME_ID,&t);}\
     while(t.tv_sec*1000000000L+t.tv_nsec<1000000000L);return 0;}\n";

/// Touches 512 MiB, 8 MiB at a time.
const GROW: &str = "#include <stdlib.h>\n#include <string.h>\nint main(void){for(int i=0;i<64;i++)\
     {char*p=malloc(8<<20);if(!p)return 2;memset(p,1,8<<20);}return 0;}\n";

/// Half a CPU; 64 MiB.
const HALF_CPU: Limits = Limits {
    cpus: Some(0.5),
    memory_bytes: None,
};
const SMALL_MEMORY: Limits = Limits {
    cpus: None,
    memory_bytes: Some(64 << 20),
};

/// Asserts that a run's CPU time over its wall time is about half a CPU.
fn assert_half_a_cpu(cpu_ns: f64, wall_ns: f64, how: &str) {
    let share = cpu_ns / wall_ns;
    eprintln!("{how}: {share:.3} of a CPU (cpu {cpu_ns:.0} ns, wall {wall_ns:.0} ns)");
    // The upper bound is the limit at work (unlimited, the spin takes a whole
    // CPU). Other work on a busy machine may take part of the half, so the
    // lower bound only catches a quota far below the one asked for.
    assert!(
        (0.25..=0.56).contains(&share),
        "{how}: a run limited to half a CPU used {share:.3} of one"
    );
}

#[test]
fn a_run_limited_to_half_a_cpu_uses_about_half_a_cpu() {
    let dir = tempfile::tempdir().unwrap();
    compile(dir.path(), "spin", SPIN);
    let m = measure(&plan(&["./spin"], dir.path(), HALF_CPU), None);
    if !applied(&m, "cpu") {
        return;
    }
    assert_eq!(m.outcome, StepOutcome::Ok);
    let wall = m.summary[&Metric::WallTime].median;
    let cpu = m.summary[&Metric::UserTime].median + m.summary[&Metric::SystemTime].median;
    assert_half_a_cpu(cpu, wall, &format!("{}", cgroup::support().cgroup.unwrap()));
}

#[test]
fn a_memory_limit_ends_a_run_that_outgrows_it_naming_the_oom_killer() {
    let dir = tempfile::tempdir().unwrap();
    compile(dir.path(), "grow", GROW);
    let m = measure(&plan(&["./grow"], dir.path(), SMALL_MEMORY), None);
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

/// `program` in `dir`, run in `cg`.
fn run_in(cg: &RunCgroup, dir: &Path, program: &str) -> launch::Finished {
    let launch = Launch {
        argv: vec![format!("./{program}")],
        cwd: dir.to_path_buf(),
        env: Vec::new(),
        cpus: Vec::new(),
        output: Output::Discard,
        timeout: Duration::from_secs(30),
        sample_every: None,
        cgroups: cg.procs(),
        memory_limit: None,
        stderr_watch: &[],
    };
    launch::run(&launch, None, None).expect("the program starts")
}

#[test]
fn each_cgroup_version_the_host_offers_limits_cpu_and_memory_and_is_removed_after() {
    let offered = cgroup::offered();
    if offered.is_empty() {
        return skip(format!(
            "no cgroup version offers the cpu and memory controllers here: {}",
            cgroup::support().detail
        ));
    }
    let dir = tempfile::tempdir().unwrap();
    compile(dir.path(), "spin", SPIN);
    compile(dir.path(), "grow", GROW);
    for version in offered {
        let cg = RunCgroup::create_in(version, &HALF_CPU).unwrap();
        assert_eq!(cg.version(), version);
        let spun = run_in(&cg, dir.path(), "spin");
        assert_eq!(spun.end, End::Exited(0), "{version}");
        let cpu = (spun.usage.user_ns + spun.usage.system_ns) as f64;
        assert_half_a_cpu(cpu, spun.wall.as_nanos() as f64, &version.to_string());
        let dirs = cg.dirs().to_vec();
        assert!(dirs.iter().all(|d| d.is_dir()), "{dirs:?}");
        drop(cg);
        assert!(dirs.iter().all(|d| !d.exists()), "{version}: left {dirs:?}");

        let cg = RunCgroup::create_in(version, &SMALL_MEMORY).unwrap();
        assert_eq!(cg.oom_kills(), 0);
        let grown = run_in(&cg, dir.path(), "grow");
        assert_eq!(grown.end, End::Signaled(libc::SIGKILL), "{version}");
        assert!(
            cg.oom_kills() > 0,
            "{version}: the OOM killer is not counted"
        );
        let dirs = cg.dirs().to_vec();
        drop(cg);
        assert!(dirs.iter().all(|d| !d.exists()), "{version}: left {dirs:?}");
    }
}
