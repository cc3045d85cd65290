//! Per-call-site inlining decisions with stock compilers, via LLVM inline replay.
//!
//! LLVM's CGSCC inliner can replay decisions from a text file
//! (`-cgscc-inline-replay=FILE`, passed with `-mllvm` to clang and with
//! `-C llvm-args=` to rustc). Each line names a callee and a call site,
//! `x: 'CALLEE' inlined into 'CALLER' at callsite SITE;` or
//! `x: 'CALLEE' will not be inlined into 'CALLER' at callsite SITE;`, where a
//! site is `function:line-offset:column[.discriminator]` and a site reached
//! through earlier inlining is a chain, innermost first, joined by ` @ `
//! (`transform:14:20 @ main:13:14`). Sites missing from the file take the
//! fallback (`NeverInline`, `AlwaysInline` or `Original`).
//!
//! kiln uses it in four steps:
//! 1. discovery: a build with an empty replay file and fallback `AlwaysInline`
//!    prints one remark per site it inlines, i.e. every decision point;
//! 2. a stock build with remarks gives the compiler's own decisions, the
//!    baseline;
//! 3. every candidate is built with [`replay_file_text`] under
//!    [`replay_build_args`];
//! 4. [`verify`] compares the candidate build's remarks with the request, since
//!    LLVM never reports a replay line that matched nothing.
//!
//! A decision point's id is `"CALLEE @ SITE"`, e.g. `"transform @ main:13:14"`
//! or `"blend @ transform:14:20 @ main:13:14"`: exactly the pair LLVM keys its
//! replay table on, with mangled names (C++, Rust) kept as printed, so an id
//! turns back into its replay line without any other table.
//!
//! Pitfalls this module deals with (see the project reference):
//! - Line tables are required, otherwise nothing matches and every site
//!   silently takes the fallback; every build here adds them (they do not
//!   change `.text`).
//! - A malformed replay line makes LLVM drop the whole file; rustc then builds
//!   without running the inliner at all and still exits 0. Only ids that form
//!   a well-formed line are written.
//! - `always_inline` / `#[inline(always)]` inlining bypasses replay, so those
//!   remarks are not decisions and are skipped.
//! - rustc's MIR inliner hides sites unless incremental compilation is on
//!   (a fresh directory per build), and a multi-unit build inlines again
//!   (ThinLTO) without remarks, so rustc builds use `-C codegen-units=1`.
//! - rustc splits `-C llvm-args` at whitespace: replay file paths must not
//!   contain any.
//! - With fallback `AlwaysInline`, recursive code is inlined into itself again
//!   and again (seen with std's `sort`, whose pivot selection recurses): the
//!   discovery build of such a program may not finish, so run it under a
//!   timeout.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use kiln_protocol::config::{Compiler, ReplayFallback};
use kiln_protocol::decision::{DecisionPoint, DecisionSet, DecisionValue, SiteId};
use kiln_protocol::message::Discovery;

/// Separator between the callee and the call-site chain, and between the
/// chain's elements, as LLVM prints them.
const AT: &str = " @ ";
/// What precedes the caller in a remark of an inlined site.
const POSITIVE: &str = "' inlined into '";
/// What precedes the caller in a replay line of a site left as a call.
const NEGATIVE: &str = "' will not be inlined into '";
/// What precedes the call-site chain in a remark or replay line.
const AT_CALLSITE: &str = " at callsite ";
/// The reason LLVM gives for attribute-forced inlining, which replay cannot
/// change.
const ALWAYS_INLINE_ATTRIBUTE: &str = "always inline attribute";

