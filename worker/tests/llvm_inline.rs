//! Tests of LLVM inline replay with the real compilers: discovery, round trips
//! of decision sets through replay files, baseline reproduction, and the
//! remark parser on literal lines from clang 14 and rustc 1.95.
//!
//! Tests that need a compiler are reported skipped where it is missing.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

use kiln_protocol::config::benchmark::{Compiler, ReplayFallback};
use kiln_protocol::decision::{DecisionSet, DecisionValue, SiteId};
use kiln_protocol::message::Discovery;
use kiln_worker::build::llvm_inline::{
    discovery_build_args, discovery_from_remarks, parse_forced, parse_remarks, replay_build_args,
    replay_file_text, stock_build_args, strip_remarks, text_size, verify, InlineRemark, Verified,
};
use kiln_worker::build::llvm_inline::{parse_missed_remarks, InlineCost, MissedRemark};
use kiln_worker::launch::output_std;

use crate::common::{have, skip};

// ---------------------------------------------------------------------------
// Literal remark lines

const CLANG_OUTPUT: &str = "\
a.c:5:36: remark: 'blend' inlined into 'transform' with (cost=-30, threshold=337) at callsite transform:2:36; [-Rpass=inline]
  for (int i = 0; i < x; i++) r += blend(i, x);
                                   ^
a.c:3:41: remark: 'sq' inlined into 'blend': always inline attribute at callsite blend:0:41; [-Rpass=inline]
static int blend(int a, int b) { return sq(a) * 3 + b; }
                                        ^
a.c:198:13: remark: 'heap_push' inlined into 'main' with (cost=210, threshold=225) at callsite top_k_far:4:13 @ main:19:15; [-Rpass=inline]
            heap_push(h, d, v);
            ^
a.c:9:49: remark: 'blend' inlined into 'other' with (cost=always): AlwaysInline Fallback at callsite other:0:49.2; [-Rpass=inline]
a.c:12:5: remark: 'other' not inlined into 'main' because too costly to inline (cost=300, threshold=225) [-Rpass-missed=inline]
    other(1);
    ^
a.c:20:1: warning: unused variable 'x' [-Wunused-variable]
1 warning generated.
";

const CLANGXX_LINE: &str = "k.cpp:14:12: remark: '_ZN4geom3dotIiEET_RKNS_4Vec3IS1_EES5_' inlined into '_ZN4geom6lengthERKNS_4Vec3IiEE' with (cost=-35, threshold=337) at callsite _ZN4geom6lengthERKNS_4Vec3IiEE:1:12 @ main:3:10; [-Rpass=inline]";

const RUSTC_OUTPUT: &str = "\
note: /tmp/r.rs:6:27 inline (success): '_ZN1r5blend17h0123456789abcdefE' inlined into '_ZN1r9transform17hbbf67557c6281f36E' with (cost=15, threshold=325) at callsite _ZN1r9transform17hbbf67557c6281f36E:2:27;

note: /rustc/59807616e1fa2540724bfbac14d7976d7e4a3860/library/alloc/src/raw_vec/mod.rs:423:29 inline (success): '_ZN5alloc7raw_vec20RawVecInner$LT$A$GT$10deallocate17hede5e4adb714cf7bE' inlined into '_ZN77_$LT$alloc..raw_vec..RawVec$LT$T$C$A$GT$$u20$as$u20$core..ops..drop..Drop$GT$4drop17h272ec6ba800f7f5bE' with (cost=5, threshold=250) at callsite _ZN5alloc7raw_vec20RawVecInner$LT$A$GT$10deallocate17hede5e4adb714cf7bE:2:29 @ _ZN77_$LT$alloc..raw_vec..RawVec$LT$T$C$A$GT$$u20$as$u20$core..ops..drop..Drop$GT$4drop17h272ec6ba800f7f5bE:2:29;

note: /tmp/r.rs:6:27 inline (success): '_RNvMs7_NtCsgEmfK2I1SDS_4core3numy12wrapping_add' inlined into '_ZN1r9transform17hbbf67557c6281f36E' with (cost=always): always inline attribute at callsite _ZN1r9transform17hbbf67557c6281f36E:2:27;

note: <unknown file>:0:0 inline (success): '_ZN3std2rt10lang_start17h9de500018356fd0dE' inlined into 'main' with (cost=always): AlwaysInline Fallback

note: /rustc/x/library/alloc/src/alloc.rs:115:14 inline (missed): _RNvCsfLfy6EI15iL_7___rustc14___rust_dealloc will not be inlined into _RNvXs_NtCslNYArtu3iFV_5alloc5allocNtB4_6GlobalNtNtCsgEmfK2I1SDS_4core5alloc9Allocator10deallocate because its definition is unavailable

note: /rustc/x/library/alloc/src/raw_vec/mod.rs:527:33 inline (missed): '_ZN5alloc7raw_vec11finish_grow17h1da5c3929bbd3b48E' not inlined into '_ZN5alloc7raw_vec14grow_amortized17h783b0a38c3ad3d2dE' because too costly to inline (cost=140, threshold=45)

