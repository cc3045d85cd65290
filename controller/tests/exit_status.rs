//! README.md's "Exit status" table, row by row: each thing a row names ends the real `kiln`
//! binary with that row's status, and stderr names the file, field, flag or folder at fault.
//! The tests here are the ones no other module had; the table names, for every claim, the test
//! that checks it, here (`exit_status::`) or where it was already.
//!
//! | row | claim | test |
//! |----:|-------|------|
//! | 0 | the reader of kiln's output went away (`kiln export … \| head`) | `datasets::a_reader_that_closes_the_pipe_early_is_no_error` (a table larger than a pipe); `every_command_s_reader_may_go_away_early` (every printing command, completions included) |
//! | 1 | a worker that failed | `trust::a_worker_that_speaks_garbage_stops_a_campaign_with_no_other` |
//! | 1 | a build that failed | `a_failed_candidate_in_benchmark_exits_1` (its build, then its run) |
//! | 1 | a store that failed | `a_damaged_store_exits_1_naming_it` |
//! | 1 | an experiment that could not be prepared (the others run first) | `corpus::a_broken_program_stops_its_own_experiment_and_programs_can_be_added`; a chain stopped on failures: `outputs::a_benchmark_s_control_characters_are_shown_escaped_and_stored_raw` |
//! | 1 | a store that may not be read (path and permission named) | `trust::a_store_the_user_may_not_read_says_so` (as root, through `runuser -u nobody`); `an_unreadable_store_exits_1_naming_path_and_permission` (as anyone else) |
//! | 1 | a store another controller holds | `a_store_another_process_holds_exits_1_naming_it` (run, benchmark, rewards, store verify); `campaign::a_store_in_use_is_refused_naming_the_path_and_holder` (the holder's pid) |
//! | 1 | … `--force-new` included | `a_store_another_process_holds_exits_1_naming_it`; `trust::force_new_on_a_live_store_is_refused_and_the_campaign_finishes` |
//! | 1 | problems found by `store verify` | `datasets::bad_input_exits_2_and_a_failure_1`; `store_verify::a_hole_and_a_damaged_step_are_reported` |
//! | 1 | a failed candidate in `benchmark` | `a_failed_candidate_in_benchmark_exits_1` |
//! | 1 | a benchmark `policy` could not measure, its policy's decision file included | `policy::kiln_policy_measures_stock_nothing_and_a_failing_policy_per_benchmark` |
//! | 1 | a worker that is not ok in `workers` | `a_worker_that_is_not_ok_in_workers_exits_1` |
//! | 1 | a campaign no worker can run | `trust::a_worker_that_speaks_garbage_stops_a_campaign_with_no_other`; `campaign::run_limits_no_worker_can_apply_stop_the_campaign_naming_why` |
//! | 2 | an unknown flag (or a flag's bad value) | `unknown_flags_and_bad_values_exit_2_naming_them` |
//! | 2 | a config that does not parse (file, line, column) | `a_config_that_does_not_parse_exits_2_in_every_command_naming_file_line_column`; `datasets::bad_input_exits_2_and_a_failure_1`; `inputs::` (a config that is no regular file, or too large) |
//! | 2 | a decision file that does not parse (file, line, column) | `a_decision_file_that_does_not_parse_exits_2_naming_file_line_column`; `inputs::files_that_are_not_regular_are_refused_at_once_naming_them` |
//! | 2 | a name the config lacks | `a_name_the_config_lacks_exits_2_naming_it` (sites, benchmark, policy, rewards: benchmarks and workers); `inline::sites_lists_the_decision_points_and_writes_the_stock_decisions` (sites, a clang benchmark) |
//! | 2 | a name the store lacks (`kiln export --experiment`) | `outputs::a_failed_export_leaves_an_existing_file_as_it_was` (export); `campaign::failed_candidates_are_recorded_and_the_chain_carries_on` (show); `a_name_the_config_lacks_exits_2_naming_it` (rewards) |
//! | 2 | a folder that holds no store | `a_path_that_holds_no_store_exits_2_in_every_command_naming_it` (status, show, export, report, rewards, store verify, serve; run, benchmark and policy given a file); `serve::the_live_view_waits_for_a_store_no_campaign_has_made_yet`; `store_verify::verify_refuses_a_path_without_a_store_and_creates_nothing` |
//! | 2 | a binary export to a terminal | `a_binary_export_to_a_terminal_exits_2`; `exports::every_table_of_a_real_campaign_loads_typed_in_every_format` (refused there, a pipe taken) |
//! | 2 | sources kiln cannot send: a name that is not UTF-8 | `trust::a_source_file_name_that_is_not_utf8_is_bad_input` |
//! | 2 | … no files, more than 48 MiB (`kiln run` runs the others, then exits 2) | `sources_kiln_cannot_send_exit_2_after_the_other_experiments` |
//! | 130 | SIGINT | `campaign::sigint_during_a_step_exits_130_records_the_abandoned_step_and_resumes`; `campaign::a_signal_stops_kiln_policy_not_only_its_benchmark`; `serve::a_signal_stops_the_server_and_removes_its_plots` |
//! | 143 | SIGTERM | `campaign::sigterm_during_a_step_leaves_no_process_and_the_campaign_resumes`; `campaign::sigterm_during_discovery_leaves_no_process_behind`; `serve::a_signal_stops_the_server_and_removes_its_plots` |
//! | 129 | SIGHUP | `sighup_during_a_step_exits_129_and_the_campaign_resumes` |

