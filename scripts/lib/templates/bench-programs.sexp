(campaign
  (name fe)
  (store "store")
  (objective (metric wall-time) (statistic median))
  (runs (warmup 0) (min 1) (max 1))
  (experiments ((benchmark @PROGRAM@) (search (random-walk (steps @STEPS@) (flips 1))) (seed 7) (parallel @SLOTS@)))
  (benchmarks
    ((name @PROGRAM@) (kind llvm-inline) (compiler @COMPILER@) (sources "src")
     (build @BUILD@) (run @RUN@) @ENV@ (check-output none) (timeout-s 600) (build-timeout-s 1800)))
  (workers (local (slots @SLOTS@))))
