//! The compiler's inline remarks read back: the sites it inlined or kept,
//! with their costs (`-Rpass=inline`, `-Rpass-missed=inline`), from a build
//! log that may hold colours, included-from lines and carets; and a log with
//! the remarks taken out, for people.

use std::collections::BTreeSet;

use super::*;
use kiln_protocol::decision::SiteId;

/// The reason LLVM gives for attribute-forced inlining, which replay cannot
/// change.
const ALWAYS_INLINE_ATTRIBUTE: &str = "always inline attribute";

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
        .filter_map(|(remark, forced)| (!forced).then_some(remark))
        .collect()
}

/// The calls an always-inline attribute forced inline, as site ids: what
/// [`parse_remarks`] leaves out, which no decision moves but which says where a
/// callee's code runs.
pub fn parse_forced(compiler_output: &str) -> BTreeSet<SiteId> {
    compiler_output
        .lines()
        .filter_map(|line| parse_remark_line(&strip_ansi(line)))
        .filter_map(|(remark, forced)| forced.then_some(remark.site))
        .collect()
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
/// The remark and whether an attribute forced it.
fn parse_remark_line(line: &str) -> Option<(InlineRemark, bool)> {
    let (marker_at, marker, inlined) = match line.find(NEGATIVE) {
        Some(at) => (at, NEGATIVE, false),
        None => (line.find(POSITIVE)?, POSITIVE, true),
    };
    let callee = line[..marker_at].rsplit_once(": '")?.1;
    let rest = &line[marker_at + marker.len()..];
    let (caller_part, site_part) = rest.split_once(AT_CALLSITE)?;
    let (caller, reason) = caller_part.rsplit_once('\'')?;
    let forced = reason.contains(ALWAYS_INLINE_ATTRIBUTE);
    let (callsite, _) = site_part.split_once(';')?;
    let cost = InlineCost::find(reason);
    let site = ParsedSite {
        callee: callee.to_string(),
        callsite: callsite.trim().to_string(),
    };
    if caller.is_empty() || !site.is_valid() {
        return None;
    }
    let remark = InlineRemark {
        site: site.id(),
        callee: site.callee,
        caller: caller.to_string(),
        callsite: site.callsite,
        inlined,
        cost,
        line: remark_position(line).map(|(l, _)| l),
    };
    Some((remark, forced))
}

/// A call-site id split into callee and chain.
pub(super) struct ParsedSite {
    pub(super) callee: String,
    pub(super) callsite: String,
}

impl ParsedSite {
    /// Splits `"CALLEE @ CHAIN"`; `None` for ids that cannot be a replay line.
    pub(super) fn from_id(id: &SiteId) -> Option<Self> {
        let (callee, callsite) = id.as_str().split_once(AT)?;
        let site = ParsedSite {
            callee: callee.to_string(),
            callsite: callsite.to_string(),
        };
        site.is_valid().then_some(site)
    }

    /// The id `"CALLEE @ CHAIN"`.
    pub(super) fn id(&self) -> SiteId {
        SiteId(format!("{}{AT}{}", self.callee, self.callsite))
    }

    /// Whether the replay line built from this site reads back as this site:
    /// LLVM splits at the first ` at callsite `, the marker and the first `;`,
    /// and takes the callee after the last `: '`.
    pub(super) fn is_valid(&self) -> bool {
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
    pub(super) fn elements(&self) -> Vec<&str> {
        self.callsite.split(AT).collect()
    }

    /// The outermost function of the chain: the function that holds the call.
    pub(super) fn caller(&self) -> &str {
        let outer = self.callsite.rsplit(AT).next().unwrap_or(&self.callsite);
        function_of(outer)
    }

    /// Why the call this nested site names does not exist in a build that
    /// inlined `inlined`; `None` where it does (a flat site always does). For
    /// `X @ s1 @ ... @ sn` with `sk` in function `Fk`: the body of every `Fk`
    /// (k < n) was inlined at `s(k+1)` on this very chain, i.e. some
    /// `Fk @ s(k+1) @ ... @ sm` (m <= n) was inlined, and `X` was not already
    /// inlined at a shorter chain `s1 @ ... @ sj` (j < n), whose copy arrived
    /// without the call.
    pub(super) fn absent_because(&self, inlined: &BTreeSet<&SiteId>) -> Option<String> {
        let elements = self.elements();
        let n = elements.len();
        let was_inlined = |callee: &str, chain: &[&str]| {
            inlined.contains(&SiteId(format!("{callee}{AT}{}", chain.join(AT))))
        };
        for k in 0..n - 1 {
            let function = function_of(elements[k]);
            if !(k + 1..n).any(|m| was_inlined(function, &elements[k + 1..=m])) {
                return Some(format!(
                    "'{function}' was not inlined at '{}', so this copy of the call does not exist",
                    elements[k + 1..].join(AT)
                ));
            }
        }
        (1..n)
            .find(|&j| was_inlined(&self.callee, &elements[..j]))
            .map(|j| {
                format!(
                    "'{}' was inlined at '{}' already, so this copy arrived without the call",
                    self.callee,
                    elements[..j].join(AT)
                )
            })
    }
}

/// Whether a remark is a nested site whose callee and chain name one function
/// twice: a call that only exists after recursive inlining.
pub(super) fn is_recursive_copy(remark: &InlineRemark) -> bool {
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

impl SiteElement<'_> {
    /// Whether the call has no source line of its own: LLVM gives code it
    /// merged or made line 0, printed as 0 minus the function's first line
    /// wrapped to 32 bits (`ifstat:4294965622:0`), column 0.
    pub fn has_no_line(&self) -> bool {
        self.column == 0 && (self.offset >= 1 << 31 || self.offset < 0)
    }
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
