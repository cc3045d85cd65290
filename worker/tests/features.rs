//! Site features from a real discovery (clang, rustc, callgrind): every
//! feature varies across the sites of each bundled llvm-inline benchmark, and
//! the features of a hand-checked site are the compiler's own figures.
//!
//! Tests that need a compiler are reported skipped where it is missing.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use kiln_protocol::bundle::{Bundle, BundleFile};
use kiln_protocol::config::benchmark::{
    BenchmarkKind, BenchmarkSpec, Compiler, OutputCheck, ReplayFallback,
};
use kiln_protocol::decision::SiteId;
use kiln_protocol::message::{Discovery, StepId};
use kiln_worker::launch::CancelToken;
use kiln_worker::step::discover;

use crate::common::{have, skip};

/// Discovers a bundled benchmark (`bench-programs/NAME`), built by `build` and
/// profiled with `run`.
fn discover_bundled(name: &str, compiler: Compiler, build: &[&str], run: &[&str]) -> Discovery {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../bench-programs")
        .join(name);
    let files = std::fs::read_dir(&root)
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "c" || x == "rs"))
        .map(|e| BundleFile {
            path: e.file_name().to_string_lossy().into_owned(),
            executable: false,
            contents: std::fs::read(e.path()).unwrap(),
            modified_ns: None,
        })
        .collect();
    let bundle = Bundle::new(files);
    let dir = tempfile::tempdir().unwrap();
    let ws = crate::common::workspace(dir.path());
    ws.cache.store(&bundle).unwrap();
    let spec = BenchmarkSpec {
        name: name.into(),
        kind: BenchmarkKind::LlvmInline {
            compiler,
            fallback: ReplayFallback::NeverInline,
        },
        sources: PathBuf::from("unused"),
        build: build.iter().map(|s| s.to_string()).collect(),
        run: run.iter().map(|s| s.to_string()).collect(),
        timeout_s: 30.0,
        build_timeout_s: 600.0,
        discovery_cpu_s: 300.0,
        build_memory_bytes: 8 << 30,
        env: Vec::new(),
        pass_env: Vec::new(),
        dependency_crates: Vec::new(),
        check_output: OutputCheck::None,
        limits: Default::default(),
        container: None,
    };
    let cancel = CancelToken::new().unwrap();
    discover(StepId(1), &spec, &bundle.hash, &ws, &cancel, &|_| {}).unwrap()
}

/// The names of the feature columns that take one value (null included)
/// across all sites.
fn constant_columns(discovery: &Discovery) -> Vec<String> {
    let rows: Vec<serde_json::Map<String, serde_json::Value>> = discovery
        .points
        .iter()
        .map(|p| {
            let f = discovery
                .features
                .get(&p.id)
                .expect("every site has features");
            match serde_json::to_value(f).unwrap() {
                serde_json::Value::Object(m) => m,
                other => panic!("features are an object: {other}"),
            }
        })
        .collect();
    let names: BTreeSet<&String> = rows.iter().flat_map(|r| r.keys()).collect();
    names
        .into_iter()
        .filter(|name| {
            let values: BTreeSet<String> = rows
                .iter()
                .map(|r| r.get(*name).unwrap_or(&serde_json::Value::Null).to_string())
                .collect();
            values.len() < 2
        })
        .map(|n| n.to_string())
        .collect()
}

