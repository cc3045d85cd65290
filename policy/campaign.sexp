;; The policy example's campaign: annealing over the inlining decisions of the
;; bundled C benchmarks with callgrind's exact instruction count, so that the
;; dataset's time ratios carry no noise. `policy/run` trains on every
;; benchmark but the one it leaves out (graph-walk in docs/policies.md's example).
(campaign
  (name policy)
  (store "../target/policy/store")
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
     (chains 2) (seed 3) (parallel 2)))
  (benchmarks
    ((name sample-dsp) (kind llvm-inline) (sources "../bench-programs/sample-dsp")
     (build ("clang" "-O2" "main.c" "-o" "bench")) (run ("./bench" "80")) (timeout-s 60))
    ((name tiny-interp) (kind llvm-inline) (sources "../bench-programs/tiny-interp")
     (build ("clang" "-O2" "main.c" "-o" "bench")) (run ("./bench" "1")) (timeout-s 60))
    ((name graph-walk) (kind llvm-inline) (sources "../bench-programs/graph-walk")
     (build ("clang" "-O2" "main.c" "-o" "bench")) (run ("./bench" "1")) (timeout-s 60)))
  (workers
    (local (slots 2))))
