//! kiln-worker on an SSH worker: the local binary to send, the remote one's
//! hash compared, and an upload that is bounded by its size (never by a
//! fixed timeout) and renamed into place.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};
use tokio::time::timeout;

use kiln_protocol::gpu_trace::INJECTION_LIBRARY;

use super::*;

/// Identity of a file's content for the hash cache: device, inode, length, modification time.
pub(super) type FileStamp = (u64, u64, u64, i64, i64);

pub(super) fn stamp(md: &std::fs::Metadata) -> FileStamp {
    (md.dev(), md.ino(), md.len(), md.mtime(), md.mtime_nsec())
}

/// A local file's hash for its stamp, and its bytes while an upload still holds them.
struct Known {
    stamp: FileStamp,
    hash: String,
    bytes: Weak<Vec<u8>>,
}

/// What is known of a local file: its hash and bytes, as `local_binary` returns them.
type Found = (Option<Arc<Vec<u8>>>, String);

/// SHA-256 of a local file (and its bytes when `with_bytes`). Hashes are cached per process
/// while the file's stamp is unchanged: every worker of a campaign deploys the same binary.
/// One caller reads at a time, and uploads at the same time share one copy of the bytes,
/// dropped when the last is done: sixteen workers connecting together each read a 38 MB
/// binary before (600 MB at once).
pub(in crate::dispatch) async fn local_binary(path: &Path, with_bytes: bool) -> Result<Found> {
    static READING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let file_stamp = || async {
        tokio::fs::metadata(path)
            .await
            .map(|md| stamp(&md))
            .with_context(|| format!("{}", path.display()))
    };
    let before = file_stamp().await?;
    if let Some(found) = known(path, before, with_bytes) {
        return Ok(found);
    }
    let _reading = READING.lock().await;
    if let Some(found) = known(path, before, with_bytes) {
        return Ok(found);
    }
    let owned = path.to_path_buf();
    let (bytes, hash) = tokio::task::spawn_blocking(move || read_and_hash(&owned, with_bytes))
        .await?
        .with_context(|| format!("{}", path.display()))?;
    let bytes = bytes.map(Arc::new);
    if file_stamp().await? == before {
        let known = Known {
            stamp: before,
            hash: hash.clone(),
            bytes: bytes.as_ref().map_or_else(Weak::new, Arc::downgrade),
        };
        known_files()
            .lock()
            .expect("hash cache")
            .insert(path.to_path_buf(), known);
    }
    Ok((bytes, hash))
}

fn known_files() -> &'static Mutex<HashMap<PathBuf, Known>> {
    static CACHE: OnceLock<Mutex<HashMap<PathBuf, Known>>> = OnceLock::new();
    CACHE.get_or_init(Default::default)
}

/// What the cache knows of `path` as of `stamp`: its hash, with the bytes if asked for
/// (and an upload still holds them).
fn known(path: &Path, stamp: FileStamp, with_bytes: bool) -> Option<Found> {
    let cache = known_files().lock().expect("hash cache");
    let known = cache.get(path).filter(|k| k.stamp == stamp)?;
    match (with_bytes, known.bytes.upgrade()) {
        (false, _) => Some((None, known.hash.clone())),
        (true, Some(bytes)) => Some((Some(bytes), known.hash.clone())),
        (true, None) => None,
    }
}

/// The file's SHA-256, streamed, and its bytes when `with_bytes` (the hash is then of exactly
/// the bytes returned).
fn read_and_hash(path: &Path, with_bytes: bool) -> std::io::Result<(Option<Vec<u8>>, String)> {
    if with_bytes {
        let bytes = std::fs::read(path)?;
        let hash = sha256_hex(&bytes);
        return Ok((Some(bytes), hash));
    }
    let mut hasher = Sha256::new();
    std::io::copy(&mut std::fs::File::open(path)?, &mut hasher)?;
    Ok((None, hex(&hasher.finalize())))
}