/// The decision set as an LLVM replay file (one line per site: inlined / will not be inlined).
///
/// Ids that are not call sites (knobs) and values other than inline /
/// no-inline are left out: a line LLVM cannot parse would make it ignore the
/// whole file. [`verify`] reports such entries.
pub fn replay_file_text(decisions: &DecisionSet) -> String {
    let mut out = String::new();
    for (id, value) in &decisions.0 {
        let Some(site) = ParsedSite::from_id(id) else {
            continue;
        };
        let verb = if value.is_inline() {
            "inlined into"
        } else if *value == DecisionValue::no_inline() {
            "will not be inlined into"
        } else {
            continue;
        };
        // LLVM takes the callee after the last ": '" and the chain up to the
        // first ';'; the caller is only used by scope Function, but must not
        // be empty, so it is the outermost function of the chain.
        out.push_str(&format!(
            "x: '{}' {verb} '{}' at callsite {};\n",
            site.callee,
            site.caller(),
            site.callsite
        ));
    }
    out
}

/// Extra arguments appended to the benchmark's build command for a build under a replay file:
/// line tables, the replay file with scope Module, the fallback and inline remarks.
///
/// For rustc also `-C codegen-units=1` and `-C incremental=DIR` (`incremental_dir` must be a
/// fresh, empty directory for every build: a reused one skips code generation and prints no
/// remarks, and the MIR inliner would otherwise hide sites). clang ignores `incremental_dir`.
/// Pass absolute paths: the build runs in the benchmark's folder.
pub fn replay_build_args(
    compiler: Compiler,
    replay_file: &Path,
    fallback: ReplayFallback,
    incremental_dir: &Path,
) -> Vec<String> {
    let llvm = [
        format!("-cgscc-inline-replay={}", replay_file.display()),
        "-cgscc-inline-replay-scope=Module".to_string(),
        format!("-cgscc-inline-replay-fallback={}", fallback.llvm_name()),
    ];
    let mut args = stock_build_args(compiler, incremental_dir);
    for option in llvm {
        match compiler {
            Compiler::Clang => args.extend(["-mllvm".to_string(), option]),
            Compiler::Rustc => args.extend(["-C".to_string(), format!("llvm-args={option}")]),
        }
    }
    args
}

/// Arguments for the discovery build: empty replay file, scope Module, fallback AlwaysInline, remarks.
///
/// `empty_replay_file` must exist (LLVM fails on a missing file) and be empty.
pub fn discovery_build_args(
    compiler: Compiler,
    empty_replay_file: &Path,
    incremental_dir: &Path,
) -> Vec<String> {
    replay_build_args(
        compiler,
        empty_replay_file,
        ReplayFallback::AlwaysInline,
        incremental_dir,
    )
}

/// Arguments for a stock build (compiler's own decisions) with remarks and line tables, to read the stock decisions.
///
/// For rustc the build also runs with one codegen unit and incremental
/// compilation, as the replay builds do, so that its sites and decisions are
/// the ones replay builds see.
pub fn stock_build_args(compiler: Compiler, incremental_dir: &Path) -> Vec<String> {
    match compiler {
        // DWARF 4 whatever the benchmark's own `-g` asks: valgrind 3.19 (Debian 12)
        // gives up on clang 14's default DWARF 5 in multi-file programs, and
        // every callgrind objective would fail. It changes no code.
        Compiler::Clang => vec![
            "-gline-tables-only".into(),
            "-fdebug-default-version=4".into(),
            "-Rpass=inline".into(),
        ],
        Compiler::Rustc => [
            "debuginfo=line-tables-only".to_string(),
            "codegen-units=1".to_string(),
            format!("incremental={}", incremental_dir.display()),
            "remark=inline".to_string(),
        ]
        .into_iter()
        .flat_map(|option| ["-C".to_string(), option])
        .collect(),
    }
}

/// Arguments for discovery's stock build: [`stock_build_args`] and, for
/// clang, the remarks of the calls it leaves in place (rustc's
/// `-C remark=inline` prints those already), whose costs are site features.
pub fn stock_discovery_args(compiler: Compiler, incremental_dir: &Path) -> Vec<String> {
    let mut args = stock_build_args(compiler, incremental_dir);
    if compiler == Compiler::Clang {
        args.push("-Rpass-missed=inline".into());
    }
    args
}

