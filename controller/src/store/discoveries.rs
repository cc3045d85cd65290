//! Discoveries kept beside a store: `kiln sites` discovers a benchmark once,
//! and `kiln run` (or the next `kiln sites`) takes its decision points from
//! the file instead of discovering again, which on a large program takes
//! minutes. A discovery is keyed by the bundle's content and the benchmark's
//! spec: changed sources or build settings discover anew.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use kiln_protocol::config::BenchmarkSpec;
use kiln_protocol::message::Discovery;
use kiln_protocol::ContentHash;

use super::layout;

/// What identifies a discovery: the bundle and the benchmark's spec.
fn key(bundle: &ContentHash, spec: &BenchmarkSpec) -> ContentHash {
    let mut bytes = bundle.0.to_vec();
    bytes.extend(serde_json::to_vec(spec).unwrap_or_default());
    ContentHash::of(&bytes)
}

/// The kept discovery of `spec` with `bundle`, and its file; `None` if none
/// is kept (or it cannot be read, which only means discovering again).
pub fn load(
    store: &Path,
    bundle: &ContentHash,
    spec: &BenchmarkSpec,
) -> Option<(Discovery, PathBuf)> {
    let path = layout::discovery(store, &key(bundle, spec));
    let bytes = std::fs::read(&path).ok()?;
    match serde_json::from_slice(&bytes) {
        Ok(d) => Some((d, path)),
        Err(e) => {
            tracing::warn!("ignoring {}: {e}", path.display());
            None
        }
    }
}

/// Keeps a discovery (written whole, then renamed into place).
pub fn save(
    store: &Path,
    bundle: &ContentHash,
    spec: &BenchmarkSpec,
    discovery: &Discovery,
) -> Result<PathBuf> {
    let key = key(bundle, spec);
    let (path, tmp) = (
        layout::discovery(store, &key),
        layout::discovery_tmp(store, &key),
    );
    let dir = layout::discoveries(store);
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    std::fs::write(&tmp, serde_json::to_vec(discovery)?)
        .with_context(|| format!("cannot write {}", tmp.display()))?;
    std::fs::rename(&tmp, &path).with_context(|| format!("cannot write {}", path.display()))?;
    Ok(path)
}
