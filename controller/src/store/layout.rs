//! Every name kiln gives to something it keeps: the database's keys and the
//! files and folders in and beside a store. Nothing else spells them, so a
//! change of layout is a change of this file (and of `SCHEMA_VERSION`).
//!
//! | key | value |
//! |-----|-------|
//! | `meta/schema` | layout version (`SCHEMA_VERSION`) |
//! | `meta/config` | normalized config text |
//! | `meta/created-ms` | creation time |
//! | `exp/<experiment>` | `ExperimentInfo`: decision points, baseline, references |
//! | `chain/<experiment>/<chain>` | `ChainState`, its measured sets counted (an older kiln's held them), its sets against its experiment's start since layout 7 (`compact.rs`) |
//! | `chainsets/<experiment>/<chain>/<block>` | the sets the chain measured, with their objectives (`ChainState::sets`), 16 to a block, each written in the batch of the step that measures it (again when measured again); layout 5 on |
//! | `chainset/<experiment>/<chain>/<hash>` | layouts up to 4: one such set |
//! | `steps/<experiment>/<chain>/<block>` | the decided steps `16 × block` on, each a `StepRecord` (`blocks.rs`); layout 5 on |
//! | `steps/manual:<benchmark>/000000/<block>` | steps measured by `kiln benchmark --store` (no chain state) |
//! | `rows/<experiment>/<chain>/<block>` | the `StepSummary` of each of those steps (binary), in its batch |
//! | `step/<experiment>/<chain>/<step>` | layouts 1–4: a `StepRecord`, decided (the name readers still give it) |
//! | `row/<experiment>/<chain>/<step>` | layouts 2–4: its `StepSummary` |
//! | `result/<experiment>/<chain>/<step>` | `StepRecord` measured, not yet decided |
//! | `set/<hash>` | a `DecisionSet` that decided steps' decisions are written against (`compact.rs`); layout 3 on |
//! | `fingerprint/<hash>` | `Capabilities` of a worker, by content hash |
//! | `failed/<experiment>` | why the experiment's preparation failed (its discovery or baseline); cleared when a later run prepares it |
//! | `metrics/<experiment>` | the metrics found in the experiment's decided steps (summaries and runs), kept in the batch of the step that adds one; the export's columns (stores written before it was kept have none, and are scanned) |
//!
//! Keys are readable, `/`-separated and zero-padded so that sled's byte order
//! is step order.
//!
//! A decided step's value is its `StepRecord`'s JSON with a `checksum` field
//! put first (`checksum.rs`); steps written before kiln kept one have none.
//! From layout 3 on, its decisions are those that differ from the set its
//! `base` field names (`compact.rs`), and sled compresses the database's
//! pages (zstd); a writer migrates an older store when it opens it
//! (`migrate.rs`), building the new database beside the old one. From
//! layout 4 on, a step whose summaries its runs give is stored without them
//! (`"summary_of_runs":true` after its base); a layout-3 store is one of
//! layout 4 as it is. From layout 5 on, steps and their rows are kept 16 to a
//! key (`blocks.rs`): sled keeps a table of every page in memory, so a key a
//! step made opening a store cost memory in proportion to its steps.
//!
//! Beside the database, the high-water file (`high-water`, `marks.rs`) keeps
//! how many steps each chain had decided, so that steps lost from the
//! database are still known to have been decided. A controller that ends
//! seals its status report there too (`status-sealed.json`), for `kiln
//! status` to read without opening the database until a writer opens it.

use std::path::{Path, PathBuf};

use kiln_protocol::ContentHash;

use super::StepKey;

/// The layout version.
pub const SCHEMA: &str = "meta/schema";
/// The normalized config text.
pub const CONFIG: &str = "meta/config";
/// When the store was created.
pub const CREATED_MS: &str = "meta/created-ms";

/// Prefix of the experiments' infos.
pub const EXPERIMENTS: &str = "exp/";
/// Prefix of the decided steps, one a key (layouts 1–4; the name of one within a block).
pub const STEPS: &str = "step/";
/// Prefix of the export rows, one a key (layouts 2–4; the name of one within a block).
pub const ROWS: &str = "row/";
/// Prefix of the blocks of decided steps (layout 5 on).
pub const STEP_BLOCKS: &str = "steps/";
/// Prefix of the blocks of export rows (layout 5 on).
pub const ROW_BLOCKS: &str = "rows/";
/// Prefix of the measured, undecided steps.
pub const RESULTS: &str = "result/";