warning: unused variable: `x`
";

/// A chain element of line 0 (code LLVM merged or made: 0 minus the function's first line,
/// wrapped to 32 bits, column 0) is told from an ordinary one, negative offsets included.
#[test]
fn chain_elements_without_a_source_line_are_told_apart() {
    let no_line = |id: &str| {
        let id = kiln_protocol::SiteId::from(id);
        let (_, chain) = kiln_worker::build::llvm_inline::site_parts(&id).unwrap();
        chain.iter().map(|e| e.has_no_line()).collect::<Vec<bool>>()
    };
    assert_eq!(
        no_line("test_then_block @ ifstat:4294965622:0 @ statement:9:7"),
        [true, false]
    );
    assert_eq!(no_line("f @ g:3:0 @ h:-2:5"), [false, false]);
}

#[test]
fn parses_clang_remarks() {
    let remarks = parse_remarks(CLANG_OUTPUT);
    let ids: Vec<&str> = remarks.iter().map(|r| r.site.as_str()).collect();
    // The always-inline attribute and the missed call are no decisions.
    assert_eq!(
        ids,
        [
            "blend @ transform:2:36",
            "heap_push @ top_k_far:4:13 @ main:19:15",
            "blend @ other:0:49.2"
        ]
    );
    // ... but it says where sq's code runs.
    assert_eq!(
        parse_forced(CLANG_OUTPUT),
        BTreeSet::from([SiteId::from("sq @ blend:0:41")])
    );
    assert_eq!(
        remarks[1],
        InlineRemark {
            site: SiteId::from("heap_push @ top_k_far:4:13 @ main:19:15"),
            callee: "heap_push".into(),
            caller: "main".into(),
            callsite: "top_k_far:4:13 @ main:19:15".into(),
            inlined: true,
            cost: Some(InlineCost {
                cost: 210,
                threshold: 225
            }),
            line: Some(198),
        }
    );
    // The missed call: its position, callee, caller and cost; no site.
    assert_eq!(
        parse_missed_remarks(CLANG_OUTPUT),
        [MissedRemark {
            callee: "other".into(),
            caller: "main".into(),
            line: 12,
            column: 5,
            cost: Some(InlineCost {
                cost: 300,
                threshold: 225
            }),
        }]
    );
    let cxx = parse_remarks(CLANGXX_LINE);
    assert_eq!(cxx.len(), 1);
    assert_eq!(cxx[0].callee, "_ZN4geom3dotIiEET_RKNS_4Vec3IS1_EES5_");
    assert_eq!(cxx[0].caller, "_ZN4geom6lengthERKNS_4Vec3IiEE");
    assert_eq!(
        cxx[0].site.as_str(),
        "_ZN4geom3dotIiEET_RKNS_4Vec3IS1_EES5_ @ _ZN4geom6lengthERKNS_4Vec3IiEE:1:12 @ main:3:10"
    );
}

#[test]
fn parses_rustc_remarks() {
    let remarks = parse_remarks(RUSTC_OUTPUT);
    assert_eq!(remarks.len(), 2, "{remarks:#?}");
    assert_eq!(
        parse_forced(RUSTC_OUTPUT),
        BTreeSet::from([SiteId::from(
            "_RNvMs7_NtCsgEmfK2I1SDS_4core3numy12wrapping_add @ _ZN1r9transform17hbbf67557c6281f36E:2:27"
        )])
    );
    assert_eq!(
        remarks[0].site.as_str(),
        "_ZN1r5blend17h0123456789abcdefE @ _ZN1r9transform17hbbf67557c6281f36E:2:27"
    );
    let nested = &remarks[1];
    assert_eq!(
        nested.callee,
        "_ZN5alloc7raw_vec20RawVecInner$LT$A$GT$10deallocate17hede5e4adb714cf7bE"
    );
    assert_eq!(
        nested.caller,
        "_ZN77_$LT$alloc..raw_vec..RawVec$LT$T$C$A$GT$$u20$as$u20$core..ops..drop..Drop$GT$4drop17h272ec6ba800f7f5bE"
    );
    assert!(nested.callsite.contains(" @ "));
    assert!(nested.inlined);
    let costs = (remarks[0].cost, remarks[0].line, nested.cost);
    let cost = |cost, threshold| Some(InlineCost { cost, threshold });
    assert_eq!(costs, (cost(15, 325), Some(6), cost(5, 250)));
    let missed = parse_missed_remarks(RUSTC_OUTPUT);
    assert_eq!(missed.len(), 1, "{missed:#?}");
    assert_eq!(
        (
            missed[0].callee.as_str(),
            missed[0].line,
            missed[0].column,
            missed[0].cost
        ),
        (
            "_ZN5alloc7raw_vec11finish_grow17h1da5c3929bbd3b48E",
            527,
            33,
            cost(140, 45)
        )
    );
}

