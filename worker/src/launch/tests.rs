use super::*;
use kiln_protocol::metric::{Metric, MetricValue};
use std::time::Instant;

#[test]
fn signal_names() {
    assert_eq!(signal_name(libc::SIGSEGV), "SIGSEGV");
    assert_eq!(signal_name(libc::SIGKILL), "SIGKILL");
    assert_eq!(signal_name(40), "SIG40");
}

fn launch(script: &str, output: Output) -> Launch {
    Launch {
        argv: vec!["sh".into(), "-c".into(), script.into()],
        cwd: std::env::temp_dir(),
        env: clean_env(&std::env::temp_dir(), &[]),
        cpus: Vec::new(),
        output,
        timeout: Duration::from_secs(30),
        sample_every: None,
        cgroups: Vec::new(),
        memory_limit: None,
        stderr_watch: &[],
    }
}

/// A launch waits for a file being written to be closed: its child would otherwise hold
/// the file open for writing until it execs, and a run of that file then fails (ETXTBSY).
#[test]
fn no_launch_starts_while_a_file_is_being_written() {
    let (opened, wait) = std::sync::mpsc::channel();
    let writer = std::thread::spawn(move || {
        writing(|| {
            opened.send(()).unwrap();
            std::thread::sleep(Duration::from_millis(300));
            Instant::now()
        })
    });
    wait.recv().unwrap();
    let finished = run(&launch("true", Output::Discard), None, None).unwrap();
    let returned = Instant::now();
    assert_eq!(finished.end, End::Exited(0));
    let closed = writer.join().unwrap();
    assert!(returned >= closed, "the launch ran while the file was open");
}

#[test]
fn output_beyond_a_pipe_buffer_streams_while_the_command_runs() {
    // 1 MiB on each stream: the command finishes only if both pipes are
    // read while it runs (our copies of their write ends stay open).
    let script =
        "head -c 1048576 /dev/zero; head -c 1048575 /dev/zero | tr '\\0' x >&2; echo end >&2";
    let f = run(
        &launch(script, Output::HashStdout(LineFilter::All)),
        None,
        None,
    )
    .unwrap();
    assert_eq!(f.end, End::Exited(0));
    let zeros = vec![0u8; 1 << 20];
    assert_eq!(
        f.stdout_digest,
        Some(ContentHash(*blake3::hash(&zeros).as_bytes()))
    );
    assert_eq!(f.stderr_tail.len(), TAIL_BYTES);
    assert!(
        f.stderr_tail.ends_with("xxxxend\n"),
        "{:?}",
        &f.stderr_tail[TAIL_BYTES - 16..]
    );
}

#[test]
fn watched_strings_are_found_anywhere_in_stderr_not_only_in_its_tail() {
    // The line comes first, then four tails' worth of other output pushes it out of the tail.
    let script = "echo 'W: CUPTI initialization failed - x' >&2; \
                  head -c 32768 /dev/zero | tr '\\0' y >&2; echo printed";
    let mut l = launch(script, Output::HashStdout(LineFilter::All));
    l.stderr_watch = &["CUPTI initialization failed", "printed", "not printed"];
    let f = run(&l, None, None).unwrap();
    assert_eq!(f.end, End::Exited(0));
    assert!(!f.stderr_tail.contains("CUPTI"));
    // stdout is not watched.
    assert_eq!(f.stderr_seen, vec!["CUPTI initialization failed"]);
}

#[test]
fn a_leader_that_exits_before_its_children_ends_the_launch() {
    // The background sleeper keeps the pipes open; the leader's exit
    // ends the launch all the same, its group killed, its output whole,
    // and without waiting out the grace given to escaped holders of a pipe.
    let started = Instant::now();
    let script = "sleep 30 & echo kept; echo said >&2";
    let f = run(
        &launch(script, Output::KeepMerged { cap: 1024 }),
        None,
        None,
    )
    .unwrap();
    assert_eq!(f.end, End::Exited(0));
    assert_eq!(String::from_utf8_lossy(&f.kept), "kept\nsaid\n");
    assert!(started.elapsed() < REAP_GRACE, "{:?}", started.elapsed());
}

/// Whether process `pid` is alive (not gone, not a zombie).
fn alive(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .is_ok_and(|s| !s[s.rfind(')').unwrap() + 1..].trim_start().starts_with('Z'))
}

/// The pids written, one per line, to `file`.
fn pids_in(file: &Path) -> Vec<i32> {
    std::fs::read_to_string(file)
        .unwrap_or_default()
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect()
}

