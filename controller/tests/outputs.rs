//! What kiln writes for a person can be trusted: a file it replaces is
//! replaced whole or not at all, and a benchmark's output reaches the
//! terminal as text, its control characters escaped, while the store keeps
//! its bytes.

use std::os::unix::fs::FileTypeExt;
use std::path::Path;

use crate::common::*;

/// The names in a folder, sorted.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[test]
fn a_failed_export_leaves_an_existing_file_as_it_was() {
    let dir = noop_campaign();
    let keep = dir.path().join("keep.csv");
    std::fs::write(&keep, "precious\n").unwrap();
    let keep_arg = keep.to_str().unwrap();
    for (args, status) in [
        // An experiment the store lacks is bad input, found before anything is written.
        (
            vec![
                "export",
                "store",
                "--table",
                "steps",
                "--experiment",
                "nosuch",
                "-o",
                keep_arg,
            ],
            2,
        ),
        (
            vec![
                "export",
                "store",
                "--table",
                "rewards",
                "--experiment",
                "nosuch",
                "-o",
                keep_arg,
            ],
            2,
        ),
        (
            vec!["export", "nostore", "--table", "steps", "-o", keep_arg],
            2,
        ),
        (
            vec!["export", "store", "--table", "nosuch", "-o", keep_arg],
            2,
        ),
    ] {
        let out = run_kiln(dir.path(), &args);
        assert_eq!(out.status.code(), Some(status), "{args:?}: {}", text(&out));
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(
            said.contains("nosuch") || said.contains("nostore"),
            "{said}"
        );
        assert_eq!(
            std::fs::read_to_string(&keep).unwrap(),
            "precious\n",
            "{args:?}"
        );
    }
    // Every table to a folder: with a bad argument, no folder is made.
    let tables = dir.path().join("tables");
    let tables_arg = tables.to_str().unwrap();
    let out = run_kiln(
        dir.path(),
        &[
            "export",
            "store",
            "--all",
            "--experiment",
            "nosuch",
            "-o",
            tables_arg,
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(!tables.exists());
    // A good export replaces the file whole, and leaves no temporary file behind.
    let out = run_kiln(
        dir.path(),
        &["export", "store", "--table", "steps", "-o", keep_arg],
    );
    assert!(out.status.success(), "{}", text(&out));
    let steps = std::fs::read_to_string(&keep).unwrap();
    assert!(steps.starts_with("campaign,"), "{steps}");
    let out = run_kiln(dir.path(), &["export", "store", "--all", "-o", tables_arg]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        names(&tables).iter().all(|n| !n.starts_with('.')),
        "{:?}",
        names(&tables)
    );
    assert!(
        names(dir.path()).iter().all(|n| !n.starts_with('.')),
        "{:?}",
        names(dir.path())
    );
    // What is no regular file is written as it is, never replaced.
    let out = run_kiln(
        dir.path(),
        &["export", "store", "--table", "steps", "-o", "/dev/null"],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(Path::new("/dev/null")
        .metadata()
        .unwrap()
        .file_type()
        .is_char_device());
}

/// Whether `text` shows the escapes of [`LOUD_STDERR`]'s controls, and no control itself.
fn shows_escaped(what: &str, text: &str) {
    assert!(
        !has_controls(text),
        "{what} holds control characters: {text:?}"
    );
    for escape in [
        "\\x1b[31mRED",
        "\\x1b]52;c;aGVsbG8=\\x07",
        "bell\\x07",
        "\\u{9b}2J",
    ] {
        assert!(text.contains(escape), "{what} lacks {escape}: {text}");
    }
}

#[test]
fn a_benchmark_s_control_characters_are_shown_escaped_and_stored_raw() {
    let (dir, run) = loud_campaign();
    let run_text = format!(
        "{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    // The chain stops on its first failures, all alike, and kiln says why.
    assert_eq!(run.status.code(), Some(1), "{run_text}");
    shows_escaped("kiln run", &run_text);

    let status = run_kiln(dir.path(), &["status", "store"]);
    assert!(status.status.success(), "{}", text(&status));
    let said = String::from_utf8(status.stdout).unwrap();
    assert!(said.contains("last failure of loud/chain 0"), "{said}");
    shows_escaped("kiln status", &said);

    let show = run_kiln(dir.path(), &["show", "store", "loud/0/1"]);
    assert!(show.status.success(), "{}", text(&show));
    let said = String::from_utf8(show.stdout).unwrap();
    assert!(said.contains("run failed (exit 1)"), "{said}");
    shows_escaped("kiln show", &said);

    // The store keeps the bytes: JSON carries them (escaped as JSON escapes them).
    let json = run_kiln(dir.path(), &["show", "store", "loud/0/1", "--json"]);
    assert!(json.status.success(), "{}", text(&json));
    let record: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let stderr = record["result"]["outcome"]["stderr_tail"]
        .as_str()
        .unwrap_or_else(|| panic!("no stderr in {record}"));
    assert!(stderr.contains(LOUD_STDERR), "{stderr:?}");
    let lines = run_kiln(
        dir.path(),
        &["export", "store", "--table", "steps", "--format", "jsonl"],
    );
    assert!(lines.status.success(), "{}", text(&lines));
    let first: serde_json::Value = serde_json::from_str(
        String::from_utf8_lossy(&lines.stdout)
            .lines()
            .nth(1)
            .unwrap(),
    )
    .unwrap();
    assert!(
        first["failure"].as_str().unwrap().contains(LOUD_STDERR),
        "{first}"
    );

    // Text exports show them escaped, the table beside the store too.
    let csv = run_kiln(dir.path(), &["export", "store", "--table", "steps"]);
    assert!(csv.status.success(), "{}", text(&csv));
    shows_escaped("the steps CSV", &String::from_utf8(csv.stdout).unwrap());
    let beside = std::fs::read_to_string(dir.path().join("store/steps.csv")).unwrap();
    shows_escaped("store/steps.csv", &beside);
}
