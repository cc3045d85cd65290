//! What kiln shows of a benchmark can be trusted: its output reaches the
//! terminal as text, its control characters escaped, while the store keeps
//! its bytes.

mod common;

use common::*;

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
