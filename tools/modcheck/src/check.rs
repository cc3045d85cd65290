//! The module graph of one crate and the cycles in it.
//!
//! A reference from module A to module B is an edge unless one contains the
//! other (a child using its parent's items, or a parent re-exporting a
//! child's, is how modules are meant to work). Any other edge is lifted to
//! the two children of the lowest common ancestor that contain A and B: a
//! folder's modules must depend on one another one way only, whichever files
//! inside them hold the references.

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use crate::lex::{self, Ref};

/// A module path below the crate root (empty for the root; see `MAIN_ROOT`).
type Module = Vec<String>;

/// Where an edge comes from: a file, a line and the path as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evidence {
    pub file: String,
    pub line: usize,
    pub written: String,
}

/// One cycle: `modules` starts and ends with the same module; `evidence[i]`
/// is the reference behind the edge `modules[i] -> modules[i + 1]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cycle {
    pub modules: Vec<String>,
    pub evidence: Vec<Evidence>,
}

impl std::fmt::Display for Cycle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cycle between modules: {} (", self.modules.join(" -> "))?;
        for (k, e) in self.evidence.iter().enumerate() {
            let sep = if k == 0 { "" } else { ", " };
            write!(f, "{sep}{}:{} uses {}", e.file, e.line, e.written)?;
        }
        write!(f, ")")
    }
}

/// The result for one crate.
#[derive(Debug)]
pub struct Report {
    /// Modules backed by a file.
    pub modules: usize,
    pub cycles: Vec<Cycle>,
}

/// The root of a binary's own modules when the crate also has a library:
/// main.rs is then a crate of its own, whose `crate::` is not the library's.
const MAIN_ROOT: &str = "<main>";

/// The module a file under `src/` defines, or `None` for a file outside the
/// module trees checked (`src/bin/`, separate crates each).
fn file_module(path: &str, main_mods: &BTreeSet<String>) -> Option<Module> {
    let stem = path.strip_suffix(".rs")?;
    let mut parts: Vec<String> = stem.split('/').map(String::from).collect();
    match parts[0].as_str() {
        "lib" if parts.len() == 1 => return Some(Vec::new()),
        "main" if parts.len() == 1 => {
            return Some(if main_mods.is_empty() {
                Vec::new()
            } else {
                vec![MAIN_ROOT.into()]
            })
        }
        "bin" => return None,
        first if main_mods.contains(first) => parts.insert(0, MAIN_ROOT.into()),
        _ => {}
    }
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    Some(parts)
}

/// Checks one crate, given each file under its `src/` as (path relative to
/// `src/` with `/` separators, source text).
pub fn check_crate(files: &[(String, String)]) -> Report {
    let mut sorted: Vec<&(String, String)> = files.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let scans: Vec<(&str, lex::Scan)> = sorted
        .iter()
        .map(|(path, source)| (path.as_str(), lex::scan(source)))
        .collect();

    // With a library, the modules main.rs declares itself form a tree of their own.
    let declared = |name: &str| {
        scans
            .iter()
            .find(|(p, _)| *p == name)
            .map(|(_, s)| s.file_mods.iter().cloned().collect::<BTreeSet<_>>())
    };
    let main_mods = match (declared("lib.rs"), declared("main.rs")) {
        (Some(lib), Some(main)) => {
            let mut own: BTreeSet<String> = main.difference(&lib).cloned().collect();
            // Non-empty even when main.rs declares nothing: it still is a separate root.
            own.insert(MAIN_ROOT.into());
            own
        }
        _ => BTreeSet::new(),
    };

    let mut known: BTreeSet<Module> = BTreeSet::from([Vec::new()]);
    let mut scanned: Vec<(&str, Module, Vec<Ref>)> = Vec::new();
    for (path, scan) in scans {
        let Some(module) = file_module(path, &main_mods) else {
            continue;
        };
        for inline in scan.inline_mods {
            known.insert([module.clone(), inline].concat());
        }
        known.insert(module.clone());
        scanned.push((path, module, scan.refs));
    }

    // Sibling edges, each with the first reference that makes it.
    let mut edges: BTreeMap<(Module, Module), Evidence> = BTreeMap::new();
    for (path, module, refs) in &scanned {
        for r in refs {
            let from = [module.clone(), r.scope.clone()].concat();
            let root = from.first().filter(|m| *m == MAIN_ROOT).map_or(0, |_| 1);
            let Some(to) = resolve(&from[..], root, &r.segments, &known) else {
                continue;
            };
            let common = from.iter().zip(&to).take_while(|(a, b)| a == b).count();
            if common == from.len() || common == to.len() {
                continue; // one contains the other (or they are the same)
            }
            let key = (from[..=common].to_vec(), to[..=common].to_vec());
            edges.entry(key).or_insert_with(|| Evidence {
                file: path.to_string(),
                line: r.line,
                written: written(&r.segments),
            });
        }
    }

    Report {
        modules: scanned.len(),
        cycles: cycles(&edges),
    }
}

