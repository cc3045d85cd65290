//! Decoding typed values out of [`Sexp`] trees, with located errors.
//!
//! A record is a list of `(field args...)` entries, optionally after a head
//! symbol: `(simulated-annealing (steps 100) (t-max 0.04))`. [`Record`] checks
//! for unknown and duplicate fields up front, so decoders only ask for the
//! fields they know.

use crate::sexp::{Pos, Sexp, SexpError, SexpKind};

/// Labels errors with the document they come from.
#[derive(Debug, Clone, Copy)]
pub struct Src<'a>(pub &'a str);

impl Src<'_> {
    /// An error at `pos` in this document.
    pub fn error(&self, pos: Pos, message: impl Into<String>) -> SexpError {
        SexpError {
            source_name: self.0.to_string(),
            pos,
            message: message.into(),
        }
    }
}

/// One `(name args...)` entry of a record.
#[derive(Debug, Clone, Copy)]
pub struct Field<'a> {
    /// The field's name.
    pub name: &'a str,
    /// Where the field starts.
    pub pos: Pos,
    /// Everything after the name.
    pub args: &'a [Sexp],
    src: Src<'a>,
}

impl<'a> Field<'a> {
    /// The single argument of the field.
    pub fn one(&self) -> Result<&'a Sexp, SexpError> {
        match self.args {
            [only] => Ok(only),
            [] => Err(self
                .src
                .error(self.pos, format!("field '{}' needs a value", self.name))),
            [_, second, ..] => Err(self.src.error(
                second.pos,
                format!("field '{}' takes one value; found more", self.name),
            )),
        }
    }

    /// The document the field comes from.
    pub fn src(&self) -> Src<'a> {
        self.src
    }

    /// The single argument decoded by `f`.
    pub fn value<T>(
        &self,
        f: impl Fn(Src<'a>, &'a Sexp, &str) -> Result<T, SexpError>,
    ) -> Result<T, SexpError> {
        f(self.src, self.one()?, self.name)
    }
}

/// An opened record: a list of fields, checked against the allowed names.
#[derive(Debug)]
pub struct Record<'a> {
    what: String,
    pos: Pos,
    fields: Vec<Field<'a>>,
    src: Src<'a>,
}

impl<'a> Record<'a> {
    /// Opens `node` as a record named `what`. With `head`, the list must start
    /// with that symbol; every other item must be a field named in `allowed`.
    pub fn open(
        src: Src<'a>,
        node: &'a Sexp,
        what: &str,
        head: Option<&str>,
        allowed: &[&str],
    ) -> Result<Self, SexpError> {
        let items = node.as_list().ok_or_else(|| {
            src.error(
                node.pos,
                format!(
                    "expected {what} as a list of fields, found {}",
                    node.describe()
                ),
            )
        })?;
        let body = match head {
            None => items,
            Some(head) => match items.first() {
                Some(first) if first.as_symbol() == Some(head) => &items[1..],
                Some(first) => {
                    return Err(src.error(
                        first.pos,
                        format!("expected ({head} ...), found {}", short(first)),
                    ))
                }
                None => return Err(src.error(node.pos, format!("expected ({head} ...), found ()"))),
            },
        };
        Self::open_args(src, what, node.pos, body, allowed)
    }

    /// Opens `body` (the items after a head) as the fields of a record named `what`.
    pub fn open_args(
        src: Src<'a>,
        what: &str,
        pos: Pos,
        body: &'a [Sexp],
        allowed: &[&str],
    ) -> Result<Self, SexpError> {
        let mut fields: Vec<Field<'a>> = Vec::new();
        for item in body {
            let (name, args) = match item.as_list() {
                Some([first, rest @ ..]) => match first.as_symbol() {
                    Some(name) => (name, rest),
                    None => {
                        return Err(src.error(
                            first.pos,
                            format!(
                                "expected a field name in {what}, found {}",
                                first.describe()
                            ),
                        ))
                    }
                },
                _ => {
                    return Err(src.error(
                        item.pos,
                        format!(
                            "expected a field like (name value) in {what}, found `{}`",
                            short(item)
                        ),
                    ))
                }
            };
            if !allowed.contains(&name) {
                return Err(src.error(
                    item.pos,
                    format!(
                        "unknown field '{name}' in {what}; expected one of: {}",
                        allowed.join(", ")
                    ),
                ));
            }
            if fields.iter().any(|f| f.name == name) {
                return Err(src.error(item.pos, format!("field '{name}' appears twice in {what}")));
            }
            fields.push(Field {
                name,
                pos: item.pos,
                args,
                src,
            });
        }
        Ok(Record {
            what: what.to_string(),
            pos,
            fields,
            src,
        })
    }

