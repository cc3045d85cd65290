; zlib 1.2.13, Debian source package `zlib` (1:1.2.13.dfsg-1), built by its own
; configure script (static) and Makefile: its example program minigzip
; compresses zstd's library sources (input.txt, 3 MB, copied at fetch time)
; at level 6 to stdout (~370 M instructions).
; corpus: language C; domain compression; build configure+make; package Debian zlib 1:1.2.13.dfsg-1; licence Zlib
((name zlib) (kind llvm-inline) (compiler clang) (sources "../../target/corpus/src/zlib")
 (build ("sh" "-c" "CC=clang ./configure --static && make -j2 minigzip"))
 (run ("./minigzip" "-6" "-c" "input.txt"))
 (timeout-s 120) (build-timeout-s 600) (discovery-cpu-s 20))