#[test]
fn parses_coloured_output() {
    let line = "\u{1b}[1ma.c:5:36: \u{1b}[0m\u{1b}[0;1;34mremark: \u{1b}[0m\u{1b}[1m'blend' inlined into 'transform' with (cost=-30, threshold=337) at callsite transform:2:36; [-Rpass=inline]\u{1b}[0m";
    let remarks = parse_remarks(line);
    assert_eq!(remarks.len(), 1);
    assert_eq!(remarks[0].site.as_str(), "blend @ transform:2:36");
}

#[test]
fn replay_file_reads_back_as_the_decision_set() {
    let set = decisions(&[
        ("transform @ main:13:14", true),
        ("blend @ transform:14:20 @ main:13:14", false),
        (
            "_ZN1r5blend17h0123456789abcdefE @ _ZN1r9transform17hbbf67557c6281f36E:2:27",
            true,
        ),
        ("f @ g:-2:7.3", false),
    ]);
    let text = replay_file_text(&set);
    assert!(text.contains("x: 'transform' inlined into 'main' at callsite main:13:14;\n"));
    assert!(text.contains(
        "x: 'blend' will not be inlined into 'main' at callsite transform:14:20 @ main:13:14;\n"
    ));
    let back: BTreeMap<SiteId, DecisionValue> = parse_remarks(&text)
        .into_iter()
        .map(|r| (r.site, value(r.inlined)))
        .collect();
    assert_eq!(back, set.0);
}

#[test]
fn replay_file_leaves_out_what_llvm_cannot_read() {
    let mut set = decisions(&[("f @ main:1:2", true)]);
    set.0.insert(SiteId::from("tile"), DecisionValue::Int(8));
    set.0
        .insert(SiteId::from("g @ main"), DecisionValue::inline());
    set.0
        .insert(SiteId::from("h @ main:1:2; x"), DecisionValue::inline());
    set.0.insert(
        SiteId::from("k @ main:3:4"),
        DecisionValue::Name("maybe".into()),
    );
    assert_eq!(
        replay_file_text(&set),
        "x: 'f' inlined into 'main' at callsite main:1:2;\n"
    );
    let problems = verify(&set, &parse_remarks(&replay_file_text(&set))).mismatched;
    assert_eq!(problems.len(), 4, "{problems:#?}");
}

#[test]
fn build_arguments() {
    let inc = Path::new("/tmp/inc");
    let file = Path::new("/tmp/r.txt");
    assert_eq!(
        replay_build_args(Compiler::Clang, file, ReplayFallback::NeverInline, inc),
        [
            "-gline-tables-only",
            "-fdebug-default-version=4",
            "-Rpass=inline",
            "-mllvm",
            "-cgscc-inline-replay=/tmp/r.txt",
            "-mllvm",
            "-cgscc-inline-replay-scope=Module",
            "-mllvm",
            "-cgscc-inline-replay-fallback=NeverInline",
        ]
    );
    assert_eq!(
        discovery_build_args(Compiler::Rustc, file, inc),
        [
            "-C",
            "debuginfo=line-tables-only",
            "-C",
            "codegen-units=1",
            "-C",
            "incremental=/tmp/inc",
            "-C",
            "remark=inline",
            "-C",
            "llvm-args=-cgscc-inline-replay=/tmp/r.txt",
            "-C",
            "llvm-args=-cgscc-inline-replay-scope=Module",
            "-C",
            "llvm-args=-cgscc-inline-replay-fallback=AlwaysInline",
        ]
    );
    assert_eq!(
        stock_build_args(Compiler::Clang, inc),
        [
            "-gline-tables-only",
            "-fdebug-default-version=4",
            "-Rpass=inline"
        ]
    );
}

#[test]
fn strips_remarks_from_logs() {
    assert_eq!(
        strip_remarks(CLANG_OUTPUT),
        "a.c:20:1: warning: unused variable 'x' [-Wunused-variable]\n1 warning generated.\n"
    );
    assert_eq!(
        strip_remarks(RUSTC_OUTPUT),
        "warning: unused variable: `x`\n"
    );
    let with_include = "In file included from a.c:1:\n./h.h:3:10: remark: 'f' inlined into 'g' with (cost=5, threshold=225) at callsite g:1:10; [-Rpass=inline]\n  return f(x);\n         ^\nerror: boom\n";
    assert_eq!(strip_remarks(with_include), "error: boom\n");
    let include_then_error = "In file included from a.c:1:\n./h.h:3:10: error: boom\n";
    assert_eq!(strip_remarks(include_then_error), include_then_error);
}