    /// The field named `name`, if present.
    pub fn opt(&self, name: &str) -> Option<Field<'a>> {
        self.fields.iter().copied().find(|f| f.name == name)
    }

    /// The field named `name`; an error naming the record if absent.
    pub fn req(&self, name: &str) -> Result<Field<'a>, SexpError> {
        self.opt(name).ok_or_else(|| {
            self.src.error(
                self.pos,
                format!("missing required field '{name}' in {}", self.what),
            )
        })
    }

    /// The optional field's single value decoded by `f`.
    pub fn opt_value<T>(
        &self,
        name: &str,
        f: impl Fn(Src<'a>, &'a Sexp, &str) -> Result<T, SexpError>,
    ) -> Result<Option<T>, SexpError> {
        self.opt(name).map(|field| field.value(f)).transpose()
    }

    /// The required field's single value decoded by `f`.
    pub fn req_value<T>(
        &self,
        name: &str,
        f: impl Fn(Src<'a>, &'a Sexp, &str) -> Result<T, SexpError>,
    ) -> Result<T, SexpError> {
        self.req(name)?.value(f)
    }

    /// Where the record starts.
    pub fn pos(&self) -> Pos {
        self.pos
    }

    /// The document the record comes from.
    pub fn src(&self) -> Src<'a> {
        self.src
    }
}

/// A short rendering of a node for error messages.
pub fn short(node: &Sexp) -> String {
    let text = node.to_string().replace('\n', " ");
    if text.chars().count() > 40 {
        let cut: String = text.chars().take(37).collect();
        format!("{cut}...")
    } else {
        text
    }
}

fn type_error(src: Src<'_>, node: &Sexp, field: &str, expected: &str) -> SexpError {
    src.error(
        node.pos,
        format!(
            "field '{field}' expects {expected}, found {} `{}`",
            node.describe(),
            short(node)
        ),
    )
}

/// A non-negative integer.
pub fn uint(src: Src<'_>, node: &Sexp, field: &str) -> Result<u64, SexpError> {
    match node.kind {
        SexpKind::Int(i) if i >= 0 => Ok(i as u64),
        _ => Err(type_error(src, node, field, "a non-negative integer")),
    }
}

/// A non-negative integer that fits in 32 bits.
pub fn uint32(src: Src<'_>, node: &Sexp, field: &str) -> Result<u32, SexpError> {
    let v = uint(src, node, field)?;
    u32::try_from(v).map_err(|_| type_error(src, node, field, "an integer below 2^32"))
}

/// A positive integer that fits in 32 bits.
pub fn positive32(src: Src<'_>, node: &Sexp, field: &str) -> Result<u32, SexpError> {
    match uint32(src, node, field)? {
        0 => Err(type_error(src, node, field, "a positive integer")),
        v => Ok(v),
    }
}

/// A finite number (integers accepted).
pub fn number(src: Src<'_>, node: &Sexp, field: &str) -> Result<f64, SexpError> {
    match node.kind {
        SexpKind::Int(i) => Ok(i as f64),
        SexpKind::Float(f) if f.is_finite() => Ok(f),
        _ => Err(type_error(src, node, field, "a number")),
    }
}

/// A number greater than zero.
pub fn positive_number(src: Src<'_>, node: &Sexp, field: &str) -> Result<f64, SexpError> {
    let v = number(src, node, field)?;
    if v > 0.0 {
        Ok(v)
    } else {
        Err(type_error(src, node, field, "a number greater than 0"))
    }
}

/// A size in bytes: an integer, or a string with a binary unit as `docker run
/// --memory` reads one (`"512m"`, `"2g"`, `"64KiB"`; k, m and g are powers of 1024).
/// At most `i64::MAX`, so that it prints as the integer it is.
pub fn byte_size(src: Src<'_>, node: &Sexp, field: &str) -> Result<u64, SexpError> {
    const EXPECTED: &str = "a positive size in bytes below 8 EiB, like 536870912 or \"512m\"";
    let size = match &node.kind {
        SexpKind::Int(i) if *i > 0 => Some(*i as u64),
        SexpKind::Str(s) | SexpKind::Symbol(s) => parse_byte_size(s),
        _ => None,
    };
    size.filter(|&b| b > 0 && i64::try_from(b).is_ok())
        .ok_or_else(|| type_error(src, node, field, EXPECTED))
}