/// Prefix of the experiments that hold manual steps. The `:` keeps manual
/// experiments out of every `step/<name>/` prefix of a configured experiment.
pub const MANUAL_PREFIX: &str = "manual:";

/// The experiment that holds the manual steps of `benchmark`.
pub fn manual_experiment(benchmark: &str) -> String {
    format!("{MANUAL_PREFIX}{benchmark}")
}

/// The benchmark of a manual experiment; `None` for a configured experiment.
pub fn manual_benchmark(experiment: &str) -> Option<&str> {
    experiment.strip_prefix(MANUAL_PREFIX)
}

/// `exp/<experiment>`.
pub fn experiment_key(experiment: &str) -> String {
    format!("{EXPERIMENTS}{experiment}")
}

/// The experiment named by an `exp/…` key.
pub fn experiment_of_key(key: &str) -> &str {
    key.trim_start_matches(EXPERIMENTS)
}

/// Prefix of the chain states.
pub const CHAINS: &str = "chain/";

/// `chain/<experiment>/<chain>`.
pub fn chain_key(experiment: &str, chain: u32) -> String {
    format!("{CHAINS}{experiment}/{chain:06}")
}

/// Prefix of the decision sets each chain measured, one key a set (layouts up to 4;
/// the name of one within a block, by its number).
pub const CHAIN_SETS: &str = "chainset/";
/// Prefix of the blocks of the sets each chain measured (layout 5 on).
pub const CHAIN_SET_BLOCKS: &str = "chainsets/";

/// `chainset/<experiment>/<chain>/<n>`: the `n`th set chain `chain` wrote.
pub fn chain_set_entry(experiment: &str, chain: u32, n: u32) -> String {
    format!("{CHAIN_SETS}{}{n:09}", chain_suffix(experiment, chain))
}

/// The experiment and chain of a `chain/…` key.
pub fn chain_of_key(key: &str) -> Option<(&str, u32)> {
    let (experiment, chain) = key.strip_prefix(CHAINS)?.rsplit_once('/')?;
    Some((experiment, chain.parse().ok()?))
}

/// The experiment, chain and step of a `step/…` key.
pub fn step_of_key(key: &str) -> Option<(&str, u32, u32)> {
    let (chain, step) = key.strip_prefix(STEPS)?.rsplit_once('/')?;
    let (experiment, chain) = chain.rsplit_once('/')?;
    Some((experiment, chain.parse().ok()?, step.parse().ok()?))
}

/// `<experiment>/<chain>/<step>`, the part of a step's keys after the prefix.
pub fn step_suffix(key: &StepKey) -> String {
    format!("{}/{:06}/{:09}", key.experiment, key.chain, key.step)
}

/// `step/<experiment>/<chain>/<step>`.
pub fn step_key(key: &StepKey) -> String {
    format!("{STEPS}{}", step_suffix(key))
}

/// `row/<experiment>/<chain>/<step>`.
pub fn row_key(key: &StepKey) -> String {
    format!("{ROWS}{}", step_suffix(key))
}

/// `result/<experiment>/<chain>/<step>`.
pub fn result_key(key: &StepKey) -> String {
    format!("{RESULTS}{}", step_suffix(key))
}

/// What follows `step/` or `row/` in the keys of one chain's steps.
pub fn chain_suffix(experiment: &str, chain: u32) -> String {
    format!("{experiment}/{chain:06}/")
}

/// `fingerprint/<hash>`.
pub fn fingerprint_key(hash: &ContentHash) -> String {
    format!("fingerprint/{hash}")
}

/// Prefix of the experiments whose preparation failed (discovery, the
/// baseline), each with why; a later run tries them again.
pub const FAILED: &str = "failed/";

/// `set/<hash>`.
pub fn set_key(hash: &ContentHash) -> String {
    format!("set/{hash}")
}

