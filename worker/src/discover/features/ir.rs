//! What the LLVM IR of a program says about its calls before any inlining:
//! the size of each function, the loop depth and constant arguments of each
//! call, read from the IR the compiler's front end writes (clang's `-S
//! -emit-llvm -Xclang -disable-llvm-optzns`, rustc's `--emit=llvm-ir -C
//! no-prepopulate-passes`: no LLVM pass has run, so no call is inlined yet).
//!
//! The IR is read as text, the little of it that is needed: function bodies
//! (blocks, instructions, direct calls and their successors), and the debug
//! metadata that turns a call's `!dbg` into kiln's site element
//! `function:line-offset:column`, computed as LLVM computes it for its remarks
//! (the line minus the line of the scope's subprogram, the subprogram's
//! linkage name or else its name). Loop depth comes from the control-flow
//! graph: natural loops of the depth-first search's back edges, merged by
//! header (exact for the reducible graphs clang's front end writes).
//!
//! Counts are of the front end's IR, before SROA and the other simplifications
//! that run ahead of the inliner: larger than what the inliner weighs, in
//! proportion. rustc's IR may already hold calls its MIR inliner inlined:
//! their locations carry an inlined-at chain, as do the sites.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use regex::Regex;

/// A direct call in the IR.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// Loops around the call in its function.
    pub loop_depth: u32,
    /// Arguments that are constants (literals, globals, constant expressions).
    pub constant_arguments: u32,
}

/// One defined function.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Function {
    /// Instructions (debug intrinsics left out).
    pub instructions: u64,
    /// Basic blocks.
    pub blocks: u64,
    /// The line of its subprogram (what site elements' offsets count from).
    pub line: Option<u32>,
    /// Whether it calls itself directly.
    pub recursive: bool,
    /// Whether other units may call it (no `internal` or `private` linkage): a function the
    /// inliner cannot delete once every call in its unit is inlined.
    pub external: bool,
}

/// The IR of a whole program: its units' functions (a function defined in
/// several units, such as a header's inline function, counts once) and the
/// direct calls in them, by call-site chain.
#[derive(Debug, Default)]
pub struct Program {
    /// Functions by name.
    pub functions: HashMap<String, Function>,
    /// Calls by their site id without discriminators (`CALLEE @ F:1:2`).
    pub calls: HashMap<String, Call>,
    /// Direct calls of each function, over the whole program.
    pub call_sites: HashMap<String, u32>,
}

impl Program {
    /// Reads every `.ll` file in `dir` (none: an empty program).
    pub fn read_dir(dir: &Path) -> Result<Program, String> {
        let mut files: Vec<PathBuf> = match std::fs::read_dir(dir) {
            Ok(entries) => entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "ll"))
                .collect(),
            Err(_) => Vec::new(),
        };
        files.sort();
        let mut program = Program::default();
        for file in files {
            let text = std::fs::read_to_string(&file)
                .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
            program.add_unit(&text);
        }
        Ok(program)
    }

    /// Whether no unit had a function.
    pub fn is_empty(&self) -> bool {
        self.functions.is_empty()
    }

    /// Adds one unit's IR.
    pub fn add_unit(&mut self, text: &str) {
        let metadata = Metadata::parse(text);
        let mut lines = text.lines();
        while let Some(line) = lines.next() {
            if !line.starts_with("define ") || !line.trim_end().ends_with('{') {
                continue;
            }
            let body: Vec<&str> = lines.by_ref().take_while(|l| *l != "}").collect();
            let Some(name) = re(&DEFINE).captures(line).map(|c| unquote(&c[1])) else {
                continue;
            };
            if self.functions.contains_key(&name) {
                continue;
            }
            let line_of = dbg_of(line).and_then(|n| metadata.subprogram_line(n));
            let parsed = FunctionBody::parse(&body);
            let depths = parsed.loop_depths();
            let mut function = Function {
                instructions: parsed.instructions,
                blocks: parsed.blocks.len() as u64,
                line: line_of,
                recursive: false,
                external: external_linkage(line),
            };
            for call in &parsed.calls {
                function.recursive |= call.callee == name;
                *self.call_sites.entry(call.callee.clone()).or_default() += 1;
                let Some(chain) = call.dbg.and_then(|n| metadata.chain(n)) else {
                    continue;
                };
                self.calls
                    .entry(format!("{} @ {chain}", call.callee))
                    .or_insert(Call {
                        loop_depth: depths[call.block],
                        constant_arguments: call.constant_arguments,
                    });
            }
            self.functions.insert(name, function);
        }
    }
}

