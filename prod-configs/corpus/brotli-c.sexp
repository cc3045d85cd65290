; Brotli 1.0.9 (the C library and its `brotli` tool), Debian source package
; `brotli` (1.0.9-2), built by its Makefile: compresses zstd's library sources
; (input.txt, 3 MB, copied at fetch time) at quality 5 to stdout
; (~380 M instructions).
; corpus: language C; domain compression; build make; package Debian brotli 1.0.9-2; licence MIT
((name brotli-c) (kind llvm-inline) (compiler clang) (sources "../../target/corpus/src/brotli-c")
 (build ("make" "-j2" "CC=clang"))
 (run ("./bin/brotli" "-q" "5" "-c" "input.txt"))
 (timeout-s 120) (build-timeout-s 600) (discovery-cpu-s 20))
