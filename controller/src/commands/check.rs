//! `kiln check`: a config checked and printed normalized, every default spelled
//! out; and what it names checked to be there: sources, decision files, SSH
//! keys, and the programs of builds and runs.

use std::io::Write;
use std::path::Path;

use anyhow::Result;

use kiln_protocol::config::{
    BenchmarkSpec, Experiment, Search, Start, WorkerSpec, CONFIG_MAX_BYTES,
};
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
    let only_local = config
        .workers
        .iter()
        .all(|w| matches!(w, WorkerSpec::Local(_)));
    let (mut problems, mut doubts) = (Vec::new(), Vec::new());
    for b in &config.benchmarks {
        let (missing, elsewhere) = missing_programs(b);
        problems.extend(missing);
        match only_local {
            true => problems.extend(elsewhere),
            false => doubts.extend(
                elsewhere
                    .into_iter()
                    .map(|what| format!("{what} here; the workers must have it")),
            ),
        }
    }
    problems.extend(
        config
            .experiments
            .iter()
            .flat_map(missing_files_of_experiment),
    );
    problems.extend(config.workers.iter().flat_map(missing_files_of_worker));
    (problems, doubts)
}

/// A benchmark's sources folder where it is not there; else its build's and run's programs
/// found neither in it nor on this machine's `PATH` (a worker elsewhere may have them).
fn missing_programs(b: &BenchmarkSpec) -> (Vec<String>, Vec<String>) {
    let field = |f: &str| format!("benchmark {}: ({f} ...)", b.name);
    if !b.sources.is_dir() {
        let what = format!("{}: no folder {}", field("sources"), b.sources.display());
        return (vec![what], Vec::new());
    }
    let mut elsewhere = Vec::new();
    // A run's program that the build makes (`./bench`) is not there before it.
    for (name, program) in [("build", b.build.first()), ("run", b.run.first())] {
        let Some(program) = program else { continue };
        let built = name == "run" && !b.build.is_empty() && program.contains('/');
        if !built && !findable(program, &b.sources) {
            elsewhere.push(format!(
                "{}: program '{program}' is neither in {} nor on PATH",
                field(name),
                b.sources.display()
            ));
        }
    }
    (Vec::new(), elsewhere)
}

/// The files an experiment names that are not there: its baseline file, its screening's
/// effects table.
fn missing_files_of_experiment(e: &Experiment) -> Vec<String> {
    let baseline = match &e.baseline {
        Some(Start::File(path)) => Some(("baseline", path)),
        _ => None,
    };
    let skip = match &e.search {
        Search::Screening(s) => s.skip_measured.as_ref().map(|p| ("skip-measured", p)),
        _ => None,
    };
    baseline
        .into_iter()
        .chain(skip)
        .filter(|(_, path)| !path.is_file())
        .map(|(field, path)| {
            format!(
                "experiment {}: ({field} ...): no file {}",
                e.name,
                path.display()
            )
        })
        .collect()
}

/// The files an SSH worker names that are not there.
fn missing_files_of_worker(w: &WorkerSpec) -> Vec<String> {
    let WorkerSpec::Ssh(ssh) = w else {
        return Vec::new();
    };
    [
        ("identity", &ssh.identity),
        ("known-hosts", &ssh.known_hosts),
        ("worker-binary", &ssh.worker_binary),
    ]
    .into_iter()
    .filter_map(|(field, path)| Some((field, path.as_ref().filter(|p| !p.is_file())?)))
    .map(|(field, path)| {
        format!(
            "worker {}: ({field} ...): no file {}",
            ssh.name,
            path.display()
        )
    })
    .collect()
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
