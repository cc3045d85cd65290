//! S-expression documents with source positions.
//!
//! Configs and decision files are decoded from [`Sexp`] trees that keep where
//! each node starts, so that every error can name the file, line and column
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
///
/// An error about the whole file (missing, too large, not a regular file) has
/// no position and names only the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{source_name}{}: {message}", if pos.line == 0 { String::new() } else { format!(":{pos}") })]
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

    /// The same tree with every position zero, to compare what two texts say
    /// whatever their layout.
    pub fn without_positions(&self) -> Sexp {
        match &self.kind {
            SexpKind::List(items) => {
                Sexp::list(items.iter().map(Sexp::without_positions).collect())
            }
            kind => Sexp::new(kind.clone()),
        }
    }
}

/// How deep lists may nest. kiln's documents nest a few levels; the bound keeps
/// the recursive walks over a [`Sexp`] (printing, comparing, dropping) off the
/// end of the stack whatever the input.
pub const MAX_DEPTH: usize = 128;

/// Reads every top-level datum of `text`; `source_name` labels errors.
///
/// One pass over the text that keeps the line and column as it goes, so the
/// time is linear in the text (lexpr, used before, counted every node's
/// position from the start of the text: quadratic, minutes for a 1 MB file).
pub fn parse_document(text: &str, source_name: &str) -> Result<Vec<Sexp>, SexpError> {
    Reader {
        text,
        at: 0,
        line: 1,
        line_start: 0,
        source_name,
    }
    .document()
}

/// Reads the file at `path`, holding exactly one top-level datum, refusing
/// anything but a regular file of at most `max_bytes`.
pub fn parse_file(path: &Path, max_bytes: u64) -> Result<Sexp, SexpError> {
    let text = read_text(path, max_bytes)?;
    parse_single(&text, &path.display().to_string())
}

/// The UTF-8 text of the regular file at `path`, at most `max_bytes` long.
///
/// A fifo, a device or a folder is refused before it is opened (`/dev/zero`
/// would otherwise fill memory, a fifo block), and the read stops past the
/// limit, so memory stays bounded even when the file grows meanwhile.
pub fn read_text(path: &Path, max_bytes: u64) -> Result<String, SexpError> {
    use std::io::Read;
    let name = path.display().to_string();
    let fail = |message: String| SexpError {
        source_name: name.clone(),
        pos: Pos::default(),
        message,
    };
    let too_big = || {
        fail(format!(
            "the file is larger than {}, the most kiln reads",
            byte_size_text(max_bytes)
        ))
    };
    let meta = std::fs::metadata(path).map_err(|e| fail(format!("cannot read file: {e}")))?;
    if !meta.is_file() {
        return Err(fail(format!(
            "not a regular file ({}); expected a text file",
            file_kind(&meta.file_type())
        )));
    }
    if meta.len() > max_bytes {
        return Err(too_big());
    }
    let file = std::fs::File::open(path).map_err(|e| fail(format!("cannot read file: {e}")))?;
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(max_bytes + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| fail(format!("cannot read file: {e}")))?;
    if bytes.len() as u64 > max_bytes {
        return Err(too_big());
    }
    String::from_utf8(bytes).map_err(|e| {
        let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let valid = std::str::from_utf8(valid).expect("valid up to here");
        SexpError {
            source_name: name.clone(),
            pos: end_of(valid),
            message: "not UTF-8 text: this byte starts no UTF-8 character".into(),
        }
    })
}

fn file_kind(kind: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if kind.is_dir() {
        "a folder"
    } else if kind.is_fifo() {
        "a fifo"
    } else if kind.is_char_device() || kind.is_block_device() {
        "a device"
    } else if kind.is_socket() {
        "a socket"
    } else {
        "not a plain file"
    }
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

/// Where `text` ends, as the unbalanced-parenthesis message names it: the
/// column after the last line's last character.
fn end_of(text: &str) -> Pos {
    let line = text.lines().count().max(1);
    let column = text.lines().last().map_or(0, str::len) + 1;
    Pos { line, column }
}

/// The reader: a cursor over the text that knows its line.
struct Reader<'t> {
    text: &'t str,
    /// Byte offset of the next byte.
    at: usize,
    line: usize,
    /// Byte offset where the current line starts.
    line_start: usize,
    source_name: &'t str,
}

/// A list being read: where it opened, the byte that closes it, its items.
struct Open {
    pos: Pos,
    close: u8,
    items: Vec<Sexp>,
}