/// SHA-256 of a remote file, `None` when it does not exist.
pub(super) async fn remote_sha256(
    link: &Link,
    who: &Who,
    path: &str,
    limit: Duration,
) -> Result<Option<String>> {
    let mut hashes = remote_sha256s(link, who, &[path.to_string()], limit).await?;
    Ok(hashes.pop().flatten())
}

/// SHA-256 of remote files, `None` for each that does not exist: one `sha256sum` for them
/// all (each remote command is a round trip and a login shell started on the worker).
pub(super) async fn remote_sha256s(
    link: &Link,
    who: &Who,
    paths: &[String],
    limit: Duration,
) -> Result<Vec<Option<String>>> {
    let args: Vec<&str> = std::iter::once("--")
        .chain(paths.iter().map(String::as_str))
        .collect();
    let out = remote_output(link, who, "sha256sum", &args, limit).await?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    let missing_only = !stderr.trim().is_empty()
        && (stderr.lines()).all(|line| line.contains("No such file or directory"));
    if !out.exit.success() && !missing_only {
        return Err(who.err(format!(
            "cannot hash {} on the worker ({}): {}",
            paths.join(", "),
            out.exit,
            stderr.trim()
        )));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut found = HashMap::new();
    for line in stdout.lines() {
        let (hash, path) = sha256sum_line(line)
            .ok_or_else(|| who.err(format!("unexpected sha256sum output: {:?}", stdout.trim())))?;
        found.insert(path, hash);
    }
    Ok(paths.iter().map(|path| found.remove(path)).collect())
}

/// A line of `sha256sum`: the hash (lowercase) and the file's name, unescaped (a name with a
/// backslash or a newline starts its line with a backslash and has them escaped).
fn sha256sum_line(line: &str) -> Option<(String, String)> {
    let (escaped, line) = match line.strip_prefix('\\') {
        Some(rest) => (true, rest),
        None => (false, line),
    };
    let (hash, name) = line.split_at_checked(64)?;
    let name = name
        .strip_prefix("  ")
        .or_else(|| name.strip_prefix(" *"))?;
    if !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let name = match escaped {
        true => unescape(name),
        false => name.to_string(),
    };
    Some((hash.to_ascii_lowercase(), name))
}

/// A name as `sha256sum` escapes it (`\\` a backslash, `\n` a newline), as it is.
fn unescape(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    let mut chars = name.chars();
    while let Some(c) = chars.next() {
        let escaped = if c == '\\' { chars.next() } else { None };
        out.push(match escaped {
            Some('n') => '\n',
            Some(other) => other,
            None => c,
        });
    }
    out
}

/// Where files are deployed: a worker's rundir over one connection.
pub(super) struct Deploy<'a> {
    pub(super) link: &'a Link,
    pub(super) who: &'a Who,
    pub(super) rundir: &'a str,
    pub(super) limit: Duration,
}