/// `profile/<hash>`: an experiment's reference profile, which its steps'
/// functions are written against.
pub fn profile_key(hash: &ContentHash) -> String {
    format!("profile/{hash}")
}

/// `failed/<experiment>`.
pub fn failed_key(experiment: &str) -> String {
    format!("{FAILED}{experiment}")
}

/// `metrics/<experiment>`.
pub fn metrics_key(experiment: &str) -> String {
    format!("metrics/{experiment}")
}

/// A step's artifact: the tail of its build log.
pub const BUILD_LOG: &str = "build-log";
/// A step's artifact: the replay file its build used.
pub const REPLAY_FILE: &str = "replay-file";

// Files and folders in a store's folder.

/// The sled database's folder.
pub fn db(store: &Path) -> PathBuf {
    store.join("db")
}

/// sled's data file in it: there is a database only where it exists.
pub fn db_file(store: &Path) -> PathBuf {
    db(store).join("db")
}

/// sled's record of how it stores the database (whether pages are compressed).
pub fn db_conf(store: &Path) -> PathBuf {
    db(store).join("conf")
}

/// The database of the current layout while a migration builds it.
pub fn db_migrating(store: &Path) -> PathBuf {
    store.join("db.migrating")
}

/// That database, complete, before it takes the old one's place.
pub fn db_migrated(store: &Path) -> PathBuf {
    store.join("db.migrated")
}

/// The old database while the migrated one takes its place.
pub fn db_replaced(store: &Path) -> PathBuf {
    store.join("db.replaced")
}

/// How many steps each chain had decided, one line per update
/// (`<experiment>\t<chain>\t<count>`; the last line of a chain counts).
pub fn high_water(store: &Path) -> PathBuf {
    store.join("high-water")
}

/// The high-water file while it is rewritten.
pub fn high_water_tmp(store: &Path) -> PathBuf {
    store.join(".high-water.tmp")
}

/// Who holds the store (`pid N on HOST`), for the refusal message of others.
pub fn holder(store: &Path) -> PathBuf {
    store.join("controller.pid")
}

/// Build logs and replay files, by content hash.
pub fn artifacts(store: &Path) -> PathBuf {
    store.join("artifacts")
}

/// An artifact's file.
pub fn artifact(store: &Path, hash: &ContentHash) -> PathBuf {
    artifacts(store).join(format!("{hash}.txt"))
}

/// An artifact's file while it is written.
pub fn artifact_tmp(store: &Path, hash: &ContentHash) -> PathBuf {
    artifacts(store).join(format!(".{hash}.tmp"))
}

/// The running controller's status report.
pub fn status_snapshot(store: &Path) -> PathBuf {
    store.join("status.json")
}

/// The status report while it is written.
pub fn status_snapshot_tmp(store: &Path) -> PathBuf {
    store.join(".status.json.tmp")
}

/// The report a controller left as it ended, read instead of the store while no
/// writer opened it since (see `campaign::status::seal`).
pub fn sealed_status(store: &Path) -> PathBuf {
    store.join("status-sealed.json")
}

/// The sealed report while it is written.
pub fn sealed_status_tmp(store: &Path) -> PathBuf {
    store.join(".status-sealed.json.tmp")
}

/// What is kept beside a store (see `store::kept`), one folder each.
#[derive(Debug, Clone, Copy)]
pub enum Kept {
    /// Discoveries (`kiln sites`, `kiln run`).
    Discovery,
    /// Reference measurements of experiments' preparation.
    References,
}

/// The folder of one kind of kept work.
pub fn kept_folder(store: &Path, kind: Kept) -> PathBuf {
    store.join(match kind {
        Kept::Discovery => "discoveries",
        Kept::References => "references",
    })
}

/// The kept file of `kind` whose inputs hash to `key`.
pub fn kept(store: &Path, kind: Kept, key: &ContentHash) -> PathBuf {
    kept_folder(store, kind).join(format!("{key}.json"))
}

/// A kept file while it is written.
pub fn kept_tmp(store: &Path, kind: Kept, key: &ContentHash) -> PathBuf {
    kept_folder(store, kind).join(format!(".{key}.json.tmp"))
}

