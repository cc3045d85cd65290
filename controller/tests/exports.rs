//! Typed exports: the schema docs/export-schema.md shows is the one the code writes, and
//! every table of a real campaign (the synthetic knob benchmark under
//! callgrind) reads back with pyarrow, as JSON lines and as CSV with the
//! documented types (checked by `exports_check.py`).

use std::path::Path;
use std::process::Command;

use crate::common::*;
use kiln_controller::export::schema;

const BEGIN: &str = "<!-- kiln export --schema: begin -->\n";
const END: &str = "<!-- kiln export --schema: end -->";

#[test]
fn the_docs_show_the_schema_the_code_writes() {
    let page = std::fs::read_to_string(repo().join("docs/export-schema.md")).unwrap();
    let start = page
        .find(BEGIN)
        .expect("docs/export-schema.md marks the export schema")
        + BEGIN.len();
    let end = page[start..].find(END).expect("and its end") + start;
    let generated = schema::schema().markdown();
    assert!(
        page[start..end] == generated,
        "docs/export-schema.md's export schema is not `kiln export --schema`'s; put this \
         between its markers:\n{generated}"
    );
    let dir = tempfile::tempdir().unwrap();
    let out = run_kiln(dir.path(), &["export", "--schema"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), generated);
    let out = run_kiln(dir.path(), &["export", "--schema", "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["version"], schema::EXPORT_VERSION);
    let tables: Vec<&str> = json["tables"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["table"].as_str().unwrap())
        .collect();
    for t in kiln_controller::export::Table::ALL {
        assert!(tables.contains(&t.name()), "{tables:?}");
    }
    // Every feature of a site is a column of `sites` and `dataset`.
    let features = schema::features();
    assert_eq!(
        features.len(),
        serde_json::to_value(kiln_protocol::SiteFeatures::default())
            .unwrap()
            .as_object()
            .unwrap()
            .len()
    );
    for table in ["sites", "dataset"] {
        let t = json["tables"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["table"] == table)
            .unwrap();
        for f in &features {
            assert!(
                t["columns"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|c| c["name"] == f.column.name.as_str()),
                "{table} lacks {}",
                f.column.name
            );
        }
    }
}

fn python() -> String {
    let out = Command::new(repo().join("scripts/python-env"))
        .output()
        .expect("scripts/python-env runs");
    assert!(out.status.success(), "{}", text(&out));
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

fn export(dir: &Path, args: &[&str]) {
    let mut all = vec!["export", "store"];
    all.extend(args);
    let out = run_kiln(dir, &all);
    assert!(out.status.success(), "{all:?}: {}", text(&out));
}

#[test]
fn every_table_of_a_real_campaign_loads_typed_in_every_format() {
    if !have_valgrind() {
        return skip("valgrind is not installed");
    }
    let dir = tempfile::tempdir().unwrap();
    copy_benchmark("synthetic", dir.path());
    std::fs::write(
        dir.path().join("campaign.sexp"),
        campaign::synthetic_config_on(12, 5, 2, "(workers (local (slots 2)))"),
    )
    .unwrap();
    let out = run_kiln(dir.path(), &["run", "campaign.sexp"]);
    assert!(out.status.success(), "{}", text(&out));

    let tables = dir.path().join("tables");
    for format in ["csv", "jsonl", "parquet"] {
        let folder = tables.join(format);
        export(
            dir.path(),
            &["--all", "--format", format, "-o", folder.to_str().unwrap()],
        );
    }
    for format in ["csv", "parquet"] {
        let folder = tables.join(format!("dropped-{format}"));
        let folder = folder.to_str().unwrap();
        export(
            dir.path(),
            &["--all", "--drop-constant", "--format", format, "-o", folder],
        );
    }
    let schema = dir.path().join("schema.json");
    let out = run_kiln(dir.path(), &["export", "--schema", "--json"]);
    assert!(out.status.success(), "{}", text(&out));
    std::fs::write(&schema, &out.stdout).unwrap();

    let check = repo().join("controller/tests/exports_check.py");
    let out = Command::new(python())
        .arg(&check)
        .arg(&schema)
        .arg(&tables)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    eprintln!("{summary}");
    // 12 steps of 10 knobs; the objective is callgrind's count, so its runs are there.
    assert_eq!(summary["tables"]["steps"]["rows"], 12);
    assert_eq!(summary["tables"]["sites"]["rows"], 10);
    assert_eq!(summary["tables"]["dataset"]["rows"], 120);
    let kinds = summary["run_kinds"].as_array().unwrap();
    assert!(kinds.contains(&"callgrind".into()), "{kinds:?}");
    let supported = summary["supported"].as_array().unwrap();
    assert!(supported.contains(&"instructions".into()), "{summary}");
    // The campaign varies knobs, and failures are absent: some columns are constant.
    let steps = &summary["tables"]["steps"];
    assert!(
        steps["varying"].as_u64() < steps["columns"].as_u64(),
        "{steps}"
    );

    // Parquet goes to a pipe (not a terminal) as it goes to a file.
    let piped = run_kiln(
        dir.path(),
        &["export", "store", "--table", "sites", "--format", "parquet"],
    );
    assert!(piped.status.success(), "{}", text(&piped));
    let file = std::fs::read(tables.join("parquet/sites.parquet")).unwrap();
    assert!(piped.stdout.starts_with(b"PAR1") && piped.stdout == file);
    // Parquet to a terminal is refused, saying what to do instead.
    let kiln = kiln();
    let line = format!(
        "{} export store --table sites --format parquet",
        kiln.display()
    );
    let tty = Command::new("script")
        .args(["-qec", &line, "/dev/null"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&tty.stdout);
    assert!(!tty.status.success(), "{said}");
    assert!(
        said.contains("standard output is a terminal") && said.contains("-o FILE"),
        "{said}"
    );
    assert!(!said.contains("PAR1"), "{said}");
    // --all needs a folder.
    let out = run_kiln(dir.path(), &["export", "store", "--all"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
}
