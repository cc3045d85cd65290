;; The policy example's campaign: annealing over the inlining decisions of the
;; bundled C benchmarks with callgrind's exact instruction count, so that the
;; dataset's time ratios carry no noise. This one adds bzip2 (Debian's source,
;; fetched and linked by scripts/real-programs) as the program left out:
;; `policy/run policy/bzip2.sexp bzip2` (results/policy.md).
(campaign
  (name policy-bzip2)
  (store "../target/policy-bzip2/store")
  (objective (metric instructions) (statistic median))
  (runs (warmup 0) (min 1) (max 1))
  (experiments
    ((benchmark sample-dsp)
     (search (simulated-annealing (steps 150) (t-max 0.002) (t-min 0.00005) (flips 2)))
     (chains 2) (seed 1) (parallel 2))
    ((benchmark tiny-interp)
     (search (simulated-annealing (steps 150) (t-max 0.002) (t-min 0.00005) (flips 2)))
     (chains 2) (seed 2) (parallel 2))
    ((benchmark graph-walk)
     (search (simulated-annealing (steps 150) (t-max 0.002) (t-min 0.00005) (flips 2)))
     (chains 2) (seed 3) (parallel 2))
    ((benchmark bzip2)
     (search (simulated-annealing (steps 100) (t-max 0.002) (t-min 0.00005) (flips 2)))
     (chains 1) (seed 4) (parallel 2)))
  (benchmarks
    ((name sample-dsp) (kind llvm-inline) (sources "../bench-programs/sample-dsp")
     (build ("clang" "-O2" "main.c" "-o" "bench")) (run ("./bench" "80")) (timeout-s 60))
    ((name tiny-interp) (kind llvm-inline) (sources "../bench-programs/tiny-interp")
     (build ("clang" "-O2" "main.c" "-o" "bench")) (run ("./bench" "1")) (timeout-s 60))
    ((name graph-walk) (kind llvm-inline) (sources "../bench-programs/graph-walk")
     (build ("clang" "-O2" "main.c" "-o" "bench")) (run ("./bench" "1")) (timeout-s 60))
    ((name bzip2) (kind llvm-inline) (compiler clang) (sources "../target/real-programs/src/bzip2")
     (build ("make" "CC=clang" "bzip2"))
     (run ("./bzip2" "-9" "-c" "sample1.ref"))
     (env ("LD_LIBRARY_PATH" "."))
     (timeout-s 60) (build-timeout-s 300)))
  (workers
    (local (slots 2))))