const UNSUPPORTED: &str = "expected a list, symbol, string, number or boolean";

impl Reader<'_> {
    fn pos(&self) -> Pos {
        Pos {
            line: self.line,
            column: self.at - self.line_start + 1,
        }
    }

    fn error(&self, pos: Pos, message: impl Into<String>) -> SexpError {
        SexpError {
            source_name: self.source_name.to_string(),
            pos,
            message: message.into(),
        }
    }

    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.at).copied()
    }

    /// Steps over one byte, counting lines.
    fn bump(&mut self) {
        if self.peek() == Some(b'\n') {
            self.line += 1;
            self.line_start = self.at + 1;
        }
        self.at += 1;
    }

    /// Skips whitespace and `;` comments.
    fn skip_blank(&mut self) {
        while let Some(b) = self.peek() {
            match b {
                b';' => {
                    while self.peek().is_some_and(|c| c != b'\n') {
                        self.at += 1;
                    }
                }
                b' ' | b'\t' | b'\n' | b'\r' | 0x0c => self.bump(),
                _ => return,
            }
        }
    }

    /// Lists are read with a stack of open lists rather than by recursion, so
    /// nesting costs no stack and a wide list no more than its items.
    fn document(mut self) -> Result<Vec<Sexp>, SexpError> {
        let mut open: Vec<Open> = Vec::new();
        let mut out = Vec::new();
        // Where a missing `)` most likely is: the first line, inside two or more lists, that
        // starts no further right than the innermost open list's `(`: written as its sibling,
        // so that list was meant to be closed before it.
        let mut misfit: Option<(Pos, Pos)> = None;
        let mut line = 0;
        loop {
            self.skip_blank();
            let pos = self.pos();
            let Some(b) = self.peek() else { break };
            let starts_line = std::mem::replace(&mut line, pos.line) != pos.line;
            if let [_, .., inner] = open.as_slice() {
                let closes = matches!(b, b')' | b']');
                if starts_line && !closes && misfit.is_none() && pos.column <= inner.pos.column {
                    misfit = Some((pos, inner.pos));
                }
            }
            let node = match b {
                b'(' | b'[' => {
                    open.push(self.open_list(pos, b, open.len())?);
                    continue;
                }
                b')' | b']' => self.close_list(pos, b, open.pop())?,
                b'"' => Sexp {
                    pos,
                    kind: SexpKind::Str(self.string(pos)?),
                },
                _ => Sexp {
                    pos,
                    kind: self.atom(pos)?,
                },
            };
            match open.last_mut() {
                Some(list) => list.items.push(node),
                None => out.push(node),
            }
        }
        // The innermost list still open is the one a missing `)` leaves open.
        match open.pop() {
            None => Ok(out),
            Some(list) => Err(self.never_closed(&list, misfit)),
        }
    }

    /// A list opened at `pos` by `b` (`(` or `[`) inside `depth` others.
    fn open_list(&mut self, pos: Pos, b: u8, depth: usize) -> Result<Open, SexpError> {
        if depth == MAX_DEPTH {
            return Err(self.error(pos, format!("lists nest deeper than {MAX_DEPTH} levels")));
        }
        self.bump();
        let close = if b == b'(' { b')' } else { b']' };
        Ok(Open {
            pos,
            close,
            items: Vec::new(),
        })
    }

    /// The list `b` (`)` or `]`, at `pos`) closes: the innermost one open, `list`, where the
    /// two match.
    fn close_list(&mut self, pos: Pos, b: u8, list: Option<Open>) -> Result<Sexp, SexpError> {
        self.bump();
        let closed = b as char;
        match list {
            None => Err(self.error(
                pos,
                format!("unbalanced parenthesis: this `{closed}` closes no list"),
            )),
            Some(list) if list.close != b => Err(self.error(
                pos,
                format!(
                    "mismatched parenthesis: this `{closed}` closes the list \
                     opened at {}, which `{}` closes",
                    list.pos, list.close as char
                ),
            )),
            Some(list) => Ok(Sexp {
                pos: list.pos,
                kind: SexpKind::List(list.items),
            }),
        }
    }

    /// The error of a text that ends with `list` open: at the line where a `)` is likely
    /// missing (`misfit`: that line, and the list it is indented as a sibling of), else at
    /// the list.
    fn never_closed(&self, list: &Open, misfit: Option<(Pos, Pos)>) -> SexpError {
        let end = end_of(self.text);
        match misfit {
            Some((at, sibling)) => self.error(
                at,
                format!(
                    "unbalanced parenthesis: a `)` is likely missing before this line, which is \
                     indented as a sibling of the list opened at {sibling}, not as its item; \
                     the list opened at {} is never closed (the file ends at {end})",
                    list.pos
                ),
            ),
            None => self.error(
                list.pos,
                format!(
                    "unbalanced parenthesis: the list opened here is never closed (the file ends at {end})"
                ),
            ),
        }
    }

    /// A double-quoted string, with the escapes the printer writes and R6RS's
    /// `\a \b \r \xHEX;` and line continuations.
    fn string(&mut self, start: Pos) -> Result<String, SexpError> {
        self.bump();
        let mut out = String::new();
        loop {
            // Runs without a quote or backslash are copied whole; both are
            // ASCII, so the run ends on a character boundary.
            let run = self.at;
            while self.peek().is_some_and(|c| c != b'"' && c != b'\\') {
                self.bump();
            }
            out.push_str(&self.text[run..self.at]);
            let escape = self.pos();
            match self.peek() {
                None => {
                    return Err(self.error(
                        start,
                        "unterminated string: the string opened here is never closed",
                    ))
                }
                Some(b'"') => {
                    self.bump();
                    return Ok(out);
                }
                Some(_) => self.bump(),
            }
            let Some(c) = self.peek() else { continue };
            self.bump();
            match c {
                b'"' => out.push('"'),
                b'\\' => out.push('\\'),
                b'n' => out.push('\n'),
                b't' => out.push('\t'),
                b'r' => out.push('\r'),
                b'a' => out.push('\u{7}'),
                b'b' => out.push('\u{8}'),
                b'x' => out.push(self.hex_escape(escape)?),
                b' ' | b'\t' | b'\n' => self.line_continuation(c, escape)?,
                _ => {
                    return Err(self.error(
                        escape,
                        "unknown escape in string; expected one of \\\" \\\\ \\n \\t \\r \\xHEX;",
                    ))
                }
            }
        }
    }

    /// The character of `\xHEX;`, after the `x`.
    fn hex_escape(&mut self, escape: Pos) -> Result<char, SexpError> {
        let digits = self.at;
        while self.peek().is_some_and(|c| c.is_ascii_hexdigit()) {
            self.at += 1;
        }
        let code = u32::from_str_radix(&self.text[digits..self.at], 16).ok();
        if self.peek() != Some(b';') {
            return Err(self.error(escape, "expected `\\xHEX;` in string: hex digits and a `;`"));
        }
        self.at += 1;
        code.and_then(char::from_u32)
            .ok_or_else(|| self.error(escape, "`\\xHEX;` names no character"))
    }

    /// `\` then blanks, a newline and blanks: nothing, so long strings can wrap.
    fn line_continuation(&mut self, first: u8, escape: Pos) -> Result<(), SexpError> {
        let mut newline = first == b'\n';
        while let Some(c @ (b' ' | b'\t' | b'\n')) = self.peek() {
            if c == b'\n' {
                if newline {
                    break;
                }
                newline = true;
            }
            self.bump();
        }
        if newline {
            Ok(())
        } else {
            Err(self.error(escape, "a `\\` before blanks in a string must end its line"))
        }
    }

    /// A symbol, number or boolean: everything up to the next delimiter.
    fn atom(&mut self, pos: Pos) -> Result<SexpKind, SexpError> {
        let start = self.at;
        while self.peek().is_some_and(|c| {
            !matches!(
                c,
                b' ' | b'\t' | b'\n' | b'\r' | 0x0c | b'(' | b')' | b'[' | b']' | b'"' | b';'
            )
        }) {
            self.at += 1;
        }
        let token = &self.text[start..self.at];
        let unsigned = token.strip_prefix(['+', '-']).unwrap_or(token);
        let numeric = matches!(
            unsigned.as_bytes(),
            [b'0'..=b'9', ..] | [b'.', b'0'..=b'9', ..]
        );
        match token {
            "#t" | "#true" => Ok(SexpKind::Bool(true)),
            "#f" | "#false" => Ok(SexpKind::Bool(false)),
            "." => Err(self.error(pos, "dotted pairs are not allowed; write a plain list")),
            _ if numeric => number(token).ok_or_else(|| {
                self.error(
                    pos,
                    format!("'{token}' is not a number that fits in 64 bits"),
                )
            }),
            _ if token.starts_with(['#', '\'', '`', ',']) => {
                Err(self.error(pos, format!("unsupported syntax `{token}`; {UNSUPPORTED}")))
            }
            _ => Ok(SexpKind::Symbol(token.to_string())),
        }
    }
}

