;; The quick start: simulated annealing over the inlining decisions of the
;; bundled DSP benchmark, on the local worker, with callgrind's exact
;; instruction count as the objective (noise-free, so 100 steps suffice).
(campaign
  (name quickstart)
  (store "../results/quickstart")
  (objective (metric instructions) (statistic median))
  ;; Instruction counts repeat exactly: one measured run per candidate.
  (runs (warmup 0) (min 1) (max 1))
  (experiments
    ((benchmark sample-dsp)
     (search (simulated-annealing (steps 100) (t-max 0.002) (t-min 0.00005) (flips 1)))
     (chains 1)
     (seed 42)
     (parallel 2)))
  (benchmarks
    ((name sample-dsp)
     (kind llvm-inline)
     (sources "../bench-programs/sample-dsp")
     (build ("clang" "-O2" "main.c" "-o" "bench"))
     (run ("./bench" "80"))
     (timeout-s 30)))
  (workers
    (local (slots 2))))