use std::path::Path;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::*;

/// Asserts that `out` ended with `status` and that its stderr holds every one of `named`.
#[track_caller]
fn ends(out: &Output, status: i32, named: &[&str]) {
    assert_eq!(out.status.code(), Some(status), "{}", text(out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    for name in named {
        assert!(
            stderr.contains(name),
            "stderr lacks {name:?}:\n{}",
            text(out)
        );
    }
}

/// A knob campaign in `dir` (`campaign.sexp`, store `store`): benchmark `knob` over `k` in
/// 0..=3, its sources in `src` running `run.sh`, with `build` as its build command.
fn knob_campaign(dir: &Path, build: &str, run_sh: &str, steps: u32) {
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(dir.join("src/run.sh"), run_sh).unwrap();
    std::fs::write(
        dir.join("campaign.sexp"),
        format!(
            r#"(campaign
  (name knobs)
  (store "store")
  (objective (metric wall-time) (statistic median))
  (runs (warmup 0) (min 1) (max 1))
  (experiments ((name a) (benchmark knob) (search (random-walk (steps {steps}))) (seed 3)))
  (benchmarks
    ((name knob) (kind knobs) (knobs (k 0 1 2 3)) (sources "src")
     (build {build}) (run ("sh" "run.sh" "{{k}}")) (check-output none) (timeout-s 10)))
  (workers (local (slots 1))))
"#
        ),
    )
    .unwrap();
}

/// A config of one llvm-inline benchmark over `sources`, for `kiln policy`: nothing of it is
/// built before the checks these tests make.
fn inline_config(dir: &Path, sources: &str) {
    std::fs::write(
        dir.join("inline.sexp"),
        format!(
            r#"(campaign (name p) (store "pstore")
  (experiments ((benchmark one) (search (random-walk (steps 2)))))
  (benchmarks ((name one) (kind llvm-inline) (compiler clang) (sources "{sources}")
               (build ("sh" "build.sh")) (run ("./bench"))))
  (workers (local (slots 1))))
"#
        ),
    )
    .unwrap();
}

/// Writes a decision file for benchmark `noop` of [`noop_config`] into `dir`.
fn decisions(dir: &Path, name: &str, values: &str) {
    std::fs::write(
        dir.join(name),
        format!("(decisions (benchmark noop)\n (values {values}))\n"),
    )
    .unwrap();
}

// ---- 0 ----

/// Every command that prints, its reader gone before it writes (`kiln … | true`): exit 0,
/// and no error said. (`kiln completions` used to panic, exit 101.)
#[test]
fn every_command_s_reader_may_go_away_early() {
    let dir = noop_campaign();
    let commands: &[&[&str]] = &[
        &["status", "store"],
        &["status", "store", "--json"],
        &["show", "store", "a/0/1"],
        &["show", "store", "a/0/1", "--json"],
        &["store", "verify", "store"],
        &["check", "campaign.sexp"],
        &["check", "campaign.sexp", "--json"],
        &["sites", "campaign.sexp", "noop"],
        &["export", "store", "--table", "steps"],
        &["export", "store", "--table", "steps", "--format", "jsonl"],
        &["export", "store", "--table", "steps", "--format", "parquet"],
        &["export", "--schema"],
        &["man"],
        &["completions", "bash"],
        &["--help"],
    ];
    for args in commands {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = kiln_cmd(dir.path())
            .args(*args)
            .stdout(writer)
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let said = text(&out);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {said}");
        assert!(
            !said.contains("error") && !said.contains("panicked"),
            "{args:?}: {said}"
        );
    }
}

