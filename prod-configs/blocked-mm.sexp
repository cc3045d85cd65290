;; A CPU knob campaign: block size and loop order of a blocked matrix
;; multiply, searched by simulated annealing on wall time. The knob values
;; reach the build through {block} and {order} substitutions.
(campaign
  (name blocked-mm)
  (store "../results/blocked-mm")
  (objective (metric wall-time) (statistic median))
  (runs (warmup 1) (min 5) (max 20) (target-rel-ci 0.02) (max-time-s 20))
  (experiments
    ((benchmark blocked-mm)
     (search (simulated-annealing (steps 40) (t-max 0.05) (t-min 0.002)))
     (chains 2)
     (seed 7)))
  (benchmarks
    ((name blocked-mm)
     (kind knobs)
     (knobs
       (block 32 8 16 64 128)
       (order IJK IKJ JKI))
     (sources "../bench-programs/blocked-mm")
     (build ("clang" "-O2" "-DBLOCK={block}" "-DORDER_{order}" "main.c" "-o" "bench"))
     (run ("./bench" "512"))
     (timeout-s 20)))
  (workers
    (local (slots 1))))
