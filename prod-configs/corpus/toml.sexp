; toml 0.5.11 from crates.io, a TOML parser, built by
; `cargo build --release --example toml2json`: converts the [[package]]
; tables of the corpus crates' Cargo.lock files (input.toml, put together at
; fetch time, three times over: 160 kB) to JSON.
; corpus: language Rust; domain parsing (TOML); build cargo; package crates.io toml 0.5.11; licence MIT OR Apache-2.0
((name toml) (kind llvm-inline) (compiler rustc) (sources "../../target/corpus/src/toml")
 (build ("cargo" "build" "--release" "--example" "toml2json"))
 (run ("./target/release/examples/toml2json" "input.toml"))
 (timeout-s 120) (build-timeout-s 900) (discovery-cpu-s 20))
