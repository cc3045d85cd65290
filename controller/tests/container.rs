//! A container benchmark end to end: built once on the local worker, each
//! timed run in a podman container of a locally built image, and the
//! container's memory limit enforced (a run past it is run-failed naming the
//! OOM killer). Where podman cannot run, the test is reported skipped, saying why.

use std::collections::BTreeSet;

use crate::common::*;
use kiln_controller::store::Store;
use kiln_protocol::message::StepOutcome;

/// `scripts/podman-setup`: the image's name, or `None` (the test skipped) where podman cannot run.
fn podman_image() -> Option<String> {
    let out = std::process::Command::new(repo().join("scripts/podman-setup"))
        .output()
        .expect("scripts/podman-setup runs");
    match out.status.code() {
        Some(0) => Some(String::from_utf8_lossy(&out.stdout).trim().to_string()),
        Some(SKIP) => {
            skip(String::from_utf8_lossy(&out.stderr));
            None
        }
        _ => panic!("scripts/podman-setup failed: {}", text(&out)),
    }
}

#[test]
fn a_container_benchmark_runs_a_campaign_and_its_memory_limit_is_enforced() {
    let Some(image) = podman_image() else { return };
    let dir = tempfile::tempdir().unwrap();
    let bench = dir.path().join("bench-programs/grow");
    std::fs::create_dir_all(&bench).unwrap();
    // Touches MiB megabytes; static, as the image has no C library.
    std::fs::write(
        bench.join("grow.c"),
        "#include <stdlib.h>\n#include <string.h>\nint main(int c,char**v){int n=atoi(v[1]);\
         for(int i=0;i<n;i+=8){char*p=malloc(8<<20);if(!p)return 2;memset(p,1,8<<20);}return 0;}\n",
    )
    .unwrap();
    let config = format!(
        r#"(campaign
  (name edge)
  (store "store")
  (objective (metric wall-time) (statistic median))
  (runs (warmup 0) (min 1) (max 1))
  (experiments ((benchmark grow) (search (random-walk (steps 4))) (seed 3)))
  (benchmarks
    ((name grow) (kind knobs)
     (knobs (mib 16 24 512))
     (sources "bench-programs/grow")
     (build ("cc" "-static" "-O1" "grow.c" "-o" "grow"))
     (run ("./grow" "{{mib}}"))
     (check-output none)
     (timeout-s 60)
     (container (engine podman) (image "{image}") (cpus 0.5) (memory "64m"))))
  (workers (local (slots 1))))
"#
    );
    std::fs::write(dir.path().join("campaign.sexp"), config).unwrap();
    let out = run_kiln(dir.path(), &["run", "campaign.sexp"]);
    assert!(out.status.success(), "{}", text(&out));
    let store = Store::open(&dir.path().join("store")).unwrap();
    let steps: Vec<_> = store.steps(None).map(Result::unwrap).collect();
    assert_eq!(steps.len(), 4, "every step stored once");
    let outcomes: BTreeSet<&str> = steps
        .iter()
        .map(|s| s.result.measurement.outcome.name())
        .collect();
    assert!(
        outcomes.contains("ok"),
        "16 and 24 MiB fit in 64 MiB: {outcomes:?}"
    );
    let oom = steps
        .iter()
        .find_map(|s| match &s.result.measurement.outcome {
            StepOutcome::RunFailed {
                signal_name,
                stderr_tail,
                ..
            } => Some((signal_name.clone(), stderr_tail.clone())),
            _ => None,
        })
        .expect("a step of 512 MiB in a 64 MiB container fails");
    assert_eq!(oom.0.as_deref(), Some("SIGKILL"));
    assert!(
        oom.1.contains("OOM killer") && oom.1.contains("(memory 67108864)"),
        "{}",
        oom.1
    );
}
