; zstd 0.14.4 from crates.io, Rust bindings to the zstd C library that
; zstd-sys vendors and builds with cc, built by
; `cargo build --release --example zstd`: its example compresses zstd's C
; library sources (input.txt, 3 MB, copied at fetch time) at level 1 into input.txt.zst,
; five times over; the digest of the result is checked. Rust with C: kiln's
; decisions reach the crates' Rust code, zstd-sys opted in.
; corpus: language Rust (with C); domain compression; build cargo; package crates.io zstd 0.14.4; licence BSD-3-Clause
((name zstd-rs) (kind llvm-inline) (compiler rustc) (sources "../../target/corpus/src/zstd-rs")
 (build ("cargo" "build" "--release" "--example" "zstd"))
 (run ("./target/release/examples/zstd" "input.txt" "input.txt" "input.txt" "input.txt" "input.txt"))
 (dependency-crates ("zstd-sys" "zstd-safe"))
 (check-output (command ("sha256sum" "input.txt.zst")))
 (timeout-s 120) (build-timeout-s 900) (discovery-cpu-s 20))
