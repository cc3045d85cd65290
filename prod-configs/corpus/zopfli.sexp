; zopfli 1.0.3, Debian source package `zopfli` (1.0.3-1), built by its
; Makefile: gzip-compresses one of its own sources (squeeze.c, 19 kB) with 5
; iterations to stdout (~150 M instructions).
; corpus: language C; domain compression; build make; package Debian zopfli 1.0.3-1; licence Apache-2.0
((name zopfli) (kind llvm-inline) (compiler clang) (sources "../../target/corpus/src/zopfli")
 (build ("make" "-j2" "CC=clang" "zopfli"))
 (run ("./zopfli" "--i5" "-c" "src/zopfli/squeeze.c"))
 (timeout-s 120) (build-timeout-s 300) (discovery-cpu-s 20))
