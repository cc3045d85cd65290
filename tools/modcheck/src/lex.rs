//! Just enough of a Rust lexer to find the module paths a file names (and, for
//! `length`, where its functions begin and end).
//!
//! Comments, strings and character literals are dropped (a path in a doc
//! comment or a message is no dependency); what is left is scanned for paths
//! that start with `crate`, `super` or `self`, with `use` groups expanded into
//! one path per entry. Inline `mod name { ... }` blocks are tracked, since
//! `super` and `self` inside them are relative to the inline module.

/// A path the source names, as written (groups expanded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ref {
    /// The inline modules the path sits in, outermost first (empty at file level).
    pub scope: Vec<String>,
    /// The segments, from `crate`/`super`/`self` on; a glob ends in `*`.
    pub segments: Vec<String>,
    /// 1-based line of the path's last segment.
    pub line: usize,
}

/// What one file contributes: its paths and its inline modules.
#[derive(Debug, Default)]
pub struct Scan {
    pub refs: Vec<Ref>,
    /// Each inline module's path below the file's module.
    pub inline_mods: Vec<Vec<String>>,
    /// The file-level `mod name;` declarations (modules in files of their own).
    pub file_mods: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Tok {
    Ident(String),
    PathSep,
    Open,
    Close,
    Comma,
    Star,
    Other(char),
}

/// Scans one file's source.
pub fn scan(source: &str) -> Scan {
    let toks = tokens(source);
    let mut out = Scan::default();
    // Open inline modules with the brace depth their body is at.
    let mut scope: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut pending_mod: Option<String> = None;
    let mut i = 0;
    while i < toks.len() {
        match &toks[i].0 {
            Tok::Ident(kw) if kw == "mod" => match (toks.get(i + 1), toks.get(i + 2)) {
                (Some((Tok::Ident(name), _)), Some((Tok::Open, _))) => {
                    pending_mod = Some(name.clone());
                    i += 2;
                    continue;
                }
                (Some((Tok::Ident(name), _)), Some((Tok::Other(';'), _))) if depth == 0 => {
                    out.file_mods.push(name.clone());
                }
                _ => {}
            },
            Tok::Open => {
                depth += 1;
                if let Some(name) = pending_mod.take() {
                    scope.push((name, depth));
                    out.inline_mods
                        .push(scope.iter().map(|(n, _)| n.clone()).collect());
                }
            }
            Tok::Close => {
                if scope.last().is_some_and(|(_, d)| *d == depth) {
                    scope.pop();
                }
                depth = depth.saturating_sub(1);
            }
            Tok::Ident(kw) if starts_path(&toks, i, kw) => {
                let mut paths = Vec::new();
                i = expand(&toks, i, Vec::new(), &mut paths);
                let names: Vec<String> = scope.iter().map(|(n, _)| n.clone()).collect();
                out.refs
                    .extend(paths.into_iter().map(|(segments, line)| Ref {
                        scope: names.clone(),
                        segments,
                        line,
                    }));
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// Whether the identifier at `i` begins a module-relative path.
fn starts_path(toks: &[(Tok, usize)], i: usize, kw: &str) -> bool {
    let tok = |j: usize| toks.get(j).map(|(t, _)| t);
    let prev = |back: usize| i.checked_sub(back).and_then(tok);
    if !matches!(kw, "crate" | "super" | "self") || tok(i + 1) != Some(&Tok::PathSep) {
        return false;
    }
    // `a::self::x` is no path start; `pub(in crate::a)` is a visibility, not a use.
    let visibility = kw == "crate"
        && prev(1) == Some(&Tok::Ident("in".into()))
        && prev(2) == Some(&Tok::Other('('))
        && prev(3) == Some(&Tok::Ident("pub".into()));
    prev(1) != Some(&Tok::PathSep) && !visibility
}

/// Expands the path (or `use` tree) starting at `i` below `path` into `out`;
/// returns the index after it.
fn expand(
    toks: &[(Tok, usize)],
    mut i: usize,
    mut path: Vec<String>,
    out: &mut Vec<(Vec<String>, usize)>,
) -> usize {
    let mut line = toks.get(i).map_or(0, |t| t.1);
    loop {
        match toks.get(i) {
            Some((Tok::Ident(seg), l)) => {
                path.push(seg.clone());
                line = *l;
                i += 1;
                if toks.get(i).map(|t| &t.0) == Some(&Tok::PathSep) {
                    i += 1;
                    continue;
                }
                out.push((path, line));
                return i;
            }
            Some((Tok::Open, _)) => {
                i += 1;
                loop {
                    match toks.get(i).map(|t| &t.0) {
                        None => return i,
                        Some(Tok::Close) => return i + 1,
                        Some(Tok::Comma) => i += 1,
                        Some(_) => {
                            let before = i;
                            i = expand(toks, i, path.clone(), out);
                            // `x as y`: the alias names nothing new.
                            if toks.get(i).map(|t| &t.0) == Some(&Tok::Ident("as".into())) {
                                i += 2;
                            }
                            if i == before {
                                i += 1;
                            }
                        }
                    }
                }
            }
            Some((Tok::Star, l)) => {
                path.push("*".into());
                out.push((path, *l));
                return i + 1;
            }
            // A turbofish or anything else after `::` ends the path.
            _ => {
                if !path.is_empty() {
                    out.push((path, line));
                }
                return i;
            }
        }
    }
}

/// The tokens of `src` that matter for paths, each with its line.
pub(crate) fn tokens(src: &str) -> Vec<(Tok, usize)> {
    let c: Vec<char> = src.chars().collect();
    let at = |j: usize| c.get(j).copied().unwrap_or('\0');
    let mut toks = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch == '/' && at(i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && at(i + 1) == '*' {
            // Block comments nest in Rust.
            let mut nest = 0;
            while i < c.len() {
                if c[i] == '/' && at(i + 1) == '*' {
                    nest += 1;
                    i += 2;
                } else if c[i] == '*' && at(i + 1) == '/' {
                    nest -= 1;
                    i += 2;
                    if nest == 0 {
                        break;
                    }
                } else {
                    line += usize::from(c[i] == '\n');
                    i += 1;
                }
            }
        } else if ch == '"' {
            i = skip_string(&c, i + 1, &mut line);
        } else if ch == '\'' {
            // A char literal ('x', '\n', '\u{..}') or a lifetime/label ('a).
            if at(i + 1) == '\\' {
                i += 3;
                while i < c.len() && c[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if at(i + 2) == '\'' {
                i += 3;
            } else {
                i += 1;
            }
        } else if ch == '_' || ch.is_alphabetic() {
            let start = i;
            while i < c.len() && (c[i] == '_' || c[i].is_alphanumeric()) {
                i += 1;
            }
            let word: String = c[start..i].iter().collect();
            let raw_prefix = matches!(word.as_str(), "r" | "br" | "cr");
            if raw_prefix && (at(i) == '"' || at(i) == '#') && is_raw_string(&c, i) {
                i = skip_raw_string(&c, i, &mut line);
            } else if matches!(word.as_str(), "b" | "c") && at(i) == '"' {
                i = skip_string(&c, i + 1, &mut line);
            } else if word == "r" && at(i) == '#' {
                // A raw identifier, r#name: the name is the identifier.
                let start = i + 1;
                i = start;
                while i < c.len() && (c[i] == '_' || c[i].is_alphanumeric()) {
                    i += 1;
                }
                toks.push((Tok::Ident(c[start..i].iter().collect()), line));
            } else {
                toks.push((Tok::Ident(word), line));
            }
        } else if ch.is_ascii_digit() {
            while i < c.len() && (c[i] == '_' || c[i].is_alphanumeric()) {
                i += 1;
            }
        } else {
            let tok = match ch {
                ':' if at(i + 1) == ':' => {
                    i += 1;
                    Tok::PathSep
                }
                '{' => Tok::Open,
                '}' => Tok::Close,
                ',' => Tok::Comma,
                '*' => Tok::Star,
                other => Tok::Other(other),
            };
            toks.push((tok, line));
            i += 1;
        }
    }
    toks
}

/// Skips a quoted string whose body starts at `i`; returns the index after it.
fn skip_string(c: &[char], mut i: usize, line: &mut usize) -> usize {
    while i < c.len() {
        match c[i] {
            '\\' => {
                // An escaped newline still ends a line.
                *line += usize::from(c.get(i + 1) == Some(&'\n'));
                i += 2;
            }
            '"' => return i + 1,
            ch => {
                *line += usize::from(ch == '\n');
                i += 1;
            }
        }
    }
    i
}

/// Whether `#...#"` (or just `"`) follows at `i`: a raw string, not a raw identifier.
fn is_raw_string(c: &[char], mut i: usize) -> bool {
    while c.get(i) == Some(&'#') {
        i += 1;
    }
    c.get(i) == Some(&'"')
}

/// Skips a raw string whose hashes (if any) start at `i`; returns the index after it.
fn skip_raw_string(c: &[char], mut i: usize, line: &mut usize) -> usize {
    let mut hashes = 0;
    while c.get(i) == Some(&'#') {
        hashes += 1;
        i += 1;
    }
    i += 1; // the opening quote
    while i < c.len() {
        if c[i] == '"' && (1..=hashes).all(|k| c.get(i + k) == Some(&'#')) {
            return i + 1 + hashes;
        }
        *line += usize::from(c[i] == '\n');
        i += 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paths(src: &str) -> Vec<(String, usize)> {
        scan(src)
            .refs
            .into_iter()
            .map(|r| (r.segments.join("::"), r.line))
            .collect()
    }

    #[test]
    fn grouped_use_is_one_path_per_entry() {
        let src = "use crate::{a::X, b::{self, Y as Z},\n    c::*};\n";
        assert_eq!(
            paths(src),
            [
                ("crate::a::X".into(), 1),
                ("crate::b::self".into(), 1),
                ("crate::b::Y".into(), 1),
                ("crate::c::*".into(), 2),
            ]
        );
    }

    #[test]
    fn comments_strings_and_chars_are_skipped() {
        let src = r###"
            // use crate::a;
            /// See [`crate::b`].
            /* crate::c /* nested */ crate::d */
            const S: &str = "crate::e::F";
            const R: &str = r#"crate::f "quoted" crate::g"#;
            const B: &[u8] = b"crate::h";
            const Q: char = '"';
            fn f<'a>(x: &'a str) -> char { '\'' }
            use crate::real::Thing;
        "###;
        assert_eq!(paths(src), [("crate::real::Thing".into(), 10)]);
    }

    #[test]
    fn paths_in_expressions_and_visibilities() {
        let src = "pub(in crate::a) fn f() { for x in crate::b::all() { super::c::g::<u8>(x); } }";
        assert_eq!(
            paths(src),
            [("crate::b::all".into(), 1), ("super::c::g".into(), 1)]
        );
    }

    #[test]
    fn inline_modules_scope_their_paths() {
        let src = "fn f() {}\nmod tests {\n    use super::f;\n    mod deep { use super::super::g; }\n}\nuse self::h;\n";
        let s = scan(src);
        let scoped: Vec<_> = s.refs.iter().map(|r| r.scope.join("::")).collect();
        assert_eq!(scoped, ["tests", "tests::deep", ""]);
        assert_eq!(s.inline_mods, [vec!["tests"], vec!["tests", "deep"]]);
        assert!(s.file_mods.is_empty());
        assert_eq!(
            scan("mod a;\npub mod b;\nmod c { mod d; }").file_mods,
            ["a", "b"]
        );
    }
}