/// Discovers a bundled C benchmark and checks that no feature column is
/// constant but those named in `constant` (each with its reason there).
fn check_clang_benchmark(name: &str, run: &[&str], constant: &[&str]) -> Discovery {
    let discovery = discover_bundled(
        name,
        Compiler::Clang,
        &["clang", "-O2", "main.c", "-o", "bench"],
        run,
    );
    assert!(discovery.points.len() > 10, "{name}: {discovery:#?}");
    eprintln!(
        "{name}: {}",
        serde_json::to_string_pretty(&discovery.features).unwrap()
    );
    assert_eq!(
        constant_columns(&discovery),
        constant,
        "{name}: feature columns constant across all sites"
    );
    for (id, f) in &discovery.features {
        assert!(f.chain_length.is_some(), "{id}");
        // Every site's call is in the front end's IR: it has a caller and a callee.
        assert!(f.caller_instructions.unwrap_or(0) > 0, "{id}: {f:?}");
        assert!(f.callee_blocks.unwrap_or(0) > 0, "{id}: {f:?}");
        assert!(f.callee_call_sites.unwrap_or(0) > 0, "{id}: {f:?}");
    }
    discovery
}

#[test]
fn clang_benchmarks_have_varying_features() {
    if !have("clang") || !have("valgrind") {
        return skip("clang or valgrind is not installed");
    }
    // Neither has a recursive function, nor a nested site: the all-inlined
    // build inlines callees first, so its sites are all flat, and stock clang
    // inlines no function that holds a call it keeps (which would make one).
    // Every callee is static.
    let constant = ["callee-external", "callee-recursive", "chain-length"];
    check_clang_benchmark("sample-dsp", &["./bench", "80"], &constant);
    check_clang_benchmark("tiny-interp", &["./bench", "1"], &constant);
}

/// graph-walk's `heap_push` call in `dijkstra` (main.c line 166, column 17,
/// `dijkstra` starting at line 152), which stock clang 14 -O2 keeps as a
/// call. Its remark, checked by hand:
/// `main.c:166:17: remark: 'heap_push' not inlined into 'dijkstra' because
/// too costly to inline (cost=260, threshold=225) [-Rpass-missed=inline]`.
/// The call sits in two loops (`while (h->len)` and `for` over the edges);
/// `heap_push` is a 30-line function called from three places.
#[test]
fn graph_walk_features_match_the_compilers_remarks() {
    if !have("clang") || !have("valgrind") {
        return skip("clang or valgrind is not installed");
    }
    // graph-walk has no recursive function, and every callee is static.
    let discovery = check_clang_benchmark(
        "graph-walk",
        &["./bench", "1"],
        &["callee-external", "callee-recursive"],
    );
    let site = SiteId::from("heap_push @ dijkstra:14:17");
    let f = &discovery.features[&site];
    eprintln!("{site}: {f:#?}");
    assert_eq!(f.chain_length, Some(1));
    assert_eq!((f.inline_cost, f.inline_threshold), (Some(260), Some(225)));
    assert_eq!(f.loop_depth, Some(2));
    assert_eq!(f.callee_call_sites, Some(3));
    assert_eq!(f.callee_recursive, Some(false));
    assert_eq!(f.callee_external, Some(false));
    assert_eq!(f.constant_arguments, Some(0));
    // The first push, `heap_push(h, 0, src)` at line 157, outside the loops.
    let first = &discovery.features[&SiteId::from("heap_push @ dijkstra:5:5")];
    assert_eq!(
        (first.loop_depth, first.constant_arguments),
        (Some(0), Some(1))
    );
    assert_eq!(first.inline_cost, Some(260));
    let callee = f.callee_instructions.unwrap();
    let caller = f.caller_instructions.unwrap();
    assert!(
        (50..400).contains(&callee),
        "heap_push: {callee} IR instructions"
    );
    assert!(
        caller > callee,
        "dijkstra is the larger: {caller} vs {callee}"
    );
    // A call kept in the stock build ran: callgrind counted it.
    assert!(f.site_calls.unwrap() > 0, "{f:?}");
    // With nothing inlined every call is a call. This one ran as often as in the stock build;
    // a call written in its caller ran at least as often as stock called it (top_k_far's own
    // `heap_push` call never runs as a call: stock inlined it into the copy of top_k_far it
    // inlined into main); and the calls stock inlined have a count of their own.
    assert_eq!(f.uninlined_calls, f.site_calls);
    for (id, f) in &discovery.features {
        if let (Some(stock), Some(1)) = (f.site_calls, f.chain_length) {
            assert!(f.uninlined_calls.unwrap() >= stock, "{id}: {f:?}");
        }
    }
    let inlined_and_run = discovery
        .features
        .values()
        .filter(|f| f.site_calls.is_none() && f.uninlined_calls.unwrap() > 0);
    assert!(inlined_and_run.count() > 3, "{:#?}", discovery.features);
    assert!(f.callee_self_cost.unwrap() > 0);
    assert!(f.caller_inclusive_cost.unwrap() > f.caller_self_cost.unwrap());
    // The optimised code (objdump of the stock build): heap_push keeps a copy of its own,
    // called from dijkstra's loops.
    assert_eq!(f.callee_code_kept, Some(true));
    assert!(f.callee_code_instructions.unwrap() > 0, "{f:?}");
    assert!(f.caller_code_calls.unwrap() >= 1, "{f:?}");
    assert!(f.caller_code_loops.unwrap() >= 2, "{f:?}");
    // With everything inlined dijkstra is inlined into main, which grows.
    assert_eq!(f.caller_inlined_code_instructions, None);
    let in_main = discovery
        .features
        .iter()
        .find(|(id, _)| id.as_str().contains(" @ main:"))
        .map(|(_, f)| f)
        .expect("a call in main");
    let (stock, inlined) = (
        in_main.caller_code_instructions,
        in_main.caller_inlined_code_instructions,
    );
    assert!(
        inlined.unwrap() > stock.unwrap(),
        "main: {stock:?} then {inlined:?}"
    );
}

