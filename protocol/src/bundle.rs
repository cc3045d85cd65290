//! Benchmark sources as a worker receives them: a bundle of files named by the
//! hash of their contents, sent in resumable parts and stored once per
//! worker.

use serde::{Deserialize, Serialize};

use crate::decision::ContentHash;

/// The files of a benchmark, sent once per worker and cached by hash.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bundle {
    /// Hash over every file's path, mode and contents.
    pub hash: ContentHash,
    /// The files, relative paths only.
    pub files: Vec<BundleFile>,
}

/// One file of a bundle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BundleFile {
    /// Path relative to the bundle root, `/`-separated, no `..`.
    pub path: String,
    /// Whether the file is executable.
    pub executable: bool,
    /// The contents, hex-free: base64 on the wire.
    #[serde(with = "base64_bytes")]
    pub contents: Vec<u8>,
    /// When the file was last modified in the sources (nanoseconds since
    /// the epoch), so that a build system that compares times (make, with
    /// a package's shipped generated files) sees the files as they are
    /// there; not part of the hash (none from an older controller).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modified_ns: Option<i64>,
}

/// A part of a bundle: consecutive files in path order, small enough to be
/// stored between two heartbeats. A transfer cut off resumes at the first
/// part the worker lacks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BundlePart {
    /// The whole bundle's hash.
    pub hash: ContentHash,
    /// This part's index, from 0.
    pub index: u32,
    /// How many parts the bundle has.
    pub count: u32,
    /// The part's files.
    pub files: Vec<BundleFile>,
}

/// The hash of a bundle, fed its files in path order (the order of
/// [`Bundle::new`] and of a bundle read back from disk).
#[derive(Default)]
pub struct BundleHasher(blake3::Hasher);

impl BundleHasher {
    /// Adds a file: its path, mode and contents.
    pub fn add(&mut self, path: &str, executable: bool, contents: &[u8]) {
        self.0.update(path.as_bytes());
        self.0.update(&[0, u8::from(executable)]);
        self.0.update(&(contents.len() as u64).to_le_bytes());
        self.0.update(contents);
    }

    /// The hash of the files added.
    pub fn finish(&self) -> ContentHash {
        ContentHash(*self.0.finalize().as_bytes())
    }
}

/// Most bytes of file contents in one bundle part (base64 makes them a third more on the wire).
pub const PART_BYTES: usize = 4 << 20;
/// Most files in one bundle part: a worker writes a few thousand small files a second.
pub const PART_FILES: usize = 2048;

impl Bundle {
    /// Builds a bundle from files, computing the hash.
    pub fn new(mut files: Vec<BundleFile>) -> Self {
        files.sort_by(|a, b| a.path.cmp(&b.path));
        let mut hasher = BundleHasher::default();
        for f in &files {
            hasher.add(&f.path, f.executable, &f.contents);
        }
        Bundle {
            hash: hasher.finish(),
            files,
        }
    }

    /// The bundle cut into parts of at most [`PART_BYTES`] of contents and
    /// [`PART_FILES`] files (a larger file is a part of its own; a bundle
    /// without files is one empty part); always the same parts for the same
    /// bundle, so a transfer can resume.
    pub fn parts(&self) -> Vec<BundlePart> {
        let mut groups: Vec<Vec<BundleFile>> = vec![Vec::new()];
        let mut bytes = 0;
        for f in &self.files {
            let g = groups.last().expect("never empty");
            if g.len() >= PART_FILES || (!g.is_empty() && bytes + f.contents.len() > PART_BYTES) {
                groups.push(Vec::new());
                bytes = 0;
            }
            bytes += f.contents.len();
            groups.last_mut().expect("pushed").push(f.clone());
        }
        let count = groups.len() as u32;
        groups
            .into_iter()
            .enumerate()
            .map(|(index, files)| BundlePart {
                hash: self.hash,
                index: index as u32,
                count,
                files,
            })
            .collect()
    }

    /// Checks that the hash matches the files and that every path stays inside the bundle.
    pub fn validate(&self) -> Result<(), String> {
        for f in &self.files {
            if !is_confined_path(&f.path) {
                return Err(format!(
                    "bundle path '{}' escapes the bundle folder",
                    f.path
                ));
            }
        }
        let again = Bundle::new(self.files.clone());
        if again.hash != self.hash {
            return Err(format!(
                "bundle hash mismatch: announced {}, contents hash to {}",
                self.hash.short(),
                again.hash.short()
            ));
        }
        Ok(())
    }
}

/// Whether a relative path stays inside its root: no absolute path, no `..`.
pub fn is_confined_path(path: &str) -> bool {
    !path.is_empty()
        && !path.starts_with('/')
        && path
            .split('/')
            .all(|part| !part.is_empty() && part != ".." && part != ".")
}

mod base64_bytes {
    use base64::Engine;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn confined_paths() {
        assert!(is_confined_path("main.c"));
        assert!(is_confined_path("src/a.c"));
        assert!(!is_confined_path("../etc/passwd"));
        assert!(!is_confined_path("/etc/passwd"));
        assert!(!is_confined_path("a/../../b"));
        assert!(!is_confined_path(""));
    }

    #[test]
    fn bundle_parts_cover_the_files_in_order_within_their_bounds() {
        let file = |i: usize, len: usize| BundleFile {
            path: format!("f{i:05}"),
            executable: false,
            contents: vec![1; len],
            modified_ns: None,
        };
        let mut files: Vec<BundleFile> = (0..PART_FILES + 10).map(|i| file(i, 10)).collect();
        files.push(file(99_998, PART_BYTES + 1));
        files.push(file(99_999, 1));
        let bundle = Bundle::new(files);
        let parts = bundle.parts();
        assert_eq!(parts, bundle.parts(), "the same parts every time");
        let sizes: Vec<usize> = parts.iter().map(|p| p.files.len()).collect();
        assert_eq!(
            sizes,
            vec![PART_FILES, 10, 1, 1],
            "a large file is a part of its own"
        );
        let again: Vec<BundleFile> = parts.into_iter().flat_map(|p| p.files).collect();
        assert_eq!(again, bundle.files);
        assert_eq!(
            Bundle::new(Vec::new()).parts().len(),
            1,
            "an empty bundle is one part"
        );
    }

    #[test]
    fn bundle_hash_detects_tampering() {
        let mut b = Bundle::new(vec![BundleFile {
            path: "main.c".into(),
            executable: false,
            contents: b"int main(){}".to_vec(),
            modified_ns: None,
        }]);
        assert!(b.validate().is_ok());
        b.files[0].contents.push(b'\n');
        assert!(b.validate().unwrap_err().contains("mismatch"));
    }
}