#[test]
fn discovery_adds_stock_only_nested_sites() {
    let all = remarks(&[
        "transform @ main:2:46",
        "blend @ transform:2:36",
        "other @ main:2:61",
    ]);
    let stock = remarks(&[
        "other @ main:2:61",
        "blend @ transform:2:36 @ other:0:34 @ main:2:61",
    ]);
    let Discovery {
        points, baseline, ..
    } = discovery_from_remarks(&all, &stock);
    let ids: Vec<&str> = points.iter().map(|p| p.id.as_str()).collect();
    assert_eq!(
        ids,
        [
            "transform @ main:2:46",
            "blend @ transform:2:36",
            "other @ main:2:61",
            "blend @ transform:2:36 @ other:0:34 @ main:2:61"
        ]
    );
    assert_eq!(
        baseline,
        decisions(&[
            ("transform @ main:2:46", false),
            ("blend @ transform:2:36", false),
            ("other @ main:2:61", true),
            ("blend @ transform:2:36 @ other:0:34 @ main:2:61", true),
        ])
    );
}

#[test]
fn discovery_leaves_out_recursive_copies() {
    let all = remarks(&[
        "fib @ fib:1:19",
        "fib @ fib:1:33",
        "fib @ fib:1:33 @ fib:1:19",
        "mix @ fib:2:5 @ fib:1:19",
        "fib @ main:3:9",
        "mix @ fib:2:5 @ main:3:9",
    ]);
    let stock = remarks(&["fib @ fib:1:33 @ main:3:9"]);
    let ids: Vec<String> = discovery_from_remarks(&all, &stock)
        .points
        .into_iter()
        .map(|p| p.id.0)
        .collect();
    assert_eq!(
        ids,
        [
            "fib @ fib:1:19",
            "fib @ fib:1:33",
            "fib @ main:3:9",
            "mix @ fib:2:5 @ main:3:9",
            "fib @ fib:1:33 @ main:3:9"
        ]
    );
}

#[test]
fn verify_reports_mismatches() {
    let realised = remarks(&[
        "a @ main:1:1",
        "b @ main:2:1",
        "c @ main:3:1",
        "c @ main:3:1",
    ]);
    let requested = decisions(&[
        ("a @ main:1:1", true),
        ("b @ main:2:1", false),
        ("d @ main:4:1", true),
        ("e @ main:5:1", false),
    ]);
    let problems = verify(&requested, &realised).mismatched;
    assert_eq!(problems.len(), 3, "{problems:#?}");
    assert!(problems[0].contains("'b @ main:2:1'") && problems[0].contains("no-inline"));
    assert!(problems[1].contains("'d @ main:4:1'") && problems[1].contains("not inlined"));
    assert!(
        problems[2].contains("'c @ main:3:1'") && problems[2].contains("not in the decision set")
    );
    assert!(verify(
        &decisions(&[("a @ main:1:1", true)]),
        &remarks(&["a @ main:1:1"])
    )
    .mismatched
    .is_empty());
}

#[test]
fn verify_calls_nested_sites_whose_context_was_not_realised_moot() {
    let nested = "blend @ transform:2:36 @ main:2:46";
    // transform was not inlined into main: the nested call does not exist.
    let requested = decisions(&[
        ("transform @ main:2:46", false),
        ("blend @ transform:2:36", false),
        (nested, true),
    ]);
    let verified = verify(&requested, &[]);
    assert!(verified.mismatched.is_empty(), "{verified:#?}");
    assert_eq!(
        verified.moot[&SiteId::from(nested)],
        "'transform' was not inlined at 'main:2:46', so this copy of the call does not exist"
    );
    // blend was inlined inside transform first: the copy in main has no call.
    let requested = decisions(&[
        ("transform @ main:2:46", true),
        ("blend @ transform:2:36", true),
        (nested, true),
    ]);
    let realised = remarks(&["transform @ main:2:46", "blend @ transform:2:36"]);
    let verified = verify(&requested, &realised);
    assert!(verified.mismatched.is_empty(), "{verified:#?}");
    assert_eq!(
        verified.moot[&SiteId::from(nested)],
        "'blend' was inlined at 'transform:2:36' already, so this copy arrived without the call"
    );
    // The context is there and the site was not inlined: a mismatch, not moot.
    let requested = decisions(&[
        ("transform @ main:2:46", true),
        ("blend @ transform:2:36", false),
        (nested, true),
    ]);
    let realised = remarks(&["transform @ main:2:46"]);
    let verified = verify(&requested, &realised);
    assert_eq!(verified.mismatched.len(), 1, "{verified:#?}");
    assert!(verified.mismatched[0].contains(nested));
    assert!(verified.moot.is_empty());
    // A decision of no-inline has nothing to be moot about: only those the
    // build could not take are listed.
    let requested = decisions(&[("transform @ main:2:46", false), (nested, false)]);
    assert_eq!(verify(&requested, &[]), Verified::default());
}

#[test]
fn verify_reports_llvm_key_collisions() {
    // LLVM concatenates callee and site: "ab" + "c:1:2" == "a" + "bc:1:2".
    let requested = decisions(&[("ab @ c:1:2", true), ("a @ bc:1:2", false)]);
    let realised = remarks(&["ab @ c:1:2"]);
    let problems = verify(&requested, &realised).mismatched;
    assert!(
        problems.iter().any(|p| p.contains("key collision")),
        "{problems:#?}"
    );
}

