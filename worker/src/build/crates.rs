//! A workspace crate's code kept between a slot's steps when its decisions
//! did not change: rustc's counterpart of per-unit object reuse. kiln
//! compiles each crate as one codegen unit, so a crate is a unit.
//!
//! In a step build, the rustc wrapper gives each crate an incremental folder
//! of its own inside the build's (`INCREMENTAL/<key>`, the key a hash of the
//! crate's command line, which cargo keeps the same from step to step), and
//! keeps there, after a compile that succeeded, what rustc said (its remarks
//! among it), the functions its remarks name as callers, and the crate's
//! decisions: the replay file's lines whose caller (the outermost function of
//! a site) is a function the crate's remarks name, or one that no crate of
//! the build names. A call the replay file decides not to inline gets no
//! remark, so a function whose every call stayed out is in no crate's list;
//! its lines count for every crate, and a flip of one compiles each again.
//! The next compile of the crate in that folder (the slot's kept incremental
//! folder, see [`super::cargo_target`]):
//!
//! - with the same decisions, runs rustc on the folder as it is: rustc finds
//!   the crate's front end and code unchanged and reuses its object (a
//!   replay file's lines are not among what rustc tracks, hence the check
//!   here), and the wrapper says again what rustc said when it made it;
//! - with other decisions, or no record, first removes what LLVM made
//!   (each session's objects, bitcode and metadata: everything but rustc's
//!   dep graph, query cache and list of saved outputs), so rustc takes its
//!   front end from its cache and generates the crate's code again with the
//!   step's replay file, its remarks printed as in a fresh build.
//!
//! A crate whose decisions changed and that rustc did not compile again
//! would print no remarks for them: the build fails verification and the
//! step builds from a fresh copy, so a wrong reuse cannot pass unseen.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::fs;
use std::path::{Path, PathBuf};

use kiln_protocol::decision::ContentHash;
use serde::{Deserialize, Serialize};

use super::llvm_inline::REPLAY_FLAG;
use super::objects::{write_whole, ReplayLines};

/// The variable that tells the rustc wrapper it compiles in a step build
/// (discovery's builds keep nothing).
pub const CRATE_CODE_ENV: &str = "KILN_WRAP_CRATE_CODE";

/// The files of a session in rustc's incremental folder that hold what its
/// front end did, which no decision changes; the others are outputs of the
/// session's code generation.
const FRONT_END_FILES: &[&str] = &["dep-graph.bin", "query-cache.bin", "work-products.bin"];

/// The record of the crate's last compile in its folder.
const RECORD_FILE: &str = "kiln-crate.json";

/// The functions the crate's last compile's remarks name as callers, a line
/// each, beside its record: what the build's other crates read.
const CALLERS_FILE: &str = "kiln-callers.txt";

/// What the build log says of a crate whose code was kept.
pub const CODE_KEPT: &str = "code reused (its decisions did not change)";

/// What the build log says of a crate whose code was generated again.
pub const CODE_AGAIN: &str = "code generated again, its front end taken from rustc's cache";

/// What a crate's compile in a step does with its code.
pub enum Code<'a> {
    /// Kept, with what rustc said making it.
    Kept(&'a str),
    /// Generated again from the front end's kept work.
    Again,
    /// Compiled afresh: no compile of it was kept.
    New,
}

/// One crate's compile in a step build.
pub struct Crate {
    /// The crate's own incremental folder.
    dir: PathBuf,
    /// The step's replay file.
    replay: PathBuf,
    /// The hash of its decisions under this step's replay file, once known.
    decisions: Option<ContentHash>,
    record: Option<Record>,
}

#[derive(Serialize, Deserialize)]
struct Record {
    decisions: ContentHash,
    /// What rustc wrote to its standard error (cargo's JSON messages).
    said: String,
}

impl Crate {
    /// The crate `args` compile with kiln's `flags`, whose `-C incremental`
    /// this makes the crate's own folder; none without an incremental folder
    /// or a replay file among the flags.
    pub fn of(args: &[OsString], flags: &mut [String]) -> Option<Crate> {
        let replay = flags.iter().find_map(|f| {
            f.strip_prefix("llvm-args=")?
                .strip_prefix(REPLAY_FLAG)
                .map(PathBuf::from)
        })?;
        let incremental = flags.iter_mut().find(|f| f.starts_with("incremental="))?;
        let mut command = Vec::new();
        for a in args {
            command.extend(a.as_encoded_bytes());
            command.push(0);
        }
        let key = ContentHash::of(&command).to_string();
        let dir = Path::new(&incremental["incremental=".len()..]).join(&key[..16]);
        *incremental = format!("incremental={}", dir.display());
        let record: Option<Record> = fs::read(dir.join(RECORD_FILE))
            .ok()
            .and_then(|bytes| serde_json::from_slice(&bytes).ok());
        let decisions = record.as_ref().and_then(|r| {
            let text = fs::read_to_string(&replay).ok()?;
            Some(decisions_of(&text, &callers(&r.said), &known_callers(&dir)))
        });
        Some(Crate {
            dir,
            replay,
            decisions,
            record,
        })
    }

