; libdeflate 1.14, Debian source package `libdeflate` (1.14-1), built by its
; Makefile: its gzip program (linked with the static library) compresses
; zstd's library sources (input.txt, 3 MB, copied at fetch time) at level 6
; to stdout (~190 M instructions).
; corpus: language C; domain compression; build make; package Debian libdeflate 1.14-1; licence MIT
((name libdeflate) (kind llvm-inline) (compiler clang) (sources "../../target/corpus/src/libdeflate")
 (build ("make" "-j2" "CC=clang" "gzip"))
 (run ("./gzip" "-6" "-c" "input.txt"))
 (timeout-s 120) (build-timeout-s 600) (discovery-cpu-s 20))
