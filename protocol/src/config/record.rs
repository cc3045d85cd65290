//! Config records declared once. A [`record!`] declaration names each field's
//! word, value [`Kind`], default and doc line, and from it come the struct,
//! its decoding from a [`Record`] (unknown, duplicate and missing fields,
//! located type errors), its printing with every default spelled out, and its
//! rows of the field reference in prod-configs/README.md ([`FieldRow`]).
//!
//! A rule between fields (`max` not below `min`) or a default that depends on
//! another field stays a short function beside the record, run on the decoded
//! value.

use super::{float, int};
use crate::decision::name_sexp;
use crate::decode::{self, Field, Record, Src};
use crate::sexp::{Sexp, SexpError, SexpKind};

/// How one field's value is read and written.
pub struct Kind<T> {
    /// What the field takes, as the field reference says it.
    pub takes: &'static str,
    /// Reads the field's arguments (most fields take one value: [`Field::value`]).
    pub decode: fn(&Field<'_>) -> Result<T, SexpError>,
    /// The field's arguments as a config writes them.
    pub print: fn(&T) -> Vec<Sexp>,
}

/// A value several fields of a record say together (a benchmark's kind, with the
/// fields only that kind takes): read from the whole record, printed as fields.
pub struct Composite<T> {
    /// The words of its fields.
    pub words: fn() -> Vec<&'static str>,
    pub decode: fn(&Record<'_>) -> Result<T, SexpError>,
    pub print: fn(&T) -> Vec<Sexp>,
    /// Its fields' rows of the field reference.
    pub reference: fn() -> Vec<FieldRow>,
}

/// One row of the field reference: a field of a record as its declaration says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldRow {
    pub word: &'static str,
    pub takes: &'static str,
    pub default: Absent,
    pub doc: &'static str,
}

/// What a field is when a config leaves it out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Absent {
    /// A config must give it.
    Required,
    /// Unset.
    Optional,
    /// This value, as a config writes it.
    Value(String),
    /// A value that depends on other fields, in words.
    Said(&'static str),
}

impl FieldRow {
    /// The default as a config writes it, for the reference.
    pub fn shown<T>(kind: &Kind<T>, value: &T) -> String {
        let args: Vec<String> = (kind.print)(value).iter().map(Sexp::to_string).collect();
        args.join(" ")
    }
}

/// A record of no fields: what a record whose fields all have defaults decodes from
/// to give its `Default`.
pub(crate) fn no_fields(what: &str) -> Record<'static> {
    Record::open_args(Src(""), what, Default::default(), &[], &[]).expect("no field to refuse")
}

/// An integer from 0.
pub const COUNT: Kind<u32> = Kind {
    takes: "an integer ≥ 0",
    decode: |f| f.value(decode::uint32),
    print: |v| vec![int(*v)],
};

/// An integer from 1.
pub const POSITIVE: Kind<u32> = Kind {
    takes: "an integer ≥ 1",
    decode: |f| f.value(decode::positive32),
    print: |v| vec![int(*v)],
};

/// A 64-bit integer from 0 (a seed).
pub const COUNT64: Kind<u64> = Kind {
    takes: "an integer ≥ 0",
    decode: |f| f.value(decode::uint),
    print: |v| vec![Sexp::new(SexpKind::Int(*v as i64))],
};

/// Any finite number.
pub const NUMBER: Kind<f64> = Kind {
    takes: "a number",
    decode: |f| f.value(decode::number),
    print: |v| vec![float(*v)],
};

/// A number above 0 (seconds, a ratio).
pub const POSITIVE_NUMBER: Kind<f64> = Kind {
    takes: "a number > 0",
    decode: |f| f.value(decode::positive_number),
    print: |v| vec![float(*v)],
};

/// A size in bytes, `536870912` or `"512m"`.
pub const BYTES: Kind<u64> = Kind {
    takes: "bytes, or \"512m\", \"2g\"",
    decode: |f| f.value(decode::byte_size),
    print: |v| vec![Sexp::new(SexpKind::Int(*v as i64))],
};

/// `#t` or `#f`.
pub const BOOLEAN: Kind<bool> = Kind {
    takes: "#t or #f",
    decode: |f| f.value(super::boolean),
    print: |v| vec![Sexp::new(SexpKind::Bool(*v))],
};

/// A double-quoted string.
pub const STRING: Kind<String> = Kind {
    takes: "a string",
    decode: |f| f.value(decode::string),
    print: |v| vec![Sexp::string(v.clone())],
};

/// A string or a bare name.
pub const TEXT: Kind<String> = Kind {
    takes: "a name or string",
    decode: |f| f.value(decode::text),
    print: |v| vec![name_sexp(v)],
};

/// A name kiln also uses in file names ([`decode::unsafe_name`]).
pub const NAME: Kind<String> = Kind {
    takes: "a name (letters, digits, - _ .)",
    decode: |f| f.value(decode::name),
    print: |v| vec![name_sexp(v)],
};

/// A file or folder, as a string.
pub const PATH: Kind<std::path::PathBuf> = Kind {
    takes: "a path (string)",
    decode: |f| f.value(decode::string).map(Into::into),
    print: |path| vec![super::path_sexp(path)],
};

/// A list of strings, such as a command line.
pub const STRINGS: Kind<Vec<String>> = Kind {
    takes: "a list of strings",
    decode: |f| f.value(decode::string_list),
    print: |v| vec![super::strings(v)],
};

