//! Decision points, decision sets and decision files.
//!
//! A decision point is one choice the search may make: an inlining call site
//! (inline / no-inline) or an operator knob (a tile size, an algorithm). A
//! decision set gives every point a value. Decision files hold a decision set
//! as an s-expression; the same format serves baselines, proposals and the
//! "optimal" set that reward assignment writes:
//!
//! ```scheme
//! (decisions
//!   (benchmark sample-dsp)
//!   (values
//!     ("fir_step @ main:13:14" inline)
//!     (tile 64)))
//! ```

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::decode::{self, Record, Src};
use crate::sexp::{self, Sexp, SexpError, SexpKind};

/// The id of a decision point: a call-site key or a knob name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct SiteId(pub String);

impl SiteId {
    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SiteId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for SiteId {
    fn from(s: &str) -> Self {
        SiteId(s.to_string())
    }
}

/// One value a decision point can take: in JSON an integer or a string.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(untagged)]
pub enum DecisionValue {
    /// An integer knob value (a tile size, a thread count).
    Int(i64),
    /// A named value (`inline`, `no-inline`, an algorithm name).
    Name(String),
}

/// Read as an integer or a string directly: `#[serde(untagged)]` buffers each value and
/// tries each variant in turn, and a step's request names every value of every knob (a
/// quarter of a worker's CPU a no-op step went to reading them so).
impl<'de> Deserialize<'de> for DecisionValue {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(ValueVisitor)
    }
}

struct ValueVisitor;

impl serde::de::Visitor<'_> for ValueVisitor {
    type Value = DecisionValue;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a decision value (an integer or a name)")
    }

    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<DecisionValue, E> {
        Ok(DecisionValue::Int(v))
    }

    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<DecisionValue, E> {
        let int = i64::try_from(v).map_err(|_| E::custom(format!("{v} is too large")))?;
        Ok(DecisionValue::Int(int))
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<DecisionValue, E> {
        Ok(DecisionValue::Name(v.to_string()))
    }

    fn visit_string<E: serde::de::Error>(self, v: String) -> Result<DecisionValue, E> {
        Ok(DecisionValue::Name(v))
    }
}

impl DecisionValue {
    /// The value "inline" of an inlining site.
    pub fn inline() -> Self {
        DecisionValue::Name(INLINE.into())
    }

    /// The value "no-inline" of an inlining site.
    pub fn no_inline() -> Self {
        DecisionValue::Name(NO_INLINE.into())
    }

    /// Whether this is the value "inline".
    pub fn is_inline(&self) -> bool {
        matches!(self, DecisionValue::Name(n) if n == INLINE)
    }

    /// The value as an s-expression: integers as numbers, names as symbols
    /// when they read back as symbols, otherwise as strings.
    pub fn to_sexp(&self) -> Sexp {
        match self {
            DecisionValue::Int(i) => Sexp::new(SexpKind::Int(*i)),
            DecisionValue::Name(n) if is_plain_symbol(n) => Sexp::symbol(n.clone()),
            DecisionValue::Name(n) => Sexp::string(n.clone()),
        }
    }

    /// Reads a value: an integer, a symbol or a string.
    pub fn from_sexp(src: Src<'_>, node: &Sexp, field: &str) -> Result<Self, SexpError> {
        match &node.kind {
            SexpKind::Int(i) => Ok(DecisionValue::Int(*i)),
            SexpKind::Symbol(s) | SexpKind::Str(s) => Ok(DecisionValue::Name(s.clone())),
            _ => Err(src.error(
                node.pos,
                format!(
                    "'{field}' expects an integer, a name or a string as a decision value, found {}",
                    node.describe()
                ),
            )),
        }
    }
}

impl fmt::Display for DecisionValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecisionValue::Int(i) => write!(f, "{i}"),
            DecisionValue::Name(n) => f.write_str(n),
        }
    }
}

/// The value name for an inlined call site.
pub const INLINE: &str = "inline";
/// The value name for a call site left as a call.
pub const NO_INLINE: &str = "no-inline";

fn is_plain_symbol(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '+' | '*'))
}

/// A decision point and the finite set of values it may take.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DecisionPoint {
    /// The point's id.
    pub id: SiteId,
    /// The values it may take, in declaration order; never empty.
    pub domain: Vec<DecisionValue>,
}

impl DecisionPoint {
    /// An inlining call site with the domain inline / no-inline.
    pub fn inline_site(id: SiteId) -> Self {
        DecisionPoint {
            id,
            domain: vec![DecisionValue::inline(), DecisionValue::no_inline()],
        }
    }
}

/// A value for every decision point, ordered by id so that its text and hash
/// are canonical.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(transparent)]
pub struct DecisionSet(pub BTreeMap<SiteId, DecisionValue>);