/// The known module a path in `from` names: the longest known prefix of its
/// absolute form. `root` is how many leading segments of `from` are its
/// crate's root. `None` when `super` climbs above the root.
fn resolve(
    from: &[String],
    root: usize,
    segments: &[String],
    known: &BTreeSet<Module>,
) -> Option<Module> {
    let mut abs: Module = from[..root].to_vec();
    let mut leading = true;
    for (k, seg) in segments.iter().enumerate() {
        match seg.as_str() {
            "crate" if k == 0 => {}
            "self" if k == 0 => abs = from.to_vec(),
            "super" if leading => {
                if k == 0 {
                    abs = from.to_vec();
                }
                if abs.len() <= root {
                    return None;
                }
                abs.pop();
            }
            // `{self}` in a group names the prefix; a glob names what is in it.
            "self" | "*" => {}
            _ => {
                leading = false;
                abs.push(seg.clone());
            }
        }
    }
    (0..=abs.len())
        .rev()
        .map(|n| abs[..n].to_vec())
        .find(|m| known.contains(m))
}

/// A path as the source spells it, without a trailing group `self`.
fn written(segments: &[String]) -> String {
    let n = segments.len()
        - usize::from(segments.len() > 1 && segments.last().is_some_and(|s| s == "self"));
    segments[..n].join("::")
}

fn display(m: &Module) -> String {
    if m.is_empty() {
        "crate".into()
    } else {
        m.join("::")
    }
}

/// Cycles covering every edge that is on one: for each such edge not yet
/// reported, the shortest way back from its head to its tail.
fn cycles(edges: &BTreeMap<(Module, Module), Evidence>) -> Vec<Cycle> {
    let mut next: BTreeMap<&Module, Vec<&Module>> = BTreeMap::new();
    for (a, b) in edges.keys() {
        next.entry(a).or_default().push(b);
    }
    let mut covered: BTreeSet<(&Module, &Module)> = BTreeSet::new();
    let mut found = Vec::new();
    for (a, b) in edges.keys() {
        if covered.contains(&(a, b)) {
            continue;
        }
        let Some(back) = shortest_path(&next, b, a) else {
            continue;
        };
        let ring: Vec<&Module> = std::iter::once(a).chain(back).collect();
        let mut evidence = Vec::new();
        for pair in ring.windows(2) {
            covered.insert((pair[0], pair[1]));
            evidence.push(edges[&(pair[0].clone(), pair[1].clone())].clone());
        }
        found.push(Cycle {
            modules: ring.iter().map(|m| display(m)).collect(),
            evidence,
        });
    }
    found
}

