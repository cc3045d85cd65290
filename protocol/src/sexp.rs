//! S-expression documents with source positions, read with lexpr.
//!
//! Configs and decision files are decoded from [`Sexp`] trees rather than from
//! plain lexpr values so that every error can name the file, line and column
//! of the offending text.

use std::fmt;
use std::path::Path;

/// A 1-based line and column in a source text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Pos {
    /// 1-based line.
    pub line: usize,
    /// 1-based column (byte offset within the line plus one).
    pub column: usize,
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.column)
    }
}

/// An error in an s-expression document, located in its source.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{source_name}:{pos}: {message}")]
pub struct SexpError {
    /// The file name (or another label) of the document.
    pub source_name: String,
    /// Where the error is.
    pub pos: Pos,
    /// What is wrong and what was expected.
    pub message: String,
}

/// A node of an s-expression document.
#[derive(Debug, Clone, PartialEq)]
pub struct Sexp {
    /// Where the node starts in the source (zero for generated nodes).
    pub pos: Pos,
    /// What the node is.
    pub kind: SexpKind,
}

/// The kinds of node a kiln document may contain.
#[derive(Debug, Clone, PartialEq)]
pub enum SexpKind {
    /// A proper list `(a b c)`.
    List(Vec<Sexp>),
    /// A bare symbol such as `simulated-annealing`.
    Symbol(String),
    /// A double-quoted string.
    Str(String),
    /// An integer.
    Int(i64),
    /// A floating-point number.
    Float(f64),
    /// `#t` or `#f`.
    Bool(bool),
}

impl Sexp {
    /// A generated node (no source position).
    pub fn new(kind: SexpKind) -> Self {
        Sexp {
            pos: Pos::default(),
            kind,
        }
    }

    /// A generated symbol.
    pub fn symbol(s: impl Into<String>) -> Self {
        Sexp::new(SexpKind::Symbol(s.into()))
    }

    /// A generated string.
    pub fn string(s: impl Into<String>) -> Self {
        Sexp::new(SexpKind::Str(s.into()))
    }

    /// A generated list.
    pub fn list(items: Vec<Sexp>) -> Self {
        Sexp::new(SexpKind::List(items))
    }

    /// A generated `(name args...)` field.
    pub fn field(name: &str, args: Vec<Sexp>) -> Self {
        let mut items = vec![Sexp::symbol(name)];
        items.extend(args);
        Sexp::list(items)
    }

    /// A word for the kind of node, for error messages.
    pub fn describe(&self) -> &'static str {
        match self.kind {
            SexpKind::List(_) => "a list",
            SexpKind::Symbol(_) => "a symbol",
            SexpKind::Str(_) => "a string",
            SexpKind::Int(_) => "an integer",
            SexpKind::Float(_) => "a number",
            SexpKind::Bool(_) => "a boolean",
        }
    }

    /// The symbol's name, if this is a symbol.
    pub fn as_symbol(&self) -> Option<&str> {
        match &self.kind {
            SexpKind::Symbol(s) => Some(s),
            _ => None,
        }
    }

    /// The list's items, if this is a list.
    pub fn as_list(&self) -> Option<&[Sexp]> {
        match &self.kind {
            SexpKind::List(items) => Some(items),
            _ => None,
        }
    }
}

/// Reads every top-level datum of `text`; `source_name` labels errors.
pub fn parse_document(text: &str, source_name: &str) -> Result<Vec<Sexp>, SexpError> {
    let mut parser = lexpr::Parser::from_str(text);
    let mut out = Vec::new();
    loop {
        match parser.next_datum() {
            Ok(Some(datum)) => out.push(convert(datum.as_ref(), source_name)?),
            Ok(None) => return Ok(out),
            Err(e) => return Err(syntax_error(&e, text, source_name)),
        }
    }
}

