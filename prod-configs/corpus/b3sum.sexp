; b3sum 1.8.7 from crates.io, the BLAKE3 command line hasher, built by
; `cargo build --release --features pure` (the blake3 crate's portable Rust
; code instead of its C and assembly, so the hot code is Rust; blake3 opted
; in): hashes 16 MB of seq's output (input.txt) four times, on one thread.
; corpus: language Rust; domain hashing; build cargo; package crates.io b3sum 1.8.7; licence CC0-1.0 OR Apache-2.0 OR Apache-2.0 WITH LLVM-exception
((name b3sum) (kind llvm-inline) (compiler rustc) (sources "../../target/corpus/src/b3sum")
 (build ("cargo" "build" "--release" "--features" "pure"))
 (run ("./target/release/b3sum" "--no-mmap" "--num-threads" "1" "input.txt" "input.txt" "input.txt" "input.txt"))
 (dependency-crates ("blake3"))
 (timeout-s 120) (build-timeout-s 900) (discovery-cpu-s 20))