/// Parses a size such as `512m` or `64KiB` (see [`byte_size`]).
pub fn parse_byte_size(text: &str) -> Option<u64> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (digits, unit) = text.split_at(split);
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return None,
    };
    digits.parse::<u64>().ok()?.checked_mul(1 << shift)
}

/// A string, or a symbol read as its name.
pub fn text(src: Src<'_>, node: &Sexp, field: &str) -> Result<String, SexpError> {
    match &node.kind {
        SexpKind::Str(s) | SexpKind::Symbol(s) => Ok(s.clone()),
        _ => Err(type_error(src, node, field, "a string or a name")),
    }
}

/// The longest name: with the suffixes kiln adds (`-chain12.sexp`), a file
/// name stays far below the 255 bytes a file system allows.
pub const MAX_NAME_LEN: usize = 100;

/// Why `name` cannot name a file or folder, if it cannot: it must be one path
/// component of letters, digits, `-`, `_` and `.`, not starting with `.` or
/// `-` (so it can neither leave the folder it names something in nor hide
/// there, nor read as a flag), at most [`MAX_NAME_LEN`] bytes. `:` is kept for
/// kiln's own `manual:` experiments.
pub fn unsafe_name(name: &str) -> Option<String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    if name.len() > MAX_NAME_LEN {
        Some(format!("it is longer than {MAX_NAME_LEN} bytes"))
    } else if name.is_empty() || name.starts_with(['.', '-']) || !name.chars().all(allowed) {
        Some("use letters, digits, '-', '_' and '.', not starting with '.' or '-'".into())
    } else {
        None
    }
}

/// A name kiln also uses in file and folder names (the campaign, experiments,
/// benchmarks, workers); see [`unsafe_name`].
pub fn name(src: Src<'_>, node: &Sexp, field: &str) -> Result<String, SexpError> {
    let name = text(src, node, field)?;
    match unsafe_name(&name) {
        Some(why) => Err(src.error(node.pos, format!("'{name}' cannot be a {field}: {why}"))),
        None => Ok(name),
    }
}

/// A double-quoted string.
pub fn string(src: Src<'_>, node: &Sexp, field: &str) -> Result<String, SexpError> {
    match &node.kind {
        SexpKind::Str(s) => Ok(s.clone()),
        _ => Err(type_error(src, node, field, "a double-quoted string")),
    }
}

/// A list of double-quoted strings, such as a command line.
pub fn string_list(src: Src<'_>, node: &Sexp, field: &str) -> Result<Vec<String>, SexpError> {
    let items = node
        .as_list()
        .ok_or_else(|| type_error(src, node, field, "a list of strings"))?;
    items.iter().map(|item| string(src, item, field)).collect()
}

/// A list of non-negative integers.
pub fn uint_list(src: Src<'_>, node: &Sexp, field: &str) -> Result<Vec<u32>, SexpError> {
    let items = node
        .as_list()
        .ok_or_else(|| type_error(src, node, field, "a list of integers"))?;
    items.iter().map(|item| uint32(src, item, field)).collect()
}

/// A symbol that must be one of `choices`.
pub fn choice<'c>(
    src: Src<'_>,
    node: &Sexp,
    field: &str,
    choices: &[&'c str],
) -> Result<&'c str, SexpError> {
    let expected = || format!("one of: {}", choices.join(", "));
    match node.as_symbol() {
        Some(s) => choices.iter().copied().find(|c| *c == s).ok_or_else(|| {
            src.error(
                node.pos,
                format!("unknown value '{s}' for '{field}'; expected {}", expected()),
            )
        }),
        None => Err(type_error(src, node, field, &expected())),
    }
}

/// The entries of a field whose arguments are each a record or form, e.g.
/// `(experiments (...) (...))`; at least one is required.
pub fn entries<'a>(field: &Field<'a>) -> Result<&'a [Sexp], SexpError> {
    if field.args.is_empty() {
        Err(field.src.error(
            field.pos,
            format!("field '{}' needs at least one entry", field.name),
        ))
    } else {
        Ok(field.args)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sexp::byte_size_text;

    #[test]
    fn sizes_read_and_written_in_binary_units() {
        assert_eq!(parse_byte_size("512m"), Some(512 << 20));
        assert_eq!(parse_byte_size("8 GiB"), Some(8 << 30));
        assert_eq!(parse_byte_size("8 parsecs"), None);
        assert_eq!(byte_size_text(8 << 30), "8 GiB");
        assert_eq!(byte_size_text(1536 << 20), "1536 MiB");
        assert_eq!(byte_size_text(1000), "1000 bytes");
    }
}
