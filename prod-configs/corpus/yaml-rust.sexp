; yaml-rust 0.4.5 from crates.io, a pure Rust YAML parser, built by
; `cargo build --release --example dump_yaml`: its example prints the parsed
; document of twitter.json (631 kB of JSON, which is YAML; from Debian's
; `simdjson` source package).
; corpus: language Rust; domain parsing (YAML); build cargo; package crates.io yaml-rust 0.4.5; licence MIT OR Apache-2.0
((name yaml-rust) (kind llvm-inline) (compiler rustc) (sources "../../target/corpus/src/yaml-rust")
 (build ("cargo" "build" "--release" "--example" "dump_yaml"))
 (run ("./target/release/examples/dump_yaml" "twitter.json"))
 (timeout-s 120) (build-timeout-s 900) (discovery-cpu-s 20))
