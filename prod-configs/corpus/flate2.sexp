; flate2 1.1.11 from crates.io, DEFLATE streams over the pure Rust miniz_oxide
; backend (its default), built by `cargo build --release --example
; compress_file`: gzip-compresses lz4's C sources (input.txt, 610 kB, from
; Debian's `lz4`, copied at fetch time) into out.gz, whose digest is checked
; (~110 M instructions).
; miniz_oxide, where the compressor lives, is opted in.
; corpus: language Rust; domain compression; build cargo; package crates.io flate2 1.1.11; licence MIT OR Apache-2.0
((name flate2) (kind llvm-inline) (compiler rustc) (sources "../../target/corpus/src/flate2")
 (build ("cargo" "build" "--release" "--example" "compress_file"))
 (run ("./target/release/examples/compress_file" "input.txt" "out.gz"))
 (dependency-crates ("miniz_oxide"))
 (check-output (command ("sha256sum" "out.gz")))
 (timeout-s 120) (build-timeout-s 900) (discovery-cpu-s 20))