// ---- 1 ----

#[test]
fn a_failed_candidate_in_benchmark_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path();
    // Stock (k = 0) builds and runs; k = 1 fails to build, k = 2 builds and fails to run.
    knob_campaign(
        path,
        r#"("sh" "build.sh" "{k}")"#,
        "[ \"$1\" = 2 ] && { echo \"no kernel for k=$1\" >&2; exit 3; }\nexit 0\n",
        2,
    );
    std::fs::write(
        path.join("src/build.sh"),
        "[ \"$1\" = 1 ] && { echo \"cannot build k=$1\" >&2; exit 4; }\nexit 0\n",
    )
    .unwrap();
    for (k, why) in [(1, "build failed"), (2, "run failed (exit 3)")] {
        let file = format!("k{k}.sexp");
        std::fs::write(
            path.join(&file),
            format!("(decisions (benchmark knob) (values (k {k})))\n"),
        )
        .unwrap();
        let out = run_kiln(path, &["benchmark", "campaign.sexp", "knob", &file]);
        ends(&out, 1, &[]);
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(
            said.contains(&format!("candidate failed: {why}")),
            "{}",
            text(&out)
        );
    }
}

/// A store whose database is damaged where it is read: the commands that read the database
/// fail, naming the store.
#[test]
fn a_damaged_store_exits_1_naming_it() {
    let dir = noop_campaign();
    let db = dir.path().join("store/db/db");
    let mut bytes = std::fs::read(&db).unwrap();
    bytes[100..107].copy_from_slice(b"garbage");
    std::fs::write(&db, bytes).unwrap();
    for args in [
        &["export", "store", "--table", "steps"][..],
        &["store", "verify", "store"],
    ] {
        let out = run_kiln_when_free(dir.path(), args);
        ends(&out, 1, &["cannot open store store"]);
    }
}

/// `trust::a_store_the_user_may_not_read_says_so` checks this as root, through another user;
/// this, for a user whom permissions bind.
#[test]
fn an_unreadable_store_exits_1_naming_path_and_permission() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        return skip("root reads every file (trust::a_store_the_user_may_not_read_says_so runs kiln as nobody)");
    }
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    std::fs::create_dir_all(store.join("db")).unwrap();
    std::fs::write(store.join("db/db"), "x").unwrap();
    std::fs::set_permissions(&store, std::fs::Permissions::from_mode(0o000)).unwrap();
    let out = run_kiln(dir.path(), &["status", "store"]);
    std::fs::set_permissions(&store, std::fs::Permissions::from_mode(0o755)).unwrap();
    ends(&out, 1, &["store", "Permission denied"]);
    assert!(!text(&out).contains("not a kiln store"), "{}", text(&out));
}

/// A store whose database another process holds (as `flock` does here, as a running
/// controller would): every command that writes it, or must lock it, refuses with exit 1.
#[test]
fn a_store_another_process_holds_exits_1_naming_it() {
    if !have("flock") {
        return skip("no flock (util-linux) to hold the store with");
    }
    let dir = noop_campaign();
    decisions(dir.path(), "one.sexp", "(k 1)");
    let mut holder = std::process::Command::new("flock")
        .args(["-x", "store/db/db", "sleep", "60"])
        .current_dir(dir.path())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::process::Command::new("flock")
        .args(["-n", "store/db/db", "true"])
        .current_dir(dir.path())
        .status()
        .unwrap()
        .success()
    {
        assert!(Instant::now() < deadline, "flock did not take the store");
        std::thread::sleep(Duration::from_millis(20));
    }
    let commands: &[&[&str]] = &[
        &["run", "campaign.sexp"],
        &["run", "campaign.sexp", "--force-new"],
        &[
            "benchmark",
            "campaign.sexp",
            "noop",
            "one.sexp",
            "--store",
            "store",
        ],
        &["rewards", "store", "--no-verify"],
        &["store", "verify", "store"],
    ];
    let outs: Vec<Output> = commands
        .iter()
        .map(|args| run_kiln(dir.path(), args))
        .collect();
    holder.kill().unwrap();
    holder.wait().unwrap();
    for out in &outs {
        ends(out, 1, &["store", "is in use by another controller"]);
    }
    // --force-new moved nothing aside.
    let aside = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| {
            let name = e.as_ref().unwrap().file_name();
            name.to_string_lossy().contains(".old-")
        })
        .count();
    assert_eq!(aside, 0);
}