/// Reads a file holding exactly one top-level datum.
pub fn parse_file(path: &Path) -> Result<Sexp, SexpError> {
    let name = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| SexpError {
        source_name: name.clone(),
        pos: Pos::default(),
        message: format!("cannot read file: {e}"),
    })?;
    parse_single(&text, &name)
}

/// Reads a text holding exactly one top-level datum.
pub fn parse_single(text: &str, source_name: &str) -> Result<Sexp, SexpError> {
    let mut items = parse_document(text, source_name)?;
    match items.len() {
        1 => Ok(items.remove(0)),
        0 => Err(SexpError {
            source_name: source_name.to_string(),
            pos: Pos { line: 1, column: 1 },
            message: "empty document; expected one s-expression".into(),
        }),
        _ => Err(SexpError {
            source_name: source_name.to_string(),
            pos: items[1].pos,
            message: "unexpected second top-level expression; a file holds exactly one".into(),
        }),
    }
}

fn syntax_error(e: &lexpr::parse::Error, text: &str, source_name: &str) -> SexpError {
    let located = |pos: Pos, message: String| SexpError {
        source_name: source_name.to_string(),
        pos,
        message,
    };
    // Parenthesis problems are worded from a scan of the text, which can name
    // where the unclosed list opened; lexpr only knows where it gave up.
    match paren_balance(text) {
        Balance::Unclosed(open) => {
            return located(
                open,
                format!("unbalanced parenthesis: the list opened here is never closed (the file ends at {})", end_of(text)),
            )
        }
        Balance::ExtraClose(close) => {
            return located(close, "unbalanced parenthesis: this `)` closes no list".into())
        }
        Balance::Balanced => {}
    }
    let pos = match e.location() {
        Some(loc) => Pos {
            line: loc.line(),
            column: loc.column().max(1),
        },
        None => end_of(text),
    };
    let raw = e.to_string();
    let detail = raw.split(" at line").next().unwrap_or(&raw);
    located(pos, format!("syntax error: {detail}"))
}

enum Balance {
    Balanced,
    Unclosed(Pos),
    ExtraClose(Pos),
}

/// Matches parentheses outside strings and comments.
fn paren_balance(text: &str) -> Balance {
    let mut open: Vec<Pos> = Vec::new();
    let (mut in_str, mut escaped, mut in_comment) = (false, false, false);
    let (mut line, mut column) = (1, 0);
    for c in text.chars() {
        column += c.len_utf8();
        let here = Pos { line, column };
        if c == '\n' {
            line += 1;
            column = 0;
        }
        if in_comment {
            in_comment = c != '\n';
        } else if in_str {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_str = false,
                _ => {}
            }
        } else {
            match c {
                ';' => in_comment = true,
                '"' => in_str = true,
                '(' | '[' => open.push(here),
                ')' | ']' if open.pop().is_none() => return Balance::ExtraClose(here),
                _ => {}
            }
        }
    }
    match open.pop() {
        Some(pos) => Balance::Unclosed(pos),
        None => Balance::Balanced,
    }
}

fn end_of(text: &str) -> Pos {
    let line = text.lines().count().max(1);
    let column = text.lines().last().map_or(0, str::len) + 1;
    Pos { line, column }
}

fn convert(datum: lexpr::datum::Ref<'_>, source_name: &str) -> Result<Sexp, SexpError> {
    let start = datum.span().start();
    let pos = Pos {
        line: start.line(),
        column: start.column() + 1,
    };
    let err = |message: String| SexpError {
        source_name: source_name.to_string(),
        pos,
        message,
    };
    use lexpr::Value;
    let kind = match datum.value() {
        Value::Null => SexpKind::List(Vec::new()),
        Value::Cons(_) => {
            let mut items = Vec::new();
            let mut iter = datum.list_iter().expect("a cons cell is a list");
            for item in iter.by_ref() {
                items.push(convert(item, source_name)?);
            }
            if iter.next().is_some() {
                return Err(err(
                    "dotted pairs are not allowed; write a plain list".into()
                ));
            }
            SexpKind::List(items)
        }
        Value::Symbol(s) => SexpKind::Symbol(s.to_string()),
        Value::String(s) => SexpKind::Str(s.to_string()),
        Value::Bool(b) => SexpKind::Bool(*b),
        Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                SexpKind::Int(i)
            } else if let Some(f) = n.as_f64() {
                SexpKind::Float(f)
            } else {
                return Err(err(format!("number {n} is out of range")));
            }
        }
        Value::Nil => SexpKind::List(Vec::new()),
        other => {
            return Err(err(format!(
                "unsupported syntax `{other}`; expected a list, symbol, string, number or boolean"
            )))
        }
    };
    Ok(Sexp { pos, kind })
}