/// One inline remark.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InlineRemark {
    /// The decision point: `"CALLEE @ CALLSITE"`.
    pub site: SiteId,
    /// The callee's (mangled) name.
    pub callee: String,
    /// The function the call was inlined into (the outermost of the chain).
    pub caller: String,
    /// The call-site chain, innermost first (`transform:14:20 @ main:13:14`).
    pub callsite: String,
    /// Whether the site was inlined (`false` only for "will not be inlined"
    /// lines, as in replay files: compilers print no site for missed calls).
    pub inlined: bool,
    /// The inliner's cost and threshold, where the remark gives them
    /// (`with (cost=-30, threshold=337)`; not for forced inlining).
    pub cost: Option<InlineCost>,
    /// The source line the remark names: the call's, in the innermost
    /// function of the chain (absolute, where the site's offset is relative).
    pub line: Option<u32>,
}

/// The inliner's cost estimate for a call and the threshold it compared it
/// with, as a remark prints them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InlineCost {
    /// The cost estimate.
    pub cost: i64,
    /// The threshold: the call is inlined when the cost is below it.
    pub threshold: i64,
}

impl InlineCost {
    /// The first `(cost=C, threshold=T)` of a remark; `None` for
    /// `cost=always`, `cost=never` and remarks without one.
    fn find(text: &str) -> Option<Self> {
        let rest = &text[text.find("(cost=")? + "(cost=".len()..];
        let (cost, rest) = rest.split_once(", threshold=")?;
        let threshold = rest.split(')').next()?;
        Some(InlineCost {
            cost: cost.parse().ok()?,
            threshold: threshold.parse().ok()?,
        })
    }
}

/// A call a stock build left in place, from a missed-inlining remark (clang's
/// `-Rpass-missed=inline`, rustc's `inline (missed)`): it names no call-site chain, only the call's own source position
/// (the innermost one when the call came with inlined code).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MissedRemark {
    /// The callee's (mangled) name.
    pub callee: String,
    /// The function that holds the call.
    pub caller: String,
    /// The call's source line (absolute, not an offset).
    pub line: u32,
    /// The call's source column.
    pub column: u32,
    /// The cost and threshold, when the inliner weighed the call (not for a
    /// `noinline` callee or one whose body is elsewhere).
    pub cost: Option<InlineCost>,
}

/// The missed-inlining remarks of compiler output: clang's
/// `FILE:L:C: remark: 'f' not inlined into 'g' because too costly to inline
/// (cost=260, threshold=225) [-Rpass-missed=inline]` and rustc's
/// `note: FILE:L:C inline (missed): 'f' not inlined into 'g' because ...`.
pub fn parse_missed_remarks(compiler_output: &str) -> Vec<MissedRemark> {
    compiler_output
        .lines()
        .filter_map(|line| parse_missed_line(&strip_ansi(line)))
        .collect()
}

fn parse_missed_line(line: &str) -> Option<MissedRemark> {
    const MARKER: &str = "' not inlined into '";
    let clang = line
        .trim_end()
        .strip_suffix("[-Rpass-missed=inline]")
        .is_some();
    if !(clang || line.contains(" inline (missed): '")) {
        return None;
    }
    let (line_number, column) = remark_position(line)?;
    let at = line.find(MARKER)?;
    let callee = line[..at].rsplit_once('\'')?.1;
    let (caller, reason) = line[at + MARKER.len()..].split_once('\'')?;
    Some(MissedRemark {
        callee: callee.to_string(),
        caller: caller.to_string(),
        line: line_number,
        column,
        cost: InlineCost::find(reason),
    })
}

/// The source line and column a remark is printed at: clang's
/// `FILE:L:C: remark: ...`, rustc's `note: FILE:L:C inline (...): ...`.
fn remark_position(line: &str) -> Option<(u32, u32)> {
    let position = match line.strip_prefix("note: ") {
        Some(rest) => rest.split_once(" inline (")?.0,
        None => line.split_once(": remark: ")?.0,
    };
    let mut numbers = position.rsplitn(3, ':');
    let column = numbers.next()?.parse().ok()?;
    let line = numbers.next()?.parse().ok()?;
    Some((line, column))
}