/// Whether a `define` line gives its function external linkage: none of the local ones
/// before its name.
fn external_linkage(define: &str) -> bool {
    let head = define.split('@').next().unwrap_or("");
    !head
        .split_whitespace()
        .any(|word| word == "internal" || word == "private")
}

fn re(cell: &'static (OnceLock<Regex>, &'static str)) -> &'static Regex {
    cell.0
        .get_or_init(|| Regex::new(cell.1).expect("valid regex"))
}

static DEFINE: (OnceLock<Regex>, &str) = (OnceLock::new(), r#"@("(?:[^"])*"|[-\w$.]+)\("#);
static CALL: (OnceLock<Regex>, &str) = (
    OnceLock::new(),
    r#"\b(?:call|invoke)\b[^@]*@("(?:[^"])*"|[-\w$.]+)\("#,
);
static LABEL: (OnceLock<Regex>, &str) = (OnceLock::new(), r#"^("(?:[^"])*"|[-\w$.]+):"#);
static TARGET: (OnceLock<Regex>, &str) = (OnceLock::new(), r#"label %("(?:[^"])*"|[-\w$.]+)"#);
static DBG: (OnceLock<Regex>, &str) = (OnceLock::new(), r"!dbg !(\d+)");
static NODE: (OnceLock<Regex>, &str) =
    (OnceLock::new(), r"^!(\d+) = (?:distinct )?!(\w+)\((.*)\)$");

fn unquote(name: &str) -> String {
    name.trim_matches('"').to_string()
}

fn dbg_of(text: &str) -> Option<u32> {
    re(&DBG).captures(text)?[1].parse().ok()
}

/// A numbered field (`line: 12`) of a metadata node's fields.
fn field<'a>(fields: &'a str, name: &str) -> Option<&'a str> {
    fields
        .split(", ")
        .find_map(|f| f.strip_prefix(name)?.strip_prefix(": "))
}

/// The longest call-site chain read, far above any real one (rustc's longest
/// in kiln's benchmarks is 1.5 KB). Each call's site id holds its chain, so
/// without a bound 40 KB of IR whose locations chain through a long name made
/// ids of 2 GB.
const MAX_CHAIN_BYTES: usize = 64 << 10;

/// The debug metadata of a unit that site elements are made from.
#[derive(Default)]
struct Metadata {
    /// `DILocation`s: line, column, scope, inlined-at.
    locations: HashMap<u32, (u32, u32, u32, Option<u32>)>,
    /// Subprograms: the name LLVM prints and the line.
    subprograms: HashMap<u32, (String, u32)>,
    /// Lexical blocks: their parent scope.
    blocks: HashMap<u32, u32>,
}

impl Metadata {
    fn parse(text: &str) -> Metadata {
        let mut m = Metadata::default();
        let node = |s: Option<&str>| s?.strip_prefix('!')?.parse::<u32>().ok();
        let number = |s: Option<&str>| s.and_then(|s| s.parse::<u32>().ok());
        for line in text.lines().filter(|l| l.starts_with('!')) {
            let Some(c) = re(&NODE).captures(line) else {
                continue;
            };
            let Ok(id) = c[1].parse::<u32>() else {
                continue;
            };
            let fields = &c[3];
            match &c[2] {
                "DILocation" => {
                    let (Some(line), Some(scope)) =
                        (number(field(fields, "line")), node(field(fields, "scope")))
                    else {
                        continue;
                    };
                    let column = number(field(fields, "column")).unwrap_or(0);
                    let inlined_at = node(field(fields, "inlinedAt"));
                    m.locations.insert(id, (line, column, scope, inlined_at));
                }
                "DISubprogram" => {
                    let name = field(fields, "linkageName")
                        .or_else(|| field(fields, "name"))
                        .map(unquote);
                    if let (Some(name), Some(line)) = (name, number(field(fields, "line"))) {
                        m.subprograms.insert(id, (name, line));
                    }
                }
                "DILexicalBlock" | "DILexicalBlockFile" => {
                    if let Some(scope) = node(field(fields, "scope")) {
                        m.blocks.insert(id, scope);
                    }
                }
                _ => {}
            }
        }
        m
    }

    fn subprogram_line(&self, id: u32) -> Option<u32> {
        self.subprograms.get(&id).map(|(_, line)| *line)
    }

    /// The subprogram around a scope.
    fn subprogram(&self, mut scope: u32) -> Option<&(String, u32)> {
        for _ in 0..1000 {
            if let Some(sp) = self.subprograms.get(&scope) {
                return Some(sp);
            }
            scope = *self.blocks.get(&scope)?;
        }
        None
    }

    /// The call-site chain of a location, innermost first, without
    /// discriminators: `f:3:5 @ main:10:3`; `None` past [`MAX_CHAIN_BYTES`]
    /// or where the locations loop.
    fn chain(&self, mut location: u32) -> Option<String> {
        let mut chain = String::new();
        let mut seen = HashSet::new();
        loop {
            if !seen.insert(location) {
                return None;
            }
            let (line, column, scope, inlined_at) = *self.locations.get(&location)?;
            let (name, first) = self.subprogram(scope)?;
            let offset = i64::from(line) - i64::from(*first);
            if !chain.is_empty() {
                chain.push_str(" @ ");
            }
            chain.push_str(&format!("{name}:{offset}:{column}"));
            if chain.len() > MAX_CHAIN_BYTES {
                return None;
            }
            match inlined_at {
                Some(next) => location = next,
                None => return Some(chain),
            }
        }
    }
}

/// A call found in a body.
struct BodyCall {
    callee: String,
    block: usize,
    dbg: Option<u32>,
    constant_arguments: u32,
}

/// A function body's block labels (the entry's first, unnamed where the body does not name
/// it) and its instructions, each with its block's index: continuation lines (a switch's
/// cases, an invoke's destinations, a landing pad's clauses) joined to their instruction.
fn instructions(body: &[&str]) -> (Vec<String>, Vec<(usize, String)>) {
    let mut labels: Vec<String> = vec![String::new()];
    let mut instructions: Vec<(usize, String)> = Vec::new();
    let mut in_switch = false;
    for line in body {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with(';') {
            continue;
        }
        if !line.starts_with(' ') {
            if let Some(c) = re(&LABEL).captures(line) {
                let label = unquote(&c[1]);
                if instructions.is_empty() && labels.len() == 1 {
                    labels[0] = label;
                } else {
                    labels.push(label);
                }
            }
            continue;
        }
        let continues = in_switch
            || ["to label", "cleanup", "catch ", "filter "]
                .iter()
                .any(|p| trimmed.starts_with(p));
        match instructions.last_mut() {
            Some((_, text)) if continues => {
                text.push(' ');
                text.push_str(trimmed);
            }
            _ => instructions.push((labels.len() - 1, trimmed.to_string())),
        }
        if trimmed.starts_with("switch ") || trimmed.contains(" switch ") {
            in_switch = trimmed.ends_with('[');
        } else if in_switch && trimmed.starts_with(']') {
            in_switch = false;
        }
    }
    (labels, instructions)
}

/// A function body: its blocks' successors, instruction count and calls.
struct FunctionBody {
    /// Successors of each block, by index; block 0 is the entry.
    blocks: Vec<Vec<usize>>,
    instructions: u64,
    calls: Vec<BodyCall>,
}

impl FunctionBody {
    fn parse(body: &[&str]) -> FunctionBody {
        let (labels, instructions) = instructions(body);
        let index: HashMap<&str, usize> = labels
            .iter()
            .enumerate()
            .map(|(i, l)| (l.as_str(), i))
            .collect();
        let mut blocks = vec![Vec::new(); labels.len()];
        let mut calls = Vec::new();
        let mut count = 0;
        for (block, text) in &instructions {
            for target in re(&TARGET).captures_iter(text) {
                if let Some(&to) = index.get(unquote(&target[1]).as_str()) {
                    blocks[*block].push(to);
                }
            }
            let call = re(&CALL).captures(text);
            let callee = call.as_ref().map(|c| unquote(&c[1]));
            if callee
                .as_deref()
                .is_some_and(|c| c.starts_with("llvm.dbg."))
            {
                continue;
            }
            count += 1;
            let (Some(call), Some(callee)) = (call, callee) else {
                continue;
            };
            if callee.starts_with("llvm.") {
                continue;
            }
            let arguments = &text[call.get(0).expect("whole match").end()..];
            calls.push(BodyCall {
                callee,
                block: *block,
                dbg: dbg_of(text),
                constant_arguments: constant_arguments(arguments),
            });
        }
        FunctionBody {
            blocks,
            instructions: count,
            calls,
        }
    }

    /// The number of natural loops around each block.
    fn loop_depths(&self) -> Vec<u32> {
        let n = self.blocks.len();
        let mut predecessors = vec![Vec::new(); n];
        for (from, tos) in self.blocks.iter().enumerate() {
            for &to in tos {
                predecessors[to].push(from);
            }
        }
        // Depth-first search: an edge to a block still on the path is a back edge.
        let mut back_edges = Vec::new();
        let mut state = vec![0u8; n]; // 0 unseen, 1 on the path, 2 done
        let mut stack = vec![(0usize, 0usize)];
        state[0] = 1;
        while let Some((block, next)) = stack.pop() {
            match self.blocks[block].get(next) {
                Some(&to) => {
                    stack.push((block, next + 1));
                    match state[to] {
                        0 => {
                            state[to] = 1;
                            stack.push((to, 0));
                        }
                        1 => back_edges.push((block, to)),
                        _ => {}
                    }
                }
                None => state[block] = 2,
            }
        }
        let mut bodies: HashMap<usize, HashSet<usize>> = HashMap::new();
        for (tail, header) in back_edges {
            let body = bodies
                .entry(header)
                .or_insert_with(|| HashSet::from([header]));
            let mut work = vec![tail];
            while let Some(b) = work.pop() {
                if body.insert(b) {
                    work.extend(predecessors[b].iter().copied());
                }
            }
        }
        let mut depths = vec![0u32; n];
        for body in bodies.values() {
            for &b in body {
                depths[b] += 1;
            }
        }
        depths
    }
}

/// The constant arguments of a call, from the text after the callee's `(`.
fn constant_arguments(after_open: &str) -> u32 {
    let mut depth = 0i32;
    let mut arguments = Vec::new();
    let mut start = 0;
    for (i, c) in after_open.char_indices() {
        match c {
            '(' | '[' | '{' | '<' => depth += 1,
            ')' | ']' | '}' | '>' if depth > 0 => depth -= 1,
            ')' => {
                arguments.push(&after_open[start..i]);
                break;
            }
            ',' if depth == 0 => {
                arguments.push(&after_open[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    arguments
        .iter()
        .map(|a| a.trim())
        .filter(|a| !a.is_empty())
        .filter(|a| {
            // A constant expression ends in its parenthesis; otherwise the
            // value is the last word, an SSA value when it starts with `%`.
            a.ends_with(')')
                || a.split_whitespace()
                    .last()
                    .is_some_and(|v| !v.starts_with('%') && !matches!(v, "undef" | "poison"))
        })
        .count() as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    const UNIT: &str = r#"
define internal i32 @sum(i32* noundef %0, i32 noundef %1) #0 !dbg !10 {
  %3 = alloca i32, align 4
  br label %4, !dbg !12

4:                                                ; preds = %9, %2
  %5 = load i32, i32* %3, align 4, !dbg !12
  %6 = icmp slt i32 %5, %1, !dbg !12
  br i1 %6, label %9, label %7, !dbg !12

7:                                                ; preds = %4
  switch i32 %5, label %8 [
    i32 0, label %8
  ], !dbg !12

8:
  ret i32 %5, !dbg !14

9:                                                ; preds = %4
  %10 = call i32 @clamp(i32 noundef %5, i32 noundef 7, i8* getelementptr inbounds ([3 x i8], [3 x i8]* @.str, i64 0, i64 0)), !dbg !13
  call void @llvm.dbg.value(metadata i32 %5, metadata !9, metadata !DIExpression()), !dbg !13
  %11 = call i32 @sum(i32* null, i32 %10), !dbg !14
  br label %4, !dbg !12
}

!10 = distinct !DISubprogram(name: "sum", scope: !1, file: !1, line: 20, type: !11, scopeLine: 21, spFlags: DISPFlagDefinition)
!11 = distinct !DILexicalBlock(scope: !10, file: !1, line: 22, column: 3)
!12 = !DILocation(line: 22, column: 3, scope: !11)
!13 = !DILocation(line: 23, column: 12, scope: !11)
!14 = !DILocation(line: 25)
"#;

    #[test]
    fn reads_sizes_calls_and_loops() {
        let mut program = Program::default();
        program.add_unit(UNIT);
        let sum = &program.functions["sum"];
        assert_eq!((sum.instructions, sum.blocks), (10, 5));
        assert_eq!(sum.line, Some(20));
        assert!(sum.recursive);
        assert!(!sum.external, "define internal");
        assert!(external_linkage("define dso_local i32 @main() #0 {"));
        assert!(external_linkage("define linkonce_odr i32 @_Z1fv() {"));
        assert!(!external_linkage(
            "define private void @\"internal name\"() {"
        ));
        let call = &program.calls["clamp @ sum:3:12"];
        assert_eq!(call.loop_depth, 1);
        assert_eq!(call.constant_arguments, 2);
        assert_eq!(program.call_sites["clamp"], 1);
        assert_eq!(program.call_sites["sum"], 1);
        // A location without a scope gives no site.
        assert_eq!(program.calls.len(), 1);
    }

    #[test]
    fn chains_that_loop_or_run_past_the_bound_give_no_site() {
        let long = "f".repeat(MAX_CHAIN_BYTES / 2);
        let unit = format!(
            "define void @main() !dbg !1 {{\n  call void @a(), !dbg !2\n  call void @b(), !dbg !4\n  \
             call void @c(), !dbg !5\n  ret void\n}}\n\
             !1 = distinct !DISubprogram(name: \"main\", line: 1)\n\
             !2 = !DILocation(line: 3, column: 5, scope: !1, inlinedAt: !3)\n\
             !3 = !DILocation(line: 4, column: 1, scope: !1)\n\
             !4 = !DILocation(line: 3, column: 5, scope: !1, inlinedAt: !4)\n\
             !5 = !DILocation(line: 3, column: 5, scope: !6, inlinedAt: !7)\n\
             !6 = distinct !DISubprogram(name: \"{long}\", line: 1)\n\
             !7 = !DILocation(line: 3, column: 5, scope: !6)\n"
        );
        let mut program = Program::default();
        program.add_unit(&unit);
        let sites: Vec<&String> = program.calls.keys().collect();
        assert_eq!(sites, ["a @ main:2:5 @ main:3:1"]);
    }
}