// ---------------------------------------------------------------------------
// Printing

const LINE_WIDTH: usize = 96;

impl fmt::Display for Sexp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::new();
        pretty(self, 0, &mut out);
        f.write_str(&out)
    }
}

fn flat(node: &Sexp, out: &mut String) {
    match &node.kind {
        SexpKind::List(items) => {
            out.push('(');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                flat(item, out);
            }
            out.push(')');
        }
        SexpKind::Symbol(s) => out.push_str(s),
        SexpKind::Str(s) => quote_into(s, out),
        SexpKind::Int(i) => out.push_str(&i.to_string()),
        SexpKind::Float(x) => out.push_str(&format_float(*x)),
        SexpKind::Bool(b) => out.push_str(if *b { "#t" } else { "#f" }),
    }
}

/// Floats print in plain decimal (lexpr reads no exponents) with a decimal
/// point, so they read back as the same float.
fn format_float(x: f64) -> String {
    let s = x.to_string();
    if s.contains('.') || !x.is_finite() {
        s
    } else {
        format!("{s}.0")
    }
}

fn quote_into(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out.push('"');
}

fn pretty(node: &Sexp, indent: usize, out: &mut String) {
    let mut one_line = String::new();
    flat(node, &mut one_line);
    let items = match &node.kind {
        SexpKind::List(items) if indent + one_line.len() > LINE_WIDTH && items.len() > 1 => items,
        _ => {
            out.push_str(&one_line);
            return;
        }
    };
    // Keep the head (and a leading atom argument) on the first line, break the rest.
    out.push('(');
    flat(&items[0], out);
    for item in &items[1..] {
        out.push('\n');
        out.push_str(&" ".repeat(indent + 1));
        pretty(item, indent + 1, out);
    }
    out.push(')');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_are_one_based() {
        let doc = parse_single("(a\n  (b 1))", "t").unwrap();
        let items = doc.as_list().unwrap();
        assert_eq!(doc.pos, Pos { line: 1, column: 1 });
        assert_eq!(items[1].pos, Pos { line: 2, column: 3 });
    }

    #[test]
    fn comments_are_skipped() {
        let doc = parse_single("; header\n(a ; trailing\n b)", "t").unwrap();
        assert_eq!(doc.as_list().unwrap().len(), 2);
    }

    #[test]
    fn printing_round_trips() {
        let text = r#"(x (s "a \"q\" \\ b") (n -3) (f 0.5) (g 1.0) (t 0.00005) (b #t) (l ()))"#;
        let doc = parse_single(text, "t").unwrap();
        let again = parse_single(&doc.to_string(), "t").unwrap();
        assert_eq!(strip(&doc), strip(&again));
    }

    #[test]
    fn unclosed_list_is_an_error_with_position() {
        let err = parse_single("(a\n (b 1)", "f.sexp").unwrap_err();
        assert!(err.message.contains("unbalanced"), "{err}");
        assert_eq!(err.source_name, "f.sexp");
        assert!(err.pos.line >= 1);
    }

    fn strip(s: &Sexp) -> Sexp {
        match &s.kind {
            SexpKind::List(items) => Sexp::list(items.iter().map(strip).collect()),
            k => Sexp::new(k.clone()),
        }
    }
}