    /// Whether the crate's code is kept for this step's decisions; where it
    /// is not, the folder is readied for rustc to generate it again (an
    /// error if it could not be).
    pub fn code(&self) -> Result<Code<'_>, String> {
        match (&self.record, self.decisions) {
            (Some(record), Some(now)) if record.decisions == now => Ok(Code::Kept(&record.said)),
            (Some(_), _) => forget_codegen(&self.dir).map(|()| Code::Again),
            (None, _) => forget_codegen(&self.dir).map(|()| Code::New),
        }
    }

    /// Keeps what a successful compile said, with the decisions it realised.
    pub fn keep(&self, said: &[u8]) {
        let said = String::from_utf8_lossy(said).into_owned();
        let Ok(text) = fs::read_to_string(&self.replay) else {
            return;
        };
        let own = callers(&said);
        let listed: String = own.iter().flat_map(|name| [name, "\n"]).collect();
        // Its own list first: the record's decisions count what it names.
        if fs::create_dir_all(&self.dir).is_err()
            || !write_whole(&self.dir.join(CALLERS_FILE), listed.as_bytes())
        {
            return;
        }
        let record = Record {
            decisions: decisions_of(&text, &own, &known_callers(&self.dir)),
            said,
        };
        if let Ok(bytes) = serde_json::to_vec(&record) {
            write_whole(&self.dir.join(RECORD_FILE), &bytes);
        }
    }
}

/// What rustc said without its warnings that it could not delete the
/// outputs kiln removed ("file-system error deleting outdated file"): the
/// removal is kiln's, the warning in every step's log noise.
pub fn without_removal_warnings(said: &[u8]) -> Vec<u8> {
    said.split_inclusive(|b| *b == b'\n')
        .filter(|line| {
            let line = String::from_utf8_lossy(line);
            !(line.contains("file-system error deleting outdated file")
                && line.contains("No such file or directory"))
        })
        .flatten()
        .copied()
        .collect()
}

/// The functions whose sites a crate's compile decided: every caller its
/// inlining remarks name (`'CALLEE' inlined into 'CALLER' ...`, `CALLEE
/// will not be inlined into CALLER because ...`). Every call a function
/// makes gets a remark, so a function with a site is among them.
fn callers(said: &str) -> BTreeSet<&str> {
    said.split(" inlined into ")
        .skip(1)
        .filter_map(|rest| match rest.strip_prefix('\'') {
            Some(quoted) => quoted.split('\'').next(),
            None => rest.split([' ', '"', '\\']).next(),
        })
        .filter(|name| !name.is_empty())
        .collect()
}

/// The hash of the replay file's lines whose caller is among `own`, or
/// among no crate's `known` callers.
fn decisions_of(replay: &str, own: &BTreeSet<&str>, known: &BTreeSet<String>) -> ContentHash {
    let lines = ReplayLines::new(replay);
    let unclaimed = lines.callers().filter(|c| !known.contains(*c));
    lines.key(&[], own.iter().copied().chain(unclaimed))
}

/// The callers every crate of the build named at its last compile: the lists
/// kept in the crate folders beside `dir` (its own among them).
fn known_callers(dir: &Path) -> BTreeSet<String> {
    let Some(folder) = dir.parent() else {
        return BTreeSet::new();
    };
    fs::read_dir(folder)
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|crate_dir| fs::read_to_string(crate_dir.path().join(CALLERS_FILE)).ok())
        .flat_map(|list| list.lines().map(str::to_string).collect::<Vec<_>>())
        .collect()
}