#[test]
fn rustc_benchmark_has_costs_and_profile_features() {
    if !have("rustc") || !have("valgrind") {
        return skip("rustc or valgrind is not installed");
    }
    let discovery = discover_bundled(
        "rust-sort",
        Compiler::Rustc,
        &["rustc", "-O", "main.rs", "-o", "bench"],
        &["./bench", "1"],
    );
    eprintln!(
        "rust-sort: {}",
        serde_json::to_string_pretty(&discovery.features).unwrap()
    );
    assert_eq!(discovery.features.len(), discovery.points.len());
    // A one-crate program's functions, std's generic ones instantiated in it included, are
    // all internal to its one unit.
    assert_eq!(
        constant_columns(&discovery),
        vec!["callee-external".to_string()],
        "rust-sort"
    );
    let costed = discovery
        .features
        .values()
        .filter(|f| f.inline_cost.is_some());
    assert!(
        costed.count() * 2 > discovery.points.len(),
        "most sites have a cost"
    );
    // `merge_sort` (main.rs:202, generic: one copy per element type) calls
    // itself at lines 212 and 213, outside any loop, with no constant argument.
    let recursive: Vec<_> = discovery
        .features
        .iter()
        .filter(|(id, _)| {
            let (callee, site) = id.as_str().split_once(" @ ").unwrap();
            callee.starts_with("_ZN4main10merge_sort") && site.starts_with(callee)
        })
        .collect();
    assert_eq!(recursive.len(), 4, "{:#?}", discovery.features.keys());
    for (id, f) in recursive {
        assert!(
            id.as_str().ends_with(":10:9") || id.as_str().ends_with(":11:9"),
            "{id}"
        );
        assert_eq!(f.callee_recursive, Some(true), "{id}");
        assert_eq!(
            f.callee_call_sites,
            Some(3),
            "{id}: two in itself, one in sort_by"
        );
        assert_eq!(
            (f.loop_depth, f.constant_arguments),
            (Some(0), Some(0)),
            "{id}"
        );
        assert_eq!(f.caller_instructions, f.callee_instructions, "{id}");
        // A self-call stock kept: with nothing inlined it ran as often (63 and 1,023 times).
        assert!(f.site_calls.unwrap() > 0, "{id}: {f:?}");
        assert_eq!(f.uninlined_calls, f.site_calls, "{id}");
    }
}
