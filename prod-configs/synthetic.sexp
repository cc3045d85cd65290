;; Search sanity check: ten binary knobs whose cost (callgrind instructions)
;; is a known function with a unique optimum (see bench-programs/synthetic/README.md).
(campaign
  (name synthetic)
  (store "../results/synthetic")
  (objective (metric instructions) (statistic median))
  (runs (warmup 0) (min 1) (max 1))
  (experiments
    ((benchmark synthetic)
     (search (simulated-annealing (steps 120) (t-max 0.3) (t-min 0.005)))
     (chains 1)
     (seed 1)
     (parallel 2)))
  (benchmarks
    ((name synthetic)
     (kind knobs)
     (knobs (x0 0 1) (x1 0 1) (x2 0 1) (x3 0 1) (x4 0 1)
            (x5 0 1) (x6 0 1) (x7 0 1) (x8 0 1) (x9 0 1))
     (sources "../bench-programs/synthetic")
     (build ("cc" "-O1" "main.c" "-o" "bench"))
     (run ("./bench" "{x0}" "{x1}" "{x2}" "{x3}" "{x4}" "{x5}" "{x6}" "{x7}" "{x8}" "{x9}" "2000"))
     (check-output none)
     (timeout-s 30)))
  (workers
    (local (slots 2))))
