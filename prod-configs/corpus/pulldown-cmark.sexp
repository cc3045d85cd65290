; pulldown-cmark 0.13.6 from crates.io, a CommonMark parser built by an
; unchanged `cargo build --release` (its `pulldown-cmark` binary): renders the
; CommonMark spec (spec.txt, from Debian's `cmark` source package, copied at
; fetch time) to HTML; given three files the binary renders the first, the
; first two, then all three (six copies in all).
; corpus: language Rust; domain parsing (Markdown); build cargo; package crates.io pulldown-cmark 0.13.6; licence MIT
((name pulldown-cmark) (kind llvm-inline) (compiler rustc) (sources "../../target/corpus/src/pulldown-cmark")
 (build ("cargo" "build" "--release"))
 (run ("./target/release/pulldown-cmark" "spec.txt" "spec.txt" "spec.txt"))
 (timeout-s 120) (build-timeout-s 900) (discovery-cpu-s 20))
