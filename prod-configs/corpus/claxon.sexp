; claxon 0.4.3 from crates.io, a pure Rust FLAC decoder, built by
; `cargo build --release --example decode`: decodes ten seconds of 44.1 kHz
; stereo FLAC made by sox at fetch time (input.flac) into input.wav, whose
; digest is checked.
; corpus: language Rust; domain audio codec; build cargo; package crates.io claxon 0.4.3; licence Apache-2.0
((name claxon) (kind llvm-inline) (compiler rustc) (sources "../../target/corpus/src/claxon")
 (build ("cargo" "build" "--release" "--example" "decode"))
 (run ("./target/release/examples/decode" "input.flac"))
 (check-output (command ("sha256sum" "input.wav")))
 (timeout-s 120) (build-timeout-s 900) (discovery-cpu-s 20))