/// The nodes of a shortest path from `from` to `to`, both included.
fn shortest_path<'a>(
    next: &BTreeMap<&'a Module, Vec<&'a Module>>,
    from: &'a Module,
    to: &'a Module,
) -> Option<Vec<&'a Module>> {
    let mut came_from: BTreeMap<&Module, &Module> = BTreeMap::new();
    let mut queue = VecDeque::from([from]);
    while let Some(node) = queue.pop_front() {
        if node == to {
            let mut path = vec![node];
            while let Some(prev) = came_from.get(path.last()?) {
                path.push(prev);
            }
            path.reverse();
            return Some(path);
        }
        for &n in next.get(node).into_iter().flatten() {
            if n != from && !came_from.contains_key(n) {
                came_from.insert(n, node);
                queue.push_back(n);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(files: &[(&str, &str)]) -> Vec<String> {
        let files: Vec<(String, String)> = files
            .iter()
            .map(|(p, s)| (p.to_string(), s.to_string()))
            .collect();
        check_crate(&files)
            .cycles
            .iter()
            .map(|c| c.to_string())
            .collect()
    }

    #[test]
    fn two_module_cycle() {
        let cycles = check(&[
            ("lib.rs", "mod a;\nmod b;\n"),
            ("a.rs", "use crate::b::B;\npub struct A;\n"),
            (
                "b/mod.rs",
                "pub struct B;\n\nfn f() -> crate::a::A { crate::a::A }\n",
            ),
        ]);
        assert_eq!(
            cycles,
            ["cycle between modules: a -> b -> a (a.rs:1 uses crate::b::B, b/mod.rs:3 uses crate::a::A)"]
        );
    }

    #[test]
    fn three_module_cycle() {
        let cycles = check(&[
            ("lib.rs", "mod a; mod b; mod c;"),
            ("a.rs", "use crate::b::f;"),
            ("b.rs", "use crate::c::g;"),
            ("c.rs", "\n\nuse crate::a::h;"),
        ]);
        assert_eq!(
            cycles,
            ["cycle between modules: a -> b -> c -> a (a.rs:1 uses crate::b::f, b.rs:1 uses crate::c::g, c.rs:3 uses crate::a::h)"]
        );
    }

    #[test]
    fn parent_and_child_are_no_cycle() {
        let cycles = check(&[
            ("lib.rs", "mod a;\npub use a::x::X;\nfn helper() {}"),
            ("a/mod.rs", "mod x;\npub use self::x::X;\npub fn util() {}"),
            (
                "a/x.rs",
                "use super::util;\nuse crate::helper;\nuse crate::a::util as u;\npub struct X;",
            ),
        ]);
        assert!(cycles.is_empty(), "{cycles:?}");
    }

    #[test]
    fn nested_siblings_cycle() {
        let cycles = check(&[
            ("lib.rs", "mod a;"),
            ("a/mod.rs", "mod x; mod y;"),
            ("a/x.rs", "use super::y::Y;"),
            ("a/y.rs", "use crate::a::x::X;"),
        ]);
        assert_eq!(
            cycles,
            ["cycle between modules: a::x -> a::y -> a::x (a/x.rs:1 uses super::y::Y, a/y.rs:1 uses crate::a::x::X)"]
        );
    }

    #[test]
    fn edges_between_deeper_modules_count_for_their_folders() {
        let cycles = check(&[
            ("lib.rs", "mod a; mod b;"),
            ("a/mod.rs", "mod x;"),
            ("a/x.rs", "use crate::b::B;"),
            ("b.rs", "use crate::a::x::X;"),
        ]);
        assert_eq!(
            cycles,
            ["cycle between modules: a -> b -> a (a/x.rs:1 uses crate::b::B, b.rs:1 uses crate::a::x::X)"]
        );
    }

    #[test]
    fn grouped_use_entries_are_separate_edges() {
        let cycles = check(&[
            ("lib.rs", "mod a; mod b; mod c;"),
            ("a.rs", "use crate::{c::C, b::{self, B}};"),
            ("b.rs", "pub struct B;"),
            ("c.rs", "use crate::a::A;"),
        ]);
        assert_eq!(
            cycles,
            ["cycle between modules: a -> c -> a (a.rs:1 uses crate::c::C, c.rs:1 uses crate::a::A)"]
        );
    }

    #[test]
    fn comments_and_strings_are_no_edges() {
        let cycles = check(&[
            (
                "lib.rs",
                "//! Uses [`crate::b`] and [`crate::a`].\nmod a; mod b;",
            ),
            (
                "a.rs",
                "// use crate::b::B;\n/* crate::b::C */\nuse crate::b::B;",
            ),
            (
                "b.rs",
                "/// See [`crate::a::A`].\nconst S: &str = \"crate::a::A\";",
            ),
        ]);
        assert!(cycles.is_empty(), "{cycles:?}");
    }

    #[test]
    fn test_module_super_is_its_file() {
        // `super` in a file's inline `mod tests` is the file's module, not its parent.
        let cycles = check(&[
            ("lib.rs", "mod a; mod b;"),
            (
                "a.rs",
                "use crate::b::B;\n#[cfg(test)]\nmod tests { use super::*; }",
            ),
            ("b.rs", "pub struct B;"),
        ]);
        assert!(cycles.is_empty(), "{cycles:?}");
    }

    #[test]
    fn main_beside_lib_is_another_crate() {
        // The binary's `crate::` paths stay in the binary's own tree.
        let files = [
            ("lib.rs", "pub mod a; pub mod b;"),
            ("main.rs", "mod cli; mod a;"),
            ("a.rs", "use crate::b::B;"),
            ("b.rs", "pub struct B;"),
            ("cli.rs", "use crate::a::A;"),
            ("bin/tool.rs", "use crate::b::B;"),
        ];
        assert!(check(&files).is_empty());
        let files = files.map(|(p, s)| (p.to_string(), s.to_string()));
        assert_eq!(check_crate(&files).modules, 5);
        // ... and in a crate of its own, main.rs is the root.
        let cycles = check(&[
            ("main.rs", "mod a; mod b;"),
            ("a.rs", "use crate::b::B;"),
            ("b.rs", "use crate::a::A;"),
        ]);
        assert_eq!(cycles.len(), 1);
    }
}
