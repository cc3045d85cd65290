//! Campaign configs: one s-expression file describes a whole campaign.
//!
//! Decoding checks every field (unknown, duplicate, missing, wrong type) and
//! cross-references (an experiment's benchmark must exist); printing gives the
//! normalized form with every default spelled out, which parses back to the
//! same value. `prod-configs/README.md` documents each field; its field reference is
//! written from the records' declarations ([`record`], [`reference`]).

//!
//! One file per part, each type's decoding and printing beside it:
//! [`campaign`] (the whole file), [`benchmark`] (the only part a worker
//! reads), [`search`] and [`workers`]; the helpers they share are here.

use std::path::{Path, PathBuf};

use crate::decode::{self, Field, Record, Src};
use crate::sexp::{Sexp, SexpError, SexpKind};

pub mod benchmark;
pub mod campaign;
pub mod record;
pub mod reference;
pub mod search;
pub mod workers;

pub use benchmark::*;
pub use campaign::*;
pub use search::*;
pub use workers::*;

/// `path` with `a/..` pairs and `.` removed, as written (no file system access): a config in
/// `prod-configs/` naming `../results` means `results`, which is what messages should say.
fn lexically_normal(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir
                if matches!(out.components().next_back(), Some(Component::Normal(_))) =>
            {
                out.pop();
            }
            other => out.push(other),
        }
    }
    // The current folder, never an empty path (which names no folder at all).
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    out
}

fn int(v: u32) -> Sexp {
    Sexp::new(SexpKind::Int(i64::from(v)))
}

fn float(v: f64) -> Sexp {
    Sexp::new(SexpKind::Float(v))
}

fn path_sexp(p: &Path) -> Sexp {
    Sexp::string(p.display().to_string())
}

fn strings(items: &[String]) -> Sexp {
    Sexp::list(items.iter().map(|s| Sexp::string(s.clone())).collect())
}

/// A record whose fields follow the field's name: `(runs (min 3) (max 10))`.
fn field_record<'a>(
    src: Src<'a>,
    field: &Field<'a>,
    allowed: &[&str],
) -> Result<Record<'a>, SexpError> {
    Record::open_args(src, field.name, field.pos, field.args, allowed)
}

/// `#t` or `#f`.
fn boolean(src: Src<'_>, node: &Sexp, field: &str) -> Result<bool, SexpError> {
    match node.kind {
        SexpKind::Bool(b) => Ok(b),
        _ => Err(src.error(
            node.pos,
            format!(
                "field '{field}' expects #t or #f, found {} `{}`",
                node.describe(),
                decode::short(node)
            ),
        )),
    }
}