/// Parses compiler output (stderr+stdout) into remarks; lines that are not inline remarks are ignored.
///
/// Reads clang's `FILE:L:C: remark: 'f' inlined into 'g' with (...) at callsite g:1:2; [-Rpass=inline]`,
/// rustc's `note: FILE:L:C inline (success): 'f' inlined into 'g' with (...) at callsite g:1:2;`
/// and replay-file lines. Skipped: remarks without a call site (no line table,
/// missed calls) and inlining forced by an always-inline attribute, which
/// replay cannot change.
pub fn parse_remarks(compiler_output: &str) -> Vec<InlineRemark> {
    compiler_output
        .lines()
        .filter_map(|line| parse_remark_line(&strip_ansi(line)))
        .collect()
}

/// Decision points (one per distinct site in the all-inlined discovery build, domain inline/no-inline, stable order)
/// and the baseline: inline for sites the stock build inlined, no-inline for the rest.
///
/// Points come in the order the discovery build first printed them. Sites the
/// stock build inlined that the discovery build never saw are added after
/// them: they are nested sites that exist only when a callee was left as a
/// call inside its caller and that caller was then inlined (e.g. clang keeps
/// `heap_push` out of line in `top_k_far` but inlines the copy that arrives in
/// `main` with `top_k_far`); without them replaying the baseline would not
/// reproduce the stock binary.
///
/// Left out (unless the stock build inlined them): nested sites of the
/// discovery build whose chain passes through one function twice, i.e. calls
/// that exist only after a recursive function was inlined into a copy of
/// itself. Fallback AlwaysInline unrolls recursion level after level, so these
/// grow exponentially (a 6-line `fib` gave 2,400 of them); one level of
/// unrolling stays available through the flat self-call site (`fib @ fib:1:19`).
pub fn discovery_from_remarks(all_inlined: &[InlineRemark], stock: &[InlineRemark]) -> Discovery {
    let stock_inlined: BTreeSet<&SiteId> = stock
        .iter()
        .filter(|r| r.inlined)
        .map(|r| &r.site)
        .collect();
    let mut seen = BTreeSet::new();
    let mut points = Vec::new();
    let mut baseline = BTreeMap::new();
    let discovered = all_inlined
        .iter()
        .filter(|r| r.inlined && !is_recursive_copy(r));
    for remark in discovered.chain(stock.iter().filter(|r| r.inlined)) {
        if !seen.insert(&remark.site) {
            continue;
        }
        points.push(DecisionPoint::inline_site(remark.site.clone()));
        let value = if stock_inlined.contains(&remark.site) {
            DecisionValue::inline()
        } else {
            DecisionValue::no_inline()
        };
        baseline.insert(remark.site.clone(), value);
    }
    Discovery {
        points,
        baseline: DecisionSet(baseline),
        features: BTreeMap::new(),
    }
}

