//! Function lengths: a function longer than a screen or two does more than one
//! thing, so the crates keep every function outside their tests to
//! [`MAX_LINES`] lines, from its `fn` line to its closing brace.

use crate::lex::{tokens, Tok};

/// The most lines a function outside tests may span.
pub const MAX_LINES: usize = 100;

/// A function with a body, found in a file's source.
#[derive(Debug, PartialEq, Eq)]
pub struct Function {
    pub name: String,
    /// 1-based line of its `fn`.
    pub line: usize,
    /// Lines from its `fn` to its closing brace, both counted.
    pub lines: usize,
}

/// Every function with a body in `source`, nested ones too, leaving out what
/// a test attribute (`#[test]`, `#[cfg(test)]`, `#[tokio::test]`) marks: such
/// a function or module is skipped whole.
pub fn functions(source: &str) -> Vec<Function> {
    let toks = tokens(source);
    let mut out = Vec::new();
    let mut test_item = false;
    let mut i = 0;
    while i < toks.len() {
        match &toks[i].0 {
            Tok::Other('#') if toks.get(i + 1).map(|t| &t.0) == Some(&Tok::Other('[')) => {
                let (end, names_test) = attribute(&toks, i + 1);
                test_item |= names_test;
                i = end;
                continue;
            }
            Tok::Ident(kw) if kw == "fn" || kw == "mod" => {
                if let Some((open, close)) = body(&toks, i) {
                    if test_item {
                        i = close + 1;
                        test_item = false;
                        continue;
                    }
                    if let (true, Some((Tok::Ident(name), _))) = (kw == "fn", toks.get(i + 1)) {
                        out.push(Function {
                            name: name.clone(),
                            line: toks[i].1,
                            lines: toks[close].1 - toks[i].1 + 1,
                        });
                    }
                    i = open + 1;
                    continue;
                }
                test_item = false;
            }
            Tok::Other(';') | Tok::Open => test_item = false,
            _ => {}
        }
        i += 1;
    }
    out
}

/// The attribute whose `[` is at `i`: the index after its `]`, and whether
/// it names `test` (as `test`, `cfg(test)` or `a::test`).
fn attribute(toks: &[(Tok, usize)], i: usize) -> (usize, bool) {
    let mut depth = 0;
    let mut names_test = false;
    for (j, (tok, _)) in toks.iter().enumerate().skip(i) {
        match tok {
            Tok::Other('[') => depth += 1,
            Tok::Other(']') => {
                depth -= 1;
                if depth == 0 {
                    return (j + 1, names_test);
                }
            }
            Tok::Ident(word) if word == "test" => names_test = true,
            // `cfg(not(test))` is code that runs outside tests.
            Tok::Ident(word) if word == "not" => return (j, false),
            _ => {}
        }
    }
    (toks.len(), names_test)
}

/// The indices of the braces of the body of the item whose keyword is at `i`,
/// or `None` when it has none (`fn f();` in a trait, `mod m;`, a `fn(u8)` type).
fn body(toks: &[(Tok, usize)], i: usize) -> Option<(usize, usize)> {
    if !matches!(toks.get(i + 1), Some((Tok::Ident(_), _))) {
        return None;
    }
    let open = (i + 2..toks.len()).find(|&j| matches!(toks[j].0, Tok::Open | Tok::Other(';')))?;
    if toks[open].0 != Tok::Open {
        return None;
    }
    let mut depth = 0;
    for (j, (tok, _)) in toks.iter().enumerate().skip(open) {
        match tok {
            Tok::Open => depth += 1,
            Tok::Close => {
                depth -= 1;
                if depth == 0 {
                    return Some((open, j));
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spans(src: &str) -> Vec<(String, usize, usize)> {
        functions(src)
            .into_iter()
            .map(|f| (f.name, f.line, f.lines))
            .collect()
    }

    #[test]
    fn counts_from_fn_to_closing_brace_and_finds_nested_and_method_bodies() {
        let src = "fn a() {\n    let s = \"}\";\n    fn inner() { }\n}\n\
                   impl X {\n    pub fn b(&self) -> u8 {\n        1\n    }\n}\n";
        assert_eq!(
            spans(src),
            [
                ("a".into(), 1, 4),
                ("inner".into(), 3, 1),
                ("b".into(), 6, 3)
            ]
        );
    }

    #[test]
    fn skips_declarations_pointer_types_and_test_code() {
        let src = "trait T { fn d(&self); }\ntype F = fn(u8) -> u8;\n\
                   #[cfg(test)]\nmod tests {\n    fn helper() {}\n}\n\
                   #[test]\nfn t() {}\n#[cfg(not(test))]\nfn live() {}\n\
                   #[tokio::test]\nasync fn at() {}\n";
        assert_eq!(spans(src), [("live".into(), 10, 1)]);
    }
}