// ---------------------------------------------------------------------------
// Real compilers

const C_PROGRAM: &str = r#"#include <stdio.h>
#include <stdlib.h>

static unsigned mix(unsigned x) { return (x * 2654435761u) ^ (x >> 13); }

static unsigned blend(unsigned a, unsigned b) { return mix(a) + 3 * b; }

static unsigned transform(unsigned x, unsigned n) {
  unsigned r = 0;
  for (unsigned i = 0; i < n; i++)
    r += blend(i, x);
  return r;
}

static unsigned churn(unsigned *v, unsigned n, unsigned k) {
  unsigned acc = k;
  for (unsigned i = 0; i < n; i++) {
    switch ((v[i] + k) % 8) {
    case 0: acc += mix(v[i]) * 3; break;
    case 1: acc ^= v[i] << (k % 7); break;
    case 2: acc -= v[i] / (k | 1); break;
    case 3: acc = acc * 31 + v[(i * 7) % n]; break;
    case 4: acc += blend(v[i], acc) >> 2; break;
    case 5: acc ^= mix(acc + v[i]); break;
    case 6: acc += (v[i] % 13) * (acc % 17); break;
    default: acc = (acc >> 3) | (acc << 29); break;
    }
    if (acc % 5 == 0) v[i] ^= acc; else v[i] += acc >> 7;
    if (v[i] > 1000000u) v[i] = mix(v[i]) % 1000003u;
    else if (v[i] < 1000u) v[i] = v[i] * v[i] + 7;
  }
  return acc;
}

int main(int argc, char **argv) {
  unsigned n = argc > 1 ? (unsigned)atoi(argv[1]) : 1000;
  unsigned *v = calloc(n, sizeof *v);
  for (unsigned i = 0; i < n; i++) v[i] = mix(i);
  unsigned s = transform(n, 100);
  s += churn(v, n, 1);
  s += churn(v, n, 2);
  s += churn(v, n, s);
  printf("%u\n", s);
  free(v);
  return 0;
}
"#;

const CXX_PROGRAM: &str = r#"#include <cstdio>
#include <cstdlib>

namespace geom {
template <typename T> struct Vec3 { T x, y, z; };

template <typename T> T dot(const Vec3<T> &a, const Vec3<T> &b) {
  return a.x * b.x + a.y * b.y + a.z * b.z;
}

template <typename T> Vec3<T> scale(const Vec3<T> &a, T k) {
  return Vec3<T>{a.x * k, a.y * k, a.z * k};
}

class Accumulator {
public:
  void add(long v) { total_ += v * weight(v); }
  long total() const { return total_; }

private:
  static long weight(long v) { return (v % 3) + 1; }
  long total_ = 0;
};

// Too big for the stock inliner at two call sites.
template <typename T> T churn(T *v, long n, T k) {
  T acc = k;
  for (long i = 0; i < n; i++) {
    switch ((v[i] + k) % 8) {
    case 0: acc += v[i] * 3 + (acc >> 5); break;
    case 1: acc ^= v[i] << (k % 7); break;
    case 2: acc -= v[i] / (k | 1); break;
    case 3: acc = acc * 31 + v[(i * 7) % n]; break;
    case 4: acc += (v[i] ^ acc) >> 2; break;
    case 5: acc ^= (acc + v[i]) * 2654435761u; break;
    case 6: acc += (v[i] % 13) * (acc % 17); break;
    default: acc = (acc >> 3) | (acc << 29); break;
    }
    if (acc % 5 == 0) v[i] ^= acc; else v[i] += acc >> 7;
    if (v[i] > 1000000u) v[i] = (v[i] * 40503u) % 1000003u;
    else if (v[i] < 1000u) v[i] = v[i] * v[i] + 7;
  }
  return acc;
}
} // namespace geom

int main(int argc, char **argv) {
  long n = argc > 1 ? std::atol(argv[1]) : 1000;
  geom::Accumulator acc;
  for (long i = 0; i < n; i++) {
    geom::Vec3<long> a{i, i + 1, i + 2};
    geom::Vec3<long> b = geom::scale(a, 3L);
    acc.add(geom::dot(a, b));
  }
  unsigned *v = static_cast<unsigned *>(std::calloc(n, sizeof *v));
  for (long i = 0; i < n; i++) v[i] = static_cast<unsigned>(i * 7919);
  unsigned c = geom::churn(v, n, 1u);
  c += geom::churn(v, n, c);
  std::free(v);
  std::printf("%ld %u\n", acc.total(), c);
  return 0;
}
"#;

const RUST_PROGRAM: &str = r#"
struct Table {
    slots: Vec<u64>,
}

impl Table {
    fn new(n: usize) -> Self {
        Table { slots: vec![0; n] }
    }
    fn probe(&self, key: u64) -> usize {
        (mix(key) as usize) % self.slots.len()
    }
    fn add(&mut self, key: u64) {
        let i = self.probe(key);
        self.slots[i] = self.slots[i].wrapping_add(key);
    }
}

