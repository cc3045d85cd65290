; zstd 1.5.4, Debian source package `zstd` (1.5.4+dfsg2-5), built by its
; Makefile (`zstd-release`): compresses its own library sources (input.txt,
; 3 MB, made at fetch time) at level 5 to stdout (~180 M instructions).
; corpus: language C; domain compression; build make; package Debian libzstd 1.5.4+dfsg2-5; licence BSD-3-Clause OR GPL-2.0-only
((name zstd) (kind llvm-inline) (compiler clang) (sources "../../target/corpus/src/zstd")
 (build ("make" "-j2" "CC=clang" "zstd-release"))
 (run ("./programs/zstd" "-5" "-c" "input.txt"))
 (timeout-s 120) (build-timeout-s 900) (discovery-cpu-s 20))
