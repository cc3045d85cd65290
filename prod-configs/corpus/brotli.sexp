; brotli 9.1.1 from crates.io, Dropbox's rust-brotli, built by an unchanged
; `cargo build --release` (its own profile: fat LTO): its `brotli` binary
; compresses one of the crate's own sources at quality 9 to stdout
; (~50 M instructions).
; corpus: language Rust; domain compression; build cargo; package crates.io brotli 9.1.1; licence BSD-3-Clause AND MIT
((name brotli) (kind llvm-inline) (compiler rustc) (sources "../../target/corpus/src/brotli")
 (build ("cargo" "build" "--release"))
 (run ("./target/release/brotli" "-c" "-q9" "src/enc/encode.rs"))
 (timeout-s 120) (build-timeout-s 900) (discovery-cpu-s 20))
