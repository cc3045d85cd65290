//! Benchmark bundles: a benchmark's source folder packed for the workers.

use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;

use anyhow::{Context, Result};
use kiln_protocol::bundle::{Bundle, BundleFile};

/// Largest bundle kiln sends (sources and build files, not data sets).
const MAX_BUNDLE_BYTES: u64 = 48 << 20;

/// Sources kiln cannot send as they are (no files, too many bytes, a name
/// that is not UTF-8): bad input, which the user fixes, not a failure.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct BadSources(pub String);

/// Packs every regular file under `dir` (hidden files and folders skipped).
pub fn pack(dir: &Path) -> Result<Bundle> {
    let mut files = Vec::new();
    let mut total = 0u64;
    collect(dir, dir, &mut files, &mut total)
        .with_context(|| format!("cannot pack benchmark sources {}", dir.display()))?;
    if files.is_empty() {
        return Err(
            BadSources(format!("benchmark sources {} hold no files", dir.display())).into(),
        );
    }
    Ok(Bundle::new(files))
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<BundleFile>, total: &mut u64) -> Result<()> {
    let mut entries: Vec<_> = fs::read_dir(dir)
        .and_then(|entries| entries.collect::<Result<_, _>>())
        .with_context(|| format!("cannot read {}", dir.display()))?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name();
        if name.to_string_lossy().starts_with('.') {
            continue;
        }
        let path = entry.path();
        let meta = fs::symlink_metadata(&path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        if meta.is_dir() {
            collect(root, &path, out, total)?;
        } else if meta.is_file() {
            *total += meta.len();
            if *total > MAX_BUNDLE_BYTES {
                let why = format!("more than {} MiB of files", MAX_BUNDLE_BYTES >> 20);
                return Err(BadSources(why).into());
            }
            let rel = path.strip_prefix(root).expect("under root");
            let rel = rel.to_str().ok_or_else(|| {
                BadSources(format!(
                    "file name {} is not UTF-8 (workers get paths as UTF-8 text): rename it, \
                     or move it out of the sources",
                    rel.display()
                ))
            })?;
            out.push(BundleFile {
                path: rel.to_string(),
                executable: meta.permissions().mode() & 0o111 != 0,
                contents: fs::read(&path)
                    .with_context(|| format!("cannot read {}", path.display()))?,
                modified_ns: Some(meta.mtime() * 1_000_000_000 + meta.mtime_nsec()),
            });
        }
    }
    Ok(())
}