/// A content hash that names a decision set, a bundle or an artifact.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub struct ContentHash(pub [u8; 32]);

impl ContentHash {
    /// Hashes bytes.
    pub fn of(bytes: &[u8]) -> Self {
        ContentHash(*blake3::hash(bytes).as_bytes())
    }

    /// The first 16 hex digits, enough to tell sets apart in tables.
    pub fn short(&self) -> String {
        self.to_string()[..16].to_string()
    }
}

impl fmt::Display for ContentHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl From<ContentHash> for String {
    fn from(h: ContentHash) -> String {
        h.to_string()
    }
}

impl TryFrom<String> for ContentHash {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        if s.len() != 64 {
            return Err(format!(
                "a content hash has 64 hex digits, found {}",
                s.len()
            ));
        }
        // Byte by byte: a slice of the text could cut a multi-byte character,
        // and `from_str_radix` would take a sign (`+f`) for a digit.
        let digit = |b: u8| char::from(b).to_digit(16);
        let mut out = [0u8; 32];
        for (byte, pair) in out.iter_mut().zip(s.as_bytes().chunks(2)) {
            let (Some(high), Some(low)) = (digit(pair[0]), digit(pair[1])) else {
                return Err(format!("'{s}' is not a hex content hash"));
            };
            *byte = (high << 4 | low) as u8;
        }
        Ok(ContentHash(out))
    }
}

impl DecisionSet {
    /// The value of `id`, if set.
    pub fn get(&self, id: &SiteId) -> Option<&DecisionValue> {
        self.0.get(id)
    }

    /// Number of decisions.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The canonical hash of the set: equal sets hash equally.
    pub fn hash(&self) -> ContentHash {
        let mut canonical = String::new();
        for (id, value) in &self.0 {
            canonical.push_str(id.as_str());
            canonical.push('\0');
            canonical.push_str(&value.to_string());
            canonical.push('\n');
        }
        ContentHash::of(canonical.as_bytes())
    }

    /// The decisions whose value differs from `parent` (ids in `self` only).
    pub fn diff_from(&self, parent: &DecisionSet) -> DecisionSet {
        DecisionSet(
            self.0
                .iter()
                .filter(|(id, v)| parent.get(id) != Some(*v))
                .map(|(id, v)| (id.clone(), v.clone()))
                .collect(),
        )
    }

    /// Checks the set against the benchmark's decision points: every id known,
    /// every value in its point's domain.
    pub fn check(&self, points: &[DecisionPoint]) -> Result<(), DecisionError> {
        // Indexed once: a search per decision is quadratic on 100 000 sites.
        let by_id: HashMap<&SiteId, &DecisionPoint> = points.iter().map(|p| (&p.id, p)).collect();
        for (id, value) in &self.0 {
            let point = by_id.get(id).ok_or_else(|| DecisionError::UnknownSite {
                id: id.clone(),
                closest: closest(id, points),
            })?;
            if !point.domain.contains(value) {
                return Err(DecisionError::OutsideDomain {
                    id: id.clone(),
                    value: value.clone(),
                    domain: point.domain.clone(),
                });
            }
        }
        Ok(())
    }

    /// Fills every point missing from this set with the value in `base`.
    pub fn completed_from(&self, base: &DecisionSet) -> DecisionSet {
        let mut out = base.clone();
        out.0
            .extend(self.0.iter().map(|(k, v)| (k.clone(), v.clone())));
        out
    }
}

/// At most this many close ids are named for an unknown one.
const CLOSEST: usize = 3;

/// The points whose ids are most like `id` (a typo, a shifted line or
/// column), most alike first and at most [`CLOSEST`] of them; none where no
/// id is like it at all.
fn closest(id: &SiteId, points: &[DecisionPoint]) -> Vec<SiteId> {
    let mut alike: Vec<(f64, &SiteId)> = points
        .iter()
        .map(|p| {
            (
                strsim::normalized_levenshtein(id.as_str(), p.id.as_str()),
                &p.id,
            )
        })
        .filter(|(similar, _)| *similar >= 0.7)
        .collect();
    alike.sort_by(|a, b| b.0.total_cmp(&a.0).then_with(|| a.1.cmp(b.1)));
    alike
        .into_iter()
        .take(CLOSEST)
        .map(|(_, id)| id.clone())
        .collect()
}

/// "; did you mean 'a'?" or "; did you mean one of 'a', 'b'?"; empty for none.
fn did_you_mean(closest: &[SiteId]) -> String {
    let quoted: Vec<String> = closest.iter().map(|c| format!("'{c}'")).collect();
    match quoted.as_slice() {
        [] => String::new(),
        [one] => format!("; did you mean {one}?"),
        many => format!("; did you mean one of {}?", many.join(", ")),
    }
}

