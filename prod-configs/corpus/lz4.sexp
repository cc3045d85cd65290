; lz4 1.9.4, Debian source package `lz4` (1.9.4-1), built by its Makefile:
; compresses its own library and program sources (input.txt, 610 kB, made at
; fetch time) at -9 (the HC compressor) to stdout (~150 M instructions).
; corpus: language C; domain compression; build make; package Debian lz4 1.9.4-1; licence BSD-2-Clause AND GPL-2.0-or-later (the lz4 program)
((name lz4) (kind llvm-inline) (compiler clang) (sources "../../target/corpus/src/lz4")
 (build ("make" "-j2" "CC=clang" "lz4"))
 (run ("./lz4" "-9" "-c" "input.txt"))
 (timeout-s 120) (build-timeout-s 300) (discovery-cpu-s 20))
