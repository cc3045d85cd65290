//! The conventions of the command line: generated completions and man page, output fit for a
//! pipe (progress lines, no escape codes), `-q`, config paths relative to the config file,
//! `kiln check` finding what a config names, and one speed convention across commands.

use std::path::Path;

use clap::CommandFactory;

use crate::common::*;
use kiln_controller::cli::Cli;

/// Every subcommand's name, from the clap definitions.
fn subcommands() -> Vec<String> {
    Cli::command()
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .collect()
}

#[test]
fn completions_and_the_man_page_list_every_subcommand() {
    let dir = tempfile::tempdir().unwrap();
    let names = subcommands();
    assert!(names.len() >= 10, "{names:?}");
    for shell in ["bash", "zsh", "fish"] {
        let out = run_kiln(dir.path(), &["completions", shell]);
        assert!(out.status.success(), "{}", text(&out));
        let script = String::from_utf8_lossy(&out.stdout);
        for name in &names {
            assert!(script.contains(name.as_str()), "{shell} lacks {name}");
        }
    }
    let out = run_kiln(dir.path(), &["man"]);
    assert!(out.status.success(), "{}", text(&out));
    let page = String::from_utf8_lossy(&out.stdout);
    assert!(
        page.starts_with(".ie") || page.contains(".TH kiln"),
        "{page}"
    );
    for name in &names {
        assert!(
            page.contains(&format!("kiln\\-{}", name.replace('-', "\\-"))),
            "man lacks {name}"
        );
    }
    let exit = page
        .find(".SH \"EXIT STATUS\"")
        .expect("an EXIT STATUS section");
    for status in ["0", "1", "2", "130, 143, 129"] {
        assert!(
            page[exit..].contains(&format!("\\fB{status}\\fR")),
            "{}",
            &page[exit..]
        );
    }
    // Every page the main one refers to (`kiln-run(1)`, …) is written with it.
    let out = run_kiln(dir.path(), &["man", "--dir", "man1"]);
    assert!(out.status.success(), "{}", text(&out));
    for name in &names {
        let written = dir.path().join(format!("man1/kiln-{name}.1"));
        assert!(written.is_file(), "no {}", written.display());
    }
    assert!(dir.path().join("man1/kiln.1").is_file());
}

/// A knob campaign of `steps` steps of about 0.1 s each in `dir`, sources in `dir/bench`.
fn knob_campaign(dir: &Path, steps: u32) -> String {
    std::fs::create_dir_all(dir.join("bench")).unwrap();
    std::fs::write(dir.join("bench/run.sh"), "sleep 0.1\necho $1\n").unwrap();
    format!(
        r#"(campaign
  (name piped)
  (store "store")
  (runs (warmup 0) (min 1) (max 1))
  (experiments ((benchmark knob) (search (simulated-annealing (steps {steps}))) (seed 3)))
  (benchmarks
    ((name knob) (kind knobs) (sources "bench")
     (knobs (a 0 1 2 3 4 5 6 7 8 9)) (run ("sh" "run.sh" "{{a}}")) (check-output none)))
  (workers (local (slots 1))))
"#
    )
}

#[test]
fn piped_output_has_progress_lines_and_no_escape_codes() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("c.sexp"), knob_campaign(dir.path(), 20)).unwrap();
    // stdout and stderr are pipes here, as under nohup or a scheduler.
    let out = run_kiln(
        dir.path(),
        &["-v", "run", "--progress-every", "0.2", "c.sexp"],
    );
    assert!(out.status.success(), "{}", text(&out));
    let all = text(&out);
    assert!(
        !all.contains('\u{1b}'),
        "escape codes in piped output:\n{all}"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    let progress: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("kiln: knob/chain 0: step "))
        .collect();
    assert!(progress.len() >= 2, "{stderr}");
    // Each line ends in its ETA, as `kiln status` says it ("-" before the first step).
    assert!(progress.iter().all(|l| l.contains(" eta ")), "{stderr}");
    // The log has one timestamp per line, and the progress too.
    let log = std::fs::read_to_string(dir.path().join("store/kiln.log")).unwrap();
    assert!(log.contains("knob/chain 0: step "), "{log}");
    for line in log.lines() {
        assert!(
            line.matches("Z ").count() <= 1,
            "two timestamps in one line: {line}"
        );
    }
}

#[test]
fn quiet_says_nothing_but_the_result() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("c.sexp"), knob_campaign(dir.path(), 3)).unwrap();
    let out = run_kiln(dir.path(), &["-q", "run", "c.sexp"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stderr), "");
    assert!(String::from_utf8_lossy(&out.stdout).contains("time ratio"));
}