/// Removes from the incremental folder `dir` what rustc's code generation
/// made (see the module's comment); the sessions' front-end files and the
/// crates' lock files stay.
pub fn forget_codegen(dir: &Path) -> Result<(), String> {
    if !dir.is_dir() {
        return Ok(());
    }
    let entries = |d: &Path| {
        fs::read_dir(d)
            .map_err(|e| format!("cannot read {}: {e}", d.display()))
            .map(|r| {
                r.filter_map(Result::ok)
                    .map(|e| e.path())
                    .collect::<Vec<_>>()
            })
    };
    // DIR/CRATE-HASH/s-SESSION/FILE
    for krate in entries(dir)?.into_iter().filter(|p| p.is_dir()) {
        for session in entries(&krate)?.into_iter().filter(|p| p.is_dir()) {
            for file in entries(&session)? {
                let front_end = file
                    .file_name()
                    .is_some_and(|n| FRONT_END_FILES.iter().any(|f| n == *f));
                if !front_end {
                    fs::remove_file(&file)
                        .map_err(|e| format!("cannot remove {}: {e}", file.display()))?;
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forgetting_code_generation_keeps_the_front_end() {
        let dir = tempfile::tempdir().unwrap();
        let incremental = dir.path();
        let session = incremental.join("app-0abc/s-hojs4qrl1l-0qr514s-xyz");
        fs::create_dir_all(&session).unwrap();
        let lock = incremental.join("app-0abc/s-hojs4qrl1l-0qr514s.lock");
        let made = ["a1ya2uvink.o", "do5d79ku8b.pre-lto.bc", "metadata.rmeta"];
        for file in FRONT_END_FILES.iter().chain(&made) {
            fs::write(session.join(file), "x").unwrap();
        }
        fs::write(&lock, "").unwrap();
        forget_codegen(incremental).unwrap();
        for file in FRONT_END_FILES {
            assert!(session.join(file).is_file(), "{file} was removed");
        }
        for file in made {
            assert!(!session.join(file).exists(), "{file} was kept");
        }
        assert!(lock.is_file());
    }

    #[test]
    fn a_crates_decisions_are_the_replay_lines_of_the_callers_its_remarks_name() {
        // cargo's JSON messages, as rustc writes them under cargo.
        let said = r#"{"message":"'_ZN3app2sq17hE' inlined into '_ZN3app4main17hE' with (cost=always): AlwaysInline Fallback at callsite _ZN3app4main17hE:0:5;"}
{"message":"_ZN4core9panicking5panic will not be inlined into _ZN3app3run17hE because its definition is unavailable"}"#;
        let names = callers(said);
        assert_eq!(
            names.into_iter().collect::<Vec<_>>(),
            ["_ZN3app3run17hE", "_ZN3app4main17hE"]
        );
        let ours =
            "x: '_ZN3app2sq17hE' inlined into '_ZN3app4main17hE' at callsite _ZN3app4main17hE:0:5;";
        let theirs =
            "x: '_ZN6helper3rot17hE' will not be inlined into '_ZN6helper3mix17hE' at callsite _ZN6helper3mix17hE:1:9;";
        let flipped = ours.replace(" inlined into", " will not be inlined into");
        // helper::mix is the other crate's: its remarks name it.
        let known: BTreeSet<String> = callers(said)
            .into_iter()
            .chain(["_ZN6helper3mix17hE"])
            .map(str::to_string)
            .collect();
        let of = |replay: &str| decisions_of(replay, &callers(said), &known);
        let base = of(&format!("{ours}\n{theirs}\n"));
        assert_eq!(
            base,
            of(&format!("{ours}\n{}\n", theirs.replace(":1:9", ":1:10"))),
            "another crate's line counted"
        );
        assert_ne!(
            base,
            of(&format!("{flipped}\n{theirs}\n")),
            "its own flip missed"
        );
        assert_eq!(
            base,
            of(&format!("{theirs}\n{ours}\n")),
            "the order counted"
        );
    }

    /// A function whose every call the replay file kept out has no remark in
    /// any crate: a flip of one of its calls compiles every crate again.
    #[test]
    fn a_line_whose_caller_no_crate_names_counts_for_every_crate() {
        let dir = tempfile::tempdir().unwrap();
        let (app, helper) = (dir.path().join("app"), dir.path().join("helper"));
        fs::create_dir_all(&helper).unwrap();
        fs::write(helper.join(CALLERS_FILE), "_ZN6helper3mix17hE\n").unwrap();
        let said = "'_ZN3app2sq17hE' inlined into '_ZN3app4main17hE' with (cost=always)";
        let known = known_callers(&app);
        assert_eq!(known.iter().collect::<Vec<_>>(), ["_ZN6helper3mix17hE"]);
        let of = |line: &str| decisions_of(&format!("{line}\n"), &callers(said), &known);
        let orphan =
            "x: '_ZN3app2cb17hE' inlined into '_ZN3app4lone17hE' at callsite _ZN3app4lone17hE:1:5;";
        let helpers = "x: '_ZN6helper3rot17hE' inlined into '_ZN6helper3mix17hE' at callsite _ZN6helper3mix17hE:1:9;";
        assert_ne!(of(orphan), of(""), "a line no crate claims left out");
        assert_eq!(of(helpers), of(""), "a line another crate claims counted");
    }
}
