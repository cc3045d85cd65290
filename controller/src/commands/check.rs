//! `kiln check`: a config checked and printed normalized, every default spelled
//! out; and what it names checked to be there: sources, decision files, SSH
//! keys, and the programs of builds and runs.

use std::io::Write;
use std::path::Path;

use anyhow::Result;

use kiln_protocol::config::{Start, WorkerSpec, CONFIG_MAX_BYTES};
use kiln_protocol::sexp::{self, Pos};
use kiln_protocol::CampaignConfig;

use crate::cli::CheckArgs;
use crate::error::{BadInput, Outcome};
use crate::logging;
use crate::store::OpenError;

pub(super) fn run(args: &CheckArgs, out: &mut dyn Write) -> Result<Outcome> {
    let config = checked(&args.config)?;
    if args.json {
        // The config's own words, never the code's (`simulated-annealing`, `t-max`).
        let json = crate::text::in_config_words(serde_json::to_value(&config)?);
        serde_json::to_writer_pretty(&mut *out, &json)?;
        writeln!(out)?;
    } else {
        write!(out, "{}", config.to_text())?;
    }
    Ok(Outcome::Success)
}

/// The config in `path`, read and checked: what it names that is not there is
/// bad input, each problem naming the file and field (as `kiln check` says
/// it, which `kiln run` checks first too); doubts are notes.
pub(super) fn checked(path: &Path) -> Result<CampaignConfig> {
    let config = super::read_config(path)?;
    if config.store.is_file() {
        // Refused here as `kiln run` would refuse it, at the config's line.
        let at = store_field(path).map_or(String::new(), |p| format!("{}:{}:", p.line, p.column));
        let why = OpenError::NotAStore(config.store.clone());
        return Err(BadInput(format!("{}:{at} (store ...): {why}", path.display())).into());
    }
    let (problems, doubts) = missing(&config);
    for doubt in &doubts {
        logging::note(doubt);
    }
    if !problems.is_empty() {
        let file = path.display();
        let listed: Vec<String> = problems.iter().map(|p| format!("{file}: {p}")).collect();
        return Err(BadInput(listed.join("\n")).into());
    }
    Ok(config)
}

/// Where the config in `path` names its store: the value of its `(store ...)` field.
fn store_field(path: &Path) -> Option<Pos> {
    let campaign = sexp::parse_file(path, CONFIG_MAX_BYTES).ok()?;
    campaign.as_list()?.iter().find_map(|f| match f.as_list()? {
        [word, value] if word.as_symbol() == Some("store") => Some(value.pos),
        _ => None,
    })
}

/// What the config names that is not there, each naming its field: problems,
/// and doubts (a program this machine lacks, which remote workers may have).
fn missing(config: &CampaignConfig) -> (Vec<String>, Vec<String>) {
    let mut problems = Vec::new();
    let only_local = config
        .workers
        .iter()
        .all(|w| matches!(w, WorkerSpec::Local(_)));
    let mut doubts = Vec::new();
    for b in &config.benchmarks {
        let field = |f: &str| format!("benchmark {}: ({f} ...)", b.name);
        if !b.sources.is_dir() {
            problems.push(format!(
                "{}: no folder {}",
                field("sources"),
                b.sources.display()
            ));
            continue;
        }
        // A run's program that the build makes (`./bench`) is not there before it.
        let programs = [("build", b.build.first()), ("run", b.run.first())];
        for (name, program) in programs {
            let Some(program) = program else { continue };
            let built = name == "run" && !b.build.is_empty() && program.contains('/');
            if built || findable(program, &b.sources) {
                continue;
            }
            let what = format!(
                "{}: program '{program}' is neither in {} nor on PATH",
                field(name),
                b.sources.display()
            );
            if only_local {
                problems.push(what);
            } else {
                doubts.push(format!("{what} here; the workers must have it"));
            }
        }
    }
    for e in &config.experiments {
        let Some(Start::File(path)) = &e.baseline else {
            continue;
        };
        if !path.is_file() {
            problems.push(format!(
                "experiment {}: (baseline ...): no file {}",
                e.name,
                path.display()
            ));
        }
    }
    for w in &config.workers {
        let WorkerSpec::Ssh(ssh) = w else { continue };
        for (field, path) in [
            ("identity", &ssh.identity),
            ("known-hosts", &ssh.known_hosts),
            ("worker-binary", &ssh.worker_binary),
        ] {
            if let Some(path) = path.as_ref().filter(|p| !p.is_file()) {
                problems.push(format!(
                    "worker {}: ({field} ...): no file {}",
                    ssh.name,
                    path.display()
                ));
            }
        }
    }
    (problems, doubts)
}

/// Whether `program` is a file in `sources` (a path) or on `PATH` and the
/// runs' clean `PATH` (a bare name).
fn findable(program: &str, sources: &Path) -> bool {
    if program.contains('/') {
        return sources.join(program).is_file() || Path::new(program).is_file();
    }
    let path = std::env::var("PATH").unwrap_or_default();
    let found = path
        .split(':')
        .chain(["/usr/local/bin", "/usr/bin", "/bin"])
        .any(|dir| Path::new(dir).join(program).is_file());
    found
}