fn mix(x: u64) -> u64 {
    (x ^ (x >> 31)).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

fn apply<F: Fn(u64) -> u64>(v: &[u64], f: F) -> u64 {
    v.iter().map(|&x| f(x)).fold(0, u64::wrapping_add)
}

fn fib(n: u64) -> u64 {
    if n < 2 { n } else { fib(n - 1).wrapping_add(fib(n - 2)) }
}

fn main() {
    let n: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(1000);
    let mut t = Table::new(97);
    for i in 0..n {
        t.add(mix(i));
    }
    let s = apply(&t.slots, |x| mix(x) ^ fib(x % 20));
    println!("{}", s);
}
"#;

/// A compiler and how to call it on one source file.
#[derive(Clone, Copy, Debug)]
enum Lang {
    C,
    Cxx,
    Rust,
}

impl Lang {
    fn compiler(self) -> Compiler {
        match self {
            Lang::C | Lang::Cxx => Compiler::Clang,
            Lang::Rust => Compiler::Rustc,
        }
    }
    fn program(self) -> &'static str {
        match self {
            Lang::C => "clang",
            Lang::Cxx => "clang++",
            Lang::Rust => "rustc",
        }
    }
    /// The benchmark's own build command, without output.
    fn base_args(self) -> Vec<&'static str> {
        match self {
            Lang::C | Lang::Cxx => vec!["-O2"],
            Lang::Rust => vec!["-O"],
        }
    }
    /// Whether the compiler is installed; the test is reported skipped where it is not.
    fn available(self) -> bool {
        let ok = have(self.program());
        if !ok {
            skip(format!("{} is not installed", self.program()));
        }
        ok
    }
}

/// A scratch folder with a source file, building variants of it.
struct Bench {
    lang: Lang,
    dir: tempfile::TempDir,
    source: PathBuf,
    builds: std::cell::Cell<u32>,
}

impl Bench {
    fn new(lang: Lang, file_name: &str, text: &str) -> Bench {
        let dir = tempfile::tempdir().unwrap();
        let source = dir.path().join(file_name);
        std::fs::write(&source, text).unwrap();
        Bench {
            lang,
            dir,
            source,
            builds: std::cell::Cell::new(0),
        }
    }

    fn from_file(lang: Lang, path: &Path) -> Bench {
        let text = std::fs::read_to_string(path).unwrap();
        Bench::new(lang, path.file_name().unwrap().to_str().unwrap(), &text)
    }

    fn fresh(&self, what: &str) -> PathBuf {
        let n = self.builds.get() + 1;
        self.builds.set(n);
        self.dir.path().join(format!("{what}-{n}"))
    }

    /// Builds with extra arguments; returns the binary and the compiler output.
    fn build(&self, extra: &[String]) -> (PathBuf, String) {
        let binary = self.fresh("bin");
        let out = output_std(
            Command::new(self.lang.program())
                .args(self.lang.base_args())
                .arg(&self.source)
                .arg("-o")
                .arg(&binary)
                .args(extra)
                .current_dir(self.dir.path()),
        )
        .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        assert!(
            out.status.success(),
            "build failed:\n{}",
            strip_remarks(&text)
        );
        // What is left for the build log has no remark in it.
        let log = strip_remarks(&text);
        assert!(
            !log.contains("inlined into") && !log.contains("inline ("),
            "{log}"
        );
        (binary, text)
    }

    /// A fresh incremental folder (rustc needs a new one per build).
    fn incremental(&self) -> PathBuf {
        let dir = self.fresh("inc");
        std::fs::create_dir(&dir).unwrap();
        dir
    }

    /// Discovery and stock builds: their remarks and the resulting discovery.
    fn discover(&self) -> (Vec<InlineRemark>, Vec<InlineRemark>, Discovery) {
        let empty = self.dir.path().join("empty-replay.txt");
        std::fs::write(&empty, "").unwrap();
        let args = discovery_build_args(self.lang.compiler(), &empty, &self.incremental());
        let all = parse_remarks(&self.build(&args).1);
        let args = stock_build_args(self.lang.compiler(), &self.incremental());
        let stock = parse_remarks(&self.build(&args).1);
        let discovery = discovery_from_remarks(&all, &stock);
        (all, stock, discovery)
    }

    /// Builds under a decision set (fallback NeverInline): binary and remarks.
    fn replay(&self, set: &DecisionSet) -> (PathBuf, Vec<InlineRemark>) {
        let file = self.fresh("replay");
        std::fs::write(&file, replay_file_text(set)).unwrap();
        let args = replay_build_args(
            self.lang.compiler(),
            &file,
            ReplayFallback::NeverInline,
            &self.incremental(),
        );
        let (binary, output) = self.build(&args);
        (binary, parse_remarks(&output))
    }
}