impl Deploy<'_> {
    /// SHA-256 of a local file to deploy.
    pub(super) async fn hash(&self, path: &Path) -> Result<String> {
        let (_, hash) = local_binary(path, false)
            .await
            .map_err(|e| self.cant_read(path, e))?;
        Ok(hash)
    }

    /// Makes `<rundir>/kiln-worker` the worker binary `binary` (SHA-256 `local_hash`, updated
    /// to the bytes sent), and `<rundir>/libkiln_cupti.so` the GPU injection library beside it
    /// where there is one (GPU time needs it there; without it GPU metrics are unsupported
    /// there, as on a machine without CUDA), both hashed on the worker by one command; whether
    /// it uploaded the binary.
    pub(super) async fn worker(&self, binary: &Path, local_hash: &mut String) -> Result<bool> {
        let library = binary.with_file_name(INJECTION_LIBRARY);
        let library = library.is_file().then_some(library);
        let names = [
            Some(WORKER_FILE),
            library.as_ref().map(|_| INJECTION_LIBRARY),
        ];
        let remote: Vec<String> = (names.iter().flatten())
            .map(|name| remote_join(self.rundir, name))
            .collect();
        let (link, who) = (self.link, self.who);
        let mut remote_hashes = remote_sha256s(link, who, &remote, self.limit)
            .await?
            .into_iter();
        let uploaded = (self.file(
            binary,
            WORKER_FILE,
            local_hash,
            remote_hashes.next().flatten(),
        ))
        .await?;
        if let Some(library) = library {
            let mut library_hash = self.hash(&library).await?;
            let remote_hash = remote_hashes.next().flatten();
            (self.file(&library, INJECTION_LIBRARY, &mut library_hash, remote_hash)).await?;
        }
        Ok(uploaded)
    }

    pub(super) fn cant_read(&self, path: &Path, e: anyhow::Error) -> anyhow::Error {
        self.who
            .err(format!("cannot read {} to deploy: {e:#}", path.display()))
    }

    /// Makes `<rundir>/<name>` a copy of the local file `path` whose SHA-256 is `local_hash`
    /// (updated to the bytes sent), uploading it when missing (`remote_hash` `None`) or
    /// different; whether it uploaded.
    async fn file(
        &self,
        path: &Path,
        name: &str,
        local_hash: &mut String,
        remote_hash: Option<String>,
    ) -> Result<bool> {
        let remote_path = remote_join(self.rundir, name);
        let (link, who, limit) = (self.link, self.who, self.limit);
        if remote_hash.as_deref() == Some(local_hash.as_str()) {
            tracing::debug!(worker = %who.name, "{remote_path} is up to date ({local_hash})");
            return Ok(false);
        }
        // Hash exactly the bytes we send (the file may have been rebuilt since).
        let (bytes, hash) = local_binary(path, true)
            .await
            .map_err(|e| self.cant_read(path, e))?;
        let bytes = bytes.expect("asked for the bytes");
        *local_hash = hash;
        if remote_hash.as_deref() == Some(local_hash.as_str()) {
            return Ok(false);
        }
        tracing::info!(
            worker = %who.name,
            remote = remote_hash.as_deref().unwrap_or("missing"),
            local = %local_hash,
            "deploying {} ({} bytes) to {}:{remote_path}",
            path.display(),
            bytes.len(),
            who.addr
        );
        upload(link, who, self.rundir, name, &bytes, local_hash, limit).await?;
        Ok(true)
    }
}

/// mkdir -p, stream to a temporary name with dd, verify its hash, chmod, rename into
/// `<rundir>/<name>`.
pub(super) async fn upload(
    link: &Link,
    who: &Who,
    rundir: &str,
    name: &str,
    bytes: &[u8],
    local_hash: &str,
    limit: Duration,
) -> Result<()> {
    remote_run(link, who, "mkdir", &["-p", "--", rundir], limit).await?;
    let final_path = remote_join(rundir, name);
    let tmp = remote_join(
        rundir,
        &format!(".{name}.upload-{}-{}", std::process::id(), nanos()),
    );
    let res = upload_to(link, who, &tmp, &final_path, bytes, local_hash, limit).await;
    if res.is_err() {
        // Best effort: the link may be what failed.
        let _ = timeout(limit, link.output(&["rm", "-f", "--", &tmp], &[])).await;
    }
    res
}

