//! What of a run's output is compared with the baseline's: all of it, or the
//! lines a regular expression keeps (a program that also prints its own
//! timings), digested as it streams, with its start kept to show a person.

use regex::bytes::Regex;

use kiln_protocol::ContentHash;

/// Bytes of the checked text kept to show beside a wrong output.
pub const SAMPLE_BYTES: usize = 4096;

/// Which lines of the output are checked.
#[derive(Debug, Clone, Default)]
pub enum LineFilter {
    /// Every byte.
    #[default]
    All,
    /// Only the lines that match.
    Keep(Regex),
    /// Every line but those that match.
    Drop(Regex),
}

impl LineFilter {
    fn checks(&self, line: &[u8]) -> bool {
        let text = line.strip_suffix(b"\n").unwrap_or(line);
        match self {
            LineFilter::All => true,
            LineFilter::Keep(re) => re.is_match(text),
            LineFilter::Drop(re) => !re.is_match(text),
        }
    }
}

/// The digest of the checked text of one output, fed as it arrives. With
/// [`LineFilter::All`] it is the digest of the whole output, as stores
/// written before line filters hold it.
pub struct CheckedDigest {
    filter: LineFilter,
    hasher: blake3::Hasher,
    /// The unfinished last line, while a filter looks at lines.
    partial: Vec<u8>,
    sample: Vec<u8>,
}

impl CheckedDigest {
    /// An empty digest under `filter`.
    pub fn new(filter: LineFilter) -> CheckedDigest {
        CheckedDigest {
            filter,
            hasher: blake3::Hasher::new(),
            partial: Vec::new(),
            sample: Vec::new(),
        }
    }

    /// The digest of `bytes`, all at once.
    pub fn of(filter: LineFilter, bytes: &[u8]) -> (ContentHash, String) {
        let mut d = CheckedDigest::new(filter);
        d.update(bytes);
        d.finish()
    }

    /// Takes in the next bytes of the output.
    pub fn update(&mut self, mut bytes: &[u8]) {
        if matches!(self.filter, LineFilter::All) {
            self.checked(bytes);
            return;
        }
        while let Some(end) = bytes.iter().position(|b| *b == b'\n') {
            let (line, rest) = bytes.split_at(end + 1);
            if self.partial.is_empty() {
                self.line(line);
            } else {
                self.partial.extend_from_slice(line);
                let whole = std::mem::take(&mut self.partial);
                self.line(&whole);
            }
            bytes = rest;
        }
        self.partial.extend_from_slice(bytes);
    }

    /// The digest and the start of the checked text.
    pub fn finish(mut self) -> (ContentHash, String) {
        if !self.partial.is_empty() {
            let last = std::mem::take(&mut self.partial);
            self.line(&last);
        }
        let sample = String::from_utf8_lossy(&self.sample).into_owned();
        (ContentHash(*self.hasher.finalize().as_bytes()), sample)
    }

    fn line(&mut self, line: &[u8]) {
        if self.filter.checks(line) {
            self.checked(line);
        }
    }

    fn checked(&mut self, bytes: &[u8]) {
        self.hasher.update(bytes);
        let room = SAMPLE_BYTES.saturating_sub(self.sample.len());
        self.sample
            .extend_from_slice(&bytes[..room.min(bytes.len())]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn digest_in_pieces(filter: &LineFilter, text: &[u8], piece: usize) -> (ContentHash, String) {
        let mut d = CheckedDigest::new(filter.clone());
        for chunk in text.chunks(piece) {
            d.update(chunk);
        }
        d.finish()
    }

    #[test]
    fn all_is_the_digest_of_every_byte() {
        let text = b"result 42\ntook 1.3 ms\n";
        let (digest, sample) = CheckedDigest::of(LineFilter::All, text);
        assert_eq!(digest, ContentHash::of(text));
        assert_eq!(sample, "result 42\ntook 1.3 ms\n");
    }

    #[test]
    fn filters_see_whole_lines_however_the_output_arrives() {
        let keep = LineFilter::Keep(Regex::new("^result").unwrap());
        let drop = LineFilter::Drop(Regex::new("took .* ms$").unwrap());
        let run1 = b"result 42\ntook 1.3 ms\nresult 7";
        let run2 = b"result 42\ntook 99.0 ms\nresult 7";
        let wrong = b"result 43\ntook 1.3 ms\nresult 7";
        for filter in [&keep, &drop] {
            let expected = CheckedDigest::of(filter.clone(), run1).0;
            for piece in [1, 3, 7, 100] {
                assert_eq!(digest_in_pieces(filter, run1, piece).0, expected);
                assert_eq!(digest_in_pieces(filter, run2, piece).0, expected);
                assert_ne!(digest_in_pieces(filter, wrong, piece).0, expected);
            }
        }
        assert_eq!(CheckedDigest::of(keep, run1).1, "result 42\nresult 7");
    }

    #[test]
    fn the_sample_is_bounded() {
        let text = vec![b'x'; 3 * SAMPLE_BYTES];
        let (_, sample) = CheckedDigest::of(LineFilter::All, &text);
        assert_eq!(sample.len(), SAMPLE_BYTES);
    }
}