#[test]
fn a_worker_that_is_not_ok_in_workers_exits_1() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("campaign.sexp"), noop_config(false)).unwrap();
    let fake = dir.path().join("fake-worker");
    std::fs::write(&fake, "#!/bin/sh\nexit 1\n").unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let out = kiln_cmd(dir.path())
        .env("KILN_WORKER", &fake)
        .args(["workers", "campaign.sexp"])
        .output()
        .unwrap();
    ends(&out, 1, &[]);
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("unreachable"), "{}", text(&out));
}

// ---- 2 ----

#[test]
fn unknown_flags_and_bad_values_exit_2_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["--nosuch"], "--nosuch"),
        (&["status", "--nosuch", "store"], "--nosuch"),
        (
            &["export", "store", "--table", "steps", "--wider"],
            "--wider",
        ),
        (&["nosuch"], "nosuch"),
        (&["status"], "<STORE>"),
        (
            &["run", "campaign.sexp", "--progress-every", "0"],
            "--progress-every",
        ),
        (&["serve", "store", "--port", "http"], "--port"),
        (&["export", "store", "--table", "nosuch"], "nosuch"),
        (&["export", "store", "--all"], "--output"),
        // A policy is a built-in's name or a command after `--`, never a word run as a program.
        (
            &["policy", "campaign.sexp", "./decide.py", "--store", "s"],
            "`stock`, `nothing` or `-- COMMAND ARGS...`",
        ),
        (
            &["policy", "campaign.sexp", "--store", "s"],
            "stock|nothing",
        ),
        (
            &["policy", "campaign.sexp", "stock", "--", "./decide.py"],
            "--",
        ),
    ];
    for (args, named) in cases {
        let out = run_kiln(dir.path(), args);
        ends(&out, 2, &[named]);
    }
}

#[test]
fn a_config_that_does_not_parse_exits_2_in_every_command_naming_file_line_column() {
    let dir = noop_campaign();
    let path = dir.path();
    std::fs::write(path.join("bad.sexp"), "(campaign (name x)\n  (nope 1))\n").unwrap();
    decisions(path, "one.sexp", "(k 1)");
    let commands: &[&[&str]] = &[
        &["check", "bad.sexp"],
        &["run", "bad.sexp"],
        &["sites", "bad.sexp", "noop"],
        &["workers", "bad.sexp"],
        &["benchmark", "bad.sexp", "noop", "one.sexp"],
        &["policy", "bad.sexp", "stock"],
        // Read whether or not a proposal needs measuring (it was read only to measure one).
        &["rewards", "store", "--config", "bad.sexp"],
        &["rewards", "store", "--config", "bad.sexp", "--no-verify"],
    ];
    for args in commands {
        let out = run_kiln(path, args);
        ends(&out, 2, &["bad.sexp:2:3: unknown field 'nope'"]);
    }
}

#[test]
fn a_decision_file_that_does_not_parse_exits_2_naming_file_line_column() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path();
    std::fs::create_dir_all(path.join("noop")).unwrap();
    std::fs::write(path.join("noop/README"), "nothing to build\n").unwrap();
    std::fs::write(path.join("campaign.sexp"), noop_config(false)).unwrap();
    std::fs::write(
        path.join("unclosed.sexp"),
        "(decisions (benchmark noop)\n (values (k 1)\n",
    )
    .unwrap();
    decisions(path, "unknown.sexp", "(zz 1)");
    decisions(path, "outside.sexp", "(k 9)");
    let said = [
        ("unclosed.sexp", "unclosed.sexp:2:2: unbalanced parenthesis"),
        (
            "unknown.sexp",
            "unknown.sexp:2:10: unknown decision point 'zz'",
        ),
        (
            "outside.sexp",
            "outside.sexp:2:10: value '9' is outside the domain of 'k'",
        ),
    ];
    for (file, named) in said {
        let out = run_kiln(path, &["benchmark", "campaign.sexp", "noop", file]);
        ends(&out, 2, &[named]);
        // An experiment's baseline decision file, read as it is prepared.
        let config = noop_config(false)
            .replace("(seed 3))", &format!("(seed 3) (baseline \"{file}\"))"))
            .replace("(store \"store\")", &format!("(store \"store-{file}\")"));
        assert!(config.contains("(baseline"));
        std::fs::write(path.join("baseline.sexp"), config).unwrap();
        let out = run_kiln(path, &["run", "baseline.sexp"]);
        ends(&out, 2, &[named]);
    }
}