/// A list of integers from 0 (CPU or GPU numbers).
pub const INTEGERS: Kind<Vec<u32>> = Kind {
    takes: "a list of integers",
    decode: |f| f.value(decode::uint_list),
    print: |v| vec![Sexp::list(v.iter().map(|&n| int(n)).collect())],
};

/// Declares a config record once: the struct, and its `words`, `decode_fields`,
/// `print_fields` and `reference`. Each field reads
/// `NAME: TYPE = WORD, KIND, HOW, "doc line";` where HOW is
/// - `required`;
/// - `optional`: TYPE is `Option<T>` and KIND a `Kind<T>`, printed when set;
/// - `default(EXPR)`, or `default(EXPR, "as the reference says it")`;
/// - `omitted(EXPR)`: a default that is printed only when the value differs;
/// - `composite`: KIND is a [`Composite`] read from the whole record (WORD is its main word).
///
/// Fields decode in the order declared, which is also the struct's (and its JSON's) order.
macro_rules! record {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident {
            $(
                $(#[$fmeta:meta])*
                $field:ident : $ty:ty = $word:expr, $kind:expr, $how:ident $(($($arg:tt)*))?, $doc:literal;
            )*
        }
    ) => {
        $(#[$meta])*
        $vis struct $name {
            $(
                #[doc = $doc]
                $(#[$fmeta])*
                pub $field: $ty,
            )*
        }

        impl $name {
            /// The words of the record's fields, in the order declared.
            pub fn words() -> Vec<&'static str> {
                [$($crate::config::record::record!(@words $word, $kind, $how)),*].concat()
            }

            /// The record's fields read from `rec`, defaults filled in.
            pub(crate) fn decode_fields(
                rec: &$crate::decode::Record<'_>,
            ) -> Result<Self, $crate::sexp::SexpError> {
                Ok($name {
                    $($field: $crate::config::record::record!(@decode rec, $word, $kind, $how $(($($arg)*))?),)*
                })
            }

            /// The fields as a config writes them, every default spelled out (but an
            /// `omitted` one) and an optional field only when set.
            // One push per declared field, some of them conditional.
            #[allow(clippy::vec_init_then_push)]
            pub fn print_fields(&self) -> Vec<$crate::sexp::Sexp> {
                let mut fields = Vec::new();
                $($crate::config::record::record!(@print fields, self.$field, $ty, $word, $kind, $how $(($($arg)*))?);)*
                fields
            }

            /// The record's rows of the field reference.
            pub fn reference() -> Vec<$crate::config::record::FieldRow> {
                [$($crate::config::record::record!(@rows $ty, $word, $kind, $doc, $how $(($($arg)*))?)),*].concat()
            }
        }
    };
    (@words $word:expr, $kind:expr, composite) => {
        ($kind.words)()
    };
    (@words $word:expr, $kind:expr, $how:ident) => {
        vec![$word]
    };
    (@decode $rec:ident, $word:expr, $kind:expr, composite) => {
        ($kind.decode)($rec)?
    };
    (@decode $rec:ident, $word:expr, $kind:expr, required) => {
        ($kind.decode)(&$rec.req($word)?)?
    };
    (@decode $rec:ident, $word:expr, $kind:expr, optional) => {
        $rec.opt($word).map(|f| ($kind.decode)(&f)).transpose()?
    };
    (@decode $rec:ident, $word:expr, $kind:expr, $how:ident($default:expr $(, $shown:literal)?)) => {
        $rec.opt($word).map(|f| ($kind.decode)(&f)).transpose()?.unwrap_or_else(|| $default)
    };
    (@print $out:ident, $value:expr, $ty:ty, $word:expr, $kind:expr, composite) => {
        $out.extend(($kind.print)(&$value))
    };
    (@print $out:ident, $value:expr, $ty:ty, $word:expr, $kind:expr, optional) => {
        if let Some(v) = &$value {
            $out.push($crate::sexp::Sexp::field($word, ($kind.print)(v)));
        }
    };
    (@print $out:ident, $value:expr, $ty:ty, $word:expr, $kind:expr, omitted($default:expr)) => {
        let default: $ty = $default;
        if $value != default {
            $out.push($crate::sexp::Sexp::field($word, ($kind.print)(&$value)));
        }
    };
    (@print $out:ident, $value:expr, $ty:ty, $word:expr, $kind:expr, $how:ident $(($($arg:tt)*))?) => {
        $out.push($crate::sexp::Sexp::field($word, ($kind.print)(&$value)))
    };
    (@rows $ty:ty, $word:expr, $kind:expr, $doc:literal, composite) => {
        ($kind.reference)()
    };
    (@rows $ty:ty, $word:expr, $kind:expr, $doc:literal, $how:ident $(($($arg:tt)*))?) => {
        vec![$crate::config::record::FieldRow {
            word: $word,
            takes: $kind.takes,
            default: $crate::config::record::record!(@default $ty, $kind, $how $(($($arg)*))?),
            doc: $doc,
        }]
    };
    (@default $ty:ty, $kind:expr, required) => {
        $crate::config::record::Absent::Required
    };
    (@default $ty:ty, $kind:expr, optional) => {
        $crate::config::record::Absent::Optional
    };
    (@default $ty:ty, $kind:expr, $how:ident($default:expr, $shown:literal)) => {
        $crate::config::record::Absent::Said($shown)
    };
    (@default $ty:ty, $kind:expr, $how:ident($default:expr)) => {
        $crate::config::record::Absent::Value(
            $crate::config::record::FieldRow::shown::<$ty>(&$kind, &$default),
        )
    };
}
pub(crate) use record;