/// Discovery finds sites, the stock build inlines some but not all of them,
/// and a random mix of decisions (fixed seed) is realised exactly.
fn check_discovery_and_round_trip(bench: &Bench) -> Discovery {
    let (all, stock, discovery) = bench.discover();
    let n = discovery.points.len();
    let stock_inline = discovery
        .baseline
        .0
        .values()
        .filter(|v| v.is_inline())
        .count();
    eprintln!(
        "{:?} {}: {n} sites ({} remarks in the all-inlined build), stock inlines {stock_inline} ({} remarks)",
        bench.lang,
        bench.source.display(),
        all.len(),
        stock.len()
    );
    assert!(n >= 3, "too few sites found: {discovery:#?}");
    assert!(stock_inline > 0, "the stock build inlined nothing");
    assert!(stock_inline < n, "the stock build inlined every site");
    assert!(all.iter().all(|r| r.inlined));

    let mut rng = XorShift(0x5eed_1234_abcd_0042);
    for round in 0..3 {
        let set = DecisionSet(
            discovery
                .points
                .iter()
                .map(|p| (p.id.clone(), value(rng.next().is_multiple_of(2))))
                .collect(),
        );
        let (_, realised) = bench.replay(&set);
        let problems = verify(&set, &realised).mismatched;
        assert!(
            problems.is_empty(),
            "{:?} round {round}: replay not exact:\n{}",
            bench.lang,
            problems.join("\n")
        );
        // The parsed remarks give back the set's inline part.
        let inline_requested: std::collections::BTreeSet<&SiteId> = set
            .0
            .iter()
            .filter(|(_, v)| v.is_inline())
            .map(|(id, _)| id)
            .collect();
        for r in &realised {
            assert!(inline_requested.contains(&r.site), "{} inlined", r.site);
        }
    }
    discovery
}

/// Replaying the stock decisions gives the stock binary's code.
fn check_baseline_reproduces_stock(bench: &Bench, discovery: &Discovery) {
    let (replayed, realised) = bench.replay(&discovery.baseline);
    let problems = verify(&discovery.baseline, &realised).mismatched;
    assert!(
        problems.is_empty(),
        "baseline replay:\n{}",
        problems.join("\n")
    );
    let (stock, _) = bench.build(&stock_build_args(
        bench.lang.compiler(),
        &bench.incremental(),
    ));
    let (replayed_size, stock_size) = (text_size(&replayed).unwrap(), text_size(&stock).unwrap());
    eprintln!(
        "{:?} {}: .text {replayed_size} bytes replaying the baseline, {stock_size} stock",
        bench.lang,
        bench.source.display()
    );
    match bench.lang.compiler() {
        Compiler::Clang => {
            assert_eq!(replayed_size, stock_size);
            assert_eq!(
                text_bytes(&replayed),
                text_bytes(&stock),
                ".text differs from stock"
            );
            // Line tables do not change .text: the plain -O2 binary is the same.
            let (plain, _) = bench.build(&[]);
            assert_eq!(
                text_bytes(&replayed),
                text_bytes(&plain),
                ".text differs from plain -O2"
            );
        }
        Compiler::Rustc => {
            // Not byte-identical: rustc's `main` shim inlines `lang_start` at a
            // call without a line (no replay key, so NeverInline keeps the
            // call), and `drop_in_place` calls on cleanup paths share keys, so
            // replay inlines every call of a key that stock inlined only once.
            let diff = replayed_size.abs_diff(stock_size);
            assert!(diff * 100 <= stock_size, ".text differs by {diff} bytes");
        }
    }
}

#[test]
fn a_multi_file_program_built_with_plain_g_runs_under_callgrind() {
    // clang 14 writes DWARF 5 for `-g`, which Debian's valgrind 3.19 cannot
    // read in a program of several files: kiln's build flags ask for DWARF 4.
    if !Lang::C.available() {
        return;
    }
    if !have("valgrind") {
        return skip("valgrind is not installed");
    }
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("a.c"),
        "#include <stdio.h>\nint work(int n);\nstatic int sq(int x) { return x * x; }\n\
         int main(void) { int s = 0; for (int i = 0; i < 100; i++) s += sq(i) + work(i);\n\
         printf(\"%d\\n\", s); return 0; }\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("b.c"),
        "static int twice(int x) { return 2 * x; }\n\
         int work(int n) { int s = 0; for (int i = 0; i < n; i++) s += twice(i); return s; }\n",
    )
    .unwrap();
    let build = output_std(
        Command::new("clang")
            .args(["-O2", "-g", "a.c", "b.c", "-o", "bench"])
            .args(stock_build_args(Compiler::Clang, dir.path()))
            .current_dir(dir.path()),
    )
    .unwrap();
    assert!(build.status.success(), "{build:?}");
    let run = output_std(
        Command::new("valgrind")
            .args(["--tool=callgrind", "--callgrind-out-file=cg.out", "./bench"])
            .current_dir(dir.path()),
    )
    .unwrap();
    let said = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{said}");
    assert!(!said.contains("debuginfo reader"), "{said}");
}

