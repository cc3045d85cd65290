; bzip2 1.0.8 from Debian's source package (fetched by scripts/fetch-real-programs,
; linked by scripts/real-programs): a multi-file C library and program built with
; its own Makefile and plain -g.
; Debian's Makefile links bzip2 to libbz2.so: LD_LIBRARY_PATH=. makes the runs
; use the one this build made, not the system's.
(campaign
  (name bzip2)
  (store "../../target/real-programs/bzip2")
  (objective (metric instructions) (statistic median))
  (runs (warmup 0) (min 1) (max 1))
  (experiments
    ((benchmark bzip2)
     (search (simulated-annealing (steps 30) (t-max 0.002) (t-min 0.00005) (flips 2)))
     (seed 1) (parallel 2)))
  (benchmarks
    ((name bzip2) (kind llvm-inline) (compiler clang) (sources "../../target/real-programs/src/bzip2")
     (build ("make" "CC=clang" "bzip2"))
     (run ("./bzip2" "-9" "-c" "sample1.ref"))
     (env ("LD_LIBRARY_PATH" "."))
     (timeout-s 60) (build-timeout-s 300)))
  (workers (local (slots 2))))