#[test]
fn a_name_the_config_lacks_exits_2_naming_it() {
    let dir = noop_campaign();
    let path = dir.path();
    decisions(path, "one.sexp", "(k 1)");
    inline_config(path, "noop");
    let cases: &[(&[&str], &str)] = &[
        (
            &["sites", "campaign.sexp", "nope"],
            "no benchmark named 'nope'",
        ),
        (
            &["benchmark", "campaign.sexp", "nope", "one.sexp"],
            "no benchmark named 'nope'",
        ),
        (
            &[
                "benchmark",
                "campaign.sexp",
                "noop",
                "one.sexp",
                "--worker",
                "nope",
            ],
            "no worker named 'nope'",
        ),
        (
            &["policy", "--benchmark", "nope", "inline.sexp", "stock"],
            "no benchmark named 'nope'",
        ),
        (
            &["policy", "--worker", "nope", "inline.sexp", "stock"],
            "no worker named 'nope'",
        ),
        // Whether or not a proposal needs measuring, against the config the store keeps.
        (
            &["rewards", "store", "--worker", "nope"],
            "no worker named 'nope'",
        ),
        (
            &[
                "rewards",
                "store",
                "--worker",
                "nope",
                "--config",
                "campaign.sexp",
            ],
            "no worker named 'nope'",
        ),
        // A name the store lacks.
        (
            &[
                "rewards",
                "store",
                "--experiment",
                "nonsense",
                "--no-verify",
            ],
            "holds no experiment named 'nonsense'",
        ),
    ];
    for (args, named) in cases {
        let out = run_kiln(path, args);
        ends(&out, 2, &[named]);
    }
    // Refused before the policy's store was made.
    assert!(!path.join("pstore").exists());
}

/// A path that is no store: nowhere, an empty folder, a folder of other files, a file. Every
/// command that reads a store refuses it naming it; one that makes a store refuses a file.
#[test]
fn a_path_that_holds_no_store_exits_2_in_every_command_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path();
    std::fs::create_dir_all(path.join("empty")).unwrap();
    std::fs::create_dir_all(path.join("other/noop")).unwrap();
    std::fs::write(path.join("other/noop/README"), "nothing to build\n").unwrap();
    std::fs::write(path.join("afile"), "not a store\n").unwrap();
    for store in ["nowhere", "empty", "other", "afile"] {
        let commands: &[&[&str]] = &[
            &["status", store],
            &["show", store, "a/0/1"],
            &["export", store, "--table", "steps"],
            &["report", store],
            &["rewards", store],
            &["store", "verify", store],
        ];
        let said = match store {
            "afile" => "afile is a file, not a kiln store (a folder)".to_string(),
            _ => format!("{store} is not a kiln store"),
        };
        for args in commands {
            let out = run_kiln(path, args);
            ends(&out, 2, &[&said]);
        }
    }
    // The live view waits for a store no campaign has made yet (nowhere, an empty folder); it
    // words the others as every command does.
    for (store, said) in [
        ("other", "other is not a kiln store"),
        ("afile", "afile is a file, not a kiln store (a folder)"),
    ] {
        let out = run_kiln(path, &["serve", store, "--port", "0"]);
        ends(&out, 2, &[said]);
    }
    // Commands that make a store where there is none: a file is in the way.
    std::fs::write(
        path.join("other/campaign.sexp"),
        noop_config(false).replace("(store \"store\")", "(store \"../afile\")"),
    )
    .unwrap();
    decisions(&path.join("other"), "one.sexp", "(k 1)");
    inline_config(path, "other");
    let commands: &[(&Path, &[&str])] = &[
        (&path.join("other"), &["run", "campaign.sexp"]),
        (
            &path.join("other"),
            &[
                "benchmark",
                "campaign.sexp",
                "noop",
                "one.sexp",
                "--store",
                "../afile",
            ],
        ),
        (
            path,
            &["policy", "--store", "afile", "inline.sexp", "stock"][..],
        ),
    ];
    for (cwd, args) in commands {
        let out = run_kiln(cwd, args);
        ends(&out, 2, &["afile is a file, not a kiln store (a folder)"]);
    }
    // `kiln check` refuses it as `kiln run` does, at the config's line.
    let out = run_kiln(&path.join("other"), &["check", "campaign.sexp"]);
    ends(
        &out,
        2,
        &[
            "campaign.sexp:",
            "(store ...): ",
            "afile is a file, not a kiln store",
        ],
    );
    assert_eq!(
        std::fs::read_to_string(path.join("afile")).unwrap(),
        "not a store\n"
    );
}