/// The steps table a finished campaign leaves beside its store.
pub fn steps_csv(store: &Path) -> PathBuf {
    store.join("steps.csv")
}

/// The campaign's log.
pub fn log(store: &Path) -> PathBuf {
    store.join("kiln.log")
}

/// The local workers' folders.
pub fn local_workers(store: &Path) -> PathBuf {
    store.join("workers")
}

/// The best decision files of the chains.
pub fn best_dir(store: &Path) -> PathBuf {
    store.join("best")
}

/// The best decision file of a chain.
pub fn best_file(store: &Path, experiment: &str, chain: u32) -> PathBuf {
    best_dir(store).join(format!("{}-chain{chain}.sexp", file_stem(experiment)))
}

/// Where `kiln rewards` writes by default.
pub fn rewards_dir(store: &Path) -> PathBuf {
    store.join("rewards")
}

/// The rewards table in a rewards folder.
pub fn rewards_table(dir: &Path) -> PathBuf {
    dir.join("rewards.csv")
}

/// The best decision file `kiln rewards` writes for an experiment, only where
/// its proposal measured no worse than stock and the best step.
pub fn rewards_best_file(dir: &Path, experiment: &str) -> PathBuf {
    dir.join(format!("{}.best.sexp", file_stem(experiment)))
}

/// The model's proposal for an experiment, labelled with what became of it.
pub fn rewards_proposal_file(dir: &Path, experiment: &str) -> PathBuf {
    dir.join(format!("{}.proposal.sexp", file_stem(experiment)))
}

/// The best measured step's decisions, where the store's best file of its chain holds others.
pub fn rewards_best_step_file(dir: &Path, experiment: &str) -> PathBuf {
    dir.join(format!("{}.best-step.sexp", file_stem(experiment)))
}

/// Where `kiln report` writes by default.
pub fn report_dir(store: &Path) -> PathBuf {
    store.join("report")
}

/// Where `kiln run --force-new` moves an old store.
pub fn aside(store: &Path, now_ms: u64) -> PathBuf {
    PathBuf::from(format!("{}.old-{now_ms}", store.display()))
}

/// Every file and folder a store keeps in its folder, the database last:
/// what `--force-new` moves aside when the folder holds other things too.
pub fn own_entries(store: &Path) -> Vec<PathBuf> {
    vec![
        high_water(store),
        high_water_tmp(store),
        holder(store),
        artifacts(store),
        status_snapshot(store),
        status_snapshot_tmp(store),
        kept_folder(store, Kept::Discovery),
        kept_folder(store, Kept::References),
        steps_csv(store),
        log(store),
        local_workers(store),
        best_dir(store),
        rewards_dir(store),
        report_dir(store),
        db_migrating(store),
        db_migrated(store),
        db_replaced(store),
        db(store),
    ]
}

/// `dir/name`, refused unless `name` is one safe path component. Configs are
/// checked when read; this keeps a name from a store an older kiln wrote (or
/// from a bug) from reaching outside `dir`.
pub fn child(dir: &Path, name: &str) -> anyhow::Result<PathBuf> {
    match kiln_protocol::decode::unsafe_name(name) {
        None => Ok(dir.join(name)),
        Some(why) => anyhow::bail!(
            "'{name}' cannot name a file or folder in {}: {why}",
            dir.display()
        ),
    }
}

/// A name made safe as part of a file name: no separators, so with the
/// suffix every caller adds, it cannot leave its folder.
pub fn file_stem(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_stay_in_their_folder() {
        let store = Path::new("/s");
        for bad in ["../x", "/abs", "a/b", "..", ".", ""] {
            let err = child(store, bad).unwrap_err().to_string();
            assert!(err.starts_with(&format!("'{bad}' cannot name")), "{err}");
            // Names made into file names lose their separators instead.
            let best = best_file(store, bad, 0);
            assert_eq!(best.parent(), Some(Path::new("/s/best")), "{bad}");
            let rewards = rewards_best_file(store, bad);
            assert_eq!(rewards.parent(), Some(store), "{bad}");
        }
        assert_eq!(child(store, "w-1").unwrap(), Path::new("/s/w-1"));
    }
}
