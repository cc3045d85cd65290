;; A first campaign: simulated annealing over the inlining decisions of the
;; bundled DSP benchmark, callgrind's instruction count as the objective, on
;; this machine. Paths are relative to this file's folder.
(campaign
  (name first)
  (store "../results/first")
  (objective (metric instructions) (statistic median))
  (experiments
    ((benchmark sample-dsp) (chains 1) (seed 42)
     (search (simulated-annealing (steps 100) (t-max 0.002) (t-min 0.00005) (flips 1)))))
  (benchmarks
    ((name sample-dsp) (kind llvm-inline) (sources "../bench-programs/sample-dsp")
     (build ("clang" "-O2" "main.c" "-o" "bench")) (run ("./bench" "80"))))
  (workers (local (slots 2))))
