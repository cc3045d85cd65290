//! Bad input is refused before kiln does anything: a name that would put a
//! file outside the store, and a config or decision file that is not a
//! regular file of bounded size. Each error names the file (and, for a name,
//! the line and column).

use std::path::Path;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::{kiln_cmd, text};

fn config(experiment_name: &str) -> String {
    format!(
        r#"(campaign
  (name inputs)
  (store "store")
  (experiments
    ((benchmark knobs) (name {experiment_name}) (search (random-walk (steps 2)))))
  (benchmarks
    ((name knobs) (kind knobs) (knobs (tile 8 16)) (sources "src")
     (build ("true")) (run ("true"))))
  (workers (local (slots 1))))
"#
    )
}

/// Runs `kiln ARGS` in `dir`, failing the test if it takes more than 20 s
/// (reading `/dev/zero` or a fifo would never end).
fn kiln_within_20s(dir: &Path, args: &[&str]) -> Output {
    let mut child = kiln_cmd(dir)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kiln starts");
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(20) {
            child.kill().unwrap();
            panic!("kiln {args:?} still runs after 20 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// Every file under `dir`, relative to it.
fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                todo.push(path.clone());
            }
            out.push(path.strip_prefix(dir).unwrap().display().to_string());
        }
    }
    out.sort();
    out
}

#[test]
fn a_name_that_would_leave_the_store_is_refused_by_check_and_run() {
    let root = tempfile::tempdir().unwrap();
    // The campaign's folder sits one below, so that `../x` from the store
    // would still land inside what the test watches.
    let dir = root.path().join("campaign");
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(dir.join("bad.sexp"), config("\"../x\"")).unwrap();
    for command in ["check", "run"] {
        let out = kiln_within_20s(&dir, &[command, "bad.sexp"]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("bad.sexp:5:30: '../x' cannot be a name: use letters"),
            "{}",
            text(&out)
        );
    }
    assert_eq!(
        files_under(root.path()),
        ["campaign", "campaign/bad.sexp", "campaign/src"]
    );
}

#[test]
fn files_that_are_not_regular_are_refused_at_once_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path();
    std::fs::create_dir(path.join("src")).unwrap();
    std::fs::write(path.join("ok.sexp"), config("ok")).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(path.join("fifo"))
        .status()
        .unwrap();
    assert!(made.success());
    for (file, kind) in [
        ("/dev/zero", "a device"),
        ("fifo", "a fifo"),
        ("src", "a folder"),
    ] {
        let expected = format!("{file}: not a regular file ({kind})");
        let out = kiln_within_20s(path, &["check", file]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(&expected),
            "{}",
            text(&out)
        );
        // A decision file is read before any worker is started.
        let out = kiln_within_20s(path, &["benchmark", "ok.sexp", "knobs", file]);
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(&expected),
            "{}",
            text(&out)
        );
    }
}

#[test]
fn a_config_past_the_size_limit_is_refused_unread() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("huge.sexp");
    // Sparse, so the test writes nothing: the size alone refuses it.
    let huge = kiln_protocol::config::CONFIG_MAX_BYTES + 1;
    std::fs::File::create(&path).unwrap().set_len(huge).unwrap();
    let out = kiln_within_20s(dir.path(), &["check", "huge.sexp"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("huge.sexp: the file is larger than 16 MiB, the most kiln reads"),
        "{}",
        text(&out)
    );
}