/// Compares what a build realised (its remarks) with what was requested; returns one human-readable line per mismatch
/// (requested inline but not inlined = silent fallback or vanished site; inlined but requested no-inline; key collisions). Empty = exact.
///
/// Only inlined sites print remarks (a NeverInline build prints none for the
/// calls it keeps), so the check is: the inlined sites in the remarks equal the
/// sites requested inline. Not reported: a requested-inline nested site whose
/// context was not realised (a function of its chain was not inlined there, or
/// the call was already inlined inside an inner function), because such a call
/// does not exist in that build; and repeated remarks of one site (macro
/// expansions, Rust `drop_in_place`), which LLVM decides together.
pub fn verify(requested: &DecisionSet, remarks: &[InlineRemark]) -> Vec<String> {
    let inlined: BTreeSet<&SiteId> = remarks
        .iter()
        .filter(|r| r.inlined)
        .map(|r| &r.site)
        .collect();
    let mut problems = Vec::new();
    // LLVM keys its replay table on callee and site concatenated, with no
    // separator: two ids can meet there.
    let mut llvm_keys: HashMap<String, (&SiteId, &DecisionValue)> = HashMap::new();
    for (id, value) in &requested.0 {
        let Some(site) = ParsedSite::from_id(id) else {
            problems.push(format!(
                "'{id}': not a call-site id ('CALLEE @ function:line:column'); left out of the replay file"
            ));
            continue;
        };
        let want_inline = if value.is_inline() {
            true
        } else if *value == DecisionValue::no_inline() {
            false
        } else {
            problems.push(format!(
                "'{id}': value '{value}' is neither inline nor no-inline; left out of the replay file"
            ));
            continue;
        };
        let key = format!("{}{}", site.callee, site.callsite);
        if let Some((other, other_value)) = llvm_keys.insert(key, (id, value)) {
            if other_value != value {
                problems.push(format!(
                    "'{other}' ({other_value}) and '{id}' ({value}): key collision, LLVM reads both as \
                     one replay entry and applies one decision to both"
                ));
            }
        }
        let realised = inlined.contains(id);
        if want_inline && !realised && site.context_realised(&inlined) {
            problems.push(format!(
                "'{id}': requested inline but not inlined (the site is not in this build, or the \
                 replay line did not match and the fallback applied)"
            ));
        } else if !want_inline && realised {
            problems.push(format!("'{id}': requested no-inline but inlined"));
        }
    }
    for id in inlined {
        if !requested.0.contains_key(id) {
            problems.push(format!(
                "'{id}': inlined but not in the decision set (decided by the fallback)"
            ));
        }
    }
    problems
}

/// Size in bytes of the .text section of an ELF binary (object crate), None if unreadable.
pub fn text_size(binary: &Path) -> Option<u64> {
    use object::{Object, ObjectSection};
    let data = std::fs::read(binary).ok()?;
    let file = object::File::parse(&*data).ok()?;
    let size = file.section_by_name(".text")?.size();
    Some(size)
}

/// Compiler output without the inline remark lines (and their follow-up source/caret lines), for build logs.
///
/// Removes clang's `[-Rpass=inline]` / `[-Rpass-missed=inline]` /
/// `[-Rpass-analysis=inline]` remarks with their source and caret lines and the
/// `In file included from` lines that introduce them, and rustc's
/// `inline (success|missed|analysis)` notes with the blank line after each.
pub fn strip_remarks(compiler_output: &str) -> String {
    let lines: Vec<&str> = compiler_output.lines().collect();
    let mut kept: Vec<&str> = Vec::new();
    // "In file included from" lines wait here until we know whether the
    // diagnostic they introduce is a remark.
    let mut include_stack: Vec<&str> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        let plain = strip_ansi(line);
        if is_include_line(&plain) {
            include_stack.push(line);
            i += 1;
            continue;
        }
        match remark_kind(&plain) {
            Some(RemarkKind::Clang) => {
                include_stack.clear();
                i += 1;
                // clang follows a remark with the source line and a caret line
                // when it can read the source.
                if i + 1 < lines.len() && is_caret_line(&strip_ansi(lines[i + 1])) {
                    i += 2;
                }
            }
            Some(RemarkKind::Rustc) => {
                include_stack.clear();
                i += 1;
                // rustc separates diagnostics with a blank line.
                if i < lines.len() && lines[i].trim().is_empty() {
                    i += 1;
                }
            }
            None => {
                kept.append(&mut include_stack);
                kept.push(line);
                i += 1;
            }
        }
    }
    kept.append(&mut include_stack);
    let mut out = kept.join("\n");
    if !out.is_empty() && compiler_output.ends_with('\n') {
        out.push('\n');
    }
    out
}

/// Which compiler printed a remark line.
enum RemarkKind {
    Clang,
    Rustc,
}