#[test]
fn a_binary_export_to_a_terminal_exits_2() {
    if !have("script") {
        return skip("no script (util-linux) to give kiln a terminal");
    }
    let dir = noop_campaign();
    let line = format!(
        "'{}' export store --table steps --format parquet",
        kiln().display()
    );
    // `script -e` exits with its command's status.
    let out = std::process::Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(
        said.contains("parquet is binary and standard output is a terminal"),
        "{said}"
    );
    assert!(!said.contains("PAR1"), "{said}");
}

/// Sources with no files, or more than 48 MiB of them: `kiln run` stops that experiment, runs
/// the other to its end and exits 2; `benchmark` and `policy` exit 2. Each names the folder.
#[test]
fn sources_kiln_cannot_send_exit_2_after_the_other_experiments() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path();
    std::fs::create_dir_all(path.join("noop")).unwrap();
    std::fs::write(path.join("noop/README"), "nothing to build\n").unwrap();
    std::fs::create_dir_all(path.join("empty")).unwrap();
    std::fs::create_dir_all(path.join("huge")).unwrap();
    // Sparse: its size alone refuses it, before a byte is read.
    std::fs::File::create(path.join("huge/data"))
        .unwrap()
        .set_len(49 << 20)
        .unwrap();
    // For the twin benchmark below: a file for another benchmark is refused before its sources.
    std::fs::write(
        path.join("one.sexp"),
        "(decisions (benchmark twin)\n (values (k 1)))\n",
    )
    .unwrap();
    for (sources, why) in [
        ("empty", "benchmark sources empty hold no files"),
        (
            "huge",
            "cannot pack benchmark sources huge: more than 48 MiB of files",
        ),
    ] {
        // Experiment b's benchmark is noop's twin over these sources.
        let twin = format!(
            "((name twin) (kind knobs) (knobs (k 0 1 2 3)) (sources \"{sources}\")\n     \
             (build ()) (run (\"true\")) (check-output none) (timeout-s 10))"
        );
        let config = noop_config(true)
            .replace("(name b) (benchmark noop)", "(name b) (benchmark twin)")
            .replace(
                "(timeout-s 10)))\n  (workers",
                &format!("(timeout-s 10))\n    {twin})\n  (workers"),
            )
            .replace("(store \"store\")", &format!("(store \"store-{sources}\")"));
        assert!(config.contains("(name twin)"), "{config}");
        std::fs::write(path.join("campaign.sexp"), &config).unwrap();
        let out = run_kiln(path, &["run", "campaign.sexp"]);
        ends(&out, 2, &["experiment b stopped", why]);
        let status = run_kiln_when_free(path, &["status", &format!("store-{sources}")]);
        let shown = text(&status);
        assert!(status.status.success(), "{shown}");
        assert!(
            shown.contains("24/24"),
            "experiment a ran to its end: {shown}"
        );

        let out = run_kiln(path, &["benchmark", "campaign.sexp", "twin", "one.sexp"]);
        ends(&out, 2, &[why]);
        inline_config(path, sources);
        let out = run_kiln(path, &["policy", "inline.sexp", "stock"]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(
            String::from_utf8_lossy(&out.stdout).contains(why),
            "{}",
            text(&out)
        );
    }
}

// ---- 129 ----

