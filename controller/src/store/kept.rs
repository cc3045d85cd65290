//! Work kept beside a store, so that a restart does not redo it, each piece
//! in a file of its own keyed by what it depends on:
//!
//! - discoveries: `kiln sites` (or `kiln run`, `kiln benchmark`, `kiln
//!   policy`) discovers a benchmark once, and the others (or the next of the
//!   same) take its decision points from the file instead of discovering
//!   again, which on a large program takes minutes. Keyed by the
//!   bundle's content and the benchmark's spec (less the path of its
//!   sources): changed sources or build settings discover anew.
//! - reference measurements (the baseline's repeats, inline-nothing) of an
//!   experiment's preparation, saved as each one lands: a controller stopped
//!   during preparation resumes it instead of starting over. Keyed by the
//!   experiment and the whole step request (sources, decisions, runs,
//!   metrics), so a changed setting measures anew.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use serde::de::DeserializeOwned;
use serde::Serialize;

use kiln_protocol::config::BenchmarkSpec;
use kiln_protocol::message::{Discovery, StepRequest, StepResult};
use kiln_protocol::ContentHash;

use super::layout::{self, Kept};

/// What identifies a discovery: the bundle and the benchmark's spec.
fn discovery_key(bundle: &ContentHash, spec: &BenchmarkSpec) -> ContentHash {
    // The sources by their content (the bundle), not by the path they were read
    // from: a config given as `prod-configs/x.sexp` or by its absolute path, or
    // read by another command, names one folder two ways.
    let spec = BenchmarkSpec {
        sources: PathBuf::new(),
        ..spec.clone()
    };
    let mut bytes = bundle.0.to_vec();
    bytes.extend(serde_json::to_vec(&spec).unwrap_or_default());
    ContentHash::of(&bytes)
}

/// The kept discovery of `spec` with `bundle`, and its file; `None` if none
/// is kept (or it cannot be read, which only means discovering again).
pub fn load_discovery(
    store: &Path,
    bundle: &ContentHash,
    spec: &BenchmarkSpec,
) -> Option<(Discovery, PathBuf)> {
    load(store, Kept::Discovery, &discovery_key(bundle, spec))
}

/// Keeps a discovery.
pub fn save_discovery(
    store: &Path,
    bundle: &ContentHash,
    spec: &BenchmarkSpec,
    discovery: &Discovery,
) -> Result<PathBuf> {
    save(
        store,
        Kept::Discovery,
        &discovery_key(bundle, spec),
        discovery,
    )
}

/// What identifies the measurements of one reference of an experiment.
fn references_key(experiment: &str, request: &StepRequest) -> ContentHash {
    let mut bytes = experiment.as_bytes().to_vec();
    bytes.push(0);
    bytes.extend(serde_json::to_vec(request).unwrap_or_default());
    ContentHash::of(&bytes)
}

/// The measurements of `request` kept for `experiment`, in the order they landed.
pub fn load_references(store: &Path, experiment: &str, request: &StepRequest) -> Vec<StepResult> {
    load(
        store,
        Kept::References,
        &references_key(experiment, request),
    )
    .map(|(kept, _)| kept)
    .unwrap_or_default()
}

/// Keeps the measurements of `request` for `experiment` (all of them so far).
pub fn save_references(
    store: &Path,
    experiment: &str,
    request: &StepRequest,
    results: &[StepResult],
) -> Result<PathBuf> {
    save(
        store,
        Kept::References,
        &references_key(experiment, request),
        &results,
    )
}

fn load<T: DeserializeOwned>(store: &Path, kind: Kept, key: &ContentHash) -> Option<(T, PathBuf)> {
    let path = layout::kept(store, kind, key);
    let bytes = std::fs::read(&path).ok()?;
    match serde_json::from_slice(&bytes) {
        Ok(d) => Some((d, path)),
        Err(e) => {
            tracing::warn!("ignoring {}: {e}", path.display());
            None
        }
    }
}

/// Writes a kept file whole, then renames it into place: a reader (or a
/// restart after a kill) sees the old file or the new one, never a part.
fn save<T: Serialize>(store: &Path, kind: Kept, key: &ContentHash, value: &T) -> Result<PathBuf> {
    let (path, tmp) = (
        layout::kept(store, kind, key),
        layout::kept_tmp(store, kind, key),
    );
    let dir = layout::kept_folder(store, kind);
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    std::fs::write(&tmp, serde_json::to_vec(value)?)
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, &path).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One benchmark read through a relative and an absolute config path has one discovery.
    #[test]
    fn a_discovery_is_keyed_by_the_sources_contents_not_their_path() {
        let config = kiln_protocol::CampaignConfig::read(Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../prod-configs/quickstart.sexp"
        )))
        .unwrap();
        let spec = config.benchmarks[0].clone();
        let elsewhere = BenchmarkSpec {
            sources: PathBuf::from("bench-programs/sample-dsp"),
            ..spec.clone()
        };
        let bundle = ContentHash::of(b"sources");
        assert_eq!(
            discovery_key(&bundle, &spec),
            discovery_key(&bundle, &elsewhere)
        );
        let other = BenchmarkSpec {
            build: vec!["make".into()],
            ..spec.clone()
        };
        assert_ne!(
            discovery_key(&bundle, &spec),
            discovery_key(&bundle, &other)
        );
    }
}
