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

mod remarks;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::Path;

use kiln_protocol::config::benchmark::{Compiler, ReplayFallback};
use kiln_protocol::decision::{DecisionPoint, DecisionSet, DecisionValue, SiteId};
use kiln_protocol::message::Discovery;
pub use remarks::*;

/// Separator between the callee and the call-site chain, and between the
/// chain's elements, as LLVM prints them.
const AT: &str = " @ ";

/// What precedes the caller in a remark of an inlined site.
const POSITIVE: &str = "' inlined into '";

/// What precedes the caller in a replay line of a site left as a call.
const NEGATIVE: &str = "' will not be inlined into '";

/// What precedes the call-site chain in a remark or replay line.
const AT_CALLSITE: &str = " at callsite ";

/// What a site id holds in place of the work folder a build ran in: C++
/// names that hold a path (`__find_if<(lambda at /…/work/json.cpp:9:5)>`,
/// `(unnamed struct at …)`) are the same site built in any folder.
pub const WORK: &str = "<work>/";

/// `log` with the work folder `work` written as [`WORK`].
pub fn from_work(log: &str, work: &Path) -> String {
    log.replace(&format!("{}/", work.display()), WORK)
}

/// A replay file's text for a build in `work`: [`WORK`] is that folder again.
pub fn in_work(replay_text: &str, work: &Path) -> String {
    replay_text.replace(WORK, &format!("{}/", work.display()))
}

/// The remarks of a build in `work` ([`parse_remarks`]), ids free of the folder.
pub fn parse_remarks_in(log: &str, work: &Path) -> Vec<InlineRemark> {
    parse_remarks(&from_work(log, work))
}

/// The calls of a build in `work` an attribute forced inline ([`parse_forced`]).
pub fn parse_forced_in(log: &str, work: &Path) -> std::collections::BTreeSet<SiteId> {
    parse_forced(&from_work(log, work))
}

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

/// LLVM's option naming the replay file (after `-mllvm` or `-C llvm-args=`).
pub(crate) const REPLAY_FLAG: &str = "-cgscc-inline-replay=";

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
        format!("{REPLAY_FLAG}{}", replay_file.display()),
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
        ..Default::default()
    }
}

/// Every decision of `stock` the other way: inline where it says no-inline,
/// and no-inline elsewhere.
pub fn flipped(stock: &DecisionSet) -> DecisionSet {
    DecisionSet(
        stock
            .0
            .iter()
            .map(|(id, value)| {
                let other = match value.is_inline() {
                    true => DecisionValue::no_inline(),
                    false => DecisionValue::inline(),
                };
                (id.clone(), other)
            })
            .collect(),
    )
}

/// What a build realised against what was requested.
#[derive(Debug, Default, PartialEq)]
pub struct Verified {
    /// One human-readable line per mismatch (requested inline but not
    /// inlined: a silent fallback; inlined but requested no-inline; key
    /// collisions). Empty = exact.
    pub mismatched: Vec<String>,
    /// Moot decisions: sites requested inline whose call does not exist in
    /// this build (a function of its chain was not inlined there, or the call
    /// was already inlined inside an inner function), with why. The step is
    /// still a measurement of the set; the decision just had nothing to decide.
    pub moot: BTreeMap<SiteId, String>,
}

/// Compares what a build realised (its remarks) with what was requested.
///
/// Only inlined sites print remarks (a NeverInline build prints none for the
/// calls it keeps), so the check is: the inlined sites in the remarks equal the
/// sites requested inline, less the moot ones. Repeated remarks of one site
/// (macro expansions, Rust `drop_in_place`), which LLVM decides together,
/// count once.
pub fn verify(requested: &DecisionSet, remarks: &[InlineRemark]) -> Verified {
    let inlined: BTreeSet<&SiteId> = remarks
        .iter()
        .filter(|r| r.inlined)
        .map(|r| &r.site)
        .collect();
    let mut problems = Vec::new();
    let mut moot = BTreeMap::new();
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
        let Some(want_inline) = wants_inline(value) else {
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
        match (want_inline, inlined.contains(id)) {
            (true, false) => match site.absent_because(&inlined) {
                Some(why) => {
                    moot.insert(id.clone(), why);
                }
                None => problems.push(not_inlined(id)),
            },
            (false, true) => problems.push(format!("'{id}': requested no-inline but inlined")),
            _ => {}
        }
    }
    for id in inlined {
        if !requested.0.contains_key(id) {
            problems.push(format!(
                "'{id}': inlined but not in the decision set (decided by the fallback)"
            ));
        }
    }
    Verified {
        mismatched: problems,
        moot,
    }
}

/// Whether `value` asks for the call inlined; `None` for a value that is neither decision.
fn wants_inline(value: &DecisionValue) -> Option<bool> {
    if value.is_inline() {
        Some(true)
    } else {
        (*value == DecisionValue::no_inline()).then_some(false)
    }
}

/// The problem of a site requested inline that was not, with no remark saying why.
fn not_inlined(id: &SiteId) -> String {
    // Inliner.cpp skips such calls before it asks the replay ("recursive", "recursive SCC
    // split") and prints no remark: the output cannot tell that from a replay line that
    // matched nothing.
    format!(
        "'{id}': requested inline but not inlined, with no remark: the replay line matched \
         nothing, or LLVM passed the call by, as it does inside a recursive cycle it has \
         inlined through"
    )
}

/// Size in bytes of the .text section of an ELF binary (object crate), None if unreadable.
pub fn text_size(binary: &Path) -> Option<u64> {
    use object::{Object, ObjectSection};
    let data = std::fs::read(binary).ok()?;
    let file = object::File::parse(&*data).ok()?;
    let size = file.section_by_name(".text")?.size();
    Some(size)
}
