//! `kiln store verify` on stores a real campaign wrote and that were damaged
//! afterwards: steps lost from the database are reported by number, a damaged
//! step by its checksum; a path without a store is refused and left as it
//! was; a read-only store is verified, shown and exported.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common::*;
use kiln_controller::store::{blocks, Store};

/// The steps each chain of [`noop_config`]`(false)` decides.
const STEPS: usize = 12;

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn steps_lost_with_the_tail_of_a_truncated_database_are_reported_by_number() {
    let dir = noop_campaign();
    let store = dir.path().join("store");
    // The fault campaign's damage: sled's snapshot deleted and its log
    // truncated halfway through what it holds. sled then opens the steps
    // before the cut, with chain states that agree with them.
    for entry in fs::read_dir(store.join("db")).unwrap() {
        let path = entry.unwrap().path();
        if path
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("snap.")
        {
            fs::remove_file(path).unwrap();
        }
    }
    let log = store.join("db/db");
    let bytes = fs::read(&log).unwrap();
    let used = bytes.iter().rposition(|&b| b != 0).unwrap() + 1;
    let file = fs::OpenOptions::new().write(true).open(&log).unwrap();
    file.set_len(used as u64 / 2).unwrap();
    drop(file);

    let out = run_kiln(dir.path(), &["store", "verify", "store"]);
    assert!(!out.status.success(), "{}", text(&out));
    let said = stdout(&out);
    let left: Vec<usize> = {
        let store = reopen(|| Store::open_existing(&store));
        (0..2).map(|c| store.chain_steps("a", c)).collect()
    };
    assert!(left.iter().any(|&n| n < STEPS), "no step lost: {left:?}");
    for (c, &n) in left.iter().enumerate() {
        let lost = match STEPS - n {
            0 => continue,
            1 => format!("step {n}"),
            _ => format!("steps {n}-{}", STEPS - 1),
        };
        let line = format!(
            "problem: a/chain {c}: {lost} missing ({STEPS} decided, as the high-water file records)"
        );
        assert!(said.contains(&line), "{line} not in:\n{}", text(&out));
    }
}

#[test]
fn a_hole_and_a_damaged_step_are_reported() {
    let dir = noop_campaign();
    let store = dir.path().join("store");
    {
        let db = reopen(|| {
            kiln_controller::store::open_database(&store.join("db")).map_err(anyhow::Error::from)
        });
        for key in ["step/a/000000/000000005", "row/a/000000/000000005"] {
            assert!(blocks::set_entry(&db, key, None).unwrap(), "{key}");
        }
        let key = "step/a/000001/000000003";
        let value = blocks::entry(&db, key).unwrap().unwrap();
        let damaged = String::from_utf8(value.to_vec()).unwrap().replacen(
            "\"worker\":\"local",
            "\"worker\":\"lokal",
            1,
        );
        assert_ne!(damaged.as_bytes(), &*value);
        blocks::set_entry(&db, key, Some(damaged.as_bytes())).unwrap();
        db.flush().unwrap();
    }
    let out = run_kiln_when_free(dir.path(), &["store", "verify", "store"]);
    assert!(!out.status.success(), "{}", text(&out));
    let problems: Vec<String> = stdout(&out)
        .lines()
        .filter_map(|l| l.strip_prefix("problem: "))
        .map(str::to_owned)
        .collect();
    assert_eq!(
        problems,
        [
            "store key step/a/000001/000000003: the step fails its checksum (damaged)",
            // The damaged field is one the export shows.
            "a/chain 1/step 3: its export row differs from it",
            "a/chain 0: step 5 missing below stored step 6",
        ],
        "{}",
        text(&out)
    );
}

#[test]
fn verify_refuses_a_path_without_a_store_and_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = run_kiln(dir.path(), &["store", "verify", "nowhere/store"]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("nowhere/store is not a kiln store"),
        "{}",
        text(&out)
    );
    assert!(!dir.path().join("nowhere").exists());

    // A folder without a database, or with an empty database folder, stays as it was.
    fs::create_dir_all(dir.path().join("empty/db")).unwrap();
    for path in ["empty", "empty/db"] {
        let out = run_kiln(dir.path(), &["store", "verify", path]);
        assert!(!out.status.success(), "{}", text(&out));
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(&format!("{path} is not a kiln store")),
            "{}",
            text(&out)
        );
    }
    let left: Vec<PathBuf> = walk(&dir.path().join("empty"));
    assert_eq!(left, [dir.path().join("empty/db")]);
}

/// Every path below `dir`.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut paths = Vec::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        paths.push(path.clone());
        if path.is_dir() {
            paths.extend(walk(&path));
        }
    }
    paths.sort();
    paths
}

/// A store made read-only for the length of a test, undone on drop.
struct ReadOnly {
    /// The read-only store.
    path: PathBuf,
    /// The command that undoes it.
    undo: Vec<String>,
}