#[test]
fn c_program_round_trips() {
    if !Lang::C.available() {
        return;
    }
    let bench = Bench::new(Lang::C, "main.c", C_PROGRAM);
    let discovery = check_discovery_and_round_trip(&bench);
    check_baseline_reproduces_stock(&bench, &discovery);
}

#[test]
fn cxx_program_round_trips() {
    if !Lang::Cxx.available() {
        return;
    }
    let bench = Bench::new(Lang::Cxx, "main.cpp", CXX_PROGRAM);
    let discovery = check_discovery_and_round_trip(&bench);
    assert!(
        discovery
            .points
            .iter()
            .any(|p| p.id.as_str().starts_with("_ZN4geom")),
        "mangled C++ names expected: {discovery:#?}"
    );
    check_baseline_reproduces_stock(&bench, &discovery);
}

#[test]
fn rust_program_round_trips() {
    if !Lang::Rust.available() {
        return;
    }
    let bench = Bench::new(Lang::Rust, "main.rs", RUST_PROGRAM);
    let discovery = check_discovery_and_round_trip(&bench);
    check_baseline_reproduces_stock(&bench, &discovery);
}

#[test]
fn a_site_that_does_not_exist_is_reported() {
    if !Lang::C.available() {
        return;
    }
    let bench = Bench::new(Lang::C, "main.c", C_PROGRAM);
    let (_, _, discovery) = bench.discover();
    let mut set = discovery.baseline.clone();
    let ghost = SiteId::from("mix @ main:99:7");
    set.0.insert(ghost.clone(), DecisionValue::inline());
    let (_, realised) = bench.replay(&set);
    let problems = verify(&set, &realised).mismatched;
    assert_eq!(problems.len(), 1, "{problems:#?}");
    assert!(problems[0].contains(ghost.as_str()) && problems[0].contains("not inlined"));
}

#[test]
fn fallback_always_inline_shows_up_in_verify() {
    if !Lang::C.available() {
        return;
    }
    // Sites missing from the file under AlwaysInline are inlined: verify
    // names them, so a decision set that forgot sites does not pass as exact.
    let bench = Bench::new(Lang::C, "main.c", C_PROGRAM);
    let (_, _, discovery) = bench.discover();
    let mut partial = discovery.baseline.clone();
    let dropped = partial.0.keys().next().unwrap().clone();
    let was_inline = partial.0.remove(&dropped).unwrap().is_inline();
    let file = bench.fresh("replay");
    std::fs::write(&file, replay_file_text(&partial)).unwrap();
    let args = replay_build_args(
        Compiler::Clang,
        &file,
        ReplayFallback::AlwaysInline,
        &bench.incremental(),
    );
    let realised = parse_remarks(&bench.build(&args).1);
    let problems = verify(&partial, &realised).mismatched;
    assert_eq!(
        problems.len(),
        1,
        "{problems:#?} (dropped {dropped}, stock inline: {was_inline})"
    );
    assert!(problems[0].contains(dropped.as_str()));
}

#[test]
fn bundled_benchmarks_round_trip() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../bench-programs");
    let candidates = [
        ("sample-dsp/main.c", Lang::C),
        ("tiny-interp/main.c", Lang::C),
        ("graph-walk/main.c", Lang::C),
        ("rust-sort/main.rs", Lang::Rust),
    ];
    for (path, lang) in candidates {
        let path = root.join(path);
        if !path.exists() {
            skip(format!("{} does not exist", path.display()));
            continue;
        }
        if !lang.available() {
            continue;
        }
        let bench = Bench::from_file(lang, &path);
        let discovery = check_discovery_and_round_trip(&bench);
        check_baseline_reproduces_stock(&bench, &discovery);
    }
}

// ---------------------------------------------------------------------------
// Helpers

fn value(inline: bool) -> DecisionValue {
    if inline {
        DecisionValue::inline()
    } else {
        DecisionValue::no_inline()
    }
}

fn decisions(pairs: &[(&str, bool)]) -> DecisionSet {
    DecisionSet(
        pairs
            .iter()
            .map(|(id, i)| (SiteId::from(*id), value(*i)))
            .collect(),
    )
}

/// Inlined-site remarks for ids `"CALLEE @ CHAIN"`.
fn remarks(ids: &[&str]) -> Vec<InlineRemark> {
    ids.iter()
        .map(|id| {
            let (callee, callsite) = id.split_once(" @ ").unwrap();
            let outer = callsite.rsplit(" @ ").next().unwrap();
            InlineRemark {
                site: SiteId::from(*id),
                callee: callee.into(),
                caller: outer.split(':').next().unwrap().into(),
                callsite: callsite.into(),
                inlined: true,
                cost: None,
                line: None,
            }
        })
        .collect()
}

fn text_bytes(binary: &Path) -> Vec<u8> {
    use object::{Object, ObjectSection};
    let data = std::fs::read(binary).unwrap();
    let file = object::File::parse(&*data).unwrap();
    let text = file.section_by_name(".text").unwrap();
    text.data().unwrap().to_vec()
}

/// A small fixed-seed generator, enough for random decision sets.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}