/// An integer, or a finite decimal number.
fn number(token: &str) -> Option<SexpKind> {
    let digits = token.strip_prefix(['+', '-']).unwrap_or(token);
    if digits.bytes().all(|c| c.is_ascii_digit()) {
        return token.parse().ok().map(SexpKind::Int);
    }
    let decimal = digits
        .bytes()
        .all(|c| c.is_ascii_digit() || matches!(c, b'.' | b'e' | b'E' | b'+' | b'-'));
    let x: f64 = token.parse().ok().filter(|_| decimal)?;
    x.is_finite().then_some(SexpKind::Float(x))
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

/// Floats print in plain decimal with a decimal point, so they read back as
/// the same float (and as a float, not an integer).
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

/// A size as a config would write it: the largest binary unit that divides it.
pub fn byte_size_text(bytes: u64) -> String {
    let unit = ["TiB", "GiB", "MiB", "KiB"]
        .into_iter()
        .zip([40, 30, 20, 10])
        .find(|&(_, shift)| bytes >= 1 << shift && bytes.is_multiple_of(1 << shift));
    match unit {
        Some((name, shift)) => format!("{} {name}", bytes >> shift),
        None => format!("{bytes} bytes"),
    }
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
        assert_eq!(doc.without_positions(), again.without_positions());
    }

    #[test]
    fn unclosed_list_is_an_error_with_position() {
        let err = parse_single("(a\n (b 1)", "f.sexp").unwrap_err();
        assert!(err.message.contains("unbalanced"), "{err}");
        assert_eq!(err.source_name, "f.sexp");
        assert!(err.pos.line >= 1);
    }

    fn error(text: &str) -> String {
        parse_single(text, "t").unwrap_err().to_string()
    }

    #[test]
    fn atoms_read_as_numbers_booleans_and_symbols() {
        let doc = parse_single("(a -3 +4 0.5 -.5 1e3 #t #false - ->x x.y)", "t").unwrap();
        let kinds: Vec<_> = doc
            .as_list()
            .unwrap()
            .iter()
            .map(|n| n.kind.clone())
            .collect();
        use SexpKind::*;
        let symbol = |s: &str| Symbol(s.into());
        assert_eq!(
            kinds,
            [
                symbol("a"),
                Int(-3),
                Int(4),
                Float(0.5),
                Float(-0.5),
                Float(1000.0),
                Bool(true),
                Bool(false),
                symbol("-"),
                symbol("->x"),
                symbol("x.y"),
            ]
        );
    }

    #[test]
    fn strings_read_escapes_and_keep_lines_counted() {
        let doc = parse_single("(\"a\\x41;\\t\\\n   b\n\" x)", "t").unwrap();
        let items = doc.as_list().unwrap();
        assert_eq!(items[0].kind, SexpKind::Str("aA\tb\n".into()));
        assert_eq!(items[1].pos, Pos { line: 3, column: 3 });
    }

    #[test]
    fn bad_syntax_is_located_and_named() {
        assert_eq!(
            error("(a\n  (b]"),
            "t:2:5: mismatched parenthesis: this `]` closes the list opened at 2:3, which `)` closes"
        );
        assert_eq!(
            error("(a . b)"),
            "t:1:4: dotted pairs are not allowed; write a plain list"
        );
        assert_eq!(
            error("(a 'b)"),
            "t:1:4: unsupported syntax `'b`; expected a list, symbol, string, number or boolean"
        );
        assert_eq!(
            error("(n 99999999999999999999)"),
            "t:1:4: '99999999999999999999' is not a number that fits in 64 bits"
        );
        assert_eq!(
            error("(s \"abc)"),
            "t:1:4: unterminated string: the string opened here is never closed"
        );
        assert!(error("(s \"\\q\")").starts_with("t:1:5: unknown escape"));
    }

    #[test]
    fn nesting_is_bounded() {
        let deep = |n: usize| format!("{}{}", "(".repeat(n), ")".repeat(n));
        assert!(parse_single(&deep(MAX_DEPTH), "t").is_ok());
        assert_eq!(
            error(&deep(MAX_DEPTH + 1)),
            format!(
                "t:1:{}: lists nest deeper than {MAX_DEPTH} levels",
                MAX_DEPTH + 1
            )
        );
    }
}