pub(super) async fn upload_to(
    link: &Link,
    who: &Who,
    tmp: &str,
    final_path: &str,
    bytes: &[u8],
    local_hash: &str,
    limit: Duration,
) -> Result<()> {
    let upload_limit = limit + Duration::from_secs(bytes.len() as u64 / UPLOAD_MIN_RATE);
    let transfer = write_remote(link, who, tmp, bytes);
    match timeout(upload_limit, transfer).await {
        Err(_) => {
            return Err(who.err(format!(
                "upload of {} bytes to {tmp} did not finish within {:.0} s",
                bytes.len(),
                upload_limit.as_secs_f64()
            )))
        }
        Ok(r) => r?,
    }
    match remote_sha256(link, who, tmp, limit).await? {
        Some(h) if h == local_hash => {}
        got => {
            return Err(who.err(format!(
                "upload hash mismatch: {tmp} has sha256 {} on the worker, the local binary {local_hash}",
                got.as_deref().unwrap_or("(file missing)")
            )))
        }
    }
    remote_run(link, who, "chmod", &["755", "--", tmp], limit).await?;
    remote_run(link, who, "mv", &["-f", "--", tmp, final_path], limit).await?;
    Ok(())
}

/// Writes `bytes` into the worker's file `tmp` through `dd` on its standard input.
async fn write_remote(link: &Link, who: &Who, tmp: &str, bytes: &[u8]) -> Result<()> {
    let of = format!("of={tmp}");
    let out = match link.output(&["dd", &of, "bs=1M"], bytes).await {
        Ok(out) => out,
        Err(LinkError::Missing) => return Err(who.missing("dd")),
        Err(LinkError::Broken(e)) => return Err(who.err(format!("upload to {tmp} broke off: {e}"))),
    };
    if !out.exit.success() {
        return Err(who.err(format!(
            "upload to {tmp} failed ({}): {}",
            out.exit,
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

/// Slowest upload rate tolerated (bytes per second) on top of `connect_timeout`.
pub(super) const UPLOAD_MIN_RATE: u64 = 1 << 20;

/// SHA-256 of a byte string, lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(digest: &[u8]) -> String {
    let mut s = String::with_capacity(2 * digest.len());
    for b in digest {
        let _ = write!(s, "{b:02x}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256sum_lines_are_read_with_their_names_as_they_are() {
        let hash = "E3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        let lower = hash.to_ascii_lowercase();
        let read = |line: &str| sha256sum_line(line);
        assert_eq!(
            read(&format!("{hash}  /w/kiln-worker")),
            Some((lower.clone(), "/w/kiln-worker".into()))
        );
        assert_eq!(
            read(&format!("{hash} *a b")),
            Some((lower.clone(), "a b".into()))
        );
        // A name with a backslash or a newline: its line starts with a backslash.
        let escaped = format!("\\{hash}  /w/x\\\\n\\ny");
        assert_eq!(read(&escaped), Some((lower, "/w/x\\n\ny".into())));
        assert_eq!(
            read("sha256sum: /w/kiln-worker: No such file or directory"),
            None
        );
        assert_eq!(read(&format!("{}  x", "g".repeat(64))), None);
    }

    #[tokio::test]
    async fn uploads_at_once_share_one_copy_of_the_binary_and_none_is_kept_after() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kiln-worker");
        std::fs::write(&path, b"a binary").unwrap();
        let (first, hash) = local_binary(&path, true).await.unwrap();
        let (second, again) = local_binary(&path, true).await.unwrap();
        let (first, second) = (first.unwrap(), second.unwrap());
        assert!(Arc::ptr_eq(&first, &second), "one copy while both upload");
        assert_eq!(hash, again);
        assert_eq!(hash, sha256_hex(b"a binary"));
        let kept = Arc::downgrade(&first);
        drop((first, second));
        assert!(
            kept.upgrade().is_none(),
            "the bytes are dropped after the last upload"
        );
        let (third, _) = local_binary(&path, true).await.unwrap();
        assert_eq!(third.unwrap().as_slice(), b"a binary");
        std::fs::write(&path, b"rebuilt").unwrap();
        let (none, rebuilt) = local_binary(&path, false).await.unwrap();
        assert!(none.is_none());
        assert_eq!(
            rebuilt,
            sha256_hex(b"rebuilt"),
            "streamed, of the file as it is now"
        );
    }
}