/// SIGHUP during a step, as when the terminal goes: exit 129, kiln.log says why, and the same
/// command resumes to the end. (SIGINT and SIGTERM: see the table above.)
#[test]
fn sighup_during_a_step_exits_129_and_the_campaign_resumes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path();
    let (runs, hang, hanging) = (path.join("runs"), path.join("hang"), path.join("hanging"));
    knob_campaign(
        path,
        "()",
        &format!(
            "echo \"$1\" >> '{runs}'\n\
             if [ -e '{hang}' ]; then touch '{hanging}'; while [ -e '{hang}' ]; do sleep 0.05; done; fi\n",
            runs = runs.display(),
            hang = hang.display(),
            hanging = hanging.display()
        ),
        12,
    );
    let mut child = kiln_cmd(path)
        .args(["run", "campaign.sexp"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let wait_for = |what: &str, done: &dyn Fn() -> bool| {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !done() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    // The baseline's three runs and two steps', then a run that hangs.
    wait_for("five runs", &|| {
        std::fs::read_to_string(&runs).is_ok_and(|r| r.lines().count() >= 5)
    });
    std::fs::write(&hang, "").unwrap();
    wait_for("a hanging run", &|| hanging.exists());
    // SAFETY: signals our own child, not yet reaped.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGHUP) };
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "kiln did not stop on SIGHUP");
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(129), "{}", text(&out));
    let log = std::fs::read_to_string(path.join("store/kiln.log")).unwrap();
    assert!(
        log.contains("hung up (SIGHUP); the campaign is stored in"),
        "{log}"
    );
    std::fs::remove_file(&hang).unwrap();
    let out = run_kiln_when_free(path, &["run", "campaign.sexp"]);
    assert!(out.status.success(), "{}", text(&out));
    let status = run_kiln_when_free(path, &["status", "store"]);
    assert!(text(&status).contains("12/12"), "{}", text(&status));
}

// ---- the README's command table, as written ----

/// Every usage line of the README's command table, typed as written in a folder where each
/// should work (a finished campaign over a knob benchmark and a small C program): every
/// alternative of an `a|b` once, the optional `[...]` parts in and out. Each ends with status 0
/// (`serve` is still serving after a few seconds), so the table cannot drift from the parser.
#[test]
fn every_usage_line_of_the_readme_works_as_written() {
    if !have("clang") {
        return skip("clang is not installed (the policy lines need an llvm-inline benchmark)");
    }
    let dir = usage_campaign();
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let lines = readme_usage_lines(&readme);
    assert!(
        lines.len() >= 15,
        "the command table was not found: {lines:?}"
    );
    for line in &lines {
        for argv in usage_variants(line) {
            let (out, serving) = run_typed(dir.path(), &argv);
            let serves = argv[1] == "serve" && argv[0] == "kiln";
            assert!(
                if serves {
                    serving
                } else {
                    out.status.success()
                },
                "README line `{line}` typed as {argv:?} did not work:\n{}",
                text(&out)
            );
        }
    }
}

/// A folder in which a campaign has run to its end (`campaign.sexp`, store `store`): walks over
/// the knob benchmark `noop` (experiment `a`) and over the inlining sites of `one`, a small C
/// program timed by wall clock (experiment `b`).
fn usage_campaign() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path();
    std::fs::create_dir_all(path.join("noop")).unwrap();
    std::fs::write(path.join("noop/README"), "nothing to build\n").unwrap();
    std::fs::create_dir_all(path.join("one")).unwrap();
    std::fs::write(
        path.join("one/main.c"),
        "static int sq(int x) { return x * x; }\nstatic int add(int a, int b) { return a + b; }\n\
         int main(void) { int s = 0; for (int i = 0; i < 1000; i++) s = add(s, sq(i)); return s == 7; }\n",
    )
    .unwrap();
    let config = r#"(campaign
  (name usage)
  (store "store")
  (objective (metric wall-time) (statistic median))
  (runs (warmup 0) (min 1) (max 1))
  (experiments
    ((name a) (benchmark noop) (search (random-walk (steps 4))) (seed 3))
    ((name b) (benchmark one) (search (random-walk (steps 2))) (seed 1)))
  (benchmarks
    ((name noop) (kind knobs) (knobs (k 0 1 2 3))
     (sources "noop") (build ()) (run ("true")) (check-output none) (timeout-s 10))
    ((name one) (kind llvm-inline) (compiler clang) (sources "one")
     (build ("clang" "-O2" "main.c" "-o" "bench")) (run ("./bench")) (timeout-s 30)))
  (workers (local (slots 2))))
"#;
    std::fs::write(path.join("campaign.sexp"), config).unwrap();
    decisions(path, "DECISIONS.sexp", "(k 1)");
    let out = run_kiln(path, &["run", "campaign.sexp"]);
    assert!(out.status.success(), "{}", text(&out));
    dir
}

/// The first cells of the README's command table (`kiln …` and `kiln-worker …`), unescaped.
fn readme_usage_lines(readme: &str) -> Vec<String> {
    let table = readme
        .split("\n## Commands\n")
        .nth(1)
        .and_then(|rest| rest.split("\n## ").next())
        .unwrap_or("");
    table
        .lines()
        .filter_map(|l| l.strip_prefix("| `")?.split("` |").next())
        .filter(|cell| cell.starts_with("kiln"))
        .map(|cell| cell.replace("\\|", "|"))
        .collect()
}