#[test]
fn a_daemon_that_leaves_the_group_ends_with_the_launch() {
    // Double forks into a new session (`setsid`), as daemons start: out of the launch's
    // process group, and alive after its leader has exited. Each notes its pid.
    let pids = std::env::temp_dir().join(format!("kiln-escapees-{}", std::process::id()));
    let _ = std::fs::remove_file(&pids);
    let daemon = format!("setsid sh -c 'echo $$ >> {}; sleep 300; :'", pids.display());
    let script = format!(
        "({daemon} &) ; ({daemon} </dev/null >/dev/null 2>&1 &) ; \
         while [ \"$(wc -l < {} 2>/dev/null)\" != 2 ]; do sleep 0.01; done",
        pids.display()
    );
    let f = run(&launch(&script, Output::Discard), None, None).unwrap();
    assert_eq!(f.end, End::Exited(0));
    let daemons = pids_in(&pids);
    let _ = std::fs::remove_file(&pids);
    assert_eq!(daemons.len(), 2);
    assert!(
        !daemons.iter().any(|&p| alive(p)),
        "{daemons:?} outlived the launch"
    );
}

#[test]
fn a_daemon_of_a_launch_that_still_runs_is_left_alone() {
    // Two launches side by side (two slots): the end of the first must not end a
    // daemon that the second one started and still needs.
    let started = std::env::temp_dir().join(format!("kiln-needed-{}", std::process::id()));
    let _ = std::fs::remove_file(&started);
    let script = format!(
        "(setsid sh -c 'echo $$ > {0}.tmp; mv {0}.tmp {0}; sleep 300; :' &) ; \
         while [ ! -e {0} ]; do sleep 0.01; done; sleep 1; kill -0 $(cat {0})",
        started.display()
    );
    let second = std::thread::spawn(move || run(&launch(&script, Output::Discard), None, None));
    while !started.exists() {
        std::thread::sleep(Duration::from_millis(10));
    }
    let first = run(&launch("true", Output::Discard), None, None).unwrap();
    assert_eq!(first.end, End::Exited(0));
    let second = second.join().unwrap().unwrap();
    assert_eq!(second.end, End::Exited(0), "the daemon was ended too early");
    let daemon = pids_in(&started);
    let _ = std::fs::remove_file(&started);
    assert!(!alive(daemon[0]), "the daemon outlived its launch");
}

fn task_clock_ms(f: &Finished) -> f64 {
    match f.counters.get(&Metric::TaskClock) {
        Some(MetricValue::Measured(ns)) => ns / 1e6,
        other => panic!("task-clock: {other:?}"),
    }
}

#[test]
fn each_counted_run_gets_its_own_counts() {
    let mut counters = Inherited::open();
    let busy = launch(
        "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done",
        Output::Discard,
    );
    let busy = run(&busy, Some(&mut counters), None).unwrap();
    let idle = run(&launch("true", Output::Discard), Some(&mut counters), None).unwrap();
    // The first run's shell counted its own loop; the second, only itself.
    assert!(task_clock_ms(&busy) > 20.0, "{}", task_clock_ms(&busy));
    assert!(task_clock_ms(&idle) < 10.0, "{}", task_clock_ms(&idle));
}

#[test]
fn a_process_left_over_from_a_run_is_not_counted_in_the_next() {
    // The first run leaves a busy process that escaped its group (setsid):
    // it still holds copies of the counters, but the next run must not
    // see its CPU time.
    let dir = std::env::temp_dir().join(format!("kiln-escapee-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pidfile = dir.join("pid");
    let mut counters = Inherited::open();
    let escape = format!(
        "setsid sh -c 'echo $$ > {}; while :; do :; done' & sleep 0.1",
        pidfile.display()
    );
    run(&launch(&escape, Output::Discard), Some(&mut counters), None).unwrap();
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let next = run(
        &launch("sleep 0.3", Output::Discard),
        Some(&mut counters),
        None,
    );
    // SAFETY: kills and reaps the escapee (our child: we are its subreaper).
    unsafe {
        libc::kill(pid, libc::SIGKILL);
        libc::waitpid(pid, std::ptr::null_mut(), 0);
    }
    std::fs::remove_dir_all(&dir).unwrap();
    let next = next.unwrap();
    assert!(task_clock_ms(&next) < 50.0, "{}", task_clock_ms(&next));
}

#[test]
fn env_is_clean_and_overridable() {
    let env = clean_env(
        Path::new("/slot"),
        &[("PATH".into(), "/opt/bin".into()), ("X".into(), "1".into())],
    );
    assert!(env.contains(&("PATH".into(), "/opt/bin".into())));
    assert!(env.contains(&("HOME".into(), "/slot".into())));
    assert!(env.contains(&("LANG".into(), "C".into())));
    assert_eq!(env.iter().filter(|(k, _)| k == "PATH").count(), 1);
}