impl ReadOnly {
    /// `store` made read-only, or why it cannot be here. Root writes files
    /// whatever their modes, so a read-only bind mount is tried first, then
    /// immutable files (`chattr +i`), then modes (`chmod a-w`); each counts
    /// only if a file then cannot be created in the store.
    fn make(store: &Path) -> Result<ReadOnly, String> {
        let view = store.with_file_name("read-only");
        fs::create_dir_all(&view).unwrap();
        let (s, v) = (store.display().to_string(), view.display().to_string());
        let ways = [
            (
                vec![
                    vec!["mount", "--bind", &s, &v],
                    vec!["mount", "-o", "remount,ro,bind", &v],
                ],
                view.as_path(),
                vec!["umount", &v],
            ),
            (
                vec![vec!["chattr", "-R", "+i", &s]],
                store,
                vec!["chattr", "-R", "-i", &s],
            ),
            (
                vec![vec!["chmod", "-R", "a-w", &s]],
                store,
                vec!["chmod", "-R", "u+w", &s],
            ),
        ];
        let mut tried = Vec::new();
        for (apply, path, undo) in ways {
            // Undone when dropped, also where it did not make the store read-only.
            let made = ReadOnly {
                path: path.to_path_buf(),
                undo: undo.iter().map(|a| a.to_string()).collect(),
            };
            match apply.iter().try_for_each(|c| run(c)) {
                Ok(()) if fs::File::create(made.path.join("probe")).is_err() => return Ok(made),
                Ok(()) => tried.push(format!("{}: the store stays writable", apply[0].join(" "))),
                Err(e) => tried.push(e),
            }
        }
        Err(tried.join("; "))
    }
}

impl Drop for ReadOnly {
    fn drop(&mut self) {
        let undo: Vec<&str> = self.undo.iter().map(String::as_str).collect();
        if let Err(e) = run(&undo) {
            eprintln!("{e}");
        }
    }
}

/// Runs a command, saying what went wrong if it did.
fn run(command: &[&str]) -> Result<(), String> {
    let out = Command::new(command[0])
        .args(&command[1..])
        .output()
        .map_err(|e| format!("{}: {e}", command.join(" ")))?;
    match out.status.success() {
        true => Ok(()),
        false => Err(format!(
            "{}: {}",
            command.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )),
    }
}

#[test]
fn a_read_only_store_is_verified_shown_and_exported() {
    let dir = noop_campaign();
    let export = |store: &Path| {
        let path = store.display().to_string();
        let out = run_kiln(dir.path(), &["export", &path, "--table", "steps"]);
        assert!(out.status.success(), "{}", text(&out));
        stdout(&out)
    };
    let store = dir.path().join("store");
    let exported = export(&store);
    // The controller's status report would answer `kiln status` for a store
    // it cannot open: without it, the store itself must.
    fs::remove_file(store.join("status.json")).unwrap();
    let read_only = match ReadOnly::make(&store) {
        Ok(r) => r,
        Err(why) => {
            return skip(format!("no way to make a store read-only here ({why})"));
        }
    };
    let path = read_only.path.display().to_string();
    let verify = run_kiln(dir.path(), &["store", "verify", &path]);
    assert!(verify.status.success(), "{}", text(&verify));
    assert!(
        stdout(&verify).contains("ok: no problems found"),
        "{}",
        text(&verify)
    );
    let status = run_kiln(dir.path(), &["status", &path]);
    assert!(status.status.success(), "{}", text(&status));
    let shown = stdout(&status);
    assert!(shown.contains("campaign noop (finished)"), "{shown}");
    assert!(shown.contains(&format!("{STEPS}/{STEPS}")), "{shown}");
    assert!(export(&read_only.path) == exported, "the exports differ");
}

/// Every file under `dir` with a hash of its bytes.
fn contents(dir: &Path) -> std::collections::BTreeMap<PathBuf, kiln_protocol::ContentHash> {
    let mut found = std::collections::BTreeMap::new();
    for entry in fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        match path.is_dir() {
            true => found.extend(contents(&path)),
            false => {
                let bytes = fs::read(&path).unwrap();
                found.insert(path, kiln_protocol::ContentHash::of(&bytes));
            }
        }
    }
    found
}

#[test]
fn views_leave_every_file_of_a_store_as_they_found_it() {
    let dir = noop_campaign();
    let report = dir.path().join("report");
    let rewards = dir.path().join("rewards");
    let before = reopen(|| {
        // Once the controller has let go of the store.
        Store::open_existing(&dir.path().join("store")).map(drop)?;
        Ok(contents(&dir.path().join("store")))
    });
    for args in [
        vec!["status", "store"],
        vec!["status", "store", "--json"],
        vec!["show", "store", "a/0/3"],
        vec!["export", "store", "--table", "steps", "-o", "/dev/null"],
        vec!["store", "verify", "store"],
        vec!["report", "store", "-o", report.to_str().unwrap()],
        vec![
            "rewards",
            "store",
            "--no-verify",
            "-o",
            rewards.to_str().unwrap(),
        ],
    ] {
        let out = run_kiln_when_free(dir.path(), &args);
        assert!(out.status.success(), "{args:?}: {}", text(&out));
        assert!(
            contents(&dir.path().join("store")) == before,
            "{args:?} changed the store"
        );
    }
}