#[test]
fn a_config_run_from_another_folder_finds_its_sources_and_store() {
    let dir = tempfile::tempdir().unwrap();
    let project = dir.path().join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("c.sexp"), knob_campaign(&project, 3)).unwrap();
    let elsewhere = dir.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let out = run_kiln(&elsewhere, &["-q", "run", "../project/c.sexp"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(project.join("store/db").exists());
    assert!(!elsewhere.join("store").exists());
    let checked = run_kiln(&elsewhere, &["check", "../project/c.sexp"]);
    assert!(checked.status.success(), "{}", text(&checked));
    assert!(
        String::from_utf8_lossy(&checked.stdout).contains("(sources \"../project/bench\")"),
        "{}",
        text(&checked)
    );
}

#[test]
fn check_refuses_a_config_whose_sources_or_programs_are_missing_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let config = knob_campaign(dir.path(), 3);
    std::fs::write(
        dir.path().join("c.sexp"),
        config.replace("\"bench\"", "\"nowhere\""),
    )
    .unwrap();
    let out = run_kiln(dir.path(), &["check", "c.sexp"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("c.sexp: benchmark knob: (sources ...): no folder nowhere"),
        "{}",
        text(&out)
    );
    std::fs::write(
        dir.path().join("c.sexp"),
        config.replace("\"sh\"", "\"no-such-shell\""),
    )
    .unwrap();
    let out = run_kiln(dir.path(), &["check", "c.sexp"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("(run ...): program 'no-such-shell' is neither in bench nor on PATH"),
        "{}",
        text(&out)
    );
}

#[test]
fn status_show_and_export_agree_on_the_time_ratio_of_a_step() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("c.sexp"), knob_campaign(dir.path(), 6)).unwrap();
    let out = run_kiln(dir.path(), &["-q", "run", "c.sexp"]);
    assert!(out.status.success(), "{}", text(&out));
    let status = run_kiln(dir.path(), &["status", "--json", "store"]);
    assert!(status.status.success(), "{}", text(&status));
    let report: serde_json::Value = serde_json::from_slice(&status.stdout).unwrap();
    let baseline = report["chains"][0]["baseline"].as_f64().unwrap();
    let export = run_kiln(dir.path(), &["export", "store", "--table", "steps"]);
    assert!(export.status.success(), "{}", text(&export));
    let mut rows = csv::Reader::from_reader(&export.stdout[..]);
    let header = rows.headers().unwrap().clone();
    let col = |name: &str| header.iter().position(|h| h == name).unwrap();
    let mut checked = 0;
    for row in rows.records().map(Result::unwrap) {
        let Ok(objective) = row[col("objective")].parse::<f64>() else {
            continue;
        };
        let exported: f64 = row[col("time_ratio")].parse().unwrap();
        assert_eq!(row[col("baseline")].parse::<f64>().unwrap(), baseline);
        assert!((exported - objective / baseline).abs() < 1e-12);
        // `kiln show` prints the same figure for the step, under the same name.
        let step = format!("knob/{}/{}", &row[col("chain")], &row[col("step")]);
        let shown = run_kiln(dir.path(), &["show", "store", &step]);
        let shown = String::from_utf8_lossy(&shown.stdout);
        assert!(
            shown.contains(&format!("time ratio {exported:.4}")),
            "{step}: {exported}\n{shown}"
        );
        checked += 1;
    }
    assert!(checked >= 3, "{checked} steps checked");
    let shown = run_kiln(dir.path(), &["status", "store"]);
    assert!(String::from_utf8_lossy(&shown.stdout).contains("time ratio"));
}

#[test]
fn json_for_scripts_from_check_sites_workers_and_status() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("c.sexp"), knob_campaign(dir.path(), 2)).unwrap();
    let json = |args: &[&str]| -> serde_json::Value {
        let out = run_kiln(dir.path(), args);
        assert!(out.status.success(), "{args:?}: {}", text(&out));
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{args:?}: {e}"))
    };
    assert_eq!(json(&["check", "--json", "c.sexp"])["name"], "piped");
    let sites = json(&["sites", "--json", "c.sexp", "knob"]);
    assert_eq!(sites["points"].as_array().unwrap().len(), 1, "{sites}");
    let workers = json(&["workers", "--json", "c.sexp"]);
    assert_eq!(workers[0]["name"], "local", "{workers}");
    assert_eq!(workers[0]["state"], "ok", "{workers}");
    assert!(run_kiln(dir.path(), &["-q", "run", "c.sexp"])
        .status
        .success());
    let status = json(&["status", "--json", "store"]);
    assert_eq!(status["finished"], true, "{status}");
    assert_eq!(status["phase"], "finished", "{status}");
    let rewards = json(&["rewards", "--json", "store"]);
    assert_eq!(rewards["experiments"][0]["experiment"], "knob", "{rewards}");
    assert!(rewards["experiments"][0]["rewards"].is_array(), "{rewards}");
    assert!(run_kiln(
        dir.path(),
        &["-q", "sites", "c.sexp", "knob", "-o", "stock.sexp"]
    )
    .status
    .success());
    let compared = json(&[
        "benchmark",
        "--json",
        "--runs",
        "1",
        "c.sexp",
        "knob",
        "stock.sexp",
    ]);
    assert_eq!(compared["benchmark"], "knob", "{compared}");
    assert!(compared["time_ratio"].as_f64().is_some(), "{compared}");
    assert!(
        compared["verdict"]
            .as_str()
            .unwrap()
            .starts_with("too few runs"),
        "one run a side proves nothing: {compared}"
    );
}
