//! Reading is linear in the size of a document and bounded: a decision file of
//! 100 000 sites parses in well under 2 s, and files that are too large or not
//! regular files are refused, naming the path, before they are read.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use kiln_protocol::config::CONFIG_MAX_BYTES;
use kiln_protocol::decision::DECISION_FILE_MAX_BYTES;
use kiln_protocol::{
    CampaignConfig, DecisionFile, DecisionPoint, DecisionSet, DecisionValue, SiteId,
};

/// The time a 10 MB file may take. Unoptimised builds (`cargo test`) are
/// about 10 times slower than release, where the bound is 2 s.
fn budget() -> Duration {
    let release = Duration::from_secs(2);
    if cfg!(debug_assertions) {
        release * 10
    } else {
        release
    }
}

#[test]
fn a_decision_file_of_100000_sites_parses_in_linear_time() {
    const SITES: usize = 100_000;
    let points: Vec<DecisionPoint> = (0..SITES)
        .map(|i| {
            DecisionPoint::inline_site(SiteId(format!(
                "_ZN4kiln9benchmark21a_long_mangled_callee{i}E @ the_calling_function_of_{}:{}:{}",
                i % 977,
                i % 4000,
                i % 80
            )))
        })
        .collect();
    let set: BTreeMap<SiteId, DecisionValue> = points
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let value = if i % 3 == 0 {
                DecisionValue::inline()
            } else {
                DecisionValue::no_inline()
            };
            (p.id.clone(), value)
        })
        .collect();
    let file = DecisionFile {
        benchmark: Some("big".into()),
        set: DecisionSet(set),
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.sexp");
    std::fs::write(&path, file.to_sexp().to_string()).unwrap();
    let size = std::fs::metadata(&path).unwrap().len();
    assert!(size >= 10_000_000, "the file has {size} bytes; want 10 MB");

    let start = Instant::now();
    let text = DecisionFile::read_text(&path).unwrap();
    let read = DecisionFile::parse_checked(&text, "big.sexp", &points).unwrap();
    let took = start.elapsed();
    eprintln!("{size} bytes, {SITES} sites: read and checked in {took:?}");
    assert_eq!(read, file);
    assert!(took < budget(), "took {took:?}, more than {:?}", budget());
}

#[test]
fn a_config_of_many_knobs_and_benchmarks_parses_in_linear_time() {
    let knobs: String = (0..100_000)
        .map(|i| format!("\n      (knob_{i} 8 16 32 64 128 256)"))
        .collect();
    let benchmarks: String = (0..10_000)
        .map(|i| {
            format!(
                "\n    ((name b{i}) (kind knobs) (knobs (k 1 2)) (sources \"s\") \
                 (build (\"make\")) (run (\"./b\")))"
            )
        })
        .collect();
    let text = format!(
        "(campaign (name big) (store \"results/big\")
  (experiments ((benchmark many-knobs) (search (simulated-annealing (steps 40)))))
  (benchmarks
    ((name many-knobs) (kind knobs) (knobs {knobs})
     (sources \"s\") (build (\"make\")) (run (\"./b\"))){benchmarks})
  (workers (local (slots 1))))"
    );
    let start = Instant::now();
    let config = CampaignConfig::parse(&text, "big.sexp").unwrap();
    let took = start.elapsed();
    eprintln!("{} bytes: parsed in {took:?}", text.len());
    assert_eq!(config.benchmarks.len(), 10_001);
    // Half the size of the decision file, so half its budget.
    assert!(took < budget() / 2, "took {took:?}");
}

fn refusal(path: &Path) -> String {
    let config = CampaignConfig::read(path).unwrap_err().to_string();
    let decisions = DecisionFile::read(path).unwrap_err().to_string();
    assert!(config.starts_with(&path.display().to_string()), "{config}");
    assert_eq!(
        config, decisions,
        "configs and decision files are read alike"
    );
    config
}

#[test]
fn only_regular_files_are_read() {
    let devices = refusal(Path::new("/dev/zero"));
    assert!(
        devices.contains("not a regular file (a device)"),
        "{devices}"
    );

    let dir = tempfile::tempdir().unwrap();
    let folder = refusal(dir.path());
    assert!(folder.contains("not a regular file (a folder)"), "{folder}");

    // Opening a fifo would wait for a writer: it is refused before it is opened.
    let fifo = dir.path().join("fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let fifo = refusal(&fifo);
    assert!(fifo.contains("not a regular file (a fifo)"), "{fifo}");

    let missing = refusal(&dir.path().join("missing.sexp"));
    assert!(missing.contains("cannot read file"), "{missing}");
}

#[test]
fn files_past_the_limit_are_refused_unread() {
    let dir = tempfile::tempdir().unwrap();
    for (limit, text) in [
        (CONFIG_MAX_BYTES, "16 MiB"),
        (DECISION_FILE_MAX_BYTES, "64 MiB"),
    ] {
        let path = dir.path().join(format!("{text}.sexp"));
        // Sparse: the refusal must come from the size, not from reading it.
        std::fs::File::create(&path)
            .unwrap()
            .set_len(limit + 1)
            .unwrap();
        let err = if limit == CONFIG_MAX_BYTES {
            CampaignConfig::read(&path).unwrap_err()
        } else {
            DecisionFile::read(&path).unwrap_err()
        };
        assert_eq!(
            err.to_string(),
            format!(
                "{}: the file is larger than {text}, the most kiln reads",
                path.display()
            )
        );
    }
}

#[test]
fn text_that_is_not_utf8_is_located() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("latin1.sexp");
    std::fs::write(&path, b"(decisions\n  (benchmark caf\xe9))").unwrap();
    let err = DecisionFile::read(&path).unwrap_err();
    assert_eq!(err.pos.line, 2);
    assert_eq!(err.pos.column, 17);
    assert!(err.message.contains("not UTF-8"), "{err}");
}