/// A usage line's words: `[...]` groups kept whole (with their `…`), the rest split at spaces.
fn usage_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let (mut word, mut depth) = (String::new(), 0);
    for c in line.chars() {
        match c {
            ' ' if depth == 0 => words.push(std::mem::take(&mut word)),
            '[' => depth += 1,
            ']' => depth -= 1,
            _ => {}
        }
        if c != ' ' || depth > 0 {
            word.push(c);
        }
    }
    words.push(word);
    words.retain(|w| !w.is_empty());
    words
}

/// The concrete command lines a usage line stands for: one per alternative of its `a|b` words
/// (the n-th alternative of each, or its last), every optional part in; and one without them.
/// An alternative `--` takes the plain words after it (its command) with it; the others skip them.
fn usage_variants(line: &str) -> Vec<Vec<String>> {
    let words = usage_words(line);
    let most = words
        .iter()
        .map(|w| w.split('|').count())
        .max()
        .unwrap_or(1);
    let mut variants: Vec<Vec<String>> = (0..most).map(|n| typed(&words, n, true)).collect();
    variants.push(typed(&words, 0, false));
    variants.dedup();
    variants
}

/// One concrete command line of `words`: the `n`-th alternatives, optional parts in or out.
fn typed(words: &[String], n: usize, optional: bool) -> Vec<String> {
    let mut argv: Vec<String> = Vec::new();
    // After an alternative to `--`: the plain words that only `--` takes.
    let mut skipping = false;
    for word in words {
        let word = word.trim_end_matches('…');
        if let Some(inner) = word.strip_prefix('[').and_then(|w| w.strip_suffix(']')) {
            if optional {
                argv.extend(typed(&usage_words(inner), n, true));
            }
            continue;
        }
        if skipping {
            continue;
        }
        let alternatives: Vec<&str> = word.split('|').collect();
        let chosen = alternatives[n.min(alternatives.len() - 1)];
        skipping = alternatives.contains(&"--") && chosen != "--";
        let value = placeholder(argv.last().map_or("", String::as_str), chosen);
        argv.push(value);
    }
    argv
}

/// A placeholder's value in [`usage_campaign`]'s folder (a word that is none, as it is).
fn placeholder(flag: &str, word: &str) -> String {
    let value = match (flag, word) {
        ("--benchmark", "NAME") => "one",
        (_, "BENCHMARK") => "noop",
        ("--worker", "NAME") => "local",
        ("--experiment", "NAME") => "a",
        (_, "CONFIG") => "campaign.sexp",
        (_, "STORE") => "store",
        (_, "EXPERIMENT/CHAIN/STEP") => "a/0/1",
        (_, "FILE") => "typed.out",
        (_, "DIR") => "typed-dir",
        ("--port", "N") => "0",
        (_, "N") | (_, "SECS") | (_, "L") => "1",
        (_, "S") => "30",
        (_, "ADDR") => "127.0.0.1",
        (_, "COMMAND") | (_, "CMD") => "echo",
        // One word: a decision file that keeps every stock decision.
        (_, "ARGS") => "(decisions (values))",
        (_, other) => other,
    };
    value.to_string()
}

/// Runs a typed command line (`kiln …` or `kiln-worker …`) in `dir`: its output, and whether
/// it was still running (then stopped) after a few seconds, as `serve` is; others get 2 minutes.
fn run_typed(dir: &Path, argv: &[String]) -> (Output, bool) {
    let mut cmd = match argv[0].as_str() {
        "kiln" => kiln_cmd(dir),
        "kiln-worker" => {
            let mut cmd = std::process::Command::new(worker());
            cmd.current_dir(dir);
            cmd
        }
        other => panic!("not a kiln command: {other}"),
    };
    // Into a file: a long page (`man`) must not fill a pipe nobody reads yet.
    let stdout = std::fs::File::create(dir.join("typed.stdout")).unwrap();
    let mut child = cmd
        .args(&argv[1..])
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let limit = Duration::from_secs(if argv[1] == "serve" { 3 } else { 120 });
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() && started.elapsed() < limit {
        std::thread::sleep(Duration::from_millis(50));
    }
    let serving = child.try_wait().unwrap().is_none();
    let _ = child.kill();
    (child.wait_with_output().unwrap(), serving)
}