/// Why a decision set does not fit a benchmark.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecisionError {
    /// The id names no decision point of the benchmark.
    #[error(
        "unknown decision point '{id}': the benchmark has no such site or knob{}",
        did_you_mean(closest)
    )]
    UnknownSite {
        /// The id.
        id: SiteId,
        /// The benchmark's points whose ids are most like it, most alike
        /// first (at most three; none where no id is close).
        closest: Vec<SiteId>,
    },
    /// The value is not in the point's domain.
    #[error(
        "value '{value}' is outside the domain of '{id}'; expected one of: {}",
        join(domain)
    )]
    OutsideDomain {
        /// The decision point.
        id: SiteId,
        /// The offending value.
        value: DecisionValue,
        /// The values allowed.
        domain: Vec<DecisionValue>,
    },
}

fn join(values: &[DecisionValue]) -> String {
    values
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A decision file: an optional benchmark name and a decision set.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DecisionFile {
    /// The benchmark the decisions were made for, if recorded.
    pub benchmark: Option<String>,
    /// The decisions.
    pub set: DecisionSet,
}

/// The largest decision file kiln reads: about 100 bytes a decision, room
/// for over half a million decision points.
pub const DECISION_FILE_MAX_BYTES: u64 = 64 << 20;

impl DecisionFile {
    /// Reads and parses a decision file.
    pub fn read(path: &Path) -> Result<Self, SexpError> {
        let node = sexp::parse_file(path, DECISION_FILE_MAX_BYTES)?;
        Self::from_sexp(Src(&path.display().to_string()), &node)
    }

    /// The text of the decision file at `path`, refused unless it is a regular
    /// file of at most [`DECISION_FILE_MAX_BYTES`]; parse it with [`Self::parse_checked`].
    pub fn read_text(path: &Path) -> Result<String, SexpError> {
        sexp::read_text(path, DECISION_FILE_MAX_BYTES)
    }

    /// Parses a decision file's text; `source_name` labels errors.
    pub fn parse(text: &str, source_name: &str) -> Result<Self, SexpError> {
        let node = sexp::parse_single(text, source_name)?;
        Self::from_sexp(Src(source_name), &node)
    }

    /// Parses and checks against `points`, locating a bad id or value in the file.
    pub fn parse_checked(
        text: &str,
        source_name: &str,
        points: &[DecisionPoint],
    ) -> Result<Self, SexpError> {
        let node = sexp::parse_single(text, source_name)?;
        let file = Self::from_sexp(Src(source_name), &node)?;
        if let Err(e) = file.set.check(points) {
            let id = match &e {
                DecisionError::UnknownSite { id, .. } | DecisionError::OutsideDomain { id, .. } => {
                    id
                }
            };
            let pos = find_entry(&node, id).unwrap_or(node.pos);
            return Err(Src(source_name).error(pos, e.to_string()));
        }
        Ok(file)
    }

    fn from_sexp(src: Src<'_>, node: &Sexp) -> Result<Self, SexpError> {
        let rec = Record::open(
            src,
            node,
            "decisions",
            Some("decisions"),
            &["benchmark", "values"],
        )?;
        let benchmark = rec.opt_value("benchmark", decode::text)?;
        let mut set = BTreeMap::new();
        if let Some(values) = rec.opt("values") {
            for entry in values.args {
                let (id, value) = match entry.as_list() {
                    Some([id, value]) => (id, value),
                    _ => {
                        return Err(src.error(
                            entry.pos,
                            format!(
                                "expected a decision like (\"site-id\" value), found `{}`",
                                decode::short(entry)
                            ),
                        ))
                    }
                };
                let id = SiteId(decode::text(src, id, "values")?);
                let value = DecisionValue::from_sexp(src, value, id.as_str())?;
                if set.insert(id.clone(), value).is_some() {
                    return Err(src.error(entry.pos, format!("decision '{id}' appears twice")));
                }
            }
        }
        Ok(DecisionFile {
            benchmark,
            set: DecisionSet(set),
        })
    }

    /// The file as an s-expression.
    pub fn to_sexp(&self) -> Sexp {
        let mut fields = vec![Sexp::symbol("decisions")];
        if let Some(b) = &self.benchmark {
            fields.push(Sexp::field("benchmark", vec![name_sexp(b)]));
        }
        let values = self
            .set
            .0
            .iter()
            .map(|(id, v)| Sexp::list(vec![name_sexp(id.as_str()), v.to_sexp()]))
            .collect();
        fields.push(Sexp::field("values", values));
        Sexp::list(fields)
    }

    /// The file's text, one decision per line.
    pub fn to_text(&self) -> String {
        let mut out = String::from(";; kiln decision file\n(decisions\n");
        if let Some(b) = &self.benchmark {
            out.push_str(&format!("  (benchmark {})\n", name_sexp(b)));
        }
        out.push_str("  (values");
        for (id, v) in &self.set.0 {
            out.push_str(&format!(
                "\n    ({} {})",
                name_sexp(id.as_str()),
                v.to_sexp()
            ));
        }
        out.push_str("))\n");
        out
    }
}

/// A name as a symbol when it reads back as one, else as a string.
pub fn name_sexp(name: &str) -> Sexp {
    if is_plain_symbol(name) {
        Sexp::symbol(name)
    } else {
        Sexp::string(name)
    }
}

fn find_entry(node: &Sexp, id: &SiteId) -> Option<crate::sexp::Pos> {
    let values = node.as_list()?.iter().find(|f| {
        f.as_list()
            .and_then(|l| l.first())
            .and_then(Sexp::as_symbol)
            == Some("values")
    })?;
    values.as_list()?[1..].iter().find_map(|entry| {
        let first = entry.as_list()?.first()?;
        match &first.kind {
            SexpKind::Str(s) | SexpKind::Symbol(s) if s == id.as_str() => Some(entry.pos),
            _ => None,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn points() -> Vec<DecisionPoint> {
        vec![
            DecisionPoint::inline_site(SiteId::from("f @ main:1:2")),
            DecisionPoint {
                id: SiteId::from("tile"),
                domain: vec![DecisionValue::Int(8), DecisionValue::Int(16)],
            },
        ]
    }

    #[test]
    fn decision_values_are_json_integers_or_strings() {
        let values = vec![
            DecisionValue::Int(-3),
            DecisionValue::Int(i64::MAX),
            DecisionValue::inline(),
            DecisionValue::Name("12".into()),
        ];
        let json = serde_json::to_string(&values).unwrap();
        assert_eq!(json, r#"[-3,9223372036854775807,"inline","12"]"#);
        assert_eq!(
            serde_json::from_str::<Vec<DecisionValue>>(&json).unwrap(),
            values
        );
        // Read through serde's buffer too, as inside an internally tagged message.
        let value: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(Vec::<DecisionValue>::deserialize(value).unwrap(), values);
        for bad in ["1.5", "9223372036854775808", "null", "[1]"] {
            let err = serde_json::from_str::<DecisionValue>(bad).unwrap_err();
            assert!(
                format!("{err}").contains("decision value")
                    || format!("{err}").contains("too large"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn decision_file_round_trips() {
        let text = "(decisions (benchmark b) (values (\"f @ main:1:2\" inline) (tile 16)))";
        let file = DecisionFile::parse_checked(text, "d.sexp", &points()).unwrap();
        assert_eq!(file.set.len(), 2);
        let again = DecisionFile::parse(&file.to_text(), "again").unwrap();
        assert_eq!(file, again);
        let again = DecisionFile::parse(&file.to_sexp().to_string(), "again").unwrap();
        assert_eq!(file, again);
    }

    #[test]
    fn hash_is_canonical() {
        let a = DecisionFile::parse("(decisions (values (a 1) (b 2)))", "x").unwrap();
        let b = DecisionFile::parse("(decisions (values (b 2) (a 1)))", "x").unwrap();
        assert_eq!(a.set.hash(), b.set.hash());
        let c = DecisionFile::parse("(decisions (values (b 2) (a 3)))", "x").unwrap();
        assert_ne!(a.set.hash(), c.set.hash());
        let parsed: ContentHash = ContentHash::try_from(a.set.hash().to_string()).unwrap();
        assert_eq!(parsed, a.set.hash());
    }

    #[test]
    fn hash_text_is_hex_digits_only() {
        // 64 bytes, with two-byte characters across the pairs (found by the frame fuzz
        // target: a panic).
        let err = ContentHash::try_from(format!("0{}0", "é".repeat(31))).unwrap_err();
        assert!(err.contains("is not a hex content hash"), "{err}");
        assert!(ContentHash::try_from("+f".repeat(32)).is_err());
        assert_eq!(
            ContentHash::try_from("0F".repeat(32)),
            Ok(ContentHash([15; 32]))
        );
    }

    #[test]
    fn diff_lists_changed_decisions() {
        let a = DecisionFile::parse("(decisions (values (a 1) (b 2)))", "x")
            .unwrap()
            .set;
        let b = DecisionFile::parse("(decisions (values (a 1) (b 3)))", "x")
            .unwrap()
            .set;
        let d = b.diff_from(&a);
        assert_eq!(d.len(), 1);
        assert_eq!(d.get(&SiteId::from("b")), Some(&DecisionValue::Int(3)));
    }
}
