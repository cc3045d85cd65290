//! The checksum of a decided step's record. The stored value is the record's
//! JSON with `"checksum":"<16 hex digits>"` put first, the digits those of
//! [`ContentHash::short`] of the JSON without it. So the value stays JSON
//! that every kiln reads (the field is ignored), and the check hashes the
//! stored bytes as they are, never a re-serialization of them. Steps written
//! before kiln kept checksums have none, and read as they are.

use kiln_protocol::ContentHash;

const OPEN: &[u8] = b"{\"checksum\":\"";
const DIGITS: usize = 16;
const CLOSE: &[u8] = b"\",";

/// The stored value of a decided step whose JSON (an object) is `json`.
pub(super) fn seal(json: &[u8]) -> Vec<u8> {
    let sum = ContentHash::of(json).short();
    let mut out = Vec::with_capacity(OPEN.len() + DIGITS + CLOSE.len() + json.len());
    out.extend_from_slice(OPEN);
    out.extend_from_slice(sum.as_bytes());
    out.extend_from_slice(CLOSE);
    out.extend_from_slice(&json[1..]);
    out
}

/// A stored step's fields after its checksum (after `{` where it has none).
pub(super) fn fields(value: &[u8]) -> &[u8] {
    value
        .strip_prefix(OPEN)
        .and_then(|rest| rest.get(DIGITS..))
        .and_then(|rest| rest.strip_prefix(CLOSE))
        .or_else(|| value.strip_prefix(b"{"))
        .unwrap_or(value)
}

/// Whether a stored step's value matches its checksum: `None` for a value
/// without one (written before kiln kept them).
pub(super) fn matches(value: &[u8]) -> Option<bool> {
    let (sum, rest) = value.strip_prefix(OPEN)?.split_at_checked(DIGITS)?;
    let rest = rest.strip_prefix(CLOSE)?;
    let mut hasher = blake3::Hasher::new();
    hasher.update(b"{");
    hasher.update(rest);
    let hash = ContentHash(*hasher.finalize().as_bytes());
    Some(hash.short().as_bytes() == sum)
}