/// Whether a line is an inlining remark, and whose.
fn remark_kind(line: &str) -> Option<RemarkKind> {
    let line = line.trim_end();
    if line.contains("remark: ")
        && [
            "[-Rpass=inline]",
            "[-Rpass-missed=inline]",
            "[-Rpass-analysis=inline]",
        ]
        .iter()
        .any(|flag| line.ends_with(flag))
    {
        Some(RemarkKind::Clang)
    } else if line.starts_with("note: ")
        && [
            " inline (success): ",
            " inline (missed): ",
            " inline (analysis): ",
        ]
        .iter()
        .any(|kind| line.contains(kind))
    {
        Some(RemarkKind::Rustc)
    } else {
        None
    }
}

/// clang's include-stack lines before a diagnostic in a header.
fn is_include_line(line: &str) -> bool {
    line.starts_with("In file included from ")
        || (line.starts_with("                 from ") && line.trim_end().ends_with(':'))
}

/// clang's caret line under a source line: `   ^~~~`.
fn is_caret_line(line: &str) -> bool {
    let trimmed = line.trim();
    trimmed.starts_with(['^', '~']) && trimmed.chars().all(|c| matches!(c, '^' | '~' | ' '))
}

/// The line without ANSI colour sequences (`ESC [ ... letter`), in case a
/// build forces coloured diagnostics.
fn strip_ansi(line: &str) -> std::borrow::Cow<'_, str> {
    if !line.contains('\u{1b}') {
        return std::borrow::Cow::Borrowed(line);
    }
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.next() == Some('[') {
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// One remark or replay line, parsed the way LLVM's replay reader parses it
/// (callee after the last `: '` before the marker, chain up to the first `;`
/// after ` at callsite `), so that what we read is what replay will match.
fn parse_remark_line(line: &str) -> Option<InlineRemark> {
    let (marker_at, marker, inlined) = match line.find(NEGATIVE) {
        Some(at) => (at, NEGATIVE, false),
        None => (line.find(POSITIVE)?, POSITIVE, true),
    };
    let callee = line[..marker_at].rsplit_once(": '")?.1;
    let rest = &line[marker_at + marker.len()..];
    let (caller_part, site_part) = rest.split_once(AT_CALLSITE)?;
    let (caller, reason) = caller_part.rsplit_once('\'')?;
    if reason.contains(ALWAYS_INLINE_ATTRIBUTE) {
        return None;
    }
    let (callsite, _) = site_part.split_once(';')?;
    let cost = InlineCost::find(reason);
    let site = ParsedSite {
        callee: callee.to_string(),
        callsite: callsite.trim().to_string(),
    };
    if caller.is_empty() || !site.is_valid() {
        return None;
    }
    Some(InlineRemark {
        site: site.id(),
        callee: site.callee,
        caller: caller.to_string(),
        callsite: site.callsite,
        inlined,
        cost,
        line: remark_position(line).map(|(l, _)| l),
    })
}

/// A call-site id split into callee and chain.
struct ParsedSite {
    callee: String,
    callsite: String,
}

impl ParsedSite {
    /// Splits `"CALLEE @ CHAIN"`; `None` for ids that cannot be a replay line.
    fn from_id(id: &SiteId) -> Option<Self> {
        let (callee, callsite) = id.as_str().split_once(AT)?;
        let site = ParsedSite {
            callee: callee.to_string(),
            callsite: callsite.to_string(),
        };
        site.is_valid().then_some(site)
    }

    /// The id `"CALLEE @ CHAIN"`.
    fn id(&self) -> SiteId {
        SiteId(format!("{}{AT}{}", self.callee, self.callsite))
    }

    /// Whether the replay line built from this site reads back as this site:
    /// LLVM splits at the first ` at callsite `, the marker and the first `;`,
    /// and takes the callee after the last `: '`.
    fn is_valid(&self) -> bool {
        let clean = |s: &str| {
            !s.is_empty()
                && !s.contains(['\n', '\r', ';'])
                && !s.contains(AT_CALLSITE)
                && !s.contains(POSITIVE)
                && !s.contains(NEGATIVE)
        };
        clean(&self.callee)
            && !self.callee.contains(": '")
            && !self.callee.contains(AT)
            && clean(&self.callsite)
            && self.callsite.split(AT).all(is_site_element)
    }

    /// The chain's elements, innermost first.
    fn elements(&self) -> Vec<&str> {
        self.callsite.split(AT).collect()
    }

    /// The outermost function of the chain: the function that holds the call.
    fn caller(&self) -> &str {
        let outer = self.callsite.rsplit(AT).next().unwrap_or(&self.callsite);
        function_of(outer)
    }

    /// Whether the call this nested site names exists in a build that
    /// inlined `inlined`. A flat site always does. For `X @ s1 @ ... @ sn`
    /// with `sk` in function `Fk`: the body of every `Fk` (k < n) was inlined
    /// at `s(k+1)` on this very chain, i.e. some `Fk @ s(k+1) @ ... @ sm`
    /// (m <= n) was inlined, and `X` was not already inlined at a shorter
    /// chain `s1 @ ... @ sj` (j < n), whose copy arrived without the call.
    fn context_realised(&self, inlined: &BTreeSet<&SiteId>) -> bool {
        let elements = self.elements();
        let n = elements.len();
        let was_inlined = |callee: &str, chain: &[&str]| {
            inlined.contains(&SiteId(format!("{callee}{AT}{}", chain.join(AT))))
        };
        (0..n - 1).all(|k| {
            let function = function_of(elements[k]);
            (k + 1..n).any(|m| was_inlined(function, &elements[k + 1..=m]))
        }) && (1..n).all(|j| !was_inlined(&self.callee, &elements[..j]))
    }
}

/// Whether a remark is a nested site whose callee and chain name one function
/// twice: a call that only exists after recursive inlining.
fn is_recursive_copy(remark: &InlineRemark) -> bool {
    let chain: Vec<&str> = remark.callsite.split(AT).collect();
    if chain.len() < 2 {
        return false;
    }
    let mut functions = BTreeSet::from([remark.callee.as_str()]);
    chain.iter().any(|e| !functions.insert(function_of(e)))
}

/// A site id's callee and chain elements (innermost first), each element as
/// function, line offset and column (discriminator dropped); `None` for an
/// id that is not a call site.
pub fn site_parts(id: &SiteId) -> Option<(&str, Vec<SiteElement<'_>>)> {
    let (callee, chain) = id.as_str().split_once(AT)?;
    let elements = chain
        .split(AT)
        .map(|element| {
            let mut parts = element.rsplitn(3, ':');
            let column = parts.next()?.split('.').next()?.parse().ok()?;
            let offset = parts.next()?.parse().ok()?;
            Some(SiteElement {
                function: parts.next()?,
                offset,
                column,
            })
        })
        .collect::<Option<Vec<_>>>()?;
    Some((callee, elements))
}

/// One element of a call-site chain: a call's position in its function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SiteElement<'a> {
    /// The function that holds the call.
    pub function: &'a str,
    /// The call's line minus the function's first line.
    pub offset: i64,
    /// The call's column.
    pub column: u32,
}

impl std::fmt::Display for SiteElement<'_> {
    /// `function:offset:column`, as LLVM prints an element (no discriminator).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}:{}", self.function, self.offset, self.column)
    }
}

/// The function of a chain element `function:line:column[.discriminator]`.
fn function_of(element: &str) -> &str {
    element.rsplitn(3, ':').nth(2).unwrap_or(element)
}

/// `function:line:column[.discriminator]`, the line offset possibly negative
/// (a call above its function's first line, e.g. through a macro).
fn is_site_element(element: &str) -> bool {
    let mut parts = element.rsplitn(3, ':');
    let (Some(column), Some(line), Some(function)) = (parts.next(), parts.next(), parts.next())
    else {
        return false;
    };
    let digits = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
    let (column, discriminator) = match column.split_once('.') {
        Some((c, d)) => (c, Some(d)),
        None => (column, None),
    };
    !function.is_empty()
        && digits(line.strip_prefix('-').unwrap_or(line))
        && digits(column)
        && discriminator.is_none_or(digits)
}
